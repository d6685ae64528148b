"""Random training windows from a prepared dataset, as nanoGPT samples them.

Each batch is batch_size windows at uniformly random offsets i of the
split's token array: x = data[i:i+T], y = data[i+1:i+T+1] (int64).
Offsets come from the loader's own torch.Generator, seeded from the seed and
the split, so batches are reproducible, differ between train and val, do not
disturb (or depend on) the global RNG, and can be resumed via state_dict().

Several processes (rank r of world_size) draw the offsets of the whole
global micro-batch, batch_size x world_size, from the same generator and
read only their slice r: together the ranks see exactly the batch one
process would with a world_size times larger batch_size.

On a CUDA device with pin_memory (PIN_MEMORY), a batch is copied into
page-locked host memory and sent without blocking, so the copy overlaps the
GPU's work; the tokens are the same either way.

The folder is checked when a loader opens it (lib/data/validate.py: sizes,
dtype, the ends of each file), and every batch's ids are compared with the
vocabulary: an id the embedding has no row for stops the run with the file
and the position, not an IndexError deep inside the model.
"""

from __future__ import annotations

import copy
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.data.meta import SPLIT_FILES, load_meta
from lib.data.sources import DataError
from lib.data.validate import check_prepared


def _split_seed(seed: int, split: str) -> int:
    # A stable per-split offset (crc32, not hash(), which is salted per process).
    return (seed * 1_000_003 + zlib.crc32(split.encode())) % (1 << 63)


class BatchLoader:
    """Draws (x, y) batches of shape (batch_size, block_size) from one split."""

    def __init__(
        self,
        data_dir: Path | str,
        split: str,
        batch_size: int,
        block_size: int,
        device: str | torch.device = "cpu",
        seed: int = 1337,
        rank: int = 0,
        world_size: int = 1,
        pin_memory: bool = True,
    ) -> None:
        if split not in SPLIT_FILES:
            raise ValueError(f"split must be one of {', '.join(SPLIT_FILES)}, not {split!r}")
        if batch_size < 1 or block_size < 1:
            raise ValueError(
                f"batch_size and block_size must be >= 1, got {batch_size}, {block_size}"
            )
        self.data_dir = Path(data_dir)
        self.meta = load_meta(self.data_dir)
        check_prepared(self.data_dir)
        self.split, self.batch_size, self.block_size = split, batch_size, block_size
        self.device = torch.device(device)
        self.pin_memory = pin_memory and self.device.type == "cuda"
        self.path = self.data_dir / SPLIT_FILES[split]
        self.dtype = np.dtype(self.meta["dtype"])
        self.num_tokens = int(self.meta[f"{split}_tokens"])
        self.vocab_size = int(self.meta["vocab_size"])
        if block_size + 1 > self.num_tokens:
            raise DataError(
                f"block_size {block_size} needs at least {block_size + 1} tokens, but the "
                f"{split} split of {self.data_dir} has {self.num_tokens}; lower the block "
                f"size or use a larger dataset or validation fraction."
            )
        self.seed = seed
        self.rank, self.world_size = rank, world_size
        self.generator = torch.Generator().manual_seed(_split_seed(seed, split))
        self.batches_drawn = 0
        self._offsets = np.arange(block_size + 1)

    def _data(self) -> np.memmap:
        # Re-opened for every batch, as nanoGPT does: a memmap kept open for
        # a whole run lets its touched pages pile up as resident memory.
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.num_tokens,))

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next (x, y) pair, int64, on the loader's device."""
        ix = torch.randint(
            self.num_tokens - self.block_size,
            (self.batch_size * self.world_size,),
            generator=self.generator,
        )
        ix = ix[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
        # One fancy-indexing read of all windows: (B, T+1) tokens.
        starts = ix.numpy()
        windows = self._data()[starts[:, None] + self._offsets].astype(np.int64)
        if windows.max() >= self.vocab_size:  # one pass over B x T ids: negligible
            self._out_of_range(windows, starts)
        self.batches_drawn += 1
        t = torch.from_numpy(windows)
        x, y = t[:, :-1].contiguous(), t[:, 1:].contiguous()
        if self.pin_memory:
            # Pinned host memory lets the copy run asynchronously with compute.
            return (
                x.pin_memory().to(self.device, non_blocking=True),
                y.pin_memory().to(self.device, non_blocking=True),
            )
        return x.to(self.device), y.to(self.device)

    def _out_of_range(self, windows: np.ndarray, starts: np.ndarray) -> None:
        row, col = np.argwhere(windows >= self.vocab_size)[0]
        raise DataError(
            f"{self.path} holds token id {windows[row, col]:,} at position "
            f"{starts[row] + col:,}, but its tokenizer has {self.vocab_size:,} ids (0 to "
            f"{self.vocab_size - 1:,}): the file does not hold what was prepared. Delete "
            f"{self.data_dir} and run `make prepare` (or the run) to tokenize the dataset again."
        )

    def __iter__(self) -> BatchLoader:
        return self

    def rebatched(self, batch_size: int) -> BatchLoader:
        """A loader drawing `batch_size` windows per batch from where this one is
        (its own copy of the generator), for the out-of-memory fallback."""
        loader = copy.copy(self)
        loader.batch_size = batch_size
        loader.generator = torch.Generator().manual_seed(0)
        loader.generator.set_state(self.generator.get_state())
        return loader

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.next_batch()

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs so the resumed loader draws the same next batches."""
        return {
            "split": self.split,
            "seed": self.seed,
            "batches_drawn": self.batches_drawn,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("split") != self.split:
            raise ValueError(
                f"state is for split {state.get('split')!r}, this loader reads {self.split!r}"
            )
        self.generator.set_state(torch.as_tensor(state["generator"], dtype=torch.uint8))
        self.seed = int(state.get("seed", self.seed))
        self.batches_drawn = int(state.get("batches_drawn", 0))
