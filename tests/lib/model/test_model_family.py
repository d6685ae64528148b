"""The model interface is enough: a third family, defined here, trains through
the real trainer, is planned by the matrix and summarised by the results.

The toy family is what lib/model/registry.py says a new family is: a package with a
FAMILY record whose model subclasses lib.model.interface.LanguageModel, plus one registry
line. Its config, model and activation formula are tests/lib/model/toy_model.py; its
package is a module made here (sys.modules) and its registry line is added with
monkeypatch. Kconfig cannot grow a MODEL choice from a test, so the line maps the
existing choice value "gpt2" to the toy package: every in-process lookup of the
configured family (trainer, estimator, matrix run ids, results) then finds the toy,
and its config reads the GPT-2 symbols it shares (GPT2_N_EMBD, GPT2_BLOCK_SIZE). A
registry line added here is not seen by the processes the matrix's runner starts
(scripts/train.py), so this test trains the planned run in-process;
tests/lib/model/test_third_family.py adds a real toy/ folder, registry line and
Kconfig entries to a scratch copy of the project and takes it through `make`,
`make test-matrix` and `make results`.
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path

import pytest
import torch

from lib.model import registry
from lib.model.activations import Shape
from lib.model.registry import ModelFamily, config_from_symbols
from tests.lib.model.toy_model import ToyConfig, ToyLM
from tests.lib.model.toy_model import activations as toy_activations
from tests.stochastic import observe


def toy_package() -> types.ModuleType:
    """The toy family's package: its FAMILY record, as a family folder's __init__ holds it."""
    package = types.ModuleType("toy_family")
    package.FAMILY = ModelFamily(
        name="toy",
        label="Toy",
        config_cls=ToyConfig,
        from_run_config=lambda run, vocab: config_from_symbols(
            ToyConfig,
            {"n_embd": "GPT2_N_EMBD", "block_size": "GPT2_BLOCK_SIZE"},
            run,
            vocab_size=vocab,
        ),
        build=ToyLM,
        variant=lambda run: "toy",
        activations=toy_activations,
    )
    return package


@pytest.fixture
def toy_family(monkeypatch):
    """The toy family's folder and its one registry line (module docstring)."""
    monkeypatch.setitem(sys.modules, "toy_family", toy_package())
    monkeypatch.setitem(registry.FAMILY_PACKAGES, "gpt2", "toy_family")
    return registry.family("gpt2")


@pytest.mark.stochastic
def test_toy_family_trains_through_trainer_matrix_and_results(toy_family, tiny_run, seed):
    from lib.estimate import estimate_memory
    from lib.matrix.grid import expand
    from lib.matrix.launch import create
    from lib.results.collect import collect
    from lib.train.trainer import Trainer

    assert toy_family.name == "toy"
    base = tiny_run()  # writes the tiny run's .config beside its corpus
    dot_config = Path(base.RESULTS_DIR).parent / ".config"
    # The matrix plans the run from the configured family (its run id carries the
    # family's variant tag) and creates its folder, config.txt and matrix.json.
    settings = {
        **base.overrides,
        "GPT2_MAX_ITERS": "40",
        "GPT2_EVAL_INTERVAL": "20",
        "TRAIN_SEED": str(1337 + seed),
    }
    base, planned = expand([f"SET={' '.join(f'{k}={v}' for k, v in settings.items())}"], dot_config)
    (run,) = planned
    assert "_toy_" in f"_{run.run_id}_", run.run_id
    state = create(base, planned, [])
    run_dir = state.root / run.run_id
    assert (run_dir / "config.txt").is_file()

    trainer = Trainer(run.config, run_dir, log=lambda _: None)
    assert isinstance(trainer.training.model, ToyLM)
    summary = trainer.train()
    vocab = summary["model_config"]["vocab_size"]
    val = summary["val_loss"]["values"]
    assert summary["status"] == "completed" and summary["iterations"] == 40
    # A bigram model of the characters learns (uniform: log 31 = 3.43; seen 2.44, 2.19).
    # Spread over seeds 0-7 at one thread (AVX-512, AVX2 kernels) and 0-2 at 2 and 4: 0.712-0.726
    # of ln V at step 20, the last 0.876-0.897 of the first.
    assert observe("val loss at 20 / ln V", val[0] / math.log(vocab)) < 0.8, val
    assert observe("last / first val loss", val[-1] / val[0]) < 0.95, val
    # Everything the trainer reports comes from the interface: params, FLOPs, estimate.
    params = sum(p.numel() for p in trainer.training.model.parameters())
    # tied wte V C; the block's LayerNorm 2 C, c_fc 2 C^2 + 2 C, c_proj 2 C^2 + C; ln_f 2 C
    assert summary["params"] == params == vocab * 32 + 4 * 32 * 32 + 7 * 32
    # The estimator sizes it with the family's own activation formula.
    est = estimate_memory(run.config, vocab)
    assert (
        est.per_layer
        == toy_activations(trainer.training.config, Shape(8, 32, 4, "cpu", 0.0)).per_layer
    )
    assert summary["memory_estimate_mb"] > 0

    state.update(run.run_id, state="completed")
    rows, _ = collect(state.root)
    (row,) = rows
    assert row.run_id == run.run_id and row.variant == "toy" and row.status == "completed"
    assert row.params == params
    assert row.best_ppl == pytest.approx(math.exp(summary["best_val_loss"]))


def test_toy_family_generates_through_the_shared_sampler(toy_family):
    torch.manual_seed(0)
    model = ToyLM(ToyConfig(vocab_size=11, block_size=8))
    out = model.generate(torch.tensor([[1, 2, 3]]), 20, temperature=0)  # past block_size
    assert out.shape == (1, 23)
    # Greedy bigram generation: each token is the argmax after the one before it.
    logits, _ = model(torch.arange(11)[None], torch.zeros(1, 11, dtype=torch.long))
    best = logits[0].argmax(-1)
    assert out[0, 3:].tolist() == [int(best[t]) for t in out[0, 2:-1].tolist()]
    assert model.param_groups(0.1)[1]["names"] == [
        n for n, p in model.named_parameters() if p.dim() < 2
    ]
    assert [n for n, _ in model.prunable()] == ["layers.0.c_fc.weight", "layers.0.c_proj.weight"]
    assert [n for n, _ in model.block_matrices()] == [
        "layers.0.c_fc.weight",
        "layers.0.c_proj.weight",
    ]
