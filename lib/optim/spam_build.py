"""AdamWSPAM as the registry builds it (lib/optim/registry.py): the Optim
settings section turned into the SPAM authors' rule (lib/optim/spam.py) or,
with SPAM_RULE_KNLP, knlp's variant (lib/optim/knlp_spam.py, on torch's
AdamW). A hidden SPAM switch is off, and so are its settings
(lib/optim/off_values.toml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lib.optim.knlp_spam import KnlpAdamWSPAM
from lib.optim.spam import AdamWSPAM
from lib.optim.torch_optims import adam_settings, adamw_impl

if TYPE_CHECKING:
    from lib.config.symbols import Optim


def foreach_arg(impl: str) -> bool | None:
    """AdamWSPAM's foreach argument for OPTIMIZER_IMPL `impl` (auto, fused: None, the
    multi-tensor path on one device type; the fused path falls back to it)."""
    return {"foreach": True, "loop": False}.get(impl)


def build_adamwspam(
    s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device
) -> torch.optim.Optimizer:
    impl = s.OPTIMIZER_IMPL
    shared: dict[str, Any] = {
        "lr": lr,
        "amsgrad": s.ADAM_AMSGRAD,
        "clip": s.SPAM_ENABLE_CLIP,
        "warmup_steps": s.SPAM_WARMUP_STEPS,
        "spike_reset": s.SPAM_SPIKE_RESET,
        "spike_threshold": s.SPAM_SPIKE_THRESHOLD,
        **adam_settings(s),
    }
    if s.SPAM_RULE == "knlp":
        kernels: dict[str, Any] = adamw_impl(impl, device)  # it runs on torch's AdamW
        return KnlpAdamWSPAM(
            groups, theta=s.SPAM_THETA, interval=s.SPAM_INTERVAL, **shared, **kernels
        )
    return AdamWSPAM(
        groups,
        theta=s.SPAM_THETA,
        reset=s.SPAM_ENABLE_RESET,
        interval=s.SPAM_INTERVAL,
        clip_skip_steps=s.SPAM_CLIP_SKIP_STEPS,
        spare_unseen=s.SPAM_CLIP_SPARE_UNSEEN,
        restart_bias_correction=s.SPAM_RESTART_BIAS_CORRECTION,
        foreach=foreach_arg(impl),
        fused=impl == "fused",
        **shared,
    )
