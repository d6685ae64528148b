"""Checkpoint mirroring: copy a run's record to BACKUP_DIR/<run-id>/ as it is saved.

Meant for a second disk or a mounted network drive, so that a preempted cloud
machine loses nothing: the run folder there can be copied back and resumed
with `make continue`. Each file is copied to a temporary file in the
destination and renamed over the old copy, so the mirror always holds whole
files; temporaries a killed copy left there are removed when the run resumes
or ends. Files unchanged since their last copy are skipped. A failing copy
(unwritable or unreachable destination, full disk) logs a warning and never
stops training.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lib.atomic import remove_stale_temps, write_atomic
from lib.paths import from_root

if TYPE_CHECKING:
    from lib.config.symbols import Run

# What a resumable copy of a run needs, plus its log.
MIRRORED = ("config.txt", "metrics.json", "ckpt_latest.pt", "ckpt_best.pt", "output.log")


class Backup:
    def __init__(self, root: str, run_dir: Path, log: Callable[[str], None] = print):
        self.run_dir = Path(run_dir)
        self.dest: Path | None = None
        if root:
            base = Path(root)
            self.dest = from_root(base) / self.run_dir.name
        self.log = log
        self._copied: dict[str, tuple[int, ...]] = {}  # name -> (inode, mtime_ns, size)

    @classmethod
    def from_run(
        cls, r: Run, run_dir: Path, log: Callable[[str], None] = print, main: bool = True
    ) -> Backup:
        """Only the main process of a distributed run (the one writing the files) copies."""
        return cls(r.BACKUP_DIR if main else "", run_dir, log)

    def mirror(self, names: tuple[str, ...] = MIRRORED) -> list[str]:
        """Copy the named files that changed; returns the names copied."""
        if self.dest is None:
            return []
        copied = []
        for name in names:
            src = self.run_dir / name
            try:
                st = src.stat()
            except FileNotFoundError:
                continue
            if self._copied.get(name) == (st.st_ino, st.st_mtime_ns, st.st_size):
                continue
            try:
                with open(src, "rb") as f:
                    write_atomic(self.dest / name, lambda out: shutil.copyfileobj(f, out, 1 << 20))
            except OSError as err:
                self.log(
                    f"WARNING: backup of {name} to {self.dest} failed ({err}); training goes on"
                )
                continue
            self._copied[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
            copied.append(name)
        return copied

    def remove_stale_temps(self) -> list[tuple[Path, int]]:
        """Temporaries of mirrored files that a killed copy left in the mirror."""
        if self.dest is None:
            return []
        try:
            return remove_stale_temps(self.dest, MIRRORED)
        except OSError as err:  # an unreachable mirror never stops training
            self.log(f"WARNING: cannot clear temporaries in {self.dest} ({err})")
            return []


def remove_run_temps(
    run_dir: Path, names: tuple[str, ...], backup: Backup, log: Callable[[str], None]
) -> None:
    """Remove and report the temporaries a killed write of `names` left in the run
    folder (a checkpoint's size each) and in its mirror; the run's owner calls it
    on resume and at the end, when nothing writes them."""
    removed = remove_stale_temps(run_dir, names) + backup.remove_stale_temps()
    if removed:
        log(
            f"removed {len(removed)} temporary file(s) of {sum(n for _, n in removed):,} "
            f"bytes left by an interrupted write: {', '.join(p.name for p, _ in removed)}"
        )
