"""The test matrix's grid: what the multiple-selection menus enable, expanded.

The grid is the product of model families (MATRIX_MODELS), each family's
variants (GPT-2's enabled attention variants), optimizers, pruning methods x
sparsities x AdamWPrune score variants, and the ablation list
(MATRIX_ABLATION), with the pairs Kconfig forbids in a single run removed:
state pruning runs with AdamWPrune only; dense, magnitude and movement runs
with every other optimizer. MATRIX_OPTIMIZER_SETTINGS adds an optimizer's
own values to each of its runs, MATRIX_PRUNING_SETTINGS a method's (settings.py). Each run is a list of NAME=VALUE
overrides on the base .config; lib/config.load_run_config validates every
one of them exactly as `make` would, before anything trains. MATRIX_SEEDS
then trains every run once per seed: TRAIN_SEED=<seed> joins its overrides
and _s<seed> ends its id, so `make results` groups the seeds of one
configuration.
"""

from __future__ import annotations

import itertools
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lib.config.kconfig import ConfigError
from lib.config.run_config import RunConfig, load_run_config
from lib.jobs import Overrides, PlannedRun
from lib.matrix.seeds import parse_seeds, seeded, sets_seed
from lib.matrix.settings import parse_settings
from lib.model import registry
from lib.optim import registry as optimizers
from lib.paths import DOT_CONFIG as CONFIG
from lib.plural import counted
from lib.prune import registry as pruning_methods
from lib.train.naming import run_tag

# Multiple-selection symbols -> the value a single run uses, from the records of
# lib/optim/registry.py and lib/prune/registry.py.
OPTIMIZERS = optimizers.by_matrix_symbol()
# The pruning axis: methods (the dense entry first), sparsities and AdamWPrune's
# score variants, from lib/prune/registry.py.
METHODS = pruning_methods.matrix_methods()
SPARSITIES = pruning_methods.matrix_sparsities()
SCORE_VARIANTS = pruning_methods.matrix_score_variants()


def is_multiple(run: RunConfig) -> bool:
    """Whether a configuration asks for several runs (only the matrix runs it)."""
    return (
        run.OPTIMIZER_MODE == "multiple"
        or run.PRUNING_MODE == "multiple"
        or bool(run.GPT2_ATTENTION_MULTIPLE)
        or bool(run.MATRIX_MODELS)
        or bool(run.MATRIX_ABLATION)
        or bool(run.MATRIX_SEEDS.strip())
    )


def one_run(run: RunConfig, command: str) -> RunConfig:
    """The run itself, or the error a matrix configuration gets from a one-run
    command (`make`, `make estimate`)."""
    if is_multiple(run):
        several = [
            what
            for what, asked in (
                ("several optimizers (OPTIMIZER_MODE_MULTIPLE)", run.OPTIMIZER_MODE == "multiple"),
                (
                    "several pruning settings (PRUNING_MODE_MULTIPLE)",
                    run.PRUNING_MODE == "multiple",
                ),
                ("several attention variants", bool(run.GPT2_ATTENTION_MULTIPLE)),
                (f'models (MATRIX_MODELS="{run.MATRIX_MODELS}")', bool(run.MATRIX_MODELS)),
                ("an ablation list (MATRIX_ABLATION)", bool(run.MATRIX_ABLATION)),
                (
                    f'seeds (MATRIX_SEEDS="{run.MATRIX_SEEDS.strip()}")',
                    bool(run.MATRIX_SEEDS.strip()),
                ),
            )
            if asked
        ]
        where = (
            "this .config with the command line's overrides" if run.overrides else "this .config"
        )
        raise ConfigError(
            [
                f"{where} asks for {', '.join(several)}, which `{command}` cannot do in one "
                f"run: `make test-matrix` trains them and `make test-matrix-dry-run` shows "
                f"each run with its memory and time; or choose one of each in `make menuconfig`"
            ]
        )
    return run


def _enabled(run: RunConfig, table: dict[str, str]) -> list[str]:
    return [value for sym, value in table.items() if run.values.get(sym)]


def parse_optimizer_settings(run: RunConfig) -> dict[str, Overrides]:
    """MATRIX_OPTIMIZER_SETTINGS -> optimizer -> the overrides its runs add:
    "adamwspam:ADAM_AMSGRAD=y adamwprune:WEIGHT_DECAY=0,PRUNING_WARMUP=1001"."""
    text, enabled = run.MATRIX_OPTIMIZER_SETTINGS or "", _enabled(run, OPTIMIZERS)
    grid = ("OPTIMIZER", "OPTIMIZER_MODE")
    return parse_settings("MATRIX_OPTIMIZER_SETTINGS", text, enabled, "optimizer", grid)


def parse_pruning_settings(run: RunConfig) -> dict[str, Overrides]:
    """MATRIX_PRUNING_SETTINGS -> pruning method -> the overrides its runs add."""
    text, enabled = run.MATRIX_PRUNING_SETTINGS or "", _enabled(run, METHODS)
    grid = ("PRUNING_MODE", "PRUNING_METHOD", "PRUNING_TARGET_SPARSITY", "ADAMWPRUNE_VARIANT")
    return parse_settings("MATRIX_PRUNING_SETTINGS", text, enabled, "pruning method", grid)


def optimizer_axis(run: RunConfig) -> list[Overrides]:
    if run.OPTIMIZER_MODE != "multiple":
        optimizer = run.OPTIMIZER
        assert optimizer is not None, "the OPTIMIZER choice is active in single mode"
        return [[("OPTIMIZER", optimizer)]]
    own = parse_optimizer_settings(run)
    return [
        [("OPTIMIZER_MODE", "single"), ("OPTIMIZER", o), *own.get(o, [])]
        for o in _enabled(run, OPTIMIZERS)
    ]


def pruning_axis(run: RunConfig) -> list[Overrides]:
    """Each pruning setting as overrides; the method is the value of PRUNING_METHOD."""
    mode = run.PRUNING_MODE
    if mode == "none":
        return [[("PRUNING_MODE", "none")]]
    if mode == "single":
        chosen = run.PRUNING_METHOD
        if chosen is None:  # no optimizer offers a method; combinations() says which is missing
            return []
        single: Overrides = [
            ("PRUNING_MODE", "single"),
            ("PRUNING_METHOD", chosen),
            ("PRUNING_TARGET_SPARSITY", repr(run.PRUNING_TARGET_SPARSITY)),
        ]
        if _scores_state(chosen):
            score = run.ADAMWPRUNE_VARIANT
            assert score is not None, "ADAMWPRUNE_VARIANT is active with state pruning"
            single.append(("ADAMWPRUNE_VARIANT", score))
        return [single]
    out: list[Overrides] = []
    own = parse_pruning_settings(run)
    for method in _enabled(run, METHODS):
        if method == "none":
            out.append([("PRUNING_MODE", "none"), *own.get("none", [])])
            continue
        scores: list[Overrides] = [[]]  # AdamWPrune's score variant, state pruning only
        if _scores_state(method):
            scores = [[("ADAMWPRUNE_VARIANT", v)] for v in _enabled(run, SCORE_VARIANTS)]
        for sparsity in _enabled(run, SPARSITIES):
            for score_o in scores:
                out.append(
                    [
                        ("PRUNING_MODE", "single"),
                        ("PRUNING_METHOD", method),
                        ("PRUNING_TARGET_SPARSITY", sparsity),
                        *score_o,
                        *own.get(method, []),
                    ]
                )
    return out


def compatible(optimizer: str, pruning: Overrides, adamwprune_dense: bool = False) -> bool:
    """The rule Kconfig enforces for one run: state pruning iff an optimizer pruning
    by its state (AdamWPrune); AdamWPrune dense (its base optimizer) only where
    PRUNING_ENABLE_NONE_ADAMWPRUNE asks for it."""
    method, by_state = dict(pruning).get("PRUNING_METHOD", "none"), _by_state(optimizer)
    if by_state and method == "none":
        return adamwprune_dense
    return _scores_state(method) == by_state


def _by_state(optimizer: str) -> bool:
    return optimizers.method(optimizer).state_pruning


def _scores_state(method: str) -> bool:
    return method != pruning_methods.DENSE and pruning_methods.method(method).by_optimizer_state


def parse_ablation(text: str) -> list[tuple[str, list[str]]]:
    """ "SYM=a,b SYM2=c" -> [("SYM", ["a", "b"]), ("SYM2", ["c"])]."""
    axes = []
    for word in text.split():
        name, sep, values = word.partition("=")
        items = [v for v in values.split(",") if v]
        if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or not items:
            raise ConfigError([f"CONFIG_MATRIX_ABLATION: '{word}' is not SYMBOL=value1,value2,..."])
        axes.append((name, items))
    return axes


def _check_seed_clash(base: RunConfig, seeds: list[int], points: list[Overrides] | None) -> None:
    """MATRIX_SEEDS sets every run's TRAIN_SEED; anything else setting it per run
    (or for all runs) would be overridden or make runs collide: refuse it."""
    if not seeds:
        return
    setters = [
        (
            f'the ablation list (CONFIG_MATRIX_ABLATION="{base.MATRIX_ABLATION}")',
            [n for n, _ in parse_ablation(base.MATRIX_ABLATION)],
        ),
        ("the sweep", [n for point in points or [] for n, _ in point]),
        (
            "CONFIG_MATRIX_OPTIMIZER_SETTINGS",
            [n for pairs in parse_optimizer_settings(base).values() for n, _ in pairs],
        ),
        (
            "CONFIG_MATRIX_PRUNING_SETTINGS",
            [n for pairs in parse_pruning_settings(base).values() for n, _ in pairs],
        ),
        ("the command line", list(base.overrides)),
    ]
    problems = [
        f'CONFIG_MATRIX_SEEDS="{base.MATRIX_SEEDS}" sets TRAIN_SEED for every run, and '
        f"{source} sets {name} too, so the runs would collide: keep one of the two "
        f"(empty MATRIX_SEEDS, or drop {name} from {source})"
        for source, names in setters
        for name in dict.fromkeys(names)
        if sets_seed(name)
    ]
    if problems:
        raise ConfigError(problems, "test matrix")


def _ablation_suffix(overrides: Overrides) -> str:
    return "".join(f"_{k.lower()}{re.sub(r'[^A-Za-z0-9.-]', '', v)}" for k, v in overrides)


def parse_models(base: RunConfig) -> list[tuple[str, Overrides]]:
    """MATRIX_MODELS -> (family, overrides its runs start with). A family other
    than the chosen one has its menu hidden in .config, so its own settings
    ride along: "gpt2 hamt:HAMT_N_LAYER=12,HAMT_N_EMBD=768"."""
    out = []
    for word in base.MATRIX_MODELS.split() or [base.MODEL]:
        model, _, settings = word.partition(":")
        pairs = [item.partition("=") for item in settings.split(",") if item]
        if any(
            not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or not value
            for name, sep, value in pairs
        ):
            raise ConfigError(
                [
                    f"CONFIG_MATRIX_MODELS: '{word}' is not family or "
                    f"family:SYMBOL=value,SYMBOL=value"
                ]
            )
        model_o = [] if model == base.MODEL else [("MODEL", model)]
        out.append((model, model_o + [(name, value) for name, _, value in pairs]))
    return out


def combinations(
    base: RunConfig, points: list[Overrides] | None = None
) -> list[tuple[Overrides, Overrides]]:
    """Every valid run as (overrides, its ablation part), in a stable order
    (model, variant, optimizer, pruning, ablation). An enabled value that ends
    up in no run is an error: nothing the user enabled is dropped silently.
    points (a sweep's) multiply the ablation product and name runs like it."""
    ablation = parse_ablation(base.MATRIX_ABLATION)
    ablation_runs = [
        list(zip([n for n, _ in ablation], values)) + point
        for values in itertools.product(*[v for _, v in ablation])
        for point in (points if points is not None else [[]])
    ]
    optimizers, prunings = optimizer_axis(base), pruning_axis(base)
    if not optimizers:
        raise ConfigError(
            ["CONFIG_OPTIMIZER_MODE_MULTIPLE is set but no CONFIG_OPTIMIZER_ENABLE_* is enabled"]
        )
    if not prunings:
        raise ConfigError(
            [
                "CONFIG_PRUNING_MODE_MULTIPLE is set but no pruning method, "
                "sparsity or AdamWPrune score variant is enabled"
            ]
        )
    out = []
    # AdamWPrune dense (its base optimizer): asked for by PRUNING_MODE_NONE itself, or
    # beside pruned cells by PRUNING_ENABLE_NONE_ADAMWPRUNE
    dense = base.PRUNING_MODE == "none" or bool(base.PRUNING_ENABLE_NONE_ADAMWPRUNE)
    for model, model_o in parse_models(base):
        family = registry.family(model)
        for variant_o in family.matrix_variants(base):
            for opt_o in optimizers:
                for prune_o in prunings:
                    if compatible(dict(opt_o)["OPTIMIZER"], prune_o, dense):
                        out += [
                            (model_o + variant_o + opt_o + prune_o + a, a) for a in ablation_runs
                        ]
    _check_every_choice_used(optimizers, prunings, [o for o, _ in out])
    return out


def _check_every_choice_used(
    optimizers: list[Overrides], prunings: list[Overrides], runs: list[Overrides]
) -> None:
    used = [set(r) for r in runs]
    problems = []
    for opt_o in optimizers:
        if not any(set(opt_o) <= r for r in used):
            name = dict(opt_o)["OPTIMIZER"]
            need = "state pruning" if _by_state(name) else "dense, magnitude or movement"
            problems.append(f"optimizer {name} is enabled but no run uses it: it needs {need}")
    for prune_o in prunings:
        if not any(set(prune_o) <= r for r in used):
            method = dict(prune_o).get("PRUNING_METHOD", "none (dense)")
            need = "AdamWPrune" if _scores_state(method) else "an optimizer other than AdamWPrune"
            problems.append(f"pruning {method} is enabled but no run uses it: it needs {need}")
    if problems:
        raise ConfigError(problems, "test matrix")


def expand(
    cli_args: Sequence[str] = (), path: Path = CONFIG, points: list[Overrides] | None = None
) -> tuple[RunConfig, list[PlannedRun]]:
    """(base config, planned runs). The command-line overrides apply to the base
    (where they are checked once); each run is then its own overrides on that
    base, validated like `make` before anything trains."""
    base = load_run_config(list(cli_args), path)
    seeds = parse_seeds(base.MATRIX_SEEDS)
    _check_seed_clash(base, seeds, points)
    planned, problems, seen = [], [], set()
    failing: dict[str, list[str]] = {}  # problem -> the runs it stops
    with tempfile.TemporaryDirectory() as tmp:
        base_path = Path(tmp) / "base.config"
        base_path.write_text(base.config_text)
        queue = [
            (configuration + seed_o, ablated, seed_id)  # a configuration's seeds together
            for configuration, ablated in combinations(base, points)
            for seed_o, seed_id in seeded(seeds)
        ]
        for overrides, ablated, seed_id in queue:
            try:
                run = load_run_config([f"{k}={v}" for k, v in overrides], base_path)
            except ConfigError as err:
                where = " ".join(f"{k}={v}" for k, v in overrides)
                for problem in err.problems:
                    failing.setdefault(problem, []).append(where)
                continue
            run_id = run_tag(run) + _ablation_suffix(ablated) + seed_id
            if run_id in seen:
                problems.append(f"two runs would share the id {run_id}")
            seen.add(run_id)
            planned.append(PlannedRun(run_id, overrides, run))
    problems += [
        f"{problem} (in {counted(len(runs), 'run')}, e.g. {runs[0]})"
        for problem, runs in failing.items()
    ]
    if problems:
        raise ConfigError(problems, "test matrix")
    if not planned:
        raise ConfigError(
            ["the matrix is empty: enable at least one value in each multiple-selection menu"],
            "test matrix",
        )
    return base, planned
