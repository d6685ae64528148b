"""A row of lib/config/knlp/names.py: what one knlp symbol means here. Kinds:
same      knlp's value goes to our symbol `ours` as it is
member    a knlp choice member: when it is y, our choice member `ours` is y
values    knlp's value selects one of our choice members (`values` maps it)
runtime   tunes knlp's own runtime only: accepted with a notice (`why`)
pending   a runtime/records feature this project will get as `ours`: acts
          like `same` once `ours` is a symbol here; until then a notice
feature   changes what is trained or measured and is missing here: the
          file is refused, one line per feature, when the value is on
absent    not a knlp symbol at the table's commit: knlp ignored it, so it
          is ignored here too, with a notice (`why` says what to set)
special   translated by translate.py's special() (a unit change, or a
          value knlp's runner substitutes); counted as translated
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    kind: str
    ours: str = ""
    values: tuple[tuple[str, str], ...] = ()
    why: str = ""
    when: str = ""  # a knlp expression: the row applies only when it holds
    file_only: bool = False  # translate only a value the file itself sets
    trains: bool = False  # pending: changes what is trained (refused until it exists)


def same(ours: str, when: str = "") -> Row:
    return Row("same", ours, when=when)


def member(ours: str, file_only: bool = False) -> Row:
    return Row("member", ours, file_only=file_only)


def values(**pairs: str) -> Row:
    return Row("values", values=tuple(pairs.items()))


def runtime(why: str) -> Row:
    return Row("runtime", why=why)


def pending(ours: str, feature: str, trains: bool = False) -> Row:
    return Row("pending", ours, why=feature, trains=trains)


def feature(name: str) -> Row:
    return Row("feature", why=name)


def absent(why: str) -> Row:
    return Row("absent", why=why)


def special() -> Row:
    return Row("special")
