"""Gradual pruning during training: masks, scheduled updates, checkpoints.

The trainer calls, for every optimizer step (1-based count of completed steps):

    pruner.before_step(step, skipped)  # after backward, unscaling and clipping
    optimizer.step()
    pruner.after_step(step)            # update the masks when due, then apply them

Under fp16 loss scaling the trainer unscales the gradients first, so
movement scores accumulate true gradients, and passes skipped=True when the
GradScaler found inf/NaN and will skip the step: such a step adds nothing.

Masks are torch.bool, True = kept. Pruning is monotone: at an update every
already-pruned entry scores -inf and the pruned count never shrinks. Each
update prunes exactly round(sparsity_at(step) * entries) (per layer for
scope "per_layer"; bitter4 gives each layer its own sparsity, layers.py),
choosing the lowest scores; equal scores at the boundary are broken by
position (threshold.smallest_k), so the achieved sparsity is the target up
to one entry per layer.

Applying the masks zeroes the pruned weights and the pruned entries of the
optimizer's exp_avg / exp_avg_sq (and max_exp_avg_sq; Muon's
momentum_buffer), so pruned weights and their moments stay exactly zero
(Muon's orthogonalised update is dense: this re-zeroing is what keeps them
pruned); before_step also zeroes their gradients so an Adam step itself
leaves them at zero.  Zeroing the gradients runs every step, applying the
masks every step only under a non-Adam optimizer (after_step): zeroing the
gradients is one multi-tensor multiply by the bool masks (torch._foreach_mul_), and so is applying the masks except on CUDA (see
apply_masks).  A product with False is +-0 for every finite entry; a NaN or
infinite one becomes NaN, where masked_fill would have hidden it.

movement_score="knlp" is knlp's movement rule instead (reselect.py): masks
re-chosen from w (w - w0) at every update, also past the ramp, so pruned
weights can return; only the weights are zeroed, every step, before and after
an update, never their gradients or moments.

Under FSDP (DTensor parameters) masks, movement scores and w0 are sharded as
their parameters; updates choose from whole gathered scores (shards.py), so
the masks are one process's, and state_dict holds them whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from lib.distributed.shards import full, like, local
from lib.prune import layers, registry, reselect
from lib.prune import scores as score_fns
from lib.prune.schedule import KINDS, check_schedule, is_update_step, sparsity_at
from lib.prune.state import STATE_VERSION, check_choice, check_int, check_state
from lib.prune.threshold import smallest_k
from lib.run.metrics import LogField

METHODS: dict[str, str] = {m.name: m.description for m in registry.METHODS}
SCOPES = ("global", "per_layer")
MOVEMENT_SCORES = ("accumulated", "knlp")  # Sanh et al.'s sum, or knlp's (reselect.py)
BITTER4_BUDGETS = ("depth", "rank")  # layers.py: the reference's depth ramp, or ours
MOMENT_KEYS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer")


class Pruner:
    """Masks a list of named parameters on a sparsity schedule."""

    def __init__(
        self,
        params: list[tuple[str, nn.Parameter]],
        *,
        method: str,
        target: float,
        warmup: int,
        ramp_end: int,
        frequency: int,
        schedule: str,
        scope: str,
        optimizer: torch.optim.Optimizer | None = None,
        variant: str = "bitter7",
        bitter4_budget: str = "depth",
        sample_size: int = 1_000_000,
        seed: int = 0,
        movement_score: str = "accumulated",
        score: Callable[[Tensor, Mapping[str, Any]], Tensor] | None = None,
    ) -> None:
        params = list(params)
        if not params:
            raise ValueError("params is empty: there is nothing to prune")
        names = [n for n, _ in params]
        if len(set(names)) != len(names) or len({id(p) for _, p in params}) != len(params):
            raise ValueError("params is invalid: names and parameters must be unique")
        check_choice("method", method, METHODS)
        check_choice("variant", variant, score_fns.VARIANTS)
        check_choice("bitter4_budget", bitter4_budget, BITTER4_BUDGETS)
        check_choice("schedule", schedule, KINDS)
        check_choice("movement_score", movement_score, MOVEMENT_SCORES)
        check_choice("scope", scope, SCOPES)
        check_schedule(target=target, warmup=warmup, ramp_end=ramp_end, kind=schedule)
        check_int("frequency", frequency, 1)
        check_int("sample_size", sample_size, 1)
        check_int("seed", seed, 0)
        # The method's score function (its record's, or the user's for "custom");
        # None where the pruner scores the method itself (movement, state).
        self.score = (
            score if score is not None else registry.score_function(registry.method(method))
        )
        if method == registry.CUSTOM and score is None:
            raise ValueError(
                "score is required for method 'custom': the function PRUNING_CUSTOM_SCORE names"
            )
        if method == "state" and optimizer is None:
            raise ValueError("optimizer is required for method 'state': its moments are the scores")
        if optimizer is not None:
            managed = {id(p) for group in optimizer.param_groups for p in group["params"]}
            missing = [n for n, p in params if id(p) not in managed]
            if missing:
                raise ValueError(f"optimizer is invalid: it does not update {', '.join(missing)}")
        self.names = names
        self.params = [p for _, p in params]
        self.total = sum(p.numel() for p in self.params)  # entries under the masks
        self.method, self.scope, self.variant = method, scope, variant
        self.target, self.warmup, self.ramp_end = float(target), warmup, ramp_end
        self.frequency, self.schedule = frequency, schedule
        self.optimizer, self.bitter4_budget = optimizer, bitter4_budget
        self.sample_size = sample_size
        self.generator = torch.Generator().manual_seed(seed)
        self.masks = [_filled_like(p, True, torch.bool) for p in self.params]
        # knlp's rule: masks re-chosen at every update from w (w - w0) (reselect.py)
        self.reselect = method == "movement" and movement_score == "knlp"
        self.initial = [reselect.start(p) for p in self.params] if self.reselect else None
        self.scores = (
            [_filled_like(p, 0.0, torch.float32) for p in self.params]
            if method == "movement" and not self.reselect
            else None
        )
        self.pruned = [0] * len(self.params)  # masked-out entries per parameter
        self.step = 0  # last step seen by after_step (or restored by load_state_dict)
        # An Adam-family step leaves an entry with weight, moments and gradient 0 at 0
        # (after_step); optimizers of other rules get the masks applied every step.
        # (not under knlp's rule: its pruned weights' gradients and moments live on)
        self.keeps_zeros = not self.reselect and (
            isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW))
            or bool(getattr(optimizer, "keeps_zero_entries", False))
        )

    # ------------------------------------------------------------ schedule

    def target_at(self, step: int) -> float:
        """Scheduled sparsity after `step` optimizer steps."""
        return sparsity_at(
            step, target=self.target, warmup=self.warmup, ramp_end=self.ramp_end, kind=self.schedule
        )

    def is_update_step(self, step: int) -> bool:
        """Masks change after step warmup + k*frequency and at ramp_end, never after it."""
        return is_update_step(
            step,
            warmup=self.warmup,
            ramp_end=self.ramp_end,
            frequency=self.frequency,
            reselect=self.reselect,
        )

    # ------------------------------------------------------ training hooks

    @torch.no_grad()
    def before_step(self, step: int, skipped: bool = False) -> None:
        """Accumulate movement scores (until ramp_end); zero pruned gradients.

        `step` is the count after_step will receive for this optimizer step;
        skipped=True (the GradScaler will skip it) leaves the scores alone.
        """
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if self.scores is not None and step <= self.ramp_end and live and not skipped:
            # S += score_fns.movement_increment(w, grad), i.e. -(w * grad), without a temporary
            torch._foreach_addcmul_(
                [local(self.scores[i]) for i in live],
                [local(self.params[i]).float() for i in live],
                [local(self.params[i].grad).float() for i in live],
                value=-1.0,
            )
        pruned = [i for i in live if self.pruned[i]]
        if pruned and not self.reselect:  # knlp's rule leaves their gradients
            torch._foreach_mul_(
                [local(self.params[i].grad) for i in pruned],
                [local(self.masks[i]) for i in pruned],
            )

    @torch.no_grad()
    def after_step(self, step: int) -> None:
        """Update the masks when due (see is_update_step), then apply them.

        Under an Adam-family optimizer the masks are applied only when they
        change: a pruned entry then has weight, moments and (before_step)
        gradient 0, and an Adam step with decoupled decay leaves all three
        exactly 0 (m = b1*0 + 0, v likewise, p = 0 - lr*0/(0+eps) = 0, then
        p * (1 - lr*wd) = 0), so re-applying every step would zero zeros:
        2.66 ms of a 50 ms GPT-2 124M step on an H100. Others (Muon's dense
        orthogonalised update) get them applied every step.
        """
        self.step = step
        updating = self.is_update_step(step)
        if updating and self.reselect:
            self.apply_masks()  # knlp scores the weights its old masks have zeroed
        if updating:
            self._update(self.target_at(step))
        if updating or not self.keeps_zeros:
            self.apply_masks()

    @torch.no_grad()
    def apply_masks(self) -> None:
        """Zero pruned weights and their optimizer moments.

        On CUDA a multiply by a bool mask runs a casting kernel slower than
        masked_fill (GPT-2 124M on an H100: 1.73 vs 1.44 ms for the weights and
        both moments), so there each mask is inverted once and fills its
        tensors; elsewhere all go in one torch._foreach_mul_ (on CPU over ten
        times faster than masked_fill).
        """
        work = []  # (mask, tensors it zeroes)
        for i, p in enumerate(self.params):
            if not self.pruned[i]:
                continue
            state = (
                self.optimizer.state.get(p, {})
                if self.optimizer is not None and not self.reselect
                else {}
            )
            moments = [
                local(state[k])
                for k in MOMENT_KEYS
                if torch.is_tensor(state.get(k)) and state[k].shape == p.shape
            ]
            work.append((local(self.masks[i]), [local(p)] + moments))
        if not work:
            return
        if work[0][0].is_cuda:
            for mask, tensors in work:
                dropped = ~mask
                for t in tensors:
                    t.masked_fill_(dropped.to(t.device), 0)
        else:
            torch._foreach_mul_(
                [t for _, ts in work for t in ts],
                [mask.to(t.device) for mask, ts in work for t in ts],
            )

    # ------------------------------------------------------- mask updates

    def _score(self, i: int) -> Tensor:
        """A fresh float32 score tensor for parameter i (higher = keep), whole."""
        p = full(self.params[i].detach())
        if self.score is not None:
            return self._scored(i, p.float())
        if self.method == "movement":
            assert self.scores is not None  # kept exactly for method "movement"
            return full(self.scores[i]).clone()
        assert self.optimizer is not None  # __init__ requires one for method "state"
        state = self.optimizer.state.get(self.params[i], {})
        variant = score_fns.VARIANTS[self.variant]
        if not all(torch.is_tensor(state.get(k)) for k in variant.needs):
            # Not stepped yet (no moments): |w|, as the reference falls back.
            return score_fns.magnitude(p.float())
        m, v = (
            full(state[k]).float() if k in state else torch.zeros_like(p, dtype=torch.float32)
            for k in ("exp_avg", "exp_avg_sq")
        )
        return variant.fn(p.float(), m, v).contiguous()

    def _scored(self, i: int, w: Tensor) -> Tensor:
        """The score function's scores for weight i, checked and never a view of
        the weight or the optimizer's state (the update fills pruned entries)."""
        assert self.score is not None  # _score calls it only then
        state = self.optimizer.state.get(self.params[i], {}) if self.optimizer is not None else {}
        out = self.score(w, _WholeState(state))
        if not (torch.is_tensor(out) and out.shape == w.shape):
            got = f"shape {tuple(out.shape)}" if torch.is_tensor(out) else type(out).__name__
            raise ValueError(
                f"the {self.method} pruning score of {self.names[i]} is {got}, not a tensor of "
                f"the weight's shape {tuple(w.shape)}"
            )
        out = out.float()
        # NaN ranks below nothing and above nothing: the threshold would skip those
        # weights silently. Where the weight itself is NaN the run is diverging, which
        # the trainer reports; elsewhere the function is at fault.
        bad = int((out.isnan() & ~w.isnan()).sum())
        if bad:
            raise ValueError(
                f"the {self.method} pruning score of {self.names[i]} is NaN at {bad:,} of "
                f"{w.numel():,} entries whose weight is finite: a score must rank every "
                f"weight (lowest pruned first; -inf and inf are allowed)"
            )
        owned = {w.data_ptr(), *(t.data_ptr() for t in state.values() if torch.is_tensor(t))}
        return (out.clone() if out.data_ptr() in owned else out).contiguous()

    def _update(self, sparsity: float) -> None:
        if self.reselect:
            self._reselect(sparsity)
            return
        masks = [full(m) for m in self.masks]
        scores = [self._score(i).masked_fill_(~m, -math.inf) for i, m in enumerate(masks)]
        sizes = [s.numel() for s in scores]
        pick = dict(sample_size=self.sample_size, generator=self.generator)
        if self.method == "state" and self.variant == "bitter4" and self.bitter4_budget == "rank":
            means = _finite_means(scores, [n > f for n, f in zip(sizes, self.pruned)])
            counts = layers.allocate(sizes, self.pruned, layers.layer_factors(means), sparsity)
            chosen = [smallest_k([s], k, **pick)[0] for s, k in zip(scores, counts)]
        elif self.method == "state" and self.variant == "bitter4":
            ramp = layers.depth_ramp(len(scores), sparsity)
            # int(), not round(): the reference truncates the per-layer count.
            counts = [max(int(r * n), f) for r, n, f in zip(ramp, sizes, self.pruned)]
            chosen = [smallest_k([s], k, **pick)[0] for s, k in zip(scores, counts)]
        elif self.scope == "per_layer":
            chosen = [
                smallest_k([s], max(round(sparsity * n), f), **pick)[0]
                for s, n, f in zip(scores, sizes, self.pruned)
            ]
        else:
            goal = max(round(sparsity * sum(sizes)), sum(self.pruned))
            chosen = smallest_k(scores, goal, **pick)
        self._set_masks([m & ~c for m, c in zip(masks, chosen)])

    def _set_masks(self, masks: list[Tensor]) -> None:
        """Keep whole masks, each sharded as its parameter, and count their pruned entries."""
        self.pruned = _read_counts([(~m).sum() for m in masks])
        self.masks = [like(m, p) for m, p in zip(masks, self.params)]

    def _reselect(self, sparsity: float) -> None:
        """knlp's update: every mask re-chosen from w (w - w0) (reselect.py)."""
        assert self.initial is not None  # kept exactly when self.reselect
        scores = [
            reselect.displacement(full(p.detach()), full(w0))
            for p, w0 in zip(self.params, self.initial)
        ]
        groups = [list(range(len(scores)))]
        if self.scope == "per_layer":
            groups = [[i] for i in range(len(scores))]
        whole = [full(m) for m in self.masks]
        for group in groups:
            masks = reselect.reselect([scores[i] for i in group], sparsity)
            for i, mask in zip(group, masks or []):
                whole[i] = mask
        self._set_masks(whole)

    # ---------------------------------------------------- checkpoints, stats

    def state_dict(self) -> dict[str, Any]:
        """Whole copies of the masks (and movement scores) in parameter order, with their
        names (under FSDP a collective: every rank must call it)."""
        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "method": self.method,
            "step": self.step,
            "names": list(self.names),
            "masks": [full(m).clone() for m in self.masks],
        }
        if self.scores is not None:
            state["scores"] = [full(s).clone() for s in self.scores]
        if self.initial is not None:
            state["initial"] = [full(w0).clone() for w0 in self.initial]
        return state

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore masks exactly, on the parameters' devices, and re-apply them."""
        check_state(
            state,
            {n: tuple(p.shape) for n, p in zip(self.names, self.params)},
            self.method if self.scores is not None else None,
            self.initial is not None,
        )
        self._set_masks(
            [
                m.to(device=p.device, dtype=torch.bool).clone()
                for m, p in zip(state["masks"], self.params)
            ]
        )
        if self.scores is not None:
            self.scores = [
                like(s.to(device=p.device, dtype=torch.float32).clone(), p)
                for s, p in zip(state["scores"], self.params)
            ]
        if self.initial is not None:
            self.initial = [
                like(reselect.start(w0.to(device=p.device)), p)
                for w0, p in zip(state["initial"], self.params)
            ]
        self.step = int(state["step"])
        self.apply_masks()

    def report(self) -> dict[str, Any]:
        """Achieved global sparsity, the scheduled target now, and each layer's sparsity."""
        return {
            "sparsity": sum(self.pruned) / self.total,
            "target": self.target_at(self.step),
            "per_layer": {
                n: k / p.numel() for n, k, p in zip(self.names, self.pruned, self.params)
            },
        }

    def log_fields(self) -> dict[str, LogField]:
        """The training log line's field: the achieved sparsity, kept as a series."""
        sparsity = sum(self.pruned) / self.total
        return {"sparsity": LogField(f"{100 * sparsity:.1f}%", sparsity)}

    def state_bytes(self) -> int:
        """Bytes of the pruner's own per-weight buffers: masks, movement scores or w0."""
        buffers = self.masks + (self.scores or []) + (self.initial or [])
        return sum(t.numel() * t.element_size() for t in buffers)


class _WholeState(Mapping[str, Any]):
    """A parameter's optimizer state as a score function reads it: read-only,
    each tensor gathered whole (FSDP) only when asked for."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        value = self._state[key]
        return full(value) if torch.is_tensor(value) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


def _read_counts(counts: list[Tensor]) -> list[int]:
    """0-dim count tensors as ints, read back from the device at once (one sync)."""
    device = counts[0].device
    return [int(c) for c in torch.stack([c.to(device) for c in counts]).tolist()]


def _finite_means(scores: list[Tensor], live: list[bool]) -> list[float]:
    """Mean of each score tensor's finite entries (0.0 where `live` is False), one sync.

    Summed in float64: the same means as a float32 mean of the finite entries, to rounding.
    """
    device = scores[0].device
    means = []
    for s, alive in zip(scores, live):
        if not alive:
            means.append(torch.zeros((), dtype=torch.float64, device=device))
            continue
        finite = torch.isfinite(s)
        total = torch.where(finite, s, 0).sum(dtype=torch.float64)
        means.append((total / finite.sum()).to(device))
    return torch.stack(means).tolist()


def _filled_like(p: Tensor, value: bool | float, dtype: torch.dtype) -> Tensor:
    """A tensor shaped, placed and (under FSDP) sharded like p, filled with value.
    A plain tensor on the meta device (resolved settings, estimates) is made with
    torch.full: full_like runs Python's stride logic there, some 40x slower."""
    if p.is_meta and type(p) in (torch.Tensor, torch.nn.Parameter):
        return torch.full(p.shape, value, dtype=dtype, device=p.device)
    return torch.full_like(p, value, dtype=dtype)
