"""`make eval` and `make eval-baseline`: the configured sets, one model, eval.json.

The EVAL_* symbols say which sets to run and how (lib/eval/Kconfig). A run is
evaluated from its checkpoint with its own tokenizer, and its validation split
is found through the configuration it recorded (config.txt); a pretrained
baseline is any Hugging Face causal LM folder (lib/eval/baseline.py), scored
with its own tokenizer. Both records carry tokens/s and peak memory
(lib/eval/throughput.py) and, for text sets, bits per byte and word-level
perplexity, the figures that compare across tokenizers.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config
from lib.data.prepared import data_dir
from lib.data.sources import DataError
from lib.data.tokenizers import GPT2Tokenizer, Tokenizer, tokenizer_from_meta
from lib.eval import sets as eval_sets
from lib.eval import throughput
from lib.eval.lambada import last_word_accuracy
from lib.eval.perplexity import sliding_window_nll
from lib.run.environment import environment
from lib.run.eval_record import now_iso, write_eval
from lib.speed.precision import Precision, resolve_device, resolve_precision

if TYPE_CHECKING:
    from lib.config.symbols import Eval, Speed

Log = Callable[[str], None]


@dataclass(frozen=True)
class EvalPlan:
    """What to evaluate and how, from the EVAL_* symbols."""

    stride: int  # 0: half the model's context
    batch_size: int
    max_tokens: int  # 0: whole sets
    val: bool
    wikitext2: bool
    wikitext103: bool
    lambada: bool
    text_file: str
    detokenize: bool

    @classmethod
    def from_run(cls, e: Eval) -> EvalPlan:
        return cls(
            stride=e.EVAL_STRIDE,
            batch_size=e.EVAL_BATCH_SIZE,
            max_tokens=e.EVAL_MAX_TOKENS,
            val=e.EVAL_VAL,
            wikitext2=e.EVAL_WIKITEXT2,
            wikitext103=e.EVAL_WIKITEXT103,
            lambada=e.EVAL_LAMBADA,
            text_file=e.EVAL_TEXT_FILE,
            detokenize=e.EVAL_WIKITEXT_DETOKENIZE,
        )

    def stride_for(self, block: int) -> int:
        stride = self.stride or max(1, block // 2)
        if stride > block:
            raise ValueError(
                f"CONFIG_EVAL_STRIDE={stride} exceeds the model's context of "
                f"{block} tokens: allowed 1 to {block}, or 0 for half of it"
            )
        return stride


def gather(plan: EvalPlan, tokenizer: Tokenizer, val: Path | str | None) -> list[eval_sets.EvalSet]:
    """Fetch and tokenize every requested set before any is evaluated; all
    problems together in one DataError. val: the run's prepared dataset
    folder, or a string saying why the validation split does not apply."""
    loaders: list[tuple[str, Callable[[], eval_sets.EvalSet]]] = []
    if plan.val and isinstance(val, Path):
        loaders.append(("val", lambda: eval_sets.validation_split(val)))
    for name, wanted in (("wikitext-2", plan.wikitext2), ("wikitext-103", plan.wikitext103)):
        if wanted:
            loaders.append((name, partial(eval_sets.wikitext, name, plan.detokenize)))
    if plan.text_file:
        loaders.append(("text", lambda: eval_sets.text_file(plan.text_file)))
    if plan.lambada:
        loaders.append(("lambada", eval_sets.lambada))
    found, problems = [], []
    for name, load in loaders:
        try:
            s = load()
            if s.text is not None:
                eot = [tokenizer.eot_token] if tokenizer.eot_token is not None else []
                s.ids = np.asarray(eot + tokenizer.encode(s.text), dtype=np.int64)
            found.append(s)
        except (DataError, ValueError) as err:
            problems.append(f"{name}: {err}")
    if problems:
        raise DataError("cannot evaluate:\n  " + "\n  ".join(problems))
    return found


def evaluate_sets(
    model: nn.Module,
    tokenizer: Tokenizer,
    found: list[eval_sets.EvalSet],
    plan: EvalPlan,
    block: int,
    precision: Precision,
    log: Log,
) -> dict[str, Any]:
    """{set name: eval.json entry} for each gathered set."""
    stride, device = plan.stride_for(block), precision.device
    entries: dict[str, Any] = {}
    model.eval()
    for s in found:
        started = time.perf_counter()
        if s.passages:
            entry = {
                "kind": "last_word",
                "source": s.source,
                **last_word_accuracy(
                    model,
                    tokenizer,
                    s.passages,
                    block,
                    plan.batch_size,
                    device,
                    precision.autocast(),
                    progress="eval lambada",
                ),
            }
            summary = f"accuracy {entry['accuracy']:.4f} over {entry['examples']} passages"
        else:
            assert s.ids is not None, "gather() tokenizes every set without passages"
            cut = 0 < plan.max_tokens < len(s.ids)
            ids = torch.from_numpy(
                np.asarray(s.ids[: plan.max_tokens] if cut else s.ids, dtype=np.int64)
            )
            _check_ids(s, ids, tokenizer.vocab_size)
            result = sliding_window_nll(
                model,
                ids,
                block,
                stride,
                plan.batch_size,
                device,
                precision.autocast(),
                progress=f"eval {s.name}",
            )
            entry = {"kind": "perplexity", "source": s.source, **result.as_dict(), "truncated": cut}
            if s.chars and not cut:  # the run's val split: comparable across tokenizers
                entry.update(chars=s.chars, loss_per_char=result.loss * len(ids) / s.chars)
            if s.text is not None and not cut:
                n_bytes = len(s.text.encode("utf-8"))
                entry.update(
                    words=s.words,
                    word_perplexity=math.exp(min(result.nll / s.words, 700)),
                    bytes=n_bytes,
                    bits_per_byte=result.nll / n_bytes / math.log(2),
                    detokenized=s.detokenized,
                )
            summary = (
                f"ppl {entry['perplexity']:.3f} over {entry['tokens']:,} tokens "
                f"(context {block}, stride {stride})"
            )
            if "word_perplexity" in entry:
                summary += f"; word ppl {entry['word_perplexity']:.3f}"
        entry["seconds"] = round(time.perf_counter() - started, 3)
        entries[s.name] = entry
        log(f"eval {s.name}: {summary} in {entry['seconds']:.1f}s")
    return entries


def _check_ids(s: eval_sets.EvalSet, ids: torch.Tensor, vocab_size: int) -> None:
    """DataError naming the set and the first id the model has no embedding for."""
    bad = torch.nonzero(ids >= vocab_size)
    if bad.numel():
        at = int(bad[0, 0])
        raise DataError(
            f"eval {s.name}: {s.source} holds token id {int(ids[at]):,} at position "
            f"{at:,}, but the model's tokenizer has {vocab_size:,} ids (0 to "
            f"{vocab_size - 1:,}): it was tokenized for another vocabulary. "
            f"Prepare the run's dataset again (`make prepare`), or turn the set off."
        )


def _evaluate(
    model: nn.Module,
    tokenizer: Tokenizer,
    val: Path | str | None,
    e: Eval,
    s: Speed,
    model_info: dict[str, Any],
    out_dir: Path,
    log: Log,
) -> dict[str, Any]:
    plan = EvalPlan.from_run(e)
    block = model_info["block_size"]
    plan.stride_for(block)  # a bad stride fails before any download
    found = gather(plan, tokenizer, val)
    device = resolve_device(s.DEVICE)
    precision = resolve_precision(s, device)
    model.to(device)
    throughput.start(device)
    started = time.perf_counter()
    entries = evaluate_sets(model, tokenizer, found, plan, block, precision, log)
    if plan.val and isinstance(val, str):
        entries["val"] = {"skipped": val}
    record = {
        "created": now_iso(),
        "run_id": out_dir.name,
        "model": model_info,
        "device": device.type,
        "dtype": precision.dtype,
        "environment": environment(),
        "settings": {
            "stride": plan.stride_for(block),
            "batch_size": plan.batch_size,
            "max_tokens": plan.max_tokens,
        },
        "seconds": round(time.perf_counter() - started, 3),
        "measured": throughput.measured(entries, device),
        "sets": entries,
    }
    path = write_eval(out_dir, record)
    log(f"wrote {path}")
    return record


def evaluate_run(run_dir: Path, checkpoint: str, eval_cfg: Any, log: Log = print) -> dict[str, Any]:
    """Evaluate results/<run>'s ckpt_<checkpoint>.pt; writes <run>/eval.json."""
    from lib.model import registry
    from lib.run.checkpoint import load_checkpoint

    run_dir = Path(run_dir).resolve()
    state = load_checkpoint(run_dir / f"ckpt_{checkpoint}.pt")
    model = registry.model_from_state(state)
    tokens_seen = None
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        try:
            tokens_seen = json.loads(metrics.read_text()).get("tokens_seen")
        except ValueError:
            pass
    info = {
        "family": state["family"],
        "source": "run",
        "path": str(run_dir),
        "checkpoint": checkpoint,
        "step": state["step"],
        "tokens_seen": tokens_seen,
        "params": sum(p.numel() for p in model.parameters()),
        "block_size": model.config.block_size,
    }
    return _evaluate(
        model,
        tokenizer_from_meta(state["tokenizer"]),
        _run_val_dir(run_dir),
        eval_cfg.eval,
        eval_cfg.speed,
        info,
        run_dir,
        log,
    )


def _run_val_dir(run_dir: Path) -> Path | str:
    try:
        return data_dir(load_run_config([], path=run_dir / "config.txt").data)
    except ConfigError as err:
        return f"the run's config.txt no longer loads, so its dataset is unknown: {err}"


def evaluate_baseline(model_dir: Path, eval_cfg: Any, log: Log = print) -> dict[str, Any]:
    """Evaluate a Hugging Face causal LM folder (lib/eval/baseline.py); writes
    <results>/baseline-<folder name>/eval.json."""
    from lib.data.prepared import ensure_prepared
    from lib.eval.baseline import baseline_dir, load_baseline

    trust = eval_cfg.eval.EVAL_TRUST_REMOTE_CODE
    model, tokenizer, info = load_baseline(Path(model_dir), trust)
    val: Path | str = (
        "the validation split is stored as the configured tokenizer's ids and this "
        "baseline's tokenizer is another; compare on text sets (EVAL_WIKITEXT2, "
        "EVAL_WIKITEXT103, EVAL_TEXT_FILE)"
    )
    if eval_cfg.EVAL_VAL and eval_cfg.DATA_TOKENIZER == "gpt2" and _is_gpt2_bpe(tokenizer):
        val = ensure_prepared(eval_cfg.data, log)
    out_dir = baseline_dir(Path(model_dir), eval_cfg)
    log(
        f"baseline {model_dir}: {info['architecture']}, {info['params']:,} parameters, "
        f"context {info['block_size']}, start token {info['start_token']!r}"
    )
    return _evaluate(model, tokenizer, val, eval_cfg.eval, eval_cfg.speed, info, out_dir, log)


def _is_gpt2_bpe(tokenizer: Tokenizer) -> bool:
    """Whether a baseline's tokenizer gives GPT-2 BPE's ids, so that a prepared
    GPT-2 BPE validation split means the same text to it."""
    probe = "Hello world, it's 2024!\n  café <probe> ünïcode"
    ref = GPT2Tokenizer()
    return tokenizer.eot_token == ref.eot_token and tokenizer.encode(probe) == ref.encode(probe)
