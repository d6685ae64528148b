"""The KV feature-circuit analysis (MECHINT_KV, lib/eval/kv_circuit.py): the mask
reaches exactly the channels it names, the schedules are what the help says,
and on a tiny trained model the learned circuit beats a random one."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from gpt2.config import GPT2Config
from gpt2.kv_probe import kv_sites, transformed_kv
from gpt2.model import GPT2
from lib.config.kconfig import ConfigError
from lib.eval.kv_circuit import analyse, hard_mask, kv_circuit_at_end, write_records
from lib.eval.kv_circuit_settings import Settings, kept_count, parse_temperature, progress
from lib.speed.precision import Precision

FP32 = Precision(torch.device("cpu"), "fp32", "test")
VOCAB, T = 16, 8


def tiny(**kw) -> GPT2:
    torch.manual_seed(0)
    return GPT2(
        GPT2Config(
            vocab_size=VOCAB, block_size=T, n_layer=2, n_head=2, n_embd=32, dropout=0.0, **kw
        )
    )


def previous_token(n: int = 32, gen: torch.Generator | None = None):
    """Each target is the token before it: only attention can tell."""
    x = torch.randint(0, VOCAB, (n, T), generator=gen)
    y = torch.full_like(x, -1)
    y[:, 1:] = x[:, :-1]
    return x, y


def test_a_mask_silences_exactly_the_key_and_value_channels_it_names():
    """Masking channel c of KV head h equals zeroing that channel's rows of the
    K and V projections (weights and bias), computed independently."""
    model = tiny()
    x, _ = previous_token(4)
    (name, heads, width), _ = kv_sites(model)
    assert (heads, width) == (2, 16)
    off = [(0, 3), (1, 0), (1, 15)]  # (head, channel) of layer 0
    mask = torch.ones(heads, width)
    for h, c in off:
        mask[h, c] = 0
    reference = copy.deepcopy(model)
    attn = reference.transformer.h[0].attn
    with torch.no_grad():
        for h, c in off:
            for base in (32, 64):  # K rows, then V rows, after the 32 Q rows
                attn.c_attn.weight[base + h * width + c] = 0
                attn.c_attn.bias[base + h * width + c] = 0
    keep_all = lambda k, v: (k, v)  # noqa: E731
    layer0 = lambda k, v: (k * mask[None, :, None, :], v * mask[None, :, None, :])  # noqa: E731
    with torch.no_grad(), transformed_kv(model, [layer0, keep_all]):
        masked, _ = model(x, x)
    with torch.no_grad():
        expected, _ = reference(x, x)
        plain, _ = model(x, x)
    assert torch.allclose(masked, expected, atol=1e-6)
    assert not torch.allclose(masked, plain, atol=1e-3)  # the channels mattered
    assert "qkv" not in vars(model.transformer.h[0].attn)  # the hook is gone afterwards


def test_the_schedules_and_the_counts_follow_the_help():
    linear = parse_temperature("linear:1.0:0.1")
    assert [round(linear.at(progress(s, 5)), 6) for s in range(5)] == [1, 0.775, 0.55, 0.325, 0.1]
    exp = parse_temperature("exp:1.0:0.01")
    assert math.isclose(exp.at(0.5), 0.1)
    assert parse_temperature("constant:0.5").at(0.7) == 0.5
    assert progress(0, 1) == 1.0  # one step: straight to the target
    assert kept_count(768, 0.95) == 38 and kept_count(64, 0.99) == 1
    scores = torch.tensor([[0.3, -1.0, 2.0], [0.1, 5.0, 0.0]])
    assert hard_mask(scores, 2).tolist() == [[0, 0, 1], [0, 1, 0]]
    for bad in ("linear:1.0", "cosine:1:0.1", "linear:1:0", "exp:a:b"):
        with pytest.raises(ValueError, match="MECHINT_KV_TEMP_SCHEDULE"):
            parse_temperature(bad)


def test_bad_settings_are_refused_on_load(tiny_run):
    with pytest.raises(ConfigError) as info:
        tiny_run(MECHINT_KV="y", MECHINT_KV_SPARSITY="1.0", MECHINT_KV_TEMP_SCHEDULE="fast")
    problems = " ".join(info.value.problems)
    assert 'CONFIG_MECHINT_KV_SPARSITY="1.0" must be a number from 0 up to' in problems
    assert 'CONFIG_MECHINT_KV_TEMP_SCHEDULE="fast": write "linear:START:END"' in problems
    run = tiny_run(MECHINT_KV="y", MECHINT_KV_SPARSITY="0.9")
    assert Settings.from_run(run.eval).sparsity == 0.9


@pytest.fixture(scope="module")
def trained() -> GPT2:
    """The tiny model, trained until it predicts the previous token (loss < 0.1)."""
    model = tiny()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(100):
        x, y = previous_token()
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1
    return model


@pytest.mark.slow
def test_on_a_trained_model_the_learned_circuit_beats_a_random_one(trained):
    before = {k: v.clone() for k, v in trained.state_dict().items()}
    gen = torch.Generator().manual_seed(1)
    val = [previous_token(32, gen) for _ in range(4)]
    settings = Settings(0.75, 60, 0.05, parse_temperature("linear:1.0:0.1"), 4, True)
    summary, masks, scores = analyse(trained, previous_token, val, settings, FP32, print)
    # the circuit: a quarter of each layer's 32 channels, the loss far below a random quarter's
    assert [layer["kept"] for layer in summary["layers"]] == [8, 8]
    assert [int(m.sum()) for m in masks] == [8, 8] and summary["sparsity"] == 0.75
    assert summary["val_loss_all_channels"] < 0.1
    assert summary["val_loss_circuit"] < 0.75 * summary["val_loss_random_mask"]
    # sparsity rises to the target on the last step, the temperature falls to its end
    history = summary["history"]
    assert len(history) == 60 and history[0]["sparsity"] == 0.0
    assert history[-1]["sparsity"] == 0.75 and history[-1]["temperature"] == 0.1
    # scores moved from 0, and the model itself is untouched and trainable again
    assert all(s.abs().max() > 0.5 for s in scores)
    assert all(torch.equal(v, trained.state_dict()[k]) for k, v in before.items())
    assert all(p.requires_grad for p in trained.parameters())


def test_records_are_the_summarys_and_the_masks_reload(tmp_path):
    from safetensors.torch import load_file

    (tmp_path / "metrics.json").write_text(json.dumps({"status": "completed"}))
    masks = [torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[1.0, 1.0], [0.0, 1.0]])]
    scores = [torch.tensor([[0.5, -0.2], [-0.1, -0.3]]), torch.tensor([[0.4, 0.3], [-1.0, 0.2]])]
    summary = {
        "val_loss_all_channels": 1.0,
        "val_loss_circuit": 1.5,
        "val_loss_random_mask": 2.5,
        "channels": 8,
        "channels_kept": 4,
        "sparsity": 0.5,
        "layers": [
            {"name": "a", "kv_heads": 2, "head_width": 2, "kept": 1, "kept_per_head": [1, 0]},
            {"name": "b", "kv_heads": 2, "head_width": 2, "kept": 3, "kept_per_head": [2, 1]},
        ],
        "history": [{"step": 1, "loss": 1.2, "sparsity": 0.0, "temperature": 1.0}],
    }
    section = write_records(tmp_path, summary, masks, scores, save=True)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["kv_circuit"] == section and "history" not in section
    assert metrics["status"] == "completed"  # the rest of metrics.json kept
    assert json.loads((tmp_path / "kv_circuit/summary.json").read_text()) == summary
    tensors = load_file(tmp_path / "kv_circuit/masks.safetensors")
    assert torch.equal(tensors["b.mask"], masks[1]) and torch.equal(tensors["a.scores"], scores[0])
    for png in ("heads.png", "curves.png"):
        assert (tmp_path / "kv_circuit" / png).read_bytes()[:4] == b"\x89PNG"


def test_at_the_end_a_model_without_kv_heads_is_recorded_not_raised(tmp_path, tiny_run):
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "completed"}))
    run = tiny_run(MECHINT_KV="y", MECHINT_KV_STEPS="2")
    mla = tiny(attention="mla", latent_dim=16)

    class Loader:
        def next_batch(self):
            return previous_token(2)

    lines: list[str] = []
    section = kv_circuit_at_end(
        run.eval,
        run.speed,
        run.train,
        mla,
        {"train": Loader(), "val": Loader()},
        tmp_path,
        lines.append,
    )
    assert section is not None and "no attention layer with per-head keys" in section["error"]
    assert json.loads((tmp_path / "metrics.json").read_text())["kv_circuit"] == section
    off = tiny_run()
    assert kv_circuit_at_end(off.eval, off.speed, off.train, mla, {}, tmp_path, print) is None


@pytest.mark.slow
def test_a_run_with_mechint_kv_leaves_its_circuit_in_its_records(tiny_run):
    from lib.train.naming import create_run_dir
    from lib.train.trainer import Trainer

    run = tiny_run(
        GPT2_MAX_ITERS="30",
        GPT2_EVAL_INTERVAL="30",
        MECHINT_KV="y",
        MECHINT_KV_STEPS="5",
        MECHINT_KV_SPARSITY="0.5",
        MECHINT_KV_EVAL_ITERS="2",
    )
    run_dir = create_run_dir(run)
    Trainer(run, run_dir, log=lambda _: None).train()
    section = json.loads((run_dir / "metrics.json").read_text())["kv_circuit"]
    assert "error" not in section, section
    # 2 layers x 2 heads x 16 channels, half of each layer's kept
    assert (section["channels"], section["channels_kept"]) == (64, 32)
    assert section["settings"]["steps"] == 5 and section["settings"]["eval_batches"] == 2
    assert all(math.isfinite(section[k]) for k in ("val_loss_all_channels", "val_loss_circuit"))
    for name in ("summary.json", "heads.png", "curves.png", "masks.safetensors"):
        assert (run_dir / "kv_circuit" / name).is_file()

    # `make kv-circuit` analyses the finished run again, from its best checkpoint
    import subprocess
    import sys

    from lib.paths import ROOT
    from lib.run.owner import release

    release(run_dir)  # this process trained it: as when `make` exits
    out = subprocess.run(
        [sys.executable, "scripts/kv_circuit.py", "--run", str(run_dir), "MECHINT_KV_STEPS=3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    again = json.loads((run_dir / "metrics.json").read_text())["kv_circuit"]
    assert again["settings"]["steps"] == 3 and again["source"].startswith("ckpt_best.pt (step ")
    bad = subprocess.run(
        [sys.executable, "scripts/kv_circuit.py", "--run", str(run_dir), "MECHINT_KV_LR=-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert 'CONFIG_MECHINT_KV_LR="-1" must be a positive number' in bad.stderr


def test_every_attention_variant_either_has_maskable_kv_or_is_excluded_in_kconfig():
    """A variant whose layers report K/V sites must route its keys and values
    through them (zeroing them changes the output); one without sites must be
    one MECHINT_KV's `depends on` excludes."""
    from gpt2.config import ATTENTIONS
    from lib.config.kconfig import open_tree

    depends = str(open_tree().syms["MECHINT_KV"].direct_dep)
    x, _ = previous_token(2)
    for name in ATTENTIONS:
        model = tiny(attention=name, latent_dim=16, ra_gated_layers=1, kvsplice_layers=1).eval()
        sites = kv_sites(model)
        if not sites:
            assert f"GPT2_ATTENTION_{name.upper()}" in depends, name
            continue
        zero = [lambda k, v: (k * 0, v * 0)] * len(sites)
        with torch.no_grad():
            plain, _ = model(x, x)
            with transformed_kv(model, zero):
                silenced, _ = model(x, x)
        assert not torch.allclose(plain, silenced, atol=1e-4), name
