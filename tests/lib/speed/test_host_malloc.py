"""CPU_MALLOC_KEEP (lib/speed/host_malloc.py): freed blocks stay in the
process, so a training step's pattern (many blocks held, then all freed)
no longer faults its pages in again every round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import lib.speed.host_malloc as host_malloc_module
from lib.paths import ROOT
from lib.speed.host_malloc import KEPT, host_malloc, keep_freed_memory, libc_name

glibc_only = pytest.mark.skipif(libc_name() != "glibc", reason="mallopt is glibc's")

# A step's shape without torch (so the process starts in milliseconds): 64 blocks
# of 1 MiB written, held together, freed together; the page faults of rounds 3-6.
ROUNDS = """
import ctypes, json, resource, sys
# One fault per 4 KiB page on every host: no transparent huge pages for this process
# (prctl PR_SET_THP_DISABLE; a host set to "always" would back the heap with 2 MiB pages).
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
if sys.argv[1] == "keep":
    from lib.speed.host_malloc import keep_freed_memory
    keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def one_round():
    blocks = [libc.malloc(1 << 20) for _ in range(64)]
    for block in blocks:
        ctypes.memset(block, 1, 1 << 20)
    for block in blocks:
        libc.free(block)
for _ in range(2):
    one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    one_round()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 4
print(json.dumps({"faults": faults, "torch": "torch" in sys.modules}))
"""


def _faults_per_round(mode: str) -> float:
    # glibc's own default, whatever malloc tunables the user's shell exports
    env = {
        k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")
    }
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["torch"] is False  # the module stays torch-free
    return result["faults"]


@glibc_only
def test_kept_memory_is_not_faulted_in_again_each_round():
    pages = 64 * (1 << 20) // 4096  # 64 MiB of 4 KiB pages, written every round
    default, kept = _faults_per_round("default"), _faults_per_round("keep")
    assert default > pages / 2  # glibc's default hands the blocks back every round
    assert kept < pages / 100


def test_what_the_record_says(monkeypatch):
    monkeypatch.setattr(host_malloc_module, "_applied", None)
    assert host_malloc(False, "cpu") == "C library's default (CPU_MALLOC_KEEP is off)"
    assert host_malloc(True, "cuda") == "C library's default (a cuda run)"
    monkeypatch.setattr(host_malloc_module, "libc_name", lambda: "musl")
    assert host_malloc(True, "cpu") == "unchanged: the C library is musl, without glibc's mallopt"
    assert host_malloc_module._applied is None
    # Process-wide and not undone: a later run in the process is told so.
    monkeypatch.setattr(host_malloc_module, "_applied", KEPT)
    assert host_malloc(False, "cpu") == f"{KEPT}, set earlier in this process"
    assert host_malloc(True, "cpu") == KEPT


@glibc_only
def test_a_refused_parameter_is_reported(monkeypatch):
    monkeypatch.setattr(host_malloc_module, "_applied", None)

    def mallopt(param: int, value: int) -> int:  # glibc's: 1 on success
        return 0 if param == host_malloc_module.M_MMAP_MAX else 1

    libc = SimpleNamespace(mallopt=mallopt)
    monkeypatch.setattr(host_malloc_module.ctypes, "CDLL", lambda name: libc)
    assert keep_freed_memory() == (
        f"unchanged: glibc's mallopt refused parameter(s) [{host_malloc_module.M_MMAP_MAX}]"
    )
    assert host_malloc_module._applied is None
