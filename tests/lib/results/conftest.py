"""Hand-made run folders and a five-run matrix for the results tests."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from lib.jobs.state import MatrixState
from lib.results import style


def write_run_config(
    folder: Path,
    optimizer: str = "adamw",
    method: str | None = None,
    sparsity: str = "0.5",
    seed: int | None = None,
) -> None:
    kconf = open_tree()
    if seed is not None:
        kconf.syms["TRAIN_SEED"].set_value(str(seed))
    kconf.syms[f"OPTIMIZER_{optimizer.upper()}"].set_value(2)
    if method:
        kconf.syms["PRUNING_MODE_SINGLE"].set_value(2)
        kconf.syms[f"PRUNING_METHOD_{method.upper()}"].set_value(2)
        kconf.syms["PRUNING_TARGET_SPARSITY"].set_value(sparsity)
    folder.mkdir(parents=True)
    write_outputs(kconf, folder / "config.txt", folder / "config.py")


def make_run(
    root: Path,
    name: str,
    best: float | None,
    *,
    optimizer="adamw",
    method=None,
    sparsity="0.5",
    metrics: str | None = None,
    seed: int | None = None,
    **extra,
) -> Path:
    """A run folder: config.txt (TRAIN_SEED=seed when given), and metrics.json
    with best perplexity `best` (or the raw text `metrics`; none when both are
    None); extra metrics.json fields replace the defaults."""
    folder = root / name
    write_run_config(folder, optimizer, method, sparsity, seed)
    if metrics is not None:
        (folder / "metrics.json").write_text(metrics)
    elif best is not None:
        loss = math.log(best)
        (folder / "metrics.json").write_text(
            json.dumps(
                {
                    "status": "completed",
                    "iterations": 20,
                    "best_val_loss": loss,
                    "best_val_perplexity": best,
                    "final_val_perplexity": best + 1,
                    "tokens_per_sec": 1000.0,
                    "peak_memory_mb": 512.0,
                    "params": 2**25,
                    "wall_time_s": 120.0,
                    "val_loss": {"iters": [10, 20], "values": [loss + 1, loss]},
                    **extra,
                }
            )
        )
    return folder


@pytest.fixture
def matrix(tmp_path) -> Path:
    return build_matrix(tmp_path)


def build_matrix(folder: Path) -> Path:
    """Dense, two magnitude runs, a malformed metrics.json (failed), one never started."""
    root = folder / "matrix_x"
    make_run(root, "gpt2_adamw_none", 100.0)
    make_run(root, "gpt2_adamw_magnitude_50", 110.0, method="magnitude", sparsity="0.5001")
    make_run(root, "gpt2_adamw_magnitude_90", 150.0, method="magnitude", sparsity="0.9")
    make_run(root, "gpt2_adamwspam_none", None, optimizer="adamwspam", metrics="{broken")
    make_run(root, "gpt2_adamwprune_bitter7_state_50", None, optimizer="adamwprune", method="state")
    MatrixState.create(root, "matrix_x", {p.name: [] for p in sorted(root.iterdir())}, {}, 0)
    state = MatrixState.load(root)
    for name, st in [
        ("gpt2_adamw_none", "completed"),
        ("gpt2_adamw_magnitude_50", "completed"),
        ("gpt2_adamw_magnitude_90", "completed"),
        ("gpt2_adamwspam_none", "failed"),
    ]:
        state.update(name, state=st)
    return root


@pytest.fixture(scope="module")
def draft_dpi():
    """PNGs at a draft resolution, for a module that asks (style.DPI 200 draws the same
    figures into 16 times the pixels): for tests of what is drawn and written, not of
    its resolution (tests/lib/results/test_figure_honesty.py checks that)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(style, "DPI", 50)
        yield


@pytest.fixture(scope="module")
def draft_figures(draft_dpi):
    """Draft PNGs, uncropped too, for a module whose tests read the tables and pages
    and only count the figures: cropping to what is drawn ("tight") draws each figure
    twice."""
    draw = Figure.savefig

    def uncropped(fig: Figure, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("bbox_inches", None)
        kwargs.pop("pad_inches", None)
        draw(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", uncropped)
        yield
