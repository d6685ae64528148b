"""Any run's model as a model of EleutherAI's lm-evaluation-harness (lm-eval).

KconfigLM wraps a lib.model.interface.LanguageModel and its tokenizer as an
lm_eval.api.model.LM, registered as "kconfig-llm", so every lm-eval task
scores every family the same way. It follows the conventions of lm-eval's
Hugging Face model (HFLM), which published figures come from:

* loglikelihood(context, continuation): trailing spaces of the context move to
  the continuation, whose tokens are those of encode(context + continuation)
  after encode(context). An empty context is the end-of-text token (with the
  char tokenizer, which has none, the first token is the context and goes
  unscored). The model reads at most its block of tokens: a longer context
  loses its start.
* loglikelihood_rolling(text): disjoint windows of a block each
  (lm_eval.utils.get_rolling_token_windows), the first after end-of-text, so
  every token is scored once; the last window keeps a full block of context.
* generate_until: greedy, one request at a time, the context's last block of
  tokens through the family's generation state (start_generation, then
  continue_generation per token) for as long as the family takes it: HAMT's
  recurrence runs on past the block; GPT-2's learned positions end there, so
  from then on every step reads the last block of tokens again, as GPT-2's
  own generate does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from lib.data.tokenizers import Tokenizer, tokenizer_from_meta
from lib.model.interface import LanguageModel

MODEL_NAME = "kconfig-llm"
DEFAULT_BATCH = 8
MAX_GEN_TOKS = 256  # lm-eval's default when a task sets no max_gen_toks

Pair = tuple[list[int], list[int]]  # (context ids, continuation ids)


def load_run_model(
    run_dir: Path, checkpoint: str = "best"
) -> tuple[LanguageModel, Tokenizer, dict[str, Any]]:
    """The model and tokenizer of results/<run>/ckpt_<checkpoint>.pt, and what
    eval.json records about them."""
    from lib.model import registry
    from lib.run.checkpoint import load_checkpoint

    state = load_checkpoint(Path(run_dir) / f"ckpt_{checkpoint}.pt")
    model = registry.model_from_state(state)
    info = {
        "family": state["family"],
        "source": "run",
        "path": str(Path(run_dir).resolve()),
        "checkpoint": checkpoint,
        "step": state["step"],
        "params": sum(p.numel() for p in model.parameters()),
        "block_size": model.config.block_size,
    }
    return model, tokenizer_from_meta(state["tokenizer"]), info


@register_model(MODEL_NAME)
class KconfigLM(LM):
    """lm-eval's model interface over one of our models.

    Either run=<run folder> (and checkpoint=best|latest), as lm-eval's
    model_args give it, or model= and tokenizer= already loaded. batch_size
    counts sequences per forward pass ("auto" is the default, 8);
    max_batch_size, which lm-eval passes to every model, is not used.
    """

    def __init__(
        self,
        run: str | None = None,
        checkpoint: str = "best",
        *,
        model: LanguageModel | None = None,
        tokenizer: Tokenizer | None = None,
        batch_size: int | str | None = DEFAULT_BATCH,
        device: str | None = None,
        autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
        max_gen_toks: int = MAX_GEN_TOKS,
        max_batch_size: int | None = None,
    ) -> None:
        super().__init__()
        if model is None or tokenizer is None:
            if not run:
                raise ValueError(f"{MODEL_NAME} needs run=<run folder>, or a model and tokenizer")
            model, tokenizer, _ = load_run_model(Path(run), checkpoint)
        self._device = torch.device(device) if device else next(model.parameters()).device
        self.model = model.to(self._device).eval()
        self.tokenizer = tokenizer
        self.block = int(model.config.block_size)
        self.batch_size = int(str(batch_size)) if str(batch_size).isdigit() else DEFAULT_BATCH
        self.autocast = autocast or contextlib.nullcontext
        self.max_gen_toks = int(max_gen_toks)

    # ------------------------------------------------------------ scoring

    def encode_pair(self, context: str, continuation: str) -> Pair:
        """Token ids of a (context, continuation) request, as HFLM makes them."""
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        if not context:
            ids = self.tokenizer.encode(continuation)
            eot = self.tokenizer.eot_token
            return ([eot], ids) if eot is not None else (ids[:1], ids[1:])
        ctx = self.tokenizer.encode(context)
        return ctx, self.tokenizer.encode(context + continuation)[len(ctx) :]

    @torch.no_grad()
    def score(self, pairs: Sequence[Pair]) -> list[tuple[float, bool]]:
        """Summed log-probability (nats) of each continuation after its context,
        and whether greedy decoding gives every one of its tokens. Batched
        longest first with right padding: the model is causal, so padding after
        a sequence cannot change its logits."""
        out: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)  # empty continuations
        rows = []
        for i, (ctx, cont) in enumerate(pairs):
            if not cont:
                continue
            if not ctx or len(cont) > self.block:
                raise ValueError(
                    f"a continuation of {len(cont)} tokens after {len(ctx)} of "
                    f"context cannot be scored: it needs at least one token "
                    f"before it, and at most {self.block} in all"
                )
            ids = (ctx + cont)[-(self.block + 1) :]  # the context loses its start
            rows.append((i, ids[:-1], cont))
        rows.sort(key=lambda r: -len(r[1]))
        for start in range(0, len(rows), self.batch_size):
            group = rows[start : start + self.batch_size]
            x = torch.zeros(len(group), len(group[0][1]), dtype=torch.long)
            y = torch.full_like(x, -1)  # -1: not scored (context and padding)
            for row, (_, inputs, cont) in enumerate(group):
                x[row, : len(inputs)] = torch.tensor(inputs)
                y[row, len(inputs) - len(cont) : len(inputs)] = torch.tensor(cont)
            x, y = x.to(self._device), y.to(self._device)
            with self.autocast():
                logits, _ = self.model(x, y)  # targets: logits for every position
            for row, (i, _, _) in enumerate(group):
                keep = y[row] >= 0
                logp = F.log_softmax(logits[row][keep].float(), dim=-1)
                target = y[row][keep]
                out[i] = (
                    logp.gather(1, target[:, None]).sum().item(),
                    bool((logp.argmax(-1) == target).all()),
                )
        return out

    def loglikelihood(
        self, requests: list[Any], disable_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        results = self.score([self.encode_pair(*r.args) for r in requests])
        for r, result in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", r.args, result)
        return results

    def rolling_windows(self, text: str) -> list[Pair]:
        """(context, continuation) windows that score every token of text once."""
        ids = self.tokenizer.encode(text)
        prefix = self.tokenizer.eot_token
        if prefix is None:  # no end-of-text token: the first token only gives context
            if len(ids) < 2:
                return []
            prefix, ids = ids[0], ids[1:]
        return [
            make_disjoint_window(w)
            for w in get_rolling_token_windows(ids, prefix, self.block, context_len=1)
        ]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        windows = [self.rolling_windows(r.args[0]) for r in requests]
        scores = iter(self.score([w for doc in windows for w in doc]))
        results = [sum(next(scores)[0] for _ in doc) for doc in windows]
        for r, result in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, result)
        return results

    # --------------------------------------------------------- generation

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        results = []
        for r in requests:
            context, kwargs = r.args
            until = kwargs.get("until") or []
            text = self.greedy(
                context,
                [until] if isinstance(until, str) else list(until),
                int(kwargs.get("max_gen_toks", self.max_gen_toks)),
            )
            self.cache_hook.add_partial("generate_until", r.args, text)
            results.append(text)
        return results

    @torch.no_grad()
    def greedy(self, context: str, until: list[str], max_tokens: int) -> str:
        """The greedy continuation of context, cut before the first stop string;
        it ends early at end-of-text. Sampling settings of a task are ignored."""
        eot = self.tokenizer.eot_token
        seq = self.tokenizer.encode(context)[-self.block :]
        if not seq:
            if eot is None:
                raise ValueError(
                    "an empty context needs an end-of-text token to start from, "
                    "and this tokenizer has none"
                )
            seq = [eot]
        new: list[int] = []
        with self.autocast():
            logits, state = self.model.start_generation(self._tensor(seq))
            for step in range(max_tokens):
                token = int(logits[0, -1].argmax())
                if token == eot:
                    break
                new.append(token)
                seq.append(token)
                text = self.tokenizer.decode(new)
                stops = [i for s in until if s and (i := text.find(s)) >= 0]
                if stops:
                    return text[: min(stops)]
                if step + 1 == max_tokens:
                    break
                logits, state = self._advance(seq, state)
        return self.tokenizer.decode(new)

    def _advance(self, seq: list[int], state: Any) -> tuple[torch.Tensor, Any]:
        """Logits after seq's newest token: through the generation state while
        the family takes it (HAMT's recurrence runs past the block); a family
        whose positions end at the block refuses there with a ValueError (GPT-2),
        and from then on every step reads the last block of tokens again."""
        if state is not None:
            try:
                return self.model.continue_generation(self._tensor(seq[-1:]), state)
            except ValueError:
                if len(seq) <= self.block:
                    raise
        logits, _ = self.model.start_generation(self._tensor(seq[-self.block :]))
        return logits, None

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self._device)
