"""Several processes: torchrun launch, the process group, DDP/FSDP wrapping and
rank-0 duties (runtime.py). Options: the "Several GPUs and machines" menu
(Kconfig here).
"""
