"""scripts/nanogpt_compare.py: ours and nanoGPT alternate, nanoGPT's log is read without
its evaluation iterations, the ratios are ours/nanoGPT, and the page shows the records.

Both sides are stubs: a Makefile that copies a metrics.json for ours, and a train.py that
prints nanoGPT's log lines for nanoGPT (fixture text written here, none of its code)."""

from __future__ import annotations

import importlib.util
import json
import math
import pickle
import statistics
import sys
from array import array

import pytest

from lib.paths import ROOT
from lib.results.nanogpt import pairs, scoring, table, work

spec = importlib.util.spec_from_file_location(
    "nanogpt_compare", ROOT / "scripts/nanogpt_compare.py"
)
assert spec and spec.loader
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

CHARS = ["\n", "a", "b"]
# nanoGPT's lines at eval_interval=4: the evaluation prints before its iteration, whose time
# then includes it (iterations 0, 4 and 8 here); the other six took 700 ms in all.
LOG = """tokens per iteration will be: 768
found vocab_size = 3 (inside data/shakespeare_char/meta.pkl)
step 0: train loss 4.2000, val loss 4.2100
iter 0: loss 4.1000, time 900.00ms, mfu -100.00%
iter 1: loss 3.9000, time 100.00ms, mfu -100.00%
iter 2: loss 3.5000, time 110.00ms, mfu -100.00%
iter 3: loss 3.1000, time 120.00ms, mfu -100.00%
step 4: train loss 2.5000, val loss 2.6000
iter 4: loss 2.9000, time 700.00ms, mfu -100.00%
iter 5: loss 2.7000, time 130.00ms, mfu 0.01%
iter 6: loss 2.5000, time 90.00ms, mfu 0.01%
iter 7: loss 2.4000, time 150.00ms, mfu 0.01%
step 8: train loss 2.1000, val loss 2.2500
saving checkpoint to out-shakespeare-char
iter 8: loss 2.3000, time 600.00ms, mfu 0.01%
"""
NANOGPT_MS = 700 / 6
NANOGPT_TPS = 768 * 1000 / NANOGPT_MS  # 6582.857...


def prepared(tmp_path, dtype="uint16", name="shakespeare-char"):
    """A prepared character folder as `make prepare` writes it, three characters."""
    folder = tmp_path / "data" / name
    folder.mkdir(parents=True)
    tokens = {"train": [1, 2, 0, 1, 2, 1], "val": [2, 1, 0]}
    for split, ids in tokens.items():
        (folder / f"{split}.bin").write_bytes(
            array("H" if dtype == "uint16" else "I", ids).tobytes()
        )
    meta = {
        "format_version": 1,
        "dataset": "shakespeare",
        "tokenizer": {"name": "char", "vocab_size": 3, "chars": CHARS},
        "vocab_size": 3,
        "dtype": dtype,
        "train_tokens": 6,
        "val_tokens": 3,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def stub_nanogpt(tmp_path):
    folder = tmp_path / "ngpt"
    folder.mkdir()
    # Like nanoGPT's train.py: executes its config files in its own namespace, then seeds
    # torch with 1337 (a stand-in torch, so that the stub starts fast).
    (folder / "train.py").write_text(
        "import os, sys, types\n"
        "with open(os.environ['ORDER'], 'a') as f:\n"
        "    f.write('nanogpt ' + ' '.join(sys.argv[1:]) + '\\n')\n"
        "sys.modules['torch'] = types.SimpleNamespace(manual_seed=lambda seed: None)\n"
        "for arg in sys.argv[1:]:\n"
        "    if '=' not in arg and os.path.exists(arg):\n"
        "        exec(open(arg).read())\n"
        "sys.modules['torch'].manual_seed(1337)\n"
        f"print({LOG!r}, end='')\n"
    )
    return folder


def stub_checkout(tmp_path, ours):
    """A checkout whose `make` copies metrics-<RUN_NAME>.json into results/<RUN_NAME>/."""
    folder = tmp_path / "ours"
    folder.mkdir()
    (folder / "Makefile").write_text(
        ".DEFAULT_GOAL := all\n"
        "defconfig-gpt2-shakespeare-char:\n"
        "\t@echo defconfig >> $(ORDER)\n"
        "all:\n"
        "\t@echo ours $(RUN_NAME) $(SET) $(SCALE_ITERS) >> $(ORDER)\n"
        "\t@mkdir -p results/$(RUN_NAME)\n"
        "\t@cp metrics-$(RUN_NAME).json results/$(RUN_NAME)/metrics.json\n"
        # the seed SET gave, else the defconfig's, in the config.txt a run writes
        "\t@echo CONFIG_TRAIN_SEED=$(or $(lastword $(subst =, ,$(filter TRAIN_SEED=%,$(SET)))),"
        "1337) > results/$(RUN_NAME)/config.txt\n"
    )
    for i, (ms, final) in enumerate(ours, 1):
        metrics = {
            "status": "completed",
            "run_id": f"nanogpt-compare-t-{i}",
            "iterations": 8,
            "tokens_per_iter": 768,
            "ms_per_iter": ms,
            "tokens_per_sec": 768 * 1000 / ms,
            "final_val_loss": final,
            "speed": {"cpu_linear": "aten"},
        }
        (folder / f"metrics-nanogpt-compare-t-{i}.json").write_text(json.dumps(metrics))
    return folder


HOST = {
    "node": "h",
    "cpu": "AMD EPYC",
    "cores": 2,
    "threads": 2,
    "torch": "2.13.0+cpu",
    "cpu_capability": "AVX2",
    "python": "py",
}


class Scores:
    """Stands in for score_finals (tested on real models below): pair i's models score
    2.0 + i/10 (ours) and 2.05 (nanoGPT); it keeps what it was asked to score, and
    whether nanoGPT's checkpoint path held a file then."""

    def __init__(self):
        self.asked = []

    def __call__(self, run_dir, ckpt, data, iters):
        self.asked.append((run_dir, ckpt, ckpt.exists(), data, iters))
        return {"ours": 2.0 + len(self.asked) / 10, "nanogpt": 2.05}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Two pairs against the stubs: ours at 100 then 96 ms/iter."""
    order = tmp_path / "order.txt"
    monkeypatch.setenv("ORDER", str(order))
    monkeypatch.setattr(pairs, "host", lambda: HOST)
    data = prepared(tmp_path)
    ngpt, ours = stub_nanogpt(tmp_path), stub_checkout(tmp_path, [(100.0, 1.9), (96.0, 1.8)])
    stale = ngpt / work.NANOGPT_CKPT  # an earlier run's checkpoint: never this run's
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"earlier")
    scores = Scores()
    record = pairs.compare(ngpt, data, 2, ours, "t", sys.executable, iters=8, score=scores)
    return record, order.read_text().splitlines(), tmp_path, scores


def test_the_sides_alternate_back_to_back_with_each_ones_command(recorded):
    record, order, tmp_path, _ = recorded
    assert [line.split()[0] for line in order] == [
        "defconfig",
        "ours",
        "nanogpt",
        "ours",
        "nanogpt",
    ]
    data_dir = tmp_path / "data"
    assert order[1] == f"ours nanogpt-compare-t-1 DATA_DIR={data_dir} 8"
    assert order[3].startswith("ours nanogpt-compare-t-2 ")
    assert order[2] == "nanogpt " + " ".join(work.nanogpt_args(8))
    assert "--max_iters=8" in order[2] and "--lr_decay_iters=8" in order[2]
    assert "--block_size=64" in order[2] and "--batch_size=12" in order[2]
    assert "--dropout=0.0" in order[2] and "--compile=False" in order[2]
    assert record["commands"]["ours"] == [
        "make defconfig-gpt2-shakespeare-char",
        f"make SET=DATA_DIR={data_dir} RUN_NAME=nanogpt-compare-t-<pair> SCALE_ITERS=8",
    ]


def test_the_record_holds_each_sides_figures_and_the_ratios(recorded):
    record, _, tmp_path, _ = recorded
    first, second = record["pairs"]
    theirs = first["nanogpt"]
    assert theirs["ms_per_iter"] == pytest.approx(116.6667, abs=1e-4)
    assert theirs["tokens_per_sec"] == pytest.approx(NANOGPT_TPS)
    assert theirs["excluded_iters"] == [0, 4, 8] and theirs["timed_iters"] == 6
    assert theirs["steps"] == 9 and theirs["final_val_loss"] == 2.25
    assert first["ours"]["ms_per_iter"] == 100.0 and first["ours"]["final_val_loss"] == 1.9
    # ours 100 ms against nanoGPT's 116.67 ms: 7/6 the tokens/s; 96 ms: 1.21528
    assert first["ratio"]["tokens_per_sec"] == pytest.approx(7 / 6)
    assert second["ratio"]["tokens_per_sec"] == pytest.approx(1.2152778, abs=1e-7)
    assert record["median"]["tokens_per_sec"] == pytest.approx((7 / 6 + 1.2152778) / 2, abs=1e-7)
    walls = first["ours"]["wall_s"], first["nanogpt"]["wall_s"]
    assert first["ratio"]["wall"] == pytest.approx(walls[0] / walls[1])
    assert first["ratio"]["whole_run_tokens_per_sec"] == pytest.approx(8 / 9 * walls[1] / walls[0])
    assert second["ratio"]["final_val_loss"] == pytest.approx(1.8 / 2.25)
    assert record["work"]["data"]["vocab_size"] == 3 and record["work"]["iters"] == 8
    assert record["ours_commit"] is None and record["nanogpt_commit"] is None  # not git repos
    assert record["ours_dirty"] is None
    assert record["host"] == HOST and record["label"] == "t"
    assert (tmp_path / "ngpt" / "nanogpt-compare-t-2.log").read_text() == LOG


def test_nanogpt_reads_our_token_files_and_a_meta_pkl_of_our_vocabulary(recorded):
    _, _, tmp_path, _ = recorded
    folder = tmp_path / "ngpt" / "data" / "shakespeare_char"
    for name in ("train.bin", "val.bin"):
        assert (folder / name).resolve() == tmp_path / "data" / "shakespeare-char" / name
    assert (folder / "train.bin").read_bytes() == array("H", [1, 2, 0, 1, 2, 1]).tobytes()
    # nanoGPT's input, compared as bytes: nothing here is unpickled
    meta = {"vocab_size": 3, "itos": {0: "\n", 1: "a", 2: "b"}, "stoi": {"\n": 0, "a": 1, "b": 2}}
    assert (folder / "meta.pkl").read_bytes() == pickle.dumps(meta)


def test_the_pair_ratios_are_ours_over_nanogpts():
    ours = {"tokens_per_sec": 7680.0, "wall_s": 50.0, "steps": 2000, "final_val_loss": 1.9}
    theirs = {"tokens_per_sec": 6400.0, "wall_s": 80.0, "steps": 2001, "final_val_loss": 1.88}
    ratio = pairs.pair_ratios(ours, theirs)
    assert ratio["tokens_per_sec"] == pytest.approx(1.2)
    assert ratio["wall"] == pytest.approx(0.625)
    # (2000 x 768 / 50) / (2001 x 768 / 80) = 3200 / 2001
    assert ratio["whole_run_tokens_per_sec"] == pytest.approx(1.5992004, abs=1e-7)
    assert ratio["final_val_loss"] == pytest.approx(1.0106383, abs=1e-7)


def test_a_log_without_timed_iterations_or_evaluations_is_refused():
    with pytest.raises(work.CompareError, match="no `iter N"):
        work.parse_nanogpt_log("iter 1: loss 3.0, time 10.00ms, mfu -100.00%\n")
    with pytest.raises(work.CompareError, match="without an evaluation"):
        work.parse_nanogpt_log("step 0: train loss 4.0, val loss 4.1\niter 0: loss 4.0, time 9.0ms")


def test_data_nanogpt_cannot_read_as_it_is_is_refused(tmp_path):
    with pytest.raises(work.CompareError, match="nanoGPT reads uint16"):
        work.char_vocabulary(prepared(tmp_path / "wide", dtype="uint32"))
    with pytest.raises(work.CompareError, match="DATA_DIR/shakespeare-char"):
        work.char_vocabulary(prepared(tmp_path / "named", name="shakespeare-gpt2"))
    short = prepared(tmp_path / "short")
    (short / "val.bin").write_bytes(b"\x01\x00")
    with pytest.raises(work.CompareError, match="do not match"):
        work.char_vocabulary(short)


def test_render_writes_the_records_table_and_check_sees_a_stale_page(recorded):
    record, _, tmp_path, _ = recorded
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "t.json").write_text(json.dumps(record))
    page = tmp_path / "page.md"
    page.write_text(f"# Before\n\n{table.BEGIN}\nstale\n{table.END}\n\nafter\n")
    assert table.render(check=False, folder=folder, page=page) is False  # it rewrote the page
    text = page.read_text()
    assert text.startswith(f"# Before\n\n{table.BEGIN}\n\n") and text.endswith(
        f"{table.END}\n\nafter\n"
    )
    assert "stale" not in text
    assert "| `t.json` | 1 (seed 1337) | 100.0 / 116.7 | 7,680 / 6,583 | **1.167x** |" in text
    assert "| `t.json` | 2 (seed 1337) | 96.0 / 116.7 | 8,000 / 6,583 | **1.215x** |" in text
    assert "| median | 2 pairs | | | **1.191x** |" in text
    assert "| 1.9000 / 2.2500 | 2.1000 / 2.0500 |" in text
    assert "| 1.8000 / 2.2500 | 2.2000 / 2.0500 |" in text
    assert text.count("| 2.1500 / 2.0500 |") == 1  # the medians of the scored losses
    assert "**AMD EPYC, 2 cores (AVX2 kernels), torch 2.13.0+cpu, 2 threads**" in text
    assert table.render(check=True, folder=folder, page=page) is True
    # Another kernel for ours' linear layers on the same host: a table of its own, never
    # one median over both.
    other = json.loads(json.dumps(record))
    for pair in other["pairs"]:
        pair["ours"]["cpu_linear"], pair["ratio"]["tokens_per_sec"] = "onednn", 0.5
    (folder / "u.json").write_text(json.dumps(other))
    table.render(check=False, folder=folder, page=page)
    both = page.read_text()
    assert "| median | 2 pairs | | | **1.191x** |" in both
    assert "| median | 2 pairs | | | **0.500x** |" in both and "4 pairs" not in both
    (folder / "u.json").unlink()
    table.render(check=False, folder=folder, page=page)
    assert page.read_text() == text
    page.write_text(text.replace("1.167x", "1.2x"))
    assert table.render(check=True, folder=folder, page=page) is False
    assert "1.2x" in page.read_text()  # --check leaves the page as it is


def test_the_page_holds_what_the_recorded_comparisons_render():
    assert table.render(check=True) is True


def test_render_check_exits_1_on_a_stale_page_and_0_once_rendered(recorded, monkeypatch):
    record, _, tmp_path, _ = recorded
    folder, page = tmp_path / "records", tmp_path / "page.md"
    folder.mkdir()
    (folder / "t.json").write_text(json.dumps(record))
    page.write_text(f"{table.BEGIN}\nNo record yet\n{table.END}\n")
    monkeypatch.setattr(table, "RECORD_DIR", folder)
    monkeypatch.setattr(table, "PAGE", page)
    assert script.main(["render", "--check"]) == 1
    assert "No record yet" in page.read_text()
    assert script.main(["render"]) == 0 and script.main(["render", "--check"]) == 0
    assert "**1.167x**" in page.read_text()


def test_a_label_that_is_no_run_name_is_refused(tmp_path):
    with pytest.raises(work.CompareError, match="--label 'a b'"):
        script.main(["run", "--nanogpt", str(tmp_path), "--data", str(tmp_path), "--label", "a b"])


def test_each_pair_scores_both_final_models_and_never_an_earlier_nanogpt_checkpoint(recorded):
    record, _, tmp_path, scores = recorded
    ckpt = tmp_path / "ngpt" / work.NANOGPT_CKPT
    data = tmp_path / "data" / "shakespeare-char"
    assert [a[:2] for a in scores.asked] == [
        (tmp_path / "ours" / "results" / f"nanogpt-compare-t-{i}", ckpt) for i in (1, 2)
    ]
    # the stub nanoGPT saves nothing: the earlier file was removed before its run
    assert [a[2:] for a in scores.asked] == [(False, data, 8)] * 2
    first, second = record["pairs"]
    assert first["ours"]["whole_val_loss"] == 2.1 and first["nanogpt"]["whole_val_loss"] == 2.05
    assert second["ratio"]["whole_val_loss"] == pytest.approx(2.2 / 2.05)
    assert record["median"]["whole_val_loss"] == pytest.approx((2.1 + 2.2) / 2 / 2.05)
    assert record["work"]["scored_tokens"] == 2  # 3 validation tokens: 2 predicted
    assert "--always_save_checkpoint=True" in record["commands"]["nanogpt"]
    assert first["ours"]["seed"] == 1337  # the defconfig's: no --seeds


def test_seeds_cycle_over_ours_pairs(tmp_path, monkeypatch):
    order = tmp_path / "order.txt"
    monkeypatch.setenv("ORDER", str(order))
    monkeypatch.setattr(pairs, "host", lambda: HOST)
    runs = [(100.0, 1.9), (96.0, 1.8), (98.0, 1.85)]
    ngpt, ours = stub_nanogpt(tmp_path), stub_checkout(tmp_path, runs)
    record = pairs.compare(
        ngpt, prepared(tmp_path), 3, ours, "t", iters=8, seeds=[7, 9], score=Scores()
    )
    lines = [line for line in order.read_text().splitlines() if line.startswith("ours")]
    assert [line.split()[-2] for line in lines] == ["TRAIN_SEED=7", "TRAIN_SEED=9", "TRAIN_SEED=7"]
    assert [p["ours"]["seed"] for p in record["pairs"]] == [7, 9, 7]
    assert " TRAIN_SEED=<seed>' RUN_NAME=nanogpt-compare-t-<pair>" in record["commands"]["ours"][1]
    # nanoGPT at the same seeds: its config file shifts the seed its train.py fixes
    theirs = [line for line in order.read_text().splitlines() if line.startswith("nanogpt")]
    assert all(
        line.split()[1:3] == ["config/train_shakespeare_char.py", str(work.SEED_CONFIG)]
        for line in theirs
    )
    assert [p["nanogpt"]["seed"] for p in record["pairs"]] == [7, 9, 7]
    assert str(work.SEED_CONFIG) in record["commands"]["nanogpt"]


def test_ours_set_reaches_ours_make_and_its_records_get_a_table_of_their_own(
    recorded, tmp_path, monkeypatch
):
    plain, _, _, _ = recorded
    order = tmp_path / "order-set.txt"
    monkeypatch.setenv("ORDER", str(order))
    ngpt, ours = tmp_path / "ngpt", tmp_path / "ours"
    record = pairs.compare(
        ngpt, tmp_path / "data" / "shakespeare-char", 1, ours, "t", iters=8, seeds=[7],
        score=Scores(), ours_set="CPU_MALLOC_KEEP=n",
    )  # fmt: skip
    line = next(x for x in order.read_text().splitlines() if x.startswith("ours"))
    assert line.split()[-3:] == ["TRAIN_SEED=7", "CPU_MALLOC_KEEP=n", "8"]
    assert record["ours_set"] == "CPU_MALLOC_KEEP=n"
    assert "TRAIN_SEED=<seed> CPU_MALLOC_KEEP=n' RUN_NAME=" in record["commands"]["ours"][1]
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(plain))
    (folder / "b.json").write_text(json.dumps({**record, "date": "2999-01-01T00:00:00"}))
    text = table.block(folder)
    assert text.count("| median |") == 2  # never one median over both
    assert "ours' linear layers aten, ours with `CPU_MALLOC_KEEP=n`" in text
    assert "page faults" not in text  # the stub runs' metrics.json kept none
    # Runs that kept the kernel's share: its medians over the record's pairs.
    for pair, (faults, system) in zip(plain["pairs"], [(4000.0, 3.0), (1000.0, 1.0)]):
        pair["ours"].update(page_faults_per_iter=faults, system_ms_per_iter=system)
    (folder / "a.json").write_text(json.dumps(plain))
    assert "ours' steps each took 2,500 page faults and 2.00 ms of system time" in table.block(
        folder
    )
    # The method names the newest record that ran ours as configured.
    assert text.startswith("Alternating back to back, `make SET=DATA_DIR=")
    assert "CPU_MALLOC_KEEP" not in text.split("\n")[0]


def test_ours_set_takes_only_symbol_assignments():
    assert work.check_ours_set(" CPU_MALLOC_KEEP=n  TF32=y ") == "CPU_MALLOC_KEEP=n TF32=y"
    with pytest.raises(work.CompareError, match="CONFIG_X is not SYMBOL=value"):
        work.check_ours_set("CONFIG_X")
    with pytest.raises(work.CompareError, match="lower=1 is not SYMBOL=value"):
        work.check_ours_set("lower=1")


def test_without_seeds_nanogpt_runs_its_own_and_no_config_file():
    assert str(work.SEED_CONFIG) not in work.nanogpt_args()
    assert work.nanogpt_seed("step 8: ...\n", None) == work.NANOGPT_SEED


def test_a_seed_its_log_does_not_show_is_refused():
    shifted = "nanogpt_compare: torch.manual_seed(1337) -> {}\n"
    assert work.nanogpt_seed(LOG + shifted.format(7), 7) == 7
    for text, seed in [
        (LOG, 7),  # no shift: its train.py no longer seeds that way
        (LOG + shifted.format(8), 7),
        (LOG + shifted.format(7) * 2, 7),
        (LOG + shifted.format(7), None),
        # the configurator prints the file it executes: its source is no shift
        ('    print(f"nanogpt_compare: torch.manual_seed({seed}) -> {seed + 6}")\n', 7),
    ]:
        with pytest.raises(work.CompareError, match="seed"):
            work.nanogpt_seed(text, seed)


def test_the_seed_config_seeds_torch_as_that_seed_itself(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch, "manual_seed", torch.manual_seed)  # put back afterwards
    text = work.SEED_CONFIG_TEXT.format(fixed=work.NANOGPT_SEED, shift=42 - work.NANOGPT_SEED)
    exec(text, {})  # as nanoGPT's configurator does, in train.py's namespace
    torch.manual_seed(1337)  # its train.py's call
    drawn = torch.rand(4)
    monkeypatch.undo()
    torch.manual_seed(42)
    assert torch.equal(drawn, torch.rand(4))
    assert capsys.readouterr().out == "nanogpt_compare: torch.manual_seed(1337) -> 42\n"


def _scored_pair(ours_seed, ours_loss, nanogpt_seed, nanogpt_loss):
    return {
        "ours": {"seed": ours_seed, "whole_val_loss": ours_loss},
        "nanogpt": {"seed": nanogpt_seed, "whole_val_loss": nanogpt_loss},
    }


def test_the_losses_compare_over_distinct_seeds_by_welchs_test():
    from scipy.stats import t as student_t

    ours, theirs = [1.90, 1.91, 1.93], [1.89, 1.92]
    pairs = [
        _scored_pair(1, ours[0], 1, theirs[0]),
        _scored_pair(2, ours[1], 2, theirs[1]),
        _scored_pair(3, ours[2], 2, theirs[1]),  # nanoGPT's seed 2 again: one model
    ]
    # Welch's test, transcribed: t over the unpooled standard error, Welch-Satterthwaite df
    va, vb = (statistics.variance(xs) / len(xs) for xs in (ours, theirs))
    t = (statistics.fmean(ours) - statistics.fmean(theirs)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(ours) - 1) + vb**2 / (len(theirs) - 1))
    p = 2 * student_t.sf(abs(t), df)
    line = table.loss_over_seeds(pairs)
    assert line == (
        "loss on every validation token over seeds (mean ± standard deviation): "
        f"ours 1.9133 ± {statistics.stdev(ours):.4f} (3 seeds), nanoGPT 1.9050 ± "
        f"{statistics.stdev(theirs):.4f} (2 seeds); ours minus nanoGPT +0.0083 nats, "
        f"Welch's t-test p = {p:.2f}"
    )
    # an older record: nanoGPT at its fixed seed only, so nothing to test against
    fixed = [{**pr, "nanogpt": {"whole_val_loss": 1.89}} for pr in pairs]
    assert table.loss_over_seeds(fixed).endswith(
        "nanoGPT 1.8900 (one seed); ours minus nanoGPT +0.0233 nats; one side has one "
        "seed, so no test"
    )
    unscored = [{"ours": {"seed": 1}, "nanogpt": {}}]
    assert table.loss_over_seeds(unscored) is None


def _tiny(seed):
    import torch

    from gpt2.config import GPT2Config
    from gpt2.model import GPT2

    torch.manual_seed(seed)
    shape = {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 4, "bias": False}
    return GPT2(GPT2Config(vocab_size=3, dropout=0.0, **shape)), {"vocab_size": 3, **shape}


def _nanogpt_checkpoint(path, model, args, iters=8, **extra):
    """A checkpoint in the layout nanoGPT's train.py saves (written here, not its code)."""
    import torch

    state = {
        "model": model.state_dict(),
        "optimizer": {},
        "model_args": {**args, "dropout": 0.0},
        "iter_num": iters,
        "best_val_loss": torch.tensor(1.5),
        "config": {"dataset": "shakespeare_char", "always_save_checkpoint": True},
        **extra,
    }
    torch.save(state, path)


def test_nanogpts_checkpoint_loads_into_our_gpt2_and_is_scored_on_every_token(tmp_path):
    import torch
    import torch.nn.functional as F

    ours, args = _tiny(0)
    theirs, _ = _tiny(1)  # other weights, the same shape
    ckpt = tmp_path / "ckpt.pt"
    _nanogpt_checkpoint(ckpt, theirs, args)
    loaded = scoring.nanogpt_final_model(ckpt, ours, 8)
    assert all(torch.equal(a, b) for a, b in zip(loaded.parameters(), theirs.parameters()))
    tokens = torch.tensor([0, 1, 2, 2, 1, 0, 0, 1, 2, 1, 1])  # 10 predictions, block 4
    # Transcription: disjoint windows [0, 4), [4, 8), [8, 10); each predicts its next tokens.
    loaded.eval()
    nll = 0.0
    for b in (0, 4, 8):
        e = min(b + 4, len(tokens) - 1)
        x, y = tokens[b:e][None], tokens[b + 1 : e + 1][None]
        logits, _ = loaded(x, y)
        nll += F.cross_entropy(logits[0].double(), y[0], reduction="sum").item()
    got = scoring.whole_split_loss(loaded, tokens, 4)
    assert got == pytest.approx(nll / 10, rel=1e-6)
    assert scoring.whole_split_loss(ours, tokens, 4) != pytest.approx(got, rel=1e-3)


def test_a_nanogpt_checkpoint_of_another_step_model_or_content_is_refused(tmp_path):
    import argparse

    ours, args = _tiny(0)
    path = tmp_path / "ckpt.pt"
    with pytest.raises(work.CompareError, match="saved no checkpoint"):
        scoring.nanogpt_final_model(path, ours, 8)
    _nanogpt_checkpoint(path, ours, args, iters=6)  # its last save was not the last step
    with pytest.raises(work.CompareError, match="holds iteration 6, not 8"):
        scoring.nanogpt_final_model(path, ours, 8)
    wider, wide_args = _tiny(0)
    _nanogpt_checkpoint(path, wider, {**wide_args, "n_layer": 2})
    with pytest.raises(work.CompareError, match="differs from ours.*n_layer"):
        scoring.nanogpt_final_model(path, ours, 8)
    _nanogpt_checkpoint(path, ours, args, code=argparse.Namespace(x=1))  # not unpickled
    with pytest.raises(work.CompareError, match="not a nanoGPT checkpoint"):
        scoring.nanogpt_final_model(path, ours, 8)


def test_ours_final_model_is_its_latest_checkpoint_at_the_last_step(tmp_path):
    import dataclasses

    import torch

    from lib.run.checkpoint import FORMAT

    model, _ = _tiny(3)
    run = tmp_path / "run"
    run.mkdir()
    state = {
        "format": FORMAT,
        "step": 8,
        "family": "gpt2",
        "model": model.state_dict(),
        "optimizer": {},
        "model_config": dataclasses.asdict(model.config),
        "tokenizer": {"name": "char", "vocab_size": 3, "chars": CHARS},
    }
    torch.save(state, run / "ckpt_latest.pt")
    loaded = scoring.ours_final_model(run, 8)
    assert all(torch.equal(a, b) for a, b in zip(loaded.parameters(), model.parameters()))
    with pytest.raises(work.CompareError, match="is step 8, not 9"):
        scoring.ours_final_model(run, 9)
    (run / "ckpt_latest.pt").unlink()
    with pytest.raises(work.CompareError, match="no checkpoint at .*ckpt_latest.pt"):
        scoring.ours_final_model(run, 8)


def test_older_records_render_unscored_and_note_their_nanogpt_command(recorded, tmp_path):
    record = recorded[0]
    old = json.loads(json.dumps(record))
    old["date"] = "2000-01-01T00:00:00+00:00"
    old["commands"]["nanogpt"] = old["commands"]["nanogpt"].replace(
        " --always_save_checkpoint=True", ""
    )
    for pair in old["pairs"]:
        for side in ("ours", "nanogpt"):
            pair[side].pop("whole_val_loss")
        pair["ours"].pop("seed")
        pair["ratio"].pop("whole_val_loss")
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "a-old.json").write_text(json.dumps(old))
    (folder / "b-new.json").write_text(json.dumps(record))
    text = table.block(folder)
    assert "nanoGPT without `--always_save_checkpoint=True`" in text
    assert "--always_save_checkpoint=True` in its own checkout" in text  # the newest's
    assert "| `a-old.json` | 1 | " in text and "| 1.9000 / 2.2500 | not scored |" in text
    # one median over both records' pairs: the scored loss over the two scored pairs
    assert "| median | 4 pairs |" in text and text.count("| 2.1500 / 2.0500 |") == 1


def test_records_that_seeded_both_sides_are_also_tested_together(recorded, tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    losses = {1: (1.90, 1.89), 2: (1.91, 1.92), 3: (1.93, 1.90)}
    for name, seeds in (("a.json", (1, 2)), ("b.json", (3, 2))):
        record = json.loads(json.dumps(recorded[0]))
        for pair, seed in zip(record["pairs"], seeds, strict=True):
            for side, loss in zip(table.SIDES, losses[seed], strict=True):
                pair[side].update(seed=seed, whole_val_loss=loss)
        (folder / name).write_text(json.dumps(record))
    text = table.block(folder)
    together = [line for line in text.splitlines() if "together" in line]
    assert len(together) == 1  # seed 2 ran in both: one model a side
    assert together[0].startswith("- `a.json` and `b.json` together: loss on every")
    assert "ours 1.9133 ± 0.0153 (3 seeds), nanoGPT 1.9033 ± 0.0153 (3 seeds)" in together[0]
    # each record's own medians first
    ratio = statistics.median(p["ratio"]["tokens_per_sec"] for p in recorded[0]["pairs"])
    assert f"- `a.json`: medians of 2 pairs, ours' tokens/s {ratio:.3f}x nanoGPT's" in text


def test_a_hosts_kernel_limits_are_recorded_and_named(monkeypatch):
    for name in pairs.KERNEL_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert pairs.host()["kernel_limits"] == {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    limited = {**HOST, "kernel_limits": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "A": "b"}}
    assert table._host_title(limited) == (
        "AMD EPYC, 2 cores (AVX2 kernels, A=b, MKL_ENABLE_INSTRUCTIONS=AVX2), "
        "torch 2.13.0+cpu, 2 threads"
    )
    assert (
        table._host_title(HOST) == "AMD EPYC, 2 cores (AVX2 kernels), torch 2.13.0+cpu, 2 threads"
    )
