"""Triton's and inductor's compile caches, carried from one GPU window to the next.

The stages compile into cache_root() (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
and Triton's autotuning results with TRITON_CACHE_AUTOTUNING=1). At the end
`pack` writes them to one OUT/compile-cache.tar.gz (small enough to copy back
from a time-limited node with the record); put back in the tree as
.gpu-cache/compile-cache.tar.gz, `restore` unpacks it at the start of the next
check. The caches unpack to the same absolute folder they were written in:
the caches' own indexes may name absolute paths.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

ARCHIVE = "compile-cache.tar.gz"
CARRIED = Path(".gpu-cache") / ARCHIVE  # in the tree, copied to the next node with it
DEFAULT_ROOT = Path("/tmp/kconfig-llm-gpu-check-cache")
MAX_BYTES = 15 * 2**20  # under 16 MiB: a file a node's job may copy back without fuss


def cache_root() -> Path:
    """Where the stages compile into (GPU_CHECK_CACHE_ROOT, else a fixed /tmp folder)."""
    return Path(os.environ.get("GPU_CHECK_CACHE_ROOT") or DEFAULT_ROOT)


def environment(root: Path) -> dict[str, str]:
    """The variables that point the stages' compilers at the cache folder."""
    return {
        "TRITON_CACHE_DIR": str(root / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_AUTOTUNING": "1",
    }


def restore(archive: Path, root: Path) -> dict[str, object]:
    """Unpack a carried archive into root; what was restored, or why not."""
    if not archive.is_file():
        return {"restored": 0, "note": f"no {archive} carried: the compilers start cold"}
    root.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            tar.extractall(root, filter="data")  # refuses absolute paths and links out
    except (tarfile.TarError, OSError, EOFError) as err:
        return {"restored": 0, "note": f"{archive} could not be unpacked ({err}); started cold"}
    return {"restored": sum(m.isfile() for m in members), "from": str(archive)}


def _groups(root: Path) -> list[tuple[float, list[Path]]]:
    """The cache's files grouped by folder (a Triton kernel's files and its
    index share one), newest group first."""
    by_dir: dict[Path, list[Path]] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and not path.name.endswith(".lock"):
            by_dir.setdefault(path.parent, []).append(path)
    groups = [(max(p.stat().st_mtime for p in files), sorted(files)) for files in by_dir.values()]
    return sorted(groups, key=lambda g: g[0], reverse=True)


def pack(out: Path, root: Path, max_bytes: int = MAX_BYTES) -> dict[str, object]:
    """root's caches into out/ARCHIVE, whole folders newest first, leaving
    out the oldest once the archive would pass max_bytes."""
    groups = _groups(root) if root.is_dir() else []
    if not groups:
        return {"packed": 0, "note": "no compile cache was written"}
    target = out / ARCHIVE
    tmp = target.with_suffix(".tmp")
    kept = files = 0
    with tmp.open("wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
            for _, members in groups:
                size = sum(p.stat().st_size for p in members)
                # The compressed size so far is raw.tell(); a group adds at most its own size.
                if raw.tell() + size > max_bytes * 0.95:
                    continue
                for path in members:
                    tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
                kept += 1
                files += len(members)
    os.replace(tmp, target)
    return {
        "packed": files,
        "groups": kept,
        "groups_left_out": len(groups) - kept,
        "bytes": target.stat().st_size,
        "archive": target.name,
    }
