"""How fast a run trains on its device: the "Device, precision and compile"
menu (Kconfig here; its settings are the Speed section, run.speed).

precision.py: the device and the autocast dtype; compile.py: torch.compile's
options, the compile state and the fallback to eager; apply.py: the speed
options checked against the device and applied to a model (attention kernel,
TF32, cuDNN's autotuner, the head loss) with float8.py, cpu_linear.py,
allocator.py and warmup.py; quiet.py: torchao's expected import-time noise.
What the device is (its name, memory, peak FLOP/s) is lib/hardware's.
Torch-free here: lib/__init__.py imports quiet.py on every import of lib.
"""
