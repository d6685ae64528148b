"""Measurements of the real thing: `make bench` (training step, step.py),
`make bench-optim` (optimizers.py), `make bench-seqlen` (seqlen.py), the
inference figures at the end of a run and `make bench-inference` (inference.py),
the memory estimate against the measured peak (memory.py) and `make gpu-check`
(gpucheck/). It sits above lib/train because it runs the training stack.
"""
