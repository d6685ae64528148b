"""results/<run-id>/: where runs are, claiming a folder, config snapshot, output.log,
`latest` link. A new run's id and folder are lib/train/naming.py's: the id
names the model family's variant, which this layer cannot ask for."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tqdm import tqdm

from lib.paths import DEFAULT_RESULTS, DOT_CONFIG, from_root
from lib.run import owner

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunDirError(Exception):
    pass


# A folder name's limit on common filesystems (NAME_MAX), less room for the "-2"
# a second timestamped run of the same second gets.
NAME_MAX = 250


def unusable_results_dir(results_dir: str | None, folder: Path, what: str, err: OSError) -> str:
    """One paragraph for a folder under RESULTS_DIR that cannot be made (a file
    in the way, /proc, a read-only or full disk), naming the way out."""
    return (
        f"CONFIG_RESULTS_DIR={results_dir}: cannot make the {what} {folder} "
        f"({err.strerror or err}). Set RESULTS_DIR to a folder you can write, in "
        f'.config (`make menuconfig`) or for one command with SET="RESULTS_DIR=<dir>"'
    )


def is_name(text: str) -> bool:
    """A run or matrix folder name: one path part, never '..', a newline or a '/',
    short enough for the filesystem."""
    return bool(_NAME_OK.fullmatch(text)) and len(text.encode()) <= NAME_MAX


def results_root(run: RunConfig) -> Path:
    root = Path(run.RESULTS_DIR)
    return from_root(root)


_RESULTS_LINE = re.compile(rb'^CONFIG_RESULTS_DIR="((?:[^"\\]|\\.)*)"[ \t\r]*$', re.MULTILINE)


def configured_results_root(overrides: Sequence[tuple[str, str]] = ()) -> Path:
    """Where existing runs are: RESULTS_DIR as an override (SET="RESULTS_DIR=..."),
    else .config's RESULTS_DIR, else results/ (its default; commands that read runs
    work without a .config). .config is read through the checks `make` applies
    (lib/config/kconfig.py), and a problem of its RESULTS_DIR line (two of them, a
    malformed one) stops the command as it stops `make`: runs would be looked for
    where `make` does not put them. Problems elsewhere in the file do not: a run
    carries its own configuration, so a typo or an edit in progress must not stop
    `make continue`, sample, eval or export."""
    given = [value for name, value in overrides if name.removeprefix("CONFIG_") == "RESULTS_DIR"]
    if given:
        return from_root(given[-1]) if given[-1] else DEFAULT_RESULTS
    if not DOT_CONFIG.is_file():
        return DEFAULT_RESULTS
    from lib.config.kconfig import ConfigError, load_checked, shown_path

    try:
        kconf, problems = load_checked(DOT_CONFIG)
    except (ConfigError, OSError):  # not text at all: its RESULTS_DIR line, if one parses
        return _results_line()
    own = [p for p in problems if "CONFIG_RESULTS_DIR" in p]
    if own:  # a ConfigError, which every script reports as `make` does
        raise ConfigError(
            [
                *own,
                "`make` refuses this file too, and runs are looked for where `make` puts "
                "them: fix the line (or `make menuconfig`), or name the folder with "
                'SET="RESULTS_DIR=<dir>"',
            ],
            shown_path(DOT_CONFIG),
        )
    value = kconf.syms["RESULTS_DIR"].str_value
    return from_root(value) if value else DEFAULT_RESULTS


def _results_line() -> Path:
    try:
        match = _RESULTS_LINE.search(DOT_CONFIG.read_bytes())
    except OSError:
        match = None
    if not match or not match.group(1):
        return DEFAULT_RESULTS
    value = re.sub(rb"\\(.)", rb"\1", match.group(1))  # Kconfig writes \\ and \" in strings
    return from_root(os.fsdecode(value))


NAME_RULE = (
    "a run or a matrix under the results folder, as <id> or <matrix-id>/<run-id>, "
    "each part letters, digits, '.', '_' and '-' starting with a letter or digit, "
    f"at most {NAME_MAX} of them"
)


def check_run_name(name: str, results: Path) -> str:
    """RUN_NAME as `make continue` takes it: a name under results, never a
    path that leaves it ('..', '/abs', '~')."""
    parts = name.rstrip("/").split("/")
    if len(parts) > 2 or not all(is_name(part) for part in parts):
        raise RunDirError(
            f'RUN_NAME="{name}" is not a run name: give {NAME_RULE}. {_existing(results)}'
        )
    return "/".join(parts)


def _existing(results: Path, shown: int = 6) -> str:
    """'Runs and matrices under R: a, b, c' (newest first), or what to do without any."""
    try:
        names = sorted(
            (
                p
                for p in results.iterdir()
                if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
            ),
            key=lambda p: -p.stat().st_mtime,
        )
    except OSError:
        names = []
    if not names:
        return f"{results} holds no runs: start one with `make`"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"Runs and matrices under {results}: {', '.join(p.name for p in names[:shown])}{more}"


def find_run_dir(results: Path, name: str | None) -> Path:
    """The run to resume: results/<name>, or the one results/latest points to."""
    if name:
        name = check_run_name(name, results)
    path = results / name if name else results / "latest"
    if not path.exists():
        what = f"no run named '{name}'" if name else "no latest run"
        raise RunDirError(f"{what} under {results}: nothing to resume. {_existing(results)}")
    path = path.resolve()
    if not path.is_relative_to(results.resolve()):
        raise RunDirError(
            f"{results / (name or 'latest')} leads to {path}, outside the results "
            f"folder {results}: nothing was resumed"
        )
    if not (path / "config.txt").is_file():
        raise RunDirError(f"{path} has no config.txt: not a run folder")
    return path


def claim_run(path: Path, by_matrix: bool = False) -> bool:
    """Own the run folder for the rest of this process (see lib/run/owner.py).
    A run of a matrix whose launcher is alive is the launcher's to train,
    unless this process is that launcher's child (by_matrix)."""
    matrix = path.resolve().parent
    holder = None if by_matrix or not (matrix / "matrix.json").is_file() else owner.owner(matrix)
    if holder is not None:
        raise RunDirError(
            f"{path} belongs to the matrix {matrix.name}, whose launcher {owner.describe(holder)} "
            f"is alive and trains its runs: wait for it (`make watch` follows it), or stop it "
            f"(Ctrl-C in its terminal, or `kill {holder.get('pid')}`) and run "
            f"`{resume_command(matrix)}`"
        )

    def busy(holder: dict[str, Any]) -> str:
        return (
            f"{path} is being trained by {owner.describe(holder)}: a run has one owner at "
            f"a time. Wait for it to finish, or stop it (Ctrl-C in its terminal, or `kill "
            f"{holder.get('pid') or '<pid>'}`: it saves a checkpoint) and then "
            f"`{resume_command(path)}`"
        )

    try:
        return owner.claim(path, busy)
    except owner.Busy as err:
        raise RunDirError(str(err)) from None


def _name(path: Path) -> str:
    """The RUN_NAME that resumes path: <id>, or <matrix-id>/<run-id>."""
    path = path.resolve()
    in_matrix = (path.parent / "matrix.json").is_file()
    return f"{path.parent.name}/{path.name}" if in_matrix else path.name


def resume_command(path: Path) -> str:
    """The `make continue` that resumes the run or matrix at path: RUN_NAME=<name>
    when it is under the configured results folder, else RUN=<its path> (a run
    started with SET="RESULTS_DIR=...": its folder is where it lives)."""
    path, name = path.resolve(), _name(path)
    root = path.parents[name.count("/")]
    if root == configured_results_root().resolve():
        return f"make continue RUN_NAME={name}"
    return f"make continue RUN={path}"


def resume_point(run_dir: Path, saving: bool = True) -> Path | None:
    """ckpt_latest.pt, or None when the run has none yet: it restarts from
    step 0, and says so when an earlier attempt began (its output.log exists).
    `saving`: whether the run writes checkpoints (SAVE_CHECKPOINT)."""
    ckpt = run_dir / "ckpt_latest.pt"
    if ckpt.exists():
        return ckpt
    if (run_dir / "output.log").exists():
        why = (
            "no checkpoint yet (it stopped before its first one, written at the first "
            "evaluation or CHECKPOINT_INTERVAL)"
            if saving
            else "no checkpoint (SAVE_CHECKPOINT is off for this run)"
        )
        note = f"{run_dir.name}: {why}: restarting it from step 0 with its config.txt"
        print(note, flush=True)
        with open(run_dir / "output.log", "a") as log:
            log.write(note + "\n")
    return None


def run_folder(path: str | Path | None, results: Path) -> Path:
    """A finished or running run to read (make sample/eval/export), or to resume
    (make continue RUN=<dir>): the folder given (RUN=<dir>), else the one
    results/latest points to."""
    given = Path(path) if path else None
    path = given or results / "latest"
    if not path.exists():
        what = (
            f"there is no run at {path}: no such folder"
            if given
            else f"there is no latest run under {results} ({path} does not exist)"
        )
        raise RunDirError(f"{what}. Name a run folder with RUN=<dir>. {_existing(results)}")
    if not (path / "config.txt").is_file():
        raise RunDirError(
            f"{path} is not a run folder (no config.txt): train one with `make`, "
            f"or name one with RUN=<dir>"
        )
    return path.resolve()


def point_latest(path: Path) -> None:
    """Atomically repoint results/latest at path (a relative symlink)."""
    link = path.parent / "latest"
    tmp = path.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(path.name)
    os.replace(tmp, link)


class RunLog:
    """Lines to the terminal (above the progress bar) and to output.log, plain.

    A line output.log has no room for (a full disk, a quota) does not stop the run:
    the terminal says so once and gets the lines from then on; the next record or
    checkpoint write then stops the run with what to do, if the disk is still full."""

    def __init__(self, path: Path):
        self.path = path
        self.file: IO[str] | None = open(path, "a", buffering=1)

    def __call__(self, message: str = "") -> None:
        tqdm.write(message)
        if self.file is None:
            return
        try:
            self.file.write(message + "\n")
        except OSError as err:
            self._lost(err)

    def _lost(self, err: OSError) -> None:
        file, self.file = self.file, None
        if file is not None:
            with contextlib.suppress(OSError):  # its buffer cannot be written either
                file.close()
        tqdm.write(
            f"warning: cannot append to {self.path} ({err.strerror or err}): its lines go to "
            f"this terminal only from here. Free space on that disk (`df -h "
            f"{self.path.parent}`); if it stays full, the run stops at its next record or "
            f"checkpoint write, and `{resume_command(self.path.parent)}` resumes it from its "
            f"last checkpoint once there is room"
        )

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError as err:
                self._lost(err)
