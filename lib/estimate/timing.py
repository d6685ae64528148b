"""Wall-time guess for a whole run: FLOPs / sustained FLOP/s.

FLOPs = flops_per_token (the model's own 6N + attention count, PaLM
appendix B) x training tokens, plus a third of that per evaluation token
(forward only). Sustained FLOP/s:

* GPU, 16-bit: the datasheet peak (lib/hardware/devices.py) x an assumed MFU of
  0.35 compiled (nanoGPT reports 37 % for GPT-2 124M on an A100 with
  torch.compile) or 0.25 in eager mode (typically 20-30 % for this size).
* GPU, fp32: the peak / 15: PyTorch leaves TF32 off by default, and plain
  fp32 runs at 1/16 (A100: 19.5 of 312 TFLOP/s) to 1/15 (H100) of it.
* CPU: 65 GFLOP/s per thread, measured (lib/hardware/devices.py CPU_FLOPS_PER_CORE).
* Several GPUs: divided by the world size at 90 % scaling efficiency.

Unknown peaks (MPS, GPUs not in the table) give None. Compilation adds a
fixed minute. Data preparation and the process's start-up are not counted
here: lib/estimate/calibrate.py adds them, and replaces the assumed rate by
this machine's measured one where completed runs of the same shape exist.
Expect +-50 %: MFU varies with size, sequence length and kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

MFU_COMPILED = 0.35
MFU_EAGER = 0.25
FP32_SLOWDOWN = 15
SCALING_EFFICIENCY = 0.9
COMPILE_SECONDS = 60.0


def sustained_flops(run: RunConfig, info: Any, dtype: str, world: int) -> float | None:
    if info.kind == "cpu":
        return info.sustained_flops
    if not info.peak_flops_16bit:
        return None
    mfu = MFU_COMPILED if run.COMPILE_MODEL else MFU_EAGER
    peak = info.peak_flops_16bit / (FP32_SLOWDOWN if dtype == "fp32" else 1)
    scale = world * SCALING_EFFICIENCY if world > 1 else 1
    return peak * mfu * scale


@dataclass(frozen=True)
class Breakdown:
    """A run's compute time by the FLOP model: steps, evaluations, compilation."""

    steps: int
    step_s: float  # one training step
    evaluations: int
    eval_s: float  # one evaluation (forward passes only)
    compile_s: float

    @property
    def total(self) -> float:
        return self.steps * self.step_s + self.evaluations * self.eval_s + self.compile_s


def estimate_seconds(run: RunConfig, device_info: Any = None) -> float | None:
    """Seconds to train `run` to GPT2_MAX_ITERS on device_info (default: the
    configured device), or None where no sustained FLOP/s is known."""
    parts = breakdown(run, device_info)
    return parts.total if parts else None


def breakdown(run: RunConfig, device_info: Any = None) -> Breakdown | None:
    """estimate_seconds() in its parts; None where no sustained FLOP/s is known."""
    from lib.data.vocab import configured_vocab
    from lib.estimate.memory import configured_device, model_counts, world_size
    from lib.speed.precision import choose_dtype

    info = device_info or configured_device(run)
    cfg, counts = model_counts(run, configured_vocab(run.data))
    world = world_size(run)
    try:
        dtype, _ = choose_dtype(run.speed, info.kind, info.bf16)
    except RuntimeError:  # a precision this device cannot run
        return None
    flops = sustained_flops(run, info, dtype, world)
    if not flops:
        return None
    d = run.derived(world)
    eval_tokens = run.TRAIN_EVAL_ITERS * run.BATCH_SIZE * cfg.block_size * world
    compile_s = COMPILE_SECONDS if run.COMPILE_MODEL and info.kind == "cuda" else 0.0
    return Breakdown(
        run.GPT2_MAX_ITERS,
        counts.flops_per_token * d["tokens_per_iter"] / flops,
        d["evaluations"],
        counts.flops_per_token * eval_tokens / 3 / flops,
        compile_s,
    )
