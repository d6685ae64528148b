"""Hardware profiles: known GPUs by the names drivers report, the CPU's figures."""

from __future__ import annotations

import pytest

from lib.hardware.devices import KNOWN_GPUS, cpu_info, match_profile, profile

GIB = 2**30


@pytest.mark.parametrize(
    "reported, memory, expected, peak",
    [
        ("NVIDIA H100 80GB HBM3", 79.2 * GIB, "H100 SXM 80GB", 989e12),
        ("NVIDIA H100 PCIe", 79.2 * GIB, "H100 PCIe 80GB", 756e12),
        ("NVIDIA H100 NVL", 93.6 * GIB, "H100 NVL 94GB", 835e12),
        ("NVIDIA H200", 139.8 * GIB, "H200 SXM 141GB", 989e12),
        ("NVIDIA H200 NVL", 139.8 * GIB, "H200 NVL 141GB", 835e12),
        ("NVIDIA A100-SXM4-40GB", 39.4 * GIB, "A100 40GB", 312e12),
        ("NVIDIA A100-SXM4-80GB", 79.2 * GIB, "A100 80GB", 312e12),
        ("NVIDIA A100 80GB PCIe", None, "A100 40GB", 312e12),  # without memory: the first row
        ("NVIDIA L4", 22.0 * GIB, "L4 24GB", 121e12),
        ("NVIDIA GeForce RTX 3060", 11.8 * GIB, "RTX 3060 12GB", 25.5e12),
        ("NVIDIA GeForce RTX 4070", 11.7 * GIB, "RTX 4070 12GB", 58e12),
        ("NVIDIA GeForce RTX 4080", 15.7 * GIB, "RTX 4080 16GB", 97e12),
        ("NVIDIA GeForce RTX 4090", 23.6 * GIB, "RTX 4090 24GB", 165e12),
        ("AMD Radeon PRO W7900", 47.9 * GIB, "W7900 48GB", 122e12),
    ],
)
def test_known_gpus_are_recognised_by_their_driver_names(reported, memory, expected, peak):
    found = match_profile(reported, None if memory is None else int(memory))
    assert found.name == expected and found.peak_flops_16bit == peak and found.bf16


def test_unknown_devices_have_no_profile_and_lookups_by_name():
    assert match_profile("Tesla K80", 12 * GIB) is None
    assert profile("h100").name == "H100 SXM 80GB" and profile("A100 80GB").memory_bytes > 80e9
    with pytest.raises(ValueError, match="unknown GPU 'K80'.*H100 SXM 80GB"):
        profile("K80")
    assert len({p.name for p in KNOWN_GPUS}) == len(KNOWN_GPUS) == 13


def test_geforce_peaks_are_all_fp32_accumulate_figures():
    """One accumulate mode for every GeForce row: per SM and clock, Ampere
    GA10x and Ada both do 512 dense FP16 FLOP with FP32 accumulate."""
    boost_ghz_sms = {
        "RTX 3060": (1.777, 28),
        "RTX 4070": (2.475, 46),
        "RTX 4080": (2.505, 76),
        "RTX 4090": (2.520, 128),
    }
    for stem, (ghz, sms) in boost_ghz_sms.items():
        peak = profile(stem).peak_flops_16bit
        assert peak == pytest.approx(512 * sms * ghz * 1e9, rel=0.02), stem
    assert all(p.source for p in KNOWN_GPUS)


def test_cpu_profile_counts_threads_and_memory():
    info = cpu_info()
    assert info.kind == "cpu" and info.cores >= 1 and info.memory_bytes > 2**30
    assert info.sustained_flops == 65e9 * info.cores and info.peak_flops_16bit is None
