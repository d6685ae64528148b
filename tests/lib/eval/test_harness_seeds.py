"""lm-eval scores in the seed statistics of `make results` (needs lmeval's seeds.patch)."""

from __future__ import annotations

import json
import math
import statistics

from lib.results import seeds
from lib.results.collect import read_run
from tests.lib.results.conftest import make_run

ACC = {1: 0.25, 2: 0.30, 3: 0.41}  # hellaswag acc_norm per seed


def test_seed_statistics_aggregate_lm_eval_scores(tmp_path):
    rows = []
    for seed, acc in ACC.items():
        run = make_run(tmp_path, f"gpt2_adamw_none_s{seed}", 100.0 + seed, seed=seed)
        (run / "eval.json").write_text(
            json.dumps(
                {
                    "format": 1,
                    "sets": {},
                    "lm_eval": {
                        "tasks": {
                            "hellaswag": {
                                "acc": {"value": acc - 0.1, "stderr": 0.01},
                                "acc_norm": {"value": acc, "stderr": 0.01},
                            }
                        }
                    },
                }
            )
        )
        rows.append(read_run(run))
    [config] = seeds.configurations(rows)
    figure = next(f for f in seeds.figures(rows) if f.header == "hellaswag acc_norm")
    assert (figure.name, figure.spec) == ("hellaswag_acc_norm", ".3f")
    spread = config.spread(figure)
    values = list(ACC.values())
    assert spread.n == 3 and math.isclose(spread.mean, statistics.mean(values))
    assert math.isclose(spread.sd, statistics.stdev(values))
    assert math.isclose(
        spread.half_width, 4.302652729749464 * statistics.stdev(values) / math.sqrt(3)
    )
