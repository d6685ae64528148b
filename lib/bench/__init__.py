"""Benchmarks behind `make bench` (training step) and `make bench-optim` (optimizers)."""
