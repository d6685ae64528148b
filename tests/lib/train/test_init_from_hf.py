"""GPT2_INIT_FROM=hf: a run starts from a Hugging Face GPT-2 folder (a random
GPT-2 saved by transformers' save_pretrained, offline): its first loss is the
transformers model's on the same batch, mismatches are refused naming the
symbols, and a resumed run continues from its checkpoint."""

from __future__ import annotations

import copy
import hashlib
import json
import math

import pytest
import torch
import torch.nn.functional as F

# transformers.utils.logging (about a second) stays at import, so the verbosity is
# set at collection as before; its GPT-2 model (torchao, scipy, ...) takes seconds
# more, so it is imported where a test uses it.
from transformers.utils import logging as hf_logging

import gpt2
from gpt2.pretrained import PretrainedError
from lib.config.kconfig import ConfigError
from lib.run import fingerprint as fp
from lib.run.checkpoint import CheckpointError, load_checkpoint
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until

hf_logging.set_verbosity_error()
VOCAB = 50257  # GPT-2's BPE: the tokenizer the run's data is prepared with


def save_hf(path, seed=0, **shape):
    from transformers import GPT2Config as HFConfig
    from transformers import GPT2LMHeadModel

    torch.manual_seed(seed)
    shape = {
        "vocab_size": VOCAB,
        "n_positions": 64,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 2,
        **shape,
    }
    config = HFConfig(initializer_range=0.1, **shape)
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(path)
    return model


@pytest.fixture
def hf_run(tiny_run, tmp_path):
    """(transformers model, run builder) for a 2 x 32 GPT-2 with 64 positions; the
    run's block is 32, so the position table is cropped."""
    model = save_hf(tmp_path / "hf")

    def build(**settings):
        base = {
            "DATA_TOKENIZER_GPT2": "y",
            "GPT2_INIT_FROM": "hf",
            "GPT2_INIT_PATH": str(tmp_path / "hf"),
        }
        if "DATA_TOKENIZER_CHAR" in settings:
            del base["DATA_TOKENIZER_GPT2"]
        if settings.get("GPT2_INIT_FROM") == "scratch":
            del base["GPT2_INIT_PATH"]
        return tiny_run(**{**base, **settings})

    return model, build


def hf_loss(hf, x, y) -> float:
    with torch.no_grad():
        return F.cross_entropy(hf(x).logits.reshape(-1, VOCAB), y.reshape(-1)).item()


def test_first_loss_is_the_transformers_models_loss_and_resume_keeps_the_checkpoint(
    hf_run, tmp_path
):
    hf, build = hf_run
    run = build(GPT2_MAX_ITERS=2, GPT2_EVAL_INTERVAL=1, TRAIN_EVAL_ITERS=1, RUN_NAME="hf")
    run_dir = create_run_dir(run)
    trainer = Trainer(run, run_dir, log=lambda _: None)
    x, y = copy.deepcopy(trainer.loaders["train"]).next_batch()  # the batch step 1 draws
    part = train_until(trainer, 1)
    assert part["iterations"] == 1
    assert part["train_loss"]["values"][0] == pytest.approx(hf_loss(hf, x, y), abs=1e-5)
    record = json.loads((run_dir / "metrics.json").read_text())["init"]
    weights = tmp_path / "hf" / "model.safetensors"
    assert record["from"] == "hf" and record["weights"] == [
        {
            "file": "model.safetensors",
            "bytes": weights.stat().st_size,
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        }
    ]
    # The fingerprint follows the weights, not the path; a run from scratch has none.
    before = fp.init_fingerprint(run)
    save_hf(tmp_path / "hf", seed=1)
    assert fp.init_fingerprint(run) not in (before, None)
    assert fp.init_fingerprint(build(GPT2_INIT_FROM="scratch")) is None
    # Resumed, the run continues from its checkpoint: the folder's new weights are not used.
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    resumed = Trainer(run, run_dir, log=lambda _: None, resume=state)
    for name, tensor in resumed.training.model.state_dict().items():
        assert torch.equal(tensor, state["model"][name]), name
    assert resumed.train()["status"] == "completed"


def test_padded_vocabulary_moves_the_loss_by_less_than_its_bound(hf_run):
    """GPT2_PAD_VOCAB: 47 rows at the mean embedding raise the loss by at most
    log(1 + 47 / 50257) (gpt2/pretrained.py pad_rows)."""
    hf, build = hf_run
    config = gpt2.from_run_config(build(GPT2_PAD_VOCAB="y"), VOCAB)
    model = gpt2.build(config).eval()
    assert model.lm_head.weight.shape[0] == 50304
    x = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(x, y)[1].item()
    assert 1e-5 < ours - hf_loss(hf, x, y) <= math.log(1 + 47 / VOCAB) + 1e-6


def test_mismatches_are_refused_naming_the_symbols(hf_run, tmp_path):
    _, build = hf_run
    with pytest.raises(ConfigError, match="no folder"):
        build(GPT2_INIT_PATH=str(tmp_path / "nowhere"))
    save_hf(tmp_path / "deep", n_layer=3)
    with pytest.raises(ConfigError, match="CONFIG_GPT2_N_LAYER=3"):
        build(GPT2_INIT_PATH=str(tmp_path / "deep"))
    with pytest.raises(ConfigError, match="CONFIG_GPT2_BLOCK_SIZE=128 exceeds"):
        build(GPT2_BLOCK_SIZE=128)
    # GPT-2's weights need its tokenizer and block: Kconfig dependencies.
    with pytest.raises(ConfigError, match="DATA_TOKENIZER_GPT2"):
        build(DATA_TOKENIZER_CHAR="y")
    with pytest.raises(ConfigError, match="GPT2_POSITION_LEARNED"):
        build(GPT2_POSITION_ROPE="y")
    # OpenAI's weights expect the tanh GELU: the default, and Exact is refused.
    with pytest.raises(ConfigError, match="uses the tanh GELU .* set CONFIG_GPT2_GELU_TANH=y"):
        build(GPT2_GELU_EXACT="y")
    run = build()
    assert run.GPT2_GELU == "tanh" and gpt2.from_run_config(run, VOCAB).gelu == "tanh"
    with pytest.raises(
        PretrainedError, match="tokenizer has 65 tokens.*CONFIG_DATA_TOKENIZER_GPT2=y"
    ):
        gpt2.from_run_config(run, 65)
    # An empty path passes the config check (a defconfig leaves it to the user)
    # and is refused, with how to get GPT-2, when the model is built.
    empty = gpt2.from_run_config(build(GPT2_INIT_PATH=""), VOCAB)
    with pytest.raises(CheckpointError, match="huggingface-cli download"):
        gpt2.build(empty)
