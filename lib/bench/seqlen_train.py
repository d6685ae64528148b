"""bench-seqlen's training measurement (lib/bench/seqlen.py): every variant's
training step at one length, timed interleaved with the others', and the memory
it takes (the CUDA allocator's peak, or on a CPU the tensors counted by size).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from lib.bench.step import median_seconds
from lib.hardware.precision import Precision

if TYPE_CHECKING:
    from lib.bench.seqlen import BenchSettings


def saved_activation_bytes(
    model: torch.nn.Module, run_forward: Callable[[], torch.Tensor]
) -> tuple[torch.Tensor, int]:
    """Run a forward pass; return its loss and the bytes autograd keeps for backward,
    excluding the parameters themselves."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run_forward()
    return loss, sum(saved.values())


def train_all(
    models: dict[str, torch.nn.Module],
    vocab: int,
    seq_len: int,
    device: torch.device,
    steps: int,
    settings: BenchSettings,
) -> dict[str, tuple[float, float] | str]:
    """Per variant, (tokens/s, peak MiB) of forward + backward + AdamW at this
    length, or the error that stopped it (out of memory).

    Every variant trains on the same batch. After a warm-up step each (it
    creates the optimizer state, and compiles) and a step that measures
    memory, the timed steps alternate between the variants, in reverse order
    every other round, so that a slow spell on a shared machine falls on all
    of them alike; a variant's time is the median of its steps.
    """
    batch = max(1, settings.tokens_per_step // seq_len)
    gen = torch.Generator().manual_seed(seq_len)
    x = torch.randint(vocab, (batch, seq_len), generator=gen).to(device)
    y = torch.roll(x, -1, dims=1)
    precision = Precision(device, settings.dtype, "bench")
    steppers = {
        name: _Stepper(
            model,
            x,
            y,
            precision,
            _attention_context(name, settings),
            settings.compile and compiles(model),
        )
        for name, model in models.items()
    }
    results: dict[str, tuple[float, float] | str] = {}
    peaks = {}
    for name, step in steppers.items():
        try:
            step()  # warm-up
            peaks[name] = _peak_mib(step, device)
        except torch.OutOfMemoryError as err:
            results[name] = f"out of memory: {str(err).splitlines()[0]}"
            step.release()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    names = [name for name in models if name not in results]
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(steps):
        for name in names if i % 2 == 0 else names[::-1]:
            times[name].append(median_seconds(steppers[name], 1, device))
    for name in names:
        results[name] = (batch * seq_len / statistics.median(times[name]), peaks[name])
    for step in steppers.values():
        step.release()
    return {name: results[name] for name in models}


def _attention_context(name: str, settings: BenchSettings) -> Callable[[], Any]:
    """SDPA restricted to the flash backend for vanilla attention, when asked."""
    if not (settings.sdpa_flash and name == "vanilla"):
        return contextlib.nullcontext
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)


def compiles(model: torch.nn.Module) -> bool:
    """torch.compile where it helps: not HAMT's torch scan (its Python loop
    over chunks would be unrolled into a graph of thousands of nodes)."""
    kernels: dict[str, Any] = getattr(model, "describe_kernels", dict)()
    return kernels.get("hamt_scan_backend", "triton") != "torch"


class _Stepper:
    """One training step of a model (AdamW, under the bench's autocast); on a
    CPU it also notes the activation bytes saved for backward."""

    def __init__(
        self,
        model: torch.nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        precision: Precision | None = None,
        context: Callable[[], Any] = contextlib.nullcontext,
        compile: bool = False,
    ) -> None:
        self.model, self.x, self.y = model, x, y
        self.precision = precision or Precision(x.device, "fp32", "bench")
        self.context = context
        self.compiled = compile
        self.forward: Callable[..., Any] = torch.compile(model) if compile else model
        cuda = x.device.type == "cuda"
        self.opt: torch.optim.Optimizer | None = torch.optim.AdamW(
            model.parameters(), lr=1e-4, fused=cuda or None
        )
        self.saved = 0

    def __call__(self) -> None:
        assert self.opt is not None
        with self.context(), self.precision.autocast():
            if self.x.device.type == "cpu":  # no allocator statistics: count what is saved
                loss, self.saved = saved_activation_bytes(
                    self.model, lambda: self.forward(self.x, self.y)[1]
                )
            else:  # (the hooks would break compiled graphs and cost time on a GPU)
                loss = self.forward(self.x, self.y)[1]
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def resident_bytes(self) -> int:
        """The model's weights and its AdamW moments."""
        tensors = list(self.model.parameters())
        if self.opt is not None:
            tensors += [
                t
                for state in self.opt.state.values()
                for t in state.values()
                if isinstance(t, torch.Tensor)
            ]
        return sum(t.numel() * t.element_size() for t in tensors)

    def release(self) -> None:
        """Drop the optimizer state (GPU memory for the next length)."""
        self.opt = None
        for p in self.model.parameters():
            p.grad = None


def _peak_mib(step: _Stepper, device: torch.device) -> float:
    """Training memory of one step: on CUDA the peak allocation above what was
    allocated before it plus the variant's own weights and moments (other
    variants' stay resident and are left out); on a CPU the weights,
    gradients, two AdamW moments and the activations saved."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        above = torch.cuda.max_memory_allocated(device) - before
        return (above + step.resident_bytes()) / 2**20
    step()
    params = sum(p.numel() * p.element_size() for p in step.model.parameters())
    return (4 * params + step.saved) / 2**20
