"""A hub that must not be contacted: offline mode, and datasets' cache empty."""

from __future__ import annotations

import pytest


@pytest.fixture
def offline_hub(monkeypatch) -> list[tuple]:
    """HF_HUB_OFFLINE=1; the hub's API fails the test if called, and
    datasets.load_dataset answers as it does offline for an uncached set.
    Returns the load_dataset calls made."""
    import datasets
    import huggingface_hub

    calls: list[tuple] = []

    def no_network(*args, **kwargs):
        raise AssertionError("the hub must not be contacted when HF_HUB_OFFLINE is set")

    def uncached(*args, **kwargs):
        calls.append(args)
        raise ConnectionError(f"Couldn't reach '{args[0]}' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", no_network)
    monkeypatch.setattr(datasets, "load_dataset", uncached)
    return calls
