"""The documentation is checked like code: README.md, docs/*.md and the site built from them.

Everything a page names must exist: each `make <target>` in its code, each CONFIG_ symbol
(or an old or knlp name that loads as one), each defconfig, each relative link and anchor;
the README's two commands must be the ones .ci/run runs; and `mkdocs build --strict` (which
fails on a broken link or anchor) must pass.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from lib.config.knlp.names import DERIVED, FEATURE_PREFIXES, ROWS
from lib.config.renames import RENAMED
from lib.config.symbols import Symbols
from tests.scripts.test_make_help import help_targets

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEFCONFIGS = {p.name for p in (ROOT / "defconfigs").iterdir() if p.is_file()}
# Names the docs show on purpose: placeholders, and the misspellings and the file of the
# error messages in docs/configuration.md.
PLACEHOLDERS = {"SYMBOL", "X", "GPT2_N_LAYR", "LERNING_RATE", "my-run"}

FENCE = re.compile(r"^([ \t]*)```.*?^\1```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def code_of(text: str) -> list[str]:
    """Each fenced block's lines and each inline code span: where commands and names are."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    return [line for block in blocks for line in block.splitlines()[1:-1]] + INLINE.findall(prose)


def prose_of(text: str) -> str:
    """The text without fenced blocks and inline code: where links are."""
    return INLINE.sub("", FENCE.sub("", text))


def make_commands(snippet: str) -> list[list[str]]:
    """`make` invocations in a code line or span, as their words after `make`."""
    snippet = snippet.split(" # ")[0]
    commands = []
    for part in re.split(r"&&|\|\||;|\|", snippet):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:  # an unbalanced quote inside a longer example
            continue
        if words and words[0] == "make":
            commands.append(words[1:])
    return commands


def test_readme_is_a_guide():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move details into docs/"


def test_every_make_target_named_exists():
    targets = set(help_targets())
    missing = []
    for page in PAGES:
        for snippet in code_of(page.read_text()):
            for words in make_commands(snippet):
                for word in words:
                    if "=" in word or word.startswith("-") or word == "defconfig-<name>":
                        continue
                    if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                        break  # prose or a diagram after the command, not a target
                    if word.startswith("defconfig-"):
                        if word.removeprefix("defconfig-") not in DEFCONFIGS:
                            missing.append(f"{page_id(page)}: make {word} (no such defconfig)")
                    elif word not in targets:
                        missing.append(f"{page_id(page)}: make {word}")
    assert not missing, (
        "make targets named in the docs that `make help` does not list:\n" + "\n".join(missing)
    )


def known_names() -> set[str]:
    # knlp's derived strings (GPT2_MODEL_NAME...) are knlp names too
    return {f.name for f in dataclasses.fields(Symbols)} | set(RENAMED) | set(ROWS) | set(DERIVED)


def test_every_config_symbol_named_exists():
    known = known_names()
    unknown = []
    for page in PAGES:
        text = page.read_text()
        names = set(re.findall(r"\bCONFIG_([A-Z0-9_]*[A-Z0-9])\b(?![*_])", text))
        # SET="A=1 B=2": every name there is a symbol too.
        for value in re.findall(r'SET="([^"]*)"', text):
            names |= {w.split("=")[0] for w in value.split() if "=" in w}
        for name in sorted(names - PLACEHOLDERS):
            if "$" in name:  # a shell loop's variable in a benchmark command
                continue
            if name not in known and not any(name.startswith(p) for p in FEATURE_PREFIXES):
                unknown.append(f"{page_id(page)}: {name}")
    assert not unknown, (
        "symbols named in the docs that are neither a Kconfig symbol nor an "
        "old or knlp name (lib/config/renames.py, lib/config/knlp/names.py):\n" + "\n".join(unknown)
    )


def defconfig_names(text: str) -> set[str]:
    """Names a page gives as defconfigs: in `make defconfig-X`, `defconfigs/X` and the
    first column of a table whose header says Defconfig or Name."""
    names = set(re.findall(r"defconfigs/([a-z0-9][\w.{},*-]*[a-z0-9}*])", text))
    names |= set(re.findall(r"make defconfig-([a-z0-9][\w-]*[a-z0-9])", text))
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if header is None:
            header = cells[0]
        elif header in ("Defconfig", "Name") and not set(cells[0]) <= set("-: "):
            names |= set(re.findall(r"`([a-z0-9][\w{},*-]*)`", cells[0].split("(")[0]))
    return names


def expand(name: str) -> list[str]:
    """hamt-ablation-{slots,aux} -> both names; a * stays a pattern."""
    m = re.search(r"\{([^}]*)\}", name)
    if not m:
        return [name]
    return [
        n
        for alt in m.group(1).split(",")
        for n in expand(name[: m.start()] + alt + name[m.end() :])
    ]


def test_every_defconfig_named_exists():
    missing = []
    for page in PAGES:
        for name in sorted(defconfig_names(page.read_text()) - PLACEHOLDERS):
            for one in expand(name):
                if not fnmatch.filter(DEFCONFIGS, one):
                    missing.append(f"{page_id(page)}: {one}")
    assert not missing, "defconfigs named in the docs that defconfigs/ lacks:\n" + "\n".join(
        missing
    )
    # The table of every defconfig names each one.
    listed = {
        n
        for name in defconfig_names((ROOT / "docs/defconfigs.md").read_text())
        for one in expand(name)
        for n in fnmatch.filter(DEFCONFIGS, one)
    }
    assert listed == DEFCONFIGS, f"docs/defconfigs.md lacks {sorted(DEFCONFIGS - listed)}"


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose_of(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page_id(page)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page_id(page)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("\n## Quick start\n", 1)[1]
    block = FENCE.search(quick)
    assert block is not None
    commands = [line.split(" #")[0].strip() for line in block.group(0).splitlines()[1:-1]]
    assert commands == ["make defconfig-gpt2-tiny-shakespeare && make", "make test"]
    assert "gpt2-tiny-shakespeare" in DEFCONFIGS
    ci = (ROOT / ".ci/run").read_text().splitlines()
    run = [
        line.strip().removeprefix("hostile ")
        for line in ci
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert "make test" in run, ".ci/run no longer runs the README's test command"
    # The default's run needs nothing but make: .ci/run sets .venv up the same way.
    assert "make venv" in run


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    """mkdocs --strict fails on a broken link or anchor, a page missing from nav, ...
    (the links and anchors themselves are checked without a build above)."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site/index.html").exists()
    for page in (ROOT / "docs").glob("*.md"):
        # one file per page (use_directory_urls: false), so the site works from file://
        assert (tmp_path / "site" / f"{page.stem}.html").exists(), f"{page.name} is not in the site"
