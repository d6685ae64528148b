"""Optimizers, chosen by the OPTIMIZER choice: build_optimizer(run.optim, lr, model, device).

AdamWPrune is its base optimizer (AdamW or AdamWSPAM) plus the state-based
pruner of lib/prune, which reads that optimizer's moments: the optimizer
itself is unchanged, which is the point of the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.optim.registry import builder, method

# torch is imported by the functions that build or read an optimizer: this
# package is read on every configuration check (lib/optim/rules.py).
if TYPE_CHECKING:
    import torch

    from lib.config.symbols import Optim
    from lib.run.metrics import LogField


def base_optimizer(s: Optim) -> str:
    """The registry name of what updates the weights (lib/optim/registry.py):
    OPTIMIZER, or for AdamWPrune its base (ADAMWPRUNE_BASE)."""
    if s.OPTIMIZER is None:  # hidden by OPTIMIZER_MODE_MULTIPLE
        raise ValueError(
            "CONFIG_OPTIMIZER_MODE_MULTIPLE selects several optimizers for the "
            "test matrix (`make test-matrix`); one run needs OPTIMIZER_MODE=single "
            "and an OPTIMIZER"
        )
    record = method(s.OPTIMIZER)
    if record.base_symbol is not None:
        base = getattr(s, record.base_symbol)
        assert base is not None  # visible whenever the optimizer is chosen
        return str(base)
    return record.name


def build_optimizer(
    s: Optim, lr: float, model: torch.nn.Module, device: torch.device
) -> torch.optim.Optimizer:
    """The configured optimizer at learning rate `lr` (lib/train's LEARNING_RATE,
    which the schedule then sets per step), built by its record's builder from
    the model's decay/no-decay parameter groups (WEIGHT_DECAY, WEIGHT_DECAY_PARAMS)."""
    record = method(base_optimizer(s))
    groups = model.param_groups(s.WEIGHT_DECAY, s.WEIGHT_DECAY_PARAMS)
    optimizer: torch.optim.Optimizer = builder(record)(s, lr, groups, model, device)
    return optimizer


def optimizer_impl(optimizer: torch.optim.Optimizer) -> str:
    """What the step runs, e.g. "AdamW (fused)", "AdamWSPAM (foreach)" (metrics.json)."""
    impl = getattr(optimizer, "impl", None)
    d = optimizer.defaults
    if impl is None and not {"fused", "foreach"} & set(d):
        impl = "its own step"  # a class of one's own: none of torch's implementation flags
    if impl is None:
        impl = (
            "fused"
            if d.get("fused")
            else "foreach"
            if d.get("foreach")
            else "torch default"
            if d.get("foreach") is None
            else "loop"
        )
    return f"{type(optimizer).__name__} ({impl})"


def optimizer_stats(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Counters an optimizer keeps (SPAM: spikes clipped, resets), else {}."""
    stats = getattr(optimizer, "stats", None)
    return stats() if callable(stats) else {}


def optimizer_log_fields(optimizer: torch.optim.Optimizer) -> dict[str, LogField]:
    """The optimizer's fields of the training log line: its counters (SPAM's
    spikes clipped and resets), shown only (metrics.json has them as spam_*)."""
    from lib.run.metrics import LogField

    return {key: LogField(str(value)) for key, value in optimizer_stats(optimizer).items()}


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held in optimizer state tensors (moments, step counters)."""
    import torch

    return sum(
        t.numel() * t.element_size()
        for s in optimizer.state.values()
        if isinstance(s, dict)
        for t in s.values()
        if torch.is_tensor(t)
    )
