"""`make bench-linear`: the configured model's linear layers on this CPU, PyTorch's own
kernel (MKL on x86) against oneDNN's, in GFLOP/s.

These are the products CPU_LINEAR_BACKEND chooses a kernel for (lib/speed/cpu_linear.py):
auto takes oneDNN only on the kind of CPU where it measured faster in whole training
steps, and this shows in seconds how the two kernels compare on yours. For each distinct
(in, out) shape of the model's nn.Linear layers, at the configured micro-batch's rows
(batch x block): the forward, x W^T + b, and the input gradient, g W, each through
torch (F.linear, g @ W) and through oneDNN's kernel as OneDNNLinear calls it, timed in
alternating rounds; each figure is the median over the rounds. The weight gradient is a
torch product on both paths (OneDNNLinear keeps it there), so it is not timed. fp32,
eager, with this process's threads. `make bench` times whole steps with either kernel.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from lib.data.vocab import configured_vocab
from lib.model import registry
from lib.model.meta import shapes_only
from lib.run.environment import cpu_name, cpu_vendor
from lib.speed.cpu_linear import onednn_available, onednn_linear, resolve_cpu_linear

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

KERNELS = ("torch", "onednn")


def linear_shapes(model: nn.Module) -> dict[tuple[int, int], list[str]]:
    """Each distinct (in_features, out_features) of the model's plain nn.Linear layers,
    with the names of the layers of that shape."""
    shapes: dict[tuple[int, int], list[str]] = {}
    for name, module in model.named_modules():
        if type(module) is nn.Linear:
            shapes.setdefault((module.in_features, module.out_features), []).append(name)
    return shapes


def _seconds(call: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def time_shape(rows: int, k: int, n: int, calls: int, rounds: int) -> dict[str, Any]:
    """GFLOP/s of the forward and the input gradient of one (k -> n) layer over `rows`
    rows, through each kernel (rounds alternate the kernels; medians over rounds)."""
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=gen) for s in ((rows, k), (n, k), (n,)))
    g = torch.randn(rows, n, generator=gen)
    wt = w.t().contiguous()  # OneDNNLinear's backward passes W^T to the kernel
    products = {
        "forward": {
            "torch": lambda: F.linear(x, w, b),
            "onednn": lambda: onednn_linear(x, w, b),
        },
        "input_grad": {
            "torch": lambda: g @ w,
            "onednn": lambda: onednn_linear(g, wt, None),
        },
    }
    flops = 2 * rows * k * n
    out: dict[str, Any] = {"rows": rows, "in": k, "out": n}
    for product, by_kernel in products.items():
        for call in by_kernel.values():
            call()  # first call: the kernels' own set-up, not timed
        times: dict[str, list[float]] = {kernel: [] for kernel in by_kernel}
        for _ in range(rounds):
            for kernel, call in by_kernel.items():
                times[kernel].append(_seconds(call, calls))
        rates = {kernel: flops / statistics.median(t) / 1e9 for kernel, t in times.items()}
        out[product] = {
            "gflops": rates,
            "onednn_vs_torch": rates["onednn"] / rates["torch"],
        }
    return out


def run_linear_bench(run: RunConfig, calls: int = 20, rounds: int = 5) -> dict[str, Any]:
    """Every distinct linear shape of the configured model, both kernels (module
    docstring); with what CPU_LINEAR_BACKEND's auto picks on this machine, and why."""
    if not onednn_available():
        raise RuntimeError(
            "this PyTorch lacks oneDNN's linear kernel (torch.ops.mkldnn._linear_pointwise): "
            "there is nothing to compare, and CPU_LINEAR_BACKEND keeps PyTorch's own"
        )
    family = registry.family(run.MODEL)
    config = family.from_run_config(run, configured_vocab(run.data))
    with shapes_only():  # no memory, no initialisation
        model = family.build(config)
    rows = run.BATCH_SIZE * config.block_size
    auto, reason = resolve_cpu_linear("auto", torch.device("cpu"), "fp32", False)
    shapes = []
    for (k, n), names in linear_shapes(model).items():
        shapes.append({**time_shape(rows, k, n, calls, rounds), "layers": names})
    return {
        "what": "linear layers: PyTorch's kernel against oneDNN's, fp32 GFLOP/s",
        "model": run.MODEL,
        "params": sum(p.numel() for p in model.parameters()),
        "rows": rows,
        "calls_per_round": calls,
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "cpu_vendor": cpu_vendor(),
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "auto": {"cpu_linear": auto, "reason": reason},
        "shapes": shapes,
    }


def describe(r: dict[str, Any]) -> str:
    """The bench's result as `make bench-linear` prints it."""
    lines = [
        f"{r['model']}: {len(r['shapes'])} linear shapes at {r['rows']} rows, fp32, "
        f"{r['threads']} threads, {r['cpu']} ({r['cpu_kernels']} kernels); medians of "
        f"{r['rounds']} rounds of {r['calls_per_round']} calls",
        f"{'in x out':<14}{'forward: torch':>16}{'oneDNN':>9}{'ratio':>8}"
        f"{'input grad: torch':>19}{'oneDNN':>9}{'ratio':>8}  layers",
    ]
    for s in r["shapes"]:
        f, gi = s["forward"], s["input_grad"]
        lines.append(
            f"{s['in']:>5} x {s['out']:<6}{f['gflops']['torch']:>16.0f}{f['gflops']['onednn']:>9.0f}"
            f"{f['onednn_vs_torch']:>7.2f}x{gi['gflops']['torch']:>19.0f}"
            f"{gi['gflops']['onednn']:>9.0f}{gi['onednn_vs_torch']:>7.2f}x  "
            f"{', '.join(s['layers'][:2])}{' ...' if len(s['layers']) > 2 else ''}"
        )
    lines.append(
        f"GFLOP/s (ratio: oneDNN's over torch's; > 1: oneDNN faster). CPU_LINEAR_BACKEND=auto "
        f"here: {r['auto']['cpu_linear']} ({r['auto']['reason']}). Whole steps with either "
        f"kernel: make bench SET=CPU_LINEAR_BACKEND_ONEDNN=y, and _ATEN=y"
    )
    return "\n".join(lines)
