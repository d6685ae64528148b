"""The documentation site as a reader opens it: from disk (file://) as well as served,
and with every Markdown list rendered as a list."""

from __future__ import annotations

import re

import markdown
import yaml

from tests.test_docs import PAGES, ROOT, page_id

CONFIG = yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_pages_link_to_files_so_the_site_works_from_disk():
    # folder links (getting-started/) open a directory listing under file://
    assert CONFIG["use_directory_urls"] is False


def _html(text: str) -> str:
    extensions = []
    for item in CONFIG["markdown_extensions"]:
        extensions.append(next(iter(item)) if isinstance(item, dict) else item)
    return markdown.markdown(text, extensions=extensions)


def test_every_list_item_renders_as_a_list_item():
    # A "- " item glued to the paragraph before it (no blank line after an item of
    # several paragraphs) renders as text starting with "- ".
    glued = []
    for page in PAGES:
        html = re.sub(r"<pre.*?</pre>|<code>.*?</code>", "", _html(page.read_text()), flags=re.S)
        for line in html.splitlines():
            if re.match(r"\s*(<p>)?- \S", line):
                glued.append(f"{page_id(page)}: {line.strip()[:80]}")
    assert not glued, "list items that render as text:\n" + "\n".join(glued)
