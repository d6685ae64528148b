"""The optimizer half of scripts/check_knlp.sh's comparison (lib/knlpcheck/check.py):
each optimizer's settings as knlp's code builds them and as lib/optim builds them here,
and a test matrix's runs as knlp's runner and lib/matrix/grid.py expand it. The knlp
side is written from knlp's code on its own, apart from the translation, so that a
wrong translation shows as a mismatch."""

from __future__ import annotations

from typing import Any

import kconfiglib

from lib.config.knlp.code import KNLP_OPTIMIZERS, knlp_methods
from lib.config.run_config import RunConfig
from lib.knlpcheck.prune import (
    knlp_magnitude,
    knlp_movement,
    knlp_state_steps,
    knlp_variant_iters,
    our_pruning,
)

KNLP_SPARSITIES = ("50", "70", "90")  # its runner reads TEST_SPARSITY_50/70/90 only


def knlp_matrix(k: kconfiglib.Kconfig) -> dict[str, Any]:
    """knlp's test matrix for one GPT-2 model as scripts/run_test_matrix.py builds it
    (get_test_matrix, generate_combinations at 041ec5f2): the enabled optimizers times
    the enabled pruning methods; AdamWPrune only with none or state, state only with
    AdamWPrune; a pruned cell per TEST_SPARSITY_* level (per AdamWPrune variant), a
    dense one once (AdamWPrune's once per variant and level, each the same dense run:
    counted once, as this project trains it). Then each
    run's optimizer and pruning, as its runner passes them (run_command): the cell's
    level as --target-sparsity, PRUNING_WARMUP when the .config has it (else
    gpt2/train.py's 1000), the variant."""

    def on(name):
        return name in k.syms and k.syms[name].tri_value == 2

    def v(name):
        sym = k.syms.get(name)
        return sym.str_value if sym is not None and sym.config_string else None

    optimizers = [o for o in KNLP_OPTIMIZERS if on(f"OPTIMIZER_ENABLED_{o.upper()}")]
    methods = knlp_methods(k)
    # TEST_SPARSITY_n: y if SPARSITY_ENABLE_n && PRUNING_MODE_MULTIPLE (knlp's
    # Kconfig.pruning; a tree without the derived symbol gets the same)
    levels = [
        float(n) / 100
        for n in KNLP_SPARSITIES
        if (
            on(f"TEST_SPARSITY_{n}")
            if f"TEST_SPARSITY_{n}" in k.syms
            else on("PRUNING_MODE_MULTIPLE") and on(f"SPARSITY_ENABLE_{n}")
        )
    ]
    variants = [f"bitter{n}" for n in range(10) if on(f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}")]
    runs: list[tuple[str, str, float, str | None]] = []
    for opt in optimizers:
        for method in methods:
            if (opt == "adamwprune") != (method == "state") and method != "none":
                continue
            if method == "none":
                # AdamWPrune's dense cells: one per level and variant in knlp, each the same
                # dense run (--pruning-method none leaves its --target-sparsity unread)
                if (opt, "none", 0.0, None) not in runs:
                    runs.append((opt, "none", 0.0, None))
            elif opt == "adamwprune":
                runs += [(opt, method, s, var) for s in levels for var in variants or ["bitter0"]]
            else:
                runs += [(opt, method, s, None) for s in levels]
    warmup, iters = int(v("PRUNING_WARMUP") or 1000), int(v("GPT2_MAX_ITERS"))
    exp: dict[str, Any] = {"grid": tuple(sorted((o, m, s) for o, m, s, _ in runs))}
    for opt, method, s, variant in runs:
        own: dict[str, Any] = knlp_optimizer(opt) | {"max iters": iters}
        if method == "state":
            length = knlp_variant_iters(variant or "bitter0", iters)
            own |= {
                "max iters": length,
                "sparsity": s,
                "prune score": variant,
                "pruned weights": "blocks + head",
                "prune threshold": "depth ramp" if variant == "bitter4" else "global",
                "masks only grow": variant != "bitter5",
                "prune steps": knlp_state_steps(s, warmup, length),
            }
        elif method == "magnitude":
            own |= knlp_magnitude(s, warmup, iters)
        elif method == "movement":
            own |= knlp_movement(s, warmup, iters)
        exp |= {f"{_run_label(opt, variant, method, s)}: {key}": x for key, x in own.items()}
    return exp


def _run_label(opt: str, variant: str | None, method: str, sparsity: float) -> str:
    return f"run {opt}{'/' + variant if variant else ''} {method} {sparsity:g}"


def knlp_optimizer(opt: str | None) -> dict[str, Any]:
    """The optimizer settings knlp's GPT-2 runs use: fixed in its code, not read from
    its Kconfig (lib/optimizers.py create_optimizer at 041ec5f2; gpt2/train.py passes no
    ADAMW_*, ADV_* or ADAMWPRUNE_* value and its --weight-decay defaults to 0.1).
    SGD: torch.optim.SGD(momentum=0.9), L2 decay 0.1. Adam: torch.optim.Adam at torch's
    defaults, L2 decay 0.1 (the --weight-decay it is given). AdamWAdv: AdamW with
    AMSGrad, decay 0.1 (gpt2/train.py refuses the name; this is what the library builds)."""
    # every one on lib/optimizers.py param_groups_for_weight_decay's groups: all but
    # biases and nn.Embedding / nn.LayerNorm tensors (its GPT-2's LayerNorm is its own class)
    decayed = {"decayed": "all but biases and embeddings"}
    if opt == "sgd":
        return decayed | {"momentum": 0.9, "nesterov": False, "weight decay": 0.1, "decay": "l2"}
    if opt in ("adam", "adamwadv"):
        return decayed | {
            "beta1": 0.9,
            "beta2": 0.999,
            "epsilon": 1e-8,
            "weight decay": 0.1,
            "decay": "l2" if opt == "adam" else "decoupled",
            "amsgrad": opt == "adamwadv",
        }
    if opt not in ("adamw", "adamwspam", "adamwprune"):
        return {}
    exp: dict[str, Any] = decayed | {
        "beta1": 0.9,
        "beta2": 0.999,
        "epsilon": 1e-8,
        "weight decay": 0.0 if opt == "adamwprune" else 0.1,
        "amsgrad": opt == "adamwspam",
        "spike reset": opt == "adamwspam",
    }
    if opt == "adamwspam":
        exp["spike threshold"] = 2.0
    if opt == "adamwprune":
        exp["base"] = "adamw"
    return exp


def our_optimizer(run: RunConfig, name: str) -> dict[str, Any]:
    """The settings optimizer `name` runs with here (lib/optim build_optimizer)."""
    out: dict[str, Any] = {
        "decayed": {
            "knlp": "all but biases and embeddings",
            "matrices": "matrices and embeddings",
        }[run.WEIGHT_DECAY_PARAMS]
    }
    if name in ("adamw", "adamwspam", "adamwprune"):
        out |= {
            "beta1": run.ADAM_BETA1,
            "beta2": run.ADAM_BETA2,
            "epsilon": run.ADAM_EPSILON,
            "weight decay": run.WEIGHT_DECAY,
            "amsgrad": bool(run.ADAM_AMSGRAD),
            # SPAM's settings are shared in a matrix: AdamW's cell does not use them
            "spike reset": bool(run.SPAM_SPIKE_RESET) and name != "adamw",
            "base": run.ADAMWPRUNE_BASE,
            "spike threshold": run.SPAM_SPIKE_THRESHOLD,
        }
    if name == "sgd":  # lib/optim build_optimizer: torch.optim.SGD
        out |= {
            "momentum": run.SGD_MOMENTUM,
            "nesterov": False,
            "weight decay": run.WEIGHT_DECAY,
            "decay": "l2",
        }
    if name in ("adam", "adamwadv"):  # torch.optim.Adam / AdamW(amsgrad=True)
        out |= {
            "beta1": run.ADAM_BETA1,
            "beta2": run.ADAM_BETA2,
            "epsilon": run.ADAM_EPSILON,
            "weight decay": run.WEIGHT_DECAY,
            "decay": "l2" if name == "adam" else "decoupled",
            "amsgrad": name == "adamwadv" or bool(run.ADAM_AMSGRAD),
        }
    return {key: value for key, value in out.items() if value is not None}  # not its setting


def our_matrix(run: RunConfig, planned: list[Any]) -> dict[str, Any]:
    """A test matrix here: the runs lib/matrix/grid.py expands, each with the
    settings it trains with."""
    from lib.matrix import grid

    cells = []
    for overrides, _ in grid.combinations(run):
        o = dict(overrides)
        method = o.get("PRUNING_METHOD", "none")
        cells.append((o["OPTIMIZER"], method, float(o.get("PRUNING_TARGET_SPARSITY", 0))))
    exp: dict[str, Any] = {"grid": tuple(sorted(cells))}
    for one in planned:
        cell = one.config
        own = our_optimizer(cell, cell.OPTIMIZER) | {"max iters": cell.GPT2_MAX_ITERS}
        method, sparsity = "none", 0.0
        if cell.PRUNING_MODE == "single":
            method, sparsity = cell.PRUNING_METHOD, cell.PRUNING_TARGET_SPARSITY
            own |= our_pruning(cell)
        variant = cell.ADAMWPRUNE_VARIANT if method == "state" else None
        label = _run_label(cell.OPTIMIZER, variant, method, sparsity)
        exp |= {f"{label}: {key}": x for key, x in own.items()}
    return exp
