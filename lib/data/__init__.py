"""Data: datasets -> tokens on disk (prepare) -> random batches (lib/data/loader.py's
BatchLoader, imported from there: it needs torch, and this package is read on
every configuration check, lib/data/vocab.py)."""
from lib.data.corpus import dataset_dir_name, is_prepared, load_meta, prepare
from lib.data.sources import DATASETS, DataError
from lib.data.tokenizers import TOKENIZERS, Tokenizer, build_tokenizer, tokenizer_from_meta

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
