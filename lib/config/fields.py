"""The value methods of Symbols, its sections and RunConfig, written once.

@dataclass writes __init__, __repr__, __eq__ and __hash__ as Python source for each
class and compiles it when the module is imported. With Symbols' 427 fields (and as
many again over the sections, and RunConfig once more) that took most of the 150 ms
every command spent importing the configuration. These classes are declared with
@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False), which keeps
what dataclasses.fields() and replace() read and the frozen __setattr__, and take the
four methods from Fields below, which read the same fields at run time. They behave
as @dataclass's would: keyword-only arguments, defaults and default factories, a
TypeError naming a missing or unknown argument, equality and hashing over the field
values in order (so a RunConfig, which holds dicts, is unhashable as before).
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

# (name, default, default_factory) per field, MISSING where there is none; by class
_PLANS: dict[type, tuple[tuple[str, Any, Any], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple(
            (f.name, f.default, f.default_factory) for f in fields(cls) if f.init
        )
    return plan


class Fields:
    """__init__, __repr__, __eq__ and __hash__ of a frozen keyword-only dataclass."""

    __slots__ = ()

    def __init__(self, **values: Any) -> None:
        assign = object.__setattr__  # the class is frozen
        for name, default, factory in _plan(type(self)):
            if name in values:
                assign(self, name, values.pop(name))
            elif default is not MISSING:
                assign(self, name, default)
            elif factory is not MISSING:
                assign(self, name, factory())
            else:  # a misspelt name is the likelier cause: named first, as Python does
                known = {n for n, _, _ in _plan(type(self))}
                _refuse_unknown(self, [v for v in values if v not in known])
                raise TypeError(
                    f"{type(self).__name__}.__init__() missing required keyword argument: {name!r}"
                )
        _refuse_unknown(self, list(values))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name, _, _ in _plan(type(self)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name, _, _ in _plan(type(self)))
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Fields)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())


def _refuse_unknown(record: Fields, names: list[str]) -> None:
    if names:
        raise TypeError(
            f"{type(record).__name__}.__init__() got an unexpected keyword argument {names[0]!r}"
        )
