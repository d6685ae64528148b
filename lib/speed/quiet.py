"""Keep known, harmless import-time log lines of dependencies off the terminal.

Importing transformers imports torchao, which tries to load its CUDA
kernels (_C_cutlass_90a.abi3.so, _C_mxfp8...so) and logs "Failed to load
<file>" for each that cannot load. On a machine without CUDA none can, and
the line appeared on every command; nothing here uses those kernels (float8
training goes through torch._scaled_mm). With CUDA present the same line may
mean a broken install, so it is dropped only when torch sees no CUDA device.

torchao 0.18 also registers two Enum types with torch's pytree, which torch
2.13 logs as deprecated ("... is an Enum subclass and is now natively
supported by torch.compile ..."), on any machine: a note to torchao's
authors, dropped too. Every other record of these loggers passes untouched.
"""

from __future__ import annotations

import logging
import re

_TORCHAO_KERNEL = re.compile(r"^Failed to load \S*torchao[/\\]_C[^/\\]*\.so\b")
_PYTREE_ENUM = re.compile(r"is an Enum subclass and is now natively supported by torch\.compile")


def _no_cuda() -> bool:
    import torch  # imported already: torchao imports it before logging

    return not torch.cuda.is_available()


class _ExpectedTorchaoKernels(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_TORCHAO_KERNEL.search(record.getMessage()) and _no_cuda())


class _PytreeEnumDeprecation(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _PYTREE_ENUM.search(record.getMessage())


def silence_expected_import_noise() -> None:
    """Install the filters (once per process; safe to call again). They sit on
    the loggers that emit the lines, so they work whoever configures logging."""
    for name, cls in (
        ("torchao", _ExpectedTorchaoKernels),
        ("torch.utils._pytree", _PytreeEnumDeprecation),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, cls) for f in logger.filters):
            logger.addFilter(cls())
