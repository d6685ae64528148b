"""The one `lo..hi[:log]` grammar: the strings it takes and refuses, with the same
verdict and message from a sweep (SWEEP=) and a tuning study (TUNE=)."""

from __future__ import annotations

import math

import pytest

from lib.config.kconfig import ConfigError
from lib.matrix import sweep
from lib.tune import space
from lib.tune.ranges import Range, RangeError, parse_range

# What a study needs of a configuration: the symbols it may set (space.parse's values).
VALUES = {
    "LEARNING_RATE": "0.001",
    "GPT2_WARMUP_STEPS": "2",
    "BATCH_SIZE": "8",
    "WEIGHT_DECAY": "0.1",
    "GPT2_RA_GATED_GATE_INIT": "0",
}


def _both(word: str) -> tuple[Range | list[str], Range | list[str]]:
    """What a random sweep and a study make of one word: its range, or its problems."""
    try:
        (param,) = sweep.parse(word, "random", trials=3).params
        from_sweep: Range | list[str] = param.range
    except ConfigError as err:
        from_sweep = err.problems
    try:
        (dim,) = space.parse(word, VALUES)
        from_tune: Range | list[str] = Range(dim.low, dim.high, dim.log, dim.integer)
    except ConfigError as err:
        from_tune = err.problems
    return from_sweep, from_tune


@pytest.mark.parametrize(
    "word, expected",
    [
        ("LEARNING_RATE=1e-4..1e-2:log", Range(1e-4, 1e-2, True)),
        ("LEARNING_RATE=0.001..0.01", Range(0.001, 0.01)),
        ("LEARNING_RATE=.5..2", Range(0.5, 2.0)),
        ("LEARNING_RATE=1E-3..3e+0:log", Range(1e-3, 3.0, True)),
        ("LEARNING_RATE=+1e-4..1e-3", Range(1e-4, 1e-3)),
        ("WEIGHT_DECAY=0..1", Range(0.0, 1.0)),  # a float symbol: float draws
        ("LR=1e-4..1e-2:log", Range(1e-4, 1e-2, True)),  # the alias, as overrides take
        ("GPT2_RA_GATED_GATE_INIT=-2.5..-0.5", Range(-2.5, -0.5)),  # negatives, linear
        ("GPT2_WARMUP_STEPS=0..60", Range(0, 60, integer=True)),
        ("BATCH_SIZE=8..64:log", Range(8, 64, True, integer=True)),
        ("BATCH_SIZE=1e1..1e2", Range(10, 100, integer=True)),  # integer-valued ends
    ],
)
def test_sweep_and_tune_read_a_range_as_the_same_numbers(word, expected):
    from_sweep, from_tune = _both(word)
    assert from_sweep == from_tune == expected


@pytest.mark.parametrize(
    "word, message",
    [
        (
            "LEARNING_RATE=1e-2..1e-4",
            "the low end must be below the high end; swap them: 1e-4..1e-2",
        ),
        (
            "LEARNING_RATE=1e-3..1e-3",
            "the low end must be below the high end; to fix one value, set it instead of "
            "searching it",
        ),
        (
            "LEARNING_RATE=0..1e-3:log",
            "a log range needs a low end above 0 (log-uniform draws never reach 0); start it "
            "at a small positive value such as 1e-6, or drop :log",
        ),
        (
            "GPT2_RA_GATED_GATE_INIT=-1..1:log",
            "a log range needs a low end above 0 (log-uniform draws never reach 0); start it "
            "at a small positive value such as 1e-6, or drop :log",
        ),
        # Before: a sweep took these as one listed value, refused run by run as no number.
        (
            "LEARNING_RATE=1e-4..1e-2:lg",
            '":lg" is no range option; the one option is :log (log-uniform), '
            "e.g. 1e-4..1e-2:log or 0..100",
        ),
        (
            "LEARNING_RATE=1e-4..1e-2:LOG",
            '":LOG" is no range option; the one option is :log (log-uniform), '
            "e.g. 1e-4..1e-2:log or 0..100",
        ),
        # Before: a sweep stopped on a ValueError traceback.
        (
            "LEARNING_RATE=1.2.3..4",
            'the low end "1.2.3" is not a number; write one as 100, -2, 0.5 or 1e-4',
        ),
        (
            "LEARNING_RATE=1e..2",
            'the low end "1e" is not a number; write one as 100, -2, 0.5 or 1e-4',
        ),
        # Before: both read 1...5 as 1..5.
        (
            "LEARNING_RATE=1...5",
            '"..." is ambiguous; join the ends with two dots and write a fraction with its '
            "leading 0 (0..0.5, not 0...5)",
        ),
        (
            "LEARNING_RATE=1e-4..",
            "the range has no high end; write lo..hi, e.g. 1e-4..1e-2:log or 0..100",
        ),
        (
            "LEARNING_RATE=..1",
            "the range has no low end; write lo..hi, e.g. 1e-4..1e-2:log or 0..100",
        ),
        (
            "LEARNING_RATE=1e-4..1e-3,1e-2",
            'the high end "1e-3,1e-2" is not a number; write one as 100, -2, 0.5 or 1e-4',
        ),
        (
            "LEARNING_RATE=1..inf",
            'the high end "inf" is not a number; write one as 100, -2, 0.5 or 1e-4',
        ),
        ("LEARNING_RATE=1e-4..1e999", "the high end 1e999 is beyond a float's range"),
        # Before: a sweep drew the values and refused each run out of range.
        (
            "LEARNING_RATE=1e-4..20",
            "CONFIG_LEARNING_RATE allows 1e-08 to 10; keep the range within it",
        ),
        # Before: a sweep drew rounded integers from 1.5..3.
        (
            "GPT2_WARMUP_STEPS=1.5..3",
            "CONFIG_GPT2_WARMUP_STEPS is an integer; give integer ends",
        ),
    ],
)
def test_sweep_and_tune_refuse_a_range_with_the_same_message(word, message):
    from_sweep, from_tune = _both(word)
    assert from_sweep == [f"SWEEP: {word}: {message}"]
    assert from_tune == [f'CONFIG_MATRIX_TUNE_SYMBOLS: "{word}": {message}']


def test_a_word_without_dots_is_a_list_to_a_sweep_and_no_range_to_tuning():
    (param,) = sweep.parse("LEARNING_RATE=1e-4,1e-3", "random", trials=2).params
    assert param.values == ("1e-4", "1e-3") and param.range is None
    with pytest.raises(ConfigError) as err:
        space.parse("LEARNING_RATE=1e-4,1e-3", VALUES)
    assert err.value.problems == [
        'CONFIG_MATRIX_TUNE_SYMBOLS: "LEARNING_RATE=1e-4,1e-3": "1e-4,1e-3" is not a range; '
        "write lo..hi (uniform) or lo..hi:log (log-uniform), e.g. 1e-4..1e-2:log or 0..100"
    ]


def test_a_sweep_reports_every_bad_range_and_keeps_dotted_strings_as_values(tmp_path):
    with pytest.raises(ConfigError) as err:
        sweep.parse("LR=1e-2..1e-4 BATCH_SIZE=8,16 WARMUP=0..1.5", "random", trials=2)
    assert [p.split(": ", 2)[1] for p in err.value.problems] == ["LR=1e-2..1e-4", "WARMUP=0..1.5"]
    # a sweep file's problem names its line
    path = tmp_path / "lr"
    path.write_text("SWEEP_MODE=random\nSWEEP_TRIALS=2\n\nLEARNING_RATE=0..1e-3:log\n")
    with pytest.raises(ConfigError) as err:
        sweep.from_file(str(path))
    assert err.value.problems[0].startswith(f"{path}:4: LEARNING_RATE=0..1e-3:log: a log range")
    # a path holds ".." and is a value; a range on a symbol that is no number is refused
    (param,) = sweep.parse("DATA_DIR=../a,../b").params
    assert param.values == ("../a", "../b")
    with pytest.raises(ConfigError, match="a range needs a numeric symbol"):
        sweep.parse("GPT2_ATTENTION=1..3", "random", trials=2)


def test_an_integer_symbol_draws_integers_and_a_float_symbol_floats():
    points = sweep.parse("BATCH_SIZE=8..64:log WEIGHT_DECAY=0..1", "random", 300, 1).points()
    batch = [int(dict(p)["BATCH_SIZE"]) for p in points]  # int() refuses "22.6"
    decay = {float(dict(p)["WEIGHT_DECAY"]) for p in points}
    assert min(batch) >= 8 and max(batch) <= 64
    assert 0.4 < sum(b < math.sqrt(8 * 64) for b in batch) / len(batch) < 0.6  # log-uniform
    assert len(decay) > 100 and all(0 <= d <= 1 for d in decay)  # not just 0 and 1
    (dim,) = space.parse("BATCH_SIZE=8..64:log", VALUES)
    assert dim.grid(3) == [8, 23, 64]


def test_range_at_spans_the_ends_linearly_or_in_log_space():
    assert Range(1e-4, 1e-2, log=True).at(0.5) == pytest.approx(1e-3)
    assert Range(-1.0, 3.0).at(0.25) == 0.0
    assert Range(0, 60, integer=True).at(0.51) == 31
    assert parse_range("-1..1") == Range(-1.0, 1.0)
    with pytest.raises(RangeError, match="the symbol is an integer"):
        parse_range("0..0.5", integer=True)
