"""Optimizers, chosen by the OPTIMIZER choice: build_optimizer(run, model, device).

AdamWPrune is its base optimizer (AdamW or AdamWSPAM) plus the state-based
pruner of lib/prune, which reads that optimizer's moments: the optimizer
itself is unchanged, which is the point of the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.run_config import value_or

# torch is imported by the functions that build or read an optimizer: this
# package is read on every configuration check (lib/optim/rules.py).
if TYPE_CHECKING:
    import torch

    from lib.config.run_config import RunConfig
    from lib.run.metrics import LogField


def base_optimizer(run: RunConfig) -> str:
    """ "adamw", "adamwspam", "muon", "sgd", "adam" or "adamwadv": what updates the weights."""
    if run.OPTIMIZER is None:  # hidden by OPTIMIZER_MODE_MULTIPLE
        raise ValueError(
            "CONFIG_OPTIMIZER_MODE_MULTIPLE selects several optimizers for the "
            "test matrix (`make test-matrix`); one run needs OPTIMIZER_MODE=single "
            "and an OPTIMIZER"
        )
    if run.OPTIMIZER == "adamwprune":
        assert run.ADAMWPRUNE_BASE is not None  # visible whenever OPTIMIZER_ADAMWPRUNE is set
        return run.ADAMWPRUNE_BASE
    return run.OPTIMIZER


def build_optimizer(
    run: RunConfig, model: torch.nn.Module, device: torch.device
) -> torch.optim.Optimizer:
    """The configured optimizer; betas, epsilon and weight decay are shared by the Adam family."""
    import torch

    from lib.optim.knlp_spam import KnlpAdamWSPAM
    from lib.optim.muon import Muon, muon_param_groups
    from lib.optim.spam import AdamWSPAM

    base = base_optimizer(run)
    lr = run.LEARNING_RATE
    groups = model.param_groups(run.WEIGHT_DECAY, value_or(run.WEIGHT_DECAY_PARAMS, "matrices"))
    impl = value_or(run.OPTIMIZER_IMPL, "auto")
    if base == "sgd":  # heavy-ball momentum, L2 decay from the group
        assert run.SGD_MOMENTUM is not None  # visible with OPTIMIZER_SGD
        return torch.optim.SGD(groups, lr=lr, momentum=run.SGD_MOMENTUM, **adamw_impl(impl, device))
    # the Adam family's settings: hidden for SGD only
    assert run.ADAM_BETA1 is not None and run.ADAM_BETA2 is not None
    assert run.ADAM_EPSILON is not None
    betas, eps = (run.ADAM_BETA1, run.ADAM_BETA2), run.ADAM_EPSILON
    amsgrad = bool(run.ADAM_AMSGRAD)
    if base in ("adamw", "adamwadv"):  # AdamWAdv: knlp's AdamW with AMSGrad always on
        return torch.optim.AdamW(
            groups,
            lr=lr,
            betas=betas,
            eps=eps,
            amsgrad=amsgrad or base == "adamwadv",
            **adamw_impl(impl, device),
        )
    if base == "adam":  # the group's weight_decay is L2, added to the gradient
        return torch.optim.Adam(
            groups, lr=lr, betas=betas, eps=eps, amsgrad=amsgrad, **adamw_impl(impl, device)
        )
    if base == "adamwspam" and run.SPAM_RULE == "knlp":  # a hidden switch is off
        return KnlpAdamWSPAM(
            groups,
            lr=lr,
            betas=betas,
            eps=eps,
            amsgrad=amsgrad,
            theta=value_or(run.SPAM_THETA, 50.0),
            clip=value_or(run.SPAM_ENABLE_CLIP, False),
            interval=value_or(run.SPAM_INTERVAL, 0) if run.SPAM_ENABLE_RESET else 0,
            warmup_steps=value_or(run.SPAM_WARMUP_STEPS, 0),
            spike_reset=value_or(run.SPAM_SPIKE_RESET, False),
            spike_threshold=value_or(run.SPAM_SPIKE_THRESHOLD, 2.0),
            **adamw_impl(impl, device),
        )
    if base == "adamwspam":  # a hidden SPAM switch is off
        return AdamWSPAM(
            groups,
            lr=lr,
            betas=betas,
            eps=eps,
            theta=value_or(run.SPAM_THETA, 5000.0),
            clip=value_or(run.SPAM_ENABLE_CLIP, False),
            reset=value_or(run.SPAM_ENABLE_RESET, False),
            interval=value_or(run.SPAM_INTERVAL, 0),
            warmup_steps=value_or(run.SPAM_WARMUP_STEPS, 0),
            clip_skip_steps=value_or(run.SPAM_CLIP_SKIP_STEPS, 0),
            spare_unseen=value_or(run.SPAM_CLIP_SPARE_UNSEEN, False),
            restart_bias_correction=value_or(run.SPAM_RESTART_BIAS_CORRECTION, False),
            amsgrad=amsgrad,
            spike_reset=value_or(run.SPAM_SPIKE_RESET, False),
            spike_threshold=value_or(run.SPAM_SPIKE_THRESHOLD, 2.0),
            foreach={"foreach": True, "loop": False}.get(impl),
            fused=impl == "fused",
        )
    if base == "muon":  # hidden matrices by Muon, the rest by AdamW at LEARNING_RATE
        assert run.MUON_LR is not None and run.MUON_MOMENTUM is not None  # visible with Muon
        assert run.MUON_NS_STEPS is not None and run.MUON_WEIGHT_DECAY is not None
        assert run.MUON_SCALE is not None
        return Muon(
            muon_param_groups(
                model,
                groups,
                lr=lr,
                muon_lr=run.MUON_LR,
                momentum=run.MUON_MOMENTUM,
                nesterov=bool(run.MUON_NESTEROV),
                ns_steps=run.MUON_NS_STEPS,
                scale=run.MUON_SCALE,
                muon_weight_decay=run.MUON_WEIGHT_DECAY,
                betas=betas,
                eps=eps,
            )
        )
    raise ValueError(f"optimizer '{base}' has no implementation")


# Device types with torch.optim.AdamW(fused=True) in torch >= 2.4 (CPU since 2.4).
FUSED_ADAMW_DEVICES = ("cuda", "cpu", "mps", "xpu")


def adamw_impl(impl: str, device: torch.device) -> dict[str, bool]:
    """torch.optim.AdamW's fused/foreach arguments for OPTIMIZER_IMPL `impl`."""
    if impl in ("auto", "fused"):
        if device.type in FUSED_ADAMW_DEVICES:
            return {"fused": True}
        return {}  # no fused kernel here (e.g. MPS on an old torch): torch's default
    return {"foreach": impl == "foreach"}


def optimizer_impl(optimizer: torch.optim.Optimizer) -> str:
    """What the step runs, e.g. "AdamW (fused)", "AdamWSPAM (foreach)" (metrics.json)."""
    impl = getattr(optimizer, "impl", None)
    if impl is None:
        d = optimizer.defaults
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
