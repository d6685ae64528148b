"""docs/bring-your-own-method.md does what it says: its optimizer file and its
pruning score file are each under 30 lines, and every command the page shows
works with those files beside the Makefile (in-process here: loaded, planned,
estimated and built; the slow test runs them with make in a scratch copy and
reads the runs' records)."""

from __future__ import annotations

import hashlib
import json
import re
import sys

import pytest
import torch

from lib.config.run_config import load_run_config, load_valid, write_outputs
from lib.estimate.memory import model_counts, optimizer_bytes
from lib.matrix.grid import expand
from lib.model import registry as families
from lib.optim import build_optimizer, state_bytes
from lib.prune.build import build_pruner
from tests.scripts.conftest import SHORT_EVAL, make, project, with_set  # noqa: F401 (fixture)
from tests.test_docs import FENCE, ROOT, make_commands

PAGE = ROOT / "docs" / "bring-your-own-method.md"
# The configuration the page's commands start from (its `make defconfig-<name>` line).
DEFAULT = re.search(r"^make defconfig-(\S+)$", PAGE.read_text(), re.M).group(1)


def user_files() -> dict[str, str]:
    """The page's Python blocks: each file the user writes, by the name the text
    before it gives (as `my_lion.py`:)."""
    text, files = PAGE.read_text(), {}
    for block in FENCE.finditer(text):
        if block.group(0).startswith("```python"):
            name = re.findall(r"`(\w+\.py)`", text[: block.start()])[-1]
            files[name] = "\n".join(block.group(0).splitlines()[1:-1]) + "\n"
    return files


def shown(module: str) -> list[list[str]]:
    """The page's make commands that use `module` (after its defconfig line)."""
    out = []
    for block in FENCE.finditer(PAGE.read_text()):
        for line in block.group(0).splitlines()[1:-1]:
            out += [w for w in make_commands(line) if f"{module}:" in " ".join(w)]
    return out


def targets(module: str) -> list[str]:
    return [next((w for w in words if "=" not in w), "") for words in shown(module)]


@pytest.fixture
def mine(tmp_path, monkeypatch):
    """The page's files beside a .config of its defconfig."""
    for name, text in user_files().items():
        (tmp_path / name).write_text(text)
        monkeypatch.delitem(sys.modules, name[:-3], raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / ".config"
    write_outputs(load_valid(ROOT / "defconfigs" / DEFAULT), config, tmp_path / "config.py")
    yield config
    for name in user_files():
        sys.modules.pop(name[:-3], None)


def test_each_file_is_under_30_lines_and_the_page_shows_each_command():
    files = user_files()
    assert sorted(files) == ["my_lion.py", "my_score.py"]
    for name, text in files.items():
        lines = [line for line in text.splitlines() if line.strip()]
        assert 3 < len(lines) < 30, (name, len(lines))
    assert targets("my_lion") == ["", "test-matrix-dry-run", "estimate", "tune"]
    assert targets("my_score") == ["", "test-matrix-dry-run"]


def test_the_pruning_commands_load_plan_and_prune_by_the_users_score(mine):
    train, matrix = shown("my_score")
    run = load_run_config([w for w in train if "=" in w], mine)
    assert (run.PRUNING_METHOD, run.PRUNING_CUSTOM_SCORE) == ("custom", "my_score:taylor")
    family = families.family(run.MODEL)
    model = family.build(family.from_run_config(run, 65))
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    pruner = build_pruner(run.prune, model, opt, run.TRAIN_SEED)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    # the page's function, on AdamW's state: |w * exp_avg|, the lowest pruned
    scores = [(p.detach() * opt.state[p]["exp_avg"]).abs() for p in pruner.params]
    pruner._update(0.5)
    kept = torch.cat([s[m] for s, m in zip(scores, pruner.masks)])
    pruned = torch.cat([s[~m] for s, m in zip(scores, pruner.masks)])
    assert pruned.numel() and kept.min() >= pruned.max()

    _, planned = expand([w for w in matrix if "=" in w], mine)
    methods = [dict(r.overrides).get("PRUNING_METHOD") for r in planned]
    assert "magnitude" in methods and "custom" in methods, methods


def test_each_command_on_the_page_loads_plans_prices_and_trains(mine):
    my_lion = mine
    train, matrix, estimate, tune = shown("my_lion")
    overrides = [w for w in train if "=" in w]
    run = load_run_config(overrides, my_lion)
    assert (run.OPTIMIZER, run.LEARNING_RATE) == ("custom", 3e-4)
    family = families.family(run.MODEL)
    model = family.build(family.from_run_config(run, 65))
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    assert type(opt).__name__ == "Lion" and opt.defaults["betas"] == (0.9, 0.99)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    # "Lion is priced at one buffer per weight"
    priced = load_run_config([w for w in estimate if "=" in w], my_lion)
    counts = model_counts(priced, 65)[1]
    assert optimizer_bytes(priced, counts) == state_bytes(opt) == 4 * counts.params

    _, planned = expand([w for w in matrix if "=" in w and not w.startswith("DRY")], my_lion)
    assert [dict(r.overrides)["OPTIMIZER"] for r in planned] == ["adamw", "custom"]
    assert load_run_config([w for w in tune if "=" in w], my_lion).OPTIMIZER == "custom"


@pytest.mark.slow
def test_the_pages_commands_run_with_make_and_record_the_files(project):  # noqa: F811
    for name, text in user_files().items():
        (project / name).write_text(text)
    assert make(project, f"defconfig-{DEFAULT}").returncode == 0
    for words in shown("my_lion"):
        target = next((w for w in words if "=" not in w), "")
        extra = {"": ["SCALE_ITERS=20", "YES=1"], "tune": ["TUNE_TRIALS=2"]}.get(target, [])
        done = make(project, *(with_set(words, SHORT_EVAL) if target == "" else words), *extra)
        assert done.returncode == 0, (
            f"make {' '.join(words)}\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
        )
        if target == "estimate":
            assert "optimizer" in done.stdout.lower()
    run_dir = (project / "results" / "latest").resolve()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    mine = metrics["optimizer_custom"]
    assert mine["class"] == "my_lion:Lion" and mine["kwargs"] == {"betas": [0.9, 0.99]}
    assert mine["sha256"] == hashlib.sha256((project / "my_lion.py").read_bytes()).hexdigest()
    assert metrics["fingerprint"]["optimizer_source"]
    val = metrics["val_loss"]["values"]
    assert val[-1] < val[0], val
    done = make(project, "results")
    row = "| custom (my_lion:Lion) | none |"  # the class its record names
    assert done.returncode == 0 and row in done.stdout, done.stdout[-1500:]

    for words in shown("my_score"):
        trains = "test-matrix-dry-run" not in words
        extra = ["SCALE_ITERS=20", "YES=1"] if trains else []
        done = make(project, *(with_set(words, SHORT_EVAL) if trains else words), *extra)
        assert done.returncode == 0, f"{done.stdout[-1500:]}{done.stderr[-1500:]}"
    metrics = json.loads(((project / "results" / "latest").resolve() / "metrics.json").read_text())
    assert metrics["status"] == "completed", metrics.get("error")
    mine = metrics["pruning_custom"]
    assert mine["function"] == "my_score:taylor"
    assert mine["sha256"] == hashlib.sha256((project / "my_score.py").read_bytes()).hexdigest()
    assert metrics["fingerprint"]["pruning_source"]
    assert abs(metrics["sparsity"] - 0.5) < 1e-3, metrics["sparsity"]
