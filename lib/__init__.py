"""The shared library of every family and script."""

from lib.speed.quiet import silence_expected_import_noise

# Before any module here imports transformers (and through it torchao).
silence_expected_import_noise()
