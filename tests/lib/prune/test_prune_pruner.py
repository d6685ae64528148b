"""Pruner on a 2-layer GPT-2: target reached, zeros exact, monotone, resumable."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from lib.prune import registry
from lib.prune.layers import depth_ramp
from lib.prune.pruner import METHODS, Pruner
from lib.prune.scores import VARIANTS
from tests.lib.prune.tiny_run import SCHEDULE, STEPS, batches, make_model, train


def check_run(model, optimizer, pruner, history, target=0.5):
    prunable = model.prunable()
    total = sum(p.numel() for _, p in prunable)
    for before, after in zip(history, history[1:]):  # monotone: nothing regrows
        assert not any(bool((a & ~b).any()) for a, b in zip(after, before))
    assert all(bool(m.all()) for m in history[SCHEDULE["warmup"] - 1])  # dense through warmup
    ramp_end = SCHEDULE["ramp_end"]
    assert all(torch.equal(a, b) for a, b in zip(history[ramp_end - 1], history[-1]))
    report = pruner.report()
    zero = sum(int((~m).sum()) for m in pruner.masks)
    assert report["sparsity"] == zero / total
    assert abs(report["sparsity"] - target) <= 0.005 and report["target"] == target
    assert set(report["per_layer"]) == {n for n, _ in prunable}
    for (_, p), mask in zip(prunable, pruner.masks):
        dropped = ~mask
        assert bool((p[dropped] == 0).all())
        state = optimizer.state[p]
        assert bool((state["exp_avg"][dropped] == 0).all())
        assert bool((state["exp_avg_sq"][dropped] == 0).all())
    return report


def test_magnitude_global_reaches_target_exactly_and_monotonically():
    model, optimizer = make_model()
    pruner = Pruner(
        model.prunable(),
        method="magnitude",
        schedule="cubic",
        scope="global",
        optimizer=optimizer,
        **SCHEDULE,
    )
    history = train(model, optimizer, pruner, batches(STEPS), 1, STEPS)
    report = check_run(model, optimizer, pruner, history)
    total = sum(p.numel() for _, p in model.prunable())
    assert report["sparsity"] == round(0.5 * total) / total
    first = sum(int((~m).sum()) for m in history[9])  # first update at step 10
    assert first == round(pruner.target_at(10) * total) and 0 < first < 0.5 * total
    assert len({round(v, 3) for v in report["per_layer"].values()}) > 1  # global: layers differ
    assert pruner.state_bytes() == total  # one bool per weight


def test_state_bitter7_per_layer_scope():
    model, optimizer = make_model()
    pruner = Pruner(
        model.prunable(),
        method="state",
        variant="bitter7",
        schedule="linear",
        scope="per_layer",
        optimizer=optimizer,
        **SCHEDULE,
    )
    history = train(model, optimizer, pruner, batches(STEPS), 1, STEPS)
    report = check_run(model, optimizer, pruner, history)
    assert all(abs(v - 0.5) <= 0.005 for v in report["per_layer"].values())
    assert pruner.state_bytes() == sum(p.numel() for _, p in model.prunable())


def test_movement_global_with_sampled_threshold():
    model, optimizer = make_model()
    pruner = Pruner(
        model.prunable(),
        method="movement",
        schedule="cubic",
        scope="global",
        optimizer=optimizer,
        sample_size=5_000,
        **SCHEDULE,
    )
    history = train(model, optimizer, pruner, batches(STEPS), 1, STEPS)
    report = check_run(model, optimizer, pruner, history)
    total = sum(p.numel() for _, p in model.prunable())
    assert report["sparsity"] == round(0.5 * total) / total  # exact despite sampling
    assert pruner.state_bytes() == total * (1 + 4)  # mask + float32 score


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_prunes_to_target(variant):
    model, optimizer = make_model()
    schedule = dict(target=0.6, warmup=2, ramp_end=8, frequency=2)
    pruner = Pruner(
        model.prunable(),
        method="state",
        variant=variant,
        schedule="cubic",
        scope="global",
        optimizer=optimizer,
        **schedule,
    )
    train(model, optimizer, pruner, batches(10), 1, 10)
    report = pruner.report()
    for (_, p), mask in zip(model.prunable(), pruner.masks):
        assert bool((p[~mask] == 0).all()) and torch.isfinite(p).all()
    if variant == "bitter4":  # the reference's depth ramp, layer by layer
        sizes = [p.numel() for _, p in model.prunable()]
        ramp = depth_ramp(len(sizes), 0.6)
        assert list(report["per_layer"].values()) == [int(r * n) / n for r, n in zip(ramp, sizes)]
        assert abs(report["sparsity"] - 0.6) > 0.005  # depth ramp: near the target, not on it
    else:
        assert abs(report["sparsity"] - 0.6) <= 0.005


def test_bitter4_rank_budget_hits_the_global_target_with_uneven_layers():
    model, optimizer = make_model()
    pruner = Pruner(
        model.prunable(),
        method="state",
        variant="bitter4",
        bitter4_budget="rank",
        schedule="cubic",
        scope="global",
        optimizer=optimizer,
        target=0.6,
        warmup=2,
        ramp_end=8,
        frequency=2,
    )
    train(model, optimizer, pruner, batches(10), 1, 10)
    report = pruner.report()
    per_layer = list(report["per_layer"].values())
    assert abs(report["sparsity"] - 0.6) <= 0.005
    assert max(per_layer) - min(per_layer) > 0.1 and max(per_layer) <= 0.95
    assert per_layer != [
        int(r * p.numel()) / p.numel()
        for r, (_, p) in zip(depth_ramp(len(per_layer), 0.6), model.prunable())
    ]


def _pruned_with_state(
    variant: str, w: list[float], m: list[float], v: list[float], stepped: bool = True
) -> list[bool]:
    """Masks after one update to 50 % of one parameter whose Adam moments are m, v."""
    p = torch.nn.Parameter(torch.tensor(w))
    optimizer = torch.optim.AdamW([p])
    if stepped:
        optimizer.state[p] = {
            "step": torch.tensor(5.0),
            "exp_avg": torch.tensor(m),
            "exp_avg_sq": torch.tensor(v),
        }
    pruner = Pruner(
        [("w", p)],
        method="state",
        variant=variant,
        target=0.5,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
        optimizer=optimizer,
    )
    pruner.after_step(1)
    return pruner.masks[0].tolist()


def test_bitter5_masks_follow_the_reference_codes_sign():
    # sign(w) m > 0: Adam moves w toward zero. The reference's code scores
    # sign(w) m / sqrt(v) + 0.1|w|, so those weights are KEPT; toward_zero prunes them.
    w = [1.0, -1.0, 1.0, -1.0, 2.0, -2.0]
    m = [0.5, -0.5, -0.5, 0.5, 0.1, 0.1]
    v = [1.0] * 6
    moving_to_zero = [True, True, False, False, True, False]
    assert _pruned_with_state("bitter5", w, m, v) == moving_to_zero
    assert _pruned_with_state("toward_zero", w, m, v) == [not k for k in moving_to_zero]


def test_state_scores_fall_back_to_magnitude_before_the_first_step():
    w, zeros = [0.1, -3.0, 0.2, 4.0], [0.0] * 4
    assert _pruned_with_state("bitter3", w, [9.0, 0.0, 9.0, 0.0], [1.0] * 4) == [
        True,
        False,
        True,
        False,
    ]  # with moments: |w| sqrt|m| keeps the small weights
    for variant in ("bitter0", "bitter3", "bitter7", "obd"):
        assert _pruned_with_state(variant, w, zeros, zeros, stepped=False) == [
            False,
            True,
            False,
            True,
        ], variant


def test_magnitude_prunes_the_smallest_weights():
    torch.manual_seed(0)
    layers = [torch.nn.Parameter(torch.randn(8, 16)), torch.nn.Parameter(torch.randn(32) * 0.1)]
    before = [p.detach().clone() for p in layers]
    values = torch.cat([w.abs().flatten() for w in before])
    cut = values.sort().values[round(0.4 * values.numel())]  # smallest kept magnitude
    pruner = Pruner(
        [("a", layers[0]), ("b", layers[1])],
        method="magnitude",
        target=0.4,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
    )
    pruner.after_step(1)
    for w, mask in zip(before, pruner.masks):
        assert torch.equal(mask, w.abs() >= cut)
    kept = torch.cat([p.detach().flatten() for p in layers])
    assert int((kept == 0).sum()) == round(0.4 * values.numel())
    assert float(kept[kept != 0].abs().min()) >= float(cut)


@pytest.mark.parametrize("method", ["movement", "state"])
def test_state_dict_round_trip_continues_identically(method):
    data = batches(STEPS)
    kwargs = dict(method=method, schedule="cubic", scope="global", **SCHEDULE)
    model, optimizer = make_model()
    pruner = Pruner(model.prunable(), optimizer=optimizer, **kwargs)
    train(model, optimizer, pruner, data, 1, 17)  # mid-ramp, between updates
    buffer = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "pruner": pruner.state_dict(),
        },
        buffer,
    )
    saved_masks = [m.clone() for m in pruner.masks]
    rest = train(model, optimizer, pruner, data, 18, STEPS)

    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    model2, optimizer2 = make_model(seed=123)
    model2.load_state_dict(checkpoint["model"])
    optimizer2.load_state_dict(checkpoint["optimizer"])
    pruner2 = Pruner(model2.prunable(), optimizer=optimizer2, **kwargs)
    pruner2.load_state_dict(copy.deepcopy(checkpoint["pruner"]))
    assert all(torch.equal(a, b) for a, b in zip(pruner2.masks, saved_masks))
    assert pruner2.report()["sparsity"] == sum(int((~m).sum()) for m in saved_masks) / sum(
        m.numel() for m in saved_masks
    )
    rest2 = train(model2, optimizer2, pruner2, data, 18, STEPS)
    for masks, masks2 in zip(rest, rest2):
        assert all(torch.equal(a, b) for a, b in zip(masks, masks2))
    for (_, a), (_, b) in zip(model.named_parameters(), model2.named_parameters()):
        assert torch.equal(a, b)
    assert pruner2.report() == pruner.report()


def test_load_rejects_a_state_for_other_parameters():
    model, optimizer = make_model()
    pruner = Pruner(
        model.prunable(), method="magnitude", schedule="cubic", scope="global", **SCHEDULE
    )
    state = pruner.state_dict()
    other = Pruner(
        model.prunable()[:2], method="magnitude", schedule="cubic", scope="global", **SCHEDULE
    )
    with pytest.raises(ValueError, match="state"):
        other.load_state_dict(state)


def test_report_before_training():
    model, _ = make_model()
    pruner = Pruner(
        model.prunable(), method="magnitude", schedule="linear", scope="global", **SCHEDULE
    )
    report = pruner.report()
    assert report["sparsity"] == 0.0 and report["target"] == 0.0
    assert set(METHODS) == {m.name for m in registry.METHODS} >= {"magnitude", "custom"}


@pytest.mark.parametrize(
    "overrides, name",
    [
        (dict(method="state"), "optimizer"),
        (dict(method="state", optimizer="opt", variant="bitter10"), "variant"),
        (
            dict(method="state", optimizer="opt", variant="bitter4", bitter4_budget="size"),
            "bitter4_budget",
        ),
        (dict(method="no-such-method"), "method"),
        (dict(target=1.0), "target"),
        (dict(target=1.5), "target"),
        (dict(ramp_end=5), "ramp_end"),
        (dict(ramp_end=3), "ramp_end"),
        (dict(schedule="exponential"), "schedule"),
        (dict(scope="per_row"), "scope"),
        (dict(frequency=0), "frequency"),
    ],
)
def test_invalid_arguments_name_the_argument(overrides, name):
    model, optimizer = make_model()
    kwargs = dict(method="magnitude", schedule="cubic", scope="global", **SCHEDULE)
    kwargs.update(overrides)
    if kwargs.get("optimizer") == "opt":
        kwargs["optimizer"] = optimizer
    with pytest.raises(ValueError, match=name):
        Pruner(model.prunable(), **kwargs)


def test_optimizer_must_update_the_pruned_parameters():
    model, _ = make_model()
    partial = torch.optim.AdamW(model.transformer.wte.parameters())
    with pytest.raises(ValueError, match="optimizer"):
        Pruner(
            model.prunable(),
            method="state",
            optimizer=partial,
            schedule="cubic",
            scope="global",
            **SCHEDULE,
        )
