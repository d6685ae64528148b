"""The gpu-check scheduler: caps against the budget, the default order, STAGES=."""

from __future__ import annotations

import pytest

from lib.bench.gpucheck import plan
from lib.bench.gpucheck.plan import STAGES


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_runner(clock: FakeClock, takes: dict[str, float], ran: list[str]):
    def run(stage, cap):
        ran.append(stage.name)
        clock.now += min(takes[stage.name], cap)
        return {"status": "done", "figures": {"cap": cap}}

    return run


def test_a_stage_whose_cap_would_overrun_the_budget_is_skipped_and_later_ones_still_run():
    clock, ran = FakeClock(), []
    caps = {n: s.gpu_cap_s for n, s in STAGES.items()}  # a 150, b 240, c 90, d 150, e 180
    takes = {"a": 100, "b": 200, "c": 60, "d": 10, "e": 10, "f": 10}
    budget = takes["a"] + takes["b"] + 61  # after a and b (300 s) 61 s are left
    assert caps["a"] <= budget and caps["b"] <= budget - takes["a"]
    records = plan.schedule(
        ["a", "b", "c", "d", "e"], "cuda", budget, fake_runner(clock, takes, ran), clock
    )
    assert ran == ["a", "b"]  # c's 90 s cap > 61 s left; so are d's and e's
    assert records["a"]["seconds"] == 100 and records["b"]["seconds"] == 200
    assert {records[n]["status"] for n in "cde"} == {"skipped"}
    assert "61 s left" in records["c"]["reason"]
    clock2, ran2 = FakeClock(), []
    # With c first it fits, and b no longer does.
    records = plan.schedule(
        ["a", "c", "b"], "cuda", budget, fake_runner(clock2, takes, ran2), clock2
    )
    assert ran2 == ["a", "c"] and records["b"]["status"] == "skipped"


def test_the_flexible_stage_takes_what_is_left_down_to_its_minimum():
    f = STAGES["f"]
    for left, expect_run in ((f.flexible_min_s + 5, True), (f.flexible_min_s - 5, False)):
        clock, ran = FakeClock(), []
        records = plan.schedule(["f"], "cuda", left, fake_runner(clock, {"f": 1e9}, ran), clock)
        assert (ran == ["f"]) == expect_run
        if expect_run:
            assert records["f"]["cap_s"] == left and records["f"]["seconds"] == left
        else:
            assert records["f"]["status"] == "skipped"


def test_cpu_caps_apply_on_a_cpu():
    clock, ran = FakeClock(), []
    records = plan.schedule(
        ["a"], "cpu", STAGES["a"].cpu_cap_s, fake_runner(clock, {"a": 1}, ran), clock
    )
    assert records["a"]["figures"]["cap"] == STAGES["a"].cpu_cap_s < STAGES["a"].gpu_cap_s


def test_stages_option():
    assert plan.parse_stages("c,a") == ["c", "a"]
    assert plan.parse_stages("aba") == ["a", "b"]
    assert plan.parse_stages(" ") is None
    with pytest.raises(ValueError, match="unknown stage x"):
        plan.parse_stages("ax")
