"""A reused run still gets what the new request asks for beyond the fingerprint
(lib/jobs/outputs.py): inference figures and lm-eval scores made on the
earlier run's checkpoint, or the run trained again where only training makes
them (samples during training, no checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

from lib.config.run_config import load_run_config
from lib.jobs import outputs
from lib.jobs.state import MatrixState
from lib.matrix import launch, plan
from lib.matrix.grid import expand
from lib.train.trainer import Trainer
from tests.lib.matrix.test_reuse import standin  # noqa: F401 (fixture)


def earlier(
    folder: Path,
    metrics: dict | None = None,
    ckpt: bool = True,
    eval_json: dict | None = None,
    samples: bool = False,
) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"status": "completed", **(metrics or {})}))
    if ckpt:
        (folder / "ckpt_best.pt").write_bytes(b"weights")
    if eval_json is not None:
        (folder / "eval.json").write_text(json.dumps(eval_json))
    if samples:
        (folder / "samples.jsonl").write_text('{"step": 4, "text": "x"}\n')
    return folder


def test_what_a_reused_run_owes(matrix_config, tmp_path):
    path = matrix_config()

    def owed(folder: Path, *sets: str) -> outputs.Owed:
        return outputs.owed(
            load_run_config([f"SET={' '.join(sets)}"] if sets else [], path), folder
        )

    plain = earlier(tmp_path / "plain")
    assert owed(plain) == outputs.Owed()  # CPU, INFERENCE_BENCH auto: nothing asked
    assert owed(plain, "INFERENCE_BENCH_Y=y").produce == (outputs.INFERENCE,)
    measured = earlier(tmp_path / "measured", {"inference": {"lengths": []}})
    assert owed(measured, "INFERENCE_BENCH_Y=y") == outputs.Owed()
    failed = earlier(tmp_path / "failed", {"inference": {"error": "RuntimeError: x"}})
    assert owed(failed, "INFERENCE_BENCH_Y=y").produce == (outputs.INFERENCE,)

    scored = earlier(
        tmp_path / "scored", eval_json={"lm_eval": {"settings": {"tasks": ["arc_easy"]}}}
    )
    asked = ("LM_EVAL_AT_END=y", "LM_EVAL_TASKS=arc_easy,piqa")
    assert owed(scored, *asked).produce == (outputs.LM_EVAL,)
    assert owed(scored, "LM_EVAL_AT_END=y", "LM_EVAL_TASKS=arc_easy") == outputs.Owed()
    both = owed(plain, "INFERENCE_BENCH_Y=y", *asked)
    assert both.produce == (outputs.INFERENCE, outputs.LM_EVAL)
    assert both.describe() == "+ inference figures and lm-eval scores from its checkpoint"

    no_ckpt = earlier(tmp_path / "no_ckpt", ckpt=False)
    assert "kept no checkpoint" in owed(no_ckpt, "INFERENCE_BENCH_Y=y").retrain
    assert owed(no_ckpt) == outputs.Owed()  # nothing to make: reused as it is
    assert "EVAL_SAMPLES" in owed(plain, "EVAL_SAMPLES=y").retrain
    assert owed(earlier(tmp_path / "sampled", samples=True), "EVAL_SAMPLES=y") == outputs.Owed()


def _trained_matrix(path: Path) -> MatrixState:
    """A matrix whose one run really trained (a checkpoint, no inference figures)."""
    base, planned = expand([], path)
    state = launch.create(base, planned, [])
    run_id = planned[0].run_id
    Trainer(planned[0].config, state.root / run_id, log=lambda _: None).train()
    state.update(run_id, state="completed", attempts=1)
    return MatrixState.load(state.root.rename(state.root.parent / "first"))


def test_a_reused_run_gains_the_inference_figures_asked_for(matrix_config, standin, capsys):
    path = matrix_config()
    first = _trained_matrix(path)
    run_id = next(iter(first.runs))
    source = first.root / run_id
    assert "inference" not in json.loads((source / "metrics.json").read_text())

    asked = "SET=INFERENCE_BENCH_Y=y"
    plan.show(*expand(["DRY_RUN=1", asked], path))
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(run_id))
    assert row.endswith(f"<- first/{run_id}  + inference figures from its checkpoint")

    assert launch.start(["YES=1", asked], lambda _: True, plan.show, path=path) == 0
    out = capsys.readouterr().out
    second = MatrixState.load((Path(load_run_config([], path).RESULTS_DIR) / "latest").resolve())
    entry = second.runs[run_id]
    assert standin.started == []  # not trained again
    assert entry["reused_from"] == f"first/{run_id}" and entry["added"] == ["inference"]
    assert f"{run_id}: added inference figures to first/{run_id}" in out
    section = json.loads((second.root / run_id / "metrics.json").read_text())["inference"]
    assert section["source"].startswith("ckpt_best.pt")
    assert [r["prompt_tokens"] for r in section["lengths"]]  # measured, at least one length
    assert all(r["decode_tokens_per_sec"] > 0 for r in section["lengths"])

    # the figures are there now: a third request reuses without measuring again
    plan.show(*expand(["DRY_RUN=1", asked], path))
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(run_id))
    assert row.endswith(f"<- first/{run_id}")


def test_samples_during_training_train_the_run_again(matrix_config, standin, capsys):
    path = matrix_config()
    first = _trained_matrix(path)
    run_id = next(iter(first.runs))
    plan.show(*expand(["DRY_RUN=1", "SET=EVAL_SAMPLES=y"], path))
    out = capsys.readouterr().out
    assert f"reuse: {run_id} is trained again: EVAL_SAMPLES asks for samples" in out
    assert " reused " not in out
    assert launch.start(["YES=1", "SET=EVAL_SAMPLES=y"], lambda _: True, plan.show, path=path) == 0
    assert standin.started == [run_id]
