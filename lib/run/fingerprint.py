"""A run's content hash: what it trains, on which data, with which code.

content_hash() is the SHA-256 of one canonical JSON document holding
- every active symbol except those UNHASHED names (each entry says why it does
  not change what is trained), and the number of training processes;
- the prepared data's fingerprint: meta.json without its preparation time,
  the tokenizer's files, and each token file's size with a SHA-256 of its
  first and last MiB (a whole-corpus hash would read gigabytes per plan);
- for a run started from pretrained weights (GPT2_INIT_FROM=hf), their folder's
  config.json and each weight file's size with a SHA-256 of its first and last
  MiB: the path alone does not say which weights it held;
- the code version: `git rev-parse HEAD` and whether the working tree has
  uncommitted changes; outside a git checkout, the package version and a
  SHA-256 of the source files.
The trainer records fingerprint() in metrics.json; a matrix reuses a completed
run with the same hash instead of training it again (lib/jobs/reuse.py).
A run trained from a dirty tree is never reused: its commit does not say what
code trained it. A symbol missing from UNHASHED is hashed, so a new symbol
changes the hash until its entry argues otherwise: a missed entry costs a
retrain, never a wrong reuse.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.data.meta import META_NAME, SPLIT_FILES, is_prepared
from lib.data.prepared import data_dir
from lib.paths import ROOT, from_root
from lib.user_code import source_digest

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

SCHEMA = 1  # bump when the hashed document changes shape: old runs then never match
SAMPLE_BYTES = 1 << 20

# Symbols that do not change what a run trains, by name or by prefix ("X_").
UNHASHED: dict[str, str] = {
    "RUN_NAME": "names the run's folder",
    "RESULTS_DIR": "where run folders are written",
    "RESULTS_BASELINE_RUN_ID": "which run `make results` compares the others against",
    "BACKUP_DIR": "where a copy of the run folder is mirrored",
    "DATA_DIR": "where prepared data is cached; the data fingerprint covers its content",
    "TRAIN_LOG_INTERVAL": "how often the loop prints the training loss; no number it trains with",
    "MONITOR": "GPU/CPU sampling beside the run",
    "MONITOR_INTERVAL_S": "GPU/CPU sampling beside the run",
    "DIST_RDZV_ENDPOINT": "where the processes of a several-machine run meet",
    "DIST_RDZV_ID": "the name of that meeting",
    "TRACKER_": "TensorBoard / W&B / Trackio copies of figures the run logs anyway",
    "MATRIX_": "which runs a matrix makes and how it schedules them; each run's own symbols "
    "(seed included) are hashed",
    "SLURM_": "where and how long a cluster job runs; its process count is hashed as `world`",
    "EVAL_": "`make eval` settings and greedy samples, which draw no random numbers",
    "LM_EVAL_": "downstream evaluation after training",
    "INFERENCE_": "inference figures measured after training",
    "PIN_MEMORY": "how batches reach the GPU (pinned, asynchronous); the same tokens either way",
    "CHECKPOINT_INTERVAL": "how often the resume point is written; the final one is the same",
    "PYTORCH_CUDA_ALLOC_CONF": "how the CUDA allocator manages memory; the same arithmetic",
    "GPU_WARMUP": "untimed passes before training that change no weight or random state",
}
# With HYPER_PARAM_AUTO the device picks the split at start; TARGET_EFFECTIVE_BATCH is hashed.
AUTO_SPLIT = ("BATCH_SIZE", "GPT2_GRADIENT_ACCUMULATION")


def is_hashed(name: str, run: RunConfig) -> bool:
    if name in UNHASHED or any(p.endswith("_") and name.startswith(p) for p in UNHASHED):
        return False
    return not (run.HYPER_PARAM == "auto" and name in AUTO_SPLIT)


def world_size(run: RunConfig) -> int:
    """Training processes: a several-node Slurm job starts nodes x GPUs per node
    (lib/jobs/slurm.py launcher), torchrun GPT2_NUM_GPUS x DIST_NNODES."""
    if not run.GPT2_USE_DDP:
        return 1
    if run.MATRIX_EXECUTOR == "slurm" and (run.SLURM_NODES or 1) > 1:
        return (run.SLURM_NODES or 1) * max(1, run.SLURM_GPUS_PER_NODE or 1)
    return (run.GPT2_NUM_GPUS or 1) * (run.DIST_NNODES or 1)


def hashed_symbols(run: RunConfig) -> dict[str, Any]:
    return {name: value for name, value in run.values.items() if is_hashed(name, run)}


def _canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), default=str).encode()


def content_hash(
    run: RunConfig,
    data: str,
    code: dict[str, Any],
    init: str | None = None,
    sources: dict[str, str] | None = None,
) -> str:
    document = {
        "schema": SCHEMA,
        "symbols": hashed_symbols(run),
        "world": world_size(run),
        "data": data,
        "code": code,
    }
    if init is not None:  # only runs from pretrained weights: other hashes stay as they were
        document["init"] = init
    document.update(sources or {})  # only runs of the researcher's own code
    return hashlib.sha256(_canonical(document)).hexdigest()


def _file_digest(path: Path, sample: int | None = None) -> str:
    """SHA-256 of the file, or of its size, first and last `sample` bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if sample is None:
            h.update(f.read())
        else:
            size = os.fstat(f.fileno()).st_size
            h.update(str(size).encode() + f.read(sample))
            f.seek(max(0, size - sample))
            h.update(f.read(sample))
    return h.hexdigest()


@functools.lru_cache(maxsize=64)
def _data_digest(path: Path, stamp: tuple) -> str:
    """stamp: the folder's files with sizes and times, so a re-prepared folder is read again."""
    parts = {}
    for name, _, _ in stamp:
        if name == META_NAME:
            meta = json.loads((path / name).read_text(encoding="utf-8"))
            meta.pop("created", None)  # preparing the same data again keeps its fingerprint
            parts[name] = hashlib.sha256(_canonical(meta)).hexdigest()
        else:
            sample = SAMPLE_BYTES if name in SPLIT_FILES.values() else None
            parts[name] = _file_digest(path / name, sample)
    return hashlib.sha256(_canonical(parts)).hexdigest()


def data_fingerprint(path: Path) -> str | None:
    """The prepared data's fingerprint; None when it is not prepared (yet)."""
    path = Path(path).resolve()
    try:
        if not is_prepared(path):
            return None
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
        return _data_digest(path, stamp)
    except (OSError, ValueError):
        return None


# The files of a Hugging Face folder a pretrained start reads (gpt2/pretrained.py).
INIT_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def init_fingerprint(run: RunConfig) -> str | None:
    """The pretrained weights a run starts from (GPT2_INIT_FROM=hf), by content;
    None for a run from scratch."""
    if run.values.get("GPT2_INIT_FROM") != "hf":
        return None
    folder = from_root(Path(run.values.get("GPT2_INIT_PATH") or "").expanduser()).resolve()
    try:
        files = sorted({p for pattern in INIT_FILES for p in folder.glob(pattern) if p.is_file()})
        stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except OSError:
        stamp = ()
    return _init_digest(folder, stamp) if stamp else f"missing: {folder}"


def user_sources(run: RunConfig) -> dict[str, str]:
    """The SHA-256 of each module file of the researcher's own code a run trains
    with (lib/user_code.py): "optimizer_source" for OPTIMIZER=custom,
    "pruning_source" for PRUNING_METHOD=custom; found without importing them, so
    that a changed file is a different configuration. Empty for built-in methods,
    whose hashes stay as they were."""
    out = {}
    if run.values.get("OPTIMIZER") == "custom":
        out["optimizer_source"] = source_digest(str(run.values.get("OPTIMIZER_CUSTOM_CLASS") or ""))
    if run.values.get("PRUNING_MODE") == "single" and run.values.get("PRUNING_METHOD") == "custom":
        out["pruning_source"] = source_digest(str(run.values.get("PRUNING_CUSTOM_SCORE") or ""))
    return out


@functools.lru_cache(maxsize=16)
def _init_digest(path: Path, stamp: tuple) -> str:
    """stamp: the files with sizes and times, so a replaced file is read again."""
    parts = {
        name: _file_digest(path / name, None if name.endswith(".json") else SAMPLE_BYTES)
        for name, _, _ in stamp
    }
    return hashlib.sha256(_canonical(parts)).hexdigest()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()


def _source_digest(root: Path) -> str:
    """SHA-256 of the code files (.py, Kconfig, Makefile) outside data, results and tests."""
    skip = {".git", ".venv", "data", "results", "tests", "__pycache__"}
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            if path == root / "config.py":  # generated from .config, which is hashed as symbols
                continue
            if name.endswith(".py") or name.startswith("Kconfig") or name == "Makefile":
                h.update(str(path.relative_to(root)).encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def code_version(root: Path = ROOT) -> dict[str, Any]:
    """{"commit", "dirty"} in a git checkout of root, else {"version", "source"}.
    Any file git shows as changed or untracked counts as dirty."""
    root = Path(root).resolve()
    try:
        if Path(_git(root, "rev-parse", "--show-toplevel")).resolve() == root:
            return {
                "commit": _git(root, "rev-parse", "HEAD"),
                "dirty": bool(_git(root, "status", "--porcelain")),
            }
    except (OSError, subprocess.SubprocessError):
        pass  # no git, or not a checkout: a copied or installed tree
    try:
        version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        version = "unknown"
    return {"version": version, "source": _source_digest(root)}


def is_dirty(code: dict[str, Any]) -> bool:
    return bool(code.get("dirty"))


def fingerprint(run: RunConfig, code: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What metrics.json records as "fingerprint": the hash and its data and code
    parts; None while the run's data is not prepared."""
    data = data_fingerprint(data_dir(run.data))
    if data is None:
        return None
    code = code_version() if code is None else code
    init, sources = init_fingerprint(run), user_sources(run)
    return {
        "hash": content_hash(run, data, code, init, sources),
        "schema": SCHEMA,
        "data": data,
        "code": code,
        **({"init": init} if init is not None else {}),
        **sources,
    }
