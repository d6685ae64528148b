"""The model card (README.md) written beside an exported Hugging Face GPT-2 folder.

Built from what the run recorded: its metrics.json (data, tokens seen, final
perplexity, pruning), eval.json when `make eval` ran, the config.txt it used,
and the sparsity measured on the exported weights themselves.
"""
from __future__ import annotations

from typing import Any

from torch import nn


def measured_sparsity(model: nn.Module) -> float:
    """Fraction of exact zeros in the weights a pruner may mask (model.prunable())."""
    weights = [p for _, p in model.prunable()]
    total = sum(p.numel() for p in weights)
    return sum(int((p == 0).sum()) for p in weights) / total if total else 0.0


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "n/a"
    return format(value, spec) if spec else str(value)


def _eval_rows(record: dict[str, Any] | None) -> list[str]:
    if not record or "error" in record:
        return []
    rows = ["", "## Evaluation (`make eval`)", "",
            "| Set | Figure | Tokens | Context / stride |", "|---|---|---|---|"]
    for name, entry in record.get("sets", {}).items():
        if not isinstance(entry, dict) or "skipped" in entry:
            continue
        if entry.get("kind") == "last_word":
            figure = f"accuracy {_fmt(entry.get('accuracy'), '.4f')}, ppl {_fmt(entry.get('perplexity'), '.2f')}"
            rows.append(f"| {name} | {figure} | {entry.get('examples')} passages | |")
        else:
            figure = f"ppl {_fmt(entry.get('perplexity'), '.3f')}"
            if entry.get("word_perplexity") is not None:
                figure += f" (word ppl {entry['word_perplexity']:.3f})"
            rows.append(f"| {name} | {figure} | {_fmt(entry.get('tokens'), ',')} | "
                        f"{entry.get('context')} / {entry.get('stride')} |")
    return rows


def model_card(run_id: str, step: int, checkpoint: str, model_config: dict[str, Any],
               metrics: dict[str, Any], sparsity: float, eval_record: dict[str, Any] | None,
               config_text: str, has_tokenizer: bool) -> str:
    """README.md text: front matter, model, data, results, sparsity, usage, configuration."""
    m, c = metrics, model_config
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation",
             "tags: [gpt2, kconfig-llm]", "---", "", f"# {run_id}", "",
             f"GPT-2 trained with kconfig-llm, exported from `{checkpoint}` at step {step} "
             f"(status: {m.get('status', 'n/a')}).", "", "## Model", "",
             "| Layers | Heads | Width | Context | Vocabulary | Parameters |", "|---|---|---|---|---|---|",
             f"| {c['n_layer']} | {c['n_head']} | {c['n_embd']} | {c['block_size']} | "
             f"{c['vocab_size']} | {_fmt(m.get('params'), ',')} |", "",
             "## Training data", "",
             f"- dataset: {m.get('dataset', 'n/a')}, tokenizer: {m.get('tokenizer', 'n/a')}",
             f"- tokens seen: {_fmt(m.get('tokens_seen'), ',')} over {m.get('iterations', 'n/a')} "
             f"iterations of {_fmt(m.get('tokens_per_iter'), ',')} tokens",
             f"- optimizer: {m.get('optimizer', 'n/a')}, dtype: {m.get('dtype', 'n/a')}", "",
             "## Results", "",
             f"- final validation loss {_fmt(m.get('final_val_loss'), '.4f')}, perplexity "
             f"{_fmt(m.get('final_val_perplexity'), '.2f')}",
             f"- best validation loss {_fmt(m.get('best_val_loss'), '.4f')}, perplexity "
             f"{_fmt(m.get('best_val_perplexity'), '.2f')}"]
    lines += _eval_rows(eval_record)
    lines += ["", "## Sparsity", "",
              f"- zero weights in the block matrices (measured on this export): {sparsity:.4f}"]
    if m.get("pruning_method"):
        method = " ".join(filter(None, (m["pruning_method"], m.get("pruning_variant"))))
        lines.append(f"- pruning: {method}, target "
                     f"{m.get('sparsity_target')}, reported {_fmt(m.get('sparsity'), '.4f')}")
    usage = ("tok = AutoTokenizer.from_pretrained(path)" if has_tokenizer else
             "# no Hugging Face tokenizer: the run used characters (ids in order of meta.json)")
    lines += ["", "## Usage", "", "```python",
              "from transformers import AutoTokenizer, GPT2LMHeadModel",
              "model = GPT2LMHeadModel.from_pretrained(path)", usage, "```", "",
              "## Configuration", "", "<details><summary>config.txt (options set)</summary>",
              "", "```", *[line for line in config_text.splitlines() if line.startswith("CONFIG_")],
              "```", "", "</details>", ""]
    return "\n".join(lines)
