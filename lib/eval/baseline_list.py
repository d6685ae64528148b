"""The baselines `make eval-baselines` evaluates: CONFIG_EVAL_BASELINES's list.

One baseline a line: a name, the Hugging Face repository id it is fetched
from, then optionally its folder and the word trust_remote_code; `#` starts a
comment. A baseline without a folder is <CONFIG_EVAL_BASELINES_DIR>/<name>.
baselines/hamt-plan lists the HAMT plan's models.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lib.config.run_config import value_or
from lib.data.sources import DataError
from lib.paths import from_root
from lib.run.checkpoint import CheckpointError

TRUST = "trust_remote_code"
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Baseline:
    name: str
    repo: str  # Hugging Face repository id
    folder: Path
    trust_remote_code: bool  # the line says the model needs its own code

    def fetch_command(self) -> str:
        """How to download the folder where there is network."""
        return f"hf download {self.repo} --local-dir {shlex.quote(str(self.folder))}"


def read_list(path: str, models_dir: str) -> list[Baseline]:
    """The baselines of the list file; DataError naming the file and line of
    every line that cannot be read."""
    file = from_root(Path(path).expanduser())
    if not file.is_file():
        raise DataError(
            f'CONFIG_EVAL_BASELINES="{path}": {file} is not a file; point it at a '
            f"list of baselines such as baselines/hamt-plan"
        )
    root = from_root(Path(models_dir).expanduser())
    found: list[Baseline] = []
    problems: list[str] = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        trust = TRUST in words[2:]
        rest = [w for w in words[2:] if w != TRUST]
        if len(words) < 2 or len(rest) > 1 or not NAME.match(words[0]):
            problems.append(
                f"{file}:{number}: {line.strip()!r}: expected <name> <repository id> "
                f"[<folder>] [{TRUST}], the name of letters, digits, '.', '_' or '-'"
            )
            continue
        folder = from_root(Path(rest[0]).expanduser()) if rest else root / words[0]
        found.append(Baseline(words[0], words[1], folder, trust))
    names = [b.name for b in found]
    problems += [
        f"{file}: {n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    if problems:
        raise DataError("cannot read the baseline list:\n  " + "\n  ".join(problems))
    if not found:
        raise DataError(f"{file} lists no baselines")
    return found


def evaluate_listed(cfg: Any, log: Callable[[str], None] = print) -> dict[str, str]:
    """`make eval-baselines`: each listed baseline whose folder is there, through
    `make eval-baseline`'s evaluation; {name: outcome}. A missing folder, or one
    that needs its own code while CONFIG_EVAL_TRUST_REMOTE_CODE is off, is
    skipped with what to do; a baseline that fails is reported and the others
    still run. RuntimeError at the end when any failed."""
    from lib.eval.suite import evaluate_baseline

    baselines = read_list(cfg.EVAL_BASELINES, cfg.EVAL_BASELINES_DIR)
    trusted = bool(value_or(cfg.EVAL_TRUST_REMOTE_CODE, False))
    outcome: dict[str, str] = {}
    for b in baselines:
        if not (b.folder / "config.json").is_file():
            outcome[b.name] = (
                f"skipped: {b.folder} is missing. Fetch it where there is network: "
                f"{b.fetch_command()}; on a node without, copy the folder there or set "
                f"CONFIG_EVAL_BASELINES_DIR to where the folders are"
            )
        elif b.trust_remote_code and not trusted:
            outcome[b.name] = (
                f"skipped: {b.repo} runs its own model code, which needs "
                f"CONFIG_EVAL_TRUST_REMOTE_CODE=y (read {b.folder}'s *.py first)"
            )
        else:
            try:
                record = evaluate_baseline(b.folder, cfg, log)
                outcome[b.name] = f"evaluated: {record['run_id']}"
            except (CheckpointError, DataError, ValueError, OSError, RuntimeError) as err:
                outcome[b.name] = f"failed: {err}"
        log(f"eval-baselines {b.name}: {outcome[b.name]}")
    failed = [n for n, o in outcome.items() if o.startswith("failed")]
    if failed:
        raise RuntimeError(f"eval-baselines: {', '.join(failed)} failed (above); the others ran")
    return outcome
