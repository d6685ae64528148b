"""`make export` for models transformers has no class for (GPT-2 with MLA, RA,
RA+MLA, gated RA, output gate; HAMT): folders that carry their code, loaded
back with trust_remote_code in a fresh Python that cannot import the project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.variants import VARIANTS
from hamt.config import HAMTConfig
from hamt.model import HAMT
from lib.data.tokenizers import GPT2Tokenizer
from lib.model.export import export_run
from lib.model.remote import source
from lib.model.remote.source import SourceError, closure, copy_sources
from lib.run.checkpoint import CheckpointError, save_checkpoint

VOCAB, BLOCK = 40, 16
TEXT = "ROMEO: to be, or not to be -- that is the question.\n"
CHARS = {"name": "char", "vocab_size": VOCAB, "chars": [chr(65 + i) for i in range(VOCAB)]}
BPE = {"name": "gpt2", "vocab_size": 50257, "eot_token": 50256}  # the model's vocabulary stays tiny
TINY = dict(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=2, n_embd=32)
GPT2_VARIANTS = {
    "mla": dict(attention="mla", latent_dim=16, rope_dim=4, q_latent=True),
    "ra_logit": dict(attention="ra_logit", ra_alpha=0.5),
    "ra_logit_banded_learned": dict(
        attention="ra_logit", ra_alpha=0.3, ra_window=3, ra_alpha_learned=True
    ),
    "ra_mla": dict(
        attention="ra_mla", latent_dim=16, rope_dim=4, ra_alpha=0.5, v_up_per_head=False
    ),
    # the gate starts open, else the reverse branch would add nothing
    "ra_gated": dict(
        attention="ra_gated", ra_gated_layers=1, ra_gated_heads=1, ra_gated_gate_init=0.8
    ),
    "sdpa_gate": dict(attention="sdpa_gate"),
    # knlp's MLA on layer 0, a KVSplice layer on layer 1
    "knlp_mla_kv_fim": dict(attention="knlp_mla_kv_fim", knlp_mla_latent=16, kvsplice_layers=1),
    # vanilla attention, but no GPT2LMHeadModel layout: RoPE, RMSNorm, SwiGLU, GQA, QK-norm,
    # no biases and an untied head, whose own weights must survive the round trip
    "modern": dict(
        position="rope",
        norm="rmsnorm",
        mlp="swiglu",
        n_kv_head=1,
        qk_norm=True,
        bias=False,
        tie_head=False,
    ),
}
# hierarchical: the slot periods (a buffer the weights file does not hold) are not all 1
HAMT_CONFIG = dict(
    vocab_size=VOCAB,
    block_size=BLOCK,
    n_layer=2,
    n_head=1,
    n_embd=32,
    num_slots=4,
    hierarchical=True,
    slow_every=2,
    chunk_size=8,
)
# the attention variants' modules, which gpt2/model.py imports by name: one per module
# the variants' records name (gpt2/variants.py), so a variant of one's own is carried too
VARIANT_CODE = sorted(
    {f"gpt2_{v.layers.split(':')[0]}.py" for v in VARIANTS} - {"gpt2_attention.py"}
)
SHARED_CODE = [
    "gpt2_attention.py",
    "gpt2_config.py",
    "gpt2_mlp.py",
    "gpt2_model.py",
    "gpt2_norm.py",
    "gpt2_presets.py",
    "gpt2_rope.py",
    "gpt2_variants.py",
    "lib_model_fused_loss.py",
    "lib_model_interface.py",
    "lib_model_remote_causal_lm.py",
    "lib_model_sampling.py",
]
GPT2_CODE = SHARED_CODE + VARIANT_CODE
HAMT_CODE = [
    "hamt_block.py",
    "hamt_config.py",
    "hamt_gla_op.py",
    "hamt_kernel.py",
    "hamt_memory.py",
    "hamt_model.py",
    "hamt_retrieval.py",
    "hamt_routing.py",
    "hamt_scan.py",
    "hamt_spectral.py",
    "hamt_tuning.py",
]

# Run in a fresh interpreter, elsewhere, with no PYTHONPATH: only the folders' code.
# It starts while the folders are exported (its imports take seconds) and reads
# them, as JSON {name: folder}, from its standard input.
LOADER = """
import importlib.util, json, sys
import torch
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer
# As if this project were not installed: drop the .venv's editable-install finder.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
assert importlib.util.find_spec("gpt2") is None and importlib.util.find_spec("lib") is None
inputs = torch.load(sys.argv[1], weights_only=True)
results = {}
for name, folder in json.loads(sys.stdin.read()).items():
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        out = model(inputs["tokens"], labels=inputs["tokens"])
        generated = model.generate(inputs["prompt"], max_new_tokens=inputs["new"], do_sample=False)
    try:
        model(inputs["tokens"], attention_mask=torch.tensor([[0] + [1] * 11] * 2))
        refused = ""
    except ValueError as err:
        refused = str(err)
    results[name] = {"logits": out.logits, "loss": out.loss, "generated": generated,
                     "class": type(model).__name__, "refused": refused}
    if (Path(folder) / "vocab.json").is_file():  # as the model card says to load it
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        results[name]["encoded"] = tokenizer.encode(inputs["text"])
torch.save(results, sys.argv[2])
"""


def perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights away from their initial values (zero biases, unit LayerNorms),
    so a parameter loaded wrongly or left at its init shows in the logits."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model.eval()


def checkpoint_run(
    root: Path, name: str, family: str, model: torch.nn.Module, tokenizer: dict = CHARS
) -> Path:
    """A run folder holding ckpt_best.pt, with the keys the trainer writes."""
    run_dir = root / name
    run_dir.mkdir()
    save_checkpoint(
        run_dir / "ckpt_best.pt",
        {
            "step": 3,
            "family": family,
            "model_config": asdict(model.config),
            "tokenizer": tokenizer,
            "model": model.state_dict(),
            "optimizer": {},
        },
    )
    return run_dir


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every variant exported and loaded back: (our models, the loader's results, folders)."""
    root = tmp_path_factory.mktemp("runs")
    g = torch.Generator().manual_seed(1)
    inputs = {
        "tokens": torch.randint(0, VOCAB, (2, 12), generator=g),
        "prompt": torch.randint(0, VOCAB, (2, 6), generator=g),
        "new": 14,
        "text": TEXT,
    }
    torch.save(inputs, root / "inputs.pt")
    (root / "load.py").write_text(LOADER)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = {
        **os.environ,
        "PYTHONPATH": "",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_MODULES_CACHE": str(elsewhere / "modules"),
    }
    loader = subprocess.Popen(
        [sys.executable, str(root / "load.py"), str(root / "inputs.pt"), str(root / "results.pt")],
        cwd=elsewhere,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        torch.manual_seed(0)
        models = {
            name: perturbed(GPT2(GPT2Config(**TINY, **options)), i)
            for i, (name, options) in enumerate(GPT2_VARIANTS.items())
        }
        models["hamt"] = perturbed(HAMT(HAMTConfig(**HAMT_CONFIG)), 99)
        folders = {}
        for name, model in models.items():
            run_dir = checkpoint_run(
                root,
                name,
                "hamt" if name == "hamt" else "gpt2",
                model,
                BPE if name == "ra_mla" else CHARS,
            )
            folders[name] = str(export_run(run_dir, "best", log=lambda _: None))
    except BaseException:
        loader.kill()
        loader.communicate()
        raise
    _, stderr = loader.communicate(json.dumps(folders))
    assert loader.returncode == 0, stderr[-4000:]
    return models, inputs, torch.load(root / "results.pt", weights_only=True), folders


@pytest.mark.parametrize("name", [*GPT2_VARIANTS, "hamt"])
def test_exported_folder_computes_what_our_model_computes(exported, name):
    models, inputs, results, _ = exported
    model, got, tokens = models[name], results[name], inputs["tokens"]
    with torch.no_grad():
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
        # transformers' loss (logits t against labels t + 1) is the model's cross-entropy;
        # HAMT's training loss adds its retrieval term, which the export leaves out
        lm_loss = model.aux_metrics()["lm_loss"] if name == "hamt" else loss.item()
        full, _ = model(tokens, tokens)
        ours = model.generate(inputs["prompt"], inputs["new"], temperature=0)
    assert got["class"] == ("HAMTRemoteForCausalLM" if name == "hamt" else "GPT2RemoteForCausalLM")
    assert (got["logits"] - full).abs().max().item() < 1e-5
    assert got["loss"].item() == pytest.approx(lm_loss, abs=1e-5)
    # past block_size: GPT-2 continues from the last 16 tokens, HAMT's memory runs on
    assert got["generated"].shape == (2, 20) and torch.equal(got["generated"], ours)
    assert "padded batches are not supported" in got["refused"]


def test_folder_holds_the_model_code_and_a_card_that_says_so(exported):
    _, _, results, folders = exported
    # HAMT's blocks take GPT-2's MLP (gpt2/model.py), never its attention
    for name, family, code in (
        ("mla", "gpt2", GPT2_CODE),
        ("hamt", "hamt", SHARED_CODE + HAMT_CODE),
    ):
        folder = Path(folders[name])
        # the template as the modelling file, and exactly the modules it needs
        assert sorted(p.name for p in folder.glob("*.py")) == sorted(
            code + ["modeling_kconfig_llm.py"]
        )
        config = json.loads((folder / "config.json").read_text())
        assert config["auto_map"]["AutoModelForCausalLM"].startswith("modeling_kconfig_llm.")
        assert config["family"] == family and config["model_config"]["n_embd"] == 32
        assert config["max_position_embeddings"] == BLOCK
        assert json.loads((folder / "generation_config.json").read_text())["use_cache"] is False
        card = (folder / "README.md").read_text()
        assert "trust_remote_code=True" in card and "custom_code" in card
        assert "recomputes the whole context" in card
    assert "from .gpt2_model import MLP" in (Path(folders["hamt"]) / "hamt_block.py").read_text()
    assert "HAMT trained with kconfig-llm" in (Path(folders["hamt"]) / "README.md").read_text()
    card = (Path(folders["ra_mla"]) / "README.md").read_text()
    assert "GPT-2 with ra_mla attention" in card and "ra_alpha 0.5" in card
    assert "AutoTokenizer.from_pretrained(path, trust_remote_code=True)" in card
    assert results["ra_mla"]["encoded"] == GPT2Tokenizer().encode(TEXT)
    config = json.loads((Path(folders["ra_mla"]) / "config.json").read_text())
    assert config["eos_token_id"] == 50256  # generate stops at end of text, as GPT-2's does


def test_imports_that_cannot_be_made_relative_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "ROOT", tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "b.py").write_text("Y = 2\n")
    (tmp_path / "pkg" / "good.py").write_text(
        "import math\n\ndef f():\n    from pkg.b import Y\n    return Y\n"
    )
    assert copy_sources("pkg.good", tmp_path / "out", "modeling.py") == ["modeling.py", "pkg_b.py"]
    assert "    from .pkg_b import Y\n" in (tmp_path / "out" / "modeling.py").read_text()
    for text, message in (
        ("import pkg.b\n", "cannot be made relative"),
        ("from pkg import X\n", "imports from the package pkg"),
        ("from . import b\n", "relative import"),
    ):
        (tmp_path / "pkg" / "bad.py").write_text(text)
        with pytest.raises(SourceError, match=message):
            closure("pkg.bad")


def test_a_family_without_an_exporter_is_refused_by_name(tmp_path, monkeypatch):
    import hamt

    monkeypatch.setattr(hamt, "FAMILY", replace(hamt.FAMILY, export=None))
    run_dir = checkpoint_run(tmp_path, "run", "hamt", HAMT(HAMTConfig(**HAMT_CONFIG)))
    with pytest.raises(CheckpointError, match="run is a hamt run; only GPT-2 runs have an export"):
        export_run(run_dir, "best", log=lambda _: None)
    assert not (run_dir / "hf").exists()
