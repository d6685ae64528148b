"""Watching a run: experiment trackers (TensorBoard, W&B), the progress line and
the GPU monitor (monitor/). Options: the "Experiment tracking" and monitor
menus (Kconfig files here).
"""
