"""Sequence-length benchmark: every family's variants (GPT-2's attention variants, HAMT)
at equal width and depth.

For each variant and length T: training throughput (forward, backward, AdamW
step on batches of max(1, 2048 // T) sequences, so every length trains on the
same number of tokens per step; the variants' timed steps are interleaved),
training memory, generation time per token with a context of T tokens, and
the generation cache or state for the whole sequence. Memory is CUDA's max
allocated on a GPU; on a CPU, which has no allocator statistics, it is
parameters + gradients + AdamW moments + the activations autograd saves for
backward (counted by storage, once each).
"""
from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Callable

import torch

from lib.model import registry
from lib.bench.step import median_seconds
from lib.hardware.precision import resolve_device

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

LENGTHS = (64, 128, 256, 512, 1024, 2048)
TOKENS_PER_STEP = 2048


def build_models(run: RunConfig, vocab: int, max_len: int) -> dict[str, torch.nn.Module]:
    """The configured width and depth as every registered family's benchmark
    models (each family's bench_models: GPT-2's attention variants, HAMT),
    with room for max_len."""
    shape = _shape(run, vocab)
    models: dict[str, torch.nn.Module] = {}
    for family in registry.families():
        if family.bench_models is not None:
            models.update(family.bench_models(run, vocab, max_len, shape))
    return models


def _shape(run: RunConfig, vocab: int) -> dict[str, int]:
    """n_layer, n_head, n_embd of the configured model, whichever family. A
    family without heads (HAMT's config has one) gets GPT-2's 64-wide heads
    for the attention variants."""
    cfg = registry.family(run.MODEL).from_run_config(run, vocab)
    heads = cfg.n_head if cfg.n_head > 1 else max(1, cfg.n_embd // 64)
    return {"n_layer": cfg.n_layer, "n_head": heads, "n_embd": cfg.n_embd}


def saved_activation_bytes(model: torch.nn.Module, run_forward: Callable[[], torch.Tensor]
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


def _train_all(models: dict[str, torch.nn.Module], vocab: int, seq_len: int,
               device: torch.device, steps: int) -> dict[str, tuple[float, float]]:
    """Per variant, (tokens/s, peak MiB) of forward + backward + AdamW at this length.

    Every variant trains on the same batch. After a warm-up step each (it
    creates the optimizer state) and a step that measures memory, the timed
    steps alternate between the variants, in reverse order every other
    round, so that a slow spell on a shared machine falls on all of them
    alike; a variant's time is the median of its steps.
    """
    batch = max(1, TOKENS_PER_STEP // seq_len)
    gen = torch.Generator().manual_seed(seq_len)
    x = torch.randint(vocab, (batch, seq_len), generator=gen).to(device)
    y = torch.roll(x, -1, dims=1)
    steppers = {name: _Stepper(model, x, y) for name, model in models.items()}
    peaks = {}
    for name, step in steppers.items():
        step()  # warm-up
        peaks[name] = _peak_mib(step, device)
    names = list(models)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(steps):
        for name in names if i % 2 == 0 else names[::-1]:
            times[name].append(median_seconds(steppers[name], 1, device))
    return {name: (batch * seq_len / statistics.median(times[name]), peaks[name])
            for name in names}


class _Stepper:
    """One training step of a model (AdamW), noting the activation bytes saved."""

    def __init__(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
        self.model, self.x, self.y = model, x, y
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.saved = 0

    def __call__(self) -> None:
        loss, self.saved = saved_activation_bytes(self.model,
                                                  lambda: self.model(self.x, self.y)[1])
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def _peak_mib(step: _Stepper, device: torch.device) -> float:
    """Training memory of one step: CUDA's peak allocation, or on a CPU the
    weights, gradients, two AdamW moments and the activations saved."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        step()
        return torch.cuda.max_memory_allocated(device) / 2**20
    step()
    params = sum(p.numel() * p.element_size() for p in step.model.parameters())
    return (4 * params + step.saved) / 2**20


@torch.no_grad()
def _generate(model: torch.nn.Module, vocab: int, seq_len: int, device: torch.device,
              steps: int) -> tuple[float, int]:
    """(ms per generated token with a context of seq_len, cache or state bytes)."""
    model.eval()
    prompt = torch.randint(vocab, (1, seq_len - steps), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(device)
    token = prompt[:, -1:]
    _, state = model.start_generation(prompt)
    holder = [state]

    def decode() -> None:  # a cache grows with the context; a recurrent state does not
        _, holder[0] = model.continue_generation(token, holder[0])
    size = model.generation_bytes(seq_len)
    seconds = median_seconds(decode, steps, device)
    model.train()
    return 1000 * seconds, size


def run_seqlen_bench(run: RunConfig, vocab: int, lengths: tuple[int, ...] = LENGTHS,
                     steps: int = 3) -> dict[str, Any]:
    device = resolve_device(run.DEVICE)
    torch.manual_seed(run.TRAIN_SEED)
    models = {k: m.to(device) for k, m in build_models(run, vocab, max(lengths)).items()}
    rows = []
    for seq_len in lengths:
        trained = _train_all(models, vocab, seq_len, device, steps)
        for variant, model in models.items():
            tps, peak = trained[variant]
            gen_ms, state = _generate(model, vocab, seq_len, device, steps)
            rows.append({"variant": variant, "seq_len": seq_len, "train_tokens_per_sec": tps,
                         "peak_memory_mb": peak, "gen_ms_per_token": gen_ms,
                         "state_bytes": state})
    return {"device": str(device), "vocab_size": vocab, **_shape(run, vocab),
            "variants": list(models),
            "params": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
            "tokens_per_train_step": TOKENS_PER_STEP, "rows": rows}


def plot_seqlen(result: dict[str, Any], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("train_tokens_per_sec", "training tokens/s"), ("peak_memory_mb", "training MiB"),
              ("gen_ms_per_token", "generation ms/token"), ("state_bytes", "cache/state bytes")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    for ax, (key, label) in zip(axes, panels):
        for variant in result["variants"]:
            rows = [r for r in result["rows"] if r["variant"] == variant]
            ax.plot([r["seq_len"] for r in rows], [r[key] for r in rows], marker="o", label=variant)
        ax.set(xscale="log", yscale="log", xlabel="sequence length", title=label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"{result['n_layer']} layers x {result['n_embd']} wide, vocab "
                 f"{result['vocab_size']}, {result['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
