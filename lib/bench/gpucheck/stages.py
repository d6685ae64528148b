"""Stages b to e of `make gpu-check`: each calls the project's own bench code
(lib/bench/step.py, optimizers.py, seqlen.py; lib/estimate) with the shapes
of settings.py and hands its figures to `put` as they come, so a stage cut
short by its time cap keeps what it measured, and a resumed run (figures.py)
measures only what those lack. Stage a is in gputests.py, f in runs.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import settings as S
from lib.bench.gpucheck.figures import Progress, reached

Put = Callable[[str, Any], None]


def run_config(defconfig: str, words: list[str]) -> Any:
    from lib.config.run_config import load_run_config

    return load_run_config(words, path=S.DEFCONFIGS / defconfig)


def _step_figures(r: dict[str, Any], plain: bool) -> dict[str, Any]:
    figures = {
        "ms_per_iter": r["ours"]["ms_per_iter"],
        "mfu": r["ours"]["mfu"],
        "tokens_per_sec": r["ours"]["tokens_per_sec"],
        "batch_size": r["batch_size"],
        "peak_memory_mb": r["peak_memory_mb"],
        "params": r["params"],
        "dtype": r["dtype"],
        "compiled": r["compiled"],
        "speed": r["ours"].get("speed"),
    }
    if plain:
        figures.update(
            plain_ms_per_iter=r["plain"]["ms_per_iter"],
            plain_mfu=r["plain"]["mfu"],
            speed_vs_plain=r["speed_vs_plain"],
            peak_memory_measure=r["peak_memory_measure"] + " (ours and the plain loop resident)",
        )
    return figures


def trainer_step(device: str, work: Path, put: Put) -> None:
    """b: the trainer's step against the plain loop, GPT-2 124M at each
    micro-batch; then each option that could reach 50 % MFU (settings.py
    MFU_OPTIONS_*), ours alone, one short run each; then the best of each
    choice that beat the plain setting, combined; the best run is named. An
    option that fails is recorded with its error and the next one runs; a
    resumed run measures only what its earlier run lacks."""
    from lib.bench.step import run_bench

    g = S.for_device(device)
    done = reached(put)

    def has(key: str) -> bool:
        value = done.get(key)
        return isinstance(value, dict) and "error" not in value

    for batch in g["micro_batches"]:
        if has(f"batch {batch}"):
            continue
        run = run_config(S.BASELINE, S.overrides(device, batch, 1, compile=True))
        r = run_bench(
            run,
            steps=g["bench_steps"],
            warmup=g["bench_warmup"],
            rounds=g["bench_rounds"],
            profile_steps=0,
        )
        put(f"batch {batch}", _step_figures(r, plain=True))

    def short_run(batch: int, symbols: str) -> dict[str, Any]:
        run = run_config(S.BASELINE, S.overrides(device, batch, 1, compile=True, extra=symbols))
        r = run_bench(
            run, steps=g["options_steps"], warmup=2, rounds=1, profile_steps=0, plain=False
        )
        return {**_step_figures(r, plain=False), "set": symbols}

    options = S.MFU_OPTIONS_GPU if device == "cuda" else S.MFU_OPTIONS_CPU
    failed = []
    for name, (batch, symbols) in options.items():
        if has(name):
            continue
        try:
            put(name, short_run(batch or g["options_batch"], symbols))
        except Exception as err:  # one option failing must not hide the others' figures
            put(name, {"error": "\n".join(f"{type(err).__name__}: {err}".splitlines()[-8:])})
            failed.append(name)
    # Ranked by tokens/s: the same model's MFU in proportion (and a CPU has no peak).
    base = done.get(f"batch {g['options_batch']}", {}).get("tokens_per_sec")
    combined = combination(done, options, base)
    if len(combined) > 1 and not has("combined"):
        batch = max((options[n][0] or g["options_batch"]) for n in combined)
        symbols = " ".join(options[n][1] for n in combined if options[n][1])
        try:
            put("combined", {**short_run(batch, symbols), "options": combined})
        except Exception as err:
            put("combined", {"error": f"{type(err).__name__}: {err}", "options": combined})
            failed.append("combined")
    runs = {k: v for k, v in done.items() if isinstance(v, dict) and v.get("tokens_per_sec")}
    if runs:
        best = max(runs, key=lambda k: runs[k]["tokens_per_sec"])
        put("best", {"name": best, **{k: runs[best].get(k) for k in ("mfu", "batch_size")}})
    if failed:
        raise RuntimeError(f"{len(failed)} runs failed: {', '.join(failed)}")


def combination(
    done: dict[str, Any], options: dict[str, tuple[int | None, str]], base: float | None
) -> list[str]:
    """Of each choice (an option name's first word), the option with the most
    tokens/s, if it beats `base` (the plain setting's)."""
    if base is None:
        return []
    best: dict[str, str] = {}
    for name in options:
        speed = (done.get(name) or {}).get("tokens_per_sec")
        choice = name.split()[0]
        if speed is not None and speed > base:
            if choice not in best or speed > done[best[choice]]["tokens_per_sec"]:
                best[choice] = name
    return list(best.values())


def reference_memory(device: str, work: Path, put: Put) -> None:
    """c: the reference configuration's peak over a few trainer steps on
    synthetic tokens, beside `make estimate`'s figure for the same run."""
    from lib.bench.memory import measure_peak
    from lib.data.vocab import configured_vocab
    from lib.estimate.memory import GIB, estimate_memory

    g = S.for_device(device)
    batch, accumulation = (32, 4) if device == "cuda" else (2, 2)
    run = run_config(S.REFERENCE, S.overrides(device, batch, accumulation, compile=True))
    vocab = configured_vocab(run.data)
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
    done = reached(put)
    for batch, accumulation, steps in g["optim_shapes"]:
        if f"{batch}x{accumulation}" in done:
            continue
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


def hamt_ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per length, HAMT's figure over vanilla's: training tokens/s (above 1:
    HAMT faster), peak memory and decode ms/token (below 1: HAMT smaller)."""
    by = {(r["variant"], r["seq_len"]): r for r in rows if "error" not in r}
    ratios: dict[str, dict[str, float]] = {}
    for (variant, length), h in sorted(by.items(), key=lambda kv: kv[0][1]):
        v = by.get(("vanilla", length))
        if variant != "hamt" or v is None:
            continue
        ratios[str(length)] = {
            key: h[key] / v[key]
            for key in ("train_tokens_per_sec", "peak_memory_mb", "gen_ms_per_token")
            if h.get(key) and v.get(key)
        }
    return ratios


def _complete(row: dict[str, Any]) -> bool:
    """A bench-seqlen row with its training and its generation figures."""
    return "error" not in row and "gen_ms_per_token" in row


def seqlen(device: str, work: Path, put: Put) -> None:
    """e: bench-seqlen, vanilla against HAMT (the fla kernel when it imports)
    at each length, compiled once per length with static shapes, and HAMT's
    ratio to vanilla; on a CPU also HAMT on its torch scan. The plot goes to
    work/seqlen.png. Each phase is put under "progress" as it begins, and
    each length's training figures as soon as they are measured, before its
    generation is timed. A resumed run measures only the lengths it lacks;
    at a length whose rows hold training figures but lack generation ones it
    times generation only (training, the compile above all, is what costs)."""
    progress = Progress(put)
    try:
        progress("imports")
        _seqlen(device, work, put, progress)
    finally:
        progress.finish()


def _seqlen(device: str, work: Path, put: Put, progress: Progress) -> None:
    from lib.bench.seqlen import plot_seqlen, run_seqlen_bench
    from lib.data.vocab import configured_vocab

    g = S.for_device(device)
    done = reached(put)
    variants = ("vanilla", "hamt")
    earlier = done.get("rows", [])
    complete = {(r["variant"], r["seq_len"]) for r in earlier if _complete(r)}
    lengths = tuple(t for t in g["seqlen_lengths"] if any((v, t) not in complete for v in variants))
    kept = [r for r in earlier if r["seq_len"] not in lengths]

    def rows_so_far(rows: list[dict[str, Any]]) -> None:
        every = sorted(kept + rows, key=lambda r: r["seq_len"])
        put("rows", every)
        put("ratios", hamt_ratios(every))

    if lengths:
        progress("configuration")
        run = run_config(S.BASELINE, S.overrides(device, 1, 1, compile=True))
        r = run_seqlen_bench(
            run,
            configured_vocab(run.data),
            lengths,
            steps=g["seqlen_steps"],
            tokens=g["seqlen_tokens"],
            variants=variants,
            on_row=rows_so_far,
            on_phase=progress,
            measured=[r for r in earlier if r["seq_len"] in lengths],
        )
        rows_so_far(r["rows"])
        put("kernels", r["kernels"])
        put("compiled", r["compiled"])
        put("settings", r["settings"])
        put("model", {k: r[k] for k in ("n_layer", "n_embd", "vocab_size", "device")})
    if "model" in done:
        progress("plot")
        plot_seqlen(
            {**done["model"], "variants": list(variants), "rows": done["rows"]},
            str(work / "seqlen.png"),
        )
    scanned = {r["seq_len"] for r in done.get("torch_scan_rows", []) if _complete(r)}
    if set(g["torch_scan_lengths"]) <= scanned:
        return
    progress("torch scan: configuration")
    run = run_config(
        S.HAMT,
        S.overrides(
            device,
            1,
            1,
            compile=True,
            tiny=S.TINY_HAMT,
            extra="HAMT_SCAN_BACKEND_TORCH=y",
        ),
    )
    r = run_seqlen_bench(
        run,
        configured_vocab(run.data),
        g["torch_scan_lengths"],
        steps=g["seqlen_steps"],
        tokens=g["seqlen_tokens"],
        variants=("hamt",),
        on_row=lambda rows: put("torch_scan_rows", rows),
        on_phase=lambda phase: progress(f"torch scan: {phase}"),
        measured=done.get("torch_scan_rows"),
    )
    put("torch_scan_rows", r["rows"])
