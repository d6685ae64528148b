"""knlp's AdamWSPAM rule (lib/optim/knlp_spam.py) against a plain transcription of
what knlp's GPT-2 trainer does each step (mcgrof/knlp at 041ec5f2), run through
TrainStep so that the hook's place before the gradient-norm clip is tested too."""

from __future__ import annotations

import copy
import io
import math
import statistics

import pytest
import torch
from torch import nn

from lib.config.kconfig import ConfigError, load_strict
from lib.config.run_config import load_run_config, write_outputs
from lib.optim import build_optimizer
from lib.optim.knlp_spam import KnlpAdamWSPAM
from lib.speed.precision import Precision
from lib.train.step import TrainStep

STEPS = 30
THETA = 1e4  # knlp runs 50, which clips these injected spikes away before the norm test
KNLP_INTERVAL, KNLP_WARMUP = 16, 6  # knlp's own units: its counter moves twice per step
SPIKES = {13: 40.0, 14: 3.0, 21: 60.0, 27: 25.0}  # step -> input scale (a gradient spike)


class Tiny(nn.Module):
    """forward(x, y) -> (out, loss), the contract TrainStep relies on."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 12), nn.Linear(12, 3)

    def forward(self, x, y):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return out, ((out - y) ** 2).mean()

    def param_groups(self, weight_decay: float, rule: str = "") -> list[dict]:  # build_optimizer
        decay, rest = groups(self)
        return [decay | {"weight_decay": weight_decay}, rest]


def groups(model: nn.Module) -> list[dict]:
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(3)
    out = []
    for step in range(1, STEPS + 1):
        x = torch.randn(16, 6, generator=gen) * SPIKES.get(step, 1.0)
        out.append((x, torch.randn(16, 3, generator=gen)))
    return out


def lr_at(step: int) -> float:
    return 1e-2 * (0.5 + 0.5 * math.cos(math.pi * step / STEPS))  # a decaying schedule


def knlp_transcribed(model: nn.Module, data) -> tuple[list[list[torch.Tensor]], dict[str, int]]:
    """What knlp's trainer does per step, written out from its description: torch
    AdamW (AMSGrad), per-entry clipping against sqrt(theta (v + 1e-12)) from step 2,
    z-score spike damping (m * 0.5, v * 0.9) over up to 99 earlier norms from the
    10th, the clip at norm 1.0, then a counter that has moved twice per step
    decides the resets and the LR re-warmup."""
    opt = torch.optim.AdamW(
        groups(model), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, amsgrad=True, foreach=False
    )
    norms: list[float] = []
    counter, warm_until = 0, 0
    counts = {"resets": 0, "spike_resets": 0}
    trace = []
    for step, (x, y) in enumerate(data, 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        model(x, y)[1].backward()
        for group in opt.param_groups:
            for p in group["params"]:
                state = opt.state.get(p, {})
                if p.grad is None or "exp_avg_sq" not in state:
                    continue
                limit = (THETA * (state["exp_avg_sq"] + 1e-12)).sqrt()
                over = p.grad.abs() > limit
                p.grad[over] = p.grad[over].sign() * limit[over]
        norm = math.sqrt(sum(p.grad.norm(2).item() ** 2 for p in model.parameters()))
        norms = (norms + [norm])[-100:]
        counter += 1
        if len(norms) >= 10:
            mean, std = statistics.fmean(norms[:-1]), statistics.pstdev(norms[:-1])
            if std > 0 and (norm - mean) / std > 2.0:
                counts["spike_resets"] += 1
                for state in opt.state.values():
                    state["exp_avg"].mul_(0.5)
                    state["exp_avg_sq"].mul_(0.9)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        counter += 1
        if counter % KNLP_INTERVAL == 0:
            counts["resets"] += 1
            for state in opt.state.values():
                state["exp_avg"].zero_()
                state["exp_avg_sq"].zero_()
            warm_until = counter + KNLP_WARMUP
        if warm_until > counter:
            t = (KNLP_WARMUP - (warm_until - counter)) / KNLP_WARMUP
            for group in opt.param_groups:
                group["lr"] *= max(1e-3, 0.5 * (1 - math.cos(math.pi * t)))
        opt.step()
        opt.zero_grad(set_to_none=True)
        trace.append([p.detach().clone() for p in model.parameters()])
    return trace, counts


def ours(model: nn.Module, **kwargs) -> tuple[KnlpAdamWSPAM, TrainStep]:
    opt = KnlpAdamWSPAM(
        groups(model),
        lr=1e-2,
        theta=THETA,
        interval=KNLP_INTERVAL // 2,
        warmup_steps=KNLP_WARMUP // 2,
        foreach=False,
        **kwargs,
    )
    step = TrainStep(model, opt, Precision(torch.device("cpu"), "fp32", "test"), 1, grad_clip=1.0)
    return opt, step


def run(step: TrainStep, data, steps) -> list[list[torch.Tensor]]:
    trace = []
    for i in steps:
        step(lambda batch=data[i - 1]: batch, lr_at(i), i)
        trace.append([p.detach().clone() for p in step.model.parameters()])
    return trace


def test_matches_knlp_trainer_step_for_step():
    torch.manual_seed(0)
    start, data = Tiny(), batches()
    expected, counts = knlp_transcribed(copy.deepcopy(start), data)
    opt, step = ours(copy.deepcopy(start))
    got = run(step, data, range(1, STEPS + 1))
    for i, (a, b) in enumerate(zip(got, expected), 1):
        for pa, pb in zip(a, b):
            assert torch.equal(pa, pb), f"step {i}"
    stats = opt.stats()
    # The rule acted: resets at steps 8, 16, 24; spikes damped; entries clipped.
    assert stats["resets"] == counts["resets"] == 3
    assert stats["spike_resets"] == counts["spike_resets"] >= 2
    assert stats["spikes_clipped"] > 0
    assert [g["lr"] for g in opt.param_groups] == [lr_at(STEPS)] * 2  # put back after each step


def test_lr_rewarmup_factor():
    opt = KnlpAdamWSPAM([torch.zeros(2, requires_grad=True)], warmup_steps=4)
    # j-th step from a reset: max(1e-3, (1 - cos(pi j / 4)) / 2), then 1
    assert [opt.lr_scale(j) for j in range(6)] == pytest.approx(
        [1e-3, (1 - math.sqrt(0.5)) / 2, 0.5, (1 + math.sqrt(0.5)) / 2, 1.0, 1.0], rel=1e-12
    )
    assert opt.lr_scale(-1) == 1.0  # before any reset


def test_step_alone_applies_the_rule():
    """A caller that never calls before_clip() (no TrainStep) still gets the rule."""
    p = torch.nn.Parameter(torch.ones(3))
    opt = KnlpAdamWSPAM([p], lr=0.1, interval=2, warmup_steps=2, spike_reset=False)
    for _ in range(4):
        p.grad = torch.full((3,), 0.5)
        opt.step()
    assert opt.stats()["resets"] == 2 and opt.param_groups[0]["lr"] == 0.1


def test_stop_and_resume_is_bit_identical():
    torch.manual_seed(1)
    start, data = Tiny(), batches()
    whole_opt, whole_step = ours(copy.deepcopy(start))
    whole = run(whole_step, data, range(1, STEPS + 1))

    model = copy.deepcopy(start)
    opt, step = ours(model)
    run(step, data, range(1, 18))  # stop on the step after the reset at 16, inside the re-warmup
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buf)
    saved = opt.state_dict()["knlp_spam"]
    assert saved["calls"] == 17 and saved["since_reset"] == 1 and len(saved["norms"]) == 17

    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    model2 = Tiny()
    model2.load_state_dict(state["model"])
    opt2, step2 = ours(model2)
    opt2.load_state_dict(state["optimizer"])
    rest = run(step2, data, range(18, STEPS + 1))
    for a, b in zip(rest, whole[17:]):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert opt2.stats() == whole_opt.stats()

    # Without the saved schedule position the resumed run differs (it is needed).
    del state["optimizer"]["knlp_spam"]["since_reset"]
    model3 = Tiny()
    model3.load_state_dict(state["model"])
    opt3, step3 = ours(model3)
    opt3.load_state_dict(state["optimizer"])
    other = run(step3, data, range(18, STEPS + 1))
    assert not torch.equal(other[-1][0], whole[-1][0])


def load(write_config, tmp_path, *lines):
    write_outputs(load_strict(write_config(*lines)), tmp_path / ".config", tmp_path / "config.py")
    return load_run_config([], tmp_path / ".config")


def test_kconfig_rule_builds_knlps_optimizer(write_config, tmp_path):
    run = load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWSPAM=y", "CONFIG_SPAM_RULE_KNLP=y")
    opt = build_optimizer(run.optim, run.LEARNING_RATE, Tiny(), torch.device("cpu"))
    assert isinstance(opt, KnlpAdamWSPAM)
    # the rule's defaults are knlp's (its 1000 and 200 counter ticks are 500 and 100 steps)
    assert (opt.theta, opt.interval, opt.warmup_steps, opt.clip) == (50.0, 500, 100, True)
    assert opt.spike is not None and opt.spike.threshold == 2.0
    assert opt.defaults["amsgrad"] is True
    run = load(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_ADAMWSPAM=y",
        "CONFIG_SPAM_RULE_KNLP=y",
        "# CONFIG_SPAM_ENABLE_RESET is not set",
    )
    assert build_optimizer(run.optim, run.LEARNING_RATE, Tiny(), torch.device("cpu")).interval == 0
    run = load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWSPAM=y")
    opt = build_optimizer(run.optim, run.LEARNING_RATE, Tiny(), torch.device("cpu"))
    assert type(opt) is not KnlpAdamWSPAM


def test_authors_only_settings_are_refused_with_knlps_rule(write_config):
    with pytest.raises(ConfigError, match="SPAM_CLIP_SKIP_STEPS"):
        load_strict(
            write_config(
                "CONFIG_OPTIMIZER_ADAMWSPAM=y",
                "CONFIG_SPAM_RULE_KNLP=y",
                "CONFIG_SPAM_CLIP_SKIP_STEPS=20",
            )
        )


@pytest.mark.slow
def test_trainer_resume_with_knlps_rule_matches_uninterrupted_run(tiny_run):
    """Through the real trainer and its checkpoint: stopped inside a re-warmup."""
    from lib.run.checkpoint import load_checkpoint
    from lib.train.naming import create_run_dir
    from lib.train.trainer import Trainer
    from tests.lib.stops import train_until

    settings = dict(
        GPT2_MAX_ITERS=20,
        GPT2_EVAL_INTERVAL=7,
        OPTIMIZER_ADAMWSPAM="y",
        SPAM_RULE_KNLP="y",
        SPAM_INTERVAL=6,
        SPAM_WARMUP_STEPS=4,
    )

    def train(name, stop_after=None, resume=None, run_dir=None):
        run = tiny_run(RUN_NAME=name, **settings)
        run_dir = run_dir or create_run_dir(run)
        trainer = Trainer(run, run_dir, log=lambda _: None, resume=resume)
        return train_until(trainer, stop_after), run_dir

    whole, _ = train("whole")
    part, run_dir = train("parts", stop_after=14)  # 2 steps after the reset at 12
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    assert state["step"] == 14
    resumed, _ = train("parts", resume=state, run_dir=run_dir)
    assert resumed["status"] == "completed"
    assert resumed["train_loss"] == whole["train_loss"]  # every logged loss, bit for bit
    assert resumed["val_loss"] == whole["val_loss"]
    assert whole["spam_resets"] == resumed["spam_resets"] == 3
    assert whole["optimizer_impl"].startswith("KnlpAdamWSPAM")
