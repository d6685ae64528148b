"""BatchLoader: random windows, reproducible and resumable."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lib.data import DataError, is_prepared
from lib.data.loader import BatchLoader
from lib.data.meta import FORMAT_VERSION


def _write_dataset(root: Path, train: np.ndarray, val: np.ndarray, vocab_size: int) -> Path:
    """A prepared folder holding exactly the given token arrays."""
    root.mkdir()
    dtype = np.dtype(np.uint16 if vocab_size <= 65535 else np.uint32)
    train.astype(dtype).tofile(root / "train.bin")
    val.astype(dtype).tofile(root / "val.bin")
    meta = {
        "format_version": FORMAT_VERSION,
        "dataset": "synthetic",
        "source": "test",
        "tokenizer": {"name": "char", "vocab_size": vocab_size, "chars": []},
        "vocab_size": vocab_size,
        "dtype": dtype.name,
        "train_tokens": len(train),
        "val_tokens": len(val),
    }
    (root / "meta.json").write_text(json.dumps(meta))
    assert is_prepared(root)
    return root


@pytest.fixture
def counting(tmp_path: Path) -> Path:
    # Token i is i % 1000, so every window is a run of consecutive numbers.
    return _write_dataset(
        tmp_path / "counting", np.arange(10_000) % 1000, np.arange(500) % 1000, 1000
    )


def test_batches_are_int64_windows_with_targets_shifted_by_one(counting: Path) -> None:
    x, y = BatchLoader(counting, "train", batch_size=6, block_size=16).next_batch()
    assert x.shape == y.shape == (6, 16)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(y, (x + 1) % 1000)
    steps = torch.diff(x, dim=1) % 1000
    assert torch.all(steps == 1)


def test_same_seed_gives_same_batches_and_splits_differ(counting: Path) -> None:
    a = BatchLoader(counting, "train", 4, 8, seed=7)
    b = BatchLoader(counting, "train", 4, 8, seed=7)
    for _ in range(3):
        assert torch.equal(a.next_batch()[0], b.next_batch()[0])
    c = BatchLoader(counting, "train", 4, 8, seed=8)
    v = BatchLoader(counting, "val", 4, 8, seed=7)
    first = BatchLoader(counting, "train", 4, 8, seed=7).next_batch()[0]
    assert not torch.equal(c.next_batch()[0], first)
    assert not torch.equal(v.next_batch()[0], first)


def test_sampling_neither_uses_nor_moves_the_global_rng(counting: Path) -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    first = BatchLoader(counting, "train", 4, 8).next_batch()[0]
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(123)
    assert torch.equal(BatchLoader(counting, "train", 4, 8).next_batch()[0], first)


def test_resumed_loader_draws_the_same_next_batches(counting: Path) -> None:
    loader = BatchLoader(counting, "train", 4, 32, seed=99)
    for _ in range(3):
        loader.next_batch()
    buf = io.BytesIO()
    torch.save(loader.state_dict(), buf)  # as a checkpoint would
    expected = [loader.next_batch() for _ in range(2)]

    buf.seek(0)
    resumed = BatchLoader(counting, "train", 4, 32, seed=1)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    assert resumed.batches_drawn == 3 and resumed.seed == 99
    for (x, y), (ex, ey) in zip((resumed.next_batch() for _ in range(2)), expected):
        assert torch.equal(x, ex) and torch.equal(y, ey)


def test_state_snapshot_in_memory_is_not_changed_by_later_draws(counting: Path) -> None:
    loader = BatchLoader(counting, "train", 4, 32)
    loader.next_batch()
    saved = loader.state_dict()
    expected = loader.next_batch()
    loader.next_batch()
    loader.load_state_dict(saved)  # e.g. retrying a step after a failed torch.compile
    assert all(torch.equal(a, b) for a, b in zip(loader.next_batch(), expected))
    assert loader.batches_drawn == 2


def test_state_of_another_split_is_refused(counting: Path) -> None:
    state = BatchLoader(counting, "val", 2, 8).state_dict()
    with pytest.raises(ValueError, match="'val'.*'train'"):
        BatchLoader(counting, "train", 2, 8).load_state_dict(state)


def test_block_size_must_fit_the_split(tmp_path: Path) -> None:
    data = _write_dataset(tmp_path / "d", np.arange(100), np.arange(9), 100)
    with pytest.raises(
        DataError, match=r"block_size 9 needs at least 10 tokens.*val split .* has 9"
    ):
        BatchLoader(data, "val", 2, 9)
    x, y = BatchLoader(data, "val", 3, 8).next_batch()  # one possible window
    assert x.tolist() == [list(range(8))] * 3
    assert y.tolist() == [list(range(1, 9))] * 3


def test_every_start_position_is_drawn(tmp_path: Path) -> None:
    data = _write_dataset(tmp_path / "d", np.arange(20), np.arange(20), 20)
    starts = {
        int(s)
        for _ in range(50)
        for s in BatchLoader(data, "train", 8, 4, seed=_).next_batch()[0][:, 0]
    }
    assert starts == set(range(16))  # 0 .. len - block_size - 1


def test_large_vocabulary_ids_are_read_back_from_uint32(tmp_path: Path) -> None:
    ids = np.arange(70_000, 70_100)
    data = _write_dataset(tmp_path / "d", ids, ids, 100_277)
    x, y = BatchLoader(data, "train", 2, 10).next_batch()
    assert int(x.min()) >= 70_000 and int(y.max()) < 70_100
    assert torch.equal(y[:, :-1], x[:, 1:])


def test_unknown_split_and_missing_data_are_errors(counting: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train, val"):
        BatchLoader(counting, "test", 2, 8)
    with pytest.raises(DataError, match="not prepared"):
        BatchLoader(tmp_path / "nothing", "train", 2, 8)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_match_cpu_batches(counting: Path) -> None:
    cpu = BatchLoader(counting, "train", 4, 64, device="cpu")
    gpu = BatchLoader(counting, "train", 4, 64, device="cuda")
    x, y = gpu.next_batch()
    assert x.device.type == "cuda" and x.dtype == torch.int64
    cx, cy = cpu.next_batch()
    assert torch.equal(x.cpu(), cx) and torch.equal(y.cpu(), cy)


def test_pinning_changes_no_token_and_is_off_on_a_cpu(counting: Path) -> None:
    """The windows are the offsets drawn from the split's own generator, as
    before PIN_MEMORY existed, whether or not pinning is asked for."""
    from lib.data.loader import _split_seed

    gen = torch.Generator().manual_seed(_split_seed(5, "train"))
    starts = [torch.randint(10_000 - 8, (3,), generator=gen) for _ in range(2)]
    for pin in (True, False):
        loader = BatchLoader(counting, "train", 3, 8, seed=5, pin_memory=pin)
        assert loader.pin_memory is False  # only a CUDA device has anything to pin
        for drawn in starts:
            x, y = loader.next_batch()
            expected = (drawn[:, None] + torch.arange(9)) % 1000
            assert torch.equal(x, expected[:, :-1]) and torch.equal(y, expected[:, 1:])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pinned_and_unpinned_cuda_batches_are_equal(counting: Path) -> None:
    pinned = BatchLoader(counting, "train", 4, 64, device="cuda", pin_memory=True)
    plain = BatchLoader(counting, "train", 4, 64, device="cuda", pin_memory=False)
    assert pinned.pin_memory and not plain.pin_memory
    for _ in range(3):
        (px, py), (x, y) = pinned.next_batch(), plain.next_batch()
        torch.cuda.synchronize()
        assert torch.equal(px, x) and torch.equal(py, y)
