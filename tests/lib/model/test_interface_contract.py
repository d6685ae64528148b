"""The model interface is a contract: outside gpt2/ and hamt/, nothing reads a
family's module layout (GPT-2's transformer.h, transformer.wte, ...) or its
private methods (GPT2._hidden, HAMT._run); they use LanguageModel's methods
(blocks(), embedding(), hidden_states(), block_matrices(), prunable(), ...).

The layout names are those the families' models really have (every attention
variant, HAMT), minus the interface's own (lm_head) and names any tensor or
module has (weight, bias) and the config fields (dropout); the private names are those defined in the family
folders. The scan reads lib/ and scripts/ with ast: attribute accesses and
string constants, docstrings aside.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from gpt2.config import ATTENTIONS, GPT2Config
from gpt2.model import GPT2
from gpt2.variants import variant
from hamt.config import HAMTConfig
from hamt.model import HAMT
from lib.paths import ROOT

FAMILY_FOLDERS = ("gpt2", "hamt")
SCANNED = ("lib", "scripts")


def family_models() -> list[nn.Module]:
    gpt2 = [
        GPT2(
            GPT2Config(
                vocab_size=50,
                block_size=16,
                n_layer=2,
                n_head=2,
                n_embd=32,
                attention=name,
                latent_dim=16,
                ra_gated_layers=1,
                qk_norm=not variant(name).kvsplice,  # knlp's latent layers have none
                ra_alpha=0.5,
                ra_alpha_learned=True,
                tie_head=False,
                kvsplice_layers=1,
            )
        )
        for name in ATTENTIONS
    ]
    return [*gpt2, HAMT(HAMTConfig(vocab_size=50, block_size=16, n_layer=2, n_embd=32))]


def layout_names() -> set[str]:
    names = {
        part
        for model in family_models()
        for path in [*dict(model.named_modules()), *dict(model.named_parameters())]
        for part in path.split(".")
    }
    # config fields are the interface's (model.config), whatever a module shares the name
    fields = {f.name for cls in (GPT2Config, HAMTConfig) for f in dataclasses.fields(cls)}
    generic = (
        set(dir(torch.Tensor)) | set(dir(nn.Module)) | fields | {"", "weight", "bias", "lm_head"}
    )
    return {n for n in names if not n.isdigit() and n not in generic}


def private_names() -> set[str]:
    """`_name` methods and `self._name` attributes defined in the family folders."""
    found = set()
    for folder in FAMILY_FOLDERS:
        for path in (ROOT / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    found |= {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    found.add(node.attr)
    return {n for n in found if n.startswith("_") and not n.startswith("__")}


def docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants of the module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def violations(path: Path, layout: set[str], private: set[str], root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    skip = docstrings(tree)
    where = path.relative_to(root)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if node.attr in layout or (node.attr in private and not own):
                found.append(f"{where}:{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and any(f"{n}." in node.value for n in ("transformer",))
        ):
            found.append(f"{where}:{node.lineno}: {node.value!r}")
    return found


@pytest.fixture(scope="module")
def names() -> tuple[set[str], set[str]]:
    return layout_names(), private_names()


def test_the_scan_knows_the_families_names(names):
    layout, private = names
    # what the code outside the folders used to reach for
    assert {"transformer", "wte", "wpe", "ln_f", "h", "c_attn", "attn"} <= layout
    assert {"_hidden", "_run"} <= private


def test_nothing_outside_the_family_folders_reads_their_layout_or_privates(names):
    layout, private = names
    paths = sorted(p for folder in SCANNED for p in (ROOT / folder).rglob("*.py"))
    found = [v for p in paths for v in violations(p, layout, private)]
    assert found == []


def test_the_scan_finds_what_it_forbids(tmp_path, names):
    layout, private = names
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""transformer.h in a docstring is prose."""\n'
        "def f(model, self_like):\n"
        "    x = model.transformer.h\n"
        "    y = model._hidden(x, None)\n"
        "    return self_like._run, 'transformer.wte.weight'\n"
    )
    found = sorted(v.split(": ", 1)[1] for v in violations(bad, layout, private, tmp_path))
    assert found == sorted([".h", ".transformer", "._hidden", "._run", "'transformer.wte.weight'"])
