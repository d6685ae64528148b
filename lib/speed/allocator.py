"""PYTORCH_CUDA_ALLOC_CONF: the CUDA caching allocator's settings.

PyTorch reads them from the environment once, when CUDA starts in the
process, so a configured value must be in os.environ before the first CUDA
call: scripts/train.py calls apply_alloc_conf right after loading the run's
configuration, before anything touches the GPU (torchrun's workers inherit
it). Torch-free, so that a malformed value is refused before torch loads.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import MutableMapping
from typing import Any

ENV = "PYTORCH_CUDA_ALLOC_CONF"
# The device-generic name PyTorch 2.9+ reads as well; set alike, so that a value
# left in the environment under it cannot override the configured one.
GENERIC_ENV = "PYTORCH_ALLOC_CONF"
# Keys of PyTorch's CUDA (and ROCm) caching allocator, from its CUDA semantics notes
# ("Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF") and c10/cuda/CUDAAllocatorConfig.
KEYS = (
    "backend",
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "roundup_power2_divisions",
    "garbage_collection_threshold",
    "expandable_segments",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "pinned_reserve_segment_size_mb",
    "per_process_memory_fraction",
    "graph_capture_record_stream_reuse",
)
_ITEM = re.compile(r"([a-z0-9_]+):(\[[^\[\]]*\]|[^,\[\]:]+)$")


class AllocConfError(ValueError):
    """A malformed CONFIG_PYTORCH_CUDA_ALLOC_CONF, or one set after CUDA started."""


def _items(value: str) -> list[str]:
    """value split at the commas outside brackets (roundup_power2_divisions takes
    a bracketed list such as [256:1,512:2,>:8])."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(value):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(value[start:i])
            start = i + 1
    return items + [value[start:]]


def alloc_conf_problems(value: str) -> list[str]:
    """What is wrong with value as an allocator setting, one sentence each."""
    problems = []
    for item in _items(value.strip()):
        match = _ITEM.match(item.strip())
        if match is None:
            problems.append(f"{item.strip()!r} is not key:value")
        elif match.group(1) not in KEYS:
            problems.append(f"{match.group(1)!r} is not a key of the CUDA allocator")
    return problems


def check_alloc_conf(value: str) -> None:
    """Refuse a malformed value with one paragraph (AllocConfError)."""
    problems = alloc_conf_problems(value)
    if problems:
        raise AllocConfError(
            f"CONFIG_PYTORCH_CUDA_ALLOC_CONF={value!r}: {'; '.join(problems)}. It is a "
            f'comma-separated list of key:value pairs such as "expandable_segments:True" '
            f'or "max_split_size_mb:256,garbage_collection_threshold:0.8"; keys: '
            f"{', '.join(KEYS)}. For a key your PyTorch knows and this list does not, leave "
            f"the symbol empty and export {ENV} in the shell instead"
        )


def apply_alloc_conf(
    value: str | None, environ: MutableMapping[str, str] = os.environ
) -> str | None:
    """Put the configured value (empty/None: nothing) into the environment for
    the CUDA allocator to read when it starts; returns a notice when it replaces
    a different value the environment had. Refused when CUDA has already
    started in this process: the allocator would not read it any more."""
    value = (value or "").strip()
    before = environ.get(ENV)
    if value:
        check_alloc_conf(value)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized() and before != value:
            raise AllocConfError(
                f"CONFIG_PYTORCH_CUDA_ALLOC_CONF={value!r} came after CUDA "
                f"started in this process, so the allocator cannot read it; "
                f"set it before the first CUDA call"
            )
        environ[ENV] = value
        if GENERIC_ENV in environ:
            environ[GENERIC_ENV] = value
    if value and before not in (None, value):
        return f"{ENV}: the configured {value!r} replaces the environment's {before!r}"
    return None


def alloc_conf_record(
    configured: str | None, environ: MutableMapping[str, str] = os.environ
) -> dict[str, Any]:
    """metrics.json's record: the value in force and where it came from (the
    configuration, the environment, or nowhere: PyTorch's defaults)."""
    configured = (configured or "").strip()
    in_force = environ.get(ENV)
    source = (
        "CONFIG_PYTORCH_CUDA_ALLOC_CONF"
        if configured and in_force == configured
        else "environment"
        if in_force
        else None
    )
    return {"value": in_force, "source": source}
