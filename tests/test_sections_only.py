"""A component takes the settings sections it reads (run.data, run.train: lib/config/
symbols.py), not the whole RunConfig, so its signature says what it reads and a
hidden symbol reaches it at its off value. Only the modules below keep the whole
configuration; a parameter or field annotated RunConfig anywhere else in lib/, gpt2/
or hamt/ fails here (docs/development.md, "A setting")."""

from __future__ import annotations

import ast
from pathlib import Path

from lib.paths import ROOT

# Folder (ending in "/") or module -> why it holds the whole RunConfig.
WHOLE_RUN = {
    "lib/config/": "the configuration itself: loading, overrides, knlp translation",
    "lib/matrix/": "planner: expands one configuration into a matrix of runs",
    "lib/jobs/": "planner: schedules and packs whole runs",
    "lib/tune/": "planner: derives trial configurations from a base run",
    "lib/knlpcheck/": "compares whole configurations with knlp's",
    "lib/estimate/": "plans memory and time for a whole configuration",
    "lib/bench/": "builds whole trainings and models to time them",
    "lib/train/build.py": "trainer's composition root: hands each part its sections",
    "lib/train/parts.py": "trainer's composition root: hands each part its sections",
    "lib/train/trainer.py": "trainer's composition root",
    "lib/train/resolved.py": "records every resolved setting of the run",
    "lib/train/records.py": "metrics.json's records of the whole run",
    "lib/train/naming.py": "the run id names the whole configuration",
    "lib/train/hooks.py": "RunContext: an analysis plugin picks its own sections",
    "lib/run/record.py": "metrics.json's static record of the whole configuration",
    "lib/run/fingerprint.py": "hashes every symbol",
    "lib/model/registry.py": "a family reads its own symbols through the registry",
    "gpt2/__init__.py": "a family reads its own symbols through the registry",
    "hamt/__init__.py": "a family reads its own symbols through the registry",
}


def _rules_module(path: str) -> bool:
    """lib/<package>/rules.py: a load-time rule sees the whole configuration
    (rules across packages; lib/config/rules.py's Rule)."""
    return path.endswith("/rules.py")


def _allowed(path: str) -> bool:
    return _rules_module(path) or any(
        path.startswith(key) if key.endswith("/") else path == key for key in WHOLE_RUN
    )


def _whole_run_annotations(source: str) -> list[str]:
    """The parameters and fields annotated with RunConfig (bare, quoted or in a type)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    if "RunConfig" in ast.unparse(arg.annotation):
                        found.append(f"{node.name}({arg.arg})")
        elif isinstance(node, ast.AnnAssign) and "RunConfig" in ast.unparse(node.annotation):
            found.append(f"field {ast.unparse(node.target)}")
    return found


def _modules() -> list[str]:
    return sorted(
        p.relative_to(ROOT).as_posix()
        for top in ("lib", "gpt2", "hamt")
        for p in (ROOT / top).rglob("*.py")
    )


def test_only_planners_and_composition_roots_take_the_whole_run_config():
    offenders = {
        path: found
        for path in _modules()
        if not _allowed(path)
        and (found := _whole_run_annotations((ROOT / path).read_text(encoding="utf-8")))
    }
    assert offenders == {}, (
        "take the sections these read (run.data, run.train ...), not the whole RunConfig, "
        "or add the module to WHOLE_RUN with its reason"
    )


def test_every_allowed_entry_exists_and_still_takes_the_whole_run():
    """An entry whose module no longer holds a RunConfig parameter is stale."""
    modules = _modules()
    for key in WHOLE_RUN:
        inside = [m for m in modules if (m.startswith(key) if key.endswith("/") else m == key)]
        assert inside, f"{key}: no such module"
        assert any(_whole_run_annotations(Path(ROOT / m).read_text("utf-8")) for m in inside), (
            f"{key} takes no RunConfig any more: remove it from WHOLE_RUN"
        )


def test_the_scan_finds_a_parameter_and_a_field():
    source = (
        "def f(run: RunConfig, d: Data) -> None: ...\n"
        "class C:\n"
        "    run: 'RunConfig'\n"
        "def g(d: Data) -> None: ...\n"
    )
    assert _whole_run_annotations(source) == ["f(run)", "field run"]
