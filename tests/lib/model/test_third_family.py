"""A third model family added as lib/model/registry.py says, for real: in a scratch
copy of the project, one new folder (toy/), its line in FAMILY_PACKAGES, a MODEL
choice entry and a `source` line in the top-level Kconfig. Nothing else in the copy
changes; `make schema` regenerates the typed symbols from the Kconfig tree, and then
the make targets a user types train it (`make`, each run of `make test-matrix` in a
process of its own) and tabulate it (`make results`).

tests/lib/model/test_model_family.py checks the same interface in-process, where a
monkeypatched registry line stands in for the folder.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from tests.scripts.conftest import SOURCES, make, project  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

TOY_KCONFIG = """\
# SPDX-License-Identifier: MIT
#
# Toy family: a bigram model (each position sees only its own token) through
# one MLP block. Read by toy/__init__.py (TOY_<FIELD> -> ToyConfig.<field>).

menu "Toy"
	depends on MODEL_TOY

config TOY_N_EMBD
	int "Hidden width"
	range 8 1024
	default 32
	help
	  Width of the token embedding; the MLP is twice as wide.
	  Parameters grow with its square. If unsure, keep 32.

endmenu
"""

TOY_INIT = '''\
"""Toy model family: config from Kconfig (TOY_* symbols), builder, and the rest of
its registry record (lib/model/registry.py)."""
from __future__ import annotations

from lib.model.registry import ModelFamily, config_from_symbols
from toy.model import ToyConfig, ToyLM, activations

# ToyConfig field -> Kconfig symbol; the context length is every family's.
SYMBOLS = {"n_embd": "TOY_N_EMBD", "block_size": "GPT2_BLOCK_SIZE"}

FAMILY = ModelFamily(name="toy", label="Toy", config_cls=ToyConfig,
                     from_run_config=lambda run, vocab: config_from_symbols(
                         ToyConfig, SYMBOLS, run, vocab_size=vocab),
                     build=ToyLM, variant=lambda run: "toy", activations=activations)
'''

# The toy's config, model and activation formula, shared with test_model_family.py.
TOY_MODEL = (Path(__file__).parent / "toy_model.py").read_text()

# The MODEL choice entry, inserted before `endchoice`, and the menu's source line.
MODEL_ENTRY = """\
config MODEL_TOY
	bool "Toy (bigram MLP)"
	help
	  One MLP block over each position's own token: the smallest
	  model the family interface admits.

"""

# Tiny sizes and few steps: the whole test trains three runs in seconds on 2 CPU cores.
TOY_SETTINGS = """\
CONFIG_MODEL_TOY=y
CONFIG_DATA_TOKENIZER_CHAR=y
CONFIG_DATA_TOKEN_CAP=200000
CONFIG_GPT2_BLOCK_SIZE=32
CONFIG_BATCH_SIZE=8
CONFIG_GPT2_MAX_ITERS=100
CONFIG_GPT2_EVAL_INTERVAL=10
CONFIG_TRAIN_EVAL_ITERS=4
CONFIG_TRAIN_LOG_INTERVAL=10
CONFIG_GPT2_WARMUP_STEPS=5
CONFIG_LEARNING_RATE="1e-2"
CONFIG_DEVICE_CPU=y
"""
DEFCONFIG = (
    "# Toy bigram MLP (32 wide) on the embedded Shakespeare corpus, characters: "
    "seconds on a CPU\n" + TOY_SETTINGS
)
# A test matrix over the toy's own symbol.
MATRIX_DEFCONFIG = (
    "# Toy bigram MLP on Shakespeare characters, a 2-run matrix: 16 and 32 wide\n"
    + TOY_SETTINGS
    + 'CONFIG_MATRIX_ABLATION="TOY_N_EMBD=16,32"\n'
)


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: expected one {old!r}"
    path.write_text(text.replace(old, new))


def add_toy_family(root: Path) -> None:
    """The folder, the registry line, the choice entry and the source line."""
    (root / "toy").mkdir()
    for name, text in (
        ("Kconfig", TOY_KCONFIG),
        ("__init__.py", TOY_INIT),
        ("model.py", TOY_MODEL),
    ):
        (root / "toy" / name).write_text(text)
    replace_once(root / "Kconfig", "endchoice\n", MODEL_ENTRY + "endchoice\n")
    replace_once(
        root / "Kconfig", 'source "hamt/Kconfig"\n', 'source "hamt/Kconfig"\nsource "toy/Kconfig"\n'
    )
    replace_once(root / "lib/model/registry.py", '"hamt": "hamt"}', '"hamt": "hamt", "toy": "toy"}')


def source_digests(root: Path) -> dict[str, str]:
    """The copy's source files (what conftest copies, plus toy/) -> SHA-256."""
    paths = [
        p
        for name in [*SOURCES, "toy"]
        for p in [root / name, *(root / name).rglob("*")]
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def ok(out) -> str:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_third_family_is_a_folder_a_registry_line_and_two_kconfig_entries(project):
    before = source_digests(project)
    add_toy_family(project)
    ok(make(project, "schema"))
    symbols = (project / "lib/config/symbols.py").read_text()
    assert 'MODEL: Literal["gpt2", "hamt", "toy"]' in symbols
    assert "TOY_N_EMBD: int | None = None" in symbols  # hidden unless MODEL_TOY

    (project / "defconfigs" / "toy-tiny-shakespeare").write_text(DEFCONFIG)
    (project / "defconfigs" / "toy-tiny-shakespeare-matrix").write_text(MATRIX_DEFCONFIG)
    assert "defconfig-toy-tiny-shakespeare" in ok(make(project, "list-defconfigs"))
    ok(make(project, "defconfig-toy-tiny-shakespeare"))
    assert "CONFIG_TOY_N_EMBD=32" in (project / ".config").read_text()

    # `make`: prepare the corpus, then train one run in scripts/train.py's process.
    ok(make(project))
    run_dir = (project / "results" / "latest").resolve()
    assert run_dir.name.startswith("toy_adamw_none_"), run_dir.name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["iterations"] == 100
    vocab = metrics["model_config"]["vocab_size"]
    assert metrics["model_config"]["n_embd"] == 32
    # tied wte V C; LayerNorm 2 C, c_fc 2 C^2 + 2 C, c_proj 2 C^2 + C; ln_f 2 C
    assert metrics["params"] == vocab * 32 + 4 * 32 * 32 + 7 * 32
    # It starts at uniform guessing, log(vocab) (log 64 = 4.16), and learns the
    # character bigrams (seen: val 3.21 at step 10, 2.68 at step 100).
    assert metrics["train_loss"]["values"][0] == pytest.approx(math.log(vocab), rel=0.05)
    val = metrics["val_loss"]["values"]
    assert len(val) == 10 and val[-1] < 0.9 * val[0] and val[-1] < 0.7 * math.log(vocab), val

    # `make test-matrix`: the ablation over TOY_N_EMBD, each run its own process; the
    # width-32 run is the one `make` just trained, so it is linked, not trained again.
    ok(make(project, "defconfig-toy-tiny-shakespeare-matrix"))
    out = ok(make(project, "test-matrix", "YES=1"))
    assert "2 completed (1 of them reused)" in out, out
    matrix_dir = (project / "results" / "latest").resolve()
    runs = json.loads((matrix_dir / "matrix.json").read_text())["runs"]
    assert sorted(runs) == ["toy_adamw_none_toy_n_embd16", "toy_adamw_none_toy_n_embd32"], runs
    best = {}
    for run_id, width in (("toy_adamw_none_toy_n_embd16", 16), ("toy_adamw_none_toy_n_embd32", 32)):
        assert runs[run_id]["state"] == "completed"
        m = json.loads((matrix_dir / run_id / "metrics.json").read_text())
        assert m["model_config"]["n_embd"] == width and m["iterations"] == 100
        assert m["params"] == vocab * width + 4 * width * width + 7 * width
        best[run_id] = math.exp(m["best_val_loss"])

    # `make results`: both toy runs in the table, with their perplexities.
    ok(make(project, "results"))
    summary = (matrix_dir / "summary.md").read_text()
    for run_id, ppl in best.items():
        (row,) = [line for line in summary.splitlines() if f"| {run_id} |" in line]
        status = "reused" if run_id.endswith("n_embd32") else "completed"
        assert row.endswith(f"| {status} |"), row
        assert re.search(rf"\| {ppl:.2f} \|", row), (ppl, row)

    # Every make target above worked without touching any other source: the
    # family is exactly what registry.py promises, plus the generated schema.
    after = source_digests(project)
    assert sorted(n for n in after if before.get(n) != after[n]) == [
        "Kconfig",
        "defconfigs/toy-tiny-shakespeare",
        "defconfigs/toy-tiny-shakespeare-matrix",
        "lib/config/symbols.py",
        "lib/model/registry.py",
        "toy/Kconfig",
        "toy/__init__.py",
        "toy/model.py",
    ]
