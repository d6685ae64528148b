"""The model code of an exported folder: a template module and every project
module it imports, directly or not, copied flat with relative imports.

transformers' remote-code loader copies the modelling file named in
config.json's auto_map and, following `from .x import ...` lines, the files
x.py beside it, into a package of its own; it does not follow packages. So
`gpt2/model.py` becomes `gpt2_model.py` and `from gpt2.model import GPT2`
becomes `from .gpt2_model import GPT2`; the template itself becomes the
modelling file. Nothing else changes, so the folder computes exactly what
the project's modules compute, without the project installed. Imports the
copy cannot express (`import gpt2.model`, names taken from a package's
__init__.py) are refused, naming the line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # lib/model/remote/ -> the project


class SourceError(Exception):
    pass


def module_file(name: str) -> Path | None:
    """The project's file for module `name`, None for a module from elsewhere."""
    path = ROOT.joinpath(*name.split(".")).with_suffix(".py")
    return path if path.is_file() else None


def _is_project(name: str) -> bool:
    top = ROOT / name.split(".")[0]
    return top.with_suffix(".py").is_file() or (top / "__init__.py").is_file()


def project_imports(name: str) -> list[tuple[int, str]]:
    """(line, module) of each project module `name` imports, anywhere in the
    file: deferred and TYPE_CHECKING imports are code the copy must hold too."""
    path = module_file(name)
    assert path is not None, name
    found, rel = [], path.relative_to(ROOT)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        where = f"{rel}:{node.lineno}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_project(alias.name):
                    raise SourceError(
                        f"{where}: `import {alias.name}` cannot be made relative; "
                        f"write `from {alias.name} import ...`"
                    )
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise SourceError(f"{where}: relative import; the project imports absolutely")
            if node.module is None or not _is_project(node.module):
                continue
            if module_file(node.module) is None:
                raise SourceError(
                    f"{where}: imports from the package {node.module} (its "
                    f"__init__.py), which an exported folder cannot hold; import "
                    f"from the module that defines the names"
                )
            found.append((node.lineno, node.module))
    return sorted(found)


def closure(entry: str, by_name: tuple[str, ...] = ()) -> list[str]:
    """`entry` and every project module it needs (and those of the modules
    `by_name`), in a stable order."""
    seen, todo = {entry, *by_name}, [entry, *by_name]
    while todo:
        for _, name in project_imports(todo.pop()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return [entry] + sorted(seen - {entry})


def flat_name(module: str) -> str:
    return module.replace(".", "_")


def relative_source(name: str, names: dict[str, str]) -> str:
    """Module `name`'s text with its project imports pointing at the flat
    modules `names` (module -> flat module name)."""
    path = module_file(name)
    assert path is not None, name
    lines = path.read_text().splitlines(keepends=True)
    for lineno, module in project_imports(name):
        pattern = rf"^(\s*from\s+){re.escape(module)}(\s+import\b)"
        line, count = re.subn(pattern, rf"\g<1>.{names[module]}\g<2>", lines[lineno - 1], count=1)
        if count != 1:
            raise SourceError(
                f"{path.relative_to(ROOT)}:{lineno}: `from {module} import` must "
                f"start the line to be made relative"
            )
        lines[lineno - 1] = line
    return "".join(lines)


def copy_sources(
    entry: str, out: Path, entry_file: str, by_name: tuple[str, ...] = ()
) -> list[str]:
    """Write `entry` as out/entry_file and the modules it needs beside it;
    the file names written, entry first. `by_name`: modules the code imports
    by name (importlib, gpt2/variants.py), which no import line shows:
    copied too, and imported at the end of the entry file, since
    transformers copies only the files it finds `from .x import` lines for."""
    modules = closure(entry, by_name)
    names = {m: flat_name(m) for m in modules}
    names[entry] = Path(entry_file).stem
    if len(set(names.values())) != len(names):
        raise SourceError(f"two modules of {', '.join(modules)} share a flat file name")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    loads = "".join(
        f"from .{names[m]} import __name__ as _{names[m]}  # noqa: F401\n" for m in by_name
    )
    for module in modules:
        text = relative_source(module, names)
        if module == entry and loads:
            text += "\n# Imported by name there; named here for transformers' file copy\n" + loads
        (out / f"{names[module]}.py").write_text(text)
        written.append(f"{names[module]}.py")
    return written
