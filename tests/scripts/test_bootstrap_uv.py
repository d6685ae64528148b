"""scripts/bootstrap.sh installs with uv when uv is on PATH, with pip's wheel folders and
indexes (uv reads no pip settings), and falls back to pip when uv fails.

A stub `uv` records its arguments; the .venv is a link to this interpreter, so nothing
is installed anywhere (the fallback's requirement is malformed: pip stops at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scripts.conftest import ROOT


def _folder(tmp_path: Path, requirement: str, uv_exit: int) -> tuple[Path, dict, Path]:
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "bin" / "python").symlink_to(sys.executable)
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-lock.txt"):
        (work / name).write_text(requirement if name == "requirements.txt" else "")
    stubs, log = tmp_path / "bin", tmp_path / "uv.jsonl"
    stubs.mkdir()
    (stubs / "uv").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({uv_exit})\n"
    )
    (stubs / "uv").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
        "PIP_FIND_LINKS": "/wheels/cpu /wheels/more",
        "PIP_EXTRA_INDEX_URL": "file:///mirror/simple",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # Python writes its .pyc files itself
    return work, env, log


def _bootstrap(work: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "bootstrap.sh"), ".venv"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_uv_installs_with_pips_wheel_folders_and_indexes(tmp_path):
    work, env, log = _folder(tmp_path, "", uv_exit=0)
    out = _bootstrap(work, env)
    assert out.returncode == 0, out.stderr
    assert "(under a minute with uv: 54 s on a busy 2-core host; once)" in out.stdout
    assert ">> .venv ready (uv, " in out.stdout
    python = ".venv/bin/python"
    pip_settings = [
        "--find-links",
        "/wheels/cpu",
        "--find-links",
        "/wheels/more",
        "--extra-index-url",
        "file:///mirror/simple",
        "--index-strategy",
        "unsafe-best-match",
    ]
    lock = ["-r", "requirements.txt", "-r", "requirements-dev.txt", "-c", "requirements-lock.txt"]
    editable = ["--no-deps", "--no-build-isolation", "-e", str(work.resolve())]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [
        ["pip", "install", "--python", python, *pip_settings, *lock],
        ["pip", "install", "--python", python, *pip_settings, *editable],
    ]
    assert (work / ".venv" / ".installed").is_file()

    # where Python may not write .pyc files, uv compiles them at install, as pip does
    (work / ".venv" / ".installed").unlink()
    log.unlink()
    assert _bootstrap(work, {**env, "PYTHONDONTWRITEBYTECODE": "1"}).returncode == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[:3] for c in calls] == [["pip", "install", "--compile-bytecode"]] * 2


def test_a_failed_uv_install_falls_back_to_pip(tmp_path):
    work, env, log = _folder(tmp_path, "this is not a requirement!!\n", uv_exit=1)
    out = _bootstrap(work, env)
    assert len(log.read_text().splitlines()) == 1  # uv once, then pip
    assert ">> uv could not install them (its output: .venv/install.log.uv)" in out.stdout
    assert out.returncode == 1 and "installing the requirements into .venv failed" in out.stderr
    assert (work / ".venv" / "install.log.uv").is_file()
    assert not (work / ".venv" / ".installed").exists()


def test_without_uv_on_path_pip_fetches_it_into_a_temporary_folder(tmp_path):
    """The fetched uv installs, then its folder is gone; pip's own run installs nothing."""
    work, env, log = _folder(tmp_path, "", uv_exit=0)
    (tmp_path / "bin" / "uv").unlink()  # not on PATH now
    fetch_log = tmp_path / "fetch.jsonl"
    python = tmp_path / "python3"
    python.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "args = sys.argv[1:]\n"
        "if args[:3] == ['-m', 'pip', 'install'] and '--target' in args:\n"
        "    target = args[args.index('--target') + 1]\n"
        f"    open({str(fetch_log)!r}, 'a').write(json.dumps(args) + '\\n')\n"
        "    os.makedirs(os.path.join(target, 'bin'))\n"
        "    uv = os.path.join(target, 'bin', 'uv')\n"
        f"    open(uv, 'w').write(open({str(tmp_path / 'bin' / 'uv.stub')!r}).read())\n"
        "    os.chmod(uv, 0o755)\n"
        "    sys.exit(0)\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, *args])\n"
    )
    python.chmod(0o755)
    (tmp_path / "bin" / "uv.stub").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv) + '\\n')\n"
    )
    env = {**env, "PYTHON": str(python), "TMPDIR": str(tmp_path)}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "uv").exists()
    )
    out = _bootstrap(work, env)
    assert out.returncode == 0, out.stderr
    assert ">> .venv ready (uv, " in out.stdout
    (fetched,) = [json.loads(line) for line in fetch_log.read_text().splitlines()]
    assert fetched[-1] == "uv"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 2 and all(
        c[0].startswith(str(tmp_path / "kconfig-llm-uv.")) for c in calls
    )
    assert not list(tmp_path.glob("kconfig-llm-uv.*"))  # removed on exit

    # KCONFIG_LLM_UV=no: pip installs, nothing fetched
    fetch_log.unlink()
    (work / ".venv" / ".installed").unlink()
    out = _bootstrap(work, {**env, "KCONFIG_LLM_UV": "no"})
    assert "with pip" in out.stdout and not fetch_log.exists()
