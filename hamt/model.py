"""HAMT: a decoder-only language model with holographic slot memories.

Each block is GPT-2's pre-LayerNorm block with attention replaced by a
HolographicMemory: a fixed number of decaying slots holding bound
(key (*) value) superpositions. Training runs the memory as a chunked
parallel scan; generation runs it as a recurrence whose state (the slot
spectra of every layer) has the same size however long the text grows.

The model implements lib.model.interface.LanguageModel. It has no
position embedding: order information comes from the causal, decaying
memory itself, which is also what lets generation run past block_size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from hamt.block import Block
from hamt.config import HAMTConfig
from hamt.routing import utilisation
from lib.model.interface import LanguageModel, init_weights


@dataclass
class GenerationState:
    """What generation carries from call to call: per layer the slots'
    packed spectra [B, S, hcm_dim], and how many tokens of the stream they
    have seen (the slow bank ticks at fixed positions of the stream)."""

    slots: list[Tensor]
    position: int = 0


class HAMT(LanguageModel):
    """Holographic-memory language model with the LM head tied to wte."""

    def __init__(self, config: HAMTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(config.vocab_size, config.n_embd),
                "drop": nn.Dropout(config.dropout),
                "h": nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                "ln_f": nn.LayerNorm(config.n_embd, bias=config.bias),
            }
        )
        self.tie_head()
        self._last: dict[str, Tensor] = {}
        init_weights(self, [(b.mem.c_proj, b.mlp.c_proj) for b in self.transformer.h])

    # ----------------------------------------------------------- forward

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits and loss = mean cross-entropy (LanguageModel.logits_and_loss)
        + aux_weight * retrieval loss (+ adaptive_slots_balance * the
        router's balance loss with adaptive slots), each averaged over layers."""
        x, _, stats = self._run(idx, None, need_state=False, need_aux=targets is not None)
        logits, loss = self.logits_and_loss(x, targets)
        if loss is None:
            return logits, None
        aux = torch.stack([s["aux_loss"] for s in stats]).mean()
        self._last = {
            "aux_loss": aux.detach(),
            "lm_loss": loss.detach(),
            "gate_mean": torch.stack([s["gate_mean"] for s in stats]).detach(),
        }
        total = loss + self.config.aux_weight * aux
        if self.config.adaptive_slots:
            balance = torch.stack([s["balance_loss"] for s in stats]).mean()
            self._last["balance_loss"] = balance.detach()
            total = total + self.config.adaptive_slots_balance * balance
        return logits, total

    def hidden_states(self, idx: Tensor) -> Tensor:
        """Final hidden states [B, T, C], which lm_head maps to logits (as GPT2's)."""
        return self._run(idx, None, need_state=False, need_aux=False)[0]

    def blocks(self) -> nn.ModuleList:
        return self.transformer.h

    def embedding(self) -> nn.Embedding:
        return self.transformer.wte

    def _run(
        self,
        idx: Tensor,
        states: list[Tensor] | None,
        need_state: bool,
        need_aux: bool,
        offset: int = 0,
    ) -> tuple[Tensor, list[Tensor], list[dict[str, Tensor]]]:
        """Final hidden states [B, T, C], new per-layer states, per-layer stats.
        offset: tokens of the stream before idx (0 for a fresh sequence)."""
        x = self.transformer.drop(self.transformer.wte(idx))
        new_states, stats = [], []
        for i, block in enumerate(self.transformer.h):
            x, state, layer_stats = block(
                x, states[i] if states else None, need_state, need_aux, offset
            )
            new_states.append(state)
            stats.append(layer_stats)
        return self.transformer.ln_f(x), new_states, stats

    # ------------------------------------------------ recurrent decoding

    def new_state(self, batch: int) -> GenerationState:
        """Empty generation state: per layer, the slots' packed spectra [B, S, hcm_dim]."""
        device = self.transformer.wte.weight.device
        return GenerationState([block.mem.new_state(batch, device) for block in self.transformer.h])

    def prefill(
        self, idx: Tensor, state: GenerationState | None = None
    ) -> tuple[Tensor, GenerationState]:
        """Run a prompt [B, T] in parallel: (logits of its last token [B, 1, V], state).
        With a state, idx continues the stream that state has seen."""
        state = state if state is not None else self.new_state(idx.size(0))
        x, slots, _ = self._run(
            idx, state.slots, need_state=True, need_aux=False, offset=state.position
        )
        return self.lm_head(x[:, -1:, :]), GenerationState(slots, state.position + idx.size(1))

    def forward_step(self, idx_t: Tensor, state: GenerationState) -> tuple[Tensor, GenerationState]:
        """One token per row (idx_t [B] or [B, 1]) -> (logits [B, 1, V], new state)."""
        if len(state.slots) != self.config.n_layer:
            raise ValueError(
                f"got a state for {len(state.slots)} layers, the model has {self.config.n_layer}"
            )
        x = self.transformer.drop(self.transformer.wte(idx_t.reshape(-1)))
        slots = []
        for block, layer_state in zip(self.transformer.h, state.slots):
            x, layer_state = block.step(x, layer_state, state.position)
            slots.append(layer_state)
        logits = self.lm_head(self.transformer.ln_f(x)).unsqueeze(1)
        return logits, GenerationState(slots, state.position + 1)

    def state_bytes(self, batch: int = 1) -> int:
        """Bytes of the generation state: n_layer * S * hcm_dim float32 per row.

        The state is the slot spectra (and one position count, left out), so
        this does not depend on how many tokens have been seen (GPT-2's KV
        cache grows with each).
        """
        return state_nbytes(self.new_state(batch))

    def start_generation(self, idx: Tensor) -> tuple[Tensor, GenerationState]:
        return self.prefill(idx)

    def continue_generation(
        self, idx: Tensor, state: GenerationState
    ) -> tuple[Tensor, GenerationState]:
        """Tokens [B, t] one at a time through the recurrence."""
        steps = []
        for t in range(idx.size(1)):
            logits, state = self.forward_step(idx[:, t], state)
            steps.append(logits)
        return torch.cat(steps, dim=1), state

    def generation_bytes(self, seq_len: int, batch: int = 1) -> int:
        """The slot state: the same however many tokens were seen."""
        return self.state_bytes(batch)

    # ------------------------------------------------- trainer interface

    def describe_kernels(self) -> dict[str, str | None]:
        """The memory scan that runs where the model's weights are (every
        layer resolves HAMT_SCAN_BACKEND alike): backend, what was asked,
        why (auto's choice), kernel package. The trainer records this in
        metrics.json ("kernels"). Raises if triton was asked for where it
        cannot run."""
        device = self.transformer.wte.weight.device
        requested = self.config.scan_backend
        return self.transformer.h[0].mem.backend(device).as_record(requested)

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token: 6N + 3 * L * (memory work per layer).

        6N: forward and backward matmuls with the weights (N = num_params,
        which has no position table to leave out; c_in and c_proj included). The memory's weight-free work is counted
        per token for the forward pass and tripled like the weights'
        (backward ~ 2x forward). Per layer, D = hcm_dim, S = slots,
        C = min(chunk_size, seq_len):
          unit keys, bind and unbind on packed spectra: ~ 12 D;
          the chunk's mixing matrix, a [C, S] x [S, C] matmul: 2 C S;
          applying it (the full C x C, as computed): 2 C D;
          reading the chunk's start state and writing its end state: 4 S D;
          carrying the state from chunk to chunk: 2 S D / C.
        The DFT is folded into c_in / c_proj by FFTs of the weights once per
        call, a cost that does not grow with tokens and is left out; so are
        the retrieval loss (a few D per chunk) and elementwise gates,
        softmax, LayerNorm. Off the CPU, under torch.compile, or with a slot
        forgetting faster than the factored form allows, the mixing matrix is
        a broadcast costing about 3 C S instead (hamt/scan.py).
        """
        cfg = self.config
        dim, slots, chunk = cfg.hcm_dim, cfg.num_slots, min(cfg.chunk_size, seq_len)
        per_layer = 12 * dim + 2 * chunk * slots + 2 * chunk * dim + 4 * slots * dim
        per_layer += 2 * slots * dim / chunk
        return int(6 * self.num_params() + 3 * cfg.n_layer * per_layer)

    def aux_metrics(self) -> dict[str, float]:
        """From the last forward with targets: aux_loss (mean over layers of
        1 - cosine retrieval of earlier items, hamt/retrieval.py), lm_loss
        (the cross-entropy alone, comparable with GPT2's loss), how evenly
        the slots are written (hamt/routing.py's utilisation of the mean
        write gates, with adaptive slots the mean routing distribution, over
        the batch's tokens, averaged over layers): slot_utilisation, its
        entropy divided by log(num_slots) (1 = all slots written equally,
        0 = one slot), and slots_used, the fraction of slots taking over
        half a fair share; and with adaptive slots balance_loss.
        """
        if not self._last:
            return {}
        entropy, used = utilisation(self._last["gate_mean"].float())  # of [L, S]
        metrics = {
            "aux_loss": float(self._last["aux_loss"]),
            "lm_loss": float(self._last["lm_loss"]),
            "slot_utilisation": float(entropy.mean()),
            "slots_used": float(used.mean()),
        }
        if "balance_loss" in self._last:
            metrics["balance_loss"] = float(self._last["balance_loss"])
        return metrics


def state_nbytes(state: GenerationState | Tensor | list[Tensor]) -> int:
    """Bytes held by a generation state's slots (or one layer's tensor, or a list)."""
    if isinstance(state, GenerationState):
        state = state.slots
    tensors = state if isinstance(state, list) else [state]
    return sum(t.numel() * t.element_size() for t in tensors)
