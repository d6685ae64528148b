"""Checkpoints are read without running code from them (lib/run/safeload.py): a run's
real checkpoints load, a crafted one is refused before its payload runs, and
TRUST_CHECKPOINT=1 loads a trusted file that holds other objects."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from lib.run.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from lib.run.safeload import TRUST_VAR, unsafe_names
from lib.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[3]


class Payload:
    """Unpickled, it runs a shell command that creates a file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def minimal(step: int = 1, **extra) -> dict:
    return {
        "step": step,
        "model": {"w": torch.ones(3)},
        "optimizer": {},
        "model_config": {},
        "family": "gpt2",
        **extra,
    }


@pytest.fixture(autouse=True)
def untrusted(monkeypatch):
    monkeypatch.delenv(TRUST_VAR, raising=False)


def test_a_trained_runs_checkpoints_load_with_their_numpy_rng_state(tiny_run, tmp_path):
    """Saved by the trainer as every version of this project has saved them (numpy's RNG
    state is the one non-tensor object): both load, and the state restores the RNG."""
    run = tiny_run(GPT2_MAX_ITERS=2, GPT2_EVAL_INTERVAL=2, TRAIN_EVAL_ITERS=1, GPT2_WARMUP_STEPS=1)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    Trainer(run, run_dir, log=lambda _: None).train()
    for name in ("ckpt_latest.pt", "ckpt_best.pt"):
        assert set(unsafe_names(run_dir / name)) == set()  # nothing beyond the allow-list
        state = load_checkpoint(run_dir / name)
        assert state["step"] == 2 and state["optimizer"]["state"]  # AdamW moments were saved
        kind, key, *_ = state["rng"]["numpy"]
        assert kind == "MT19937" and key.dtype == np.uint32 and key.shape == (624,)
        np.random.set_state(state["rng"]["numpy"])
        first = np.random.rand()
        np.random.set_state(state["rng"]["numpy"])
        assert np.random.rand() == first


def test_a_checkpoint_pickled_by_numpy_1_still_loads(tmp_path):
    """numpy 1.x wrote its arrays' rebuild function as numpy.core.multiarray._reconstruct."""
    path = tmp_path / "ckpt_latest.pt"
    save_checkpoint(path, minimal(rng={"numpy": np.random.get_state()}))
    old = tmp_path / "old.pt"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(old, "w", zipfile.ZIP_STORED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("data.pkl"):
                assert b"numpy._core.multiarray" in data
                data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
            dst.writestr(item, data)
    assert (
        "numpy.core.multiarray._reconstruct"
        in torch.serialization.get_unsafe_globals_in_checkpoint(old)
    )
    state = load_checkpoint(old)
    assert np.array_equal(state["rng"]["numpy"][1], np.random.get_state()[1])


def test_a_crafted_checkpoint_is_refused_and_its_payload_never_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    path = tmp_path / "ckpt_best.pt"
    torch.save({"format": 1, **minimal(), "extra": Payload(marker)}, path)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert not marker.exists()
    assert f"{path} was not loaded" in message and "posix.system" in message
    assert f"{TRUST_VAR}=1" in message and "\n" not in message


@pytest.mark.parametrize(
    "how",
    [
        {"_use_new_zipfile_serialization": False},  # torch < 1.6's run of pickles
        {"_use_new_zipfile_serialization": False, "pickle_protocol": 4},  # STACK_GLOBAL
        {"pickle_protocol": 4},  # zip, STACK_GLOBAL: torch's own scan cannot read it
    ],
)
def test_a_payload_in_any_format_is_refused_by_name_never_as_damaged(tmp_path, how):
    """Refused as the unsafe file it is, naming the global, without torch's advice
    to retry with weights_only=False; the payload never runs."""
    marker = tmp_path / "payload-ran"
    path = tmp_path / "ckpt_best.pt"
    torch.save({"format": 1, **minimal(), "extra": Payload(marker)}, path, **how)
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert not marker.exists()
    assert f"{path} was not loaded" in message and f"({os.system.__module__}.system)" in message
    assert "weights_only" not in message and "not a readable" not in message
    assert f"{TRUST_VAR}=1" in message and "\n" not in message


def test_a_legacy_format_checkpoint_of_plain_tensors_loads(tmp_path):
    path = tmp_path / "ckpt_latest.pt"
    torch.save({"format": 1, **minimal(step=7)}, path, _use_new_zipfile_serialization=False)
    assert unsafe_names(path) == []  # its tensors' and storages' globals are torch's own
    assert load_checkpoint(path)["step"] == 7


def test_a_stream_torch_refuses_for_no_named_global_is_damaged_without_its_advice(tmp_path):
    """Protocol 5's bytearray opcode names no global: a damaged checkpoint, with the
    unpickler's reason and none of torch's advice to load it unsafely."""
    path = tmp_path / "ckpt_latest.pt"
    path.write_bytes(pickle.dumps(bytearray(b"xx"), protocol=5))
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert "is not a readable checkpoint" in message and "Unsupported operand" in message
    assert "weights_only" not in message and "add_safe_globals" not in message


def test_trust_checkpoint_loads_a_trusted_file_with_other_objects(tmp_path, monkeypatch):
    path = tmp_path / "ckpt_best.pt"
    torch.save({"format": 1, **minimal(), "ratio": Fraction(1, 3)}, path)
    with pytest.raises(CheckpointError, match=r"\(fractions\.Fraction\)"):
        load_checkpoint(path)
    monkeypatch.setenv(TRUST_VAR, "1")
    assert load_checkpoint(path)["ratio"] == Fraction(1, 3)


def test_a_truncated_file_is_still_a_damaged_checkpoint_not_an_unsafe_one(tmp_path):
    path = tmp_path / "ckpt_latest.pt"
    buffer = io.BytesIO()
    torch.save({"format": 1, **minimal()}, buffer)
    path.write_bytes(buffer.getvalue()[:300])
    with pytest.raises(CheckpointError, match="is not a readable checkpoint"):
        load_checkpoint(path)


@pytest.mark.slow
def test_make_sample_export_and_continue_refuse_the_payload(tmp_path):
    """The commands that read a run's checkpoints, as processes: exit 2 or 1 with one
    'error:' paragraph naming the option, and the payload's file never appears."""
    marker = tmp_path / "payload-ran"
    run_dir = tmp_path / "results" / "crafted"
    run_dir.mkdir(parents=True)
    (run_dir / "config.txt").write_text("CONFIG_MODEL_GPT2=y\n")
    for name in ("ckpt_best.pt", "ckpt_latest.pt"):
        torch.save({"format": 1, **minimal(), "extra": Payload(marker)}, run_dir / name)
    env = {k: v for k, v in os.environ.items() if k != TRUST_VAR}
    for script, args in (
        ("sample.py", ["--run", str(run_dir)]),
        ("export.py", ["--run", str(run_dir)]),
        ("continue.py", ["--run", str(run_dir)]),
    ):
        out = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / script), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
        assert out.returncode in (1, 2), script + out.stdout + out.stderr
        assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1, (
            script + out.stderr
        )
        assert "was not loaded" in out.stderr and f"{TRUST_VAR}=1" in out.stderr, out.stderr
        assert "Traceback" not in out.stdout + out.stderr
        assert not marker.exists(), script
