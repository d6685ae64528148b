"""`make results` and `make compare`: tables and plots from run folders."""
