"""The model card (README.md) written beside an exported Hugging Face folder
(GPT-2 in either layout, gpt2/export.py; HAMT, hamt/export.py).

Built from what the run recorded: its metrics.json (data, tokens seen, final
perplexity, pruning), eval.json when `make eval` ran, the config.txt it used,
and the sparsity measured on the exported weights themselves. A folder with
remote code also says what that code is and how its generate differs.
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
    rows = [
        "",
        "## Evaluation (`make eval`)",
        "",
        "| Set | Figure | Tokens | Context / stride |",
        "|---|---|---|---|",
    ]
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
            rows.append(
                f"| {name} | {figure} | {_fmt(entry.get('tokens'), ',')} | "
                f"{entry.get('context')} / {entry.get('stride')} |"
            )
    return rows


SHAPE = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")
REMOTE_CODE = [
    "",
    "## Remote code",
    "",
    "transformers has no class for this model, so the folder carries its code:",
    "`modeling_kconfig_llm.py` and the kconfig-llm modules it imports, copied at export",
    "with their imports made relative. transformers runs it only with",
    "`trust_remote_code=True`; read it first. `generate` recomputes the whole context at",
    "every step (no transformers cache: the model's own caches, which kconfig-llm's",
    "`make sample` uses, are not `Cache` objects), so a token costs a forward pass over",
    "the context (GPT-2: the last `block_size` tokens). Batches with padding (zeros in",
    "`attention_mask`) are refused. The loss with `labels` is the cross-entropy alone,",
    "without any auxiliary training term.",
]


def _usage(has_tokenizer: bool, tokenizer_name: str, remote_code: bool) -> list[str]:
    none = "# no Hugging Face tokenizer: the run used"
    if has_tokenizer:
        tokenizer = "tok = AutoTokenizer.from_pretrained(path)"
    elif tokenizer_name == "char":
        tokenizer = f"{none} characters (ids in order of meta.json)"
    else:
        tokenizer = f"{none} its own {tokenizer_name} (meta.json)"
    if remote_code:  # AutoTokenizer reads config.json, so it runs the code too
        tokenizer = tokenizer.replace("(path)", "(path, trust_remote_code=True)")
        return [
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True)",
            tokenizer,
        ]
    return [
        "from transformers import AutoTokenizer, GPT2LMHeadModel",
        "model = GPT2LMHeadModel.from_pretrained(path)",
        tokenizer,
    ]


def model_card(
    run_id: str,
    step: int,
    checkpoint: str,
    model_config: dict[str, Any],
    metrics: dict[str, Any],
    sparsity: float,
    eval_record: dict[str, Any] | None,
    config_text: str,
    has_tokenizer: bool,
    architecture: str = "GPT-2",
    family: str = "gpt2",
    remote_code: bool = False,
) -> str:
    """README.md text: front matter, model, data, results, sparsity, usage, configuration.
    A remote-code export also lists the model's options (its code reads them from
    config.json's model_config) and describes that code."""
    m, c = metrics, model_config
    options = ", ".join(f"{k} {v}" for k, v in c.items() if k not in SHAPE)
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-generation",
        f"tags: [{family}, kconfig-llm{', custom_code' if remote_code else ''}]",
        "---",
        "",
        f"# {run_id}",
        "",
        f"{architecture} trained with kconfig-llm, exported from `{checkpoint}` at step "
        f"{step} (status: {m.get('status', 'n/a')}).",
        "",
        "## Model",
        "",
        "| Layers | Heads | Width | Context | Vocabulary | Parameters |",
        "|---|---|---|---|---|---|",
        f"| {c['n_layer']} | {c['n_head']} | {c['n_embd']} | {c['block_size']} | "
        f"{c['vocab_size']} | {_fmt(m.get('params'), ',')} |",
        "",
        *([f"Options: {options}.", ""] if remote_code else []),
        "## Training data",
        "",
        f"- dataset: {m.get('dataset', 'n/a')}, tokenizer: {m.get('tokenizer', 'n/a')}",
        f"- tokens seen: {_fmt(m.get('tokens_seen'), ',')} over {m.get('iterations', 'n/a')} "
        f"iterations of {_fmt(m.get('tokens_per_iter'), ',')} tokens",
        f"- optimizer: {m.get('optimizer', 'n/a')}, dtype: {m.get('dtype', 'n/a')}",
        "",
        "## Results",
        "",
        f"- final validation loss {_fmt(m.get('final_val_loss'), '.4f')}, perplexity "
        f"{_fmt(m.get('final_val_perplexity'), '.2f')}",
        f"- best validation loss {_fmt(m.get('best_val_loss'), '.4f')}, perplexity "
        f"{_fmt(m.get('best_val_perplexity'), '.2f')}",
    ]
    lines += _eval_rows(eval_record)
    lines += [
        "",
        "## Sparsity",
        "",
        f"- zero weights in the block matrices (measured on this export): {sparsity:.4f}",
    ]
    if m.get("pruning_method"):
        method = " ".join(filter(None, (m["pruning_method"], m.get("pruning_variant"))))
        lines.append(
            f"- pruning: {method}, target "
            f"{m.get('sparsity_target')}, reported {_fmt(m.get('sparsity'), '.4f')}"
        )
    usage = _usage(has_tokenizer, str(m.get("tokenizer", "tokenizer")), remote_code)
    lines += ["", "## Usage", "", "```python", *usage, "```"]
    if remote_code:
        lines += REMOTE_CODE
    lines += [
        "",
        "## Configuration",
        "",
        "<details><summary>config.txt (options set)</summary>",
        "",
        "```",
        *[line for line in config_text.splitlines() if line.startswith("CONFIG_")],
        "```",
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)
