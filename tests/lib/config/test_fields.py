"""lib/config/fields.py: Symbols' value methods behave as @dataclass's own would."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace

import pytest

from lib.config.fields import Fields
from lib.config.symbols import Optim, Symbols


@dataclass(frozen=True, kw_only=True)
class Generated:
    a: int
    b: str | None = None
    c: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Written(Fields):
    a: int
    b: str | None = None
    c: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Hashable(Fields):
    a: int
    b: float = 0.0


@pytest.mark.parametrize("cls", [Generated, Written])
def test_defaults_factories_and_argument_errors_as_dataclass(cls):
    one, two = cls(a=1), cls(a=1)
    assert (one.a, one.b, one.c) == (1, None, {})
    assert one.c is not two.c  # a fresh default per instance
    assert one == two and one != cls(a=1, b="x") and one != object()
    with pytest.raises(TypeError, match="missing.*'a'"):
        cls()
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        cls(a=1, z=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        cls(z=2)  # the misspelt name is named, not the missing one
    with pytest.raises(TypeError):
        cls(1)  # keyword-only
    with pytest.raises(FrozenInstanceError):
        one.a = 2
    changed = replace(one, b="y")
    assert (changed.a, changed.b, type(changed)) == (1, "y", cls)
    assert [f.name for f in fields(cls)] == ["a", "b", "c"]
    with pytest.raises(TypeError, match="unhashable"):
        hash(one)  # it holds a dict


def test_repr_equality_and_hash_match_dataclass():
    ours, theirs = Written(a=1, b="x"), Generated(a=1, b="x")
    assert repr(ours).removeprefix("Written") == repr(theirs).removeprefix("Generated")
    nan = Hashable(a=1, b=math.nan)
    assert nan == nan and hash(Hashable(a=1, b=2.0)) == hash((1, 2.0))  # tuple semantics
    assert Hashable(a=1) != Hashable(a=2) and len({Hashable(a=1), Hashable(a=1)}) == 1


def test_symbols_and_sections_use_them():
    assert Symbols.__init__ is Fields.__init__ and Optim.__eq__ is Fields.__eq__
    with pytest.raises(TypeError, match="missing required keyword argument: 'MODEL'"):
        Symbols()
