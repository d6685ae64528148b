"""The layers point one way (pyproject.toml's [tool.importlinter] contract) with
no way around them: every module under lib/ sits in a layer, packages sharing
a layer are independent, an import by name is one of the registries listed in
[tool.kconfig-llm.dynamic-imports], and the rules and analyses that live with
the packages owning them still run."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
from importlinter import configuration
from importlinter.application.use_cases import read_user_options
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DYNAMIC = PYPROJECT["tool"]["kconfig-llm"]["dynamic-imports"]
ROOTS = ("lib", "gpt2", "hamt")


def _contract() -> tuple[LayersContract, list[str]]:
    configuration.configure()
    options = read_user_options(str(ROOT / "pyproject.toml"))
    (fields,) = options.contracts_options
    contract = LayersContract(
        name=fields["name"], session_options=options.session_options, contract_options=fields
    )
    return contract, options.session_options["root_packages"]


def _layers() -> list[list[str]]:
    (fields,) = PYPROJECT["tool"]["importlinter"]["contracts"]
    return [
        [name.strip() for name in layer.replace(":", "|").split("|")] for layer in fields["layers"]
    ]


def outside_layers(modules: set[str]) -> list[str]:
    """The modules under lib/ that no layer holds (the root package lib/__init__.py,
    which only quiets third-party import noise, belongs to none)."""
    packages = [name for layer in _layers() for name in layer]
    return sorted(
        m
        for m in modules
        if m.startswith("lib.") and not any(m == p or m.startswith(p + ".") for p in packages)
    )


def imports_by_name(path: Path) -> list[str]:
    """Where the file imports a module by name (importlib.import_module, __import__,
    importlib.util.spec_from_file_location) that is, or may be, one of ours: a
    literal name outside lib, gpt2 and hamt is a third-party module and fine."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in {"import_module", "__import__"}:
            continue
        arg = node.args[0] if node.args else None
        if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] not in ROOTS:
            continue
        found.append(f"{path}:{node.lineno}")
    return found


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_imports_a_layer_above_its_own():
    contract, roots = _contract()
    graph = grimp.build_graph(*roots, cache_dir=None)
    check = contract.check(graph, verbose=False)
    assert check.kept, (
        "an import climbs the layers; `.venv/bin/lint-imports` names it:\n"
        + json.dumps(check.metadata, default=str)[:2000]
    )
    # The contract is no formality: one upward import anywhere breaks it, from a
    # module that exists or a scratch one added to a package.
    graph.add_import(importer="lib.config.rules", imported="lib.train.rules")
    assert not contract.check(graph, verbose=False).kept
    graph = grimp.build_graph(*roots, cache_dir=None)
    graph.add_module("lib.model.scratch")
    graph.add_import(importer="lib.model.scratch", imported="lib.train.trainer")
    assert not contract.check(graph, verbose=False).kept
    # The training loop imports no bench or evaluation: their analyses are hooks.
    graph = grimp.build_graph(*roots, cache_dir=None)
    graph.add_import(importer="lib.train.trainer", imported="lib.bench.inference")
    assert not contract.check(graph, verbose=False).kept


def test_packages_sharing_a_layer_are_independent():
    (fields,) = PYPROJECT["tool"]["importlinter"]["contracts"]
    assert [layer for layer in fields["layers"] if ":" in layer] == []
    contract, roots = _contract()
    graph = grimp.build_graph(*roots, cache_dir=None)
    graph.add_import(importer="lib.bench.step", imported="lib.eval.perplexity")
    assert not contract.check(graph, verbose=False).kept


def test_every_module_under_lib_is_in_a_layer():
    graph = grimp.build_graph(*ROOTS, cache_dir=None)
    assert outside_layers(set(graph.modules)) == []
    assert outside_layers(set(graph.modules) | {"lib.scratch", "lib.newpkg.mod"}) == [
        "lib.newpkg.mod",
        "lib.scratch",
    ]


def test_no_import_by_name_but_the_listed_registries():
    found = {
        _module(path): imports_by_name(path)
        for top in ROOTS
        for path in sorted((ROOT / top).rglob("*.py"))
    }
    unlisted = [where for module, hits in found.items() if module not in DYNAMIC for where in hits]
    assert unlisted == [], "import by name outside the registries in pyproject.toml"
    # Each listed registry still imports by name (a stale entry is a loophole kept open).
    assert [m for m in DYNAMIC if not found.get(m)] == []


def test_a_scratch_import_by_name_is_caught(tmp_path):
    scratch = tmp_path / "scratch.py"
    scratch.write_text(
        "import importlib\n"
        "from importlib import import_module\n"
        "importlib.import_module('lib.train.trainer')\n"
        "import_module(NAME)\n"
        "__import__('gpt2.model')\n"
        "importlib.import_module('triton')\n"  # third-party: fine
    )
    assert [w.rsplit(":", 1)[1] for w in imports_by_name(scratch)] == ["3", "4", "5"]


def test_every_packages_rules_module_is_registered():
    import lib.rules

    found = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for top in ROOTS
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


def test_the_trainers_analyses_are_registered_by_their_owners():
    """The loop imports none of them: lib/bench and lib/eval register theirs
    (lib/train/hooks.py), in the order a run's end performs them."""
    code = (
        "import sys; from lib.config.rules import load_owners; "
        "from lib.train.hooks import ANALYSES; load_owners(); "
        "print([f'{a.__module__}.{a.__name__}' for a in ANALYSES], 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "['lib.bench.rules.InferenceFigures',",
        "'lib.eval.rules.samples',",
        "'lib.eval.rules.KvCircuit']",
        "False",
    ]
