"""The tuning stage of a matrix or sweep: an Optuna study per configuration,
trials as short runs, then the final runs at the best values (MATRIX_TUNE)."""
