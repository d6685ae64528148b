"""A token file's two ends: the cheap look at a .bin file that runs take on open.

Reading a whole split to check it would cost as much as an epoch of I/O on a
large dataset, so a run reads only the first and the last MiB of each file:
their SHA-256, recorded in meta.json when the dataset is prepared, shows the
file is still the one that was written (a copy, a sync or an edit that went
wrong usually touches an end), and their largest token id is compared with
the vocabulary. BatchLoader checks every batch it reads besides, so an id
changed in the middle is caught at the first batch that holds it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

END_BYTES = 1 << 20  # 1 MiB at each end


@dataclass(frozen=True)
class Ends:
    """The first END_BYTES of a file and the rest of its last END_BYTES (never
    overlapping: a file of 2 MiB or less is read whole)."""

    head: bytes
    tail: bytes
    tail_offset: int  # byte offset of tail in the file

    def digest(self) -> str:
        h = hashlib.sha256(self.head)
        h.update(self.tail)
        return h.hexdigest()

    def first_out_of_range(self, dtype: np.dtype, vocab_size: int) -> tuple[int, int] | None:
        """(token position, id) of the first id >= vocab_size in either end, or None."""
        for offset, chunk in ((0, self.head), (self.tail_offset, self.tail)):
            usable = len(chunk) - len(chunk) % dtype.itemsize
            ids = np.frombuffer(chunk[:usable], dtype=dtype)
            bad = np.flatnonzero(ids >= vocab_size)
            if bad.size:
                return offset // dtype.itemsize + int(bad[0]), int(ids[bad[0]])
        return None


def read_ends(path: Path, itemsize: int = 1) -> Ends:
    """The ends of path; the tail starts on a token boundary (a multiple of itemsize)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        head = f.read(min(size, END_BYTES))
        start = max(len(head), size - END_BYTES)
        start += -start % itemsize  # align: a token is never split between the ends
        f.seek(start)
        tail = f.read()
    return Ends(head, tail, start)


def ends_digest(path: Path, itemsize: int) -> str:
    """The checksum meta.json records for a split file."""
    return read_ends(path, itemsize).digest()
