"""HAMT's adaptive slot allocation (HAMT_ADAPTIVE_SLOTS): where each token writes.

Without it every slot has its own sigmoid write gate, so a token writes into
all slots at once and nothing makes the slots hold different things. With
it the same S logits per token (c_in's gate rows: the router, a linear map
of the token's LayerNormed state) become a distribution over the slots:

* dense (top-k 0): p_t = softmax(logits_t), every slot takes its share;
* top-k: only the k largest logits are kept and their softmax (the weights
  renormalised over the chosen k) is written; the other slots get 0.

The token's bound item goes into slot s scaled by p_{t,s}, in place of the
gate g_{t,s}, so the scan (hamt/scan.py) is unchanged: the weights are
per-token inputs, like the gates they replace.

A router trained only by the language model tends to send most tokens to
the few slots that happened to start ahead (their items get read, so their
logits grow). The balance loss counters that, and only on the mean over
tokens, so a single token may still route sharply:

* dense: KL(P || uniform) = sum_s P_s log(S P_s) = log S - H(P), with P the
  mean routing distribution over the batch's tokens: 0 exactly when the
  slots are used equally, log S when every token writes one slot. Dense
  weights are differentiable as they are, so the loss is on P itself.
* top-k: the Switch Transformer's (Fedus et al. 2022, eq. 4) S * sum_s f_s
  P_s, f_s the share of the batch's (token, chosen slot) pairs that went to
  s (each token chooses k; f sums to 1) and P_s the mean of the full softmax.
  The choice f has no gradient; P carries it, pushing down the logits of
  the slots that are chosen most. 1 when both are uniform, S / k when every
  token chooses the same k slots.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def route(logits: Tensor, topk: int) -> tuple[Tensor, Tensor | None]:
    """Router logits [..., S] -> write weights [..., S] (each token's sum to 1)
    and, for top-k, which slots each token chose ([..., S], 0/1); None dense."""
    if topk == 0:
        return logits.softmax(-1), None
    top, index = logits.topk(topk, dim=-1)
    chosen = torch.zeros_like(logits).scatter_(-1, index, 1.0)
    return torch.zeros_like(logits).scatter(-1, index, top.softmax(-1)), chosen


def balance_loss(logits: Tensor, chosen: Tensor | None, topk: int) -> Tensor:
    """The load-balancing loss of the router logits [..., S] over all their
    tokens: KL(mean softmax || uniform) dense, Switch's S sum f P for top-k
    (chosen from route). Minimum 0 (dense) or 1 (top-k) at uniform use."""
    probs = logits.softmax(-1).flatten(0, -2).mean(0)  # P [S]
    slots = probs.numel()
    if chosen is None:
        # 0 log 0 = 0: a slot nobody uses adds nothing (and no NaN gradient).
        return torch.xlogy(probs, probs * slots).sum()
    share = chosen.flatten(0, -2).mean(0) / topk  # f [S], sums to 1
    return slots * (share * probs).sum()


def utilisation(mass: Tensor) -> tuple[Tensor, Tensor]:
    """How evenly the write mass [..., S] (per slot, any scale) spreads over
    the slots: the entropy of its distribution divided by log S (1 = equal,
    0 = one slot), and the fraction of slots taking more than 1 / (2 S) of
    it (half a fair share)."""
    slots = mass.size(-1)
    p = mass / mass.sum(-1, keepdim=True).clamp_min(1e-12)
    entropy = -torch.xlogy(p, p).sum(-1) / math.log(slots)
    used = (p > 1 / (2 * slots)).float().mean(-1)
    return entropy, used
