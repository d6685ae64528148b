"""The optimizers: one record each, everything else derived.

A record says what the rest of the project needs to know about an optimizer:
its name (the value of the Kconfig choice OPTIMIZER, written as the choice
member OPTIMIZER_<NAME> and the test-matrix switch OPTIMIZER_ENABLE_<NAME> in
lib/optim/Kconfig), the label results tables print, where it is built
(`build`: "module:function" of a lib/optim module, called with the Optim
section, the learning rate, the model's parameter groups, the model and the
device), what its state costs
(`state_bytes`, read by `make estimate`) and what its step allocates
(`step_temporaries`), and the Kconfig symbols it owns beyond its two.

The matrix (lib/matrix/grid.py), the estimate (lib/estimate/memory.py), the
results' labels (lib/results/labels.py) and build_optimizer() read these
records, so adding an optimizer is one module with its builder, one record
here and its two Kconfig entries, each selecting the shared settings it reads
(OPTIM_READS_*) and whether it takes mask pruning (plus its own settings, if any);
tests/lib/optim/test_optim_registry.py does exactly that in a scratch copy of
the project. This file imports no torch: configuration checks read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lib.config.symbols import Optim


class Sizes(Protocol):
    """The model's counts a record prices its state with (lib/estimate's ModelCounts)."""

    @property
    def params(self) -> int: ...  # trainable parameters

    @property
    def tensors(self) -> int: ...  # trainable tensors (a step counter each)

    @property
    def prunable(self) -> int: ...  # parameters of the block matrices (Muon's own)

    @property
    def largest(self) -> int: ...  # parameters of the largest tensor


def adam_state(s: Optim, sizes: Sizes) -> int:
    """Two fp32 moments per parameter, a third with AMSGrad, a step counter per tensor."""
    return (12 if s.ADAM_AMSGRAD else 8) * sizes.params + 4 * sizes.tensors


def amsgrad_state(s: Optim, sizes: Sizes) -> int:
    """AdamWAdv: AMSGrad always on, so three moments."""
    return 12 * sizes.params + 4 * sizes.tensors


def momentum_state(s: Optim, sizes: Sizes) -> int:
    """SGD: one momentum buffer per parameter and no step counter."""
    return 4 * sizes.params


def muon_state(s: Optim, sizes: Sizes) -> int:
    """Muon's block matrices keep one momentum buffer, the rest AdamW's two."""
    return 8 * sizes.params - 4 * sizes.prunable + 4 * sizes.tensors


def torch_step_temporaries(s: Optim, sizes: Sizes) -> int:
    """torch's own step (measured on CPU): fused (the default) none; multi-tensor
    the square roots of all second moments at once (one copy of the parameters);
    per-tensor three fp32 copies of the largest tensor (sqrt, quotient, update)."""
    impl = s.OPTIMIZER_IMPL  # "auto" where hidden: Muon and a custom class step their own way
    if impl in ("auto", "fused"):
        return 0
    return 4 * sizes.params if impl == "foreach" else 3 * 4 * sizes.largest


def spam_step_temporaries(s: Optim, sizes: Sizes) -> int:
    """AdamWSPAM's multi-tensor step: the clipped gradients and the bound or the
    denominator, two copies of the parameters."""
    return 2 * 4 * sizes.params


def per_tensor_temporaries(s: Optim, sizes: Sizes) -> int:
    """A step that goes one tensor at a time: three fp32 copies of the largest."""
    return 3 * 4 * sizes.largest


@dataclass(frozen=True)
class OptimizerMethod:
    name: str
    label: str  # results tables and figures ("AdamW-SPAM")
    build: str  # "module:function" in lib/optim: function(s: Optim, lr, groups, model, device)
    state_bytes: Callable[[Optim, Sizes], int]  # moments and counters, one device
    step_temporaries: Callable[[Optim, Sizes], int] = per_tensor_temporaries
    symbols: tuple[str, ...] = ()  # the settings it owns (beyond its two symbols)
    # The optimizer underneath is another record's, named by this choice symbol's
    # value (AdamWPrune: ADAMWPRUNE_BASE); it then prices and builds as that one.
    base_symbol: str | None = None
    # Runs only with the state pruning method, which reads its moments (AdamWPrune);
    # every other optimizer runs dense or with mask pruning.
    state_pruning: bool = False

    @property
    def choice_symbol(self) -> str:
        """The OPTIMIZER member selecting it (its value is the name)."""
        return "OPTIMIZER_" + self.name.upper()

    @property
    def matrix_symbol(self) -> str:
        """The bool that enables it in a test matrix (OPTIMIZER_MODE_MULTIPLE)."""
        return "OPTIMIZER_ENABLE_" + self.name.upper()


_ADAM = ("ADAM_BETA1", "ADAM_BETA2", "ADAM_EPSILON", "ADAM_AMSGRAD", "OPTIMIZER_IMPL")

# In the order menus, matrices and error messages list them.
OPTIMIZERS: tuple[OptimizerMethod, ...] = (
    OptimizerMethod(
        "adamw", "AdamW", "torch_optims:build_adamw", adam_state, torch_step_temporaries, _ADAM
    ),
    OptimizerMethod(
        "adamwspam",
        "AdamW-SPAM",
        "spam_build:build_adamwspam",
        adam_state,
        spam_step_temporaries,
        (*_ADAM, "SPAM_RULE", "SPAM_THETA", "SPAM_INTERVAL", "SPAM_WARMUP_STEPS"),
    ),
    OptimizerMethod(
        "adamwprune",
        "AdamWPrune",
        "",  # built as its base; lib/prune's state pruner does the rest
        adam_state,
        symbols=("ADAMWPRUNE_BASE",),
        base_symbol="ADAMWPRUNE_BASE",
        state_pruning=True,
    ),
    OptimizerMethod(
        "sgd",
        "SGD",
        "torch_optims:build_sgd",
        momentum_state,
        torch_step_temporaries,
        ("SGD_MOMENTUM", "OPTIMIZER_IMPL"),
    ),
    OptimizerMethod(
        "adam", "Adam", "torch_optims:build_adam", adam_state, torch_step_temporaries, _ADAM
    ),
    OptimizerMethod(
        "adamwadv",
        "AdamWAdv",
        "torch_optims:build_adamwadv",
        amsgrad_state,
        torch_step_temporaries,
        _ADAM[:3] + ("OPTIMIZER_IMPL",),
    ),
    OptimizerMethod(
        "muon",
        "Muon",
        "muon:build_muon",
        muon_state,
        symbols=("MUON_LR", "MUON_MOMENTUM", "MUON_NESTEROV", "MUON_NS_STEPS", "MUON_SCALE"),
    ),
    # A class of the user's, named by OPTIMIZER_CUSTOM_CLASS (lib/optim/custom.py):
    # its state is measured on a stand-in, its step taken as per-tensor.
    OptimizerMethod(
        "custom",
        "Custom",
        "custom:build_custom",
        lambda s, sizes: _custom().measured_state_bytes(s, sizes),
        symbols=("OPTIMIZER_CUSTOM_CLASS", "OPTIMIZER_CUSTOM_KWARGS"),
    ),
)
BY_NAME = {o.name: o for o in OPTIMIZERS}


def _custom() -> Any:
    return import_module(".custom", __package__)


def method(name: str) -> OptimizerMethod:
    """The record of OPTIMIZER value `name`; a ValueError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise ValueError(
            f"optimizer '{name}' has no record in lib/optim/registry.py ({known})"
        ) from None


def by_matrix_symbol() -> dict[str, str]:
    """OPTIMIZER_ENABLE_<NAME> -> name, in the registry's order (the matrix's axis)."""
    return {o.matrix_symbol: o.name for o in OPTIMIZERS}


def labels() -> dict[str, str]:
    """name -> the label results tables print."""
    return {o.name: o.label for o in OPTIMIZERS}


def builder(record: OptimizerMethod) -> Any:
    """The record's build function, its module imported on first use."""
    module, _, attribute = record.build.partition(":")
    return getattr(import_module(f".{module}", __package__), attribute)
