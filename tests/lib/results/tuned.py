"""A tuned matrix for the results tests: hand-made tune/<config>/tuning.json records
of three configurations (numbers chosen so each count, best value and edge can be
worked out by hand), the final runs at the tuned values, and trial runs under tune/
that no table may show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lib.jobs.state import MatrixState
from tests.lib.results.conftest import make_run

BUDGET = {
    "trials": 6,
    "steps_per_trial": 40,
    "fraction_of_max_iters": 0.2,
    "sampler": "tpe",
    "pruner": "successive_halving",
    "seed": 0,
}
BUDGET_TEXT = (
    "6 trials x 40 steps (20 % of MAX_ITERS), TPE sampler (seed 0), successive-halving pruner"
)
LR = {"name": "LEARNING_RATE", "low": 1e-4, "high": 1e-2, "log": True}


def trial(number: int, state: str, value: float | None, lr: float, steps: int = 40) -> dict:
    return {
        "number": number,
        "state": state,
        "value": value,
        "params": {"LEARNING_RATE": lr},
        "steps": steps,
        "run_dir": f"tune/x/trial-{number:03d}",
    }


# AdamW: best 3e-3, at log10(3e-3 / 1e-4) / 2 = 0.739 of its range: no edge.
# Muon: best 9.5e-3, at log10(95) / 2 = 0.989: within 5 % of the high end.
# AdamW-SPAM: warmup 5 on a linear 0..200 range, at 0.025: the low end.
STUDIES = {
    "gpt2_adamw_none": {
        "symbols": [{**LR, "best": 3e-3, "at_edge": False}],
        "trials": [
            trial(0, "complete", 3.0, 1e-3),
            trial(1, "complete", 2.8, 2e-3),
            trial(2, "pruned", 3.5, 5e-4, steps=10),
            trial(3, "complete", 2.9, 8e-3),
            trial(4, "fail", None, 1e-2),
            trial(5, "complete", 2.6, 3e-3),
        ],
        "best": {"value": 2.6, "params": {"LEARNING_RATE": 3e-3}, "trial": 5},
    },
    "gpt2_muon_none": {
        "symbols": [{**LR, "best": 9.5e-3, "at_edge": False}],
        "trials": [
            trial(0, "complete", 2.5, 5e-3),
            trial(1, "pruned", 3.1, 2e-4, steps=10),
            trial(2, "complete", 2.2, 9.5e-3),
            trial(3, "pruned", 2.9, 1e-3, steps=20),
            trial(4, "running", None, 7e-3, steps=None),
        ],
        "best": {"value": 2.2, "params": {"LEARNING_RATE": 9.5e-3}, "trial": 2},
    },
    "gpt2_adamwspam_none": {
        "symbols": [
            {**LR, "best": 1e-3},
            {"name": "GPT2_WARMUP_STEPS", "low": 0, "high": 200, "log": False, "best": 5},
        ],
        "trials": [
            {
                **trial(0, "complete", 2.7, 1e-3),
                "params": {"LEARNING_RATE": 1e-3, "GPT2_WARMUP_STEPS": 5},
            }
        ],
        "best": {
            "value": 2.7,
            "params": {"LEARNING_RATE": 1e-3, "GPT2_WARMUP_STEPS": 5},
            "trial": 0,
        },
    },
}
OPTIMIZER = {
    "gpt2_adamw_none": "adamw",
    "gpt2_muon_none": "muon",
    "gpt2_adamwspam_none": "adamwspam",
}
FINAL_PPL = {"gpt2_adamw_none": 30.0, "gpt2_muon_none": 25.0, "gpt2_adamwspam_none": 28.0}


def write_record(root: Path, config: str, **changes) -> Path:
    path = root / "tune" / config / "tuning.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "config": config,
        "storage": "sqlite:///somewhere/tune/study.db",
        "study": config,
        "budget": BUDGET,
        **STUDIES[config],
        **changes,
    }
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def tuned(tmp_path) -> Path:
    return build_tuned(tmp_path)


def build_tuned(folder: Path) -> Path:
    """Three tuned configurations, two seeds each at the tuned values; two trial
    runs under tune/, one of them listed in matrix.json as an older engine might."""
    root = folder / "matrix_t"
    runs = {}
    for config, study in STUDIES.items():
        write_record(root, config)
        for seed in (1, 2):
            run_id = f"{config}_s{seed}"
            make_run(root, run_id, FINAL_PPL[config] + seed, optimizer=OPTIMIZER[config], seed=seed)
            runs[run_id] = [f"TRAIN_SEED={seed}"] + [
                f"{s['name']}={s['best']}" for s in study["symbols"]
            ]
    for n in (0, 1):  # trial runs: a run folder each, with better-looking numbers
        make_run(root / "tune" / "gpt2_adamw_none", f"trial-{n:03d}", 5.0 + n)
    trial_id = "tune/gpt2_adamw_none/trial-000"
    state = MatrixState.create(root, "matrix_t", {**runs, trial_id: []}, {}, 0)
    for run_id in runs:
        config = run_id.rsplit("_s", 1)[0]
        values = {s["name"]: s["best"] for s in STUDIES[config]["symbols"]}
        state.update(
            run_id,
            state="completed",
            tuned={"values": values, "tuning": f"tune/{config}/tuning.json"},
        )
    state.update(trial_id, state="completed")
    return root
