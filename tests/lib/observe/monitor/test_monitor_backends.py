"""Monitor backends: the process for real, NVML through a fake pynvml, rocm-smi
through a fake executable on PATH."""

from __future__ import annotations

import json
import os
import sys
import time
import types

import pytest
import torch

from lib.observe.monitor import GPU_FILE, build_monitor, physical_index
from lib.observe.monitor.nvml import NvmlSampler
from lib.observe.monitor.proc import ProcSampler
from lib.observe.monitor.recorder import MonitorUnavailable
from lib.observe.monitor.rocm import RocmSmiSampler, parse_rocm_smi


def test_proc_sampler_reads_real_rss_and_cpu_use():
    started = time.monotonic()
    sampler = ProcSampler()
    ballast = bytearray(64 * 2**20)  # 64 MiB, touched so it is resident
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    end = os.times()[0] + 0.3
    while os.times()[0] < end:  # at least 0.3 s of CPU
        pass
    sample = sampler.sample()
    wall = time.monotonic() - started  # at least the sampler's own interval
    statm_pages = int(open("/proc/self/statm").read().split()[1])
    assert sample["rss_mb"] >= 64
    assert abs(sample["rss_mb"] - statm_pages * os.sysconf("SC_PAGE_SIZE") / 2**20) < 16
    # 0.3 s of CPU over at most `wall` seconds, however loaded the machine is
    assert 100 * 0.3 / wall <= sample["cpu_percent"] < 100 * (os.cpu_count() or 1) + 10
    del ballast


class FakeNVMLError(Exception):
    pass


def fake_pynvml(power_supported: bool = True, init_fails: bool = False) -> types.ModuleType:
    """A pynvml stand-in: GPU 0 at 87 % then 93 %, 2048 MiB used, 250.5 W, 61 C."""
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.NVML_TEMPERATURE_GPU = 0
    m.calls = {"init": 0, "shutdown": 0}
    utils = iter([87, 93, 93, 93, 93, 93, 93, 93])

    def init():
        if init_fails:
            raise FakeNVMLError("Driver Not Loaded")
        m.calls["init"] += 1

    def power(h):
        if not power_supported:
            raise FakeNVMLError("Not Supported")
        return 250_500  # milliwatts

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.__setitem__("shutdown", m.calls["shutdown"] + 1)
    m.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    m.nvmlDeviceGetHandleByUUID = lambda u: (_ for _ in ()).throw(FakeNVMLError("Not Found"))
    m.nvmlDeviceGetName = lambda h: b"NVIDIA Fake 80GB"
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=next(utils), memory=10)
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2048 * 2**20, total=80 * 2**30)
    m.nvmlDeviceGetPowerUsage = power
    m.nvmlDeviceGetTemperature = lambda h, sensor: 61
    return m


def test_nvml_sampler_reads_the_gpu_in_its_units(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sampler = NvmlSampler(0, uuid="GPU-not-known")  # unknown UUID: falls back to the index
    assert sampler.device_name == "NVIDIA Fake 80GB"
    assert sampler.sample() == {
        "gpu_util": 87.0,
        "memory_used_mb": 2048.0,
        "power_w": 250.5,
        "temperature_c": 61.0,
    }
    sampler.close()
    assert fake.calls == {"init": 1, "shutdown": 1}


def test_nvml_leaves_out_readings_the_gpu_does_not_support(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(power_supported=False))
    assert "power_w" not in NvmlSampler(0).sample()


def test_nvml_without_a_driver_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    with pytest.raises(MonitorUnavailable, match="Driver Not Loaded"):
        NvmlSampler(0)


def test_gpu_run_writes_gpu_stats_json_with_mean_and_max(monkeypatch, tmp_path, tiny_run):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None)
    monitor = build_monitor(
        tiny_run(MONITOR_INTERVAL_S="3600").monitor,
        torch.device("cuda"),
        tmp_path,
        log=lambda _: None,
    )
    monitor.start()  # one sample now (87 %), one at stop (93 %)
    monitor.stop()
    stats = json.loads((tmp_path / GPU_FILE).read_text())
    assert stats["backend"] == "nvml" and stats["device_name"] == "NVIDIA Fake 80GB"
    assert [s["gpu_util"] for s in stats["samples"]] == [87.0, 93.0]
    summary = monitor.summary()
    assert summary["gpu_util_mean"] == 90.0 and summary["gpu_util_max"] == 93.0
    assert summary["power_w_max"] == 250.5 and summary["temperature_c_max"] == 61.0
    assert summary["memory_used_mb_mean"] == 2048.0 and summary["rss_mb_max"] > 0
    assert summary["file"] == GPU_FILE and summary["samples"] == 2


def test_gpu_without_nvml_falls_back_to_the_process(monkeypatch, tmp_path, tiny_run):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None)
    lines: list[str] = []
    monitor = build_monitor(tiny_run().monitor, torch.device("cuda"), tmp_path, log=lines.append)
    assert monitor.backend == "proc" and monitor.path.name == "cpu_stats.json"
    assert "no GPU readings" in lines[0] and "Driver Not Loaded" in lines[0]


ROCM_JSON = {
    "card1": {
        "GPU use (%)": "42",
        "Average Graphics Package Power (W)": "180.0",
        "Temperature (Sensor edge) (C)": "55.0",
        "Temperature (Sensor junction) (C)": "70.0",
        "VRAM Total Memory (B)": str(64 * 2**30),
        "VRAM Total Used Memory (B)": str(3 * 2**30),
    }
}


def test_rocm_smi_output_is_parsed_by_pattern():
    assert parse_rocm_smi(json.dumps(ROCM_JSON), 1) == {
        "gpu_util": 42.0,
        "memory_used_mb": 3072.0,
        "power_w": 180.0,
        "temperature_c": 55.0,
    }
    newer = {
        "card0": {
            "GPU use (%)": "N/A",
            "Current Socket Graphics Package Power (W)": "300.0",
            "Temperature (Sensor junction) (C)": "80.0",
        }
    }
    assert parse_rocm_smi(json.dumps(newer), 0) == {"power_w": 300.0, "temperature_c": 80.0}


def test_rocm_smi_sampler_runs_the_command(tmp_path, monkeypatch):
    tool = tmp_path / "rocm-smi"
    tool.write_text(
        f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\ncat <<'EOF'\n{json.dumps(ROCM_JSON)}\nEOF\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sampler = RocmSmiSampler(1)
    assert sampler.sample()["gpu_util"] == 42.0
    assert (tmp_path / "args").read_text().split()[:2] == ["-d", "1"]


def test_missing_rocm_smi_is_unavailable(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MonitorUnavailable, match="not on PATH"):
        RocmSmiSampler(0)


def test_visible_devices_map_to_the_driver_numbering(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert physical_index(1, "CUDA_VISIBLE_DEVICES") == 5
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert physical_index(1, "CUDA_VISIBLE_DEVICES") == 1
