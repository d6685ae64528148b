"""Generation samples during training: a fixed prompt's greedy continuation.

With CONFIG_EVAL_SAMPLES the trainer runs SampleLog after every evaluation (an
analysis lib/eval/rules.py registers, lib/train/hooks.py);
the continuation goes to output.log and, as one JSON line, to the run's
samples.jsonl: {"step", "prompt", "text", "tokens"}. Greedy decoding draws
no random numbers, so samples change neither the run's results nor an exact
resume. A prompt the tokenizer cannot encode, or a failing generation, warns
once and turns samples off; it never stops training.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from lib.data.tokenizers import tokenizer_from_meta
from lib.run.safe_open import open_append
from lib.train.hooks import Analysis

if TYPE_CHECKING:
    from lib.config.symbols import Eval

SAMPLES_FILE = "samples.jsonl"


class SampleLog(Analysis):
    def __init__(
        self,
        e: Eval,
        run_dir: Path,
        tokenizer_meta: dict[str, Any],
        log: Callable[[str], None],
        main: bool = True,
    ):
        """main: whether this process samples (the first rank of a distributed run)."""
        self.log, self.path = log, Path(run_dir) / SAMPLES_FILE
        self.enabled = main and e.EVAL_SAMPLES
        if not self.enabled:
            return
        self.prompt, self.tokens = e.EVAL_SAMPLE_PROMPT, e.EVAL_SAMPLE_TOKENS
        self.tokenizer = tokenizer_from_meta(tokenizer_meta)
        try:
            self.ids = self.tokenizer.encode(self.prompt)
            if not self.ids:
                if self.tokenizer.eot_token is None:
                    raise ValueError(
                        "the prompt is empty and the tokenizer has no "
                        "end-of-text token to start from"
                    )
                self.ids = [self.tokenizer.eot_token]
        except ValueError as err:
            self._off(f"CONFIG_EVAL_SAMPLE_PROMPT={self.prompt!r}: {err}")

    def _off(self, why: str) -> None:
        self.enabled = False
        self.log(f"WARNING: generation samples are off for this run: {why}")

    @torch.no_grad()
    def after_eval(self, step: int, model: nn.Module, device: torch.device) -> None:
        if not self.enabled:
            return
        try:
            idx = torch.tensor([self.ids], dtype=torch.long, device=device)
            out = model.generate(idx, self.tokens, temperature=0.0)
            new = out[0, len(self.ids) :].tolist()
            text = self.tokenizer.decode(new)
            self.log(f"sample step {step}: {self.prompt!r} -> {text!r}")
            with open_append(self.path, encoding="utf-8") as f:  # never through a link
                f.write(
                    json.dumps({"step": step, "prompt": self.prompt, "text": text, "tokens": new})
                    + "\n"
                )
        except Exception as err:  # a sample must never end a run
            self._off(f"{type(err).__name__}: {err}")
