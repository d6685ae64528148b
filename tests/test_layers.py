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


def test_every_script_registers_the_rules_before_anything_checks_a_configuration():
    """Nothing loads the rules by name: lib/cli.py, which every script imports,
    imports lib/rules.py. Before that, a configuration check and a trainer's
    start are refused rather than run with rules or analyses missing; after it,
    every owner's rules and analyses are there, and neither torch nor numpy is
    loaded (a configuration check loads what it checks; commands stay fast)."""
    code = (
        "import sys\n"
        "from lib.config.rules import OwnersMissing\n"
        "from lib.config.run_config import run_config_from_defaults\n"
        "from lib.train import hooks\n"
        "for attempt in (lambda: run_config_from_defaults({}), lambda: hooks.start(None)):\n"
        "    try:\n"
        "        attempt()\n"
        "    except OwnersMissing as err:\n"
        "        print('refused:', 'import lib.rules' in str(err))\n"
        "import lib.cli\n"
        "from lib.config.rules import RULES\n"
        "run = run_config_from_defaults({'GPT2_MAX_ITERS': '100'})\n"
        "print(sorted({r.__module__ for r in RULES}))\n"
        "print([f'{a.__module__}.{a.__name__}' for a in hooks.ANALYSES])\n"
        "print([m for m in ('torch', 'numpy') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused: True",
        "refused: True",
        str(
            sorted(
                [
                    "lib.bench.inference",
                    "lib.eval.rules",
                    "lib.model.rules",
                    "lib.optim.rules",
                    "lib.prune.rules",
                    "lib.train.rules",
                    "lib.tune.rules",
                ]
            )
        ),
        str(
            [
                "lib.bench.rules.InferenceFigures",
                "lib.eval.rules.samples",
                "lib.eval.rules.KvCircuit",
            ]
        ),
        "[]",
    ]


def test_every_script_that_imports_the_library_ends_through_lib_cli():
    """lib/cli.py is where a script gets every package's rules; a script that
    reads no configuration is named here with its reason."""
    reads_no_configuration = {
        "watch.py": "renders the matrix's status files",
        "slowest_tests.py": "reads pytest's junit file",
        "stochastic_margins.py": "runs pytest and reads its observations",
        # These two run before kconfiglib is installed from .whl/; each stage's
        # worker imports lib/rules.py itself (lib/bench/gpucheck/worker.py START).
        "gpu_check.py": "plans and drives the stages",
        "gpu_wheels.py": "gathers wheels",
    }
    missing = []
    for script in sorted((ROOT / "scripts").glob("*.py")):
        tree = ast.parse(script.read_text())
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        uses_lib = any(str(name).split(".")[0] in ("lib", "gpt2", "hamt") for name in imported)
        if uses_lib and "lib.cli" not in imported and script.name not in reads_no_configuration:
            missing.append(script.name)
    assert missing == []


def test_a_dry_run_and_a_users_error_start_without_torch():
    """scripts/train.py imports torch only to train: `make DRY_RUN=1` and a
    configuration error answer in about a second (torch's import is seconds)."""
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('train_script', 'scripts/train.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
