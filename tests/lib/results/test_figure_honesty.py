"""What the figures and their captions claim: "mean" and "band" only with several seeds,
CPU memory as process RSS and CPU speed as measured on a shared CPU with its load,
points set side by side and a cut axis said, run ids never broken mid-word, plot text
of at least 10 px in the report, and the key metric in the report's first table."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lib.results import plots, report, style
from lib.results.collect import RunRow


def _row(tmp_path, run_id, seed=None, device="cpu", **metrics) -> RunRow:
    return RunRow(
        run_id,
        tmp_path,
        "completed",
        optimizer="adamw",
        seed=seed,
        tokens_per_sec=1000.0,
        peak_memory_mb=512.0,
        best_ppl=30.0,
        metrics={"device": device, **metrics},
    )


def test_captions_say_mean_and_band_only_with_several_seeds(tmp_path):
    one = [_row(tmp_path, "gpt2_adamw_none")]
    seeded = [_row(tmp_path, f"gpt2_adamw_none_s{s}", seed=s) for s in (1, 2)]
    assert report.caption_of("val_loss.png", one) == "Validation loss of every configuration"
    assert report.caption_of("val_loss.png", seeded).endswith("(several seeds: mean, min-max band)")
    assert "mean" not in report.caption_of("ppl_vs_sparsity.png", one)
    assert "mean ± sd" in report.caption_of("ppl_vs_sparsity.png", seeded)
    assert "set side by side" in report.caption_of("ppl_vs_sparsity.png", one)


def test_cpu_memory_is_process_rss_and_cpu_speed_names_the_shared_load(tmp_path):
    rows = [
        _row(tmp_path, "a", load_average=3.2, cpu_count=2),
        _row(tmp_path, "b", load_average=4.1, cpu_count=2),
    ]
    assert "process's peak RSS" in report.caption_of("memory.png", rows)
    assert "shared CPU" in report.caption_of("throughput.png", rows)
    made = plots.figures(rows, {})
    try:
        (memory,) = made["memory.png"].axes
        assert memory.get_xlabel() == "peak memory (GiB); on a CPU: the process's peak RSS"
        (speed,) = made["throughput.png"].axes
        assert speed.get_title() == (
            "Training throughput (measured on a shared CPU, load average 3.2 to 4.1 on 2 cores)"
        )
    finally:
        for fig in made.values():
            plt.close(fig)
    gpu = [_row(tmp_path, "a", device="cuda")]
    assert "RSS" not in report.caption_of("memory.png", gpu)
    assert "shared" not in report.caption_of("throughput.png", gpu)


def test_run_ids_are_never_broken_mid_word():
    run_id = "gpt2_adamwprune_bitter7_state_90_learning_rate3e-3_gpt2_n_layer2_s1337"
    assert len(run_id) > style.LABEL_WIDTH
    assert style.wrap(run_id) == run_id
    assert style.wrap(f"AdamW dense ({run_id})").splitlines() == ["AdamW dense", f"  ({run_id})"]


def test_report_images_are_never_shown_with_text_under_10_px():
    fig = Figure(figsize=(6.4, 4.0))
    fig.add_subplot().plot([0, 1])
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=style.DPI)
    png = out.getvalue()
    width = int.from_bytes(png[16:20], "big")
    assert width == 1280
    # the smallest text is MIN_PT points = 25 image pixels at 200 dpi; 10 px needs 40 %
    shown = report.shown_width(png)
    assert shown == 512
    assert style.MIN_PT * style.DPI / 72 * shown / width >= report.MIN_TEXT_PX


def test_the_key_metric_is_in_the_first_table():
    assert "best nats/char" in report.CORE
