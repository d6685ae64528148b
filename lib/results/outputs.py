"""Summary outputs written all or nothing.

summary.md/.csv/.tex, the PNGs and index.html are built in a hidden staging
folder inside the output folder (same filesystem), and moved over the old
files (os.replace, atomic per file) only once every one of them is built. If
anything fails before that, the staging folder is removed and the previous
outputs are untouched. Files are created with the user's umask, like every
other file in a results folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

PREFIX = ".summary-"
STALE_S = 3600  # a staging folder this old was left by a killed `make results`


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Staging:
    """with Staging(out) as stage: write files under stage.dir (or stage.text()),
    then stage.commit(files) moves them into out. Leaving the block without a
    commit, by an exception or not, discards them."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self._dir: Path | None = None  # set on entering the with block

    @property
    def dir(self) -> Path:
        """The staging folder; it exists only inside the with block."""
        if self._dir is None:
            raise RuntimeError("Staging.dir used outside its with block")
        return self._dir

    def __enter__(self) -> Staging:
        self.out.mkdir(parents=True, exist_ok=True)
        self._sweep_stale()
        self._dir = Path(tempfile.mkdtemp(prefix=PREFIX, dir=self.out))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _sweep_stale(self) -> None:
        now = time.time()
        for old in self.out.glob(PREFIX + "*"):
            try:
                if old.is_dir() and now - old.stat().st_mtime > STALE_S:
                    shutil.rmtree(old, ignore_errors=True)
            except OSError:
                pass  # another `make results` just removed it

    def text(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self, staged: list[Path]) -> list[Path]:
        """Flush every staged file, then move each into the output folder."""
        for path in staged:
            _fsync(path)
        moved = []
        for path in staged:
            os.replace(path, self.out / path.name)
            moved.append(self.out / path.name)
        _fsync(self.out)  # the renames themselves reach the disk
        return moved
