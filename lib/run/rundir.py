"""results/<run-id>/: where runs are, claiming a folder, config snapshot, output.log,
`latest` link. A new run's id and folder are lib/train/naming.py's: the id
names the model family's variant, which this layer cannot ask for. A folder
found through `latest` or a name is resolved once and kept in the results
folder (within_results): in a folder a group shares, links are anyone's."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tqdm import tqdm

from lib.paths import DEFAULT_RESULTS, DOT_CONFIG, from_root
from lib.run import owner
from lib.run.safe_open import LinkRefused, open_append

if TYPE_CHECKING:
    from lib.config.symbols import Run

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunDirError(Exception):
    pass


# A folder name's limit on common filesystems (NAME_MAX), less room for the "-2"
# a second timestamped run of the same second gets.
NAME_MAX = 250


def unusable_results_dir(results_dir: str | None, folder: Path, what: str, err: OSError) -> str:
    """One paragraph for a folder under RESULTS_DIR that cannot be made (a file
    in the way, /proc, a read-only or full disk), naming the way out: on a full
    disk or quota, freeing space there, with the bytes free."""
    if err.errno in OUT_OF_ROOM:
        there = _existing_part(folder)
        return (
            f"CONFIG_RESULTS_DIR={results_dir}: cannot make the {what} {folder}: "
            f"{OUT_OF_ROOM[err.errno]} ({_free(there)}). Free space there (`df -h {there}` "
            f"shows the disk, `du -sh {there}/*` what fills it) and start again, or set "
            f"RESULTS_DIR to a folder on another disk, in .config (`make menuconfig`) or "
            f'for one command with SET="RESULTS_DIR=<dir>"'
        )
    return (
        f"CONFIG_RESULTS_DIR={results_dir}: cannot make the {what} {folder} "
        f"({err.strerror or err}). Set RESULTS_DIR to a folder you can write, in "
        f'.config (`make menuconfig`) or for one command with SET="RESULTS_DIR=<dir>"'
    )


# errno -> what a full disk or quota is called in the messages that advise freeing space
OUT_OF_ROOM = {errno.ENOSPC: "no space left on device"}
if hasattr(errno, "EDQUOT"):
    OUT_OF_ROOM[errno.EDQUOT] = "disk quota exceeded"


def _existing_part(path: Path) -> Path:
    """path, or its nearest folder that exists (what `df` can be asked about)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def _free(path: Path) -> str:
    """'N bytes free on that disk' for the disk that holds path."""
    try:
        return f"{shutil.disk_usage(path).free:,} bytes free on that disk"
    except OSError:
        return "the free space there is unknown"


def is_name(text: str) -> bool:
    """A run or matrix folder name: one path part, never '..', a newline or a '/',
    short enough for the filesystem."""
    return bool(_NAME_OK.fullmatch(text)) and len(text.encode()) <= NAME_MAX


def results_root(r: Run) -> Path:
    root = Path(r.RESULTS_DIR)
    return from_root(root)


def configured_results_root(
    overrides: Sequence[tuple[str, str]] = (), instead: str = 'SET="RESULTS_DIR=<dir>"'
) -> Path:
    """Where existing runs are: RESULTS_DIR as an override (SET="RESULTS_DIR=..."),
    else .config's RESULTS_DIR, else results/ (its default; commands that read runs
    work without a .config). .config is read by the reader `make` uses
    (lib/config/kconfig.py load_setting), and a problem of its RESULTS_DIR line (two
    of them, an unquoted or malformed one, a byte that is not UTF-8) or a file that
    cannot be read stops the command as it stops `make`: runs would be looked for
    where `make` does not put them. Problems elsewhere in the file do not (a line
    there that is not UTF-8 included): a run carries its own
    configuration, so a typo or an edit in progress must not stop `make continue`,
    sample, eval or export. instead: the command's own way to name the folder."""
    given = [value for name, value in overrides if name.removeprefix("CONFIG_") == "RESULTS_DIR"]
    if given:
        return from_root(given[-1]) if given[-1] else DEFAULT_RESULTS
    if not DOT_CONFIG.is_file():
        return DEFAULT_RESULTS
    from lib.config.kconfig import ConfigError, load_setting, shown_path

    try:
        value, problems = load_setting(DOT_CONFIG, "RESULTS_DIR")
    except ConfigError as err:  # the line is not UTF-8: which folder it names is unknown
        problems = err.problems
    except OSError as err:
        problems = [f"{shown_path(DOT_CONFIG)}: cannot be read ({err.strerror or err})"]
    if problems:  # a ConfigError, which every script reports as `make` does
        raise ConfigError(
            [
                *problems,
                "`make` refuses this file too, and runs are looked for where `make` puts "
                "them: fix the line (or `make menuconfig`), or name the folder with "
                f"{instead}",
            ],
            shown_path(DOT_CONFIG),
        )
    return from_root(value) if value else DEFAULT_RESULTS


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
    path = within_results(path, results, "nothing was resumed", "RUN=<dir>")
    if not (path / "config.txt").is_file():
        raise RunDirError(f"{path} has no config.txt: not a run folder")
    return path


def within_results(link: Path, results: Path, nothing: str, instead: str) -> Path:
    """link (results/latest, results/<name>) resolved, once, where it stays in the
    results folder. In a folder a group shares anyone can repoint such a link, so
    it must not lead a command's writes out of it; a folder the user names
    (instead: RUN=<dir>, RESULTS=<dir>) may be anywhere."""
    path = link.resolve()
    if not path.is_relative_to(results.resolve()):
        raise RunDirError(
            f"{link} leads to {path}, outside the results folder {results}: {nothing}. "
            f"A link in the results folder does not take a command out of it; to use "
            f"that folder, name it: {instead.replace('<dir>', str(path))}"
        )
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
    except (owner.Busy, LinkRefused) as err:
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
    from lib.config.kconfig import ConfigError

    path, name = path.resolve(), _name(path)
    root = path.parents[name.count("/")]
    try:
        configured = configured_results_root().resolve()
    except ConfigError:  # advice inside another message: the folder itself, not a second error
        configured = None
    if root == configured:
        return f"make continue RUN_NAME={name}"
    return f"make continue RUN={path}"


def resume_point(run_dir: Path, saving: bool = True) -> Path | None:
    """ckpt_latest.pt, or None when the run has none yet: it restarts from
    step 0, and says so when an earlier attempt began (its output.log exists).
    `saving`: whether the run writes checkpoints (SAVE_CHECKPOINT)."""
    ckpt = run_dir / "ckpt_latest.pt"
    if ckpt.exists():
        return ckpt
    log = run_dir / "output.log"
    if log.exists() or log.is_symlink():
        why = (
            "no checkpoint yet (it stopped before its first one, written at the first "
            "evaluation or CHECKPOINT_INTERVAL)"
            if saving
            else "no checkpoint (SAVE_CHECKPOINT is off for this run)"
        )
        note = f"{run_dir.name}: {why}: restarting it from step 0 with its config.txt"
        print(note, flush=True)
        try:
            with open_append(log) as file:
                file.write(note + "\n")
        except LinkRefused as err:
            raise RunDirError(str(err)) from None
        except OSError as err:
            raise RunDirError(_cannot_append(log, err)) from None
    return None


def _cannot_append(log: Path, err: OSError) -> str:
    """Why output.log cannot take a line before the run starts, and what to do:
    on a full disk, free space (a run restarted now would fail at its first record)."""
    again = f"then `{resume_command(log.parent)}` again"
    if err.errno in OUT_OF_ROOM:
        return (
            f"cannot append to {log}: {OUT_OF_ROOM[err.errno]} ({_free(log.parent)}); "
            f"nothing was trained. Free space on that disk (`df -h {log.parent}` shows "
            f"it, `du -sh {log.parent.parent}/*` what fills it), {again}"
        )
    return f"cannot append to {log} ({err.strerror or err}); nothing was trained. Fix that, {again}"


def run_folder(path: str | Path | None, results: Path | None = None) -> Path:
    """A finished or running run to read or write (make sample/eval/export, make
    continue RUN=<dir>), resolved once: the folder given (RUN=<dir>: the user's
    choice, anywhere), else the one results/latest points to, which must stay in
    the results folder (within_results). results: the results folder, by default
    the configured one, read only where needed (a RUN=<dir> needs no .config)."""
    if path:
        shown = Path(path)
        if not shown.exists():
            raise RunDirError(
                f"there is no run at {shown}: no such folder. Name a run folder with "
                f"RUN=<dir>. {_runs_listed(results)}".rstrip()
            )
        found = shown.resolve()
    else:
        results = results or configured_results_root(instead="RUN=<dir>")
        shown = results / "latest"
        if not shown.exists():
            raise RunDirError(
                f"there is no latest run under {results} ({shown} does not exist). Name "
                f"a run folder with RUN=<dir>. {_existing(results)}"
            )
        found = within_results(shown, results, "nothing was read or written", "RUN=<dir>")
    if not (found / "config.txt").is_file():
        runs = [p.parent.name for p in sorted(found.glob("*/config.txt"))]
        inside = (
            f"; it holds runs, e.g. RUN={shown / runs[0]} (of {len(runs)}: "
            f"{', '.join(runs[:6])}{' ...' if len(runs) > 6 else ''})"
            if runs
            else ": train one with `make`, or name one with RUN=<dir>"
        )
        raise RunDirError(f"{shown} is not a run folder (no config.txt){inside}")
    return found


def _runs_listed(results: Path | None) -> str:
    """_existing(results or the configured folder); nothing where .config cannot
    say which (its own error belongs to the commands that need the folder)."""
    from lib.config.kconfig import ConfigError

    try:
        return _existing(results or configured_results_root())
    except ConfigError:
        return ""


def latest_in_the_way(results: Path) -> str | None:
    """The refusal when results/latest is a folder or file of someone's, not the
    link `make` keeps to the newest run: repointing it would replace (a file) or
    fail on (a folder) what is there. None when it is a link or absent."""
    link = results / "latest"
    if link.is_symlink() or not link.exists():
        return None
    kind = "folder" if link.is_dir() else "file"
    return (
        f"{link} is a {kind}, not the link `make` keeps to the newest run or matrix; "
        f"nothing was made and the {kind} was left as it is. Move it out of the way "
        f"(`mv {link} {results}/<another name>`) and start again, or set another "
        f'RESULTS_DIR (SET="RESULTS_DIR=<dir>")'
    )


def point_latest(path: Path) -> None:
    """Atomically repoint results/latest at path (a relative symlink). A folder or
    file made there since the check before path was made (latest_in_the_way) is
    left as it is, with a warning: the new folder is complete without the link."""
    link = path.parent / "latest"
    if latest_in_the_way(path.parent) is None:
        tmp = path.parent / f".latest.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(path.name)
        try:
            os.replace(tmp, link)
            return
        except OSError:  # a folder made there meanwhile, which os.replace cannot replace
            tmp.unlink(missing_ok=True)
    print(
        f"warning: {link} is no longer a link and was left as it is, so it does not "
        f"lead to {path}: name that folder itself (RUN=<dir>, RESULTS=<dir>)",
        file=sys.stderr,
    )


class RunLog:
    """Lines to the terminal (above the progress bar) and to output.log, plain.

    A line output.log has no room for (a full disk, a quota) does not stop the run:
    the terminal says so once and gets the lines from then on; the next record or
    checkpoint write then stops the run with what to do, if the disk is still full."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.file: IO[str] | None = open_append(path, buffering=1)
        except LinkRefused as err:
            raise RunDirError(str(err)) from None

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
