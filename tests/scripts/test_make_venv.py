""".venv trouble make sees through: a .venv linked from another checkout runs this checkout's
code on this checkout's files, and an interpreter gone under an intact install stamp is
rebuilt rather than every target failing with "Error 127"."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig

from tests.scripts.conftest import REQUIREMENTS, ROOT, SOURCES, make


def test_make_puts_its_own_checkout_first_on_pythonpath(stub_checkout):
    co = stub_checkout
    for inherited, expected in (("", str(co.root)), ("/elsewhere", f"{co.root}:/elsewhere")):
        assert co.make("show", "list-defconfigs", env={"PYTHONPATH": inherited}).returncode == 0
        assert [path for path, _ in co.calls()] == [expected, expected]


def test_a_venv_linked_from_another_checkout_writes_this_checkouts_config(
    project, tmp_path_factory, monkeypatch
):
    """`project`'s .venv links to checkout `other`'s, whose install names `other`'s tree (as
    `pip install -e` there would): `make defconfig-*` in `project` still runs its own code
    and writes its own .config."""
    other = tmp_path_factory.mktemp("other")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, other / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, other / name)
    venv = other / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sites = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (mine,) = venv.glob("lib/python*/site-packages")
    # The editable install of `other`, then the real .venv's packages (torch, kconfiglib...).
    (mine / "a_checkout.pth").write_text(f"{other}\n")
    (mine / "b_packages.pth").write_text("".join(f"{site}\n" for site in sites))
    (venv / ".installed").write_text("".join((ROOT / n).read_text() for n in REQUIREMENTS))
    (project / ".venv").unlink()
    (project / ".venv").symlink_to(venv)
    monkeypatch.delenv("PYTHONPATH")  # the fixture's, which would hide the linked install
    out = make(project, "defconfig-gpt2-tiny-shakespeare")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (other / ".config").exists() and (project / ".config").exists()
    assert "CONFIG_GPT2_MAX_ITERS=" in (project / ".config").read_text()


def test_a_missing_interpreter_under_an_intact_stamp_rebuilds_the_venv(stub_checkout):
    co = stub_checkout
    co.python.unlink()  # as when the Python it linked to was removed or upgraded
    co.python.symlink_to(co.root / "gone" / "python3.11")
    (co.root / ".venv" / "pyvenv.cfg").write_text("home = gone\n")
    # A base Python whose `-m venv` puts a recording interpreter in place, as the real one would.
    base, recorder = co.root.parent / "python3", co.root.parent / "recorder"
    co.write_recorder(base)
    co.write_recorder(recorder)
    with base.open("a") as f:
        f.write(
            'if [ "$1" = -m ] && [ "$2" = venv ]; then for last; do :; done\n'
            f'  rm -f "$last/bin/python" && cp {shlex.quote(str(recorder))} "$last/bin/python"; fi\n'
        )
    out = co.make("show", f"PYTHON={base}")
    assert out.returncode == 0 and "Error 127" not in out.stderr, out.stdout + out.stderr
    assert ".venv/bin/python is missing (was its Python removed or upgraded?)" in out.stdout
    argvs = [argv for _, argv in co.calls()]
    assert ["-m", "venv", "--clear", ".venv"] in argvs
    assert argvs[-1] == ["scripts/kconfig.py", "show"]
    again = co.make("show")  # rebuilt: the stamp holds again, and nothing is reinstalled
    assert again.returncode == 0 and [argv for _, argv in co.calls()] == [argvs[-1]]
