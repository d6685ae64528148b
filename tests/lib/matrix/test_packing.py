"""Several runs per GPU (MATRIX_RUNS_PER_GPU, lib/jobs/packing.py): which runs
start where, never over a GPU's memory by the estimates, the N cap, auto, DDP
runs on whole GPUs, too-big runs refused before anything starts, and the
CUDA_VISIBLE_DEVICES each started process gets. Fake GPU inventories: no GPU needed."""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from pathlib import Path

import pytest

from lib.config.run_config import load_run_config
from lib.estimate import estimate_memory
from lib.jobs import packing, runner
from lib.jobs.packing import GIB, Gpu, Need, Packer, build, need, parse_runs_per_gpu
from lib.jobs.runner import Runner
from lib.jobs.state import MatrixError, MatrixState
from lib.matrix import launch, plan
from lib.matrix.grid import expand

TWO_80 = [Gpu("0", 80 * GIB, "Fake 80GB"), Gpu("1", 80 * GIB, "Fake 80GB")]
USABLE = 0.9 * 80 * GIB


def _gib(x: float) -> Need:
    return Need(int(x * GIB))


def _start(packer: Packer, waiting: list[str]) -> dict[str, str]:
    """Start what may start now: run id -> the CUDA_VISIBLE_DEVICES it got."""
    started = {}
    while (picked := packer.next(waiting)) is not None:
        waiting.remove(picked[0])
        started[picked[0]] = picked[1].get("CUDA_VISIBLE_DEVICES", "all")
    return started


@pytest.mark.parametrize(
    "text, value",
    [("1", 1), ("4", 4), ("64", 64), ("auto", None), (" AUTO ", None), ("", 1), (None, 1)],
)
def test_runs_per_gpu_is_a_count_or_auto(text, value):
    assert parse_runs_per_gpu(text) == value


@pytest.mark.parametrize("text", ["0", "65", "-1", "2.5", "many", "2 auto"])
def test_runs_per_gpu_refuses_anything_else(text):
    with pytest.raises(MatrixError, match=r"CONFIG_MATRIX_RUNS_PER_GPU=.*1 to 64, or auto"):
        parse_runs_per_gpu(text)


def test_runs_spread_over_the_gpus_then_share_them_within_memory():
    needs = {
        "a": _gib(30),
        "b": _gib(30),
        "c": _gib(30),
        "d": _gib(30),
        "e": _gib(10),
        "f": _gib(10),
        "g": _gib(10),
        "h": _gib(1),
    }
    packer = Packer(TWO_80, needs, per_gpu=None, jobs=64)
    waiting = list(needs)
    # a, b one per GPU; c, d stack (60 of 72 GiB usable); e and f take the 12 GiB left
    # on each; g fits nowhere, and h, behind it, still fits in GPU 0's last 2 GiB.
    assert _start(packer, waiting) == {
        "a": "0",
        "b": "1",
        "c": "0",
        "d": "1",
        "e": "0",
        "f": "1",
        "h": "0",
    }
    assert waiting == ["g"]
    assert packer.used(0) == int(30 * GIB) * 2 + int(10 * GIB) + int(1 * GIB) <= USABLE
    packer.release("f")  # GPU 1 frees 10 GiB: g goes there
    assert _start(packer, waiting) == {"g": "1"}


def test_at_most_n_runs_per_gpu():
    needs = {f"r{i}": _gib(1) for i in range(10)}
    packer = Packer(TWO_80, needs, per_gpu=3)
    assert packer.jobs == packer.most_at_once == 6  # 2 GPUs x 3
    waiting = list(needs)
    started = _start(packer, waiting)
    assert sorted(started.values()) == ["0", "0", "0", "1", "1", "1"]
    packer.release(next(r for r, g in started.items() if g == "1"))
    assert _start(packer, waiting) == {"r6": "1"}
    # PARALLEL_JOBS caps the total below that.
    capped = Packer(TWO_80, needs, per_gpu=3, jobs=4)
    assert len(_start(capped, list(needs))) == 4 and capped.most_at_once == 4


def test_auto_fits_as_many_as_the_memory_takes():
    one = TWO_80[:1]
    big = {f"r{i}": _gib(20) for i in range(5)}
    assert len(_start(Packer(one, big, per_gpu=None, jobs=64), list(big))) == 3  # 60 <= 72 < 80
    tiny = {f"r{i}": _gib(0.8) for i in range(120)}
    assert len(_start(Packer(one, tiny, per_gpu=None, jobs=120), list(tiny))) == 90  # 72 / 0.8
    assert len(_start(Packer(one, tiny, per_gpu=None, jobs=64), list(tiny))) == 64
    # Without PARALLEL_JOBS, auto runs at most one per CPU core.
    assert Packer(one, tiny, per_gpu=None).jobs >= 1


@pytest.mark.parametrize("per_gpu", [None, 2, 5])
def test_no_gpu_ever_holds_more_than_its_memory_by_the_estimates(per_gpu):
    rng = random.Random(per_gpu or 0)
    gpus = TWO_80 + [Gpu("2", 24 * GIB, "Fake 24GB")]
    needs = {}
    for i in range(200):
        kind = rng.random()
        needs[f"r{i}"] = (
            Need(alone=True, why="x")
            if kind < 0.05
            else Need()
            if kind < 0.1
            else _gib(rng.choice([0.5, 0.9, 3, 7.5, 20, 40, 70]))
        )
    packer = Packer(gpus, needs, per_gpu=per_gpu, jobs=64)
    waiting, running, most = list(needs), [], 0
    while waiting or running:
        running += list(_start(packer, waiting))
        assert running, "nothing can start: the packer is stuck"
        for g, gpu in enumerate(gpus):
            here = packer.on[g]
            assert len(here) <= (per_gpu or 64)
            if len(here) > 1:  # sharing: all have estimates, and they fit the margin
                assert all(not needs[r].alone and needs[r].bytes is not None for r in here)
                assert packer.used(g) <= 0.9 * gpu.memory_bytes
            most = max(most, len(here))
        packer.release(running.pop(rng.randrange(len(running))))
    assert most == (per_gpu or most) and most > 1


def test_ddp_runs_take_whole_gpus_and_keep_their_place_in_line():
    needs = {"small": _gib(1), "ddp": Need(gpus=2, why="DDP"), "after": _gib(1)}
    packer = Packer(TWO_80, needs, per_gpu=None, jobs=8)
    waiting = list(needs)
    assert _start(packer, waiting) == {"small": "0"}
    assert waiting == ["ddp", "after"]  # "after" would fit, but may not pass the DDP run
    packer.release("small")
    assert _start(packer, waiting) == {"ddp": "all"}  # every GPU: the environment as it is
    assert packer.on == [["ddp"], ["ddp"]] and _start(packer, waiting) == {}
    packer.release("ddp")
    assert _start(packer, waiting) == {"after": "0"}

    one = {"ddp1": Need(gpus=1, why="DDP"), "s1": _gib(1), "s2": _gib(1)}
    packer = Packer(TWO_80, one, per_gpu=4)
    assert _start(packer, list(one)) == {"ddp1": "0", "s1": "1", "s2": "1"}  # none joins GPU 0


def test_a_ddp_run_on_the_cpu_has_the_machine_to_itself():
    needs = {"a": Need(), "ddp": Need(gpus=2), "b": Need()}
    packer = Packer([], needs, per_gpu=1, jobs=3)
    waiting = list(needs)
    assert _start(packer, waiting) == {"a": "all"} and waiting == ["ddp", "b"]
    packer.release("a")
    assert _start(packer, waiting) == {"ddp": "all"}
    packer.release("ddp")
    assert _start(packer, waiting) == {"b": "all"}


def test_cpu_runs_at_once_share_the_cores_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(packing, "_cores", lambda: 8)
    needs = {"a": Need(), "b": Need(), "c": Need()}
    packer = Packer([], needs, per_gpu=1, jobs=2)
    started = [packer.next(["a", "b", "c"]), packer.next(["b", "c"]), packer.next(["c"])]
    assert started == [("a", {"OMP_NUM_THREADS": "4"}), ("b", {"OMP_NUM_THREADS": "4"}), None]
    assert Packer([], needs, per_gpu=1, jobs=16).next(["a"]) == ("a", {"OMP_NUM_THREADS": "1"})
    assert Packer([], needs, per_gpu=1, jobs=1).next(["a"]) == ("a", {})  # one run: all cores
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting stands
    assert Packer([], needs, per_gpu=1, jobs=2).next(["a"]) == ("a", {})


def test_a_run_too_big_for_every_gpu_is_refused_before_any_starts():
    needs = {"ok60": _gib(60), "huge": _gib(100)}
    packer = Packer(TWO_80 + [Gpu("2", 24 * GIB, "Fake 24GB")], needs, per_gpu=None)
    with pytest.raises(MatrixError) as err:
        packer.check()
    text = str(err.value)
    assert "huge: needs about 100.0 GiB" in text and "Fake 80GB, 80.0 GiB" in text
    assert "ok60" not in text
    assert "BATCH_SIZE" in text and not packer.where
    # A run bigger than 90 % of a GPU but within it runs alone there.
    alone = Packer(TWO_80, {"big": _gib(75), "small": _gib(1)}, per_gpu=None)
    alone.check()
    assert _start(alone, ["big", "small"]) == {"big": "0", "small": "1"}
    # One run per GPU (the default) needs no estimate and refuses nothing, as before.
    assert Packer(TWO_80, needs, per_gpu=1).problems() == []


def test_one_run_per_gpu_by_default_on_the_gpus_the_parent_sees():
    assert packing.visible_ids(2, {"CUDA_VISIBLE_DEVICES": "3, 5"}) == ["3", "5"]
    assert packing.visible_ids(2, {"CUDA_VISIBLE_DEVICES": "GPU-ab12"}) == ["0", "1"]
    assert packing.visible_ids(2, {}) == ["0", "1"]
    gpus = [Gpu("3", 80 * GIB), Gpu("5", 80 * GIB)]
    packer = Packer(gpus, {}, per_gpu=1)
    waiting = ["a", "b", "c"]
    assert _start(packer, waiting) == {"a": "3", "b": "5"} and waiting == ["c"]
    assert packer.most_at_once == 2


def test_need_comes_from_the_memory_estimate(matrix_config):
    run = load_run_config([], matrix_config())
    h100 = Gpu("0", 81559 * 2**20, "NVIDIA H100 80GB HBM3")
    n = need(run, h100)
    info = packing._info(h100)
    assert n.bytes == estimate_memory(run, device_info=info).required_bytes()
    assert 600 * 2**20 < n.bytes < 2 * GIB and not n.alone and n.gpus == 0  # context + a tiny model
    # Where only the out-of-memory fallback's smallest micro-batch fits, it runs alone.
    at_1 = estimate_memory(run, batch_size=1, accumulation=4, device_info=info).required_bytes()
    small = Gpu("0", (at_1 + n.bytes) // 2, "Fake")
    fallback = need(run, small)
    assert fallback.alone and fallback.bytes == at_1 < small.memory_bytes < n.bytes
    auto = load_run_config([], matrix_config(HYPER_PARAM="auto"))
    assert need(auto, h100).alone
    ddp = load_run_config([], matrix_config(GPT2_USE_DDP="y", GPT2_NUM_GPUS="2"))
    assert need(ddp, h100).gpus == 2


def _matrix(tmp_path: Path, runs: list[str]) -> MatrixState:
    root = tmp_path / "m"
    root.mkdir()
    for r in runs:
        (root / r).mkdir()
    return MatrixState.create(root, "m", {r: [] for r in runs}, {}, 0)


FAKE_TRAIN = """
import glob, json, os, sys, time
run_dir = sys.argv[1].split("=", 1)[1]
matrix = os.path.dirname(run_dir)
start = time.time()
open(os.path.join(run_dir, "started"), "w").close()
# A barrier, not a clock: the first runs wait until BARRIER of them have started, so
# they overlap whatever the host's load (a run that the packer never starts beside
# them would leave the barrier unmet, which the test sees, not a timing).
need = int(os.environ.get("BARRIER", "0"))
while len(glob.glob(os.path.join(matrix, "*", "started"))) < need and time.time() - start < 120:
    time.sleep(0.02)
met = len(glob.glob(os.path.join(matrix, "*", "started"))) >= need
json.dump({"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start, "end": time.time(),
           "met": met}, open(os.path.join(run_dir, "seen.json"), "w"))
json.dump({"status": "completed", "iterations": 1}, open(os.path.join(run_dir, "metrics.json"), "w"))
"""


def test_runner_starts_each_process_on_its_gpu_within_memory(tmp_path, monkeypatch):
    fake = tmp_path / "train.py"
    fake.write_text(FAKE_TRAIN)
    monkeypatch.setattr(runner, "TRAIN", fake)
    monkeypatch.setenv("BARRIER", "4")  # two GPUs, two runs each: four at once
    runs = [f"r{i}" for i in range(6)]
    needs = {r: _gib(30) for r in runs}  # two share a GPU (60 of 72 GiB), a third would not
    state = _matrix(tmp_path, runs)
    Runner(state, Packer(TWO_80, needs, per_gpu=None, jobs=8), log=lambda _: None).run_all(runs)
    seen = {r: json.loads((state.root / r / "seen.json").read_text()) for r in runs}
    assert {v["state"] for v in state.runs.values()} == {"completed"}
    for r in runs:  # the environment the process got is the one recorded
        assert seen[r]["gpu"] in ("0", "1")
        assert state.runs[r]["env"] == {"CUDA_VISIBLE_DEVICES": seen[r]["gpu"]}
    # the packer started four at once (every run found the barrier met), two per GPU
    assert all(v["met"] for v in seen.values()), seen
    first = sorted(runs, key=lambda r: seen[r]["start"])[:4]
    assert sorted(seen[r]["gpu"] for r in first) == ["0", "0", "1", "1"]
    for r in runs:  # at no moment more than two runs (60 GiB) on a GPU
        moment = seen[r]["start"] + 0.001
        here = [
            o
            for o in runs
            if seen[o]["gpu"] == seen[r]["gpu"] and seen[o]["start"] <= moment < seen[o]["end"]
        ]
        assert len(here) <= 2, here


def test_a_console_log_made_a_link_is_refused_and_nothing_written_through(tmp_path, monkeypatch):
    fake = tmp_path / "train.py"
    fake.write_text(FAKE_TRAIN)
    monkeypatch.setattr(runner, "TRAIN", fake)
    state = _matrix(tmp_path, ["r0"])
    elsewhere = tmp_path / "someone-elses.log"
    elsewhere.write_text("theirs\n")
    (state.root / "r0" / "console.log").symlink_to(elsewhere)
    Runner(state, log=lambda _: None).run_all(["r0"])
    entry = state.runs["r0"]
    assert entry["state"] == "failed" and "is a symbolic link" in entry["error"], entry
    assert elsewhere.read_text() == "theirs\n"
    assert not (state.root / "r0" / "seen.json").exists()  # the run never started


def test_plan_says_how_runs_are_packed_and_refuses_a_run_that_fits_no_gpu(
    matrix_config, monkeypatch, capsys
):
    path = matrix_config(MATRIX_SEEDS="3", MATRIX_RUNS_PER_GPU="auto", MATRIX_PARALLEL_JOBS="8")
    monkeypatch.setattr(packing, "inventory", lambda run: TWO_80)
    plan.show(*expand([], path))
    out = capsys.readouterr().out
    assert "packing (MATRIX_RUNS_PER_GPU=auto): 2 GPU(s), Fake 80GB (80.0 GiB)" in out
    gpu0 = next(line for line in out.splitlines() if line.startswith("  GPU 0: "))
    assert gpu0.startswith("  GPU 0: 2 runs, ") and "_s1" in gpu0 and "_s3" in gpu0
    assert "  GPU 1: 1 run, " in out

    monkeypatch.setattr(packing, "inventory", lambda run: [Gpu("0", 256 * 2**20, "Fake 256MB")])
    with pytest.raises(MatrixError, match=r"refusing to start: .*_s1: needs about"):
        plan.show(*expand([], path))


def test_a_too_big_run_stops_the_matrix_before_any_process_starts(matrix_config, monkeypatch):
    base, planned = expand(
        [], matrix_config(MATRIX_SEEDS="2", MATRIX_RUNS_PER_GPU="4", MATRIX_REUSE="n")
    )
    state = launch.create(base, planned, [])
    monkeypatch.setattr(packing, "inventory", lambda run: [Gpu("0", 256 * 2**20, "Fake 256MB")])
    monkeypatch.setattr(Runner, "_launch", lambda *a: pytest.fail("a run was started"))
    with pytest.raises(MatrixError, match="refusing to start"):
        launch.train(state, base, [p.run_id for p in planned], [])
    assert {v["state"] for v in MatrixState.load(state.root).runs.values()} == {"pending"}


def test_build_reads_the_setting_and_estimates_only_when_packing(matrix_config):
    base, planned = expand([], matrix_config(MATRIX_SEEDS="2"))
    configs = {p.run_id: p.config for p in planned}
    default = build(base, configs, TWO_80)
    assert default.per_gpu == 1 and all(n.bytes is None for n in default.needs.values())
    packed = build(dataclasses.replace(base, MATRIX_RUNS_PER_GPU="auto"), configs, TWO_80)
    assert packed.per_gpu is None and all(
        n.bytes and n.bytes < GIB * 2 for n in packed.needs.values()
    )
    assert build(base, configs, []).most_at_once == 1  # no GPU: one at a time, as before


def test_a_matrix_whose_console_reader_left_keeps_running_its_runs(tmp_path, monkeypatch):
    """`make test-matrix | tee log` and tee gone: the runner echoes a run's output to a
    closed pipe. It stops echoing (console.log keeps the lines), and the run completes."""
    import io
    import os

    fake = tmp_path / "train.py"
    fake.write_text("for i in range(20000):\n    print('line', i)\n" + FAKE_TRAIN)
    monkeypatch.setattr(runner, "TRAIN", fake)
    read, write = os.pipe()
    os.close(read)  # the reader went away
    closed = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write, "w")))
    monkeypatch.setattr(sys, "stdout", closed)
    state = _matrix(tmp_path, ["r0"])
    try:
        Runner(state, log=lambda _: None).run_all(["r0"])
    finally:
        monkeypatch.undo()
        closed.close()
    assert state.runs["r0"]["state"] == "completed", state.runs["r0"]
    assert "line 19999" in (state.root / "r0" / "console.log").read_text()
