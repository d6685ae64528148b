"""The embedded default's figures in the docs come from its recorded run and studies
(scripts/default_record.py), never typed by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.scripts.conftest import ROOT, make

TINY = (
    "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y "
    "GPT2_N_LAYER=1 GPT2_N_HEAD=2 GPT2_N_EMBD=32 GPT2_BLOCK_SIZE=32 BATCH_SIZE=4 "
    "GPT2_EVAL_INTERVAL=2 TRAIN_EVAL_ITERS=1 GPT2_WARMUP_STEPS=1"
)


def record(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/default_record.py", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_docs_show_what_the_recorded_run_and_studies_give():
    out = record(ROOT, "render", "--check")
    assert out.returncode == 0, out.stdout + out.stderr
    run = json.loads((ROOT / "docs/bench-data/default/run.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert f"{run['best_val_loss_per_char']:.3f} nats per character" in readme
    assert run["sample"].splitlines()[0] in readme and run["sample"].startswith("ROMEO:")
    settings = (ROOT / "defconfigs/gpt2-tiny-shakespeare").read_text().splitlines()
    # every recorded run (the slow host's too) trained the defconfig as it is
    for name in ("run.json", "run-slow.json"):
        path = ROOT / "docs/bench-data/default" / name
        if name == "run.json" or path.exists():
            shown = json.loads(path.read_text())["settings"]
            stale = [line for line in settings if line.startswith("CONFIG_") and line not in shown]
            assert not stale, f"{name} trained another default: {stale}"


@pytest.mark.slow
def test_record_run_keeps_a_runs_figures_and_sample_and_renders_them(project):
    for doc in ("README.md", "docs"):
        src = ROOT / doc
        copy = shutil.copytree if src.is_dir() else shutil.copy2
        copy(src, project / doc)
    (project / "corpus.txt").write_text("ROMEO: the moon is bright tonight.\n" * 400)
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    trained = make(project, "MAX_ITERS=4", "RUN_NAME=dflt", TINY)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    out = record(project, "record-run", "results/dflt")
    assert out.returncode == 0, out.stdout + out.stderr
    kept = json.loads((project / "docs/bench-data/default/run.json").read_text())
    metrics = json.loads((project / "results/dflt/metrics.json").read_text())
    for key in ("best_val_loss", "best_val_loss_per_char", "iterations", "params"):
        assert kept[key] == metrics[key], key
    assert kept["best_val_loss_per_char"] == kept["best_val_loss"]  # char: one per token
    sampled = make(project, "sample", "RUN=results/dflt", "PROMPT=ROMEO:")
    assert sampled.stdout.split("\n", 1)[1].rstrip("\n") == kept["sample"]
    readme = (project / "README.md").read_text()
    assert kept["sample"].splitlines()[0] in readme
    assert f"{kept['best_val_loss_per_char']:.3f} nats per character" in readme
    assert record(project, "render", "--check").returncode == 0  # rendered: nothing left
    missing = record(project, "record-run", "results/none")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "error:" in missing.stderr


def test_a_slow_hosts_time_is_given_beside_the_reference(monkeypatch):
    from lib.results.default_run import docs as dr

    run = json.loads((ROOT / "docs/bench-data/default/run.json").read_text())
    slow = {
        **run,
        "run_seconds": 444.4,
        "best_val_loss_per_char": 1.5421,
        "machine": {
            "host": "slowbox",
            "cpu": "AMD EPYC",
            "device": "CPU (2 cores, 2 threads)",
            "kernels": "AVX2",
            "cpu_percent_mean": 190.0,
        },
    }
    text = dr.quick_start(run, slow)
    assert (
        "; 7 min 24 s on CPU (2 cores, 2 threads) of AMD EPYC (slowbox, AVX2 kernels), to 1.542)"
        in text
    )
    assert dr.quick_start(run) == dr.quick_start(run, None)  # no slow record: the reference alone
    study = json.loads((ROOT / "docs/bench-data/default/study.json").read_text())
    assert (
        "; 1.5421, 7 min 24 s on CPU (2 cores, 2 threads) of AMD EPYC (slowbox, AVX2 kernels).\n"
        in dr.study_table(study, run, slow)
    )
    # the install's time: the slow host the record names, and a run on another host
    venv = json.loads((ROOT / "docs/bench-data/install/make_venv.json").read_text())
    fast = next(r for r in venv["runs"] if r.get("host"))
    assert f"fetches when uv is not on PATH, {fast['seconds']} s on a fast one;" in text
    assert f"; on {fast['host']}\n" in dr.install()
    assert "slowbox" not in dr.quick_start(run)


def test_record_studies_keeps_the_earlier_studies_and_replaces_one_given_again(
    monkeypatch, tmp_path
):
    from lib.results.default_run import record as dr

    monkeypatch.setattr(dr, "RECORD_DIR", tmp_path)  # absolute: from_root keeps it
    # The matrix folders are read by study_record; here each stands for its own path.
    monkeypatch.setattr(dr, "study_record", lambda label, path: {"label": label, "from": path.name})

    def recorded() -> list[tuple[str, str]]:
        studies = json.loads((tmp_path / dr.STUDY_FILE).read_text())["studies"]
        return [(x["label"], x["from"]) for x in studies]

    dr.record_studies(["1. vocabulary=m1", "2. shape=m2"])
    assert recorded() == [("1. vocabulary", "m1"), ("2. shape", "m2")]
    dr.record_studies(["3. length=m3"])  # the earlier folders may be gone by now
    assert recorded() == [("1. vocabulary", "m1"), ("2. shape", "m2"), ("3. length", "m3")]
    dr.record_studies(["2. shape=m2b", "4. steps=m4"])
    assert recorded() == [
        ("1. vocabulary", "m1"),
        ("2. shape", "m2b"),
        ("3. length", "m3"),
        ("4. steps", "m4"),
    ]
    with pytest.raises(dr.RecordError, match="LABEL=<matrix folder"):
        dr.record_studies(["no-folder"])
