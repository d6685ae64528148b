"""Whether a run can train here, by `make estimate`'s figures (lib/estimate/verdict.py),
and what `make` and `make prepare` say about a GPU configuration on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config.run_config import load_run_config, load_valid, write_outputs
from lib.estimate.memory import GIB
from lib.estimate.verdict import DAY_S, Verdict, here
from lib.hardware.devices import DeviceInfo
from tests.scripts.conftest import make

ROOT = Path(__file__).resolve().parents[2]
# A 4-thread CPU with 16 GiB: fixed, so that no figure depends on this host.
CPU = DeviceInfo("cpu", "CPU (4 cores, 4 threads)", 16 * GIB, True, None, "cpu", 4)


def _defconfig(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name / ".config"
    path.parent.mkdir()
    write_outputs(load_valid(ROOT / "defconfigs" / name), path, path.parent / "config.py")
    return path


def test_a_gpu_configuration_on_a_cpu_is_refused_with_estimates_figures(tmp_path):
    run = load_run_config(["DEVICE=cpu"], _defconfig(tmp_path, "gpt2-vanilla-baseline"))
    verdict = here(run, CPU)
    assert verdict.needs_bytes > 16 * GIB and verdict.seconds is not None
    assert verdict.seconds > 30 * DAY_S  # 50,000 steps of 124M on 4 threads
    problem = verdict.problem()
    assert problem is not None
    assert problem.startswith(
        "this run does not fit in memory and would take days on this CPU: `make estimate` "
        f"says it needs {verdict.needs_bytes / GIB:.1f} GiB of the 16.0 GiB here"
    )
    assert "meant for a GPU" in problem and "make defconfig-gpt2-tiny-shakespeare" in problem
    assert "train it anyway with YES=1" in problem


def test_the_default_trains_here(tmp_path):
    run = load_run_config([], _defconfig(tmp_path, "gpt2-tiny-shakespeare"))
    verdict = here(run, CPU)
    assert verdict.fits and not verdict.days and verdict.problem() is None


@pytest.mark.parametrize(
    "needs, has, seconds, said",
    [
        (2 * GIB, 4 * GIB, DAY_S + 1, "would take days on this CPU"),
        (8 * GIB, 4 * GIB, 60.0, "does not fit in memory on this CPU"),
        (2 * GIB, 4 * GIB, DAY_S - 1, None),
        (2 * GIB, None, None, None),  # unknown memory and speed: nothing to refuse on
    ],
)
def test_each_reason_is_named(needs, has, seconds, said):
    problem = Verdict("CPU RAM (here)", "cpu", needs, has, seconds).problem()
    assert (problem is None) if said is None else (said in problem)


def test_make_prepare_offline_says_how_to_bring_the_data_and_what_runs_here(project):
    assert make(project, "defconfig-gpt2-vanilla-baseline").returncode == 0
    out = make(project, "prepare", "DEVICE=cpu", env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode != 0 and "Traceback" not in out.stderr
    said = " ".join(out.stderr.split())
    assert "comes from the Hugging Face hub" in said
    assert "This is a GPU configuration: on this CPU `make estimate` says it needs" in said
    assert "(`make prepare` with this .config writes data/finewebedu-gpt2/)" in said
    assert 'point DATA_DIR at the folder that holds it (SET="DATA_DIR=<folder>")' in said
    assert "`make defconfig-gpt2-tiny-shakespeare && make`" in said
    assert not (project / "results").exists()  # and it leaves nothing behind
    assert not (project / "data").exists() or not any((project / "data").iterdir())


@pytest.mark.slow
def test_make_refuses_a_run_that_cannot_train_here_before_a_run_folder(project):
    # GPT-2 124M for 50,000 steps on a small local text: prepared in a second, then refused
    (project / "corpus.txt").write_text("ROMEO: the moon is bright tonight.\n" * 2000)
    assert make(project, "defconfig-gpt2-vanilla-baseline").returncode == 0
    data = "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y"
    out = make(project, "DEVICE=cpu", "COMPILE=n", data)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "error: this run " in out.stderr and "on this CPU: `make estimate` says" in out.stderr
    assert not (project / "results").exists() or not any((project / "results").iterdir())
