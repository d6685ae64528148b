"""Stages a to e of `make gpu-check`: each calls the project's own bench code
(lib/bench/step.py, optimizers.py, seqlen.py; lib/estimate) with the shapes
of settings.py and hands its figures to `put` as they come, so a stage cut
short by its time cap keeps what it measured. Stage f is in runs.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import settings as S
from lib.bench.gpucheck import testlog

Put = Callable[[str, Any], None]


def run_config(defconfig: str, words: list[str]) -> Any:
    from lib.config.run_config import load_run_config

    return load_run_config(words, path=S.DEFCONFIGS / defconfig)


def gpu_tests(device: str, work: Path, put: Put) -> None:
    """a: `pytest -m gpu`, one status per test as each ends (testlog.py), so a
    run cut short by the time cap keeps what it reached and names the test
    that was running. Only the files that hold GPU tests are collected: a GPU
    node lacks the dev and evaluation packages (import-linter, lm-eval) other
    test files import, and one import error at collection would stop the
    whole run. On a CPU they all skip."""
    log = work / "gpu-tests.jsonl"
    log.unlink(missing_ok=True)
    paths = sorted(
        str(p.relative_to(S.ROOT))
        for p in (S.ROOT / "tests").rglob("test_*.py")
        if "mark.gpu" in p.read_text()
    )
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "lib.bench.gpucheck.testlog", "--continue-on-collection-errors", *paths]
    env = {**os.environ, testlog.ENV: str(log)}
    out = work / "gpu-tests.out"  # a file, not a pipe: long tracebacks would fill a pipe
    with out.open("w") as sink:
        proc = subprocess.Popen(
            command, cwd=S.ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True
        )
    seen = -1
    while True:
        ended = proc.poll() is not None
        events = _events(log)
        if len(events) != seen:
            seen = len(events)
            counts = _put_tests(events, put)
        if ended:
            break
        time.sleep(1.0)
    output = out.read_text()
    if proc.returncode not in (0, 5) or counts["failed"]:  # 5: nothing collected
        raise RuntimeError(
            f"{counts['failed']} GPU tests failed (pytest exit {proc.returncode}):\n"
            + "\n".join(output.strip().splitlines()[-8:])
        )


def _events(log: Path) -> list[dict[str, Any]]:
    """The complete lines testlog.py has written so far (the last may be half written)."""
    text = log.read_text() if log.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def _put_tests(events: list[dict[str, Any]], put: Put) -> dict[str, int]:
    """The outcome, seconds and error of every test that ended, and the one running."""
    tests: dict[str, str] = {}
    seconds: dict[str, float] = {}
    failures: dict[str, str] = {}
    running = None
    for e in events:
        if e["event"] == "start":
            running = e["test"]
            continue
        tests[e["test"]] = e["outcome"]
        seconds[e["test"]] = e.get("seconds", 0.0)
        if e["outcome"] == "failed":
            failures[e["test"]] = e.get("error", "")
        if running == e["test"]:
            running = None
    counts = {s: sum(v == s for v in tests.values()) for s in ("passed", "failed", "skipped")}
    put("counts", counts)
    put("tests", tests)
    put("seconds", seconds)
    put("failures", failures)
    put("running", running)
    return counts


def trainer_step(device: str, work: Path, put: Put) -> None:
    """b: the trainer's step against the plain loop, GPT-2 124M at each micro-batch."""
    from lib.bench.step import run_bench

    g = S.for_device(device)
    for batch in g["micro_batches"]:
        run = run_config(S.BASELINE, S.overrides(device, batch, 1, compile=True))
        r = run_bench(
            run,
            steps=g["bench_steps"],
            warmup=g["bench_warmup"],
            rounds=g["bench_rounds"],
            profile_steps=0,
        )
        put(
            f"batch {batch}",
            {
                "ms_per_iter": r["ours"]["ms_per_iter"],
                "mfu": r["ours"]["mfu"],
                "tokens_per_sec": r["ours"]["tokens_per_sec"],
                "plain_ms_per_iter": r["plain"]["ms_per_iter"],
                "plain_mfu": r["plain"]["mfu"],
                "speed_vs_plain": r["speed_vs_plain"],
                "peak_memory_mb": r["peak_memory_mb"],
                "peak_memory_measure": r["peak_memory_measure"]
                + " (ours and the plain loop resident)",
                "params": r["params"],
                "dtype": r["dtype"],
                "compiled": r["compiled"],
            },
        )


def reference_memory(device: str, work: Path, put: Put) -> None:
    """c: the reference configuration's peak over a few trainer steps on
    synthetic tokens, beside `make estimate`'s figure for the same run."""
    from lib.data.vocab import configured_vocab
    from lib.estimate.measure import measure_peak
    from lib.estimate.memory import GIB, estimate_memory

    g = S.for_device(device)
    batch, accumulation = (32, 4) if device == "cuda" else (2, 2)
    run = run_config(S.REFERENCE, S.overrides(device, batch, accumulation, compile=True))
    vocab = configured_vocab(run)
    estimate = estimate_memory(run, vocab).total_bytes
    put("estimate_gib", estimate / GIB)
    measured = measure_peak(run, vocab, g["reference_steps"])
    put("measured_gib", measured / GIB)
    put("published_gib", S.PUBLISHED_REFERENCE_GIB)
    put("estimate_error_percent", 100 * (estimate - measured) / measured)
    put(
        "shape",
        {
            "batch": batch,
            "accumulation": accumulation,
            "steps": g["reference_steps"],
            "compiled": bool(run.COMPILE_MODEL),
        },
    )


def optimizer_cost(device: str, work: Path, put: Put) -> None:
    """d: bench-optim (fused AdamW, AdamWSPAM multi-tensor and compiled,
    AdamWPrune bitter7) at each batch x accumulation."""
    from lib.bench.optimizers import run_optimizer_bench

    g = S.for_device(device)
    for batch, accumulation, steps in g["optim_shapes"]:
        run = run_config(
            S.REFERENCE,
            S.overrides(device, batch, accumulation, compile=False, extra=g["optim_symbols"]),
        )
        r = run_optimizer_bench(run, steps=steps, rounds=g["optim_rounds"])
        put(
            f"{batch}x{accumulation}",
            {
                name: {k: v for k, v in r[name].items() if isinstance(v, (int, float, str))}
                for name in r
                if isinstance(r[name], dict) and "full_step_ms" in r[name]
            },
        )


def seqlen(device: str, work: Path, put: Put) -> None:
    """e: bench-seqlen, vanilla against HAMT (the fla kernel when it imports),
    then HAMT on its torch scan; the plot goes to work/seqlen.png."""
    from lib.bench.seqlen import plot_seqlen, run_seqlen_bench
    from lib.data.vocab import configured_vocab

    g = S.for_device(device)
    run = run_config(S.BASELINE, S.overrides(device, 1, 1, compile=True))
    r = run_seqlen_bench(
        run,
        configured_vocab(run),
        g["seqlen_lengths"],
        steps=g["seqlen_steps"],
        tokens=g["seqlen_tokens"],
        variants=("vanilla", "hamt"),
        on_row=lambda rows: put("rows", rows),
    )
    put("rows", r["rows"])
    put("kernels", r["kernels"])
    plot_seqlen(r, str(work / "seqlen.png"))
    run = run_config(
        S.HAMT,
        S.overrides(
            device,
            1,
            1,
            compile=True,
            tiny=S.TINY_HAMT,
            extra=(
                "HAMT_SCAN_BACKEND_TORCH=y"
                + (" HAMT_N_LAYER=12 HAMT_N_EMBD=768" if device == "cuda" else "")
            ),
        ),
    )
    r = run_seqlen_bench(
        run,
        configured_vocab(run),
        g["torch_scan_lengths"],
        steps=g["seqlen_steps"],
        tokens=g["seqlen_tokens"],
        variants=("hamt",),
        on_row=lambda rows: put("torch_scan_rows", rows),
    )
    put("torch_scan_rows", r["rows"])
