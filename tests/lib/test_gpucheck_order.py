"""gpu-check's converging order: filed records and git history per stage,
the budget planner's promise, resuming a stage cut short, and the compile
caches packed into one archive and unpacked in the next window."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile

import pytest

from lib.bench.gpucheck import cache, plan, record
from lib.bench.gpucheck.driver import plan_text, run_stage, stage_env
from lib.bench.gpucheck.figures import Figures, Progress
from lib.bench.gpucheck.plan import STAGES, History


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit(repo, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    return git(repo, "rev-parse", "HEAD")


def filed(bench_data, kind, date, sha, stages, device="cuda"):
    env = {"device": device, "device_name": "NVIDIA H200", "date": date, "commit": sha}
    path = bench_data / kind / f"gpu_check_{date[:10]}-{date[11:19].replace(':', '')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": env, "stages": stages}))


def test_order_never_finished_then_changed_since_then_the_rest(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    old = commit(repo, {"lib/bench/optimizers.py": "1", "lib/estimate/memory.py": "1"})
    # Since then only the optimizer bench changed: d is stale, c is not.
    commit(repo, {"lib/bench/optimizers.py": "2", "docs/benchmarks.md": "x"})
    bench = tmp_path / "bench-data"
    done = {"status": "done", "figures": {"x": 1}}
    filed(bench, "h200", "2026-11-26 22:00:00 +0000", old, {"c": done, "d": done, "b": done})
    filed(bench, "h200", "2026-11-27 09:00:00 +0000", old, {"c": done})  # c checked later
    # e once "failed" at its cap (records before `partial`): never finished.
    cut = {"status": "failed", "error": "x\nstopped at its time cap of 180 s (figures so far kept)"}
    filed(bench, "h200", "2026-11-26 22:30:00 +0000", old, {"e": cut, "a": {"status": "skipped"}})
    filed(bench, "h100", "2026-11-26 22:00:00 +0000", old, {"a": done, "f": done})  # another GPU
    filed(bench, "h200", "2026-11-28 00:00:00 +0000", old, {"f": done}, device="cpu")
    history = record.history("h200", bench)
    assert history["e"].finished is None and history["e"].partial is not None
    assert history["c"].finished["date"].startswith("2026-11-27")

    def changed(sha):
        return record.changed_since.__wrapped__(sha, repo)

    assert changed(old) == {"lib/bench/optimizers.py", "docs/benchmarks.md"}
    assert changed("0" * 40) is None  # a commit git does not know: stale
    planned = plan.order_stages(history, changed)
    # a, e, f never finished here; d's bench changed; b and c unchanged, b checked longer ago.
    assert [(p.name, p.group) for p in planned] == [
        ("a", 1), ("e", 1), ("f", 1), ("d", 2), ("b", 3), ("c", 3)
    ]  # fmt: skip
    assert "lib/bench/optimizers.py changed since" in planned[3].reason
    # Git cannot tell (no git on the node): every finished figure is stale.
    assert {p.group for p in plan.order_stages(history, lambda sha: None)} == {1, 2}
    # STAGES= keeps the order given.
    assert [p.name for p in plan.order_stages(history, changed, ["c", "a"])] == ["c", "a"]


def test_a_stage_that_failed_or_missed_a_goal_comes_first_once_its_code_changed():
    # What changed since may be the fix: verifying it comes before figures never taken.
    def run(stage):
        return {"commit": "old", "date": "2026-11-30 15:58:40 +0000", "stage": stage}

    def prune(share):
        shape = {"adamwprune": {"mask_share_of_step": share}}
        return {"status": "done", "figures": {"16x1": shape}}

    history = {
        "a": History(
            run(
                {
                    "status": "failed",
                    "figures": {"counts": {"passed": 14, "failed": 4, "skipped": 0}},
                }
            )
        ),
        "b": History(run({"status": "done", "figures": {"batch 32": {"mfu": 0.43}}})),
        "c": History(run({"status": "failed", "error": "Traceback"})),  # no figures: it failed
        "d": History(run(prune(0.2655))),
    }
    moved = {"lib/prune/threshold.py", "tests/hamt/test_hamt_kernel.py", "lib/train/step.py"}
    planned = {p.name: p for p in plan.order_stages(history, lambda sha: moved)}
    assert [(n, planned[n].group) for n in planned] == [
        ("a", 0), ("b", 0), ("c", 0), ("d", 0), ("e", 1), ("f", 1)
    ]  # fmt: skip
    assert planned["d"].reason.startswith(
        "a fix to verify: missed AdamWPrune's mask work under 1 % of a step; "
        "lib/prune/threshold.py and 1 more changed since"
    )
    assert "missed it failed" in planned["c"].reason
    # Unchanged code: nothing to verify, whatever the figures missed.
    still = {p.name: p.group for p in plan.order_stages(history, lambda sha: set())}
    assert still == {"a": 3, "b": 3, "c": 3, "d": 3, "e": 1, "f": 1}
    # Goals met, code changed: new figures, after the stages never finished.
    history["d"] = History(run(prune(0.004)))
    assert {p.name: p.group for p in plan.order_stages(history, lambda sha: moved)}["d"] == 2


def test_a_stage_cut_short_resumes_only_while_its_code_is_unchanged():
    partial = {
        "commit": "p",
        "date": "2026-11-27 10:00:00 +0000",
        "stage": {"status": "partial", "figures": {"rows": [1]}},
    }
    finished = {"commit": "f", "date": "2026-11-26 10:00:00 +0000", "stage": {}}
    history = {"e": History(finished, partial)}
    unchanged = plan.order_stages(history, lambda sha: set(), ["e"])[0]
    assert unchanged.resume == {"rows": [1]} and "resumes the run cut short" in unchanged.reason
    assert unchanged.group == 3
    moved = plan.order_stages(history, lambda sha: {"lib/bench/seqlen.py"}, ["e"])[0]
    assert moved.resume is None and moved.group == 2
    # A file e does not exercise leaves it resumable.
    other = plan.order_stages(history, lambda sha: {"lib/optim/spam.py"}, ["e"])[0]
    assert other.resume == {"rows": [1]}


def test_paths_longest_entry_decides():
    a, f = STAGES["a"], STAGES["f"]
    assert a.exercises("hamt/kernel.py") and a.exercises("tests/hamt/test_hamt_kernel.py")
    assert not a.exercises("lib/bench/gpucheck/report.py")  # record keeping, no figure
    assert a.exercises("lib/bench/gpucheck/gputests.py")
    assert not a.exercises("docs/benchmarks.md") and not a.exercises("lib/results/tables.py")
    assert f.exercises("lib/bench/gpucheck/runs.py") and not f.exercises(
        "lib/bench/gpucheck/plan.py"
    )


def test_the_planner_says_which_stages_it_expects_to_reach():
    order = ["e", "f", "a", "b", "c", "d"]
    sure, maybe = plan.expected(order, "cuda", plan.DEFAULT_BUDGET_S)
    # 180 + 180 + 150 = 510 of 540 s; b (240), c (90), d (150) do not fit after that.
    assert sure == ["e", "f", "a"] and maybe == ["b", "c", "d"]
    assert plan.expected(["c", "d"], "cuda", 240) == (["c", "d"], [])
    assert plan.expected(["b", "c"], "cuda", 200) == (["c"], ["b"])  # b's 240 s never fits
    planned = [plan.Planned(n, 1, "no finished run") for n in order]
    text = plan_text(planned, "cuda", plan.DEFAULT_BUDGET_S)
    assert text[-1] == (
        "expects to reach e, f, a (510 s of caps in a 540 s budget); "
        "b, c, d only if earlier stages end before their caps"
    )
    # The default budget holds every stage in two windows.
    assert sum(s.gpu_cap_s for s in STAGES.values()) <= 2 * plan.DEFAULT_BUDGET_S


def _stage_with(tmp_path, stand_ins: str, name: str, cap: float, resume=None, caches=None):
    """run_stage in a worker whose sitecustomize.py holds `stand_ins` (code run
    at its start), compiling into `caches`; (the stage's record, the lines it logged)."""
    (tmp_path / "sitecustomize.py").write_text(stand_ins)
    env = stage_env(None, caches)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    lines: list[str] = []
    result = run_stage(STAGES[name], cap, "cpu", tmp_path / "work", env, lines.append, resume)
    return result, lines


def test_run_stage_hands_a_resumed_stage_its_figures_and_keeps_what_it_adds(tmp_path, monkeypatch):
    """Stage f resumed with its inference figure: it measures the rest only.
    The item functions are replaced by stand-ins that note what they ran."""
    stand_ins = (
        "import lib.bench.gpucheck.runs as r\n"
        "r.inference = lambda device, work: (_ for _ in ()).throw(AssertionError('re-measured'))\n"
        "r.packing = lambda device, work: {'packed_speedup': 2.0}\n"
        "r.speed_option = lambda device, symbols: {'ms_per_iter': 1.0, 'set': symbols}\n"
    )
    result, lines = _stage_with(tmp_path, stand_ins, "f", 60, {"inference": {"n": 1}})
    assert result["status"] == "done", "\n".join(lines)
    fig = result["figures"]
    assert fig["inference"] == {"n": 1} and fig["packing"] == {"packed_speedup": 2.0}
    assert fig["speed loss plain"]["set"] == "TRAIN_LOSS_IMPL_PLAIN=y"


def test_figures_start_from_the_resumed_run(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"batch 32": {"mfu": 0.4}, "sdpa cudnn": {"error": "x"}}))
    put = Figures(path)
    assert put.has("batch 32") and not put.has("sdpa cudnn") and not put.has("loss chunked")
    put("loss chunked", {"mfu": 0.45})
    assert set(json.loads(path.read_text())) == {"batch 32", "sdpa cudnn", "loss chunked"}


def _tree(root, files):
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_caches_pack_into_one_archive_and_unpack_where_they_were(tmp_path):
    root = tmp_path / "cache"
    _tree(
        root,
        {
            "triton/ab12/kernel.cubin": b"\x01" * 3000,
            "triton/ab12/__grp__kernel.json": b'{"child_paths": {}}',
            "inductor/fxgraph/x/key": b"graph",
        },
    )
    env = cache.environment(root)
    assert env["TRITON_CACHE_DIR"] == str(root / "triton")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
    out = tmp_path / "out"
    out.mkdir()
    packed = cache.pack(out, root)
    assert packed["packed"] == 3 and packed["groups_left_out"] == 0
    assert [p.name for p in out.iterdir()] == [cache.ARCHIVE]
    fresh = tmp_path / "next-window"
    restored = cache.restore(out / cache.ARCHIVE, fresh)
    assert restored["restored"] == 3
    assert (fresh / "triton/ab12/kernel.cubin").read_bytes() == b"\x01" * 3000
    assert (fresh / "inductor/fxgraph/x/key").read_bytes() == b"graph"
    assert cache.restore(tmp_path / "absent.tar.gz", fresh)["restored"] == 0


def test_packing_leaves_out_the_oldest_folders_to_fit(tmp_path):
    root = tmp_path / "cache"
    for i, age in enumerate((300, 200, 100)):  # folder 2 is the newest
        _tree(root, {f"triton/k{i}/kernel.cubin": os.urandom(40_000)})
        os.utime(root / f"triton/k{i}/kernel.cubin", (1e9 - age, 1e9 - age))
    packed = cache.pack(tmp_path, root, max_bytes=100_000)
    assert packed["groups"] == 2 and packed["groups_left_out"] == 1
    with tarfile.open(tmp_path / cache.ARCHIVE) as tar:
        assert sorted(tar.getnames()) == ["triton/k1/kernel.cubin", "triton/k2/kernel.cubin"]
    assert packed["bytes"] <= 100_000


def test_an_archive_with_paths_outside_is_refused(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 0
        tar.addfile(info)
    result = cache.restore(bad, tmp_path / "root")
    assert result["restored"] == 0 and "could not be unpacked" in result["note"]
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("status, expect", [("done", True), ("failed", True), ("partial", False)])
def test_finished(status, expect):
    assert record.finished({"status": status}) is expect
    assert record.finished({"status": "skipped"}) is None


def test_stage_b_combines_the_best_option_of_each_choice_that_beat_the_plain_setting():
    from lib.bench.gpucheck.settings import MFU_OPTIONS_GPU
    from lib.bench.gpucheck.stages import combination

    done = {
        "sdpa cudnn": {"tokens_per_sec": 120.0},
        "sdpa flash": {"tokens_per_sec": 110.0},
        "loss chunked": {"tokens_per_sec": 90.0},  # slower than the plain setting
        "loss liger": {"error": "liger-kernel is not installed"},
        "micro-batch 64": {"tokens_per_sec": 105.0},
    }
    assert combination(done, MFU_OPTIONS_GPU, 100.0) == ["sdpa cudnn", "micro-batch 64"]
    assert combination(done, MFU_OPTIONS_GPU, 200.0) == []
    assert combination(done, MFU_OPTIONS_GPU, None) == []


def test_progress_puts_each_phase_as_it_begins_and_closes_the_one_before(tmp_path):
    clock = iter([100.0, 101.5, 104.0, 110.25]).__next__
    put = Figures(tmp_path / "e.json", began=99.0)
    progress = Progress(put, clock=clock)
    progress("imports")  # at 100.0: the worker's start-up took 1 s
    progress("build models")
    # What a stage killed now leaves on disk: the phase it was in, still open.
    on_disk = json.loads((tmp_path / "e.json").read_text())["progress"]
    assert on_disk == [
        {"phase": Progress.START, "at_s": 0.0, "seconds": 1.0},
        {"phase": "imports", "at_s": 1.0, "seconds": 1.5},
        {"phase": "build models", "at_s": 2.5},
    ]
    progress("hamt 64 warm-up")
    progress.finish()
    assert put.figures["progress"][-2:] == [
        {"phase": "build models", "at_s": 2.5, "seconds": 2.5},
        {"phase": "hamt 64 warm-up", "at_s": 5.0, "seconds": 6.25},
    ]
    plain: dict = {}  # a put that is no Figures: the clock starts with the Progress
    Progress(plain.__setitem__, clock=iter([7.0, 9.0]).__next__)("imports")
    assert plain["progress"] == [{"phase": "imports", "at_s": 2.0}]


def _row(variant: str, t: int, generated: bool = True) -> dict:
    row = {"variant": variant, "seq_len": t, "train_tokens_per_sec": 1.0, "peak_memory_mb": 1.0}
    return {**row, "gen_ms_per_token": 1.0, "state_bytes": 1} if generated else row


def test_stage_e_resumed_times_only_the_generation_it_lacks_and_notes_its_phases(
    tmp_path, monkeypatch
):
    """A run cut during hamt's generation at 64: 32 is kept, 64's training
    figures go back to run_seqlen_bench, which times what they lack."""
    import lib.bench.seqlen as seqlen_module
    from lib.bench.gpucheck import stages

    calls = []

    def bench(run, vocab, lengths, *, variants, on_row, on_phase, measured, **_):
        calls.append((lengths, variants, measured))
        on_phase("build models")
        rows = [
            {**r, "gen_ms_per_token": 2.0} if "gen_ms_per_token" not in r else r
            for r in (measured or [_row(v, t, False) for v in variants for t in lengths])
        ]
        on_row(rows)
        keys = ("kernels", "compiled", "settings")
        model = {"n_layer": 2, "n_embd": 64, "vocab_size": 65, "device": "cpu"}
        return {"rows": rows, **dict.fromkeys(keys, {}), **model}

    monkeypatch.setattr(seqlen_module, "run_seqlen_bench", bench)
    monkeypatch.setattr(seqlen_module, "plot_seqlen", lambda result, path: None)
    path = tmp_path / "e.json"
    earlier = [_row("vanilla", 64), _row("hamt", 64, False), _row("vanilla", 32), _row("hamt", 32)]
    path.write_text(json.dumps({"rows": earlier, "progress": [{"phase": "old", "at_s": 0.0}]}))
    stages.seqlen("cpu", tmp_path, Figures(path))
    (lengths, variants, measured), scan = calls
    assert (lengths, variants, measured) == ((64,), ("vanilla", "hamt"), earlier[:2])
    assert scan[:2] == ((32,), ("hamt",))  # the CPU's torch-scan run
    fig = json.loads(path.read_text())
    assert [(r["variant"], r["seq_len"]) for r in fig["rows"]] == [
        ("vanilla", 32),
        ("hamt", 32),
        ("vanilla", 64),
        ("hamt", 64),
    ]
    assert fig["rows"][3]["gen_ms_per_token"] == 2.0 and fig["rows"][2] == earlier[0]
    assert [p["phase"] for p in fig["progress"]] == [
        "imports",
        "configuration",
        "build models",
        "plot",
        "torch scan: configuration",
        "torch scan: build models",
    ]
    assert all(p["seconds"] >= 0 for p in fig["progress"])  # all closed: the stage ended
    # Resumed again, nothing is lacking: no bench runs, the plot is drawn.
    calls.clear()
    stages.seqlen("cpu", tmp_path, Figures(path))
    assert calls == []
    assert [p["phase"] for p in json.loads(path.read_text())["progress"]] == ["imports", "plot"]


def test_a_stage_e_killed_keeps_its_training_figures_and_the_phase_it_was_in(tmp_path):
    """The worker killed during a generation (as at the cap): the record holds
    the rows' training figures and the open phase, timed from the worker's start."""
    stand_ins = (
        "import os, signal\n"
        "import lib.bench.seqlen as s\n"
        "def bench(run, vocab, lengths, *, variants, on_row, on_phase, **_):\n"
        "    on_phase('build models')\n"
        "    on_row([{'variant': v, 'seq_len': 32, 'train_tokens_per_sec': 9.0} for v in variants])\n"
        "    on_phase('vanilla 32 generation')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "s.run_seqlen_bench = bench\n"
    )
    result, lines = _stage_with(tmp_path, stand_ins, "e", 120)
    assert result["status"] == "failed", "\n".join(lines)
    fig = result["figures"]
    assert [r["train_tokens_per_sec"] for r in fig["rows"]] == [9.0, 9.0]
    phases = fig["progress"]
    assert [p["phase"] for p in phases] == [
        Progress.START,
        "imports",
        "configuration",
        "build models",
        "vanilla 32 generation",
    ]
    assert "seconds" not in phases[-1] and phases[0]["seconds"] > 0  # torch's import, at least


def test_a_stage_record_says_what_it_found_in_the_carried_caches_and_wrote(tmp_path, monkeypatch):
    # Item 3 of the GPU issue: whether the next check reuses the unpacked caches.
    caches = tmp_path / "caches"
    _tree(caches / "triton" / "old", {"a.cubin": b"1", "b.json": b"2"})
    stand_ins = (
        "import os, lib.bench.gpucheck.stages as s, torch._dynamo.utils as u\n"
        "def stage(device, work, put):\n"
        "    d = os.environ['TRITON_CACHE_DIR'] + '/new'\n"
        "    os.makedirs(d)\n"
        "    for n in 'xyz':\n"
        "        open(f'{d}/{n}', 'w').close()\n"
        "    u.counters['inductor']['fxgraph_cache_hit'] += 4\n"
        "    u.counters['inductor']['fxgraph_cache_miss'] += 1\n"
        "    put('x', 1)\n"
        "s.reference_memory = stage\n"
    )
    result, lines = _stage_with(tmp_path, stand_ins, "c", 60, caches=caches)
    assert result["status"] == "done", "\n".join(lines)
    assert result["compile_cache"] == {
        "files_before": 2,
        "files_written": 3,
        "fxgraph_cache_hit": 4,
        "fxgraph_cache_miss": 1,
        "autograd_cache_hit": 0,
        "autograd_cache_miss": 0,
    }
    # Nothing compiled in the worker itself (pytest's or a script's subprocess did):
    # the file counts alone.
    quiet = "import lib.bench.gpucheck.stages as s\ns.reference_memory = lambda d, w, put: None\n"
    result, _ = _stage_with(tmp_path, quiet, "c", 60, caches=caches)
    assert result["compile_cache"] == {"files_before": 5, "files_written": 0}
