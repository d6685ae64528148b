"""Muon for the hidden weight matrices, AdamW for every other parameter.

Muon (Jordan et al. 2024, https://kellerjordan.github.io/posts/muon/; the
code followed is github.com/KellerJordan/Muon, muon.py at commit 857d1ad):
for each 2-D matrix, per step,

    m  <- beta m + (1 - beta) g                  (momentum_buffer, an EMA)
    u  <- (1 - beta) g + beta m  (Nesterov)  or  m
    O  <- NS5(u)                                 (approximately U V^T of u's SVD)
    p  <- p (1 - lr wd) - lr scale O

NS5 is five steps of the quintic Newton-Schulz iteration
X <- a X + (b A + c A^2) X with A = X X^T and (a, b, c) = (3.4445, -4.7750,
2.0315), run in bfloat16 on X = u / (||u||_F + 1e-7), a wide matrix (a tall
one is transposed first, so A is the smaller Gram matrix). These
coefficients trade exact convergence for speed: the singular values of the
result land in a band around 1 (tests/lib/optim/test_muon.py measures it).
scale is the reference's max(1, rows / cols) ** 0.5 ("shape"), or Moonshot's
0.2 sqrt(max(rows, cols)) ("rms": the update's RMS matches AdamW's, Liu et al.
2025, arXiv 2502.16982, so AdamW's learning rate carries over).

Embeddings, the LM head, norms and biases have no meaningful "orthogonal"
update and go to the AdamW part, as the reference prescribes; one optimizer
object holds both, with `use_muon` per group, so the trainer's schedule,
GradScaler, checkpoints and the pruner see a single torch optimizer.
Each group carries `lr_ratio`, its LR over the schedule's: lib/train/step.py
sets group["lr"] = scheduled LR * lr_ratio, so Muon's LR follows the shared
schedule at its own scale.

Distributed: under DDP every rank holds the averaged gradient and computes
the same update (the reference spreads matrices over ranks and all-gathers
them instead; the result is the same). Under FSDP (fully_shard) a parameter
and its momentum are row shards (DTensor); Newton-Schulz needs the whole
matrix, so the update is gathered, orthogonalised whole on every rank and
each rank keeps its own shard of the result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor, nn

from lib.distributed.shards import full, like

if TYPE_CHECKING:
    from lib.config.symbols import Optim

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # the reference's quintic (a, b, c)
NS_EPS = 1e-7  # added to the Frobenius norm before dividing, as the reference does
SCALES = ("shape", "rms")


def newton_schulz(g: Tensor, steps: int = 5, dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """Approximate U V^T of g's SVD (its orthogonal polar factor) by `steps`
    quintic Newton-Schulz iterations in `dtype`; works on a batch [..., m, n]."""
    a, b, c = NS_COEFFICIENTS
    x = g.to(dtype)
    tall = g.size(-2) > g.size(-1)
    if tall:
        x = x.mT
    # Dividing by the Frobenius norm bounds the spectral norm by 1, inside the
    # interval where the iteration pushes singular values towards 1.
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + NS_EPS)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.mT if tall else x


def update_scale(shape: torch.Size | tuple[int, ...], scale: str) -> float:
    """The factor the orthogonalised update is multiplied by, for a [rows, cols] matrix."""
    rows, cols = shape[-2], shape[-1]
    if scale == "shape":  # the reference: taller matrices get larger updates
        return max(1.0, rows / cols) ** 0.5
    if scale == "rms":  # Moonshot: the update's RMS becomes about 0.2, as AdamW's
        return 0.2 * math.sqrt(max(rows, cols))
    raise ValueError(f"scale={scale!r} is invalid: it must be one of {', '.join(SCALES)}")


def _orthogonalised(u: Tensor, steps: int) -> Tensor:
    """newton_schulz(u), also for an FSDP-sharded DTensor u: gathered whole,
    orthogonalised on every rank, and re-sharded like u without communication
    (every rank computed the same full result)."""
    return like(newton_schulz(full(u), steps).to(u.dtype), u)


class Muon(torch.optim.Optimizer):
    """Muon on groups with use_muon=True (2-D matrices only), AdamW on the others.

    Muon groups: lr, momentum, nesterov, ns_steps, scale, weight_decay.
    AdamW groups: lr, betas, eps, weight_decay (torch.optim.AdamW's update;
    decoupled decay p <- p (1 - lr wd) before it).
    """

    impl = "bfloat16 Newton-Schulz, foreach AdamW"  # metrics.json's optimizer_impl

    def __init__(self, params: Iterable[dict[str, Any]]):
        groups = list(params)
        for group in groups:
            if "use_muon" not in group:
                raise ValueError("every param group needs use_muon (True: Muon, False: AdamW)")
            if group["use_muon"]:
                bad = [tuple(p.shape) for p in group["params"] if p.dim() != 2]
                if bad:
                    raise ValueError(f"Muon updates 2-D matrices only, not shapes {bad}")
                update_scale((1, 1), group["scale"])  # rejects an unknown scale now
        super().__init__(groups, {"weight_decay": 0.0, "lr_ratio": 1.0})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["use_muon"]:
                self._muon_step(group)
            else:
                self._adamw_step(group)
        return loss

    def _muon_step(self, group: dict[str, Any]) -> None:
        lr, wd, beta = group["lr"], group["weight_decay"], group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["momentum_buffer"] = torch.zeros_like(p)
            buf = state["momentum_buffer"]
            buf.lerp_(p.grad, 1 - beta)
            u = p.grad.lerp(buf, beta) if group["nesterov"] else buf
            o = _orthogonalised(u, group["ns_steps"])
            if wd:
                p.mul_(1 - lr * wd)
            p.add_(o.to(p.dtype), alpha=-lr * update_scale(p.shape, group["scale"]))

    def _adamw_step(self, group: dict[str, Any]) -> None:
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        for p in params:
            if not self.state[p]:
                self.state[p].update(
                    step=torch.zeros((), dtype=torch.float32),
                    exp_avg=torch.zeros_like(p),
                    exp_avg_sq=torch.zeros_like(p),
                )
        states = [self.state[p] for p in params]
        grads = [p.grad for p in params]
        m, v = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        (beta1, beta2), lr, eps, wd = (
            group["betas"],
            group["lr"],
            group["eps"],
            group["weight_decay"],
        )
        for s in states:
            s["step"] += 1
        if wd:
            torch._foreach_mul_(params, 1 - lr * wd)
        torch._foreach_lerp_(m, grads, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        # Per-tensor bias corrections: a parameter that joined late has a smaller step.
        steps = [float(s["step"]) for s in states]
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, [math.sqrt(1 - beta2**t) for t in steps])
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, m, denom, [-lr / (1 - beta1**t) for t in steps])


class BlockMatrices(Protocol):
    """What Muon asks of the model (lib/model/interface.py LanguageModel)."""

    def block_matrices(self) -> list[tuple[str, nn.Parameter]]: ...


def muon_param_groups(
    model: BlockMatrices,
    groups: list[dict[str, Any]],
    *,
    lr: float,
    muon_lr: float,
    momentum: float,
    nesterov: bool,
    ns_steps: int,
    scale: str,
    muon_weight_decay: float,
    betas: tuple[float, float],
    eps: float,
) -> list[dict[str, Any]]:
    """The model's decay/no-decay groups (model.param_groups) split: hidden
    matrices into one Muon group, the rest kept as AdamW groups at LR lr.
    Hidden matrices are the 2-D weights inside the blocks (model.block_matrices),
    as the reference picks "hidden weights"; embeddings, the head, norms and
    biases are not."""
    matrices = {id(p) for _, p in model.block_matrices()}
    muon: list[nn.Parameter] = []
    out: list[dict[str, Any]] = []
    for group in groups:
        hidden = {id(p) for p in group["params"] if id(p) in matrices}
        muon += [p for p in group["params"] if id(p) in hidden]
        rest = [p for p in group["params"] if id(p) not in hidden]
        if rest:
            out.append(
                {
                    "params": rest,
                    "use_muon": False,
                    "lr": lr,
                    "lr_ratio": 1.0,
                    "betas": betas,
                    "eps": eps,
                    "weight_decay": group["weight_decay"],
                }
            )
    if muon:
        out.insert(
            0,
            {
                "params": muon,
                "use_muon": True,
                "lr": muon_lr,
                "lr_ratio": muon_lr / lr,
                "momentum": momentum,
                "nesterov": nesterov,
                "ns_steps": ns_steps,
                "scale": scale,
                "weight_decay": muon_weight_decay,
            },
        )
    return out


def build_muon(s: Optim, lr: float, groups: list[dict], model: Any, device: torch.device) -> Muon:
    """Muon as the registry builds it: hidden matrices by Muon, the rest by AdamW
    at `lr` (LEARNING_RATE) with the Adam family's betas and epsilon."""
    from lib.optim.torch_optims import adam_settings

    return Muon(
        muon_param_groups(
            model,
            groups,
            lr=lr,
            muon_lr=s.MUON_LR,
            momentum=s.MUON_MOMENTUM,
            nesterov=s.MUON_NESTEROV,
            ns_steps=s.MUON_NS_STEPS,
            scale=s.MUON_SCALE,
            muon_weight_decay=s.MUON_WEIGHT_DECAY,
            **adam_settings(s),
        )
    )
