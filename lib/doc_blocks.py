"""Generated blocks of a document: the text between a begin and an end marker line.

README.md and docs/*.md hold figures that scripts render from records, never typed
by hand; each sits between two marker lines (HTML comments, invisible on the page).
replace_block() swaps what lies between them and keeps every other byte;
write_or_check() brings a file's blocks up to date, atomically and only when they
changed, or (check) writes nothing and returns the unified diff of what is stale.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from lib.atomic import write_text_atomic

# (begin marker line, end marker line, the text that goes between them)
Block = tuple[str, str, str]


class BlockError(ValueError):
    """A document whose marker lines are missing, repeated or out of order."""


def _lines_at(text: str, marker: str) -> list[re.Match[str]]:
    # Whole lines only (LF or CRLF): a marker quoted in prose or mid-line is no boundary.
    return list(re.finditer(rf"^{re.escape(marker)}(?=\r?$)", text, re.M))


def _one(text: str, marker: str, begin: str, end: str, where: str) -> re.Match[str]:
    found = _lines_at(text, marker)
    if len(found) == 1:
        return found[0]
    problem = (
        f"lacks the line {marker}" if not found else f"holds the line {marker} {len(found)} times"
    )
    raise BlockError(
        f"{where} {problem}: its generated block goes between the markers {begin} and "
        f"{end}, each once on a line of its own; restore them where the block belongs"
    )


def replace_block(text: str, begin: str, end: str, body: str, *, where: str = "the text") -> str:
    """text with what lies between the begin and end marker lines replaced by body
    (which starts right after begin's last character: usually with a newline); the
    markers and everything outside them are kept byte for byte. where names the
    document in the error (BlockError) raised when the markers are not there once each,
    in order."""
    first, last = _one(text, begin, begin, end, where), _one(text, end, begin, end, where)
    if last.start() < first.end():
        raise BlockError(
            f"{where} holds the marker {end} before {begin}: its generated block goes "
            "between them, begin first; put them back in order"
        )
    return text[: first.end()] + body + text[last.start() :]


def body_of(section: str, begin: str, end: str) -> str:
    """What a rendered section, its two marker lines included, puts between them."""
    if not (section.startswith(begin) and section.endswith(end)):
        raise ValueError(f"a rendered section must start with {begin} and end with {end}")
    return section[len(begin) : len(section) - len(end)]


def write_or_check(path: Path, blocks: Sequence[Block], *, check: bool) -> str:
    """Bring each block of the file at path to its body: "" when the file already held
    them all (and it is left untouched, its time and inode too); otherwise the unified
    diff from the file to the rendered text, and, unless check, the file rewritten
    atomically (a reader never sees half a page). Raises BlockError as replace_block."""
    # Bytes, not read_text(): universal newlines would turn a CRLF page into LF.
    text = path.read_bytes().decode()
    new = text
    for begin, end, body in blocks:
        new = replace_block(new, begin, end, body, where=str(path))
    if new == text:
        return ""
    if not check:
        write_text_atomic(path, new)
    diff = difflib.unified_diff(
        text.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=str(path),
        tofile=f"{path} (rendered)",
    )
    # A last line without a newline would run into the next header: end each line.
    return "".join(line if line.endswith("\n") else line + "\n" for line in diff)
