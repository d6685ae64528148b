"""The settings sections of lib/config/symbols.py: one frozen dataclass per package
Kconfig folder, holding exactly the symbols that folder's Kconfig files define,
read once per configuration (run.optim), a hidden symbol at its off value
(lib/config/generate.py; the off values in each package's off_values.toml)."""

from __future__ import annotations

import dataclasses
import textwrap
import tomllib
import typing
from pathlib import Path

import kconfiglib
import pytest

from lib.config import symbols
from lib.config.generate import render_symbols, sections
from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import RunConfig, run_config_from_defaults, with_batch_plan
from lib.config.symbols import Optim, Prune, Symbols, Train
from lib.paths import ROOT

SECTIONS = [
    c
    for c in vars(symbols).values()
    if isinstance(c, type) and dataclasses.is_dataclass(c) and c is not Symbols
]


def _folder(filename: str) -> str:
    """The package folder of a Kconfig file, as the tree names it."""
    path = Path(filename)
    parent = (path.relative_to(ROOT) if path.is_absolute() else path).parent.as_posix()
    return "" if parent == "." else parent


def test_every_symbol_is_in_the_one_section_of_its_kconfig_files_package():
    owner: dict[str, list[str]] = {}
    for section in SECTIONS:
        for f in dataclasses.fields(section):
            owner.setdefault(f.name, []).append(section.__name__)
    assert {n: s for n, s in owner.items() if len(s) > 1} == {}
    assert set(owner) == {f.name for f in dataclasses.fields(Symbols)}

    kconf = open_tree()
    items = [*kconf.unique_defined_syms, *(c for c in kconf.unique_choices if c.name)]
    for item in items:
        folder = _folder(item.nodes[0].filename)
        # the class is named after the folder's last name; Root for the top Kconfig
        assert owner[item.name][0].lower() == (folder.rpartition("/")[2] or "root"), item.name
    # by file, not by prefix: LEARNING_RATE is lib/train's, SPAM_THETA comes from Kconfig.spam
    assert owner["LEARNING_RATE"] == owner["GPT2_MAX_ITERS"] == ["Train"]
    assert owner["SPAM_THETA"] == owner["MUON_LR"] == owner["WEIGHT_DECAY"] == ["Optim"]
    assert owner["MONITOR"] == ["Monitor"] and owner["MODEL"] == ["Root"]
    assert owner["GPT2_N_LAYER"] == ["GPT2"] and owner["HAMT_NUM_SLOTS"] == ["HAMT"]
    # each section is read as run.<its name, lower-cased>, hiding nothing of RunConfig's own
    own = {f.name for f in dataclasses.fields(RunConfig)} | set(vars(RunConfig))
    for section in SECTIONS:
        reader = vars(Symbols)[section.__name__.lower()]
        assert typing.get_type_hints(reader.func, vars(symbols))["return"] is section
        assert section.__name__.lower() not in own


def test_a_run_reads_each_section_once_with_hidden_symbols_at_their_off_values():
    run = run_config_from_defaults({})  # AdamW, no pruning, the cosine schedule
    assert run.optim is run.optim and isinstance(run.prune, Prune)
    assert (run.SPAM_THETA, run.optim.SPAM_THETA) == (None, 5000.0)
    assert (run.SPAM_ENABLE_CLIP, run.optim.SPAM_ENABLE_CLIP) == (None, False)  # a bool: off
    assert (run.OPTIMIZER_IMPL, run.optim.OPTIMIZER_IMPL) == ("auto", "auto")
    assert (run.SGD_MOMENTUM, run.optim.SGD_MOMENTUM) == (None, 0.0)
    assert (run.PRUNING_TARGET_SPARSITY, run.prune.PRUNING_TARGET_SPARSITY) == (None, 0.0)
    assert run.optim.WEIGHT_DECAY == run.WEIGHT_DECAY == 0.1  # shown: as configured
    assert run.train.GPT2_MIN_LR == run.GPT2_MIN_LR == 1e-4
    assert (run.GPT2_NUM_GPUS, run.distributed.GPT2_NUM_GPUS) == (None, 1)  # one process

    constant = run_config_from_defaults({"LR_SCHEDULE": "constant"})
    assert (constant.GPT2_MIN_LR, constant.train.GPT2_MIN_LR) == (None, 0.0)
    # hidden without an off value: what it means is its reader's to decide
    matrix = run_config_from_defaults({"OPTIMIZER_MODE": "multiple"})
    assert matrix.OPTIMIZER is None and matrix.optim.OPTIMIZER is None
    assert run.prune.PRUNING_METHOD is None
    # a new run is new sections
    assert with_batch_plan(run, 3, 4).train.BATCH_SIZE == 3 and run.train.BATCH_SIZE == 12


def test_a_field_with_an_off_value_is_typed_without_none():
    hints = {c: typing.get_type_hints(c, vars(symbols)) for c in (Optim, Prune, Train)}
    assert hints[Optim]["SPAM_THETA"] is float and hints[Optim]["SPAM_ENABLE_CLIP"] is bool
    assert hints[Optim]["OPTIMIZER_IMPL"] == typing.Literal["auto", "fused", "foreach", "loop"]
    assert hints[Optim]["OPTIMIZER"] == typing.get_type_hints(Symbols)["OPTIMIZER"]
    assert type(None) in typing.get_args(hints[Optim]["OPTIMIZER"])
    assert hints[Train]["LEARNING_RATE"] is float  # never hidden: as in Symbols
    # each package's table is what its section holds
    tables = [p for d in ("*", "*/*", "*/*/*") for p in ROOT.glob(f"{d}/off_values.toml")]
    assert {p.parent.relative_to(ROOT).as_posix() for p in tables} >= {"lib/optim", "lib/train"}
    names = {s.folder: s.name for s in sections(open_tree())}
    for path in tables:
        table = tomllib.loads(path.read_text())
        section = getattr(symbols, names[path.parent.relative_to(ROOT).as_posix()])
        defaults = {f.name: f.default for f in dataclasses.fields(section)}
        assert {n: defaults[n] for n in table} == table, path


TREE = """\
mainmenu "toy"
config FEATURE
	bool "A feature"
source "pkg/Kconfig"
"""
PKG = """\
config PKG_SIZE
	int "Size"
	depends on FEATURE
	range 1 10
	default 4
config PKG_RATE
	string "Rate"
	depends on FEATURE
	default "0.5"
	help
	  Allowed 0 to 1.
choice PKG_MODE
	prompt "Mode"
	depends on FEATURE
config PKG_MODE_FAST
	bool "fast"
config PKG_MODE_SLOW
	bool "slow"
endchoice
config PKG_ALWAYS
	int "Shown"
	range 1 10
	default 2
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A two-file Kconfig tree (the top and a package, pkg/) in tmp_path."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "Kconfig").write_text(TREE)
    (tmp_path / "pkg" / "Kconfig").write_text(PKG)
    monkeypatch.chdir(tmp_path)

    def tree(off: str) -> kconfiglib.Kconfig:
        (tmp_path / "pkg" / "off_values.toml").write_text(textwrap.dedent(off))
        return kconfiglib.Kconfig("Kconfig", warn_to_stderr=False)

    return tree


def test_the_generated_section_reads_a_hidden_symbol_as_its_off_value(toy, tmp_path):
    kconf = toy('PKG_SIZE = 1\nPKG_RATE = 0\nPKG_MODE = "slow"\n')
    namespace: dict[str, object] = {}
    exec(compile(render_symbols(kconf, tmp_path), "symbols.py", "exec"), namespace)
    hidden = namespace["Symbols"](FEATURE=False, PKG_ALWAYS=3)  # type: ignore[operator]
    assert dataclasses.asdict(hidden.pkg) == {
        "PKG_SIZE": 1,
        "PKG_RATE": 0.0,  # a float written as an integer
        "PKG_MODE": "slow",
        "PKG_MODE_FAST": False,  # no line: a hidden bool is off
        "PKG_MODE_SLOW": False,
        "PKG_ALWAYS": 3,
    }
    shown = namespace["Symbols"](FEATURE=True, PKG_SIZE=7, PKG_ALWAYS=3)  # type: ignore[operator]
    assert shown.pkg.PKG_SIZE == 7 and shown.root.FEATURE is True


def test_an_off_value_that_does_not_fit_its_symbol_is_one_error_naming_each(toy, tmp_path):
    kconf = toy(
        """\
        PKG_SIZE = "four"
        PKG_RATE = true
        PKG_MODE = "medium"
        PKG_ALWAYS = 1
        FEATURE = false
        NO_SUCH = 1
        """
    )
    with pytest.raises(ConfigError) as err:
        sections(kconf, tmp_path)
    assert err.value.problems == [
        'pkg/off_values.toml: PKG_SIZE = "four" is not an integer, the type of CONFIG_PKG_SIZE',
        "pkg/off_values.toml: PKG_RATE = true is not a number, the type of CONFIG_PKG_RATE",
        'pkg/off_values.toml: PKG_MODE = "medium" is not one of fast, slow, the type of '
        "CONFIG_PKG_MODE",
        "pkg/off_values.toml gives PKG_ALWAYS an off value, but nothing hides "
        "CONFIG_PKG_ALWAYS: remove the line",
        "pkg/off_values.toml names FEATURE, which the top-level Kconfig defines: move it to "
        "off_values.toml",
        "pkg/off_values.toml names NO_SUCH, which is no Kconfig symbol or named choice",
    ]
    (tmp_path / "pkg" / "off_values.toml").write_text("PKG_SIZE = \n")
    with pytest.raises(ConfigError, match=r"pkg/off_values.toml is not valid TOML \("):
        sections(kconf, tmp_path)


def test_two_packages_whose_sections_would_share_a_name_are_refused(tmp_path, monkeypatch):
    for folder in ("lib/pkg", "lib/other/pkg"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "Kconfig").write_text(
            f"config {folder.upper().replace('/', '_')}\n\tbool\n"
        )
    (tmp_path / "Kconfig").write_text('source "lib/pkg/Kconfig"\nsource "lib/other/pkg/Kconfig"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        sections(kconfiglib.Kconfig("Kconfig", warn_to_stderr=False), tmp_path)
    assert err.value.problems == [
        "the section of lib/other/pkg would be named Pkg, as the section of lib/pkg is: "
        "rename the folder"
    ]
