"""LR schedules (LR_SCHEDULE): cosine, warmup-stable-decay and constant, checked
at hand-computed points, against torchtitan's published values, through a
resumed run, in metrics.json and in `make results`' lr.png."""

from __future__ import annotations

import json
import math

import pytest

from lib.config.run_config import run_config_from_defaults
from lib.results.summary import summarize
from lib.train.schedule import constant_at, decay_steps, lr_at, lr_schedule, wsd_at

KW = dict(peak=6e-4, minimum=6e-5, warmup=10, total=110)


def test_warmup_is_linear_from_the_first_step():
    assert lr_at(0, **KW) == pytest.approx(6e-5)
    assert lr_at(4, **KW) == pytest.approx(3e-4)
    assert lr_at(9, **KW) == pytest.approx(6e-4)


def test_cosine_reaches_midpoint_and_minimum():
    assert lr_at(10, **KW) == pytest.approx(6e-4)
    assert lr_at(60, **KW) == pytest.approx((6e-4 + 6e-5) / 2)
    quarter = 6e-5 + 0.5 * (1 + math.cos(math.pi * 0.25)) * (6e-4 - 6e-5)
    assert lr_at(35, **KW) == pytest.approx(quarter)
    assert lr_at(110, **KW) == lr_at(500, **KW) == 6e-5


def _old_cosine(step, peak, minimum, warmup, total):
    """The schedule before LR_SCHEDULE existed, as it was written."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if step >= total:
        return minimum
    progress = (step - warmup) / max(1, total - warmup)
    return minimum + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak - minimum)


def test_the_default_is_the_old_cosine_bit_for_bit():
    run = run_config_from_defaults({})
    assert run.LR_SCHEDULE == "cosine"
    schedule = lr_schedule(run.train)
    args = (run.LEARNING_RATE, run.GPT2_MIN_LR, run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS)
    assert all(schedule(s) == _old_cosine(s, *args) for s in range(run.GPT2_MAX_ITERS + 20))


# WSD over 100 steps: warmup 10, decay round(100 x 0.2) = 20 steps from step 80,
# peak 1e-3, minimum 1e-4. Progress p = (step - 80) / 20; the shape leaves
# f(p) of the 9e-4 range: linear 1 - p, cosine (1 + cos(pi p)) / 2, 1-sqrt 1 - sqrt(p).
WSD = dict(peak=1e-3, minimum=1e-4, warmup=10, total=100, decay=20)
BY_HAND = {  # step 81 (p = 0.05), 90 (p = 0.5), 99 (p = 0.95, the last step)
    "linear": (9.55e-4, 5.5e-4, 1.45e-4),
    "cosine": (1e-4 + 9e-4 * 0.9938441702975689, 5.5e-4, 1e-4 + 9e-4 * 0.006155829702431115),
    "sqrt": (
        1e-4 + 9e-4 * 0.7763932022500211,
        1e-4 + 9e-4 * 0.2928932188134524,
        1e-4 + 9e-4 * 0.025320565519103666,
    ),
}


@pytest.mark.parametrize("shape", ["linear", "cosine", "sqrt"])
def test_wsd_boundaries_by_hand(shape):
    lr = [wsd_at(s, **WSD, shape=shape) for s in range(130)]
    assert lr[0] == pytest.approx(1e-4)  # step 0: peak / warmup
    assert lr[9] == pytest.approx(1e-3)  # last warmup step reaches the peak
    assert lr[10] == lr[50] == lr[80] == 1e-3  # stable through the start of the decay
    assert (lr[81], lr[90], lr[99]) == pytest.approx(BY_HAND[shape], rel=1e-12)
    assert lr[100] == lr[129] == 1e-4  # reached at `total`, held past the end
    assert all(a <= b for a, b in zip(lr[:10], lr[1:11]))  # rises in warmup
    assert all(a > b for a, b in zip(lr[80:100], lr[81:101]))  # falls at every decay step


def test_wsd_equals_torchtitans_published_factors():
    """torchtitan tests/unit_tests/test_lr_scheduler.py, test_linear_warmup_decay:
    10 steps, warmup 2, decay straight after warmup, linear to 0."""
    expected = [0.5, 1.0, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8]
    got = [
        wsd_at(s, peak=1.0, minimum=0.0, warmup=2, total=10, decay=8, shape="linear")
        for s in range(10)
    ]
    assert got == pytest.approx(expected, abs=1e-15)


def test_decay_steps_round_and_leave_room_for_warmup():
    assert decay_steps(100, 10, 0.2) == 20
    assert decay_steps(300, 30, 0.2) == 60
    assert decay_steps(100, 90, 0.2) == 10  # warmup leaves 10
    assert decay_steps(100, 120, 0.2) == 0 and decay_steps(100, 10, 0.0) == 0
    # No decay: constant after warmup, to the end and past it.
    assert [wsd_at(s, **{**WSD, "decay": 0}, shape="linear") for s in (9, 99, 150)] == [1e-3] * 3


def test_constant_after_warmup():
    assert [constant_at(s, peak=2e-3, warmup=4) for s in (0, 3, 4, 10**6)] == [
        pytest.approx(5e-4),
        2e-3,
        2e-3,
        2e-3,
    ]


def test_schedule_symbols_reach_the_schedule():
    wsd = lr_schedule(
        run_config_from_defaults(
            {
                "LR_SCHEDULE": "wsd",
                "LR_DECAY_SHAPE": "sqrt",
                "LR_DECAY_FRACTION": "0.5",
                "GPT2_MAX_ITERS": "100",
                "GPT2_WARMUP_STEPS": "10",
                "LEARNING_RATE": "1e-3",
                "GPT2_MIN_LR": "0",
            }
        ).train
    )
    assert wsd(50) == 1e-3 and wsd(75) == pytest.approx(1e-3 * (1 - math.sqrt(0.5)))
    const = run_config_from_defaults({"LR_SCHEDULE": "constant", "LEARNING_RATE": "1e-3"})
    assert const.GPT2_MIN_LR is None  # hidden: nothing decays
    assert lr_schedule(const.train)(10**5) == 1e-3


def test_resume_mid_decay_keeps_the_lr_and_records_it(tiny_run):
    from lib.run.checkpoint import load_checkpoint
    from lib.train.naming import create_run_dir
    from lib.train.trainer import Trainer
    from tests.lib.stops import train_until

    # 12 steps, warmup 5, decay the last 6 (from step 6); stop at 9, resume.
    settings = dict(
        GPT2_MAX_ITERS=12,
        GPT2_EVAL_INTERVAL=6,
        LR_SCHEDULE="wsd",
        LR_DECAY_FRACTION="0.5",
        LR_DECAY_SHAPE="cosine",
    )

    def train(name, stop_after=None, resume=None, run_dir=None):
        run = tiny_run(RUN_NAME=name, **settings)
        run_dir = run_dir or create_run_dir(run)
        trainer = Trainer(run, run_dir, log=lambda _: None, resume=resume)
        return train_until(trainer, stop_after), run_dir

    whole, whole_dir = train("whole")
    part, run_dir = train("parts", stop_after=9)
    assert part["iterations"] == 9
    resumed, _ = train("parts", resume=load_checkpoint(run_dir / "ckpt_latest.pt"), run_dir=run_dir)
    assert resumed["lr"] == whole["lr"]  # every logged LR, bit for bit
    assert resumed["train_loss"] == whole["train_loss"]
    lrs = dict(zip(whole["lr"]["iters"], whole["lr"]["values"]))
    # Logged after step s (1-based iteration s) is the LR step s - 1 ran with.
    assert lrs[5] == lrs[7] == 3e-3 and lrs[12] == pytest.approx(
        3e-4 + 2.7e-3 * 0.5 * (1 + math.cos(math.pi * 5 / 6)), rel=1e-12
    )
    record = json.loads((whole_dir / "metrics.json").read_text())["lr_schedule"]
    assert record == {
        "name": "wsd",
        "peak": 3e-3,
        "warmup_steps": 5,
        "total_steps": 12,
        "min_lr": 3e-4,
        "decay_fraction": 0.5,
        "decay_steps": 6,
        "decay_start": 6,
        "decay_shape": "cosine",
    }
    _, files, _ = summarize(whole_dir.parent)
    assert "lr.png" in {f.name for f in files}
