"""lib/doc_blocks.py: a generated block is replaced between its marker lines and
nothing else changes; bad markers stop with one message; --check writes nothing."""

from __future__ import annotations

import os

import pytest

from lib.doc_blocks import BlockError, body_of, replace_block, write_or_check

BEGIN, END = "<!-- t: generated; do not edit -->", "<!-- t: end -->"
PAGE = f"# Title\r\n\nbefore  \n{BEGIN}\nold\nlines\n{END}\n\nafter\t\n"


def test_replace_keeps_the_markers_and_everything_outside_byte_for_byte():
    out = replace_block(PAGE, BEGIN, END, "\nnew\n")
    assert out == f"# Title\r\n\nbefore  \n{BEGIN}\nnew\n{END}\n\nafter\t\n"
    assert replace_block(out, BEGIN, END, "\nold\nlines\n") == PAGE
    # a marker quoted mid-line (prose, code) is no boundary
    quoted = f"See `{BEGIN}`.\n" + PAGE
    assert replace_block(quoted, BEGIN, END, "\nnew\n") == "See `" + BEGIN + "`.\n" + out
    crlf = PAGE.replace("\n", "\r\n")
    assert replace_block(crlf, BEGIN, END, "\r\nnew\r\n") == out.replace("\n", "\r\n")


@pytest.mark.parametrize(
    ("text", "named", "says"),
    [
        (f"{BEGIN}\nx\n", END, "lacks the line"),
        (f"x\n{END}\n", BEGIN, "lacks the line"),
        ("no markers\n", BEGIN, "lacks the line"),
        (f"{BEGIN}\nx\n{END}\n{BEGIN}\ny\n{END}\n", BEGIN, "2 times"),
        (f"{BEGIN}\nx\n{END}\n{END}\n", END, "2 times"),
        (f"{END}\nx\n{BEGIN}\n", END, "before"),
    ],
)
def test_missing_repeated_or_swapped_markers_raise_naming_the_document_and_marker(
    text, named, says
):
    with pytest.raises(BlockError) as err:
        replace_block(text, BEGIN, END, "\nnew\n", where="docs/page.md")
    message = str(err.value)
    assert message.startswith("docs/page.md ") and named in message and says in message
    assert "\n" not in message  # one paragraph
    assert isinstance(err.value, ValueError)  # callers that caught ValueError still do


def test_body_of_a_rendered_section_is_what_goes_between_its_markers():
    assert body_of(f"{BEGIN}\nx\n{END}", BEGIN, END) == "\nx\n"
    with pytest.raises(ValueError, match="must start with"):
        body_of("x\n" + END, BEGIN, END)


def test_check_writes_nothing_and_returns_the_diff_of_the_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_bytes(PAGE.encode())
    before = page.stat()
    diff = write_or_check(page, [(BEGIN, END, "\nnew\nlines\n")], check=True)
    assert page.read_bytes() == PAGE.encode()
    assert page.stat().st_mtime_ns == before.st_mtime_ns
    assert diff.startswith(f"--- {page}\n+++ {page} (rendered)\n@@ ")
    lines = diff.splitlines()[2:]
    changed = [line for line in lines if line.startswith(("+", "-"))]
    assert changed == ["-old", "+new"]
    assert write_or_check(page, [(BEGIN, END, "\nold\nlines\n")], check=True) == ""


def test_write_replaces_the_file_atomically_and_only_when_it_changed(tmp_path):
    page = tmp_path / "page.md"
    page.write_bytes(PAGE.encode())
    before = page.stat()
    # unchanged: the very same file, not rewritten
    assert write_or_check(page, [(BEGIN, END, "\nold\nlines\n")], check=False) == ""
    after = page.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # changed: a new file renamed over it (lib/atomic.py), no temporary left beside it
    diff = write_or_check(page, [(BEGIN, END, "\nnew\n")], check=False)
    assert "+new\n" in diff
    assert page.read_bytes() == PAGE.replace("old\nlines\n", "new\n").encode()  # CRLF kept
    assert page.stat().st_ino != before.st_ino
    assert os.listdir(tmp_path) == ["page.md"]


def test_several_blocks_of_one_file_are_written_together_or_not_at_all(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- a -->\n1\n<!-- /a -->\n<!-- b -->\n2\n<!-- /b -->\n")
    blocks = [("<!-- a -->", "<!-- /a -->", "\nA\n"), ("<!-- b -->", "<!-- /b -->", "\nB\n")]
    write_or_check(page, blocks, check=False)
    assert page.read_text() == "<!-- a -->\nA\n<!-- /a -->\n<!-- b -->\nB\n<!-- /b -->\n"
    before = page.read_text()
    with pytest.raises(BlockError, match="<!-- c -->"):  # a's new body is not written either
        write_or_check(
            page, [(*blocks[0][:2], "\nZ\n"), ("<!-- c -->", "<!-- /c -->", "")], check=False
        )
    assert page.read_text() == before
