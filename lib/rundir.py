"""results/<run-id>/: naming, creation, config snapshot, output.log, `latest` link."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lib.atomic import write_text_atomic
from lib.kconfig import ROOT
from lib import registry

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunDirError(Exception):
    pass


def results_root(run: Any) -> Path:
    root = Path(run.RESULTS_DIR)
    return root if root.is_absolute() else ROOT / root


def configured_results_root() -> Path:
    """Where runs are: .config's RESULTS_DIR, or results/ when there is no .config
    (commands that read runs work without one)."""
    from lib.config import CONFIG, load_run_config  # lib.config is the .config reader

    return results_root(load_run_config([])) if CONFIG.exists() else ROOT / "results"


def run_tag(run: Any) -> str:
    """The field's naming: model, optimizer, AdamWPrune variant, attention variant
    when not vanilla, pruning method and sparsity in percent, e.g.
    gpt2_adamwspam_magnitude_50, gpt2_adamwprune_bitter7_state_50, gpt2_adamw_none."""
    parts = [run.MODEL, run.OPTIMIZER]
    if run.OPTIMIZER == "adamwprune":
        parts.append(run.ADAMWPRUNE_VARIANT)
        if run.get("ADAMWPRUNE_BITTER4_RANK_BUDGET"):  # ours, not the original's depth ramp
            parts[-1] += "rank"
    variant = registry.family(run.MODEL).variant(run)
    if variant not in ("vanilla", run.MODEL):  # HAMT is its own variant: "hamt_adamw_none"
        parts.append(variant)
    if run.PRUNING_MODE == "none":
        parts.append("none")
    else:
        parts += [run.PRUNING_METHOD, f"{round(100 * run.PRUNING_TARGET_SPARSITY):d}"]
    return "_".join(parts)


def run_id(run: Any, now: float | None = None) -> str:
    """RUN_NAME, or the run tag plus a timestamp."""
    if run.RUN_NAME:
        if not _NAME_OK.match(run.RUN_NAME):
            raise RunDirError(f"CONFIG_RUN_NAME=\"{run.RUN_NAME}\": allowed letters, digits, "
                              f"'.', '_' and '-', starting with a letter or digit")
        return run.RUN_NAME
    return f"{run_tag(run)}_{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"


def create_run_dir(run: Any) -> Path:
    """A new run's folder; an existing one is never reused without RESUME=1."""
    path = results_root(run) / run_id(run)
    if path.exists() and any(path.iterdir()):
        raise RunDirError(f"{path} already holds a run: resume it with `make continue "
                          f"RUN_NAME={path.name}` (or RESUME=1), or choose another RUN_NAME")
    path.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path / "config.txt", run.config_text)
    point_latest(path)
    return path


def find_run_dir(results: Path, name: str | None) -> Path:
    """The run to resume: results/<name>, or the one results/latest points to."""
    path = results / name if name else results / "latest"
    if not path.exists():
        what = f"no run named '{name}'" if name else "no latest run"
        raise RunDirError(f"{what} under {results}: nothing to resume. Start one with `make`")
    path = path.resolve()
    if not (path / "config.txt").is_file():
        raise RunDirError(f"{path} has no config.txt: not a run folder")
    return path


def run_folder(path: str | Path | None, results: Path) -> Path:
    """A finished or running run to read (make sample/eval/export): the folder
    given (RUN=<dir>), else the one results/latest points to."""
    path = Path(path) if path else results / "latest"
    if not (path / "config.txt").is_file():
        raise RunDirError(f"{path} is not a run folder (no config.txt): train one with `make`, "
                          f"or name one with RUN=<dir>")
    return path.resolve()


def point_latest(path: Path) -> None:
    """Atomically repoint results/latest at path (a relative symlink)."""
    link = path.parent / "latest"
    tmp = path.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(path.name)
    os.replace(tmp, link)


class RunLog:
    """Lines to the terminal (above the progress bar) and to output.log, plain."""

    def __init__(self, path: Path):
        self.file = open(path, "a", buffering=1)

    def __call__(self, message: str = "") -> None:
        tqdm.write(message)
        self.file.write(message + "\n")

    def close(self) -> None:
        self.file.close()
