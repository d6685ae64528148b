"""Data: datasets -> tokens on disk (prepare) -> random batches (lib/data/loader.py's
BatchLoader, imported from there: it needs torch).

This package is read on every configuration check (lib/data/vocab.py reads the
prepared vocabulary through lib/data/meta.py), so what needs numpy or the
tokenizers loads on first use: `from lib.data import prepare` imports
lib/data/corpus.py then, not before.
"""

from typing import TYPE_CHECKING, Any

from lib.data.meta import dataset_dir_name, is_prepared, load_meta
from lib.data.sources import DATASETS, DataError

if TYPE_CHECKING:
    from lib.data.corpus import prepare
    from lib.data.tokenizers import TOKENIZERS, Tokenizer, build_tokenizer, tokenizer_from_meta

# name -> the module that holds it, imported when the name is first asked for
_LAZY = {
    "prepare": "lib.data.corpus",
    "TOKENIZERS": "lib.data.tokenizers",
    "Tokenizer": "lib.data.tokenizers",
    "build_tokenizer": "lib.data.tokenizers",
    "tokenizer_from_meta": "lib.data.tokenizers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lib.data' has no attribute {name!r}")


__all__ = [
    "DATASETS",
    "TOKENIZERS",
    "DataError",
    "Tokenizer",
    "build_tokenizer",
    "dataset_dir_name",
    "is_prepared",
    "load_meta",
    "prepare",
    "tokenizer_from_meta",
]
