"""Runs that differ only by their seed, taken together as one configuration.

A seeded matrix run is `<configuration>_s<seed>` (RunRow.config_key drops the
suffix); runs of one folder with the same key are the seeds of one
configuration. Each figure of a configuration is the spread over its finished
seeds (lib/results/stats.py); failed and unfinished seeds are counted, never
averaged. Against the model's baseline configuration the best perplexity is
compared seed by seed (a paired difference over the seeds both finished).

The tables (lib/results/tables.py, lib/results/report.py) show the cells made
here: plain text with "±" and "<", which each format escapes its own way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lib.results.collect import FINISHED, RunRow
from lib.results.stats import (
    Paired,
    Spread,
    format_mean_sd,
    format_paired,
    group_by_config,
    paired,
    spread,
)

UNFINISHED = ("pending", "running", "starting", "unknown")  # not yet: counted apart
NO_SEED = -1  # a run whose seed is unknown (config.txt unreadable, a pretrained model)
ONE_SEED = (
    "Each configuration has one seed, so no spread, interval or test is given: "
    "MATRIX_SEEDS=3 trains every configuration with three seeds."
)


@dataclass(frozen=True)
class Figure:
    """A number every run may have: its column header, CSV prefix, value, format."""

    header: str
    name: str
    value: Callable[[Any], float | None]  # of a RunRow, or a seed_record.Recorded run
    spec: str


def _eval(r: RunRow, name: str) -> float | None:
    return r.evals.get(name)


def per_char(r: RunRow) -> float | None:
    """Best validation loss per character of the validation text, comparable
    across tokenizers (lib/data/valchars.py); None for runs that lack it."""
    value = r.metrics.get("best_val_loss_per_char")
    return float(value) if isinstance(value, (int, float)) else None


def _score(r: RunRow, name: str) -> float | None:
    return r.scores.get(name)


TRAINING_FIGURES = (
    Figure("best val loss", "best_val_loss", lambda r: r.best_loss, ".3f"),
    Figure("best ppl", "best_ppl", lambda r: r.best_ppl, ".2f"),
    Figure("final ppl", "final_ppl", lambda r: r.final_ppl, ".2f"),
    Figure("tokens/s", "tokens_per_sec", lambda r: r.tokens_per_sec, ",.0f"),
    Figure(
        "peak GiB",
        "peak_gib",
        lambda r: r.peak_memory_mb / 1024 if r.peak_memory_mb else None,
        ".2f",
    ),
)


def figures(rows: list[RunRow]) -> list[Figure]:
    """The figures of the seed table: training results, cost (TRAINING_FIGURES),
    each eval set and each lm-eval task's score."""
    out = list(TRAINING_FIGURES)
    if any(per_char(r) is not None for r in rows):
        out.insert(1, Figure("best nats/char", "best_val_loss_per_char", per_char, ".4f"))
    for name in sorted({k for r in rows for k in r.evals}):
        out.append(Figure(f"{name} ppl", f"{name}_ppl", partial(_eval, name=name), ".2f"))
    for name in sorted({k for r in rows for k in r.scores}):  # lm-eval: "hellaswag acc_norm"
        out.append(Figure(name, name.replace(" ", "_"), partial(_score, name=name), ".3f"))
    return out


BEST_PPL = "best_ppl"  # the figure the paired comparison is made on


@dataclass
class Configuration:
    """The seeds of one configuration: seed -> run, in the order first seen."""

    key: str  # as tables show it
    model: str
    runs: dict[int, RunRow]

    @property
    def seeds(self) -> list[int]:
        return sorted(self.runs)

    @property
    def seed_text(self) -> str:
        return " ".join("?" if s == NO_SEED else str(s) for s in self.seeds)

    @property
    def done(self) -> dict[int, RunRow]:
        return {s: r for s, r in self.runs.items() if r.status in FINISHED}

    @property
    def unfinished(self) -> int:
        return sum(r.status in UNFINISHED for r in self.runs.values())

    @property
    def failed(self) -> int:
        return len(self.runs) - len(self.done) - self.unfinished

    def spread(self, figure: Figure) -> Spread:
        """The figure over the finished seeds; each failed seed is a missing
        value; a finished seed without the figure (say, no eval.json) is not."""
        values = [v for r in self.done.values() if (v := figure.value(r)) is not None]
        return spread(values + [None] * self.failed)

    def values(self, figure: Figure) -> dict[int, float | None]:
        """seed -> the figure, None for a seed that has not finished."""
        return {s: figure.value(r) if r.status in FINISHED else None for s, r in self.runs.items()}


def _seed(r: RunRow) -> int:
    return NO_SEED if r.seed is None else r.seed


def configurations(rows: list[RunRow]) -> list[Configuration]:
    """The rows grouped by folder and configuration key, in the order first
    seen; a key found in two folders (`make compare`) is shown with its folder.
    A run repeating a seed its configuration already has (`x` and `x_s1337`,
    both TRAIN_SEED 1337) stays a configuration of its own, named by its id."""
    seen: set[tuple[str, str, int]] = set()
    keys: dict[int, tuple[str, str]] = {}
    for r in rows:
        folder = str(r.path.parent)
        key, n = r.config_key, 1
        while (folder, key, _seed(r)) in seen:  # the same run given twice gets a "(2)"
            n += 1
            key = r.run_id + (f" ({n - 1})" if n > 2 else "")
        seen.add((folder, key, _seed(r)))
        keys[id(r)] = (folder, key)
    groups = group_by_config(
        rows, key=lambda r: keys[id(r)], seed=_seed, name=lambda r: str(r.path)
    )
    labels = [key for _, key in groups]
    out = []
    for (folder, key), runs in groups.items():
        # A seed whose config.txt is unreadable has no model: its siblings tell.
        model = next((r.model for r in runs.values() if r.model), "unknown")
        label = key if labels.count(key) == 1 else f"{Path(folder).name}/{key}"
        out.append(Configuration(label, model, runs))
    return out


def has_seeds(configs: list[Configuration]) -> bool:
    """Whether any configuration ran with more than one seed."""
    return any(len(c.runs) > 1 for c in configs)


def seeded(groups: list[ModelSummaries]) -> bool:
    return has_seeds([row.config for g in groups for row in g.rows])


def configuration_of(configs: list[Configuration], run: RunRow | None) -> Configuration | None:
    return next((c for c in configs if run is not None and run in c.runs.values()), None)


@dataclass
class Summary:
    """One configuration's statistics: a Spread per figure name, and its paired
    comparison with the baseline configuration (None for the baseline itself
    or without one)."""

    config: Configuration
    spreads: dict[str, Spread]
    versus: Paired | None
    is_baseline: bool = False


@dataclass
class ModelSummaries:
    model: str
    baseline: Configuration | None
    figures: list[Figure]
    rows: list[Summary] = field(default_factory=list)


def summarize_seeds(rows: list[RunRow], baselines: dict[str, RunRow]) -> list[ModelSummaries]:
    """Per model, the statistics of each configuration against the
    configuration of the model's baseline run."""
    configs = configurations(rows)
    figs = figures(rows)
    out: dict[str, ModelSummaries] = {}
    for c in configs:
        if c.model not in out:
            base = configuration_of(configs, baselines.get(c.model))
            out[c.model] = ModelSummaries(c.model, base, figs)
        add_summary(out[c.model], c)
    return list(out.values())


def add_summary(group: ModelSummaries, c: Configuration) -> None:
    """c's spreads and its paired comparison with the group's baseline."""
    best = next((f for f in group.figures if f.name == BEST_PPL), None)  # a record may lack it
    is_base = group.baseline is c
    versus = (
        paired(group.baseline.values(best), c.values(best))
        if group.baseline is not None and not is_base and best is not None
        else None
    )
    group.rows.append(Summary(c, {f.name: c.spread(f) for f in group.figures}, versus, is_base))


def count_cell(c: Configuration) -> str:
    """ "3", or "2, 1 failed", "1, 1 failed, 1 unfinished": finished seeds first."""
    parts = [str(len(c.done))]
    if c.failed:
        parts.append(f"{c.failed} failed")
    if c.unfinished:
        parts.append(f"{c.unfinished} unfinished")
    return ", ".join(parts)


def spread_cell(s: Spread, spec: str, finished: int) -> str:
    """ "2.30 ± 0.36" (the digits the spread supports: stats.format_mean_sd);
    "2.30 (1 seed)" without a spread; "(n=2)" appended when
    fewer finished seeds than the configuration's have this figure; "-" for none."""
    if s.mean is None:
        return "-"
    text = f"{s.mean:{spec}} (1 seed)" if s.sd is None else format_mean_sd(s.mean, s.sd, spec)
    return text + (f" (n={s.n})" if s.n < finished and s.sd is not None else "")


HEADER_VERSUS = "paired Δ best ppl"


def header(group: ModelSummaries) -> list[str]:
    return ["configuration", "seeds", "n", *(f.header for f in group.figures), HEADER_VERSUS]


def cells(group: ModelSummaries, row: Summary) -> list[str]:
    """One row of the seed table as plain text, in header(group)'s order."""
    finished = len(row.config.done)
    figs = [spread_cell(row.spreads[f.name], f.spec, finished) for f in group.figures]
    if row.is_baseline:
        versus = "baseline"
    elif row.versus is not None:
        versus = format_paired(row.versus, ".2f", from_interval=True)
    else:
        versus = "-"
    return [row.config.key, row.config.seed_text, count_cell(row.config), *figs, versus]
