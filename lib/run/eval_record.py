"""eval.json: what `make eval` measured for one run (or baseline) folder. A
record of the run folder, kept with the others (metrics.json, checkpoints) so
that what reads it (`make results`, a family's export card) needs no part of
lib/eval.

Written atomically by `make eval` / `make eval-baseline`, read by `make
results` through load_eval(); both check it against EvalRecord
(lib/run/record_model.py), the fields below it names. Schema (format 1):

    format     1
    created    ISO 8601 time (UTC)
    run_id     the folder's name
    model      {family, source: "run" | "pretrained", path, checkpoint, step,
                tokens_seen, params, block_size}; a baseline also architecture,
               tokenizer, vocab_size, start_token, trust_remote_code
    device, dtype
    settings   {stride, batch_size, max_tokens}: what every set was run with
    seconds    wall time of all sets
    measured   {tokens_per_sec, tokens, peak_memory_mb, memory, machine}: the
               cost over the perplexity sets (lib/eval/throughput.py)
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

`make lm-eval` (lib/eval/downstream.py) adds an "lm_eval" section, kept when
`make eval` rewrites the sets (a file it starts has "sets": {}):

    lm_eval    {created, harness ("lm-eval 0.4.13"), model (as above), device,
               dtype, settings {tasks (as asked), limit (0: all), batch_size,
               bootstrap_iters}, seconds,
               tasks {task: {metric: {value, stderr}}} (stderr null where
               lm-eval gives none; "metric,filter" under a filter other than
               lm-eval's "none"), groups {group: [its tasks]},
               samples {task: examples scored}, versions, n_shot}
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lib.atomic import write_json_atomic
from lib.run.record_model import EvalRecord, check

EVAL_FILE = "eval.json"
FORMAT = 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_eval(run_dir: Path, record: dict[str, Any]) -> Path:
    """Write eval.json; an lm_eval section already there stays unless record has one."""
    path = Path(run_dir) / EVAL_FILE
    if "lm_eval" not in record:
        old = load_eval(run_dir)
        if old is not None and "error" not in old and "lm_eval" in old:
            record = {**record, "lm_eval": old["lm_eval"]}
    record = {"format": FORMAT, **record}
    check(EvalRecord, path, record)  # lib/run/record_model.py: a wrong field is refused here
    write_json_atomic(path, record)
    return path


def write_lm_eval(run_dir: Path, section: dict[str, Any]) -> Path:
    """Set the lm_eval section of the run's eval.json, keeping its sets; without
    a usable eval.json, a new one with no sets."""
    record = load_eval(run_dir)
    if record is None or "error" in record:
        record = {
            "created": section["created"],
            "run_id": Path(run_dir).name,
            "model": section.get("model"),
            "sets": {},
        }
    record.pop("format", None)
    return write_eval(run_dir, {**record, "lm_eval": section})


# The metric a table shows for a task: the first of these it has, else its first.
PRIMARY_METRICS = ("acc_norm", "acc", "exact_match", "word_perplexity", "perplexity")


def lm_eval_scores(record: dict[str, Any]) -> dict[str, float]:
    """ "<task> <metric>" -> value, one figure per task that is not part of a
    group (a group shows its aggregate), for results tables. Never raises."""
    section = record.get("lm_eval")
    if not isinstance(section, dict) or not isinstance(section.get("tasks"), dict):
        return {}
    tasks, groups = section["tasks"], section.get("groups")
    children = (
        {
            c
            for kids in groups.values()
            if isinstance(kids, list)
            for c in kids
            if isinstance(c, str)
        }
        if isinstance(groups, dict)
        else set()
    )
    out = {}
    for task, metrics in tasks.items():
        if task in children or not isinstance(metrics, dict):
            continue
        ranked = [m for m in PRIMARY_METRICS if m in metrics] + list(metrics)
        for metric in ranked:
            entry = metrics[metric]
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{task} {metric}"] = float(value)
                break
    return out


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
