"""`make test-matrix` and `make sweep`: a grid or sweep of configurations
expanded from the "Test matrix" menu (Kconfig here) or a sweep file, planned,
run locally or under Slurm, and recorded in matrix.json for `make results`.
"""
