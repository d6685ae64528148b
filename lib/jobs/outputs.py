"""What a reused run still owes the new request: the outputs outside the fingerprint.

The fingerprint leaves out what is measured after training (INFERENCE_*,
LM_EVAL_*, EVAL_*), so an earlier run that matches may lack what the new
request asks for. For each run a matrix would reuse:

* inference figures (INFERENCE_BENCH y, or auto on a GPU) that its
  metrics.json lacks, or holds only as an error: measured on its checkpoint
  as `make bench-inference` does;
* lm-eval scores (LM_EVAL_AT_END) for tasks its eval.json lacks: scored on
  its checkpoint as `make lm-eval` does;
* generation samples at each evaluation (EVAL_SAMPLES) that it never wrote:
  only training makes them, so the run is trained again, as it is when the
  earlier run kept no checkpoint to measure.

The plan names what each reused run gains or why it trains; the matrix
produces the outputs (scripts/matrix.py outputs, one process per run,
before training starts) into the earlier run's folder, which the link leads
to, and records them in matrix.json ("added", or "added_error").
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import read_json_object
from lib.paths import ROOT, SCRIPTS

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

INFERENCE, LM_EVAL = "inference", "lm-eval"
LABELS = {INFERENCE: "inference figures", LM_EVAL: "lm-eval scores"}


@dataclass(frozen=True)
class Owed:
    produce: tuple[str, ...] = ()  # INFERENCE, LM_EVAL: made from the earlier checkpoint
    retrain: str | None = None  # why only training again gives what is asked

    def describe(self) -> str:
        if self.retrain:
            return f"trained again: {self.retrain}"
        return f"+ {names(self.produce)} from its checkpoint" if self.produce else ""


def names(what: tuple[str, ...] | list[str]) -> str:
    return " and ".join(LABELS[w] for w in what)


def checkpoint(folder: Path) -> str | None:
    """The checkpoint the outputs are made from: best, else latest."""
    return next((c for c in ("best", "latest") if (folder / f"ckpt_{c}.pt").is_file()), None)


def wants_inference(run: RunConfig) -> bool:
    if run.INFERENCE_BENCH == "auto":
        from lib.estimate.memory import configured_device

        return configured_device(run).kind == "cuda"  # as the trainer decides at the end
    return run.INFERENCE_BENCH == "y"


def owed(run: RunConfig, source: Path) -> Owed:
    """What the run `source` (an earlier completed run) lacks of what `run` asks."""
    from lib.eval.downstream import task_names

    produce = []
    section = read_json_object(source / "metrics.json").get("inference")
    if wants_inference(run) and (not isinstance(section, dict) or "error" in section):
        produce.append(INFERENCE)
    if run.LM_EVAL_AT_END:
        scored = read_json_object(source / "eval.json").get("lm_eval") or {}
        done = (scored.get("settings") or {}).get("tasks") if isinstance(scored, dict) else None
        if not set(task_names(run.LM_EVAL_TASKS)) <= set(done or ()):
            produce.append(LM_EVAL)
    if run.EVAL_SAMPLES and not _has_samples(source):
        return Owed(
            retrain="EVAL_SAMPLES asks for samples during training, which the earlier "
            "run did not write"
        )
    if produce and checkpoint(source) is None:
        return Owed(
            retrain=f"{names(produce)} are asked for and the earlier run kept "
            f"no checkpoint to measure"
        )
    return Owed(tuple(produce))


def _has_samples(folder: Path) -> bool:
    try:
        return (folder / "samples.jsonl").stat().st_size > 0
    except OSError:
        return False


def produce(run: RunConfig, folder: Path, what: tuple[str, ...], log: Any = print) -> None:
    """Make the outputs `what` for the run in `folder` (the link to the earlier run),
    with `run`'s settings; in this process (scripts/matrix.py outputs)."""
    ckpt = checkpoint(folder.resolve())
    assert ckpt is not None, "owed() retrains a run without a checkpoint"
    if INFERENCE in what:
        from lib.bench.inference import bench_run, describe

        log(describe(bench_run(folder, ckpt, run, log)))
    if LM_EVAL in what:
        from lib.eval.downstream import evaluate_run_tasks

        evaluate_run_tasks(folder, ckpt, run, log=log)


def run_process(run_dir: Path, what: tuple[str, ...]) -> tuple[int, str]:
    """produce() in a process of its own (the launcher keeps no model nor CUDA
    context); (exit code, the output's last lines)."""
    cmd = [
        sys.executable,
        str(SCRIPTS / "matrix.py"),
        "outputs",
        f"RUN_DIR={run_dir}",
        *(f"--make={w}" for w in what),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    return proc.returncode, tail
