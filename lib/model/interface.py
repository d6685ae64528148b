"""The model interface every family implements, written down once.

A family's model subclasses LanguageModel. The trainer, the estimator, the
benchmarks, evaluation and sampling use only what is declared here:

* forward(idx, targets) -> (logits, loss): loss None without targets, when
  only the last position's logits are needed ([B, 1, V]);
* generation: start_generation(prompt) -> (logits, state) and
  continue_generation(tokens, state) -> (logits, state), the state being a
  cache or a recurrence, whatever the family keeps; generation_bytes(seq_len)
  what that state holds after seq_len tokens; generate() samples with them;
* param_groups(weight_decay), prunable(), num_params(), flops_per_token(T),
  aux_metrics();
* blocks(): the repeated blocks, in order (gradient checkpointing wraps
  them, lib/train/recompute.py; FSDP shards them; Muon, float8 and the
  pruners take their matrices; regional torch.compile compiles each of
  compile_units(), by default those blocks); embedding(): the token
  embedding, which lm_head shares unless the family unties it;
* hidden_states(idx): the final hidden states [B, T, C] that lm_head maps
  to logits, so perplexity puts only the positions it scores through the
  head (lib/eval/perplexity.py) and an exported model runs the family's
  own forward (lib/model/remote/).

How a family lays its modules out (GPT-2's transformer.h, its checkpoint
names) is its own: nothing outside its folder reads those names
(tests/lib/model/test_interface_contract.py).

In training mode with a fused head loss (use_head_loss, TRAIN_LOSS_IMPL),
forward(idx, targets) returns an empty logits tensor: the [B, T, V] logits
are never materialised (lib/model/fused_loss.py). In eval mode, and without
targets, the logits are always computed.

Shared here, so no family repeats them: the LM head tied to the token
embedding (tie_head, logits_and_loss), GPT-2's initialisation
(init_weights), the decay rule of param_groups, prunable's "every Linear
inside the blocks" and sampling. What a family provides besides its model
(config from Kconfig, activation formula, export) is its registry record,
lib/model/registry.py.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.model.sampling import check_sampling, sample_token

INIT_STD = 0.02  # GPT-2's initialiser for weights and embeddings.


def init_weights(model: nn.Module, residual_projections: list[tuple[nn.Linear, ...]]) -> None:
    """GPT-2 initialisation: N(0, 0.02) for Linear and Embedding weights, zero
    biases, and each block's residual output projections scaled by
    1/sqrt(2 n_layer) so the residual stream's variance does not grow with
    depth (GPT-2 paper, section 2.3); none scaled when the list is empty."""
    if any(p.is_meta for p in model.parameters()):
        return  # a description on the meta device holds no values to draw
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    residual_std = INIT_STD / math.sqrt(2 * max(1, len(residual_projections)))
    for projections in residual_projections:
        for proj in projections:
            nn.init.normal_(proj.weight, mean=0.0, std=residual_std)


class LanguageModel(nn.Module, ABC):
    """A decoder-only LM: token ids [B, T] -> next-token logits [B, T, V].

    Subclasses set self.config (with vocab_size, block_size, n_layer, n_embd,
    dropout) and their modules, among them those blocks() and embedding()
    return, then call tie_head().
    """

    config: Any
    lm_head: nn.Linear
    # f(hidden, weight, targets) -> loss replacing lm_head + cross-entropy in
    # training (use_head_loss); None: the plain path. Not a module: no state.
    head_loss: Callable[[Tensor, Tensor, Tensor], Tensor] | None = None
    head_loss_impl: str = "plain"

    # ------------------------------------------------------------ shared

    def tie_head(self) -> None:
        """The LM head, its weight shared with the token embedding: tying
        shares one matrix between input and output (Press & Wolf 2017), as
        GPT-2 does, and saves vocab_size * n_embd parameters."""
        wte = self.embedding()
        self.lm_head = nn.Linear(wte.embedding_dim, wte.num_embeddings, bias=False)
        self.lm_head.weight = wte.weight

    def logits_and_loss(self, x: Tensor, targets: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """From final hidden states [B, T, C]: with targets, logits [B, T, V]
        and the mean cross-entropy (targets of -1 ignored); without, only the
        last position's logits ([B, 1, V]): generation needs nothing else, and
        the LM head is the largest matmul of a small model."""
        if targets is None:
            return self.lm_head(x[:, -1:, :]), None
        if self.head_loss is not None and self.training:
            return x.new_empty(0), self.head_loss(x, self.lm_head.weight, targets)
        logits = self.lm_head(x)
        loss = F.cross_entropy(
            logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1
        )
        return logits, loss

    def use_head_loss(self, impl: str) -> None:
        """Compute the training loss with a resolved TRAIN_LOSS_IMPL ("plain",
        "chunked" or "liger"; lib/model/fused_loss.py)."""
        from lib.model.fused_loss import head_loss

        self.head_loss, self.head_loss_impl = head_loss(impl), impl

    def compile_units(self) -> list[nn.Module]:
        """What regional torch.compile (COMPILE_REGIONAL) compiles one by one:
        the blocks, whose identical code compiles once and is reused. A family
        with other heavy modules outside its blocks names them too."""
        return list(self.blocks())

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count, the tied embedding counted once. A family with a
        position table drops it when non_embedding (the scaling-law
        convention); the token embedding stays, being the output layer too."""
        return sum(p.numel() for p in self.parameters())

    def param_groups(self, weight_decay: float, rule: str = "matrices") -> list[dict[str, Any]]:
        """Optimizer groups: decay matrices and embeddings, not biases or norms.

        Decaying a bias or a LayerNorm gain only pulls it towards zero (or
        away from the identity) without limiting capacity, so by convention
        only tensors with dim >= 2 are decayed (HAMT's per-slot decay logits
        are 1-D too: pulling them to 0 would drag every decay towards 0.5).
        rule "knlp" (WEIGHT_DECAY_PARAMS_KNLP) decays what knlp's
        lib/optimizers.py decays in its GPT-2: every tensor but biases and
        embedding tables (a tied head with them), LayerNorm gains included,
        since its LayerNorm is its own class, not the nn.LayerNorm it skips.
        Tied parameters appear once.
        """
        tables = {
            id(p)
            for m in self.modules()
            if isinstance(m, nn.Embedding)
            for p in m.parameters(recurse=False)
        }

        def decays(name: str, p: nn.Parameter) -> bool:
            if rule == "knlp":
                return not name.endswith("bias") and id(p) not in tables
            return p.dim() >= 2

        decay: dict[str, nn.Parameter] = {}
        no_decay: dict[str, nn.Parameter] = {}
        for name, p in self.named_parameters():
            if p.requires_grad:
                (decay if decays(name, p) else no_decay)[name] = p
        return [
            {"params": list(decay.values()), "weight_decay": weight_decay, "names": list(decay)},
            {"params": list(no_decay.values()), "weight_decay": 0.0, "names": list(no_decay)},
        ]

    def prunable(self) -> list[tuple[str, nn.Parameter]]:
        """Weight matrices of every Linear inside the blocks, by name.

        Embeddings, LayerNorms and the tied head are left out: pruning them
        removes whole tokens or rescales the stream rather than thinning a
        layer. So are frozen ones (RGSA's router, gpt2/rgsa.py): no
        optimizer updates them, nothing trains around their masks.
        """
        inside = {id(m) for m in self.blocks().modules()}
        return [
            (f"{name}.weight", module.weight)
            for name, module in self.named_modules()
            if id(module) in inside
            and isinstance(module, nn.Linear)
            and module.weight.requires_grad
        ]

    def block_matrices(self) -> list[tuple[str, nn.Parameter]]:
        """Every 2-D parameter inside the blocks, by name: the "hidden"
        matrices Muon orthogonalises (lib/optim/muon.py)."""
        inside = {id(p) for p in self.blocks().parameters()}
        return [
            (name, p) for name, p in self.named_parameters() if id(p) in inside and p.dim() == 2
        ]

    def aux_metrics(self) -> dict[str, float]:
        """Family-specific training metrics from the last forward; none by default."""
        return {}

    @torch.no_grad()
    def generate(
        self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None
    ) -> Tensor:
        """Append max_new_tokens sampled tokens to idx [B, T]; return [B, T + n].

        The prompt is run once, then each new token continues the generation
        state. temperature 0 picks the most likely token. Dropout is off
        while generating and the previous mode restored afterwards.
        """
        check_sampling(temperature, top_k)
        if max_new_tokens <= 0:
            return idx
        was_training = self.training
        self.eval()
        try:
            logits, state = self.start_generation(idx)
            for i in range(max_new_tokens):
                next_token = sample_token(logits[:, -1, :], temperature, top_k)
                idx = torch.cat((idx, next_token), dim=1)
                if i + 1 < max_new_tokens:
                    logits, state = self.continue_generation(next_token, state)
        finally:
            self.train(was_training)
        return idx

    # ------------------------------------------------- family-specific

    @abstractmethod
    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits and training loss (see logits_and_loss)."""

    @abstractmethod
    def blocks(self) -> nn.ModuleList:
        """The repeated blocks, input side first."""

    @abstractmethod
    def embedding(self) -> nn.Embedding:
        """The token embedding (ids -> [.., n_embd])."""

    @abstractmethod
    def hidden_states(self, idx: Tensor) -> Tensor:
        """Final hidden states [B, T, C] for idx [B, T] (after the last norm):
        what lm_head maps to logits."""

    @abstractmethod
    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token (forward and backward) at context seq_len."""

    @abstractmethod
    def start_generation(self, idx: Tensor) -> tuple[Tensor, Any]:
        """Run a prompt [B, T]: (logits of its last token [B, 1, V], state)."""

    @abstractmethod
    def continue_generation(self, idx: Tensor, state: Any) -> tuple[Tensor, Any]:
        """The tokens [B, t] after those `state` has seen: (logits [B, t, V],
        state); the state may be updated in place."""

    @abstractmethod
    def generation_bytes(self, seq_len: int, batch: int = 1) -> int:
        """Bytes the generation state holds after seq_len tokens."""
