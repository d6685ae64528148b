"""Documents to token ids: bounded-memory encoding of a document stream.

Each document is followed by the tokenizer's end-of-text token, or, for a
tokenizer without one (char), kept apart from the next by one blank line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from lib.data.tokenizers.base import Tokenizer

# Long documents are encoded in pieces of about this many characters, and
# pieces in batches of about BATCH_CHARS, so memory stays bounded.
PIECE_CHARS = 1 << 20
BATCH_CHARS = 8 << 20

# Splitting right after a newline that precedes a non-space character never
# cuts a GPT-2 pre-token (whitespace runs end there, and words only take a
# leading " "), so piecewise encoding gives exactly the whole-text ids.
_CUT = re.compile(r"\n(?=\S)")


def split_pieces(text: str, max_chars: int = PIECE_CHARS) -> list[str]:
    """text cut at safe newlines into pieces of at most about max_chars."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        m = _CUT.search(text, start + max_chars // 2, start + max_chars)
        end = m.end() if m else start + max_chars  # no safe cut: rare, tiny effect
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


def _normalise(doc: str, tok: Tokenizer) -> str:
    # Without an end-of-text token, documents are kept apart by one blank line.
    return doc if tok.eot_token is not None else doc.rstrip("\n") + "\n\n"


def encode_documents(
    docs: Iterable[str], tok: Tokenizer, batch_chars: int = BATCH_CHARS
) -> Iterator[list[int]]:
    """Ids of docs in order, each document followed by the end-of-text token if any.

    Documents are encoded in batches of about batch_chars characters (GPT-2
    encodes a batch on several threads); a caller that stops early reads at
    most one batch more than it used.
    """
    batch: list[str] = []
    ends: list[bool] = []  # whether a piece is the last of its document
    size = 0
    for doc in docs:
        pieces = split_pieces(_normalise(doc, tok))
        for i, piece in enumerate(pieces):
            batch.append(piece)
            ends.append(i == len(pieces) - 1)
            size += len(piece)
        if size >= batch_chars:
            yield from _encode_batch(batch, ends, tok)
            batch, ends, size = [], [], 0
    if batch:
        yield from _encode_batch(batch, ends, tok)


def _encode_batch(batch: list[str], ends: list[bool], tok: Tokenizer) -> Iterator[list[int]]:
    for ids, end in zip(tok.encode_batch(batch), ends):
        if end and tok.eot_token is not None:
            ids.append(tok.eot_token)
        yield ids
