"""Prepare the configured dataset once (`make prepare`; a dependency of `make`)."""

from __future__ import annotations

from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.data import DataError, load_meta
from lib.data.prepared import data_dir, ensure_prepared


def main(args: list[str]) -> None:
    run = load_run_config(args)
    if run.flags["DRY_RUN"]:
        print(f"would use the dataset in {data_dir(run)}")
        return
    meta = load_meta(ensure_prepared(run))
    print(
        f"dataset {meta['dataset']} / {meta['tokenizer']['name']}: {meta['train_tokens']:,} "
        f"train and {meta['val_tokens']:,} val tokens in {data_dir(run)}"
    )


if __name__ == "__main__":
    run_script(main, (DataError,))
