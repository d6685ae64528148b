"""`make estimate` and `scripts/estimate.py --validate`, run for real."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.scripts.conftest import ROOT, make


@pytest.mark.slow
def test_make_estimate_prints_the_table_for_the_configuration(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    out = make(project, "estimate")
    assert out.returncode == 0, out.stderr
    assert "Memory estimate per device: gpt2, micro-batch 12 x 64 tokens" in out.stdout
    for word in (
        "parameters",
        "activations",
        "logits",
        "total (peak:",
        "A100 40GB",
        "H100 SXM 80GB",
        "RTX 4090 24GB",
        "CPU RAM (here)",
    ):
        assert word in out.stdout, word
    gpu = make(project, "estimate", "GPU=L4", "BATCH_SIZE=32")
    assert gpu.returncode == 0 and "micro-batch 32 x 64 tokens" in gpu.stdout
    # Auto precision: bf16 on a GPU that has it, fp32 on the CPU.
    assert "bf16 on cuda" in gpu.stdout and "(fp32)" in gpu.stdout.splitlines()[-1]
    bad = make(project, "estimate", "BATCH_SIZE=99999")
    assert bad.returncode != 0 and "BATCH_SIZE" in bad.stderr
    assert "estimate " in make(project, "help").stdout


def test_validate_on_the_cpu_measures_and_writes_json(tmp_path):
    out = tmp_path / "validation.json"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/estimate.py",
            "--validate",
            "--cases",
            "2x64 b8 fp32",
            "--steps",
            "2",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and [c["case"] for c in result["cases"]] == [
        "gpt2 2x64 b8 fp32"
    ]
    case = result["cases"][0]
    assert case["measured_bytes"] > 1e6 and abs(case["error_percent"]) < 5
    assert "error" in done.stdout and "measured" in done.stdout
