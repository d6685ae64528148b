"""`make export`: a trained run as a Hugging Face GPT-2 folder with a model card."""

from __future__ import annotations

import json
import os
import stat

import pytest
import torch

from lib.data.tokenizers import GPT2Tokenizer
from lib.model.export import export_run
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

PRUNED = dict(
    PRUNING_MODE_SINGLE="y",
    PRUNING_METHOD_MAGNITUDE="y",
    PRUNING_TARGET_SPARSITY="0.5",
    PRUNING_WARMUP=2,
    PRUNING_RAMP_END=6,
    PRUNING_FREQUENCY=2,
)


def train(run):
    run_dir = create_run_dir(run)
    trainer = Trainer(run, run_dir, log=lambda _: None)
    return trainer, trainer.train(), run_dir


def test_pruned_gpt2_bpe_run_round_trips_through_transformers(tiny_run):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    run = tiny_run(
        DATA_TOKENIZER_GPT2="y",
        DATA_TOKENIZER_CHAR="n",
        GPT2_MAX_ITERS=8,
        GPT2_EVAL_INTERVAL=4,
        RUN_NAME="exp",
        **PRUNED,
    )
    trainer, summary, run_dir = train(run)
    out = export_run(run_dir, "latest", log=lambda _: None)
    assert out == run_dir / "hf"
    hf = GPT2LMHeadModel.from_pretrained(out).eval()
    x = torch.randint(0, 50257, (2, 32), generator=torch.Generator().manual_seed(0))
    trainer.training.model.eval()
    with torch.no_grad():
        assert (hf(x).logits - trainer.training.model(x, x)[0]).abs().max().item() < 1e-5
    text = "ROMEO: to be, or not to be -- that is the question.\n"
    assert AutoTokenizer.from_pretrained(out).encode(text) == GPT2Tokenizer().encode(text)
    blocks = [m.weight for m in hf.transformer.h.modules() if type(m).__name__ == "Conv1D"]
    zeros = sum(int((w == 0).sum()) for w in blocks) / sum(w.numel() for w in blocks)
    assert zeros == pytest.approx(0.5, abs=0.005)
    card = (out / "README.md").read_text()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert f"tokens seen: {metrics['tokens_seen']:,} over 8 iterations" in card
    assert f"perplexity {metrics['final_val_perplexity']:.2f}" in card
    assert f"(measured on this export): {zeros:.4f}" in card
    assert "pruning: magnitude" in card and 'CONFIG_PRUNING_TARGET_SPARSITY="0.5"' in card
    assert "library_name: transformers" in card and "dataset: custom, tokenizer: gpt2" in card


@pytest.mark.parametrize(
    "kind",
    [
        dict(DATA_TOKENIZER_GPT2="y"),
        dict(DATA_TOKENIZER_BPE="y", DATA_BPE_VOCAB_SIZE=300),
        dict(DATA_TOKENIZER_CHAR="y"),
    ],
    ids=["gpt2", "bpe", "char"],
)
def test_export_carries_the_runs_own_tokenizer(tiny_run, tmp_path, kind):
    """AutoTokenizer and AutoModelForCausalLM load the export; encode, generate and decode
    agree with the run's own tokenizer; the special ids are the tokenizer's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lib.data.tokenizers import tokenizer_from_meta

    trainer, _, run_dir = train(
        tiny_run(**kind, GPT2_MAX_ITERS=2, GPT2_EVAL_INTERVAL=2, RUN_NAME="tok")
    )
    out = export_run(run_dir, "best", tmp_path / "hf", log=lambda _: None)
    ours = tokenizer_from_meta(trainer.meta["tokenizer"])
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    config = json.loads((out / "config.json").read_text())
    eot = ours.eot_token  # GPT-2 50256, the trained BPE's <|endoftext|>, characters none
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (eot,) * 3
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (eot,) * 3
    assert len(tok) == ours.vocab_size <= config["vocab_size"]
    text = "Citizen:\nWe proceed, hear."
    text = "".join(c for c in text if kind != dict(DATA_TOKENIZER_CHAR="y") or c in ours.chars)
    ids = tok(text, return_tensors="pt").input_ids
    assert ids[0].tolist() == ours.encode(text) and tok.decode(ids[0]) == text
    with torch.no_grad():
        new = model.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1] :]
    assert new.numel() > 0
    assert tok.decode(new) == ours.decode(new.tolist())
    if eot is not None and eot in new.tolist():
        assert new.tolist()[-1] == eot  # generate stops at the end-of-text token


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664)])
def test_exported_files_have_the_users_umask(tiny_run, tmp_path, umask, mode):
    """safetensors writes its file 0600 whatever the umask; the export gives every file
    it wrote the mode the umask makes, as the run's own records have."""
    _, _, run_dir = train(
        tiny_run(GPT2_MAX_ITERS=2, GPT2_EVAL_INTERVAL=2, GPT2_WARMUP_STEPS=1, RUN_NAME="modes")
    )
    old = os.umask(umask)
    try:
        out = export_run(run_dir, "best", tmp_path / "shared", log=lambda _: None)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    names = ["README.md", "config.json", "model.safetensors", "tokenizer.json"]
    assert modes == dict.fromkeys([*names, "tokenizer_config.json"], mode)


def test_an_export_into_the_run_folder_does_not_follow_its_links(tiny_run, tmp_path):
    """<run>/hf/ of a run folder a group shares: a link as one of its files is
    replaced, not written through; hf/ itself as a link is refused."""
    from lib.run.checkpoint import CheckpointError

    _, _, run_dir = train(
        tiny_run(GPT2_MAX_ITERS=2, GPT2_EVAL_INTERVAL=2, GPT2_WARMUP_STEPS=1, RUN_NAME="links")
    )
    someones = tmp_path / "someones.json"
    someones.write_text("{}")
    (run_dir / "hf").mkdir()
    (run_dir / "hf" / "config.json").symlink_to(someones)
    (run_dir / "hf" / "notes.txt").write_text("kept")
    old = os.umask(0o002)
    try:
        out = export_run(run_dir, "best", log=lambda _: None)
    finally:
        os.umask(old)
    assert not (out / "config.json").is_symlink() and someones.read_text() == "{}"
    assert json.loads((out / "config.json").read_text())["n_layer"] == 2
    assert (out / "notes.txt").read_text() == "kept"  # what the export does not write stays
    modes = {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if p.name != "notes.txt"}
    assert modes == {0o664}
    assert [p.name for p in run_dir.iterdir() if p.name.startswith(".hf-")] == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for p in out.iterdir():
        p.unlink()
    out.rmdir()
    out.symlink_to(elsewhere)
    with pytest.raises(CheckpointError) as err:
        export_run(run_dir, "best", log=lambda _: None)
    assert str(err.value).startswith(f"{out} is a symbolic link, not a folder of the run's own")
    assert "EXPORT_DIR=<dir>" in str(err.value) and list(elsewhere.iterdir()) == []
