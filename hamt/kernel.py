"""The slot memory as gated linear attention, and the choice of scan backend.

Mapping. Per row, HolographicMemory's recurrence (hamt/scan.py) is

    H_t = diag(lambda^tick_t) H_{t-1} + g_t B_t^T     H: S x P, tick_t in {0, 1}^S
    r_t = w_t^T H_t

(tick_{t,s} = 1 at every token, or only at the slow bank's ticks, where the
gate g_{t,s} is also 0 between ticks). Gated linear attention with a
key-dimension gate (Yang et al. 2024, "Gated Linear Attention Transformers
with Hardware-Efficient Training", arXiv:2312.06635) is

    S_t = diag(exp(gk_t)) S_{t-1} + k_t v_t^T          S: K x V
    o_t = scale * q_t^T S_t

decaying before adding the current token's outer product and reading after
it, like HAMT. So one GLA head per layer with K = S slots and V = P packed
spectrum coordinates computes the scan exactly:

    q = w (read weights), k = g (write gates), v = B (bound spectra),
    gk_{t,s} = tick_{t,s} log lambda_s, scale = 1, S_0 = the carried slots.

A data-independent decay is the special case gk_t = log lambda for every t;
the slow bank's ticks are a time-varying one, which GLA's per-token gate
expresses as it is. gla_reference below is that recurrence written out, the
form the CPU tests check against hamt/scan.py's chunked scan.

The triton backend runs the recurrence with flash-linear-attention's
chunk_gla (the fla-core package, MIT; conventions checked against its
naive_recurrent_gla in fla/ops/gla/naive.py, version 0.6.0): inputs
[B, T, H, K] with H = heads, initial_state [B, H, K, V] in float32, scale
defaulting to K^-0.5 (so 1.0 is passed). Its kernels multiply K-blocks of
at least 16 with tl.dot, so the slot dimension is padded with zero slots to
a multiple of 16 (a zero gate, read weight and log-decay: a slot that stays
empty and is never read). V is tiled with masks and needs no padding.

The kernel runs as a torch.library custom op (hamt/gla_op.py), so that
torch.compile keeps the layer one graph. The retrieval loss
(hamt/retrieval.py) reads the slots at the end of every scan chunk with
other weights than the model's readers; the kernel returns only reads and
the final state, and a second query head would run it all again, so those
reads come from hamt/scan.py's chunk_end_reads instead (a matmul over the
chunks' writes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from hamt.config import SCAN_BACKENDS as BACKENDS

# chunk_gla's kernels need K-blocks of at least 16 (tl.dot's smallest).
_SLOT_MULTIPLE = 16
KERNEL_PACKAGE = "fla-core"
INSTALL_HINT = (
    "install the kernel package on the GPU machine: `.venv/bin/pip install -r "
    "requirements-gpu.txt` (offline: `pip download fla-core==0.6.0 -d wheels/` "
    "where there is network, then `pip install --no-index --find-links wheels/ "
    "fla-core`), or set CONFIG_HAMT_SCAN_BACKEND_TORCH=y"
)

GLA = Callable[..., tuple[Tensor, Tensor | None]]


def gla_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Gated linear attention token by token, in chunk_gla's layout and
    keyword arguments: q, k, g [B, T, H, K], v [B, T, H, V], initial_state
    [B, H, K, V]. S_t = exp(g_t)[:, None] * S_{t-1} + k_t v_t^T, then
    o_t = scale * q_t^T S_t (the current token included). Computed in
    float32 (or wider); o in v's dtype. A loop over T: for tests."""
    batch, length, heads, keys = q.shape
    work = torch.promote_types(v.dtype, torch.float32)
    scale = keys**-0.5 if scale is None else scale
    state = (
        initial_state.to(work)
        if initial_state is not None
        else v.new_zeros(batch, heads, keys, v.size(-1), dtype=work)
    )
    outs = []
    for t in range(length):
        decay = g[:, t].to(work).exp().unsqueeze(-1)  # [B, H, K, 1]
        write = k[:, t].to(work).unsqueeze(-1) * v[:, t].to(work).unsqueeze(-2)
        state = decay * state + write
        outs.append(scale * (q[:, t].to(work).unsqueeze(-2) @ state).squeeze(-2))
    out = torch.stack(outs, 1).to(v.dtype) if outs else v.new_zeros(v.shape)
    return out, (state if output_final_state else None)


def gla_scan(
    bound: Tensor,
    gates: Tensor,
    readers: Tensor,
    log_decay: Tensor,
    gla: GLA,
    state: Tensor | None = None,
    ticks: Tensor | None = None,
    final: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor | None]:
    """hamt/scan.py's chunked_scan through a GLA function (chunk_gla or gla_reference).

    bound [B, T, P], gates [B, T, S] (already 0 where a slot does not
    tick), readers [B, T, S], log_decay [S], state [B, S, P] (None: empty
    slots), ticks [T, S] bool (None: every slot ticks at every token).
    dtype: of q, k, v given to the kernel; the gate, the state and the
    results are float32 (float64 inputs stay float64). Returns (reads
    [B, T, P], final slots [B, S, P] or None).
    """
    batch, length, width = bound.shape
    slots = gates.size(-1)
    pad = -slots % _SLOT_MULTIPLE
    work = torch.promote_types(bound.dtype, torch.float32)  # float64 stays (tests)
    log_gate = (
        log_decay.to(work).expand(length, slots) if ticks is None else (log_decay.to(work) * ticks)
    )  # [T, S]
    q = readers.unsqueeze(2)  # [B, T, 1, S]: one head
    k = gates.unsqueeze(2)
    v = bound.unsqueeze(2)
    g = log_gate.view(1, length, 1, slots).expand(batch, -1, -1, -1)
    q, k, g = (F.pad(t, (0, pad)) if pad else t for t in (q, k, g))
    first = None
    if state is not None:
        first = state.to(work).unsqueeze(1)
        first = (F.pad(first, (0, 0, 0, pad)) if pad else first).contiguous()
    out, last = gla(
        q.to(dtype).contiguous(),
        k.to(dtype).contiguous(),
        v.to(dtype).contiguous(),
        g.contiguous(),
        scale=1.0,
        initial_state=first,
        output_final_state=final,
    )
    reads = out[:, :, 0].to(work)
    slots_after = last[:, 0, :slots].to(work) if final and last is not None else None
    return reads, slots_after


# ------------------------------------------------------------ backend choice


@dataclass(frozen=True)
class Backend:
    """The scan that runs: "torch" or "triton", why, and the kernel package."""

    name: str
    reason: str
    package: str | None = None

    def as_record(self, requested: str) -> dict[str, str | None]:
        return {
            "hamt_scan_backend": self.name,
            "hamt_scan_backend_requested": requested,
            "hamt_scan_backend_reason": self.reason,
            "hamt_scan_kernel": self.package,
        }


# The import check's answer, kept after the first call (by the trainer's
# metrics record, before any compilation): a plain dict lookup is all that
# torch.compile then sees in each layer's forward.
_IMPORT_PROBLEM: dict[str, str | None] = {}


def _import_problem() -> str | None:
    """None when fla-core's chunk_gla imports, else why not (checked once)."""
    if KERNEL_PACKAGE not in _IMPORT_PROBLEM:
        try:
            from fla.ops.gla import chunk_gla  # noqa: F401

            _IMPORT_PROBLEM[KERNEL_PACKAGE] = None
        except Exception as err:  # ImportError, or triton failing to initialise
            _IMPORT_PROBLEM[KERNEL_PACKAGE] = (
                f"{KERNEL_PACKAGE} does not import ({type(err).__name__}: {err})"
            )
    return _IMPORT_PROBLEM[KERNEL_PACKAGE]


def kernel_problem(device: torch.device) -> str | None:
    """Why the triton backend cannot run on device, or None."""
    if device.type != "cuda":
        return f"the model is on {device.type}; the Triton kernels need a CUDA GPU"
    return _import_problem()


def package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{KERNEL_PACKAGE} {version(KERNEL_PACKAGE)} chunk_gla"
    except PackageNotFoundError:
        return None


def resolve_backend(requested: str, device: torch.device, record: bool = True) -> Backend:
    """auto: triton on a CUDA device when fla-core imports, else torch.
    triton where it cannot run raises, naming why and how to install: a
    silent fallback would give figures for the wrong backend. record=False
    leaves out the package's version (read from its metadata, which
    torch.compile cannot trace: the layer asks with record=False)."""
    if requested not in BACKENDS:
        raise ValueError(
            f"scan_backend={requested!r} is invalid: it must be one of {', '.join(BACKENDS)}"
        )
    if requested == "torch":
        return Backend("torch", "requested")
    problem = kernel_problem(device)
    if requested == "triton":
        if problem is not None:
            raise RuntimeError(
                f"CONFIG_HAMT_SCAN_BACKEND_TRITON=y cannot run: {problem}; {INSTALL_HINT}"
            )
        return Backend("triton", "requested", package_version() if record else None)
    if problem is not None:
        return Backend("torch", f"auto: {problem}")
    version = package_version() if record else None
    return Backend("triton", "auto: CUDA device and fla-core found", version)


def load_chunk_gla(pinned: bool = True) -> GLA:
    """fla-core's chunk_gla kernels through the custom op of hamt/gla_op.py
    (imported here, not at module level: CPU installs do not have fla);
    pinned: one configuration per kernel and shape class (HAMT_KERNEL_PIN)."""
    from hamt.gla_op import as_gla

    return as_gla("fla_pinned" if pinned else "fla")
