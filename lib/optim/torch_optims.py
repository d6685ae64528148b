"""torch's own optimizers as the registry builds them (lib/optim/registry.py):
AdamW, AdamWAdv (AdamW with AMSGrad always on, knlp's "AdamW Advanced"), Adam
(L2 decay) and SGD with heavy-ball momentum, with the Adam family's betas,
epsilon and AMSGrad setting and OPTIMIZER_IMPL's kernel choice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lib.config.symbols import Optim

# Device types with torch.optim.AdamW(fused=True) in torch >= 2.4 (CPU since 2.4).
FUSED_ADAMW_DEVICES = ("cuda", "cpu", "mps", "xpu")


def adamw_impl(impl: str, device: torch.device) -> dict[str, bool]:
    """torch.optim.AdamW's fused/foreach arguments for OPTIMIZER_IMPL `impl`."""
    if impl in ("auto", "fused"):
        if device.type in FUSED_ADAMW_DEVICES:
            return {"fused": True}
        return {}  # no fused kernel here (e.g. MPS on an old torch): torch's default
    return {"foreach": impl == "foreach"}


def adam_settings(s: Optim) -> dict[str, Any]:
    """The Adam family's betas and epsilon."""
    return {"betas": (s.ADAM_BETA1, s.ADAM_BETA2), "eps": s.ADAM_EPSILON}


def build_adamw(s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device) -> Any:
    return torch.optim.AdamW(
        groups,
        lr=lr,
        amsgrad=s.ADAM_AMSGRAD,
        **adam_settings(s),
        **adamw_impl(s.OPTIMIZER_IMPL, device),
    )


def build_adamwadv(
    s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device
) -> Any:
    return torch.optim.AdamW(
        groups, lr=lr, amsgrad=True, **adam_settings(s), **adamw_impl(s.OPTIMIZER_IMPL, device)
    )


def build_adam(s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device) -> Any:
    """The group's weight_decay is L2, added to the gradient before the moments."""
    return torch.optim.Adam(
        groups,
        lr=lr,
        amsgrad=s.ADAM_AMSGRAD,
        **adam_settings(s),
        **adamw_impl(s.OPTIMIZER_IMPL, device),
    )


def build_sgd(s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device) -> Any:
    """Heavy-ball momentum, L2 decay from the group."""
    return torch.optim.SGD(
        groups, lr=lr, momentum=s.SGD_MOMENTUM, **adamw_impl(s.OPTIMIZER_IMPL, device)
    )
