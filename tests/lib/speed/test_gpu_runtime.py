"""The GPU runtime settings: CUDNN_BENCHMARK (apply.py), PYTORCH_CUDA_ALLOC_CONF
(allocator.py) and GPU_WARMUP (warmup.py): each reaches torch, is refused when
malformed, leaves training unchanged, and is recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lib.speed.apply as speed_module
from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from lib.speed.allocator import (
    ENV,
    GENERIC_ENV,
    AllocConfError,
    apply_alloc_conf,
    check_alloc_conf,
)
from lib.speed.apply import apply_cudnn_benchmark
from lib.speed.warmup import PASSES, warm_up, warmup_passes
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.scripts.conftest import project  # noqa: F401 (fixture)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cudnn_flag():
    before = torch.backends.cudnn.benchmark
    yield
    torch.backends.cudnn.benchmark = before


def test_cudnn_benchmark_is_set_for_a_cuda_device_only(cudnn_flag):
    assert apply_cudnn_benchmark(True, CUDA) is True and torch.backends.cudnn.benchmark is True
    assert apply_cudnn_benchmark(False, CUDA) is False and torch.backends.cudnn.benchmark is False
    assert apply_cudnn_benchmark(True, CPU) is False and torch.backends.cudnn.benchmark is False


@pytest.mark.parametrize(
    "value",
    [
        "expandable_segments:True",
        "max_split_size_mb:256,garbage_collection_threshold:0.8",
        "roundup_power2_divisions:[256:1,512:2,>:8],backend:native",
    ],
)
def test_well_formed_allocator_settings_pass(value):
    check_alloc_conf(value)


@pytest.mark.parametrize(
    "value, says",
    [
        ("expandable_segments", "'expandable_segments' is not key:value"),
        ("expandable_segments:True,,", "'' is not key:value"),
        ("expandible_segments:True", "'expandible_segments' is not a key of the CUDA allocator"),
        ("max_split_size_mb=256", "'max_split_size_mb=256' is not key:value"),
    ],
)
def test_malformed_allocator_settings_are_refused_in_one_paragraph(value, says):
    with pytest.raises(AllocConfError) as err:
        check_alloc_conf(value)
    message = str(err.value)
    assert message.startswith(f"CONFIG_PYTORCH_CUDA_ALLOC_CONF={value!r}: {says}")
    assert "expandable_segments:True" in message and "\n" not in message


def test_allocator_setting_replaces_the_environment_and_is_refused_after_cuda_started(monkeypatch):
    environ = {ENV: "max_split_size_mb:128", GENERIC_ENV: "max_split_size_mb:64"}
    note = apply_alloc_conf("expandable_segments:True", environ)
    assert environ == {ENV: "expandable_segments:True", GENERIC_ENV: "expandable_segments:True"}
    assert note == (
        f"{ENV}: the configured 'expandable_segments:True' replaces the "
        f"environment's 'max_split_size_mb:128'"
    )
    empty: dict[str, str] = {}
    assert apply_alloc_conf("", empty) is None and apply_alloc_conf(None, empty) is None
    assert empty == {}  # empty: the environment's value, or PyTorch's defaults
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(AllocConfError, match="came after CUDA started in this process"):
        apply_alloc_conf("expandable_segments:True", {})


def test_allocator_setting_is_in_the_environment_before_cuda_starts(tmp_path):
    """In a fresh process, as scripts/train.py does it: torch loaded, CUDA not started."""
    code = (
        "import os, torch\nfrom lib.speed.allocator import apply_alloc_conf\n"
        "apply_alloc_conf('expandable_segments:True')\n"
        f"print(os.environ[{ENV!r}], torch.cuda.is_initialized())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (ENV, GENERIC_ENV)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["expandable_segments:True", "False"], done.stderr


def test_train_refuses_a_malformed_allocator_setting_before_creating_a_run(project):
    write_outputs(open_tree(), project / ".config", project / "config.py")
    done = subprocess.run(
        [sys.executable, "scripts/train.py", "SET=PYTORCH_CUDA_ALLOC_CONF=expandable_segments"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: CONFIG_PYTORCH_CUDA_ALLOC_CONF='expandable_segments'")
    assert "Traceback" not in done.stderr and not (project / "results").exists()


def test_gpu_warmup_runs_on_cuda_only():
    assert warmup_passes(True, CUDA) == PASSES and warmup_passes(True, CPU) == 0
    assert warmup_passes(False, CUDA) == 0


def test_warm_up_changes_no_weight_and_no_random_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Dropout(0.5))
    weights, rng = [p.clone() for p in model.parameters()], torch.get_rng_state()
    calls = []
    record = warm_up(
        lambda x, y: calls.append(model(x).sum()), model, (2, 5), CPU, torch.no_grad, 3
    )
    assert len(calls) == 3 and record is not None and record["passes"] == 3
    assert record["seconds"] >= 0 and model.training  # back in training mode
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters()))
    assert torch.equal(torch.get_rng_state(), rng)
    assert warm_up(lambda x, y: None, model, (2, 5), CPU, torch.no_grad, 0) is None


def _losses(tiny_run, name: str) -> tuple[list[float], dict]:
    run = tiny_run(GPT2_MAX_ITERS=8, GPT2_EVAL_INTERVAL=4, GPT2_DROPOUT="0.1", RUN_NAME=name)
    run_dir = create_run_dir(run)
    summary = Trainer(run, run_dir, log=lambda _: None).train()
    return summary["train_loss"]["values"], json.loads((run_dir / "metrics.json").read_text())


def test_a_warmed_up_run_trains_exactly_as_one_without(tiny_run, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    cold, cold_metrics = _losses(tiny_run, "cold")
    assert cold_metrics["speed"]["gpu_warmup"] is None
    assert cold_metrics["speed"]["cudnn_benchmark"] is False
    assert cold_metrics["speed"]["cuda_alloc_conf"] == {"value": None, "source": None}
    monkeypatch.setattr(speed_module, "warmup_passes", lambda enabled, device: 4)  # as on CUDA
    warm, warm_metrics = _losses(tiny_run, "warm")
    assert warm_metrics["speed"]["gpu_warmup"]["passes"] == 4
    assert warm == cold  # with dropout on: the warm-up drew no random number
    assert warm_metrics["val_loss"] == cold_metrics["val_loss"]


def test_gpu_settings_depend_on_a_device_that_can_be_cuda(tiny_run):
    run = tiny_run(
        DEVICE_AUTO="y",
        CUDNN_BENCHMARK="y",
        GPU_WARMUP="y",
        PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
    )
    assert (run.CUDNN_BENCHMARK, run.GPU_WARMUP, run.PYTORCH_CUDA_ALLOC_CONF) == (
        True,
        True,
        "expandable_segments:True",
    )
    cpu = tiny_run()  # DEVICE_CPU: the symbols are not asked
    assert (cpu.CUDNN_BENCHMARK, cpu.GPU_WARMUP, cpu.PYTORCH_CUDA_ALLOC_CONF) == (None, None, None)
