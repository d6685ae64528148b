"""Hyperparameters of a HAMT model (holographic associative memory transformer).

Checked when created, like GPT2Config, so a bad value read from .config
fails with one line naming the field, the value and the allowed range
instead of a shape error deep inside the memory scan.
"""

from __future__ import annotations

from dataclasses import dataclass

BINDINGS = ("circular", "elementwise")
# hamt/kernel.py's BACKENDS (repeated: this module imports no torch).
SCAN_BACKENDS = ("auto", "torch", "triton")


@dataclass(kw_only=True)
class HAMTConfig:
    """Shape, memory and regularisation of a HAMT model.

    There is no position embedding: order reaches the model only through
    the causal memory's decays and gates, so generation can run past
    block_size with the same constant-size state. block_size is the
    training context (and what flops_per_token is usually asked about).
    """

    vocab_size: int
    block_size: int = 256
    n_layer: int = 4
    # Not used by the memory (each layer reads with one key over all of
    # hcm_dim); kept, and checked to divide n_embd, so a HAMT config lines
    # up with a GPT-2 one of the same shape.
    n_head: int = 4
    n_embd: int = 128
    # Memory slots per layer; the generation state is num_slots spectra.
    num_slots: int = 16
    # Width of the bound vectors: hcm_dim = hcm_mult * n_embd.
    hcm_mult: int = 2
    # "circular": real vectors bound by circular convolution (FFT);
    # "elementwise": complex coordinates bound by unit phasors.
    binding: str = "circular"
    # Weight of the retrieval loss added to the language-model loss.
    aux_weight: float = 0.1
    # The retrieval loss asks for an item written 1 .. aux_max_lag tokens
    # earlier (hamt/retrieval.py).
    aux_max_lag: int = 32
    # Added to each key coefficient's squared magnitude before the division
    # that makes keys unitary (hamt/spectral.py UnitBind). The default only
    # keeps a zero finite; larger values bound the keys' Jacobian by
    # key_eps^-1/2 and leave coefficients under sqrt(key_eps) shrunk.
    key_eps: float = 1e-12
    # Per-slot decays are learned; they start spread around this value.
    decay_init: float = 0.9
    # True: half the slots (the slow bank) tick, i.e. decay and take a
    # write, only every slow_every tokens, and start with ten times the
    # fast bank's memory horizon (hamt/memory.py). slow_every = 1 leaves
    # only that initialisation.
    hierarchical: bool = False
    slow_every: int = 8
    # True: the write gates' logits become a router, a distribution over the
    # slots per token (softmax, or the top adaptive_slots_topk of them
    # renormalised; 0 = dense), plus a load-balancing loss weighted by
    # adaptive_slots_balance (hamt/routing.py).
    adaptive_slots: bool = False
    adaptive_slots_topk: int = 0
    adaptive_slots_balance: float = 0.01
    dropout: float = 0.0
    bias: bool = True
    # Tokens per chunk of the parallel scan (C x C work inside a chunk, a
    # carried state between chunks); speed only, not results. 32 and 64
    # were equally fast on CPU at T = 2048, 16 about 4 % slower; at 64 the
    # factored mixing matrix needs decays >= 0.39 (0.14 at 32), else the
    # slower broadcast runs (hamt/scan.py).
    chunk_size: int = 32
    # The scan that trains the memory: "torch" (hamt/scan.py), "triton"
    # (flash-linear-attention's chunk_gla, CUDA only, hamt/kernel.py) or
    # "auto" (triton on CUDA when fla-core imports, else torch).
    scan_backend: str = "auto"
    # Each fla kernel the triton backend runs keeps one configuration per
    # shape class instead of autotuning (hamt/tuning.py).
    kernel_pin: bool = True

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "block_size",
            "n_layer",
            "n_head",
            "n_embd",
            "chunk_size",
            "aux_max_lag",
            "slow_every",
        ):
            _check_int(name, getattr(self, name), 1, None)
        _check_int("num_slots", self.num_slots, 4, 64)
        _check_int("hcm_mult", self.hcm_mult, 1, 8)
        if self.binding not in BINDINGS:
            raise ValueError(
                f"binding={self.binding!r} is invalid: it must be one of {', '.join(BINDINGS)}"
            )
        if self.scan_backend not in SCAN_BACKENDS:
            raise ValueError(
                f"scan_backend={self.scan_backend!r} is invalid: it must be one of "
                f"{', '.join(SCAN_BACKENDS)}"
            )
        _check_float("aux_weight", self.aux_weight, 0.0, 1.0, "[0, 1]", open_high=False)
        _check_float("key_eps", self.key_eps, 0.0, 1.0, "(0, 1)", open_low=True)
        _check_float("decay_init", self.decay_init, 0.0, 1.0, "(0, 1)", open_low=True)
        _check_float("dropout", self.dropout, 0.0, 1.0, "[0, 1)")
        _check_float(
            "adaptive_slots_balance",
            self.adaptive_slots_balance,
            0.0,
            1.0,
            "[0, 1]",
            open_high=False,
        )
        _check_int("adaptive_slots_topk", self.adaptive_slots_topk, 0, 64)
        _check_topk(self.adaptive_slots_topk, self.num_slots)
        for name in ("hierarchical", "adaptive_slots", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is invalid: it must be True or False"
                )
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}: "
                "it must be a multiple of n_head"
            )
        if self.hcm_dim % 2:
            # Both bindings pair real coordinates into complex ones.
            raise ValueError(
                f"hcm_mult={self.hcm_mult} with n_embd={self.n_embd} gives an odd hcm_dim="
                f"{self.hcm_dim}: it must be even"
            )

    @property
    def hcm_dim(self) -> int:
        """Width of the bound (holographic) vectors."""
        return self.hcm_mult * self.n_embd


def _check_int(name: str, value: object, low: int, high: int | None) -> None:
    # bool is a subclass of int; True as a layer count is always a mistake.
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} is invalid: it must be {allowed}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name}={value} is invalid: it must be {allowed}")


def _check_topk(topk: int, slots: int) -> None:
    """0 (dense) or 2 .. slots - 1. With one chosen slot the renormalised
    weight is always 1, so the language-model loss would give the router no
    gradient; with all of them it is the dense softmax, whose Switch balance
    loss would be a constant 1."""
    if topk == 1 or topk >= slots:
        raise ValueError(
            f"adaptive_slots_topk={topk} is invalid with num_slots={slots}: it must be 0 "
            f"(dense softmax over all slots) or from 2 to {slots - 1} (fewer than the slots; "
            "1 would leave the router without a gradient from the language-model loss)"
        )


def _check_float(
    name: str,
    value: object,
    low: float,
    high: float,
    shown: str,
    open_low: bool = False,
    open_high: bool = True,
) -> None:
    invalid = ValueError(f"{name}={value!r} is invalid: it must be a number in {shown}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid
    above = value > low if open_low else value >= low
    below = value < high if open_high else value <= high
    if not (above and below):  # NaN is neither
        raise invalid
