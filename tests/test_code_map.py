"""docs/development.md's map of the code is the tree's: every path it names exists,
every package and top-level module of lib/ is in it, and its groups are the layer
contract's layers (pyproject.toml), in the same order."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMED = re.compile(r"(?<![\w./-])([A-Za-z_][\w]*(?:/[\w]+)*(?:\.py|/))(?![\w/])")


def map_block(text: str) -> str:
    return map_section(text).split("```\n", 2)[1]


def groups(block: str) -> list[list[str]]:
    """The first path of each line, line groups split by blank lines."""
    out: list[list[str]] = [[]]
    for line in block.splitlines():
        if line.strip():
            out[-1].append(line.split()[0])
        elif out[-1]:
            out.append([])
    return [g for g in out if g]


def missing_paths(block: str, root: Path) -> list[str]:
    """Each path a line names that is not in the tree: its first path from the
    root, the modules and folders after it inside that folder."""
    missing = []
    for line in block.splitlines():
        if not line.strip():
            continue
        head, rest = line.split(None, 1) if " " in line.strip() else (line.strip(), "")
        if not (root / head).exists():
            missing.append(head)
            continue
        if not head.endswith("/"):
            continue
        for name in NAMED.findall(rest.split(":", 1)[1] if ":" in rest else rest):
            if not (root / head / name).exists():
                missing.append(head + name)
    return missing


def module_name(path: str) -> str:
    return path.rstrip("/").removesuffix(".py").replace("/", ".")


def map_section(text: str) -> str:
    return text.split("\n## Map of the code\n", 1)[1].split("\n## ", 1)[0]


def test_the_map_names_only_what_exists():
    text = (ROOT / "docs/development.md").read_text()
    assert missing_paths(map_block(text), ROOT) == []
    # and its prose: where new code goes, the registries
    named = re.findall(r"\b(?:lib|gpt2|hamt|scripts|tests)/[\w/.-]*[\w/]", map_section(text))
    assert [p for p in named if "<" not in p and not (ROOT / p).exists()] == []


def test_the_map_holds_every_lib_package_in_the_contracts_layers():
    named = groups(map_block((ROOT / "docs/development.md").read_text()))
    lib = {f"lib/{p.name}/" for p in (ROOT / "lib").iterdir() if (p / "__init__.py").exists()}
    lib |= {f"lib/{p.name}" for p in (ROOT / "lib").glob("*.py") if p.name != "__init__.py"}
    assert lib - {path for group in named for path in group} == set()
    (contract,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    layers = [sorted(n.strip() for n in layer.split("|")) for layer in contract["layers"]]
    assert [sorted(module_name(p) for p in g) for g in named if g != ["scripts/"]] == layers


def test_a_wrong_map_fails(tmp_path):
    (tmp_path / "lib/train").mkdir(parents=True)
    (tmp_path / "lib/train/trainer.py").write_text("")
    block = "lib/train/   the loop: trainer.py, gone.py, sub/\nlib/nowhere/  x\n"
    assert missing_paths(block, tmp_path) == ["lib/train/gone.py", "lib/train/sub/", "lib/nowhere/"]
