"""The embedded default's records: its run on a reference host (or the same run on a
slow one), with the `make sample` text of its checkpoint, and the `make tune`
studies that chose its settings, in docs/bench-data/default."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from lib.atomic import read_json_object, write_json_atomic
from lib.paths import from_root

RECORD_DIR = Path("docs/bench-data/default")
RUN_FILE, STUDY_FILE = "run.json", "study.json"
RUN_FILES = {"reference": RUN_FILE, "slow": "run-slow.json"}
PROMPT = "ROMEO:"


class RecordError(ValueError):
    """A run or study that cannot be recorded (docs without their markers: BlockError)."""


def _run_seconds(run_dir: Path) -> float:
    """Start to end of the run: config.txt is written as it starts, metrics.json last
    as it ends (evaluations included; preparing the data and the venv are not)."""
    return (run_dir / "metrics.json").stat().st_mtime - (run_dir / "config.txt").stat().st_mtime


def _machine(m: dict[str, Any]) -> dict[str, Any]:
    """Where the run trained, from its own record: the CPU, its threads, and the CPU
    share it got (the monitor's mean: 100 % per core it had to itself)."""
    env, monitor = m.get("environment") or {}, m.get("monitor") or {}
    return {
        "host": platform.node(),
        "cpu": env.get("cpu"),
        "device": m.get("device_name"),
        "kernels": env.get("cpu_kernels"),
        "cpu_percent_mean": monitor.get("cpu_percent_mean"),
    }


def sample_text(run_dir: Path) -> str:
    """What `make sample PROMPT="ROMEO:"` prints for the run (its defaults: seed,
    temperature, top-k, 200 tokens), without the header line."""
    out = subprocess.run(
        [
            sys.executable,
            str(from_root("scripts/sample.py")),
            "--run",
            str(run_dir),
            "--prompt",
            PROMPT,
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RecordError(f"make sample failed for {run_dir}: {out.stderr.strip()}")
    header, _, text = out.stdout.partition("\n")
    return (text if header.startswith("--- sample") else out.stdout).rstrip("\n")


def run_record(run_dir: Path) -> dict[str, Any]:
    """The figures the docs show, from the run's metrics.json and config.txt."""
    m = read_json_object(run_dir / "metrics.json")
    if m.get("status") != "completed" or m.get("best_val_loss_per_char") is None:
        raise RecordError(
            f"{run_dir}/metrics.json is not a completed run with a loss per character "
            f"(status {m.get('status')!r}): record a finished run of this version"
        )
    config = (run_dir / "config.txt").read_text()
    model = m.get("model_config") or {}
    return {
        "run_id": m.get("run_id"),
        "defconfig": "gpt2-tiny-shakespeare",
        "settings": [line for line in config.splitlines() if line.startswith("CONFIG_")],
        "tokenizer": m.get("tokenizer"),
        "vocab_size": model.get("vocab_size"),
        "shape": {k: model.get(k) for k in ("n_layer", "n_head", "n_embd", "block_size")},
        "params": m.get("params"),
        "iterations": m.get("iterations"),
        "tokens_per_iter": m.get("tokens_per_iter"),
        "first_val_loss": (m.get("val_loss") or {}).get("values", [None])[0],
        "best_val_loss": m["best_val_loss"],
        "best_val_loss_per_char": m["best_val_loss_per_char"],
        "final_val_loss_per_char": m.get("final_val_loss_per_char"),
        "val_tokens_per_char": m.get("val_tokens_per_char"),
        "val_loss_per_char": m.get("val_loss_per_char"),
        "tokens_per_sec": m.get("tokens_per_sec"),
        "run_seconds": round(_run_seconds(run_dir), 1),
        "machine": _machine(m),
        "sample_command": f'make sample PROMPT="{PROMPT}"',
        "sample": sample_text(run_dir),
    }


def study_record(label: str, matrix: Path) -> dict[str, Any]:
    """One `make tune` study: the command-line overrides it ran with, its tuning.json,
    and the figures of its final run at the best values."""
    m = read_json_object(matrix / "matrix.json")
    tuned = [(rid, e) for rid, e in (m.get("runs") or {}).items() if e.get("tuned")]
    if len(tuned) != 1:
        raise RecordError(f"{matrix}: not the folder of one finished `make tune` study")
    run_id, entry = tuned[0]
    tuning = read_json_object(matrix / entry["tuned"]["tuning"])
    final = read_json_object(matrix / run_id / "metrics.json")
    if not tuning.get("trials") or final.get("status") != "completed":
        raise RecordError(f"{matrix}: its study or its final run {run_id} is not finished")
    return {
        "label": label,
        "overrides": m.get("overrides"),
        "tuning": {k: tuning.get(k) for k in ("symbols", "budget", "trials", "best")},
        "final": {
            "overrides": entry.get("overrides"),
            "iterations": final.get("iterations"),
            "tokens_per_iter": final.get("tokens_per_iter"),
            "params": final.get("params"),
            "best_val_loss_per_char": final.get("best_val_loss_per_char"),
        },
    }


def record_run(run_dir: Path, host: str = "reference") -> None:
    folder = from_root(RECORD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / RUN_FILES[host], run_record(run_dir))


def record_studies(studies: list[str]) -> None:
    pairs = [s.partition("=") for s in studies]
    bad = [s for s, (_, eq, path) in zip(studies, pairs) if not eq or not path]
    if bad:
        raise RecordError(f"{bad[0]}: write LABEL=<matrix folder of a make tune>")
    found = [study_record(label, Path(path)) for label, _, path in pairs]
    folder = from_root(RECORD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    # A study's matrix folder is gone once recorded: the earlier studies stay as recorded,
    # one given again under its label is replaced in place, a new one is added at the end.
    given = {x["label"]: x for x in found}
    kept = (read_json_object(folder / STUDY_FILE) or {}).get("studies") or []
    studies = [given.pop(x["label"], x) for x in kept] + list(given.values())
    write_json_atomic(folder / STUDY_FILE, {"studies": studies})
