"""What the device is and can do: devices.py (the GPUs known by the names their
drivers report, with memory and peak FLOP/s; the CPU's figures). It holds no
options: the device a run uses, its precision and compile are lib/speed's
("Device, precision and compile" menu).
"""
