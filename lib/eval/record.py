"""eval.json: what `make eval` measured for one run (or baseline) folder.

Written atomically by `make eval` / `make eval-baseline`, read by `make
results` through load_eval(). Schema (format 1):

    format     1
    created    ISO 8601 time (UTC)
    run_id     the folder's name
    model      {family, source: "run" | "pretrained", path, checkpoint, step,
                tokens_seen, params, block_size}
    device, dtype
    settings   {stride, batch_size, max_tokens}: what every set was run with
    seconds    wall time of all sets
    sets       {name: entry}; names: "val" (the training dataset's validation
               split), "wikitext-2", "wikitext-103", "text" (CONFIG_EVAL_TEXT_FILE),
               "lambada"

A perplexity entry ("kind": "perplexity"): source, loss (nats per token),
perplexity, nll (summed nats), tokens (tokens scored), windows, context,
stride, truncated (CONFIG_EVAL_MAX_TOKENS cut the set), seconds; for whole
texts also words and word_perplexity (exp(nll / words), words counted by
whitespace in the original text: the GPT-2 paper's WikiText unit), bytes,
bits_per_byte and detokenized. A last-word entry ("kind": "last_word"):
source, accuracy, correct, examples, perplexity (per word), target_tokens,
seconds. A set that does not apply holds {"skipped": reason} instead.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lib.run.atomic import write_json_atomic

EVAL_FILE = "eval.json"
FORMAT = 1


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_eval(run_dir: Path, record: dict[str, Any]) -> Path:
    path = Path(run_dir) / EVAL_FILE
    write_json_atomic(path, {"format": FORMAT, **record})
    return path


def load_eval(run_dir: Path | str) -> dict[str, Any] | None:
    """The run's eval.json; None when there is none, {"error": why} when it
    cannot be used. Never raises: a results table must survive one bad file."""
    path = Path(run_dir) / EVAL_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {"error": f"{path}: unreadable ({type(exc).__name__}: {exc})"}
    if not isinstance(record, dict):
        return {"error": f"{path}: not a JSON object"}
    if record.get("format") != FORMAT:
        return {"error": f"{path}: format {record.get('format')!r}, this version reads {FORMAT}"}
    if not isinstance(record.get("sets"), dict):
        return {"error": f"{path}: no 'sets' object"}
    return record
