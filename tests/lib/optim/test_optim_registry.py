"""The optimizers are one registry (lib/optim/registry.py): the Kconfig symbols,
the matrix's axis, the estimate's prices and the results' labels come from it,
and a class of the user's own runs through OPTIMIZER=custom (lib/optim/custom.py)
without editing the tree: checked at configuration time, built, recorded by
name and content hash, priced from its measured state, and a matrix entry."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import textwrap

import kconfiglib
import pytest
import torch

from lib.config.kconfig import ConfigError, open_tree
from lib.estimate.memory import model_counts, optimizer_bytes
from lib.matrix import grid
from lib.model import registry as families
from lib.optim import base_optimizer, build_optimizer, optimizer_impl, registry, state_bytes
from lib.optim.registry import OPTIMIZERS
from lib.paths import ROOT
from lib.results import labels
from lib.run.fingerprint import user_sources
from tests.scripts.conftest import project  # noqa: F401 (fixture)

VOCAB = 40


def test_records_and_kconfig_name_the_same_optimizers():
    kconf = open_tree()
    choice = kconf.named_choices["OPTIMIZER"]
    assert [s.name for s in choice.syms] == [o.choice_symbol for o in OPTIMIZERS]
    enable = sorted(n for n in kconf.syms if n.startswith("OPTIMIZER_ENABLE_"))
    assert enable == sorted(o.matrix_symbol for o in OPTIMIZERS)
    assert all(kconf.syms[o.matrix_symbol].orig_type == kconfiglib.BOOL for o in OPTIMIZERS)
    owned = {s for o in OPTIMIZERS for s in o.symbols}
    assert owned <= set(kconf.syms) | set(kconf.named_choices), owned - set(kconf.syms)
    # every table that used to list optimizers now reads the records
    assert grid.OPTIMIZERS == {o.matrix_symbol: o.name for o in OPTIMIZERS}
    assert labels.OPTIMIZERS == {o.name: o.label for o in OPTIMIZERS}
    assert all(o.build or o.base_symbol for o in OPTIMIZERS)
    with pytest.raises(ValueError, match="no record in lib/optim/registry.py"):
        registry.method("no-such-optimizer")


def _model(run):
    family = families.family(run.MODEL)
    torch.manual_seed(0)
    return family.build(family.from_run_config(run, VOCAB))


def _stepped(run, model):
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    gen = torch.Generator().manual_seed(1)
    for _ in range(2):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    return opt


@pytest.mark.parametrize(
    "settings",
    [
        {"OPTIMIZER_ADAMW": "y"},
        {"OPTIMIZER_ADAMW": "y", "ADAM_AMSGRAD": "y", "OPTIMIZER_IMPL_LOOP": "y"},
        {"OPTIMIZER_ADAMWSPAM": "y"},
        {"OPTIMIZER_SGD": "y"},
        {"OPTIMIZER_ADAM": "y"},
        {"OPTIMIZER_ADAMWADV": "y"},
        {"OPTIMIZER_MUON": "y"},
    ],
    ids=lambda s: "-".join(k.removeprefix("OPTIMIZER_").lower() for k in s),
)
def test_each_records_price_is_the_state_its_optimizer_keeps(tiny_run, settings):
    run = tiny_run(**settings)
    opt = _stepped(run, _model(run))
    counts = model_counts(run, VOCAB)[1]
    extra = 0
    if base_optimizer(run.optim) == "muon":  # Muon keeps no step counter for its matrices
        extra = 4 * len(opt.param_groups[0]["params"])
    assert optimizer_bytes(run, counts) == state_bytes(opt) + extra > 0


LION = '''\
"""Lion (Chen et al. 2023, arXiv 2302.06675): the sign of an interpolated momentum."""
import torch


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(b1 * m + (1 - b1) * p.grad), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)
'''


@pytest.fixture
def lion(tmp_path, monkeypatch):
    """A module of the user's own, importable as user_lion from its folder."""
    folder = tmp_path / "mine"
    folder.mkdir()
    path = folder / "user_lion.py"
    path.write_text(LION)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "user_lion", raising=False)
    yield path
    sys.modules.pop("user_lion", None)


def lion_step(p, m, g, lr, b1, b2, wd):
    """Lion's rule written out (float64), for one tensor."""
    p = p * (1 - lr * wd) - lr * torch.sign(b1 * m + (1 - b1) * g)
    return p, b2 * m + (1 - b2) * g


def test_a_class_of_ones_own_trains_by_its_rule_and_is_recorded(tiny_run, lion):
    run = tiny_run(
        OPTIMIZER_CUSTOM="y",
        OPTIMIZER_CUSTOM_CLASS="user_lion:Lion",
        OPTIMIZER_CUSTOM_KWARGS="betas=(0.8,0.95)",
        WEIGHT_DECAY="0.1",
    )
    model = _model(run)
    before = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    decayed = {id(p) for g in model.param_groups(0.1) if g["weight_decay"] for p in g["params"]}
    opt = _stepped(run, model)
    assert type(opt).__name__ == "Lion" and opt.defaults["betas"] == (0.8, 0.95)
    assert optimizer_impl(opt) == "Lion (its own step)"  # not torch's flags it lacks
    gen = torch.Generator().manual_seed(1)
    grads = [[torch.randn(p.shape, generator=gen) for p in model.parameters()] for _ in range(2)]
    for (name, p), *gs in zip(model.named_parameters(), *grads):
        want, m = before[name], torch.zeros_like(before[name])
        wd = 0.1 if id(p) in decayed else 0.0
        for g in gs:
            want, m = lion_step(want, m, g.double(), run.LEARNING_RATE, 0.8, 0.95, wd)
        torch.testing.assert_close(p.double(), want, rtol=1e-5, atol=1e-6)

    # the estimate measures one buffer per parameter, as the class keeps
    counts = model_counts(run, VOCAB)[1]
    assert optimizer_bytes(run, counts) == state_bytes(opt) == 4 * counts.params

    # recorded by name and by content: a changed file is a different configuration
    from lib.optim.custom import describe

    record = describe(run.optim)
    assert record["class"] == "user_lion:Lion" and record["kwargs"] == {"betas": (0.8, 0.95)}
    assert record["sha256"] == hashlib.sha256(lion.read_bytes()).hexdigest()
    first = user_sources(run)["optimizer_source"]
    lion.write_text(LION.replace("Lion (Chen", "Lion, edited (Chen"))
    assert user_sources(run)["optimizer_source"] != first
    assert user_sources(tiny_run()) == {}  # the built-in ones: nothing more hashed


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"OPTIMIZER_CUSTOM_CLASS": ""}, "OPTIMIZER_CUSTOM_CLASS is empty"),
        ({"OPTIMIZER_CUSTOM_CLASS": "user_lion"}, 'is not "module:Class"'),
        ({"OPTIMIZER_CUSTOM_CLASS": "no_such_module_x:Lion"}, "cannot import no_such_module_x"),
        ({"OPTIMIZER_CUSTOM_CLASS": "user_lion:Nope"}, "Nope in user_lion has no such name"),
        (
            {"OPTIMIZER_CUSTOM_CLASS": "user_lion:torch"},
            "is a module, not a subclass of torch.optim",
        ),
        (
            {"OPTIMIZER_CUSTOM_CLASS": "collections:OrderedDict"},
            "OrderedDict in collections is a class whose bases (dict, object) do not include "
            "torch.optim.Optimizer",
        ),
        ({"OPTIMIZER_CUSTOM_KWARGS": "momentum=0.9"}, "its constructor takes no momentum"),
        ({"OPTIMIZER_CUSTOM_KWARGS": "betas=(0.9"}, "is not a list of keyword arguments"),
        ({"OPTIMIZER_CUSTOM_KWARGS": "0.9"}, "only name=value pairs"),
        ({"OPTIMIZER_CUSTOM_KWARGS": "lr=1"}, "sets lr, which the trainer passes itself"),
        ({"OPTIMIZER_CUSTOM_KWARGS": "betas=__import__('os')"}, "is not a Python literal"),
    ],
)
def test_a_wrong_class_or_keyword_is_one_paragraph_naming_the_symbol(
    tiny_run, lion, settings, says
):
    base = {"OPTIMIZER_CUSTOM": "y", "OPTIMIZER_CUSTOM_CLASS": "user_lion:Lion"}
    with pytest.raises(ConfigError) as err:
        tiny_run(**{**base, **settings})
    text = str(err.value)
    assert says in text and "CONFIG_OPTIMIZER_CUSTOM_" in text, text
    assert "Traceback" not in text


def test_a_class_without_weight_decay_is_refused_unless_decay_is_zero(tiny_run, lion):
    lion.write_text(
        LION.replace(", weight_decay=0.0):", "):").replace(
            ", weight_decay=weight_decay", ", weight_decay=0.0"
        )
    )
    custom = {"OPTIMIZER_CUSTOM": "y", "OPTIMIZER_CUSTOM_CLASS": "user_lion:Lion"}
    with pytest.raises(ConfigError, match="takes no weight_decay .*set it to 0"):
        tiny_run(**custom, WEIGHT_DECAY="0.1")
    assert tiny_run(**custom, WEIGHT_DECAY="0").OPTIMIZER == "custom"


def test_a_class_of_ones_own_is_a_matrix_entry_beside_the_built_in_ones(tiny_run, lion):
    run = tiny_run(
        OPTIMIZER_MODE_MULTIPLE="y",
        OPTIMIZER_ENABLE_ADAMW="y",
        OPTIMIZER_ENABLE_CUSTOM="y",
        OPTIMIZER_CUSTOM_CLASS="user_lion:Lion",
    )
    assert [dict(o)["OPTIMIZER"] for o in grid.optimizer_axis(run)] == ["adamw", "custom"]


def test_the_stand_in_measure_fits_per_parameter_and_per_tensor_state(tiny_run, lion):
    """A class keeping a per-tensor counter besides its buffer: both parts found."""
    lion.write_text(
        LION
        + textwrap.dedent(
            """
            class Counted(Lion):
                def step(self, closure=None):
                    super().step(closure)
                    for group in self.param_groups:
                        for p in group["params"]:
                            s = self.state[p]
                            s["step"] = s.get("step", torch.tensor(0.0)) + 1
            """
        )
    )
    run = tiny_run(OPTIMIZER_CUSTOM="y", OPTIMIZER_CUSTOM_CLASS="user_lion:Counted")
    opt = _stepped(run, _model(run))
    counts = model_counts(run, VOCAB)[1]
    assert (
        optimizer_bytes(run, counts) == state_bytes(opt) == 4 * counts.params + 4 * counts.tensors
    )


# ------------------------------------------------------------ a new built-in optimizer

MODULE = '''\
"""signSGD with momentum (Bernstein et al. 2018): the sign of a momentum buffer."""
from __future__ import annotations

import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.9, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(p.grad)
                p.mul_(1 - group["lr"] * group["weight_decay"]).add_(buf.sign(), alpha=-group["lr"])


def build_signsgd(s, lr, groups, model, device):
    return SignSGD(groups, lr=lr)
'''
RECORD = """    OptimizerMethod("signsgd", "signSGD", "signsgd:build_signsgd", momentum_state),\n"""
CHOICE_ENTRY = """\
config OPTIMIZER_SIGNSGD
	bool "signSGD with momentum"
	select OPTIM_HAS_MASK_PRUNING
	help
	  The sign of a momentum buffer (Bernstein et al. 2018).

"""
MATRIX_ENTRY = """\
config OPTIMIZER_ENABLE_SIGNSGD
	bool "signSGD"
	select OPTIM_HAS_MASK_PRUNING
	help
	  Include signSGD runs in the test matrix.

"""


PRUNING_MODULE = '''\
"""First-order Taylor saliency |w * m| (Molchanov et al. 2019), m the momentum."""


def taylor(weight, state):
    m = state.get("exp_avg", state.get("momentum_buffer"))
    return weight.abs() if m is None else (weight * m).abs()
'''
PRUNING_RECORD = (
    """    PruningMethod("taylor", "|w * m|; mask only", _mask_only, score="taylor:taylor"),\n"""
)
PRUNING_CHOICE = """\
config PRUNING_METHOD_TAYLOR
	bool "Taylor |w * m|"
	depends on OPTIM_HAS_MASK_PRUNING
	help
	  First-order Taylor saliency with the optimizer's momentum.

"""
PRUNING_SWITCH = """\
config PRUNING_ENABLE_TAYLOR
	bool "Taylor |w * m|"
	depends on OPTIM_HAS_MASK_PRUNING
	help
	  Include Taylor-pruned runs in the test matrix.

"""


def add_pruning_method(root) -> None:
    """The module, the record, the choice member and the matrix switch."""
    from tests.gpt2.test_gpt2_variant_registry import replace_once

    (root / "lib" / "prune" / "taylor.py").write_text(PRUNING_MODULE)
    replace_once(
        root / "lib/prune/registry.py", "\n)\nBY_NAME", "\n" + PRUNING_RECORD + ")\nBY_NAME"
    )
    kconfig = root / "lib/prune/Kconfig"
    replace_once(
        kconfig,
        "\nendchoice\n\nchoice ADAMWPRUNE_VARIANT\n",
        "\n" + PRUNING_CHOICE + "endchoice\n\nchoice ADAMWPRUNE_VARIANT\n",
    )
    replace_once(
        kconfig,
        '\ncomment "Target sparsities"\n',
        "\n" + PRUNING_SWITCH + 'comment "Target sparsities"\n',
    )


def add_optimizer(root) -> None:
    """The module, the record, the choice member and the matrix switch."""
    from tests.gpt2.test_gpt2_variant_registry import replace_once

    (root / "lib" / "optim" / "signsgd.py").write_text(MODULE)
    replace_once(root / "lib/optim/registry.py", "\n)\nBY_NAME", "\n" + RECORD + ")\nBY_NAME")
    kconfig = root / "lib/optim/Kconfig"
    replace_once(
        kconfig,
        "\nendchoice\n\nif OPTIMIZER_MODE_MULTIPLE\n",
        "\n" + CHOICE_ENTRY + "endchoice\n\nif OPTIMIZER_MODE_MULTIPLE\n",
    )
    replace_once(
        kconfig,
        "endif # OPTIMIZER_MODE_MULTIPLE\n",
        MATRIX_ENTRY + "endif # OPTIMIZER_MODE_MULTIPLE\n",
    )


@pytest.mark.slow
def test_a_new_optimizer_and_pruning_method_are_each_a_module_a_record_and_two_kconfig_entries(
    project,  # noqa: F811
):
    import json

    from tests.gpt2.test_gpt2_variant_registry import digests, ok
    from tests.scripts.conftest import SHORT_EVAL, make

    before = digests(project)
    add_optimizer(project)
    add_pruning_method(project)
    ok(make(project, "schema"))
    ok(make(project, "defconfig-gpt2-shakespeare-char"))
    sign = "SET=OPTIMIZER_SIGNSGD=y"
    ok(make(project, f"{sign} {SHORT_EVAL}", "LR=1e-3", "SCALE_ITERS=30", "YES=1"))
    run_dir = (project / "results" / "latest").resolve()
    assert "_signsgd_" in f"_{run_dir.name}_", run_dir.name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (
        metrics["status"] == "completed" and metrics["optimizer_impl"] == "SignSGD (its own step)"
    )
    val = metrics["val_loss"]["values"]
    assert val[-1] < val[0], val

    plan = ok(
        make(
            project,
            "SET=OPTIMIZER_MODE_MULTIPLE=y OPTIMIZER_ENABLE_SIGNSGD=y",
            "test-matrix-dry-run",
        )
    )
    assert "gpt2_adamw_none" in plan and "gpt2_signsgd_none" in plan, plan

    # priced by its record: one buffer per weight, about half of AdamW's state
    def optimizer_line(out: str) -> str:
        return next(line for line in out.splitlines() if line.strip().startswith("optimizer"))

    signsgd, adamw = ok(make(project, sign, "estimate")), ok(make(project, "estimate"))
    assert optimizer_line(signsgd) != optimizer_line(adamw), signsgd
    assert "| signsgd | none |" in ok(make(project, "results"))  # the latest run's table

    # the pruning method, with the new optimizer (its entries select mask pruning): its
    # score prunes to the target on the shared ramp
    taylor = "SET=PRUNING_MODE_SINGLE=y PRUNING_METHOD_TAYLOR=y PRUNING_TARGET_SPARSITY=0.5"
    ok(
        make(
            project,
            f"{taylor} OPTIMIZER_SIGNSGD=y {SHORT_EVAL}",
            "LR=1e-3",
            "SCALE_ITERS=30",
            "YES=1",
        )
    )
    metrics = json.loads(((project / "results" / "latest").resolve() / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["pruning_method"] == "taylor"
    assert metrics["optimizer"] == "signsgd", metrics["optimizer"]
    assert abs(metrics["sparsity"] - 0.5) < 1e-3, metrics["sparsity"]
    plan = ok(
        make(
            project,
            "SET=PRUNING_MODE_MULTIPLE=y PRUNING_ENABLE_MAGNITUDE=y PRUNING_ENABLE_TAYLOR=y",
            "test-matrix-dry-run",
        )
    )
    assert "gpt2_adamw_magnitude" in plan and "gpt2_adamw_taylor" in plan, plan
    # priced by its record: a mask per weight, as magnitude
    assert "pruning" in ok(make(project, taylor, "estimate")).lower()

    table = ok(make(project, "results"))
    assert "| signsgd | taylor | 50.0 |" in table, table[-2000:]

    # every setting the new entries show is one the new code reads (the Adam family's
    # betas, AMSGrad and the implementation choice stay hidden: nothing selects them)
    shutil.copy(ROOT / "tests" / "test_symbols_read.py", project / "test_symbols_read.py")
    (project / "conftest.py").write_text("import lib.rules  # noqa: F401 (the rules it checks)\n")
    read = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["test_symbols_read.py", "-k", "OPTIMIZER_SIGNSGD or PRUNING_METHOD_TAYLOR"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert read.returncode == 0 and "2 passed" in read.stdout, read.stdout[-3000:]

    changed = sorted(n for n, d in digests(project).items() if before.get(n) != d)
    assert changed == [
        "lib/config/symbols.py",
        "lib/optim/Kconfig",
        "lib/optim/registry.py",
        "lib/optim/signsgd.py",
        "lib/prune/Kconfig",
        "lib/prune/registry.py",
        "lib/prune/taylor.py",
    ], changed
