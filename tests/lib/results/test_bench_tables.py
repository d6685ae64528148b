"""docs/benchmarks.md's generated `make bench` tables hold what their records say."""

from __future__ import annotations

import importlib.util
import json

import pytest

from lib.paths import ROOT
from lib.results.bench_tables import folders, records

spec = importlib.util.spec_from_file_location("bench_table", ROOT / "scripts" / "bench_table.py")
assert spec and spec.loader
bench_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_table)


@pytest.mark.parametrize("name", ["cpu-avx2", "cpu-xeon", "cpu-xeon-loss", "cpu"])
def test_the_page_holds_the_table_its_records_render(name):
    folder = ROOT / "docs" / "bench-data" / name
    assert folders.render(folder) in (ROOT / "docs" / "benchmarks.md").read_text()


def test_every_table_the_page_marks_is_rendered_without_a_folder_named(tmp_path, monkeypatch):
    names = [f.name for f in folders.table_folders()]
    assert names == ["cpu-avx2", "cpu-xeon", "cpu-xeon-loss", "cpu"]  # the page's order
    page = tmp_path / "page.md"
    begin, end = folders.markers(tmp_path / "x")
    page.write_text(f"# Page\n\n{begin}\nstale\n{end}\n")
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    assert folders.table_folders(page) == [tmp_path / "docs" / "bench-data" / "x"]


def test_check_without_a_folder_covers_every_table():
    assert bench_table.main(["--check"]) == 0


def test_a_row_reads_each_figure_from_its_record(tmp_path, monkeypatch):
    source = next((ROOT / "docs" / "bench-data" / "cpu-avx2").glob("step_*.json"))
    record = json.loads(source.read_text())
    record["ours"]["ms_per_iter"], record["plain"]["ms_per_iter"] = 12.34, 56.78
    record["speed_vs_plain"], record["speed_vs_plain_rounds"] = 4.6, [4.5, 4.7]
    record["loop"]["ours_vs_plain_time"], record["loop"]["ours_vs_plain_time_rounds"] = 0.5, [0.25]
    folder = tmp_path / "docs" / "bench-data" / "elsewhere"
    folder.mkdir(parents=True)
    (folder / "step_1.json").write_text(json.dumps(record))
    page = tmp_path / "page.md"
    begin, end = folders.markers(folder)
    page.write_text(f"before\n{begin}\nstale\n{end}\nafter\n")
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    folders.rewrite_page(folder, page)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "stale" not in text
    assert "| 12.3 | 56.8 | 4.600x | 4.500 / 4.700 |" in text
    assert "| 0.500x | 0.250 |" in text


def _old_record(**changes: object) -> dict:
    """A record as `make bench` wrote it before the whole-loop comparison and the
    linear-layer kernel were recorded."""
    record = {
        "model_config": {"vocab_size": 80, "block_size": 64, "n_layer": 4, "n_embd": 128},
        "params": 806016,
        "dtype": "fp32",
        "compiled": False,
        "batch_size": 12,
        "gradient_accumulation": 1,
        "steps_per_round": 30,
        "rounds": 3,
        "threads": 2,
        "ours": {"ms_per_iter": 30.0, "speed": {"loss_impl": "plain"}},
        "plain": {"ms_per_iter": 31.5},
        "peak_memory_mb": 378.7,
        "peak_memory_measure": "peak_rss",
        "speed_vs_plain": 1.05,
        "speed_vs_plain_rounds": [1.04, 1.06],
    }
    record.update(changes)
    return record


def test_an_old_record_shows_what_it_lacks_as_dashes(tmp_path, monkeypatch):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "step_20260101-000000.json").write_text(json.dumps(_old_record()))
    # A renamed record sorts by its time, after the earlier one whatever its prefix.
    (folder / "a_step_20260101-000001.json").write_text(json.dumps(_old_record(dtype="bf16")))
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    lines = folders.render(folder).splitlines()
    # What both share is said once; what differs (the dtype) is each row's settings.
    assert "all with 4 layers x 128, vocabulary 80, 806,016 parameters" in lines[2]
    assert "bf16" not in lines[2] and lines[4].startswith("| record | settings |")
    first, second = (line for line in lines if line.startswith("| `"))
    assert second.startswith("| `a_step_20260101-000001.json` | bf16 | — | 30.0 |")
    # No kernel, no profile and no whole loop recorded: dashes, never a figure.
    assert first == (
        "| `step_20260101-000000.json` | fp32 | — | 30.0 | 31.5 | 1.050x | 1.040 / 1.060 | 379 "
        "| — | — | — | — | — |"
    )


def test_a_record_block_renders_the_records_its_pattern_names(tmp_path, monkeypatch):
    data = tmp_path / "docs" / "bench-data" / "gpu"
    data.mkdir(parents=True)
    optim = {
        "device": "cuda",
        "dtype": "bf16",
        "params": 1000,
        "frequency": 50,
        "adamw": {"full_step_ms": 50.0, "optimizer_step_ms": 1.5},
        "adamwspam": {
            "full_step_ms": 51.5,
            "optimizer_step_ms": 3.0,
            "impl": "AdamWSPAM (foreach)",
            "full_step_vs_adamw": 1.03,
            "optimizer_step_vs_adamw": 2.0,
        },
        "adamwprune": {
            "full_step_ms": 50.5,
            "optimizer_step_ms": 1.5,
            "full_step_vs_adamw": 1.01,
            "optimizer_step_vs_adamw": 1.0,
            "mask_apply_ms": 0.25,
            "mask_update_ms": 40.0,
            "mask_update_share_of_step": 0.016,
        },
    }
    (data / "optimizers_20260101-000000.json").write_text(json.dumps(optim))
    seqlen = {
        "device": "cuda",
        "vocab_size": 256,
        "n_layer": 2,
        "n_head": 2,
        "n_embd": 64,
        "params": {"vanilla": 5000, "hamt": 6000},
        "tokens_per_train_step": 2048,
        "rows": [
            {
                "variant": v,
                "seq_len": n,
                "train_tokens_per_sec": 100.0 * n + k,
                "peak_memory_mb": 10.0 + k,
                "gen_ms_per_token": 1.5 + k,
                "state_bytes": n * (k + 1),
            }
            for n in (64, 128)
            for k, v in enumerate(("vanilla", "hamt"))
        ],
    }
    (data / "seqlen_20260101-000001.json").write_text(json.dumps(seqlen))
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    lines = records.render_records("gpu/optimizers_*.json").splitlines()
    assert (
        "| `optimizers_20260101-000000.json` | AdamW-SPAM | AdamWSPAM (foreach) | 51.5 | 1.030x "
        "| 3.00 | 2.00x |" in lines
    )
    assert (
        "| `optimizers_20260101-000000.json` | AdamWPrune | — | 50.5 | 1.010x | 1.50 | 1.00x |"
        in lines
    )
    assert any(
        "masks applied in 0.25 ms per step and recomputed in 40 ms every 50 steps: 1.60 %" in x
        for x in lines
    )
    lines = records.render_records("gpu/seqlen_*.json").splitlines()
    assert (
        "| record | our linear layers | variant | parameters | train tok/s at 64 "
        "| train tok/s at 128 | train MiB at 128 | gen ms/token at 128 | state bytes at 128 |"
        in lines
    )
    assert (
        "| `seqlen_20260101-000001.json` | — | hamt | 6,000 | 6,401 | 12,801 | 11 | 2.50 | 256 |"
        in lines
    )
    # a pattern that matches nothing, or records of two kinds, is named, not rendered
    (data / "seqlen_20260101-000002.json").write_text('{"rows": [{"variant": "x"}]}')
    with pytest.raises(bench_table.BlockError, match="not a readable seqlen record"):
        records.render_records("gpu/seqlen_*.json")
    for pattern in ("gpu/step_*.json", "gpu/*.json"):
        with pytest.raises(bench_table.BlockError, match=pattern.replace("*", r"\*")):
            records.render_records(pattern)


def test_a_linear_record_shows_each_shapes_rates_and_autos_choice(tmp_path, monkeypatch):
    source = next((ROOT / "docs" / "bench-data" / "cpu-xeon").glob("linear_*.json"))
    record = json.loads(source.read_text())
    shape = record["shapes"][0]
    shape.update(**{"in": 7, "out": 9, "layers": ["a", "b", "c"]})
    shape["forward"] = {"gflops": {"torch": 100.4, "onednn": 200.6}, "onednn_vs_torch": 2.0}
    record["auto"] = {"cpu_linear": "onednn", "reason": "auto: because"}
    data = tmp_path / "docs" / "bench-data" / "here"
    data.mkdir(parents=True)
    (data / "linear_20260101-000000.json").write_text(json.dumps(record))
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    text = records.render_records("here/linear_*.json")
    assert "| `linear_20260101-000000.json` | 7 x 9 | 3 | 100 | 201 | 2.00x |" in text
    assert "auto took onednn (auto: because)." in text


def test_a_seeds_record_in_any_docs_page_shows_its_seed_tables(tmp_path, monkeypatch):
    """A block naming `make results`' summary_seeds.json records, in a page other
    than benchmarks.md: main() fills it with the statistics computed from the
    seeds, and --check then finds nothing stale."""
    figures = [
        {"header": "best val loss", "name": "best_val_loss", "spec": ".3f"},
        {"header": "best ppl", "name": "best_ppl", "spec": ".2f"},
    ]
    ppl = {"base": [10.0, 12.0, 11.0], "other": [11.0, 13.5, 12.0]}  # differences 1, 1.5, 1
    record = {
        "kind": "seeds",
        "folder": "sweep_x",
        "written": "2026-11-30T19:00:00+0000",
        "runs": 6,
        "training": {
            "dataset": "shakespeare",
            "tokenizer": "gpt2",
            "dtype": "bf16",
            "max_iters": "300",
        },
        "environment": {"cpu": "Some CPU", "cpu_kernels": "AVX2", "gpus": "", "torch": "2.9"},
        "environment_differs": {},
        "models": [
            {
                "model": "hamt",
                "baseline": "base",
                "figures": figures,
                "configurations": [
                    {
                        "key": key,
                        "seeds": {
                            str(seed): {
                                "status": "completed",
                                "figures": {"best_val_loss": 2.0 + p / 100, "best_ppl": p},
                            }
                            for seed, p in enumerate(values, 1)
                        },
                    }
                    for key, values in ppl.items()
                ],
            }
        ],
    }
    data = tmp_path / "docs" / "bench-data" / "study"
    data.mkdir(parents=True)
    (data / "seeds_20261130-190000.json").write_text(json.dumps(record))
    (tmp_path / "docs" / "benchmarks.md").write_text("# Benchmarks\n")
    begin, end = records.record_markers("study/seeds_*.json")
    again = records.record_markers("study/seeds_20261130-190000.json")
    page = tmp_path / "docs" / "method.md"
    page.write_text(f"# Method\n\n{begin}\nstale\n{end}\n\n{again[0]}\n{again[1]}\n")
    monkeypatch.setattr(folders, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    monkeypatch.setattr(folders, "PAGE", tmp_path / "docs" / "benchmarks.md")
    assert bench_table.main(["--check"]) == 1
    assert bench_table.main([]) == 0 and bench_table.main(["--check"]) == 0
    lines = page.read_text().splitlines()
    assert "stale" not in lines
    # the same record in two blocks: two tables, the statistics said once
    assert lines.count("**hamt**: baseline configuration base.") == 2
    assert sum(x.startswith("Runs that differ only by TRAIN_SEED") for x in lines) == 1
    assert "| base | 1 2 3 | 3 | 2.110 ± 0.010 | 11.0 ± 1.0 | baseline |" in lines
    # paired differences 1, 1.5, 1: mean 1.1667, sd 0.2887, 95 % half-width 0.717
    row = next(x for x in lines if x.startswith("| other |"))
    assert "| +1.17 [+0.45, +1.88] (n=3, p=" in row, row
    assert any(x.startswith("`seeds_20261130-190000.json`: 6 runs of `sweep_x`") for x in lines)
    assert any(
        "; shakespeare / gpt2, bf16, 300 iterations; Some CPU, AVX2 kernels, torch 2.9." in x
        for x in lines
    )


def test_precision_records_name_the_settings_that_differ():
    """The recorded HAMT key epsilons, each on its record's row; vanilla's
    settings, the same in every record it is in, are not named."""
    lines = records.render_records("hamt-precision/precision_*.json").splitlines()
    rows = [x.split(" | ")[1:3] for x in lines if x.startswith("| `precision_")]
    assert rows[0] == ["vanilla", "—"]
    assert [r[1] for r in rows[1:]] == [f"key_eps={e}" for e in (1e-12, 1e-4, 1e-3, 1e-2)]
