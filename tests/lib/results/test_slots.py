"""HAMT's slot use in `make results`: the final slot utilisation and slots used of
runs that recorded them (lib/results/slots.py), no such column otherwise.

tests/assets/hamt_slots_metrics.json is the metrics.json of a real 40-step HAMT
run (2 layers, 4 slots, top-2 adaptive router, balance loss off, learning rate
0.01), measured on the 2-core Xeon CPU test VM, cut to the fields the results
read. Its router drifted off some slots: utilisation 0.983, 0.891, 0.959 and
slots used 1.0, 0.75, 0.875 at steps 1, 20 and 40.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from lib.results.summary import summarize
from tests.lib.results.conftest import make_run
from tests.lib.results.test_results import COLUMNS, parse_tables

ASSET = Path(__file__).resolve().parents[2] / "assets" / "hamt_slots_metrics.json"
RECORDED = json.loads(ASSET.read_text())
SLOTS = ["slot utilisation", "slots used"]


def hamt_run(root: Path, name: str, metrics: dict) -> Path:
    """A HAMT run folder: the recorded run's configuration and the given metrics.json."""
    kconf = open_tree()
    for symbol, value in [
        ("MODEL_HAMT", 2),
        ("HAMT_N_LAYER", "2"),
        ("HAMT_NUM_SLOTS", "4"),
        ("HAMT_ADAPTIVE_SLOTS", 2),
        ("HAMT_ADAPTIVE_SLOTS_TOPK", "2"),
        ("HAMT_ADAPTIVE_SLOTS_BALANCE", "0"),
    ]:
        kconf.syms[symbol].set_value(value)
    run = root / name
    run.mkdir(parents=True)
    write_outputs(kconf, run / "config.txt", run / "config.py")
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def test_final_slot_use_of_hamt_runs_and_none_for_gpt2(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gpt2_adamw_none", 100.0)
    hamt_run(root, "hamt_adamw_none", RECORDED)
    # A HAMT run from before slot use was recorded: its cells are unknown.
    older = {
        k: v
        for k, v in RECORDED.items()
        if k not in ("slot_utilisation_series", "slots_used_series")
    }
    hamt_run(root, "hamt_adamw_older", older)
    md, _, rows = summarize(root)
    gpt2, hamt = parse_tables(md)
    assert gpt2.header == COLUMNS + ["status"]  # no run of this table has slot figures
    assert hamt.header == COLUMNS + SLOTS + ["status"]
    # The last recorded values (step 40), not the first (0.983, 1.000) nor the lowest.
    assert [hamt.row("hamt_adamw_none")[h] for h in SLOTS] == ["0.959", "0.875"]
    assert [hamt.row("hamt_adamw_older")[h] for h in SLOTS] == ["-", "-"]
    assert hamt.row("hamt_adamw_none")["best ppl"] == "2.86"  # the recorded run's own figures

    lines = list(csv.DictReader(io.StringIO((root / "summary.csv").read_text())))
    by = {line["run"]: line for line in lines}
    assert [by["hamt_adamw_none"][h] for h in SLOTS] == ["0.958943", "0.875"]
    assert [by["gpt2_adamw_none"][h] for h in SLOTS] == ["", ""]
    assert [by["hamt_adamw_older"][h] for h in SLOTS] == ["", ""]
    assert r"slot utilisation & slots used & status \\" in (root / "summary.tex").read_text()


def test_a_gpt2_summary_has_no_slot_columns(matrix):
    summarize(matrix)
    for name in ("summary.md", "summary.csv", "summary.tex"):
        assert "slot" not in (matrix / name).read_text().replace(str(matrix), ""), name
