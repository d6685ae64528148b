"""The model interface is enough: a third family, defined here, trains through
the real trainer, is planned by the matrix and summarised by the results.

The toy family is what lib/model/registry.py says a new family is: a package with a
FAMILY record whose model subclasses lib.model.interface.LanguageModel, plus one registry
line. Its package is a module made here (sys.modules) and its registry line
is added with monkeypatch. Kconfig cannot grow a MODEL choice from a test, so
the line maps the existing choice value "gpt2" to the toy package: every
in-process lookup of the configured family (trainer, estimator, matrix run
ids, results) then finds the toy, and its config reads the GPT-2 symbols it
shares (GPT2_N_EMBD, GPT2_BLOCK_SIZE). A registry line added here is not
seen by the processes the matrix's runner starts (scripts/train.py), so this
test trains the planned run in-process; tests/lib/model/test_third_family.py
adds a real toy/ folder, registry line and Kconfig entries to a scratch copy
of the project and takes it through `make`, `make test-matrix` and `make results`.
"""
from __future__ import annotations

import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from lib.model import registry
from lib.estimate.activations import R, Activations, Shape
from lib.model.interface import LanguageModel, init_weights
from lib.model.registry import ModelFamily, config_from_symbols


@dataclass(frozen=True)
class ToyConfig:
    vocab_size: int
    block_size: int = 32
    n_embd: int = 32
    n_layer: int = 1
    n_head: int = 1
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_embd < 1:
            raise ValueError(f"n_embd must be positive, got {self.n_embd}")


class ToyBlock(nn.Module):
    """x + MLP(LayerNorm(x)), position by position: a bigram model."""

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 2 * n_embd)
        self.c_proj = nn.Linear(2 * n_embd, n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.c_proj(torch.relu(self.c_fc(self.ln(x))))


class ToyLM(LanguageModel):
    """Each position sees only its own token, so generation keeps no state."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(config.vocab_size, config.n_embd),
            "h": nn.ModuleList(ToyBlock(config.n_embd) for _ in range(config.n_layer)),
            "ln_f": nn.LayerNorm(config.n_embd)})
        self.tie_head()
        init_weights(self, [(b.c_proj,) for b in self.transformer.h])

    def _hidden(self, idx: Tensor) -> Tensor:
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        return self.transformer.ln_f(x)

    def forward(self, idx: Tensor, targets: Tensor | None = None):
        return self.logits_and_loss(self._hidden(idx), targets)

    def flops_per_token(self, seq_len: int) -> int:
        return 6 * self.num_params()

    def start_generation(self, idx: Tensor) -> tuple[Tensor, Any]:
        return self.lm_head(self._hidden(idx[:, -1:])), None

    def continue_generation(self, idx: Tensor, state: Any) -> tuple[Tensor, Any]:
        return self.lm_head(self._hidden(idx)), None

    def generation_bytes(self, seq_len: int, batch: int = 1) -> int:
        return 0


def toy_activations(cfg: ToyConfig, s: Shape) -> Activations:
    n, c, a = s.tokens, cfg.n_embd, s.act
    per_layer = {"block_input": R * n * c, "ln_out": a * n * c, "hidden": 3 * a * n * 2 * c}
    return Activations(per_layer, R * n * c + a * n * c, R * n * c)


def toy_package() -> types.ModuleType:
    """The toy family's package: its FAMILY record, as a family folder's __init__ holds it."""
    package = types.ModuleType("toy_family")
    package.FAMILY = ModelFamily(
        name="toy", label="Toy", config_cls=ToyConfig,
        from_run_config=lambda run, vocab: config_from_symbols(
            ToyConfig, {"n_embd": "GPT2_N_EMBD", "block_size": "GPT2_BLOCK_SIZE"}, run,
            vocab_size=vocab),
        build=ToyLM, variant=lambda run: "toy", activations=toy_activations)
    return package


@pytest.fixture
def toy_family(monkeypatch):
    """The toy family's folder and its one registry line (module docstring)."""
    monkeypatch.setitem(sys.modules, "toy_family", toy_package())
    monkeypatch.setitem(registry.FAMILY_PACKAGES, "gpt2", "toy_family")
    return registry.family("gpt2")


def test_toy_family_trains_through_trainer_matrix_and_results(toy_family, tiny_run):
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
    settings = {**base.overrides, "GPT2_MAX_ITERS": "40", "GPT2_EVAL_INTERVAL": "20"}
    base, planned = expand([f"SET={' '.join(f'{k}={v}' for k, v in settings.items())}"],
                           dot_config)
    (run,) = planned
    assert "_toy_" in f"_{run.run_id}_", run.run_id
    state = create(base, planned, [])
    run_dir = state.root / run.run_id
    assert (run_dir / "config.txt").is_file()

    trainer = Trainer(run.config, run_dir, log=lambda _: None)
    assert isinstance(trainer.model, ToyLM)
    summary = trainer.train()
    vocab = summary["model_config"]["vocab_size"]
    val = summary["val_loss"]["values"]
    assert summary["status"] == "completed" and summary["iterations"] == 40
    # A bigram model of the characters learns (uniform: log 31 = 3.43; seen 2.44, 2.19).
    assert val[0] < 0.8 * math.log(vocab) and val[-1] < 0.95 * val[0], val
    # Everything the trainer reports comes from the interface: params, FLOPs, estimate.
    params = sum(p.numel() for p in trainer.model.parameters())
    # tied wte V C; the block's LayerNorm 2 C, c_fc 2 C^2 + 2 C, c_proj 2 C^2 + C; ln_f 2 C
    assert summary["params"] == params == vocab * 32 + 4 * 32 * 32 + 7 * 32
    # The estimator sizes it with the family's own activation formula.
    est = estimate_memory(run.config, vocab)
    assert est.per_layer == toy_activations(trainer.model_config, Shape(8, 32, 4, "cpu", 0.0)
                                            ).per_layer
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
    assert model.param_groups(0.1)[1]["names"] == [n for n, p in model.named_parameters()
                                                   if p.dim() < 2]
    assert [n for n, _ in model.prunable()] == ["transformer.h.0.c_fc.weight",
                                                "transformer.h.0.c_proj.weight"]
