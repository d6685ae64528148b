"""Prepare the configured dataset once (`make prepare`; a dependency of `make`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.data import DataError, load_meta
from lib.data.prepared import data_dir, ensure_prepared
from lib.data.sources import HubUnreachable
from lib.paths import ROOT

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def main(args: list[str]) -> None:
    run = load_run_config(args)
    if run.flags["DRY_RUN"]:
        print(f"would use the dataset in {data_dir(run.data)}")
        return
    try:
        meta = load_meta(ensure_prepared(run.data))
    except HubUnreachable as err:
        raise HubUnreachable(f"{err} {elsewhere(run)}") from None
    print(
        f"dataset {meta['dataset']} / {meta['tokenizer']['name']}: {meta['train_tokens']:,} "
        f"train and {meta['val_tokens']:,} val tokens in {data_dir(run.data)}"
    )


def elsewhere(run: RunConfig) -> str:
    """How to train a hub dataset's configuration without network here, and,
    when it is a GPU configuration on a CPU, what runs here instead."""
    from lib.estimate.verdict import TINY, here

    folder = data_dir(run.data)
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    advice = (
        f"To train it where there is no network (a GPU node), prepare it on a machine "
        f"with network (`make prepare` with this .config writes {shown}/) and copy that "
        f"folder to {shown}/ of the tree there, or point DATA_DIR at the folder that "
        f'holds it (SET="DATA_DIR=<folder>").'
    )
    verdict = here(run)
    if verdict.kind == "cpu" and verdict.problem():
        advice = (
            f"This is a GPU configuration: on this CPU `make estimate` says it "
            f"{verdict.figures()}. {advice} What trains on this CPU, offline, in minutes: "
            f"`make defconfig-{TINY} && make`."
        )
    return advice


if __name__ == "__main__":
    run_script(main, (DataError,))
