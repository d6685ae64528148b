"""A run's records on disk: its folder and id, checkpoints, metrics.json,
backups, atomic and durable writes, one owner per run, and the stop signals
that end a run at a step boundary so it resumes exactly. Options: the "Run
records" menu (Kconfig here).
"""
