"""The layers point one way (pyproject.toml's [tool.importlinter] contract):
lib/config imports nothing above it, and the rules across symbols that live
with the packages owning the symbols still run on every configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp
from importlinter import configuration
from importlinter.application.use_cases import read_user_options
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[1]


def _contract() -> tuple[LayersContract, list[str]]:
    configuration.configure()
    options = read_user_options(str(ROOT / "pyproject.toml"))
    (fields,) = options.contracts_options
    contract = LayersContract(
        name=fields["name"], session_options=options.session_options, contract_options=fields
    )
    return contract, options.session_options["root_packages"]


def test_no_module_imports_a_layer_above_its_own():
    contract, roots = _contract()
    graph = grimp.build_graph(*roots, cache_dir=None)
    check = contract.check(graph, verbose=False)
    assert check.kept, (
        "an import climbs the layers; `.venv/bin/lint-imports` names it:\n"
        + json.dumps(check.metadata, default=str)[:2000]
    )
    # The contract is no formality: one upward import anywhere breaks it.
    graph.add_import(importer="lib.config.rules", imported="lib.train.rules")
    assert not contract.check(graph, verbose=False).kept
    graph = grimp.build_graph(*roots, cache_dir=None)
    graph.add_import(importer="lib.run.rundir", imported="lib.model.registry")
    assert not contract.check(graph, verbose=False).kept


def test_every_packages_rules_module_is_registered():
    import lib.rules

    found = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for top in ("lib", "gpt2", "hamt")
        for p in (ROOT / top).rglob("rules.py")
    }
    found -= {"lib.config.rules", "lib.rules"}  # the registry, the list
    assert found == {m.__name__ for m in lib.rules.MODULES}


def test_loading_a_configuration_runs_every_owners_rules_without_torch(tmp_path):
    """No entry point imports the rules: the first check loads them by name,
    and nothing on that path imports torch (configuration commands stay fast)."""
    code = (
        "import sys; from lib.config.run_config import run_config_from_defaults; "
        "from lib.config.rules import RULES; "
        "run = run_config_from_defaults({'GPT2_MAX_ITERS': '100'}); "
        "print(sorted({r.__module__ for r in RULES}), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "['lib.bench.inference',",
        "'lib.eval.kv_circuit_settings',",
        "'lib.model.rules',",
        "'lib.optim.rules',",
        "'lib.prune.rules',",
        "'lib.train.rules',",
        "'lib.tune.rules']",
        "False",
    ]
