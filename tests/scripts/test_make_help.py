"""`make help` is read from the Makefile's `## ` lines; V=1; .PHONY per rule; RESUME stays internal.

Read-only targets run in the real tree (help, and the others with a stub interpreter in PY=
that records its argv instead of running a script).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.scripts.conftest import ROOT, make


def help_entries(text: str) -> dict[str, list[str]]:
    """`make help` output -> {section: [target, ...]}, in order; continuation lines skipped."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z]\w*:", line):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and re.match(r"  \S", line):
            current.append(line.split("  ")[1].removesuffix(" (default)"))
    return sections


def help_targets(project: Path = ROOT) -> list[str]:
    out = make(project, "help")
    assert out.returncode == 0, out.stderr
    return [t for targets in help_entries(out.stdout).values() for t in targets]


def readme_targets() -> list[str]:
    """The first cell of each row of README.md's "Make targets" table, as help names them."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Make targets\n", 1)[1].lstrip("\n").splitlines()
    rows = section[: next(i for i, line in enumerate(section) if not line.startswith("|"))]
    names = []
    for row in rows[2:]:  # after the header and the |---| line
        for command in re.findall(r"`make([^`]*)`", row.split(" | ")[0]):
            names.append(command.split()[0] if command.strip() else "all")
    return names


def test_help_and_readme_list_the_same_targets():
    listed, documented = help_targets(), readme_targets()
    assert len(listed) == len(set(listed)) and len(documented) == len(set(documented))
    assert not set(documented) - set(listed), (
        f"in README, not in `make help`: {sorted(set(documented) - set(listed))}"
    )
    assert not set(listed) - set(documented), (
        f"in `make help`, missing from README.md's Make "
        f"targets table: {sorted(set(listed) - set(documented))}"
    )


def test_help_keeps_its_sections_and_lists_only_real_rules():
    out = make(ROOT, "help").stdout
    sections = help_entries(out)
    assert list(sections) == ["Configuration", "Running", "Maintenance"]
    assert sections["Configuration"][:2] == ["defconfig-<name>", "list-defconfigs"]
    assert sections["Running"][:3] == ["all", "train", "prepare"]
    assert sections["Maintenance"][-1] == "help"
    assert re.search(r"^  all \(default\)     same as train$", out, re.M)
    # A two-line description: the second line under the first, in the description column.
    assert re.search(r"^  continue          resume .*\n {20}a matrix's pending", out, re.M)
    assert out.startswith("kconfig-llm targets (overrides: MAX_ITERS=")
    database = make(ROOT, "-pRrq", ".config").stdout  # -q: print the rule database only
    rules = {r.replace("%", "<name>") for r in re.findall(r"^([a-z][\w%-]*):", database, re.M)}
    assert set(help_targets()) <= rules


def test_help_is_generated_from_the_makefile(tmp_path):
    """A `## ` line added above a rule lists it; without one a rule stays internal."""
    text = (ROOT / "Makefile").read_text()
    test_help = re.search(r"\n## lint and format-check the tree.*\n", text).group(0)
    text = text.replace(test_help, "\n").replace(
        "\n##@ Maintenance\n", "\n##@ Maintenance\n\n## say hello\n.PHONY: hello\nhello:\n\t@true\n"
    )
    (tmp_path / "Makefile").write_text(text)
    out = make(tmp_path, "help")
    assert out.returncode == 0, out.stderr
    maintenance = help_entries(out.stdout)["Maintenance"]
    assert maintenance[0] == "hello" and "test" not in maintenance
    assert re.search(r"^  hello             say hello$", out.stdout, re.M)


def test_every_phony_declaration_sits_on_its_own_rule():
    lines = (ROOT / "Makefile").read_text().splitlines()
    phony = [i for i, line in enumerate(lines) if line.startswith(".PHONY:")]
    for i in phony:
        (name,) = lines[i].split(":", 1)[1].split()  # one target per declaration
        assert lines[i + 1].startswith(f"{name}:"), (lines[i], lines[i + 1])
    declared = {lines[i].split()[1] for i in phony}
    assert declared == set(help_targets()) - {"defconfig-<name>"}  # a pattern cannot be phony


def test_a_file_named_like_a_target_does_not_hide_it(tmp_path):
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    for name in ("help", "clean"):
        (tmp_path / name).write_text("")
    out = make(tmp_path, "help")
    assert "is up to date" not in out.stdout + out.stderr and "Maintenance:" in out.stdout
    cleaned = make(tmp_path, "clean")
    assert cleaned.returncode == 0 and "rm -rf .pytest_cache" in cleaned.stdout


@pytest.fixture
def stub(tmp_path) -> tuple[Path, Path]:
    """An interpreter for PY= that appends its argv to a log instead of running a script."""
    log, stub = tmp_path / "argv.jsonl", tmp_path / "python"
    stub.write_text(
        f"#!{sys.executable} -I\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stub.chmod(0o755)
    return stub, log


def test_v1_shows_the_commands_and_only_when_typed(stub, tmp_path):
    py, log = stub
    verbose = make(ROOT, f"PY={py}", "V=1", "list-defconfigs")
    assert verbose.returncode == 0 and verbose.stdout == f"{py} scripts/kconfig.py list\n"
    for args, env in (([], None), (["V=0"], None), ([], {"V": "1"})):
        quiet = make(ROOT, f"PY={py}", *args, "list-defconfigs", env=env)
        assert quiet.returncode == 0 and quiet.stdout == "", (args, env, quiet.stdout)
    canary = tmp_path / "canary"
    hostile = make(ROOT, f"PY={py}", f"V=$(shell touch {canary})", "list-defconfigs")
    assert hostile.returncode == 0 and hostile.stdout == "" and not canary.exists()
    assert log.read_text().splitlines() == ['["scripts/kconfig.py", "list"]'] * 5


def test_resume_is_internal(stub):
    py, log = stub
    typed = make(ROOT, f"PY={py}", "RESUME=1", "continue")
    assert typed.returncode == 2 and not log.exists()
    assert "RESUME is internal: `make continue` resumes results/latest" in typed.stderr
    assert "RESUME" not in make(ROOT, "help").stdout
    # From the environment it is ignored, like every other name; continue adds it itself.
    out = make(ROOT, f"PY={py}", "continue", "RUN_NAME=x", env={"RESUME": "1"})
    assert out.returncode == 0 and json.loads(log.read_text()) == [
        "scripts/continue.py",
        "RUN_NAME=x",
    ]
