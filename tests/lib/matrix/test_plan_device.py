"""The dry run's device: GPU= plans for a known GPU as `make estimate GPU=` does, an
unknown time is said to be unknown (never "0 s"), and a matrix meant for another
device says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_valid, write_outputs
from lib.estimate.verdict import Verdict
from lib.matrix import plan
from lib.matrix.grid import expand

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def baseline(tmp_path):
    """GPT-2 124M for 50,000 steps (gpt2-vanilla-baseline), two seeds: a GPU matrix."""
    path = tmp_path / ".config"
    write_outputs(
        load_valid(ROOT / "defconfigs" / "gpt2-vanilla-baseline"), path, tmp_path / "c.py"
    )
    return path, [f"SET=RESULTS_DIR={tmp_path / 'r'}", "SEEDS=2"]


def _shown(capsys, path, args, gpu=None) -> str:
    base, planned = expand(args, path)
    plan.show(base, planned, gpu=gpu)
    return capsys.readouterr().out


def test_a_gpu_matrix_on_a_cpu_says_it_is_meant_for_another_device(baseline, capsys):
    path, args = baseline
    out = _shown(capsys, path, [*args, "DEVICE=cpu"])
    [line] = [x for x in out.splitlines() if x.startswith("device:")]
    assert line.startswith("device: this matrix is meant for another device than this CPU: ")
    assert "one after another they would take about " in line and " h;" in line
    assert "`make test-matrix-dry-run GPU=H100`" in line


def test_gpu_plans_for_a_known_gpu_like_make_estimate(baseline, capsys):
    path, args = baseline
    out = _shown(capsys, path, [*args, "DEVICE=cpu"], gpu="H100")
    rows = [x.split() for x in out.splitlines() if x.startswith("gpt2_")]
    assert len(rows) == 2
    # `make estimate GPU=H100` gives this configuration about 4.6 h; two runs well under a day
    assert all(r[3] == "h" and 1.0 < float(r[2]) < 12.0 for r in rows), rows
    assert "device:" not in out and "unknown" not in out


def test_an_unknown_gpu_name_is_refused(baseline):
    path, args = baseline
    base, planned = expand(args, path)
    with pytest.raises(ConfigError, match="GPU=Voodoo5: unknown GPU .Voodoo5.; known: "):
        plan.show(base, planned, gpu="Voodoo5")


@pytest.mark.skipif(torch.cuda.is_available(), reason="DEVICE=cuda has a speed on a GPU host")
def test_unknown_time_is_said_never_zero_seconds(baseline, capsys):
    path, args = baseline
    out = _shown(capsys, path, [*args, "DEVICE=cuda"])
    assert "0 s" not in out and "some unknown" not in out
    assert "2 runs (1 configuration x 2 seeds: 1 2), time unknown" in out
    assert "time: unknown for 2 runs: no speed is known for DEVICE=cuda on this machine" in out


def test_the_device_line_names_runs_that_do_not_fit():
    small = Verdict("CPU RAM (here)", "cpu", 8, 4, 10.0)
    fits = Verdict("CPU RAM (here)", "cpu", 2, 4, 10.0)
    line = plan._elsewhere([small, fits], 20.0, None)
    assert line is not None and "1 of the 2 runs need more memory than it has" in line
    assert "would take" not in line  # 20 s
    assert plan._elsewhere([fits, fits], 20.0, None) is None


def test_the_dry_run_says_what_scale_iters_scaled(baseline, capsys):
    path, args = baseline
    out = _shown(capsys, path, [*args, "DEVICE=cpu", "SCALE_ITERS=100"], gpu="H100")
    assert "SCALE_ITERS=100: GPT2_MAX_ITERS 50000 -> 100 (x0.002), scaled with it: " in out
    assert "GPT2_WARMUP_STEPS 2000 -> 4" in out and "GPT2_EVAL_INTERVAL 500 -> 1" in out
