"""The embedded default's figures in the docs (scripts/default_record.py): record.py
keeps its run (time, loss, sample) and the studies that chose its settings as JSON
under docs/bench-data/default; docs.py renders them into the README's and the
docs' default-run blocks. Figures in the docs are never typed by hand."""
