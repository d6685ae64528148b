"""A researcher's own optimizer, without editing the tree: OPTIMIZER=custom runs the
torch.optim.Optimizer subclass OPTIMIZER_CUSTOM_CLASS names ("module:Class",
importable from the Python path or from the checkout's root, e.g. a file
my_optim.py beside the Makefile) with the keyword arguments of
OPTIMIZER_CUSTOM_KWARGS ("momentum=0.9, betas=(0.9, 0.95)": Python literals).

It is checked when the configuration loads (check(): importable, a subclass,
the keywords its constructor accepts), built with the model's parameter groups
and lr=LEARNING_RATE (each group carries WEIGHT_DECAY as weight_decay), recorded
in metrics.json by name and by the SHA-256 of its source file (describe()), and
priced by `make estimate` from its state measured on a small stand-in
(measured_state_bytes()) instead of assuming AdamW's.
"""

from __future__ import annotations

import ast
import functools
import inspect
from typing import TYPE_CHECKING, Any

from lib import user_code
from lib.plural import with_article
from lib.user_code import UserCodeError, short

if TYPE_CHECKING:
    from lib.config.symbols import Optim
    from lib.optim.registry import Sizes

CLASS, KWARGS = "CONFIG_OPTIMIZER_CUSTOM_CLASS", "CONFIG_OPTIMIZER_CUSTOM_KWARGS"
# The stand-in's learning rate: which state tensors a class keeps does not depend on it
STAND_IN_LR = 1e-3


class CustomOptimizerError(UserCodeError):
    pass


def parse_kwargs(text: str) -> dict[str, Any]:
    """ "a=1, betas=(0.9, 0.95), name='x'" -> {"a": 1, ...}: keyword arguments whose
    values are Python literals, read as a call's arguments (nothing is evaluated)."""
    if not text.strip():
        return {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise CustomOptimizerError(
            f'{KWARGS}="{short(text)}" is not a list of keyword arguments: write '
            f"name=value pairs separated by commas, values as Python literals "
            f'(numbers, strings, True/False/None, tuples), e.g. "momentum=0.9, nesterov=True"'
        ) from None
    assert isinstance(call, ast.Call)
    if call.args or any(k.arg is None for k in call.keywords):
        raise CustomOptimizerError(
            f'{KWARGS}="{short(text)}": only name=value pairs are allowed (no positional '
            f"values, no **)"
        )
    out = {}
    for keyword in call.keywords:
        assert keyword.arg is not None
        if keyword.arg in ("params", "lr"):
            raise CustomOptimizerError(
                f"{KWARGS} sets {keyword.arg}, which the trainer passes itself (the model's "
                f"parameter groups, lr=CONFIG_LEARNING_RATE): drop it"
            )
        try:
            out[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            raise CustomOptimizerError(
                f"{KWARGS}: the value of {keyword.arg} ({ast.unparse(keyword.value)}) is not "
                f"a Python literal (a number, string, True/False/None or a tuple of them)"
            ) from None
    return out


def load_class(spec: str) -> type:
    """The class "module:Class" names, imported (the checkout's root is on the path,
    so a file beside the Makefile is found); a CustomOptimizerError otherwise."""
    import torch

    try:
        cls = user_code.load(spec, CLASS, "Class", "my_optim:Lion")
    except UserCodeError as err:
        raise CustomOptimizerError(str(err)) from None
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        module_name, attribute = user_code.split(spec, CLASS, "Class", "my_optim:Lion")
        what = (
            f"a class whose bases ({', '.join(b.__name__ for b in cls.__mro__[1:])}) do not "
            "include torch.optim.Optimizer"
            if isinstance(cls, type)
            else f"{with_article(type(cls).__name__)}, not a subclass of torch.optim.Optimizer"
        )
        raise CustomOptimizerError(f'{CLASS}="{spec}": {attribute} in {module_name} is {what}')
    return cls


def _accepts(cls: type, names: list[str]) -> list[str]:
    """The names among `names` that cls's constructor does not accept."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return []
    known = {p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    return [n for n in names if n not in known]


def check(s: Optim) -> list[str]:
    """The configuration's problems with its custom optimizer, each naming its symbol."""
    spec, text = s.OPTIMIZER_CUSTOM_CLASS, s.OPTIMIZER_CUSTOM_KWARGS
    if not spec.strip():
        return [
            f'{CLASS} is empty: name your torch.optim.Optimizer subclass as "module:Class" '
            f"(`make menuconfig`, Optimizer menu)"
        ]
    try:
        cls, kwargs = load_class(spec), parse_kwargs(text)
    except CustomOptimizerError as err:
        return [str(err)]
    decays = ["weight_decay"] if s.WEIGHT_DECAY else []
    missing = _accepts(cls, ["lr", *kwargs, *decays])
    if missing:
        return [
            f'{CLASS}="{spec}": its constructor takes no {", ".join(missing)} '
            f"({'lr is CONFIG_LEARNING_RATE; ' if 'lr' in missing else ''}"
            f"{'weight_decay is CONFIG_WEIGHT_DECAY, set it to 0 for a class without one; ' if 'weight_decay' in missing else ''}"
            f"keywords come from {KWARGS}); accepted: "
            f"{str(inspect.signature(cls)).strip('()')}"
        ]
    return []


def build_custom(s: Optim, lr: float, groups: list[dict], model: Any, device: Any) -> Any:
    """The user's class on the model's parameter groups at lr=LEARNING_RATE."""
    cls = load_class(s.OPTIMIZER_CUSTOM_CLASS)
    return cls(groups, lr=lr, **parse_kwargs(s.OPTIMIZER_CUSTOM_KWARGS))


def describe(s: Optim) -> dict[str, Any]:
    """What metrics.json records of it: the class, its keywords, its source file and
    that file's SHA-256 (a changed file is a different optimizer)."""
    recorded = user_code.describe(s.OPTIMIZER_CUSTOM_CLASS, load_class(s.OPTIMIZER_CUSTOM_CLASS))
    return {
        "class": recorded["name"],
        "kwargs": parse_kwargs(s.OPTIMIZER_CUSTOM_KWARGS),
        "file": recorded["file"],
        "sha256": recorded["sha256"],
    }


@functools.cache
def _state_per(spec: str, kwargs_text: str) -> tuple[float, float]:
    """(bytes per parameter, bytes per tensor) of the class's state after two steps
    on a stand-in of three fp32 tensors of different sizes, fitted as
    bytes(t) = a * numel(t) + b."""
    import torch

    cls, kwargs = load_class(spec), parse_kwargs(kwargs_text)
    gen = torch.Generator().manual_seed(0)
    shapes = [(96, 64), (64,), (32, 16)]
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    opt = cls([{"params": params, "weight_decay": 0.0}], lr=STAND_IN_LR, **kwargs)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    per = [
        sum(
            t.numel() * t.element_size()
            for t in opt.state.get(p, {}).values()
            if torch.is_tensor(t)
        )
        for p in params
    ]
    (big, small) = (params[0].numel(), params[2].numel())
    a = (per[0] - per[2]) / (big - small)
    return a, max(per[2] - a * small, 0.0)


def measured_state_bytes(s: Optim, sizes: Sizes) -> int:
    """The custom class's state for a model of `sizes`, from the stand-in's."""
    a, b = _state_per(s.OPTIMIZER_CUSTOM_CLASS, s.OPTIMIZER_CUSTOM_KWARGS)
    return round(a * sizes.params + b * sizes.tensors)
