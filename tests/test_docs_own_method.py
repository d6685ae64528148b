"""docs/bring-your-own-method.md does what it says: its optimizer file is under 30
lines, and every command the page shows works with that file beside the Makefile
(in-process here: loaded, planned, estimated and built; the slow test runs them
with make in a scratch copy and reads the run's record)."""

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
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)
from tests.test_docs import FENCE, ROOT, make_commands

PAGE = ROOT / "docs" / "bring-your-own-method.md"
# The configuration the page's commands start from (its `make defconfig-<name>` line).
DEFAULT = re.search(r"^make defconfig-(\S+)$", PAGE.read_text(), re.M).group(1)


def user_file() -> str:
    """The page's Python block: the file the user writes."""
    block = next(
        b.group(0) for b in FENCE.finditer(PAGE.read_text()) if b.group(0).startswith("```python")
    )
    return "\n".join(block.splitlines()[1:-1]) + "\n"


def shown() -> list[list[str]]:
    """The page's make commands that use the file (after its defconfig line)."""
    out = []
    for block in FENCE.finditer(PAGE.read_text()):
        for line in block.group(0).splitlines()[1:-1]:
            out += [w for w in make_commands(line) if "my_lion:" in " ".join(w)]
    return out


@pytest.fixture
def my_lion(tmp_path, monkeypatch):
    (tmp_path / "my_lion.py").write_text(user_file())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_lion", raising=False)
    config = tmp_path / ".config"
    write_outputs(load_valid(ROOT / "defconfigs" / DEFAULT), config, tmp_path / "config.py")
    yield config
    sys.modules.pop("my_lion", None)


def test_the_file_is_under_30_lines_and_the_page_shows_each_command():
    lines = [line for line in user_file().splitlines() if line.strip()]
    assert 10 < len(lines) < 30, len(lines)
    targets = [next((w for w in words if "=" not in w), "") for words in shown()]
    assert targets == ["", "test-matrix-dry-run", "estimate", "tune"], targets


def test_each_command_on_the_page_loads_plans_prices_and_trains(my_lion):
    train, matrix, estimate, tune = shown()
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
def test_the_pages_commands_run_with_make_and_record_the_file(project):  # noqa: F811
    (project / "my_lion.py").write_text(user_file())
    assert make(project, f"defconfig-{DEFAULT}").returncode == 0
    for words in shown():
        target = next((w for w in words if "=" not in w), "")
        extra = {"": ["SCALE_ITERS=20", "YES=1"], "tune": ["TUNE_TRIALS=2"]}.get(target, [])
        done = make(project, *words, *extra)
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
    assert done.returncode == 0 and "| custom | none |" in done.stdout, done.stdout[-1500:]
