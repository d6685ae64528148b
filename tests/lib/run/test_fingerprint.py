"""A run's fingerprint: which symbols move it (over the real Kconfig tree, both
ways), the data part, the code part."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kconfiglib
import pytest

from lib.config.kconfig import open_tree
from lib.config.run_config import SYMBOL_NAMES, RunConfig, typed_values
from lib.data.corpus import prepare
from lib.run import fingerprint as fp
from lib.train.resolved import resolved_settings
from tests.lib.conftest import synthetic_corpus
from tests.test_symbols_read import _candidates

DATA, CODE = "d" * 64, {"commit": "c" * 40, "dirty": False}
# Configurations whose visible symbols differ: each symbol is varied in each.
CONFIGURATIONS = {
    "defaults": {},
    "adamwprune state pruning": {
        "OPTIMIZER_ADAMWPRUNE": "y",
        "PRUNING_MODE_SINGLE": "y",
        "PRUNING_METHOD_STATE": "y",
    },
    "hamt": {"MODEL_HAMT": "y"},
    "ra_mla attention": {"GPT2_ATTENTION_RA_MLA": "y"},
    "batch fitted at start": {"HYPER_PARAM_AUTO": "y"},
    "ddp on a two-node slurm job": {
        "GPT2_USE_DDP": "y",
        "MATRIX_EXECUTOR_SLURM": "y",
        "SLURM_NODES": "2",
        "SLURM_GPUS_PER_NODE": "4",
    },
    "samples, trackers, monitor": {"EVAL_SAMPLES": "y", "TRACKER_WANDB": "y", "MONITOR": "y"},
}
MATRIX_ONLY = {"OPTIMIZER_MODE": "multiple", "PRUNING_MODE": "multiple"}


def _tree(name: str) -> kconfiglib.Kconfig:
    kconf = open_tree()
    for sym, value in CONFIGURATIONS[name].items():
        kconf.syms[sym].set_value(value)
        assert kconf.syms[sym].str_value == value, f"{sym}={value} did not take"
    return kconf


def _run(kconf: kconfiglib.Kconfig) -> RunConfig:
    return RunConfig.from_values(typed_values(kconf))


def _is_run(run: RunConfig) -> bool:
    """Not a matrix: a multiple-selection mode hides the run's own choice."""
    return (
        not any(run.values.get(k) == v for k, v in MATRIX_ONLY.items())
        and not run.GPT2_ATTENTION_MULTIPLE
    )


def _variations(kconf: kconfiglib.Kconfig):
    """(name, set it, undo it) for each user-settable symbol and choice member."""
    for sym in kconf.unique_defined_syms:
        if (
            sym.choice is None
            and sym.visibility
            and sym.config_string
            and any(n.prompt for n in sym.nodes)
        ):
            for value in _candidates(sym)[:1]:
                saved = sym.user_value
                yield (
                    sym.name,
                    lambda s=sym, v=value: s.set_value(v) and s.str_value == v,
                    lambda s=sym, u=saved: s.unset_value() if u is None else s.set_value(u),
                )
    for choice in kconf.unique_choices:  # the dataset's has no name: its members name it
        if choice.visibility and choice.selection is not None:
            current = choice.selection
            for member in choice.syms:
                if member is not current and member.visibility:
                    yield (
                        choice.name or member.name,
                        lambda m=member: m.set_value(2) and m.tri_value == 2,
                        lambda c=current: c.set_value(2),
                    )


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_unlisted_symbols_move_the_hash_and_listed_ones_never_do(configuration):
    kconf = _tree(configuration)
    before = _run(kconf)
    base = fp.content_hash(before, DATA, CODE)
    moved, kept, wrong = set(), set(), []
    for name, change, undo in _variations(kconf):
        try:
            if not change():
                continue
            after = _run(kconf)
            if not _is_run(after):
                continue
            changed = fp.content_hash(after, DATA, CODE) != base
            expected = fp.is_hashed(name, before) or fp.world_size(after) != fp.world_size(before)
            (moved if changed else kept).add(name)
            if changed != expected:
                wrong.append(f"{name}: hash {'changed' if changed else 'unchanged'}")
        finally:
            undo()
        assert fp.content_hash(_run(kconf), DATA, CODE) == base  # restored
    assert wrong == []
    assert {"TRAIN_SEED", "LEARNING_RATE", "GPT2_MAX_ITERS", "DEVICE"} <= moved
    assert {"RUN_NAME", "RESULTS_DIR", "TRAIN_LOG_INTERVAL", "DATA_DIR", "MATRIX_REUSE"} <= kept
    if configuration == "batch fitted at start":
        assert {"BATCH_SIZE", "TARGET_EFFECTIVE_BATCH"} & kept == {"BATCH_SIZE"}
        assert "TARGET_EFFECTIVE_BATCH" in moved
    if configuration == "ddp on a two-node slurm job":  # 2 nodes x 4 GPUs, or GPT2_NUM_GPUS
        assert {"SLURM_GPUS_PER_NODE", "MATRIX_EXECUTOR"} <= moved
        assert {"SLURM_PARTITION", "SLURM_TIME_LIMIT"} <= kept
    if configuration == "samples, trackers, monitor":
        assert {"EVAL_SAMPLE_PROMPT", "TRACKER_WANDB_PROJECT", "MONITOR_INTERVAL_S"} <= kept


def test_the_data_and_code_parts_move_the_hash():
    run = _run(open_tree())
    assert fp.content_hash(run, DATA, CODE) == fp.content_hash(_run(open_tree()), DATA, CODE)
    assert fp.content_hash(run, "e" * 64, CODE) != fp.content_hash(run, DATA, CODE)
    for code in (
        {"commit": "b" * 40, "dirty": False},
        {"commit": "c" * 40, "dirty": True},
        {"version": "0.1.0", "source": "f" * 64},
    ):
        assert fp.content_hash(run, DATA, code) != fp.content_hash(run, DATA, CODE)


@pytest.mark.parametrize("name", ["defaults", "hamt"])
def test_unhashed_symbols_change_nothing_the_trainer_builds(name):
    """What lib/train/resolved.py says a run resolves to (model, optimizer, pruner,
    schedule, batch plan) is the same whatever the unhashed symbols say; only
    the run's folder and the data's folder (its content is fingerprinted) move."""
    kconf = _tree(name)

    def resolved() -> dict:
        settings = resolved_settings(_run(kconf))
        return {k: v for k, v in settings.items() if k not in ("run_dir", "data")}

    base, checked = resolved(), set()
    for sym_name, change, undo in _variations(kconf):
        if fp.is_hashed(sym_name, _run(kconf)):
            continue
        try:
            if change() and _is_run(_run(kconf)):
                assert resolved() == base, f"{sym_name} changes what the run trains"
                checked.add(sym_name)
        finally:
            undo()
    assert {"RUN_NAME", "RESULTS_DIR", "DATA_DIR", "BACKUP_DIR", "TRAIN_LOG_INTERVAL"} <= checked


def test_every_entry_names_symbols_that_exist():
    for entry, why in fp.UNHASHED.items():
        matched = [
            s for s in SYMBOL_NAMES if s == entry or (entry.endswith("_") and s.startswith(entry))
        ]
        assert matched and why, f"UNHASHED['{entry}'] matches no symbol"


def _prepare(corpus: Path, out: Path, cap: int = 0) -> Path:
    return prepare("custom", "char", out, custom_path=str(corpus), token_cap=cap)


def test_data_fingerprint_follows_the_content_not_the_place_or_the_time(tmp_path):
    corpus = synthetic_corpus(tmp_path / "corpus.txt", lines=300)
    first = fp.data_fingerprint(_prepare(corpus, tmp_path / "a"))
    assert first is not None and len(first) == 64
    assert fp.data_fingerprint(_prepare(corpus, tmp_path / "b")) == first  # another folder
    shutil.rmtree(tmp_path / "a")
    assert fp.data_fingerprint(tmp_path / "a") is None  # not prepared
    assert fp.data_fingerprint(_prepare(corpus, tmp_path / "a")) == first  # prepared again
    assert fp.data_fingerprint(_prepare(corpus, tmp_path / "c", cap=2000)) != first
    other = synthetic_corpus(tmp_path / "other.txt", lines=300, seed=1)
    assert fp.data_fingerprint(_prepare(other, tmp_path / "d")) != first
    val = tmp_path / "b" / "val.bin"  # a token changed in a file's tail
    data = bytearray(val.read_bytes())
    data[-1] ^= 1
    val.write_bytes(bytes(data))
    assert fp.data_fingerprint(tmp_path / "b") not in (None, first)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_code_version_is_the_commit_and_any_change_makes_it_dirty(tmp_path):
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "lib" / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("/results/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    clean = fp.code_version.__wrapped__(repo)
    assert clean == {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False}
    (repo / "results").mkdir()
    (repo / "results" / "run.txt").write_text("ignored output\n")
    assert fp.code_version.__wrapped__(repo) == clean
    (repo / "lib" / "b.py").write_text("y = 2\n")  # untracked
    assert fp.code_version.__wrapped__(repo)["dirty"] is True
    (repo / "lib" / "b.py").unlink()
    (repo / "lib" / "a.py").write_text("x = 2\n")  # modified
    assert fp.code_version.__wrapped__(repo) == {**clean, "dirty": True}


def test_outside_git_the_code_version_is_the_package_and_its_sources(tmp_path):
    tree = tmp_path / "tree"
    for folder in ("lib", "tests", "results"):
        (tree / folder).mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[project]\nname = "kconfig-llm"\nversion = "9.9"\n')
    (tree / "lib" / "a.py").write_text("x = 1\n")
    (tree / "Kconfig").write_text('mainmenu "m"\n')
    first = fp.code_version.__wrapped__(tree)
    assert first["version"] == "9.9" and len(first["source"]) == 64 and not fp.is_dirty(first)
    (tree / "tests" / "test_a.py").write_text("assert True\n")  # not training code
    (tree / "results" / "x.py").write_text("\n")
    (tree / "config.py").write_text("CONFIG = 1\n")  # generated from .config
    assert fp.code_version.__wrapped__(tree) == first
    (tree / "lib" / "a.py").write_text("x = 2\n")
    assert fp.code_version.__wrapped__(tree)["source"] != first["source"]
    (tree / "lib" / "a.py").write_text("x = 1\n")
    (tree / "Kconfig").write_text('mainmenu "n"\n')
    assert fp.code_version.__wrapped__(tree)["source"] != first["source"]
