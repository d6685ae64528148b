"""Prepare the configured dataset once (`make prepare`; a dependency of `make`)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.config.run_config import load_run_config  # noqa: E402
from lib.data import DataError, load_meta  # noqa: E402
from lib.data.prepared import data_dir, ensure_prepared  # noqa: E402


def main(args: list[str]) -> None:
    run = load_run_config(args)
    if run.flags["DRY_RUN"]:
        print(f"would use the dataset in {data_dir(run)}")
        return
    meta = load_meta(ensure_prepared(run))
    print(f"dataset {meta['dataset']} / {meta['tokenizer']['name']}: {meta['train_tokens']:,} "
          f"train and {meta['val_tokens']:,} val tokens in {data_dir(run)}")


if __name__ == "__main__":
    run_script(main, (DataError,))
