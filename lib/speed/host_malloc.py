"""CPU_MALLOC_KEEP: freed host memory stays in the process for the next step.

A CPU training step allocates its activations, gradients and temporaries (a
few hundred kB to tens of MB each), holds them until the backward pass and
frees them all at once. glibc's malloc serves blocks above its mmap threshold
(128 kB, raised as such blocks are freed, up to 32 MiB) with fresh mappings it
unmaps on free, and gives the top of its heap back to the kernel when more
than its trim threshold is free there. Either way the next step touches new
pages, and each costs the kernel a minor fault and a zeroed page: 1,000-9,000
faults and 2-20 ms of system time a step on 2 cores (docs/benchmarks.md).

With mmap(2) off for blocks and trimming off (mallopt(3): M_MMAP_MAX 0,
M_TRIM_THRESHOLD -1) freed blocks are reused from the heap, as a caching
allocator does: the process keeps its high-water mark, which a training loop
reaches in its first step anyway. The arithmetic is unchanged. Only glibc has
these knobs (musl and macOS's allocator do not), and they are process-wide and
cannot be undone, so the module remembers whether it set them. Torch-free.
"""

from __future__ import annotations

import ctypes
import platform

# mallopt(3) parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
SETTINGS = ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, -1))  # -1: never trim (mallopt(3))
KEPT = "kept for reuse (glibc: mmap off for blocks, trimming off)"

_applied: str | None = None  # KEPT once this process has set it


def libc_name() -> str:
    """The C library Python runs on ("glibc", "musl", "" when unknown)."""
    return platform.libc_ver()[0]


def keep_freed_memory() -> str:
    """Set glibc's malloc to keep freed blocks for reuse (module docstring);
    returns what is now in force, or why nothing changed."""
    global _applied
    if _applied:
        return _applied
    libc = libc_name()
    if libc != "glibc":
        return f"unchanged: the C library is {libc or 'not glibc'}, without glibc's mallopt"
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    refused = [param for param, value in SETTINGS if mallopt(param, value) != 1]
    if refused:
        return f"unchanged: glibc's mallopt refused parameter(s) {refused}"
    _applied = KEPT
    return _applied


def host_malloc(enabled: bool, device_type: str) -> str:
    """CPU_MALLOC_KEEP applied to a run on `device_type`: what metrics.json's
    speed.host_malloc records."""
    if enabled and device_type == "cpu":
        return keep_freed_memory()
    if _applied:  # process-wide: an earlier run in this process set it
        return f"{_applied}, set earlier in this process"
    why = "CPU_MALLOC_KEEP is off" if not enabled else f"a {device_type} run"
    return f"C library's default ({why})"
