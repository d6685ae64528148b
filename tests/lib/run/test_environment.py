"""The run record's "environment": what this process really runs on."""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata

import numpy as np
import torch

from lib.run import environment as env
from lib.run.metrics import RunMetrics


def test_environment_names_this_python_torch_and_packages():
    record = env.environment()
    json.dumps(record)  # goes into metrics.json as it is
    assert record["python"].startswith(platform.python_version())
    assert record["torch"] == torch.__version__
    assert record["torch_cuda"] == torch.version.cuda
    assert record["torch_hip"] == getattr(torch.version, "hip", None)
    packages = record["packages"]
    assert packages["numpy"] == np.__version__
    assert packages["kconfiglib"] == metadata.version("kconfiglib")
    assert packages["transformers"] == metadata.version("transformers")
    assert set(env.PACKAGES) == set(packages)
    assert record["cpu"] and record["cpu_count"] >= 1
    assert record["platform"] == platform.platform()
    if torch.cuda.is_available():
        assert [g["name"] for g in record["gpus"]] == [
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
        ]
    else:
        assert record["gpus"] == [] and record["gpu_driver"] is None


def test_a_package_that_is_not_installed_is_null_and_aliases_are_tried(monkeypatch):
    installed = {"pytorch-triton-rocm": "3.1.0", "numpy": "2.0.0"}

    def version(name):
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(env.metadata, "version", version)
    assert env.package_versions(("numpy", "triton", "fla-core")) == {
        "numpy": "2.0.0",
        "triton": "3.1.0",
        "fla-core": None,
    }


def test_cpu_name_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"
    )
    assert env.cpu_name(info) == "AMD EPYC 7B13 64-Core Processor"
    assert env.cpu_vendor(info) == "AuthenticAMD"
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nModel\t: Raspberry Pi 4 Model B\n")
    assert env.cpu_name(info) == "Raspberry Pi 4 Model B"
    assert env.cpu_vendor(info) is None  # ARM: no CPUID vendor string
    assert env.cpu_name(tmp_path / "absent")  # falls back to the platform module
    assert env.cpu_vendor(tmp_path / "absent") is None


def test_metrics_json_carries_the_environment(tmp_path):
    metrics = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 64})
    metrics.write(metrics.summary("running", 0, 0))
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["environment"]["torch"] == torch.__version__
    assert written["environment"]["python"].startswith(".".join(map(str, sys.version_info[:3])))
