"""The two sides run back to back, alternating (ours, nanoGPT, ours, nanoGPT ...),
and the record of the pairs: each side's wall clock and figures, both final models'
scores, the ratios ours / nanoGPT, the host, both commits and both commands."""

from __future__ import annotations

import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lib.atomic import read_json_object, write_text_atomic
from lib.results.nanogpt.scoring import score_finals
from lib.results.nanogpt.work import (
    DEFCONFIG,
    ITERS,
    NANOGPT_CKPT,
    NANOGPT_SEED,
    SEED_CONFIG,
    SEED_CONFIG_TEXT,
    TOKENS_PER_ITER,
    CompareError,
    nanogpt_args,
    nanogpt_seed,
    ours_args,
    parse_nanogpt_log,
    prepare_nanogpt_data,
)

# What limits the instruction sets of PyTorch's own kernels, MKL's and oneDNN's.
KERNEL_LIMITS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def run_nanogpt(
    nanogpt: Path, python: str, log: Path, iters: int = ITERS, seed: int | None = None
) -> dict[str, Any]:
    """nanoGPT's train.py in its folder, its output in log; wall clock and figures
    (seed: through SEED_CONFIG; None: its own)."""
    if seed is not None:
        text = SEED_CONFIG_TEXT.format(fixed=NANOGPT_SEED, shift=seed - NANOGPT_SEED)
        write_text_atomic(nanogpt / SEED_CONFIG, text)
    command = [python, "train.py", *nanogpt_args(iters, seeded=seed is not None)]
    (nanogpt / NANOGPT_CKPT).unlink(missing_ok=True)  # an earlier run's is not this one's
    with log.open("w") as out:
        start = time.perf_counter()
        done = subprocess.run(command, cwd=nanogpt, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    text = log.read_text(errors="replace")
    if done.returncode != 0:
        tail = "\n".join(text.splitlines()[-15:])
        raise CompareError(f"nanoGPT exited {done.returncode} (log {log}):\n{tail}")
    ran = nanogpt_seed(text, seed)
    return {"wall_s": wall, "log": str(log), "seed": ran, **parse_nanogpt_log(text)}


def ours_figures(run_dir: Path) -> dict[str, Any]:
    """Our side's figures from the run's metrics.json."""
    m = read_json_object(run_dir / "metrics.json")
    if m.get("status") != "completed" or m.get("final_val_loss") is None:
        raise CompareError(f"{run_dir}/metrics.json is not a completed run with a val loss")
    if m.get("tokens_per_iter") != TOKENS_PER_ITER:
        raise CompareError(
            f"{run_dir} ran {m.get('tokens_per_iter')} tokens per step, not "
            f"{TOKENS_PER_ITER}: is .config {DEFCONFIG}?"
        )
    return {
        "run_id": m.get("run_id"),
        "steps": m["iterations"],
        "ms_per_iter": m["ms_per_iter"],
        "tokens_per_sec": m["tokens_per_sec"],
        "final_val_loss": m["final_val_loss"],
        "seed": _config_seed(run_dir / "config.txt"),
        "cpu_linear": (m.get("speed") or {}).get("cpu_linear"),
        "host_malloc": (m.get("speed") or {}).get("host_malloc"),
        "page_faults_per_iter": m.get("page_faults_per_iter"),
        "system_ms_per_iter": m.get("system_ms_per_iter"),
        "torch": (m.get("environment") or {}).get("torch"),
        "optimizer_impl": m.get("optimizer_impl"),
    }


def _config_seed(config: Path) -> int | None:
    """The run's TRAIN_SEED, from the config.txt it ran."""
    try:
        found = re.search(r"^CONFIG_TRAIN_SEED=(\d+)$", config.read_text(), re.M)
    except OSError:
        return None
    return int(found[1]) if found else None


def run_ours(
    checkout: Path,
    data: Path,
    run_name: str,
    iters: int = ITERS,
    seed: int | None = None,
    ours_set: str = "",
) -> dict[str, Any]:
    """`make` in checkout; wall clock and the run's own figures."""
    command = [
        "make",
        "--no-print-directory",
        "-C",
        str(checkout),
        *ours_args(data, run_name, iters, seed, ours_set),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise CompareError(f"`make` exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return {"wall_s": wall, **ours_figures(checkout / "results" / run_name)}


def pair_ratios(ours: dict[str, Any], nanogpt: dict[str, Any]) -> dict[str, float]:
    """ours/nanoGPT: tokens/s of the step (above 1: ours faster), wall time of the whole
    command (below 1: ours faster), and tokens/s over the whole command."""
    whole = {
        side: r["steps"] * TOKENS_PER_ITER / r["wall_s"]
        for side, r in (("ours", ours), ("nanogpt", nanogpt))
    }
    return {
        "tokens_per_sec": ours["tokens_per_sec"] / nanogpt["tokens_per_sec"],
        "wall": ours["wall_s"] / nanogpt["wall_s"],
        "whole_run_tokens_per_sec": whole["ours"] / whole["nanogpt"],
        "final_val_loss": ours["final_val_loss"] / nanogpt["final_val_loss"],
        **(
            {"whole_val_loss": ours["whole_val_loss"] / nanogpt["whole_val_loss"]}
            if "whole_val_loss" in ours and "whole_val_loss" in nanogpt
            else {}
        ),
    }


def git_commit(folder: Path) -> str | None:
    out = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def git_dirty(folder: Path) -> bool | None:
    """Whether tracked files differ from the commit (no index refresh is written)."""
    out = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(folder), "diff", "--quiet", "HEAD", "--"],
        capture_output=True,
    )
    return {0: False, 1: True}.get(out.returncode)


def host() -> dict[str, Any]:
    import torch

    from lib.run.environment import cpu_name, usable_cpus

    return {
        "node": platform.node(),
        "cpu": cpu_name(),
        "cores": usable_cpus(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        # set to imitate a host with fewer instructions; both sides inherit them
        "kernel_limits": {k: os.environ[k] for k in KERNEL_LIMITS if os.environ.get(k)},
        "python": sys.executable,
    }


def compare(
    nanogpt: Path,
    data: Path,
    pairs: int,
    checkout: Path,
    label: str,
    python: str = sys.executable,
    iters: int = ITERS,
    seeds: list[int] | None = None,
    score: Any = score_finals,
    ours_set: str = "",
) -> dict[str, Any]:
    """Ours, nanoGPT, ours, nanoGPT ...: pairs of runs back to back, and the record.
    After each pair (untimed), `score` gives both final models' whole-split loss."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    fed = prepare_nanogpt_data(nanogpt, data)
    defconfig = ["make", "--no-print-directory", "-C", str(checkout), f"defconfig-{DEFCONFIG}"]
    subprocess.run(defconfig, check=True, stdout=subprocess.DEVNULL)
    done = []
    for i in range(1, pairs + 1):
        load = os.getloadavg()[0]  # the 1-minute load average as each side starts
        run_name, seed = (
            f"nanogpt-compare-{label}-{i}",
            seeds[(i - 1) % len(seeds)] if seeds else None,
        )
        ours = {"load_before": load, **run_ours(checkout, data, run_name, iters, seed, ours_set)}
        print(f"pair {i}: ours {ours['ms_per_iter']:.1f} ms/iter, {ours['wall_s']:.1f} s")
        log = nanogpt / f"nanogpt-compare-{label}-{i}.log"
        load = os.getloadavg()[0]
        theirs = {"load_before": load, **run_nanogpt(nanogpt, python, log, iters, seed)}
        print(f"pair {i}: nanoGPT {theirs['ms_per_iter']:.1f} ms/iter, {theirs['wall_s']:.1f} s")
        scored = score(checkout / "results" / run_name, nanogpt / NANOGPT_CKPT, data, iters)
        ours["whole_val_loss"], theirs["whole_val_loss"] = scored["ours"], scored["nanogpt"]
        print(
            f"pair {i}: every validation token: ours {scored['ours']:.4f}, "
            f"nanoGPT {scored['nanogpt']:.4f}"
        )
        done.append(
            {
                "pair": i,
                "ours": ours,
                "nanogpt": theirs,
                "ratio": pair_ratios(ours, theirs),
            }
        )
    return {
        "label": label,
        "date": started,
        "host": host(),
        "work": {
            "defconfig": DEFCONFIG,
            "iters": iters,
            "tokens_per_iter": TOKENS_PER_ITER,
            "data": fed,
            "scored_tokens": fed["val_tokens"] - 1,
        },
        "ours_commit": git_commit(checkout),
        "ours_dirty": git_dirty(checkout),
        "nanogpt_commit": git_commit(nanogpt),
        "nanogpt_python": python,
        "ours_set": ours_set,
        "commands": {  # ours in the checkout, nanoGPT's in its folder
            "ours": [
                f"make defconfig-{DEFCONFIG}",
                shlex.join(
                    ["make", *ours_args(data, "RUN", iters, "<seed>" if seeds else None, ours_set)]
                )
                # unquoted, as it is typed
                .replace("RUN_NAME=RUN", f"RUN_NAME=nanogpt-compare-{label}-<pair>"),
            ],
            "nanogpt": shlex.join(["python", "train.py", *nanogpt_args(iters, bool(seeds))]),
        },
        "pairs": done,
        "median": medians(done),
    }


def medians(pairs: list[dict[str, Any]]) -> dict[str, float]:
    """The median of each ratio the pairs all hold (older records lack the scored loss)."""
    keys = set.intersection(*(set(p["ratio"]) for p in pairs))
    return {k: statistics.median(p["ratio"][k] for p in pairs) for k in sorted(keys)}
