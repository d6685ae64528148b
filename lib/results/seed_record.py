"""The seed statistics as a record: `make results`' summary_seeds.json.

It keeps every seed's figures, not only their statistics, and how the runs
trained and what they ran on, so that a page showing the seed tables
(docs/bench-data/<folder>/seeds_<time>.json in a bench-record block,
scripts/bench_table.py) computes them again with lib/results/seeds.py's code.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from lib.config.kconfig import saved_settings
from lib.results import environment
from lib.results.collect import RunRow
from lib.results.seeds import Configuration, Figure, ModelSummaries, add_summary
from lib.results.tables import SEED_INTRO, seed_table_lines


@dataclass(frozen=True)
class Recorded:
    """One seed's run as a record holds it: its status and figures by name."""

    status: str
    figures: dict[str, float | None]


def _recorded(r: Recorded, name: str) -> float | None:
    return r.figures.get(name)


def to_record(groups: list[ModelSummaries]) -> list[dict[str, Any]]:
    """JSON-ready: per model, its baseline, its figures, every configuration's seeds."""
    return [
        {
            "model": g.model,
            "baseline": g.baseline.key if g.baseline else None,
            "figures": [{"header": f.header, "name": f.name, "spec": f.spec} for f in g.figures],
            "configurations": [
                {
                    "key": row.config.key,
                    "seeds": {
                        str(seed): {
                            "status": r.status,
                            "figures": {f.name: _json_number(f.value(r)) for f in g.figures},
                        }
                        for seed, r in row.config.runs.items()
                    },
                }
                for row in g.rows
            ],
        }
        for g in groups
    ]


def _json_number(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None  # JSON has no inf or NaN


def from_record(models: list[dict[str, Any]]) -> list[ModelSummaries]:
    """The summaries to_record's output gives back, computed again from its seeds.
    A record of another shape raises KeyError, TypeError or ValueError."""
    out = []
    for m in models:
        figs = [
            Figure(f["header"], f["name"], partial(_recorded, name=f["name"]), f["spec"])
            for f in m["figures"]
        ]
        configs = [
            Configuration(
                c["key"],
                m["model"],
                # Recorded has what the statistics and the table read of a run
                # (status; figures through Figure.value): it stands in for RunRow.
                {
                    int(seed): cast(RunRow, Recorded(str(r["status"]), _figures(r["figures"])))
                    for seed, r in c["seeds"].items()
                },
            )
            for c in m["configurations"]
        ]
        base = next((c for c in configs if c.key == m["baseline"]), None)
        group = ModelSummaries(str(m["model"]), base, figs)
        for c in configs:
            add_summary(group, c)
        out.append(group)
    return out


def _figures(values: dict[str, Any]) -> dict[str, float | None]:
    for name, v in values.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"figure {name}={v!r} is not a number")
    return {name: None if v is None else float(v) for name, v in values.items()}


# What a seeds record says about how its runs trained (metrics.json fields).
TRAINING_FIELDS = ("dataset", "tokenizer", "dtype", "max_iters", "tokens_per_iter", "optimizer")


DEFAULT = "(default)"  # a setting some runs leave at Kconfig's default


def write(rows: list[RunRow], groups: list[ModelSummaries], out: Path) -> str:
    """summary_seeds.json: every seed's figures (to_record), when it was
    written, how the runs trained (TRAINING_FIELDS) and what they ran on and at
    which commit, and their settings as `make savedefconfig` writes them: each
    setting all runs agree on with its value, the others with each value's runs
    (DEFAULT where a run leaves it at Kconfig's default). Copied to
    docs/bench-data/<folder>/seeds_<time>.json, a page shows its table."""
    envs = environment.gather(rows)
    commits: dict[str, list[str]] = {}
    training: dict[str, dict[str, list[str]]] = {}
    recorded = [r for r in rows if r.metrics]  # an unreadable record says nothing of these
    for r in rows:
        code = (r.metrics.get("fingerprint") or {}).get("code") or {}
        commit = str(code.get("commit", "-")) + (" (dirty)" if code.get("dirty") else "")
        commits.setdefault(commit, []).append(r.run_id)
    for r in recorded:
        for name in (n for n in TRAINING_FIELDS if n in r.metrics):
            training.setdefault(name, {}).setdefault(str(r.metrics[name]), []).append(r.run_id)
    shared, differs = _split_shared(
        {s.name: s.values for s in envs.settings} | {"code.commit": commits}, len(rows)
    )
    trained, trained_differs = _split_shared(training, len(recorded))
    saved = saved_settings({r.run_id: r.path for r in rows})
    settings: dict[str, dict[str, list[str]]] = {}
    for name in sorted({n for run in saved.values() for n in run}):
        for run_id, run in saved.items():
            settings.setdefault(name, {}).setdefault(run.get(name, DEFAULT), []).append(run_id)
    shared_settings, settings_differ = _split_shared(settings, len(saved))
    record = {
        "kind": "seeds",
        "folder": out.name,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": len(rows),
        "training": trained,
        "training_differs": trained_differs,
        "environment": shared,
        "environment_differs": differs,
        # as `make savedefconfig` writes them: what a defconfig reproducing the runs holds
        "settings": shared_settings,
        "settings_differs": settings_differ,
        "settings_unread": sorted(r.run_id for r in rows if r.run_id not in saved),
        "models": to_record(groups),
    }
    return json.dumps(record, indent=1) + "\n"


def _split_shared(
    settings: dict[str, dict[str, list[str]]], runs: int
) -> tuple[dict[str, str], dict[str, dict[str, list[str]]]]:
    """(setting -> value where every run has the same, setting -> value -> runs else)."""
    shared, differs = {}, {}
    for name, values in settings.items():
        if len(values) == 1 and len(next(iter(values.values()))) == runs:
            shared[name] = next(iter(values))
        else:
            differs[name] = values
    return shared, differs


def table_lines(found: list[tuple[Path, dict]], intro: bool = True) -> list[str]:
    """Each seeds record (`make results`' summary_seeds.json) as the seed tables
    `make results` prints, computed again from the record's seeds, with what
    the runs ran on; intro: led by the paragraph on the statistics."""
    out = [SEED_INTRO, ""] if intro else []
    for path, r in found:
        env = r.get("environment") or {}
        ran_on = ", ".join(
            text
            for text in (
                env.get("cpu") if env.get("gpus") in (None, "", "-") else env.get("gpus"),
                env.get("cpu_kernels") and f"{env['cpu_kernels']} kernels",
                env.get("torch") and f"torch {env['torch']}",
                env.get("code.commit") and f"commit {env['code.commit'][:10]}",
            )
            if text
        )
        differ = ", ".join(
            sorted({**r.get("environment_differs", {}), **r.get("training_differs", {})})
        )
        trained = r.get("training") or {}
        how = ", ".join(
            text
            for text in (
                trained.get("dataset") and f"{trained['dataset']} / {trained.get('tokenizer')}",
                trained.get("dtype"),
                trained.get("max_iters") and f"{trained['max_iters']} iterations",
                trained.get("tokens_per_iter") and f"{trained['tokens_per_iter']} tokens each",
                trained.get("optimizer"),
            )
            if text
        )
        settings = ", ".join(f"`{k}={v}`" for k, v in (r.get("settings") or {}).items())
        per_run = ", ".join(r.get("settings_differs") or {})
        out += [
            f"`{path.name}`: {r['runs']} runs of `{r['folder']}`, summarised "
            f"{str(r['written'])[:10]}"
            + (f"; {how}" if how else "")
            + f"; {ran_on or 'environment not recorded'}"
            + (f"; differing between runs: {differ}" if differ else "")
            + (f"; settings besides Kconfig's defaults: {settings}" if settings else "")
            + (f" (and per run: {per_run})" if per_run else "")
            + ".",
            "",
            *seed_table_lines(from_record(r["models"]), recorded=True),
        ]
    while out and not out[-1]:
        out.pop()
    return out
