"""make bench's whole-loop row: the trainer and a plain loop timed on the same data."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lib.bench.loop import _timed_rest, nanogpt_batches, ours, run_loop_bench


def test_the_timed_steps_are_those_after_the_warmup():
    # step ends at 0, 1, 3, 6, 10 s: the three after two warm-up steps took 2, 3 and 4 s
    assert _timed_rest([0.0, 1.0, 3.0, 6.0, 10.0], warmup=2) == pytest.approx(3.0)


def test_loop_bench_times_the_trainer_and_the_plain_loop_in_alternate_rounds(tiny_run):
    run = tiny_run(TRAIN_LOG_INTERVAL="2")
    result = run_loop_bench(run, steps=3, warmup=2, rounds=2)
    tokens = 8 * 32  # batch x block
    assert result["tokens_per_iter"] == tokens and result["rounds"] == 2
    for name in ("ours", "plain"):
        m = result[name]
        assert m["ms_per_iter"] > 0
        assert m["tokens_per_sec"] == pytest.approx(tokens / (m["ms_per_iter"] / 1000))
    assert result["plain"]["optimizer"].startswith("AdamW")
    assert len(result["ours_vs_plain_time_rounds"]) == 2
    assert result["ours_vs_plain_time"] == pytest.approx(
        result["ours"]["ms_per_iter"] / result["plain"]["ms_per_iter"]
    )
    assert not Path(run.RESULTS_DIR).exists()  # its runs live in a scratch folder, gone now


def test_the_plain_loop_reads_windows_of_the_prepared_file(tiny_run, tmp_path):
    run = tiny_run()
    ours(run, 1, 1, tmp_path)  # the trainer prepares the data, as a run does
    x, y = nanogpt_batches(run, torch.device("cpu"))()
    assert x.shape == y.shape == (8, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets: the inputs shifted by one


def test_make_bench_prints_both_rows_of_a_record(capsys):
    import importlib.util
    import json

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    record = next((ROOT / "docs" / "bench-data" / "cpu-avx2").glob("step_*.json"))
    r = json.loads(record.read_text())
    bench.print_step(r)
    bench.print_loop(r["loop"])
    out = capsys.readouterr().out.splitlines()
    ours = [line.split() for line in out if line.split()[:1] == ["ours"] and line[8:9] == " "]
    assert ours[0][1] == f"{r['ours']['ms_per_iter']:.1f}" and ours[0][3] == "n/a"  # CPU: no MFU
    assert ours[1][1] == f"{r['loop']['ours']['ms_per_iter']:.1f}"
    assert " ".join(ours[1][3:]) == r["loop"]["ours"]["optimizer"]
    assert f"takes {r['loop']['ours_vs_plain_time']:.3f}x the plain loop's time" in "\n".join(out)
