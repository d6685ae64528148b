"""The device: what it is and can do (devices.py: name, memory, peak FLOP/s of
known GPUs), and the device, precision and compile a run uses (precision.py).
Options: the "Device, precision and compile" menu (Kconfig here).
"""
