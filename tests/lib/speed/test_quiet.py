"""Importing our modules prints nothing of torchao's expected CPU-only kernel failures."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch

from lib.speed import quiet
from tests.conftest import ROOT


@pytest.mark.slow  # a fresh interpreter importing transformers; the filters are checked below
def test_importing_the_hf_modules_prints_nothing():
    # lib.model.remote.causal_lm imports transformers, which imports torchao.
    out = subprocess.run(
        [sys.executable, "-c", "import lib.model.remote.causal_lm, gpt2.hf"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Failed to load" not in out.stderr and "Enum subclass" not in out.stderr, out.stderr


KERNEL = "Failed to load /venv/lib/python3.11/site-packages/torchao/_C_cutlass_90a.abi3.so: oops"


@pytest.fixture
def torchao_log(caplog):
    quiet.silence_expected_import_noise()
    quiet.silence_expected_import_noise()  # a second call adds nothing
    assert len(logging.getLogger("torchao").filters) == 1
    caplog.set_level(logging.DEBUG)
    return logging.getLogger("torchao"), caplog


def test_kernel_failure_is_dropped_only_without_cuda(torchao_log, monkeypatch):
    log, caplog = torchao_log
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    log.warning(KERNEL)
    assert caplog.messages == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # there it may be a real fault
    log.warning(KERNEL)
    assert caplog.messages == [KERNEL]


def test_other_records_pass(torchao_log, monkeypatch):
    log, caplog = torchao_log
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    log.warning("Skipping import of cpp extensions due to incompatible torch version.")
    log.warning("Failed to load /elsewhere/libmine.so: a library that is not torchao's")
    logging.getLogger("torch.utils._pytree").warning("some other pytree message")
    logging.getLogger("torch.utils._pytree").warning(
        "<enum 'X'> is an Enum subclass and is now natively supported by torch.compile as an "
        "opaque value type. Calling register_constant() on Enum subclasses is deprecated"
    )
    assert caplog.messages == [
        "Skipping import of cpp extensions due to incompatible torch version.",
        "Failed to load /elsewhere/libmine.so: a library that is not torchao's",
        "some other pytree message",
    ]
