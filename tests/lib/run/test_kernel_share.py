"""metrics.json's page_faults_per_iter and system_ms_per_iter (lib/run/metrics.py):
what the kernel did during the timed steps, averaged over them like ms_per_iter."""

from __future__ import annotations

import mmap

import pytest

from lib.run.metrics import WARMUP_STEPS, KernelShare, RunMetrics


def test_touching_fresh_pages_counts_one_fault_each():
    pages = 2048
    area = mmap.mmap(-1, pages * mmap.PAGESIZE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # one fault per small page, whatever THP is set to
        area.madvise(mmap.MADV_NOHUGEPAGE)
    before = KernelShare.now()
    for page in range(pages):
        area[page * mmap.PAGESIZE] = 1
    share = KernelShare.since(before)
    area.close()
    assert pages <= share.page_faults < pages + 200  # the loop's own few besides
    assert share.system_s >= 0


def test_the_timed_steps_average_and_survive_a_resume(tmp_path):
    metrics = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 8})
    assert metrics.summary("running", 0, 0)["page_faults_per_iter"] is None
    for step in range(WARMUP_STEPS + 4):  # the warm-up steps are not counted
        faults = 10_000 if step < WARMUP_STEPS else 100 * step
        metrics.record_step(0.01, 8, KernelShare(faults, 0.002))
    summary = metrics.summary("running", WARMUP_STEPS + 4, 0)
    timed = [100 * s for s in range(WARMUP_STEPS, WARMUP_STEPS + 4)]
    assert summary["page_faults_per_iter"] == sum(timed) / 4
    assert summary["system_ms_per_iter"] == pytest.approx(2.0)
    resumed = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 8})
    resumed.load_state_dict(metrics.state_dict())
    for _ in range(WARMUP_STEPS + 1):  # the new segment's warm-up again, then one step
        resumed.record_step(0.01, 8, KernelShare(400, 0.004))
    again = resumed.summary("running", 0, 0)
    assert again["page_faults_per_iter"] == (sum(timed) + 400) / 5
    assert again["system_ms_per_iter"] == pytest.approx((4 * 2 + 4) / 5)
