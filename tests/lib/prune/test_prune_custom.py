"""A pruning score of the user's own runs through PRUNING_METHOD=custom
(lib/prune/custom.py) without editing the tree: checked at configuration time,
called at each mask update with the weight and the optimizer's state, its
lowest scores pruned on the shared schedule, recorded by name and content hash,
priced as a mask, and a matrix entry beside the built-in methods."""

from __future__ import annotations

import hashlib
import sys

import pytest
import torch

from lib.config.kconfig import ConfigError
from lib.estimate.memory import model_counts, pruning_bytes
from lib.matrix import grid
from lib.model import registry as families
from lib.optim import build_optimizer
from lib.prune.build import build_pruner
from lib.prune.pruner import Pruner
from lib.run.fingerprint import user_sources

VOCAB = 40

SCORE = '''\
"""First-order Taylor saliency |w * m| (Molchanov et al. 2019), m the momentum."""


def taylor(weight, state):
    m = state.get("exp_avg", state.get("momentum_buffer"))
    return weight.abs() if m is None else (weight * m).abs()


def largest_first(weight, state):
    return -weight.abs()


def itself(weight, state):
    return weight


def flat(weight, state):
    return weight.flatten()


def nan_where_small(weight, state):
    return weight.abs().masked_fill(weight.abs() < 0.01, float("nan"))


def one_argument(weight):
    return weight

NOT_CALLABLE = 3
'''


@pytest.fixture
def user_score(tmp_path, monkeypatch):
    """A module of the user's own, importable as user_score from its folder."""
    folder = tmp_path / "mine"
    folder.mkdir()
    path = folder / "user_score.py"
    path.write_text(SCORE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "user_score", raising=False)
    yield path
    sys.modules.pop("user_score", None)


def _custom(tiny_run, function: str = "taylor", **settings):
    return tiny_run(
        PRUNING_MODE_SINGLE="y",
        PRUNING_METHOD_CUSTOM="y",
        PRUNING_CUSTOM_SCORE=f"user_score:{function}",
        PRUNING_TARGET_SPARSITY="0.5",
        PRUNING_WARMUP="0",
        PRUNING_RAMP_END="1",
        PRUNING_FREQUENCY="1",
        **settings,
    )


def _built(run):
    family = families.family(run.MODEL)
    torch.manual_seed(0)
    model = family.build(family.from_run_config(run, VOCAB))
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    return model, opt, build_pruner(run.prune, model, opt, run.TRAIN_SEED)


def _one_step(model, opt, pruner) -> None:
    gen = torch.Generator().manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)
    pruner.before_step(1)
    opt.step()
    pruner.after_step(1)  # ramp_end 1: the whole target at once


def test_the_users_scores_choose_the_mask_from_the_weight_and_the_optimizers_state(
    tiny_run, user_score
):
    model, opt, pruner = _built(_custom(tiny_run))
    assert pruner.method == "custom"
    # the scores the function will see, taken before the update: the stepped weight
    # and AdamW's exp_avg (the masks change after the step)
    gen = torch.Generator().manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)
    pruner.before_step(1)
    opt.step()
    expected = [(p.detach() * opt.state[p]["exp_avg"]).abs() for p in pruner.params]
    pruner.after_step(1)
    # one global threshold (PRUNING_SCOPE global): every kept score >= every pruned one
    kept = torch.cat([s[m] for s, m in zip(expected, pruner.masks)])
    pruned = torch.cat([s[~m] for s, m in zip(expected, pruner.masks)])
    assert kept.min() >= pruned.max()
    assert abs(pruned.numel() / (kept.numel() + pruned.numel()) - 0.5) < 1e-3
    for p, m in zip(pruner.params, pruner.masks):  # and the pruned weights are zero
        assert torch.count_nonzero(p.detach()[~m]) == 0


def test_the_lowest_scores_go_first_whatever_the_function_ranks(tiny_run, user_score):
    """-|w| prunes the largest weights: the function decides, not magnitude."""
    model, opt, pruner = _built(_custom(tiny_run, "largest_first"))
    weights = [p.detach().abs().clone() for p in pruner.params]
    pruner.after_step(1)
    kept = torch.cat([w[m] for w, m in zip(weights, pruner.masks)])
    pruned = torch.cat([w[~m] for w, m in zip(weights, pruner.masks)])
    assert kept.max() <= pruned.min()


def test_a_score_that_is_the_weight_itself_leaves_the_weights_alone(tiny_run, user_score):
    """The update fills pruned scores with -inf in place: never in the weight."""
    model, opt, pruner = _built(_custom(tiny_run, "itself"))
    before = [p.detach().clone() for p in pruner.params]
    pruner.after_step(1)
    for p, w, m in zip(pruner.params, before, pruner.masks):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.detach()[m], w[m], rtol=0, atol=0)


def test_a_score_of_the_wrong_shape_names_the_weight(tiny_run, user_score):
    model, opt, pruner = _built(_custom(tiny_run, "flat"))
    with pytest.raises(ValueError, match=r"custom pruning score of \S+ is shape \(\d+,\)"):
        pruner.after_step(1)


def test_a_score_with_nan_names_the_weight_and_the_count(tiny_run, user_score):
    """NaN compares false both ways: the cut-off would skip those weights, and a run
    of all-NaN scores ended 'completed' at sparsity 0 against a target of 0.5."""
    model, opt, pruner = _built(_custom(tiny_run, "nan_where_small"))
    small = sum(int((p.detach().abs() < 0.01).sum()) for p in pruner.params[:1])
    assert small > 0
    with pytest.raises(ValueError, match=rf"score of \S+ is NaN at {small:,} of [\d,]+ entries"):
        pruner.after_step(1)
    # the same function on weights that are NaN themselves (a diverging run): no error
    model, opt, pruner = _built(_custom(tiny_run, "itself"))
    with torch.no_grad():
        for p in pruner.params:
            p.fill_(float("nan"))
    pruner.after_step(1)


def test_a_method_custom_without_a_function_is_refused():
    w = torch.nn.Parameter(torch.ones(4, 4))
    with pytest.raises(ValueError, match="score is required for method 'custom'"):
        Pruner(
            [("w", w)],
            method="custom",
            target=0.5,
            warmup=0,
            ramp_end=1,
            frequency=1,
            schedule="cubic",
            scope="global",
        )


@pytest.mark.parametrize(
    "function, says",
    [
        ("", "PRUNING_CUSTOM_SCORE is empty"),
        ("user_score", 'is not "module:function"'),
        ("no_such_module_x:taylor", "cannot import no_such_module_x"),
        ("user_score:nope", "nope in user_score has no such name"),
        ("user_score:NOT_CALLABLE", "is an int, not a function"),
        ("user_score:one_argument", "must take two arguments, score(weight, state)"),
    ],
)
def test_a_wrong_function_is_one_paragraph_naming_the_symbol(tiny_run, user_score, function, says):
    with pytest.raises(ConfigError) as err:
        tiny_run(
            PRUNING_MODE_SINGLE="y",
            PRUNING_METHOD_CUSTOM="y",
            PRUNING_CUSTOM_SCORE=function,
        )
    text = str(err.value)
    assert says in text and "CONFIG_PRUNING_CUSTOM_SCORE" in text, text
    assert "Traceback" not in text


def test_it_is_recorded_by_name_and_content_and_priced_as_a_mask(tiny_run, user_score):
    from lib.prune.custom import describe

    run = _custom(tiny_run)
    record = describe(run.prune)
    assert record["function"] == "user_score:taylor"
    assert record["sha256"] == hashlib.sha256(user_score.read_bytes()).hexdigest()
    first = user_sources(run)["pruning_source"]
    user_score.write_text(SCORE.replace("First-order", "First-order, edited"))
    assert user_sources(run)["pruning_source"] != first
    assert "optimizer_source" not in user_sources(run)  # AdamW: nothing more hashed

    # one bool per pruned weight, as magnitude pruning
    counts = model_counts(run, VOCAB)[1]
    magnitude = tiny_run(PRUNING_MODE_SINGLE="y", PRUNING_METHOD_MAGNITUDE="y")
    assert pruning_bytes(run, counts) == pruning_bytes(magnitude, counts) > 0
    model, opt, pruner = _built(run)
    assert pruner.state_bytes() == sum(p.numel() for p in pruner.params)


def test_it_is_a_matrix_entry_beside_the_built_in_methods(tiny_run, user_score):
    run = tiny_run(
        PRUNING_MODE_MULTIPLE="y",
        PRUNING_ENABLE_MAGNITUDE="y",
        PRUNING_ENABLE_CUSTOM="y",
        PRUNING_CUSTOM_SCORE="user_score:taylor",
    )
    methods = [dict(p).get("PRUNING_METHOD") for p in grid.pruning_axis(run)]
    assert "magnitude" in methods and "custom" in methods, methods
