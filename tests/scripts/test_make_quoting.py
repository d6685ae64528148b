"""Values typed on the make command line reach the scripts byte for byte.

PY= on the command line points the recipes at a stub interpreter that records the argv each
script would get, so every target's arguments are compared with what was typed, and a
hostile value that broke out of its quoting would run `touch` on a canary file. The same
holds for every variable the Makefile reads (its own lists name them), checked on every
target of a stub checkout: the Makefile alone, with a recording .venv/bin/python.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.scripts.conftest import ROOT, make

OVERRIDE_VARS = [
    "MAX_ITERS",
    "TIME",
    "BATCH_SIZE",
    "GRAD_ACCUM",
    "COMPILE",
    "DEVICE",
    "LR",
    "SEED",
    "RUN_NAME",
    "SET",
    "TRACKER",
    "PARALLEL_JOBS",
    "EXECUTOR",
    "DRY_RUN",
    "YES",
    "RETRY_FAILED",
]  # RESUME is internal: `make continue` passes it (test_make_help.py)

# Each target: the options it takes, in the order it passes them, as (NAME, flag); flag None
# for a positional value; then whether it also passes the NAME=VALUE overrides.
TARGETS = {
    "show": ("kconfig.py show", [], True),
    "prepare": ("prepare.py", [], True),
    "continue": ("continue.py", [], True),
    "test-matrix": ("matrix.py run", [], True),
    "test-matrix-dry-run": ("matrix.py run DRY_RUN=1", [], True),
    "test-rerun": ("matrix.py rerun", [("TARGET", "--target"), ("MATRIX", "--matrix")], True),
    "sweep": (
        "matrix.py sweep",
        [
            ("SWEEP", "--sweep"),
            ("SWEEP_FILE", "--sweep-file"),
            ("SWEEP_MODE", "--mode"),
            ("SWEEP_TRIALS", "--trials"),
            ("SWEEP_SEED", "--seed"),
        ],
        True,
    ),
    "results": ("results.py summary", [("RESULTS", "--dir"), ("BASELINE", "--baseline")], False),
    "report": ("results.py report", [("RESULTS", "--dir"), ("BASELINE", "--baseline")], False),
    "sample": (
        "sample.py",
        [
            ("RUN", "--run"),
            ("PROMPT", "--prompt"),
            ("TOKENS", "--tokens"),
            ("TEMPERATURE", "--temperature"),
            ("TOP_K", "--top-k"),
            ("CHECKPOINT", "--checkpoint"),
        ],
        False,
    ),
    "watch": ("watch.py", [("RUN", None), ("INTERVAL", "--interval")], False),
    "eval": ("eval.py", [("RUN", "--run"), ("CHECKPOINT", "--checkpoint")], True),
    "eval-baseline": ("eval.py", [("BASELINE_MODEL", "--baseline")], True),
    "eval-baselines": ("eval.py --baselines", [], True),
    "export": (
        "export.py",
        [("RUN", "--run"), ("CHECKPOINT", "--checkpoint"), ("EXPORT_DIR", "--out")],
        False,
    ),
    "bench": ("bench.py step", [("BENCH_STEPS", "--steps"), ("BENCH_VOCAB", "--vocab")], True),
    "bench-optim": (
        "bench.py optimizers",
        [("BENCH_STEPS", "--steps"), ("BENCH_VOCAB", "--vocab")],
        True,
    ),
    "bench-seqlen": (
        "bench.py seqlen",
        [("BENCH_STEPS", "--steps"), ("BENCH_VOCAB", "--vocab")],
        True,
    ),
    "estimate": ("estimate.py", [("GPU", "--device")], True),
}


def hostile_values(canary: Path) -> list[str]:
    """Values that broke the old single-quoting; each would create `canary` if it got out."""
    c = str(canary)
    return [
        f"x'; touch {c}; echo '",  # the example
        "Romeo's love",
        f'say "hi" "; touch {c}; echo "',
        f"$(touch {c}) `touch {c}` ${{HOME}} $HOME $$ $$(touch {c})",  # shell expansions
        f"$(shell touch {c})${{shell touch {c}}}$(eval X:=1)$$",  # make syntax, make must not expand
        f"line one\ntouch {c}\n",  # make splits recipe lines at newlines
        f"a; touch {c} # not a comment % 100% \\",  # ;, #, %, trailing backslash
        "back\\slash\\'\t* ? ~/x [a]",  # escapes, tab, globs, tilde
        "caf\udce9",  # a byte that is not UTF-8 (Latin-1 e-acute)
    ]


@pytest.fixture
def stubbed(project, tmp_path_factory):
    """A project with .config/config.py in place, and a stub interpreter that logs its argv."""
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    work = tmp_path_factory.mktemp("stub")
    log = work / "argv"
    stub = work / "python"
    # A shell recorder (no Python start per call: some 270 make runs): each call's argc,
    # then its arguments, NUL-separated, bytes kept (read back as Python's argv would be).
    stub.write_text(f"""#!/bin/sh\nprintf '%s\\0' "$#" "$@" >>{shlex.quote(str(log))}\n""")
    stub.chmod(0o755)

    def run(*args: str, env: dict | None = None) -> list[list[str]]:
        log.unlink(missing_ok=True)
        out = make(project, f"PY={stub}", *args, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        if not log.exists():
            return []
        fields = log.read_bytes().decode("utf-8", "surrogateescape").split("\0")
        calls, i = [], 0
        while i < len(fields) - 1:
            n = int(fields[i])
            calls.append(fields[i + 1 : i + 1 + n])
            i += 1 + n
        return calls

    return run, work / "canary"


def expected(target: str, value: str) -> list[list[str]]:
    """The argv lists `make <target>` runs when every variable it reads holds `value`."""
    script, options, _ = TARGETS[target]
    head, *words = script.split()
    argv = [f"scripts/{head}", *words]
    for _, flag in options:
        argv += [value] if flag is None else [flag, value]
    if TARGETS[target][2]:
        argv += [f"{name}={value}" for name in OVERRIDE_VARS]
    overrides = [f"{name}={value}" for name in OVERRIDE_VARS]
    first = [["scripts/prepare.py", *overrides]] if target in AFTER_PREPARE else []
    return first + [argv]


AFTER_PREPARE = {"test-matrix", "sweep"}  # they depend on the prepare target (so does train)


def typed(target: str, value: str) -> list[str]:
    _, options, overrides = TARGETS[target]
    names = [name for name, _ in options] + (OVERRIDE_VARS if overrides else [])
    return [f"{name}={value}" for name in names]


def test_every_target_passes_every_value_unchanged(stubbed):
    run, canary = stubbed
    for value in hostile_values(canary):
        for target in TARGETS:
            assert run(target, *typed(target, value)) == expected(target, value), (target, value)
        overrides = [f"{name}={value}" for name in OVERRIDE_VARS]
        assert run("train", *overrides) == [
            ["scripts/prepare.py", *overrides],
            ["scripts/train.py", *overrides],
        ]
        assert run("watch", f"ONCE={value}") == [["scripts/watch.py", "--once"]]
        # RUNS is a list: split at blanks as the shell does, each word kept whole, no globbing.
        words = re.split(r"[ \t\n]+", value.strip(" \t\n"))
        assert run("compare", f"RUNS={value} {value}", f"OUT={value}", f"BASELINE={value}") == [
            ["scripts/results.py", "compare", *words, *words, "--out", value, "--baseline", value]
        ], value
        assert not canary.exists(), value
    # The defconfig's name is the goal itself (a goal cannot hold "/", "=" or a newline).
    for value in hostile_values(canary):
        if not set(value) & set("/=\n"):
            assert run(f"defconfig-{value}") == [["scripts/kconfig.py", "defconfig", value]]
    assert not canary.exists()


def test_only_command_line_values_count_and_empty_ones_as_before(stubbed):
    run, canary = stubbed
    env = {
        "PROMPT": "from the environment",
        "TIME": "%e seconds",
        "RUN": f"$(shell touch {canary})",
        "SET": f"x'; touch {canary}; echo '",
    }
    assert run("sample", "show", env=env) == [["scripts/sample.py"], ["scripts/kconfig.py", "show"]]
    assert run("sample", "show", "PROMPT=typed", env=env) == [
        ["scripts/sample.py", "--prompt", "typed"],
        ["scripts/kconfig.py", "show"],
    ]
    assert run("sample", "PROMPT=", "RUN=") == [["scripts/sample.py"]]  # empty option: left out
    assert run("show", "MAX_ITERS=") == [["scripts/kconfig.py", "show", "MAX_ITERS="]]
    assert run("eval-baseline") == [["scripts/eval.py", "--baseline", ""]]
    assert not canary.exists()


def test_python_for_the_bootstrap_is_passed_unchanged(project, tmp_path):
    """PYTHON= reaches scripts/bootstrap.sh as typed (its error message quotes it back)."""
    canary = tmp_path / "canary"
    for value in hostile_values(canary)[:-1]:  # the non-UTF-8 one: make's output is read as text
        out = make(project, "venv", f"VENV={tmp_path / 'venv'}", f"PYTHON={value}")
        assert out.returncode != 0
        assert f"Python 3.11 or newer as '{value}'" in out.stderr, out.stderr
        assert not canary.exists() and not (tmp_path / "venv").exists()


@pytest.mark.slow  # trains and samples through make; the stub tests above check every value
def test_a_quote_in_a_real_prompt_and_a_hostile_set(project, tmp_path):
    """End to end with the real scripts: the issue's two examples."""
    canary = tmp_path / "pwned"
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    shown = make(project, "show", f"SET=RUN_NAME=x'; touch {canary}; echo '")
    assert shown.returncode != 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "touch" in shown.stderr and not canary.exists()
    quoted = make(project, "show", "RUN_NAME=Romeo's")
    assert quoted.returncode == 0 and "overrides: RUN_NAME=Romeo's" in quoted.stdout, quoted.stderr
    (project / "corpus.txt").write_text("Romeo's love: the moon is bright tonight.\n" * 200)
    tiny = (
        "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y "
        "GPT2_N_LAYER=1 GPT2_N_HEAD=2 GPT2_N_EMBD=32 GPT2_BLOCK_SIZE=32 BATCH_SIZE=4 "
        "GPT2_EVAL_INTERVAL=1 TRAIN_EVAL_ITERS=1 GPT2_WARMUP_STEPS=0"
    )
    trained = make(project, "MAX_ITERS=1", "RUN_NAME=romeo", "DEVICE=cpu", tiny)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    sample = make(project, "sample", "PROMPT=Romeo's love", "TOKENS=3")
    assert sample.returncode == 0, sample.stderr
    assert "Romeo's love" in sample.stdout


def makefile_variables() -> list[str]:
    """Every variable the Makefile reads, from its own lists (a new one is covered at once),
    and one name per pattern of the programs' variables, which make exports as typed."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    names = {"PYTHON", "PYTHONPATH"}
    for name in ("OVERRIDE_VARS", "OPTION_VARS", "OTHER_VARS"):
        names |= set(re.search(rf"^{name} := (.*)$", text, re.M)[1].split())
    programs = re.search(r"^PROGRAM_ENV := (.*)$", text, re.M)[1].split()
    return sorted(names | {p.replace("%", "_X") for p in programs})


def hostile_forms(marker: Path) -> list[str]:
    """Backticks, $(...), $(shell ...), quote breakouts with ; and #, a newline, make's $$,
    and bash arithmetic's PATH[$(...)]; each would create `marker` if it ran."""
    breakouts = [f"x'; touch {marker}; #", f'x"; touch {marker}; #', f"x; touch {marker} #"]
    # [:-1]: the value that is not UTF-8 would come back in make's output, read as text
    return [*hostile_values(marker)[:-1], *breakouts, f"PATH[$(touch {marker})]"]


def test_no_variable_make_reads_runs_what_it_holds(stub_checkout):
    """Each variable the Makefile reads, in each hostile form, on every target (make -k): no
    marker appears, and FILE, NAME, TEST_JOBS, TEST_ORDER, PYTHONPATH arrive byte for byte."""
    co, markers = stub_checkout, stub_checkout.root.parent / "markers"
    markers.mkdir()
    names = makefile_variables()
    assert {"FILE", "TEST_JOBS", "VENV", "PY", "PYTHON", "DEFCONFIG_NAME", "LR"} <= set(names)
    paths = {"VENV", "PY"}  # refused when not a plain path: checked one at a time below
    for i in range(len(hostile_forms(markers / "x"))):
        value = {name: hostile_forms(markers / name)[i] for name in names}
        typed = [f"{name}={value[name]}" for name in names if name not in paths]
        out = co.make("-k", *typed, *co.targets())
        # Every recipe ran; only the flakiness gate refuses a TEST_SEED that is not a number.
        assert set(re.findall(r"\] Error \d+", out.stderr)) <= {"] Error 2"}, out.stderr
        failed = re.findall(r"\[Makefile:\d+: (\S+)\]", out.stderr)
        assert failed in ([], ["test-flaky"]), out.stderr
        calls = co.calls()
        assert {path for path, _ in calls} == {f"{co.root}:{value['PYTHONPATH']}"}
        argvs = [argv for _, argv in calls]
        assert ["scripts/kconfig.py", "import-knlp", value["FILE"], value["NAME"]] in argvs
        # The name comes from the goal, whatever DEFCONFIG_NAME says.
        assert ["scripts/kconfig.py", "defconfig", "tiny"] in argvs
        tests = [a for a in argvs if a[:2] == ["-m", "pytest"] and "--dist" in a]
        assert len(tests) == 2 and all(a[a.index("-n") + 1] == value["TEST_JOBS"] for a in tests)
        assert f"--randomly-seed={value['TEST_ORDER']}" in tests[0]
        # PYTHON runs gpu-check where PY does not exist: it is a command name, never a line.
        co.make("-k", *typed, f"PY={co.root}/absent", "gpu-check", "gpu-wheels")
        for name in sorted(paths):
            # PYTHON=/bin/false: were the value let through, bootstrap.sh would stop at once.
            out = co.make(f"{name}={value[name]}", "PYTHON=/bin/false", "help", "show")
            assert out.returncode == 2 and co.calls() == [], out.stderr
            assert f"{name} may hold only letters, digits and _ . / + - @" in out.stderr
        assert sorted(p.name for p in markers.iterdir()) == [], value["LR"]


def test_file_name_and_test_jobs_reach_python_as_typed_or_from_the_environment(stub_checkout):
    co = stub_checkout
    benign = """it's a "quoted"  value\twith spaces"""
    typed = [f"FILE={benign}", f"NAME={benign}!", f"TEST_JOBS={benign}?"]
    assert co.make(*typed, "import-knlp", "test-slow").returncode == 0
    pytest_argv = ["-m", "pytest", "-q", "-n", f"{benign}?", "--dist", "worksteal"]
    assert [argv for _, argv in co.calls()] == [
        ["scripts/kconfig.py", "import-knlp", benign, f"{benign}!"],
        [
            *pytest_argv,
            "-m",
            "slow and not engine",
            "--junitxml=.pytest_cache/junit-slow.xml",
            "tests",
        ],
    ]
    # The recipes read these from the environment too: frozen there as well.
    marker = co.root.parent / "marker"
    env = {"FILE": f"$(shell touch {marker})`touch {marker}`", "TEST_JOBS": f"$$(touch {marker})"}
    assert co.make("import-knlp", "test-slow", env=env).returncode == 0
    assert [argv[2] for _, argv in co.calls()] == [env["FILE"], "-q"] and not marker.exists()
    assert co.calls()[1][1][4] == env["TEST_JOBS"]


def test_defaults_and_the_file_check_still_hold(stub_checkout):
    co = stub_checkout
    missing = co.make("import-knlp", "NAME=x")
    assert missing.returncode == 2 and "FILE=<knlp defconfig> is required" in missing.stderr
    assert co.calls() == []
    assert co.make("test-slow", "test-flaky", "TEST_SEED=12").returncode == 0
    argvs = [argv for _, argv in co.calls()]
    assert argvs[0][:5] == ["-m", "pytest", "-q", "-n", "auto"]  # TEST_JOBS ?= auto
    assert [a[a.index("-n") + 1] for a in argvs[2:]] == ["auto", "1"]  # the gate's two runs
    # Without a .venv (a GPU node), gpu-check runs PYTHON, with this checkout on PYTHONPATH.
    assert co.make("gpu-check", f"PY={co.root}/absent", f"PYTHON={co.python}").returncode == 0
    inherited = os.environ.get("PYTHONPATH")  # `make test` itself runs under one
    path = f"{co.root}:{inherited}" if inherited else str(co.root)
    assert co.calls() == [(path, ["scripts/gpu_check.py"])]
    refused = co.make("test-flaky", "TEST_SEED=12 ")
    assert refused.returncode != 0 and "TEST_SEED must be a whole number" in refused.stderr
