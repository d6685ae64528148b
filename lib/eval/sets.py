"""Evaluation data: WikiText test sets and LAMBADA from the hub, the run's own
validation split, and a local text file.

Every set is fetched before any model runs, so a set that cannot be had (no
network, a missing file) stops `make eval` at once with the symbol to change,
instead of after minutes of evaluating the others. Hub sets go through the
`datasets` package and need a network the first time (its cache serves them
afterwards, also with HF_HUB_OFFLINE=1, which never contacts the hub).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lib.data.meta import SPLIT_FILES, load_meta
from lib.data.sources import (
    HUB_DATASETS,
    HUB_TIMEOUT_S,
    DataError,
    hub_offline,
    offline_reason,
    unset_advice,
)
from lib.data.valchars import val_chars
from lib.data.validate import check_prepared
from lib.paths import from_root

# Set name -> (hub path, hub config, split, text field, the symbol that asks for it).
HUB_SETS = {
    "wikitext-2": (
        HUB_DATASETS["wikitext-2"].path,
        HUB_DATASETS["wikitext-2"].config,
        "test",
        "text",
        "EVAL_WIKITEXT2",
    ),
    "wikitext-103": (
        HUB_DATASETS["wikitext-103"].path,
        HUB_DATASETS["wikitext-103"].config,
        "test",
        "text",
        "EVAL_WIKITEXT103",
    ),
    # OpenAI's LAMBADA test set as GPT-2 used it (5,153 passages).
    "lambada": ("EleutherAI/lambada_openai", "default", "test", "text", "EVAL_LAMBADA"),
}


@dataclass
class EvalSet:
    """One evaluation set: a text to tokenize, token ids already made, or passages."""

    name: str
    source: str
    text: str | None = None
    ids: np.ndarray | None = None
    passages: list[str] = field(default_factory=list)
    words: int | None = None  # words of the original text, for word-level perplexity
    detokenized: bool = False
    chars: int | None = None  # characters the ids decode to (the val split: valchars.py)


def hub_rows(name: str) -> list[str]:
    """The rows of a hub set's text field; DataError at once when unreachable."""
    path, config, split, text_field, symbol = HUB_SETS[name]

    def unreachable(why: str) -> DataError:
        return DataError(
            f"evaluation set {name!r} comes from the Hugging Face hub ({path}), "
            f"which cannot be used here: {why}. Connect to the network"
            f"{unset_advice()}, or turn CONFIG_{symbol} off; a local text "
            f"file can be evaluated with CONFIG_EVAL_TEXT_FILE."
        )

    try:
        if not hub_offline():
            from huggingface_hub import HfApi

            HfApi().dataset_info(path, timeout=HUB_TIMEOUT_S)  # seconds, not minutes of retries
        from datasets import load_dataset

        rows = load_dataset(path, config, split=split)  # offline: the datasets cache, or an error
        return [row[text_field] for row in rows]
    except Exception as exc:  # DNS, timeout, 404, gated, renamed: all the same to the user
        why = f"{type(exc).__name__}: {exc}"
        if hub_offline():
            why = f"{offline_reason()} and the set is not in the datasets cache ({why})"
        raise unreachable(why) from exc


# WikiText is stored tokenized (" @-@ ", " , ", "( x )"); GPT-2 was evaluated on
# detokenized text. These rules undo that tokenization as far as is safe.
_PLAIN = [
    (" @-@ ", "-"),
    (" @,@ ", ","),
    (" @.@ ", "."),
    (" , ", ", "),
    (" . ", ". "),
    (" ; ", "; "),
    (" : ", ": "),
    (" ! ", "! "),
    (" ? ", "? "),
    (" 's ", "'s "),
    (" n't ", "n't "),
    (" 're ", "'re "),
    (" 've ", "'ve "),
    (" 'll ", "'ll "),
    (" 'd ", "'d "),
    (" 'm ", "'m "),
]
_PAIRED = [
    (re.compile(r"\( ([^()\n]*?) \)"), r"(\1)"),
    (re.compile(r"\[ ([^\[\]\n]*?) \]"), r"[\1]"),
    (re.compile(r'" ([^"\n]*?) "'), r'"\1"'),
]


def detokenize_wikitext(text: str) -> str:
    """WikiText's tokenized form back towards ordinary prose."""
    for old, new in _PLAIN:
        text = text.replace(old, new)
    for pattern, repl in _PAIRED:
        text = pattern.sub(repl, text)
    text = re.sub(r" ([.,;:!?])(?=\n|$)", r"\1", text)  # punctuation ending a line
    text = re.sub(r"(?<==) (?==)", "", text)  # "= = Heading = =" -> "== Heading =="
    return re.sub(r"^ | $", "", text, flags=re.M)  # the space starting/ending each line


def wikitext(name: str, detokenize: bool) -> EvalSet:
    """A WikiText test set as one text; blank rows become the blank lines they were."""
    text = "".join(row or "\n" for row in hub_rows(name))
    path, config = HUB_SETS[name][:2]
    out = detokenize_wikitext(text) if detokenize else text
    return EvalSet(
        name,
        f"hf:{path} ({config}), test",
        text=out,
        words=len(text.split()),
        detokenized=detokenize,
    )


def lambada() -> EvalSet:
    path, config = HUB_SETS["lambada"][:2]
    return EvalSet("lambada", f"hf:{path} ({config}), test", passages=hub_rows("lambada"))


def text_file(path: str) -> EvalSet:
    """A local UTF-8 text file (CONFIG_EVAL_TEXT_FILE; relative to the project root)."""
    p = from_root(Path(path).expanduser())
    if not p.is_file():
        raise DataError(
            f'CONFIG_EVAL_TEXT_FILE="{path}": {p} is not a file; point it at a '
            f'UTF-8 text file, or set it to "" to skip this set'
        )
    text = p.read_text(encoding="utf-8", errors="replace")
    return EvalSet("text", str(p), text=text, words=len(text.split()))


def validation_split(data_dir: Path) -> EvalSet:
    """The val.bin a run trained against, read in place (a memory map), once its
    folder passes the checks a run makes (lib/data/validate.py)."""
    try:
        check_prepared(data_dir)
    except DataError as err:
        raise DataError(f"{err} Or turn CONFIG_EVAL_VAL off.") from None
    meta = load_meta(data_dir)
    ids = np.memmap(data_dir / SPLIT_FILES["val"], dtype=np.dtype(meta["dtype"]), mode="r")
    return EvalSet(
        "val",
        f"{data_dir / SPLIT_FILES['val']} ({meta['val_from']})",
        ids=ids,
        chars=val_chars(data_dir, meta),
    )
