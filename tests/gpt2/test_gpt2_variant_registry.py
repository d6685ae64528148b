"""GPT-2's attention variants are one registry (gpt2/variants.py): the Kconfig
symbols, run-id tags, test-matrix switches, benchmark list and estimate traits
all come from it; and a new variant is one module, one record and its two
Kconfig entries, which the last test adds to a scratch copy of the project and
takes through `make schema` and `make`, the test matrix's planning, the
benchmark's list, the estimate and cached generation."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import kconfiglib
import pytest

import gpt2
from gpt2.config import ATTENTIONS
from gpt2.variants import VARIANTS, variant
from lib.config.kconfig import open_tree
from lib.config.run_config import run_config_from_defaults
from tests.scripts.conftest import SOURCES, make, project  # noqa: F401 (fixture)


def test_records_and_kconfig_name_the_same_variants():
    kconf = open_tree()
    choice = kconf.named_choices["GPT2_ATTENTION"]
    assert [s.name for s in choice.syms] == [v.choice_symbol for v in VARIANTS]
    enable = sorted(n for n in kconf.syms if n.startswith("GPT2_ATTENTION_ENABLE_"))
    assert enable == sorted(v.matrix_symbol for v in VARIANTS)
    assert all(kconf.syms[v.matrix_symbol].orig_type == kconfiglib.BOOL for v in VARIANTS)
    tags = [v.tag for v in VARIANTS]
    assert len(set(tags)) == len(tags) and all(t.isalnum() for t in tags)
    assert ATTENTIONS == tuple(v.name for v in VARIANTS)
    assert variant("ra").name == "ra_logit"  # the name earlier configs wrote


def test_the_family_record_derives_tags_matrix_and_bench_from_the_registry():
    run = run_config_from_defaults(
        {"GPT2_ATTENTION_SDPA_GATE_RA_GATED": "y", "GPT2_N_LAYER": "2", "GPT2_RA_GATED_LAYERS": "1"}
    )
    assert gpt2.variant(run) == "sdpagateragated"
    matrix = run_config_from_defaults(
        {
            "GPT2_ATTENTION_MULTIPLE": "y",
            "GPT2_ATTENTION_ENABLE_MLA": "y",
            "GPT2_ATTENTION_ENABLE_SDPA_GATE_RA_GATED": "y",
        }
    )
    assert [dict(o)["GPT2_ATTENTION"] for o in gpt2.matrix_variants(matrix)] == [
        "vanilla",
        "mla",
        "sdpa_gate_ra_gated",
    ]  # ENABLE_VANILLA defaults to y
    bench = gpt2.bench_models(run, 64, 32, {"n_layer": 2, "n_head": 2, "n_embd": 32})
    assert list(bench) == [v.name for v in VARIANTS if v.bench]
    assert {n: c.ra_alpha > 0 for n, c in bench.items()} == {
        v.name: v.reciprocal for v in VARIANTS if v.bench
    }


# ------------------------------------------------------------ a new variant

MODULE = '''\
"""Head-scaled attention: vanilla attention whose heads' outputs are each
multiplied by a learned scalar, starting at 1 (the variant a test adds)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from gpt2.attention import (CausalSelfAttention, KVCache, kv_cache_width, merge_heads,
                            same_every_layer)
from gpt2.config import GPT2Config


class HeadScaledAttention(CausalSelfAttention):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.head_scale = nn.Parameter(torch.ones(config.n_head, 1, 1))

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        n_past = 0 if cache is None else cache.pos
        q, k, v = self.qkv(x, n_past)
        if cache is not None:
            k, v = cache.append(k, v)
        y = merge_heads(self.attend(q, k, v, n_past) * self.head_scale)
        return self.resid_dropout(self.c_proj(y))


HEADSCALE = same_every_layer(HeadScaledAttention, lambda c: KVCache(), kv_cache_width,
                             lambda c: c.head_dim)
'''
RECORD = '    Variant("headscale", "headscale", "headscale:HEADSCALE"),\n'
CHOICE_ENTRY = """\
config GPT2_ATTENTION_HEADSCALE
	bool "Head-scaled attention"
	help
	  Vanilla attention, each head's output times a learned scalar.

"""
MATRIX_ENTRY = """\
config GPT2_ATTENTION_ENABLE_HEADSCALE
	bool "Head-scaled attention"
	help
	  Include head-scaled attention runs in the test matrix.

"""
SETTINGS = """\
CONFIG_DATA_TOKENIZER_CHAR=y
CONFIG_DATA_TOKEN_CAP=200000
CONFIG_GPT2_N_LAYER=2
CONFIG_GPT2_N_HEAD=2
CONFIG_GPT2_N_EMBD=32
CONFIG_GPT2_BLOCK_SIZE=32
CONFIG_BATCH_SIZE=8
CONFIG_GPT2_MAX_ITERS=40
CONFIG_GPT2_EVAL_INTERVAL=20
CONFIG_TRAIN_EVAL_ITERS=4
CONFIG_TRAIN_LOG_INTERVAL=10
CONFIG_GPT2_WARMUP_STEPS=5
CONFIG_LEARNING_RATE="1e-2"
CONFIG_DEVICE_CPU=y
"""
DEFCONFIG = (
    "# Tiny GPT-2 (2x32) with head-scaled attention on Shakespeare characters\n"
    + SETTINGS
    + "CONFIG_GPT2_ATTENTION_HEADSCALE=y\n"
)
# Run in the copy: what the rest of the project derives from the new record.
CHECKS = """
import json, sys
import torch
import gpt2
import lib.rules  # as every script does (lib/cli.py): the packages' rules
from gpt2.config import GPT2Config
from gpt2.model import GPT2
from lib.estimate import estimate_memory
from lib.matrix.grid import expand

out = {}
base, planned = expand(["SET=GPT2_ATTENTION_MULTIPLE=y GPT2_ATTENTION_ENABLE_HEADSCALE=y"],
                       sys.argv[1])
out["run_ids"] = [r.run_id for r in planned]
estimates = [estimate_memory(r.config, 65) for r in planned]
out["estimate"] = [[e.params, e.activations] for e in estimates]
out["bench"] = list(gpt2.bench_models(planned[1].config, 65, 32,
                                      {"n_layer": 2, "n_head": 2, "n_embd": 32}))
torch.manual_seed(0)
shape = dict(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=32)
vanilla, scaled = GPT2(GPT2Config(**shape)), GPT2(GPT2Config(**shape, attention="headscale"))
out["params"] = [vanilla.num_params(), scaled.num_params()]
out["flops"] = [vanilla.flops_per_token(32), scaled.flops_per_token(32)]
out["cache"] = [vanilla.cache_bytes_per_token(), scaled.cache_bytes_per_token()]
with torch.no_grad():
    for block in scaled.transformer.h:
        block.attn.head_scale.uniform_(0.5, 1.5)
prompt = torch.randint(0, 65, (2, 5), generator=torch.Generator().manual_seed(1))
cached = scaled.generate(prompt, 10, temperature=0)
plain = scaled.generate(prompt, 10, temperature=0, use_cache=False)
out["cached_equals_plain"] = bool(torch.equal(cached, plain))
print(json.dumps(out))
"""


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: expected one {old!r}"
    path.write_text(text.replace(old, new))


def add_variant(root: Path) -> None:
    """The module, the record, the choice member and the matrix switch."""
    (root / "gpt2" / "headscale.py").write_text(MODULE)
    # Appended last: the end of the variants' tuple, the end of the attention choice.
    replace_once(root / "gpt2" / "variants.py", "\n)\nBY_NAME", "\n" + RECORD + ")\nBY_NAME")
    replace_once(
        root / "gpt2" / "Kconfig",
        "\nendchoice\n\nconfig ENABLE_RA_MLA\n",
        "\n" + CHOICE_ENTRY + "endchoice\n\nconfig ENABLE_RA_MLA\n",
    )
    replace_once(
        root / "gpt2" / "Kconfig",
        "endif # GPT2_ATTENTION_MULTIPLE\n",
        MATRIX_ENTRY + "endif # GPT2_ATTENTION_MULTIPLE\n",
    )


def digests(root: Path) -> dict[str, str]:
    paths = [
        p
        for name in SOURCES
        for p in [root / name, *(root / name).rglob("*")]
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def ok(out) -> str:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
def test_a_new_variant_is_a_module_a_record_and_two_kconfig_entries(project):
    before = digests(project)
    add_variant(project)
    ok(make(project, "schema"))
    symbols = (project / "lib/config/symbols.py").read_text()
    assert '"knlp_mla_kv_fim", "headscale"]' in symbols
    assert "GPT2_ATTENTION_ENABLE_HEADSCALE: bool" in symbols

    (project / "defconfigs" / "gpt2-tiny-headscale").write_text(DEFCONFIG)
    ok(make(project, "defconfig-gpt2-tiny-headscale"))
    ok(make(project))  # prepares the corpus, trains in scripts/train.py's process
    run_dir = (project / "results" / "latest").resolve()
    assert "_headscale_" in f"_{run_dir.name}_", run_dir.name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["model_config"]["attention"] == "headscale"
    val = metrics["val_loss"]["values"]
    assert val[-1] < val[0] < 1.05 * metrics["train_loss"]["values"][0], val

    checks = subprocess.run(
        [str(project / ".venv/bin/python"), "-c", CHECKS, str(project / ".config")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = json.loads(ok(checks).strip().splitlines()[-1])
    # ENABLE_VANILLA defaults to y; vanilla's tag is left out of run ids
    assert found["run_ids"] == ["gpt2_adamw_none", "gpt2_adamw_headscale_none"], found
    assert "headscale" in found["bench"]
    # the estimate sizes it as the record's traits say: vanilla's activations
    (vanilla_est, scaled_est) = found["estimate"]
    assert scaled_est[0] - vanilla_est[0] == 2 * 2 and scaled_est[1] == vanilla_est[1] > 0
    # one scalar per head and layer; FLOPs are 6 per parameter more; vanilla's cache
    assert found["params"][1] - found["params"][0] == 2 * 2
    assert found["flops"][1] - found["flops"][0] == 6 * 2 * 2
    assert found["cache"][0] == found["cache"][1]
    assert found["cached_equals_plain"]

    changed = sorted(n for n, d in digests(project).items() if before.get(n) != d)
    assert changed == [
        "defconfigs/gpt2-tiny-headscale",
        "gpt2/Kconfig",
        "gpt2/headscale.py",
        "gpt2/variants.py",
        "lib/config/symbols.py",
    ]
