"""Every script that imports the project's packages ends through lib/cli.py's
run_script: the configuration layer then checks every package's rules (lib/rules.py,
registered by lib/cli.py), user errors print as one paragraph, and the exit skips the
interpreter's last garbage collection. scripts/watch.py once did not: every matrix
estimate failed on the unregistered rules and `make watch` showed no time left."""

from __future__ import annotations

import ast

from tests.conftest import ROOT


def _imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


# Run where kconfiglib is not installed yet (a GPU node before its wheels): each says
# so where it ends, with "Not lib.cli.run_script".
WITHOUT_KCONFIGLIB = {"gpu_check.py", "gpu_wheels.py"}


def test_every_script_that_imports_lib_ends_through_run_script():
    missing = []
    for path in sorted((ROOT / "scripts").glob("*.py")):
        if path.name in WITHOUT_KCONFIGLIB:
            assert "Not lib.cli.run_script" in path.read_text(), path.name
            continue
        tree = ast.parse(path.read_text())
        imports = _imports(tree)
        if not any(name == "lib" or name.startswith("lib.") for name in imports):
            continue
        calls = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        if "lib.cli" not in imports or "run_script" not in calls:
            missing.append(path.name)
    assert missing == []
