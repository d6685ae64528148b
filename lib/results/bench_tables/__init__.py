"""`make bench` records and other recorded figures as tables in docs/*.md
(scripts/bench_table.py): cells.py, how a record's figures and settings read in a
cell; folders.py, a folder's step records as one table in docs/benchmarks.md;
records.py, a block that names records by a pattern, rendered by their kind."""
