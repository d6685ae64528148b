"""Sequence-length benchmark: every family's variants (GPT-2's attention variants, HAMT)
at equal width and depth.

For each variant and length T: training throughput (forward, backward, AdamW
step on batches of max(1, tokens // T) sequences, so every length trains on the
same number of tokens per step; the variants' timed steps are interleaved),
training memory, generation time per token with a context of T tokens, and
the generation cache or state for the whole sequence.

Settings (BenchSettings) follow the device. On a CPU: every variant, T = 64 ..
2048, 2048 tokens per step, eager, the configured precision (fp32 unless set),
the linear layers on the kernel CPU_LINEAR_BACKEND resolves to, as in training.
On CUDA, the regime the models are meant for: vanilla and HAMT, T = 1024 ..
16384, 65,536 tokens per step, the configured precision (bf16 autocast in the
GPU defconfigs), torch.compile when COMPILE_MODEL is on (not for HAMT's torch
scan, whose Python loop over T / 32 chunks the compiler would unroll), fused
AdamW, and vanilla attention restricted to SDPA's flash backend. Each can be
overridden (scripts/bench.py seqlen --lengths/--tokens/--variants).

Memory on a GPU is the step's peak allocation above what was allocated before
it, plus the variant's own resident weights and AdamW moments (the other
variants' stay resident and are not counted). On a CPU, which has no
allocator statistics, it is parameters + gradients + AdamW moments + the
activations autograd saves for backward (counted by storage, once each). A
variant that runs out of memory at a length gets an `error` in its row.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

from lib.bench.models import build_models, device_name, model_shape
from lib.bench.step import median_seconds
from lib.speed.cpu_linear import convert_linears, resolve_cpu_linear
from lib.speed.precision import Precision, resolve_device, resolve_precision

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

LENGTHS = (64, 128, 256, 512, 1024, 2048)
TOKENS_PER_STEP = 2048
# On CUDA: long contexts, at least 64k tokens per step (the regime HAMT is built for).
GPU_LENGTHS = (1024, 2048, 4096, 8192, 16384)
GPU_TOKENS_PER_STEP = 65536
GPU_VARIANTS = ("vanilla", "hamt")


@dataclass
class BenchSettings:
    """What one bench-seqlen measures and how. variants: None = every one."""

    lengths: tuple[int, ...]
    tokens_per_step: int
    variants: tuple[str, ...] | None
    dtype: str
    compile: bool
    sdpa_flash: bool  # vanilla attention on SDPA's flash backend only (CUDA)
    cpu_linear: str = "aten"  # CPU_LINEAR_BACKEND resolved: every variant's linear layers

    @classmethod
    def for_device(
        cls,
        run: RunConfig,
        device: torch.device,
        lengths: tuple[int, ...] | None = None,
        tokens: int | None = None,
        variants: tuple[str, ...] | None = None,
    ) -> BenchSettings:
        cuda = device.type == "cuda"
        default_variants = GPU_VARIANTS if cuda else None
        dtype, compile = resolve_precision(run.speed, device).dtype, cuda and run.COMPILE_MODEL
        linear, _ = resolve_cpu_linear(run.CPU_LINEAR_BACKEND, device, dtype, compile)
        return cls(
            lengths=lengths or (GPU_LENGTHS if cuda else LENGTHS),
            tokens_per_step=tokens or (GPU_TOKENS_PER_STEP if cuda else TOKENS_PER_STEP),
            variants=variants or default_variants,
            dtype=dtype,
            compile=compile,
            sdpa_flash=cuda,
            cpu_linear=linear,
        )


# The training measurement: every variant's step at one length, timed interleaved
# with the others', and the memory it takes (the CUDA allocator's peak, or on a
# CPU the tensors counted by size).


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
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, tuple[float, float] | str]:
    """Per variant, (tokens/s, peak MiB) of forward + backward + AdamW at this
    length, or the error that stopped it (out of memory).

    Every variant trains on the same batch. After a warm-up step each (it
    creates the optimizer state, and compiles) and a step that measures
    memory, the timed steps alternate between the variants, in reverse order
    every other round, so that a slow spell on a shared machine falls on all
    of them alike; a variant's time is the median of its steps. on_phase
    gets the name of each phase as it begins (see run_seqlen_bench).
    """
    phase = _phases(on_phase, device)
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
            phase(f"{name} {seq_len} warm-up{' (compile)' if step.compiled else ''}")
            step()
            phase(f"{name} {seq_len} peak-memory step")
            peaks[name] = _peak_mib(step, device)
        except torch.OutOfMemoryError as err:
            results[name] = f"out of memory: {str(err).splitlines()[0]}"
            step.release()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    names = [name for name in models if name not in results]
    times: dict[str, list[float]] = {name: [] for name in names}
    if names:
        phase(f"{seq_len} timed steps")
    for i in range(steps):
        for name in names if i % 2 == 0 else names[::-1]:
            times[name].append(median_seconds(steppers[name], 1, device))
    for name in names:
        results[name] = (batch * seq_len / statistics.median(times[name]), peaks[name])
    for step in steppers.values():
        step.release()
    return {name: results[name] for name in models}


def _phases(on_phase: Callable[[str], None] | None, device: torch.device) -> Callable[[str], None]:
    """on_phase, told once the device has run what the phase before queued (a
    phase's time is then its own), or nothing."""

    def phase(name: str) -> None:
        if on_phase is not None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            on_phase(name)

    return phase


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
        # One static graph per length: no dynamic shapes (a second length
        # would otherwise recompile the graph with a symbolic length).
        self.forward: Callable[..., Any] = torch.compile(model, dynamic=False) if compile else model
        if compile:
            torch._dynamo.mark_static(x)
            torch._dynamo.mark_static(y)
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


@torch.no_grad()
def _generate(
    model: torch.nn.Module,
    vocab: int,
    seq_len: int,
    device: torch.device,
    steps: int,
    precision: Precision | None = None,
) -> tuple[float, int]:
    """(ms per generated token with a context of seq_len, cache or state bytes)."""
    model.eval()
    prompt = torch.randint(vocab, (1, seq_len - steps), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(device)
    token = prompt[:, -1:]
    autocast = (precision or Precision(device, "fp32", "bench")).autocast
    with autocast():
        _, state = model.start_generation(prompt)
    holder = [state]

    def decode() -> None:  # a cache grows with the context; a recurrent state does not
        with autocast():
            _, holder[0] = model.continue_generation(token, holder[0])

    size = model.generation_bytes(seq_len)
    seconds = median_seconds(decode, steps, device)
    model.train()
    return 1000 * seconds, size


def run_seqlen_bench(
    run: RunConfig,
    vocab: int,
    lengths: tuple[int, ...] | None = None,
    steps: int = 3,
    tokens: int | None = None,
    variants: tuple[str, ...] | None = None,
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    measured: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The benchmark with BenchSettings.for_device's settings (lengths,
    tokens per step and variants as given, else the device's defaults).

    on_row gets the rows so far once a length's training figures are
    measured (every variant's) and again as each variant's generation
    figures join its row, so a caller cut short by a time cap keeps what was
    measured. on_phase gets the name of each phase as it begins ("build
    models", "vanilla 2048 warm-up (compile)", "vanilla 2048 peak-memory
    step", "2048 timed steps", "vanilla 2048 generation", ...), on CUDA once
    the work queued before has run. measured: rows of an earlier run cut
    short; at a length where every variant's row holds training figures and
    no error, training is not run again and only the generation figures
    those rows lack are measured."""
    device = resolve_device(run.DEVICE)
    phase = _phases(on_phase, device)
    phase("build models")
    settings = BenchSettings.for_device(run, device, lengths, tokens, variants)
    torch.manual_seed(run.TRAIN_SEED)
    built = build_models(run, vocab, max(settings.lengths), settings.variants)
    models = {k: m.to(device) for k, m in built.items()}
    if settings.cpu_linear == "onednn":
        for model in models.values():
            convert_linears(model)
    precision = Precision(device, settings.dtype, "bench")
    earlier = {
        (r["variant"], r["seq_len"]): r
        for r in measured or ()
        if "error" not in r and "train_tokens_per_sec" in r
    }
    rows: list[dict[str, Any]] = []
    for seq_len in settings.lengths:
        if all((variant, seq_len) in earlier for variant in models):
            at_length = [dict(earlier[variant, seq_len]) for variant in models]
        else:
            trained = train_all(models, vocab, seq_len, device, steps, settings, on_phase)
            at_length = [_train_row(v, seq_len, settings, trained[v]) for v in models]
        rows += at_length
        if on_row:
            on_row(rows)
        for row, (variant, model) in zip(at_length, models.items()):
            if "error" in row or "gen_ms_per_token" in row:
                continue
            phase(f"{variant} {seq_len} generation")
            try:
                gen_ms, state = _generate(model, vocab, seq_len, device, steps, precision)
                row.update(gen_ms_per_token=gen_ms, state_bytes=state)
            except torch.OutOfMemoryError as err:
                row["error"] = f"generation out of memory: {str(err).splitlines()[0]}"
            if on_row:
                on_row(rows)
    return {
        "device": str(device),
        "device_name": device_name(device),
        "vocab_size": vocab,
        **model_shape(run, vocab),
        "variants": list(models),
        "params": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
        "tokens_per_train_step": settings.tokens_per_step,
        "settings": asdict(settings),
        "compiled": {k: settings.compile and compiles(m) for k, m in models.items()},
        "kernels": {k: getattr(m, "describe_kernels", dict)() for k, m in models.items()},
        "torch": torch.__version__,
        "rows": rows,
    }


def _train_row(
    variant: str, seq_len: int, settings: BenchSettings, result: tuple[float, float] | str
) -> dict[str, Any]:
    """A variant's row at one length with its training figures, or the error."""
    row: dict[str, Any] = {
        "variant": variant,
        "seq_len": seq_len,
        "batch_size": max(1, settings.tokens_per_step // seq_len),
    }
    if isinstance(result, str):
        row["error"] = result
    else:
        row.update(train_tokens_per_sec=result[0], peak_memory_mb=result[1])
    return row


def plot_seqlen(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("train_tokens_per_sec", "training tokens/s"),
        ("peak_memory_mb", "training MiB"),
        ("gen_ms_per_token", "generation ms/token"),
        ("state_bytes", "cache/state bytes"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for ax, (key, label) in zip(axes, panels):
        for variant in result["variants"]:
            rows = [r for r in result["rows"] if r["variant"] == variant and key in r]
            ax.plot([r["seq_len"] for r in rows], [r[key] for r in rows], marker="o", label=variant)
        ax.set(xscale="log", yscale="log", xlabel="sequence length", title=label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        f"{result['n_layer']} layers x {result['n_embd']} wide, vocab "
        f"{result['vocab_size']}, {result['device']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
