"""scripts/check_knlp.sh: every GPT-2 defconfig of a real knlp checkout, loaded
here and resolved by knlp's own Kconfig tree, compared value by value.

The knlp side reads knlp's Kconfig files with kconfiglib (not our table) and
states each file's experiment in plain terms; our side loads the file with
the strict loader and states the same from the RunConfig. A file is "loaded"
when the two agree on every value below, "refused" with the loader's reason,
or "mismatch" with the values that differ.
"""

from __future__ import annotations

import argparse
import math
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import kconfiglib

from lib.atomic import write_text_atomic
from lib.config.kconfig import ConfigError, load_checked
from lib.config.knlp.source import commit_of, gpt2_defconfigs, in_dir, open_knlp, render_table
from lib.config.knlp.table import COMMIT as TABLE_COMMIT
from lib.config.run_config import RunConfig, config_text, rules_beside, typed_values
from lib.knlpcheck.mla import knlp_mla, our_mla
from lib.knlpcheck.optim import knlp_matrix, knlp_optimizer, our_matrix, our_optimizer
from lib.knlpcheck.prune import (
    knlp_adamwprune,
    knlp_magnitude,
    knlp_movement,
    our_pruning,
)
from lib.knlpcheck.rgsa import knlp_rgsa, our_rgsa
from lib.matrix import grid  # MATRIX_SEEDS -> the seeds, as the matrix reads them
from lib.paths import ROOT

SIZES = ("124M", "350M", "774M", "1558M")


class MissingInTree(Exception):
    """A symbol the check reads is not in this knlp checkout's Kconfig."""


def knlp_experiment(k: kconfiglib.Kconfig) -> dict[str, Any]:
    """What knlp's tree resolves for the loaded file, in plain terms."""

    def v(name):
        sym = k.syms.get(name)
        return sym.str_value if sym is not None and sym.config_string else None

    def on(name):
        return name in k.syms and k.syms[name].tri_value == 2

    def num(kind, name):
        """The value as a number; None when inactive. A symbol this knlp tree lacks
        (an older checkout) stops the check of this file: its code may differ too."""
        if name not in k.syms:
            raise MissingInTree(name)
        value = v(name)
        return None if value is None else kind(value)

    auto, opt = on("HYPER_PARAM_AUTO"), v("OPTIMIZER")
    cuda = v("DEVICE") == "cuda"
    decay = on("GPT2_DECAY_LR")
    exp = {
        "model": v("MODEL"),
        "size": next((s.lower() for s in SIZES if on(f"GPT2_MODEL_{s}")), None),
        "dataset": v("GPT2_DATASET_NAME"),
        "block": num(int, "GPT2_BLOCK_SIZE"),
        "batch": "auto" if auto else num(int, "BATCH_SIZE"),
        "accumulation": "auto" if auto else num(int, "GPT2_GRADIENT_ACCUMULATION"),
        "effective batch": 256 if auto else None,  # lib/hyperparams.py, one GPU
        "lr": num(float, "LEARNING_RATE"),
        "schedule": "cosine" if decay else "constant",
        "min lr": num(float, "GPT2_MIN_LR") if decay else None,
        "warmup": num(int, "GPT2_WARMUP_STEPS"),
        "max iters": num(int, "GPT2_MAX_ITERS"),
        "max time": num(int, "GPT2_MAX_TIME"),
        "optimizer": opt,
        "pruning": v("PRUNING_METHOD"),
        "device": v("DEVICE"),
        "compile": (
            on("COMPILE_MODEL") if on("COMPILE_MANUAL") else auto and cuda and on("COMPILE_AUTO")
        ),
        "precision": (
            {"bfloat16": "bf16", "float16": "fp16"}.get(v("GPT2_AMP_DTYPE"))
            if on("MIXED_PRECISION")
            else "fp32"
        ),
        "tf32": on("GPT2_TF32_ALLOWED"),
        "eval interval": num(int, "GPT2_EVAL_INTERVAL"),
        "eval iters": num(int, "GPT2_EVAL_SAMPLES"),
        "dropout": num(float, "GPT2_DROPOUT"),
        "bias": on("GPT2_BIAS"),
        "tied head": on("GPT2_WEIGHT_TYING"),
        "gelu": "exact",  # its GPT-2 MLP's nn.GELU(), in code (gpt2/model.py)
        "grad clip": 1.0,  # gpt2/trainers/vanilla.py clips every step at norm 1.0
    }
    if on("OPTIMIZER_MODE_MULTIPLE") or on("PRUNING_MODE_MULTIPLE"):
        exp["optimizer"] = None  # a test matrix: its grid, each run's settings
        exp["pruning"] = None
        exp |= knlp_matrix(k)
    else:
        exp |= knlp_optimizer(opt)
    exp["runs per configuration"] = knlp_vanilla_runs(v, on)
    exp["kv circuit"] = (
        {
            "sparsity": num(float, "KNLP_MECHINT_KV_TARGET_SPARSITY"),
            "steps": num(int, "KNLP_MECHINT_KV_STEPS"),
            "lr": num(float, "KNLP_MECHINT_KV_LR"),
            "temperature": v("KNLP_MECHINT_KV_TEMP_SCHEDULE"),
            "save masks": on("KNLP_MECHINT_SAVE_MASKS"),
        }
        if on("KNLP_MECHINT_KV_POSTTRAIN")
        else "off"
    )
    if opt == "adamwprune" and v("PRUNING_METHOD") == "state":
        exp |= knlp_adamwprune(v, exp)
    elif v("PRUNING_METHOD") == "magnitude":
        target, warmup = float(v("TARGET_SPARSITY") or 0.9), int(v("PRUNING_WARMUP") or 1000)
        exp |= knlp_magnitude(target, warmup, exp["max iters"])
    elif v("PRUNING_METHOD") == "movement":
        target, warmup = float(v("TARGET_SPARSITY") or 0.9), int(v("PRUNING_WARMUP") or 1000)
        exp |= knlp_movement(target, warmup, exp["max iters"])
    if opt == "adamwspam" or (exp["optimizer"] is None and on("OPTIMIZER_ENABLED_ADAMWSPAM")):
        # What its runner passes (scripts/run_test_matrix.py -> gpt2/train.py): clipping
        # always (--spam-enable-clip defaults on), the interval and warmup when in the
        # .config, else gpt2/train.py's 1000. Its counter moves twice per step: a reset
        # at step k when 2k is a multiple of the interval, an LR re-warmup over W/2 steps.
        interval = int(v("SPAM_INTERVAL") or 1000)
        exp |= {
            "spam rule": "knlp",
            "spam theta": num(float, "SPAM_THETA"),
            "spam clip": True,
            "spam reset": True,
            "spam interval": interval // math.gcd(interval, 2),
            "spam warmup": int(v("SPAM_WARMUP_STEPS") or 1000) / 2,
        }
    gated = on("GPT2_KNLP")
    exp["attention"] = (
        "ra_mla"
        if on("ENABLE_RA_MLA")
        else "rgsa"
        if on("ENABLE_RGSA")
        else {
            (False, False): "vanilla",
            (True, False): "sdpa_gate",
            (False, True): "ra_gated",
            (True, True): "sdpa_gate_ra_gated",
        }[(gated and on("GPT2_KNLP_SDPA_GATE"), gated and on("GPT2_KNLP_RA"))]
    )
    mla = knlp_mla(v, on)  # its trainer builds MLA before RGSA and the gated forms
    exp |= mla or knlp_rgsa(v, on, exp)
    if not mla and gated and on("GPT2_KNLP_RA"):
        exp |= {
            "ra layers": num(int, "GPT2_KNLP_RA_LAYERS"),
            "ra heads": num(int, "GPT2_KNLP_RA_HEADS"),
        }
    return exp


def knlp_vanilla_runs(v, on) -> int:
    """Runs knlp's runner (scripts/run_test_matrix.py at 041ec5f2) trains per
    configuration: one per GPT2_VANILLA_ABLATION_STEPS entry for an unpruned one,
    less a baseline step ("0", or a letter and "0") when BASELINE_RUN_ID is set."""
    if not on("GPT2_VANILLA_ABLATION_MODE") or v("PRUNING_METHOD") != "none":
        return 1
    steps = [s.strip() for s in (v("GPT2_VANILLA_ABLATION_STEPS") or "").split(",")]
    if steps == [""]:
        return 1
    if (v("BASELINE_RUN_ID") or "").strip():
        steps = [
            s for s in steps if not (s == "0" or (len(s) == 2 and s[0].isalpha() and s[1] == "0"))
        ]
    return len(steps)


def our_experiment(run: RunConfig, planned: list[Any] | None = None) -> dict[str, Any]:
    """The same values as this project will run them; a test matrix's runs as
    lib/matrix/grid.py expand plans them (planned)."""
    auto = run.HYPER_PARAM == "auto"
    dtype = {"bf16": "bf16", "fp16": "fp16", "auto": "auto"}.get(run.MIXED_PRECISION_DTYPE or "")
    exp: dict[str, Any] = {
        "model": run.MODEL,
        "size": run.GPT2_MODEL,
        "dataset": run.GPT2_DATASET,
        "block": run.GPT2_BLOCK_SIZE,
        "batch": "auto" if auto else run.BATCH_SIZE,
        "accumulation": "auto" if auto else run.GPT2_GRADIENT_ACCUMULATION,
        "effective batch": run.TARGET_EFFECTIVE_BATCH,
        "lr": run.LEARNING_RATE,
        "schedule": run.LR_SCHEDULE,
        "min lr": run.GPT2_MIN_LR if run.LR_SCHEDULE == "cosine" else None,
        "warmup": run.GPT2_WARMUP_STEPS,
        "max iters": run.GPT2_MAX_ITERS,
        "max time": run.TRAIN_MAX_TIME,
        "optimizer": run.OPTIMIZER,
        "pruning": run.PRUNING_METHOD if run.PRUNING_MODE != "none" else "none",
        "device": run.DEVICE,
        "compile": run.COMPILE_MODEL,
        "precision": dtype if run.MIXED_PRECISION else "fp32",
        "tf32": run.TF32,
        "eval interval": run.GPT2_EVAL_INTERVAL,
        "eval iters": run.TRAIN_EVAL_ITERS,
        "dropout": run.GPT2_DROPOUT,
        "bias": run.GPT2_BIAS,
        "tied head": run.GPT2_TIE_HEAD,
        "gelu": run.GPT2_GELU,
        "grad clip": run.TRAIN_GRAD_CLIP,
        "attention": run.GPT2_ATTENTION,
    }
    if planned is None:
        assert run.OPTIMIZER is not None, "a test matrix is compared run by run"
        exp |= our_optimizer(run, run.OPTIMIZER)
    else:  # a test matrix: the grid, and each run's settings
        exp["optimizer"] = exp["pruning"] = None
        exp |= our_matrix(run, planned)
    if run.OPTIM_USES_SPAM:
        exp |= {
            "spam rule": run.SPAM_RULE,
            "spam theta": run.SPAM_THETA,
            "spam clip": run.SPAM_ENABLE_CLIP,
            "spam reset": run.SPAM_ENABLE_RESET,
            "spam interval": run.SPAM_INTERVAL or 0,
            "spam warmup": run.SPAM_WARMUP_STEPS or 0,
        }
    exp |= our_rgsa(run) | our_mla(run)
    if run.GPT2_ATTENTION in ("ra_gated", "sdpa_gate_ra_gated"):
        exp |= {"ra layers": run.GPT2_RA_GATED_LAYERS, "ra heads": run.GPT2_RA_GATED_HEADS}
    if run.PRUNING_MODE == "single" and planned is None:
        exp |= our_pruning(run)
    seeds = grid.parse_seeds(run.MATRIX_SEEDS)
    exp["runs per configuration"] = len(seeds) or 1
    exp["kv circuit"] = (
        {
            "sparsity": float(str(run.MECHINT_KV_SPARSITY)),
            "steps": run.MECHINT_KV_STEPS,
            "lr": float(str(run.MECHINT_KV_LR)),
            "temperature": run.MECHINT_KV_TEMP_SCHEDULE,
            "save masks": bool(run.MECHINT_KV_SAVE_MASKS),
        }
        if run.MECHINT_KV
        else "off"
    )
    return exp


def _differ(key: str, theirs: Any, ours: Any) -> str:
    """One mismatch; of two step lists, only where they first part."""
    if isinstance(theirs, tuple) and isinstance(ours, tuple):
        at = next(
            (i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours))
        )
        return (
            f"{key}: knlp {len(theirs)}, here {len(ours)}; from #{at + 1}: knlp "
            f"{theirs[at : at + 2]!r}, here {ours[at : at + 2]!r}"
        )
    return f"{key}: knlp {theirs!r}, here {ours!r}"


def _planned(kconf: kconfiglib.Kconfig) -> list[Any]:
    """The runs `make test-matrix` would train from this configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".config"
        path.write_text(config_text(kconf))
        return grid.expand([], path)[1]


def check_file(root: Path, path: Path) -> tuple[str, str]:
    """(status, detail) for one knlp defconfig."""
    try:
        kconf, problems = load_checked(path, knlp=True)
        problems += rules_beside(kconf, problems)
    except ConfigError as err:
        problems = err.problems
    if problems:
        missing = [
            m.group(1)
            for p in problems
            if (
                m := re.search(
                    r"uses (.*), which this "
                    r"project does not have",
                    p,
                )
            )
        ]
        # " | " between reasons: a reason may hold "; " itself; the file by its name, so
        # the record names no checkout's path
        return "refused", " | ".join(missing or problems).replace(str(path), path.name)
    run = RunConfig.from_values(typed_values(kconf))
    planned = None
    if run.OPTIMIZER_MODE == "multiple" or run.PRUNING_MODE == "multiple":
        try:
            planned = _planned(kconf)
        except ConfigError as err:
            return "refused", " | ".join(err.problems)
    ours = our_experiment(run, planned)
    knlp_tree = open_knlp(root)
    with in_dir(root):
        knlp_tree.load_config(str(path))
    try:
        theirs = knlp_experiment(knlp_tree)
    except MissingInTree as err:
        return "unchecked", (
            f"knlp's Kconfig at this checkout has no {err}, which the check reads: the check "
            f"states knlp's runs from its code at {TABLE_COMMIT[:8]}; compare by hand"
        )
    if ours.get("precision") == "auto" and theirs["precision"] in ("bf16", "fp16"):
        ours["precision"] = None  # our AUTO picks per device: not the value asked
    diff = [
        _differ(key, theirs[key], ours.get(key))
        for key in theirs
        if theirs[key] is not None and ours.get(key) != theirs[key]
    ]
    return ("mismatch", "; ".join(diff)) if diff else ("loaded", "")


def check_rows(root: Path) -> list[tuple[str, str, str]]:
    """(file, status, detail) for every GPT-2 defconfig of the checkout."""
    return [(p.name, *check_file(root, p)) for p in gpt2_defconfigs(root)]


def report(root: Path) -> str:
    """The table for every GPT-2 defconfig of the checkout, then the counts."""
    try:
        open_knlp(root)
    except kconfiglib.KconfigError as err:
        raise ConfigError(
            [
                f"{root}: its Kconfig tree does not parse with kconfiglib "
                f"({str(err).strip()}); the check resolves files with it, so it needs a "
                f"knlp checkout kconfiglib reads"
            ]
        ) from None
    rows = check_rows(root)
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{name:<{width}}  {status:<8}  {detail}" for name, status, detail in rows]
    counts = Counter(status for _, status, _ in rows)
    features = Counter(
        f for _, status, detail in rows if status == "refused" for f in detail.split(" | ")
    )
    lines += [
        "",
        f"knlp {commit_of(root)[:8]}: {len(rows)} GPT-2 defconfigs: "
        + ", ".join(
            f"{counts[s]} {s}"
            for s in ("loaded", "refused", "mismatch", "unchecked")
            if s != "unchecked" or counts[s]
        ),
        "refused for (files): " + "; ".join(f"{f} ({n})" for f, n in features.most_common()),
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("knlp", type=Path, help="a knlp checkout (git clone of mcgrof/knlp)")
    parser.add_argument(
        "--table",
        action="store_true",
        help="regenerate lib/config/knlp/table.py from this checkout instead",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write docs/bench-data/knlp/check_<commit>.json and the README's section from it",
    )
    opts = parser.parse_args(argv)
    root = opts.knlp.resolve()
    if not (root / "Kconfig").is_file():
        raise ConfigError([f"{root}: no Kconfig at its root; give a knlp checkout"])
    if opts.table:
        write_text_atomic(ROOT / "lib/config/knlp/table.py", render_table(root))
        print("wrote lib/config/knlp/table.py")
        return
    print(report(root))
    if opts.record:
        from lib.knlpcheck.record import write_record

        print(f"wrote {write_record(root, check_rows(root))} and the README's knlp section")
