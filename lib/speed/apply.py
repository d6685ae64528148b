"""The speed options a run applies to its model and device, checked before
the first step and recorded in metrics.json ("speed"):

* TRAIN_LOSS_IMPL: the LM head's cross-entropy without materialising the
  logits (lib/model/fused_loss.py);
* COMPILE_MODE, COMPILE_REGIONAL: how torch.compile runs (compile.py);
* SDPA_BACKEND: which scaled-dot-product-attention kernel the forward may use;
* TF32: TensorFloat-32 for float32 matmuls on NVIDIA GPUs;
* TRAIN_FLOAT8: float8 linear layers through torchao (float8.py);
* CPU_LINEAR_BACKEND: fp32 linear layers through oneDNN on a CPU (cpu_linear.py);
* CPU_MALLOC_KEEP: freed host memory reused, not faulted in again (host_malloc.py);
* PIN_MEMORY: pinned host batches copied asynchronously (lib/data/loader.py);
* CUDNN_BENCHMARK: cuDNN's autotuner (torch.backends.cudnn.benchmark);
* PYTORCH_CUDA_ALLOC_CONF: recorded here, set before CUDA starts (allocator.py);
* GPU_WARMUP: untimed forward passes before the first step (warmup.py).

What a user asks for is what runs: a kernel or mode the device cannot run is
an error here, at the start of the run, never a silent substitute. The one
exceptions are TF32 and CUDNN_BENCHMARK, permissions rather than kernels: on
a device without them (a CPU) they change nothing, and the record says so.
It applies these to a model (lib/model/interface.py), so lib/speed sits
above lib/model, below the training stack that bench and estimate share.
apply_speed reads the Speed section (run.speed) and returns AppliedSpeed.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from lib.model.fused_loss import resolve_loss_impl
from lib.speed.allocator import alloc_conf_record
from lib.speed.compile import CompileOptions, compile_model
from lib.speed.cpu_linear import convert_linears, resolve_cpu_linear
from lib.speed.float8 import check_float8, convert_float8
from lib.speed.host_malloc import host_malloc
from lib.speed.precision import DTYPES, Precision
from lib.speed.warmup import warm_up, warmup_passes

if TYPE_CHECKING:
    from lib.config.symbols import Speed
    from lib.model.interface import LanguageModel

# SDPA_BACKEND value -> torch.nn.attention.SDPBackend member name ("auto": torch picks).
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}


@contextlib.contextmanager
def attention_backend(choice: str) -> Iterator[None]:
    """Restrict F.scaled_dot_product_attention to one backend ("auto": none)."""
    if choice == "auto":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[choice])):
        yield


def with_attention_backend(forward: Callable, choice: str) -> Callable:
    """forward, called under attention_backend(choice); forward itself for auto.
    Around a compiled forward the backend is in force when it is traced, so
    the compiled graph holds that backend's kernel."""
    if choice == "auto":
        return forward

    @functools.wraps(forward)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with attention_backend(choice):
            return forward(*args, **kwargs)

    return wrapped


def check_attention_backend(choice: str, device: torch.device, dtype: str, head_dim: int) -> None:
    """Run one small causal attention under the backend, on the run's device
    and autocast dtype: a backend that cannot serve it (flash in fp32 on a
    GPU, cuDNN or efficient on a CPU, a head size a kernel lacks) fails here
    with a message that says what to change, not in the first step."""
    if choice == "auto":
        return
    if choice not in SDPA_BACKENDS:
        raise ValueError(
            f"unknown attention backend {choice!r}; one of auto, {', '.join(SDPA_BACKENDS)}"
        )
    q = torch.zeros(1, 1, 8, head_dim, device=device, dtype=DTYPES[dtype])
    try:
        with attention_backend(choice):
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
    except RuntimeError as err:
        raise RuntimeError(
            f"CONFIG_SDPA_BACKEND {choice} cannot run attention on "
            f"{device.type} in {dtype} with head size {head_dim}: "
            f"{str(err).splitlines()[0]}; choose auto (torch picks the fastest "
            f"available kernel)"
        ) from err


def apply_tf32(enabled: bool, device: torch.device) -> bool:
    """Allow TF32 for float32 matmuls on a CUDA device (PyTorch's default is
    full fp32); returns whether it is in force. Only the legacy call is used:
    mixing it with the per-backend fp32_precision API makes PyTorch raise."""
    if not enabled or device.type != "cuda":
        return False
    torch.set_float32_matmul_precision("high")
    return True


def apply_cudnn_benchmark(enabled: bool, device: torch.device) -> bool:
    """Set torch.backends.cudnn.benchmark for this process (off unless asked,
    so an earlier run in the process cannot leave it on); returns whether it is
    in force: asked for, on a CUDA device."""
    torch.backends.cudnn.benchmark = on = bool(enabled) and device.type == "cuda"
    return on


@dataclass
class AppliedSpeed:
    """What the speed options resolved to for this run (module docstring)."""

    loss_impl: str = "plain"
    loss_impl_reason: str = "as configured"
    compile: CompileOptions = field(default_factory=CompileOptions)
    sdpa_backend: str = "auto"
    tf32: bool = False
    float8: str = "none"
    float8_layers: int = 0
    cpu_linear: str = "aten"
    cpu_linear_reason: str = "as configured"
    cpu_linear_layers: int = 0
    host_malloc: str = "C library's default"  # CPU_MALLOC_KEEP: what is in force
    pin_memory: bool = False  # PIN_MEMORY and a CUDA device (BatchLoader pins only then)
    cudnn_benchmark: bool = False  # CUDNN_BENCHMARK and a CUDA device
    cuda_alloc_conf: dict[str, Any] = field(default_factory=dict)  # value in force, source
    gpu_warmup: dict[str, Any] | None = None  # GPU_WARMUP's passes and seconds, if run

    def record(self) -> dict[str, Any]:
        """metrics.json's "speed" entry."""
        out = asdict(self)
        out["compile"] = asdict(self.compile)
        return out

    def forward(self, forward: Callable) -> Callable:
        """The eager forward with the attention backend applied."""
        return with_attention_backend(forward, self.sdpa_backend)

    def compiled(self, forward: Callable, model: LanguageModel) -> Callable:
        """torch.compile of forward with these options (regional: the model's
        compile_units()), with the attention backend applied; what the trainer
        does, for benchmarks."""
        return self.forward(compile_model(forward, self.compile, model.compile_units()))

    def describe(self) -> str:
        compiled = f"compile mode {self.compile.mode}{' regional' if self.compile.regional else ''}"
        return (
            f"speed: loss {self.loss_impl} ({self.loss_impl_reason}); {compiled}; attention "
            f"{self.sdpa_backend}; tf32 {'on' if self.tf32 else 'off'}; float8 {self.float8}"
            f"{f' ({self.float8_layers} layers)' if self.float8_layers else ''}; linear "
            f"{self.cpu_linear}{f' ({self.cpu_linear_layers} layers)' if self.cpu_linear_layers else ''}"
            f" ({self.cpu_linear_reason}); freed memory {self.host_malloc}; pinned "
            f"batches {'on' if self.pin_memory else 'off'}{self._describe_gpu()}"
        )

    def _describe_gpu(self) -> str:
        """The GPU runtime settings, where any is in force."""
        parts = ["cudnn.benchmark on"] if self.cudnn_benchmark else []
        if self.cuda_alloc_conf.get("value"):
            parts.append(
                f"allocator {self.cuda_alloc_conf['value']} (from {self.cuda_alloc_conf['source']})"
            )
        if self.gpu_warmup:
            warm = self.gpu_warmup
            parts.append(
                f"warm-up {warm['passes']} passes in {warm['seconds']:.2f} s"
                + (f" ({warm['error']})" if "error" in warm else "")
            )
        return "; " + "; ".join(parts) if parts else ""


def apply_speed(
    s: Speed,
    model: LanguageModel,
    device: torch.device,
    precision: Precision,
    warm_batch: int | None = None,
) -> AppliedSpeed:
    """Check every option against the device, then apply those that change
    the model (float8 layers, the head loss) and the process (TF32, cuDNN's
    autotuner), and with `warm_batch` (training: its micro-batch size) run
    GPU_WARMUP's passes on batches of that many sequences. Call it
    after the model is on its device and before the optimizer is built (the
    float8 swap keeps the weights, but a wrapper built before would miss the
    new modules)."""
    options = CompileOptions.from_speed(s)
    if s.COMPILE_MODEL:
        options.check(device)
    backend = s.SDPA_BACKEND
    config = model.config
    head_dim = config.n_embd // config.n_head if hasattr(config, "n_head") else 64
    check_attention_backend(backend, device, precision.dtype, head_dim)
    float8 = s.TRAIN_FLOAT8
    layers = 0
    if float8 != "none":
        check_float8(float8, device)
        layers = len(convert_float8(model, float8))
    linear, linear_reason = resolve_cpu_linear(
        s.CPU_LINEAR_BACKEND, device, precision.dtype, s.COMPILE_MODEL
    )
    linear_layers = len(convert_linears(model)) if linear == "onednn" else 0
    impl, reason = resolve_loss_impl(s.TRAIN_LOSS_IMPL, device)
    model.use_head_loss(impl)
    speed = AppliedSpeed(
        impl,
        reason,
        options,
        backend,
        apply_tf32(s.TF32, device),
        float8,
        layers,
        linear,
        linear_reason,
        linear_layers,
        host_malloc(s.CPU_MALLOC_KEEP, device.type),
        s.PIN_MEMORY and device.type == "cuda",
        apply_cudnn_benchmark(s.CUDNN_BENCHMARK, device),
        alloc_conf_record(s.PYTORCH_CUDA_ALLOC_CONF),
    )
    if warm_batch is not None:  # before any optimizer or pruner exists: nothing can see the passes
        speed.gpu_warmup = warm_up(
            speed.forward(model),
            model,
            (warm_batch, model.config.block_size),
            device,
            precision.autocast,
            warmup_passes(s.GPU_WARMUP, device),
        )
    return speed
