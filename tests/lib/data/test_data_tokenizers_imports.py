"""lib/data/tokenizers has no import cycle and no import hidden in a function.

The old tokenizer.py and bpe.py imported each other, bpe.py at module level
and tokenizer.py from inside its factory functions to dodge the cycle. These
tests keep the package a tree: each module imports first in a freshly
emptied interpreter, the static import graph of lib/data is acyclic (so any
import order works), and every import sits at module level.
"""
from __future__ import annotations

import ast
import graphlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "lib.data.tokenizers"
SUBMODULES = {"base", "bpe", "char", "documents", "gpt2"}


def _package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _modules() -> list[str]:
    found = {m.name for m in pkgutil.iter_modules([str(_package_dir())])}
    assert found == SUBMODULES  # a new module must be added here, so the tests see it
    return [PACKAGE] + [f"{PACKAGE}.{name}" for name in sorted(found)]


def import_graph(root: Path, package_dir: Path) -> dict[str, set[str]]:
    """module -> the modules under package_dir it imports at module level (by AST)."""
    files = {_module_name_under(root, p): p for p in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps: set[str] = set()
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def _module_name_under(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def nested_imports(path: Path) -> list[str]:
    """'file:line' of every import that is not a statement of the module body."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top]


def test_each_module_imports_first_in_a_fresh_interpreter():
    # Importing a submodule always runs the package's __init__ first (and
    # lib/data's), so the entry point is the one order that can vary at run
    # time; the acyclic graph below covers every other. One interpreter, all
    # of lib dropped from sys.modules before each entry, so our code runs
    # afresh each time (only third-party modules such as torch stay cached).
    code = (
        "import importlib, sys\n"
        f"for mod in {_modules()!r}:\n"
        "    for m in [m for m in sys.modules if m == 'lib' or m.startswith('lib.')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(mod)\n"
        "    print(mod)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == _modules()


def _old_package(root, tokenizer_source: str, bpe_source: str):
    """The old two-module shape, tokenizer.py and bpe.py importing each other."""
    pkg = root / "old"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tokenizer.py").write_text(tokenizer_source)
    (pkg / "bpe.py").write_text(bpe_source)
    return pkg


def test_the_old_cycle_fails_as_an_entry_point(tmp_path):
    # The same check on the old shape fails: bpe imported first needs a name
    # from a module that is still importing bpe.
    _old_package(tmp_path, "from old.bpe import train\n\nclass Tokenizer:\n    pass\n",
                 "from old.tokenizer import Tokenizer\n\ndef train():\n    pass\n")
    out = subprocess.run([sys.executable, "-c", "import old.bpe"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 1 and "circular import" in out.stderr


def test_the_data_import_graph_has_no_cycle():
    graph = import_graph(ROOT, ROOT / "lib" / "data")
    assert graph[PACKAGE] == {f"{PACKAGE}.{m}" for m in ("base", "bpe", "char", "gpt2")}
    assert graph[f"{PACKAGE}.bpe"] == {f"{PACKAGE}.base", "lib.data.sources"}
    assert "lib.data.tokenizers" in graph["lib.data.corpus"]
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle


def test_the_graph_check_finds_a_cycle(tmp_path):
    # The old shape: the factory imports bpe, bpe imports the factory's module.
    pkg = _old_package(tmp_path, "import os\nfrom old.bpe import BPETokenizer\n",
                       "from old.tokenizer import Tokenizer\n")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(import_graph(tmp_path, pkg)).prepare()


def test_no_module_of_the_package_imports_inside_a_function():
    files = sorted(_package_dir().glob("*.py"))
    assert {f.stem for f in files} == SUBMODULES | {"__init__"}
    assert [hit for f in files for hit in nested_imports(f)] == []


def test_the_scan_sees_an_import_in_a_function(tmp_path):
    path = tmp_path / "hidden.py"
    path.write_text("import os\n\n\ndef build():\n    from json import dumps\n    return dumps\n")
    assert nested_imports(path) == ["hidden.py:5"]
