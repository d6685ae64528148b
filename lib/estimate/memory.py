"""Peak training memory per device for a RunConfig, by component.

Training memory = parameters + gradients + optimizer states + activations
+ the loss's logits buffers + overhead. Parameters and their gradients are
fp32 (4 bytes each; autocast computes in 16 bits but keeps the weights in
fp32); AdamW and AdamWSPAM keep two fp32 moments (8 bytes per parameter);
pruning adds a bool mask (1 byte per pruned weight: the block matrices, and
with PRUNING_HEAD the LM head's, once even when tied) and movement pruning a
fp32 score. Activations are in lib/model/activations.py.

The peak is the largest of four moments of an optimizer step, each with its
own mix of components (the estimate reports the components at the peak):

* loss: every block's saved activations plus the cross-entropy buffers
  during its backward pass: the fp32 log-softmax (4 N V bytes), its
  gradient (4 N V) and the logits' gradient: fp32 (4 N V) in fp32 runs and
  on the CPU, 16-bit (2 N V) under CUDA autocast, whose log-softmax kernel
  reads 16-bit logits directly (measured: 12 and 10 N V in all; the forward
  pass's logits are freed by then, TrainStep keeps no reference to them).
  torch.compile on CUDA fuses the loss: 6 N V (measured on an H200).
  Gradients are already allocated when accumulating.
* backward end: all gradients, plus the second buffer of the tied
  embedding's gradient (the embedding's and the LM head's are summed; an
  untied head, GPT2_TIE_HEAD=n, has none, its V x C parameters being
  counted with the others in parameters, gradients and optimizer state).
* recompute (gradient checkpointing only): the block inputs, one block
  recomputed in full, and the gradients.
* optimizer step: gradients plus the optimizer's temporaries.

Overhead: the 16-bit copies autocast makes of every Linear weight (kept for
the backward pass), the input batch, cuBLAS workspaces on CUDA and DDP's
gradient buckets. What the estimate leaves out is what CUDA's allocator does
not count either (the CUDA context, about 0.5 GiB, and the allocator's cached
free blocks); `fits` adds a margin for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lib.data.vocab import configured_vocab
from lib.model.activations import Activations, Shape, activations

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

GIB = 2**30
MIB = 2**20
CUDA_WORKSPACE = 32 * MIB  # cuBLAS workspaces (CUBLAS_WORKSPACE_CONFIG :4096:8 on Hopper)
CONTEXT_BYTES = {"cuda": 600 * MIB, "cpu": 500 * MIB, "mps": 500 * MIB}  # context / interpreter
FIT_MARGIN = 0.10  # allocator fragmentation and cached blocks, as a fraction of the estimate
COMPONENTS = ("parameters", "gradients", "optimizer", "activations", "logits", "overhead")


@dataclass(frozen=True)
class ModelCounts:
    params: int  # unique parameters (the tied embedding once)
    linear_weights: int  # elements in Linear weights (autocast copies them)
    largest: int  # elements of the largest parameter
    prunable: int  # elements pruners may mask
    tied_embedding: int  # elements of the embedding the LM head shares
    flops_per_token: int  # training FLOPs per token at the block size (model's own count)
    tensors: int = 0  # parameter tensors (each has a 4-byte step counter)
    head: int = 0  # elements of the LM head's matrix (PRUNING_HEAD prunes it too)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device at the estimated peak, by component; total_bytes sums them."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    overhead: int
    phase: str  # the moment of the step the peak falls in
    dtype: str
    device: str
    batch_size: int
    accumulation: int
    block_size: int
    vocab_size: int
    n_layer: int
    params: int
    world_size: int = 1
    checkpointing: bool = False
    fused_attention: bool = True
    per_layer: dict[str, int] = field(default_factory=dict)
    phases: dict[str, int] = field(default_factory=dict)
    optimizer_label: str = ""  # whose state `optimizer` prices (its registry record's label)
    pruned: bool = False  # `optimizer` includes the pruner's buffers

    @property
    def total_bytes(self) -> int:
        return sum(getattr(self, name) for name in COMPONENTS)

    @property
    def activations_per_layer(self) -> int:
        return sum(self.per_layer.values())

    def required_bytes(self) -> int:
        """What a device must hold: the estimate, a margin and the context."""
        return int(self.total_bytes * (1 + FIT_MARGIN)) + CONTEXT_BYTES.get(self.device, 0)

    def fits(self, memory_bytes: int | None) -> bool | None:
        return None if memory_bytes is None else self.required_bytes() <= memory_bytes

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in COMPONENTS}
        out.update(
            total_bytes=self.total_bytes,
            phase=self.phase,
            dtype=self.dtype,
            device=self.device,
            batch_size=self.batch_size,
            accumulation=self.accumulation,
            checkpointing=self.checkpointing,
            fused_attention=self.fused_attention,
            world_size=self.world_size,
            activations_per_layer=self.activations_per_layer,
            per_layer=dict(self.per_layer),
            phases=dict(self.phases),
        )
        return out


_COUNTS: dict[str, ModelCounts] = {}


def model_counts(run: RunConfig, vocab_size: int) -> tuple[Any, ModelCounts]:
    """The family config for `run` and its parameter counts, from a model
    built on the meta device (shapes only: no memory, no initialisation)."""
    import torch

    from lib.model import registry
    from lib.model.meta import shapes_only

    family = registry.family(run.MODEL)
    cfg = family.from_run_config(run, vocab_size)
    key = f"{run.MODEL}:{cfg!r}"
    if key not in _COUNTS:
        with shapes_only():
            model = family.build(cfg)
        params = list(model.parameters())
        linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
        # the LM head's matrix when it is the embedding's (GPT2_TIE_HEAD=n: none shared)
        tied = (
            model.lm_head.weight.numel() if model.lm_head.weight is model.embedding().weight else 0
        )
        _COUNTS[key] = ModelCounts(
            sum(p.numel() for p in params),
            linear,
            max(p.numel() for p in params),
            sum(p.numel() for _, p in model.prunable()),
            tied,
            int(model.flops_per_token(cfg.block_size)),
            len(params),
            model.lm_head.weight.numel(),
        )
    return cfg, _COUNTS[key]


def world_size(run: RunConfig) -> int:
    # both 1 without GPT2_USE_DDP (their off values): one process
    return run.distributed.GPT2_NUM_GPUS * run.distributed.DIST_NNODES


def optimizer_bytes(run: RunConfig, counts: ModelCounts) -> int:
    """The optimizer's state as its record prices it (lib/optim/registry.py:
    AdamW's two fp32 moments per parameter, three with AMSGrad, SGD's one, a
    step counter per tensor; a custom class's measured), plus the pruner's buffers."""
    from lib.optim import base_optimizer, registry

    return registry.method(base_optimizer(run.optim)).state_bytes(
        run.optim, counts
    ) + pruning_bytes(run, counts)


def pruning_bytes(run: RunConfig, counts: ModelCounts) -> int:
    """The pruner's own buffers (Pruner.state_bytes): per pruned weight a bool
    mask, and movement pruning's fp32 score (knlp's rule: fp32 w0 instead).
    lib/prune/build.py prunes the block matrices, and with PRUNING_HEAD the LM
    head's matrix as one more parameter: a tied head's mask serves the
    embedding too, so it is counted once."""
    if run.PRUNING_MODE == "none":
        return 0
    from lib.prune import registry

    pruned = counts.prunable + (counts.head if run.PRUNING_HEAD else 0)
    if run.PRUNING_METHOD is None:  # a matrix's base, several methods: the mask each keeps
        return pruned
    return pruned * registry.method(run.PRUNING_METHOD).bytes_per_weight(run.prune)


def estimate_memory(
    run: RunConfig,
    vocab_size: int | None = None,
    batch_size: int | None = None,
    accumulation: int | None = None,
    device_info: Any = None,
) -> MemoryEstimate:
    """Peak memory of one device training `run` (see the module docstring).

    batch_size / accumulation default to the configured ones; device_info
    (lib.hardware.devices.DeviceInfo) to the device the run would use.
    """
    from lib.speed.precision import choose_dtype

    info = device_info or configured_device(run)
    vocab = vocab_size or configured_vocab(run.data)
    cfg, counts = model_counts(run, vocab)
    batch = batch_size or run.BATCH_SIZE
    accum = accumulation or run.GPT2_GRADIENT_ACCUMULATION
    try:
        dtype, _ = choose_dtype(run.speed, info.kind, info.bf16)
    except RuntimeError:  # e.g. fp16 asked for on a CPU: the run would stop; size it anyway
        assert run.MIXED_PRECISION_DTYPE is not None  # it refuses only a configured dtype
        dtype = run.MIXED_PRECISION_DTYPE
    act = 4 if dtype == "fp32" else 2
    shape = Shape(batch, cfg.block_size, act, info.kind, cfg.dropout)
    acts = activations(cfg, shape)
    world = world_size(run)
    fsdp = world > 1 and run.DIST_STRATEGY == "fsdp"
    ckpt = bool(run.TRAIN_GRADIENT_CHECKPOINTING)
    phases = _phases(run, counts, cfg, acts, shape, info.kind, accum, world, fsdp, ckpt)
    phase, parts = max(phases.items(), key=lambda kv: sum(kv[1].values()))
    return MemoryEstimate(
        **parts,
        phase=phase,
        dtype=dtype,
        device=info.kind,
        batch_size=batch,
        accumulation=accum,
        block_size=cfg.block_size,
        vocab_size=cfg.vocab_size,
        n_layer=cfg.n_layer,
        params=counts.params,
        world_size=world,
        checkpointing=ckpt,
        fused_attention=acts.fused_attention,
        per_layer=acts.per_layer,
        phases={k: sum(v.values()) for k, v in phases.items()},
        optimizer_label=_optimizer_label(run),
        pruned=run.PRUNING_MODE != "none",
    )


def _optimizer_label(run: RunConfig) -> str:
    from lib.optim import base_optimizer, registry

    return registry.method(base_optimizer(run.optim)).label


def _phases(
    run: RunConfig,
    counts: ModelCounts,
    cfg: Any,
    acts: Activations,
    s: Shape,
    kind: str,
    accum: int,
    world: int,
    fsdp: bool,
    ckpt: bool,
) -> dict[str, dict[str, int]]:
    """Components at each candidate peak moment (module docstring)."""
    shard = world if fsdp else 1
    params = 4 * counts.params // shard
    grads = 4 * counts.params // shard
    # pruning's masks and scores included: the pruner shards them like their weights
    optim = optimizer_bytes(run, counts) // shard
    n, layers = s.tokens, cfg.n_layer
    stored = layers * (acts.checkpointed_layer if ckpt else acts.layer_bytes) + acts.base
    # CUDA's log-softmax reads 16-bit logits straight into fp32 and returns a
    # 16-bit gradient (10 N V bytes); elsewhere autocast makes an fp32 copy (12).
    # Compiled on CUDA, Inductor fuses the loss and never holds the fp32
    # log-softmax (6 N V: the reference run measured 21.75 GiB on an H200, where
    # 10 N V gave 27.8; docs/bench-data/h200/gpu_check_20261126-225332.json).
    cuda16 = kind == "cuda" and s.act == 2
    logits = ((6 if run.COMPILE_MODEL else 10) if cuda16 else 12) * n * cfg.vocab_size
    if _loss_impl(run, kind) != "plain":
        # Chunked or Liger head loss: one chunk's logits and their gradient at a
        # time, and the fp32 gradient of the hidden states it fills chunk by chunk.
        from lib.model.fused_loss import chunk_rows

        logits = (
            12 * chunk_rows(n, cfg.n_embd, cfg.vocab_size, kind) * cfg.vocab_size
            + 4 * n * cfg.n_embd
        )
    fixed = 16 * n + (CUDA_WORKSPACE if kind == "cuda" else 0)
    if world > 1 and not fsdp:
        fixed += 4 * counts.params  # DDP's gradient buckets
    if fsdp:  # one block's parameters and gradients gathered in full, plus the next one
        fixed += 2 * 2 * 4 * (counts.params - counts.tied_embedding) // max(layers, 1)
    copies = 2 * counts.linear_weights if s.act == 2 else 0
    carry = grads if accum > 1 else 0

    def parts(g: int, a: int, lg: int, extra: int) -> dict[str, int]:
        return {
            "parameters": params,
            "gradients": g,
            "optimizer": optim,
            "activations": a,
            "logits": lg,
            "overhead": fixed + extra,
        }

    out = {
        "loss": parts(carry, stored, logits, copies),
        "backward end": parts(grads, 0, 0, 4 * counts.tied_embedding // shard),
        "optimizer step": parts(grads, 0, 0, _optimizer_temporaries(run, counts, kind)),
    }
    if ckpt:
        flowing = 2 * 4 * n * cfg.n_embd  # the stream's gradient in and out of a block
        out["recompute"] = parts(grads, stored + acts.layer_bytes + flowing, 0, copies)
    return out


def _loss_impl(run: RunConfig, kind: str) -> str:
    """TRAIN_LOSS_IMPL as a run on `kind` resolves it ("plain" or a fused one)."""
    return "plain" if run.TRAIN_LOSS_IMPL == "plain" else "chunked"


def _optimizer_temporaries(run: RunConfig, counts: ModelCounts, kind: str) -> int:
    """Temporaries of the optimizer step, as the optimizer's record prices them
    (measured on CPU; lib/optim/registry.py)."""
    from lib.optim import base_optimizer, registry

    return registry.method(base_optimizer(run.optim)).step_temporaries(run.optim, counts)


def configured_device(run: RunConfig) -> Any:
    from lib.hardware.devices import cpu_info, describe_device
    from lib.speed.precision import resolve_device

    try:
        device = resolve_device(run.DEVICE)
    except RuntimeError:  # configured for a device this machine lacks: estimate for it anyway
        from lib.hardware.devices import DeviceInfo

        return DeviceInfo(run.DEVICE, run.DEVICE, None, run.DEVICE == "cuda", None, run.DEVICE)
    return describe_device(device) if device.type != "cpu" else cpu_info()
