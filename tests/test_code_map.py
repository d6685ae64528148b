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


# Where a list of several optimizers, pruning methods, score variants or attention
# variants may stand besides their registries: what Kconfig generates, and tables
# that hold something else about a subset (each says what).
OTHER_TABLES = {
    "lib/config/symbols.py": "generated from the Kconfig files (the choices' Literal types)",
    "lib/prune/scores.py": "the score variants' formulas, checked against lib/prune/registry.py",
    "lib/config/knlp/code.py": "what knlp itself offers, for translating its files",
    "lib/knlpcheck/optim.py": "knlp's optimizers the cross-check compares",
    "lib/knlpcheck/prune.py": "knlp's score variants the cross-check compares",
    "lib/bench/optimizers.py": "the three steps `make bench-optim` times",
    "gpt2/activations.py": "how many layers each knlp latent variant splices",
}


def registered_names() -> dict[str, tuple[str, set[str]]]:
    from gpt2.variants import VARIANTS
    from lib.optim.registry import OPTIMIZERS
    from lib.prune.registry import METHODS, SCORE_VARIANTS

    return {
        "optimizers": ("lib/optim/registry.py", {o.name for o in OPTIMIZERS}),
        "pruning methods": ("lib/prune/registry.py", {m.name for m in METHODS}),
        "score variants": ("lib/prune/registry.py", set(SCORE_VARIANTS)),
        "attention variants": ("gpt2/variants.py", {v.name for v in VARIANTS}),
    }


def second_tables(root: Path, registries: dict[str, tuple[str, set[str]]]) -> list[str]:
    """Literal dicts, lists, tuples and sets in the code that name three or more of one
    registry's entries outside that registry: a table a new entry would have to join."""
    import ast

    found = []
    for path in sorted(root.glob("*/**/*.py")):
        rel = str(path.relative_to(root))
        if rel.split("/")[0] not in ("lib", "gpt2", "hamt", "scripts") or rel in OTHER_TABLES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Dict | ast.Tuple | ast.List | ast.Set):
                continue
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            words = {i.value for i in items if isinstance(i, ast.Constant)}
            for what, (home, names) in registries.items():
                if rel != home and len(words & names) >= 3:
                    found.append(f"{rel}:{node.lineno} lists {what} ({home} holds them)")
    return found


def test_each_recipes_entries_are_listed_in_their_registry_only():
    """docs/development.md's recipes add an optimizer, pruning method or attention variant
    in one registry; a table elsewhere that lists them would have to be edited too."""
    assert second_tables(ROOT, registered_names()) == []
    text = (ROOT / "docs/development.md").read_text()
    for home, _ in registered_names().values():
        assert home in text  # the recipe names the registry


def test_a_second_table_is_found(tmp_path):
    (tmp_path / "lib/results").mkdir(parents=True)
    (tmp_path / "lib/results/names.py").write_text(
        'LABELS = {"adamw": "A", "sgd": "S", "adam": "B"}\n'
    )
    registries = {"optimizers": ("lib/optim/registry.py", {"adamw", "sgd", "adam", "muon"})}
    assert second_tables(tmp_path, registries) == [
        "lib/results/names.py:1 lists optimizers (lib/optim/registry.py holds them)"
    ]
