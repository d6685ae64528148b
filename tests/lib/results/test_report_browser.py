"""The HTML report in a real browser, from a real tiny matrix and from a wide
hand-made one.

`make test-matrix` trains four tiny runs (two optimizers, dense and pruned) (one
process each), `make report` writes index.html, and headless Chromium loads it:
the page must log no console error, every image must decode (a probe script
added to a copy of the page records each <img> that failed into the DOM
Chromium dumps), and the screenshot must show text and plots, not a blank page.
At 1280 px wide nothing may overflow: the probe measures the page, every table
container and every log link, and writes the numbers into the DOM. Skips
without Chromium; CI installs it (the Debian package).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lib.results.report import build_report
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.lib.results.conftest import make_run
from tests.lib.results.tuned import tuned  # noqa: F401 (fixture)
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)

pytestmark = [pytest.mark.engine]
WIDTH = 1280  # the screen the report must fit
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
]
PROBE = """<script>
window.addEventListener("load", () => {
  const bad = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                                  .map(i => i.getAttribute("src"));
  document.body.setAttribute("data-images", String(document.images.length));
  document.body.setAttribute("data-bad-images", JSON.stringify(bad));
  const over = el => el.scrollWidth > el.clientWidth + 1;
  const right = el => el.getBoundingClientRect().right;
  document.body.setAttribute("data-fit", JSON.stringify({
    viewport: window.innerWidth,
    page: document.documentElement.scrollWidth,
    scrolled: [...document.querySelectorAll(".wide")].filter(over)
                .map(e => e.innerText.slice(0, 40)),
    links: Math.max(0, ...[...document.querySelectorAll("td.logs > *")].map(right)),
    cells: Math.max(0, ...[...document.querySelectorAll("td, th, img, figure")].map(right)),
  }));
});
</script>"""


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _probe(page: Path, profile: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """Chromium's DOM of the page at WIDTH px with the probe run; the probe's figures."""
    probed = page.parent / "probed.html"  # beside index.html: image paths stay relative
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(
        profile,
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={WIDTH},2000",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probed.as_uri(),
    )
    fit = json.loads(html.unescape(re.search(r'data-fit="([^"]*)"', dom.stdout).group(1)))
    return dom, fit


def _fits(fit: dict) -> None:
    """Nothing wider than the window, no table scrolled sideways, log links in view."""
    assert fit["viewport"] == WIDTH
    assert fit["page"] <= WIDTH and fit["scrolled"] == [], fit
    assert 0 < fit["links"] <= WIDTH and fit["cells"] <= WIDTH, fit


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_wide_report_fits_1280_px(tmp_path):
    """Seeds, long run ids, monitor and inference columns, eval sets, a long error:
    the widest report a matrix makes still fits a 1280 px window."""
    root = tmp_path / "gpt2_optimizer_pruning_ablation_matrix"
    monitor = {
        "gpu_util_mean": 51.4,
        "gpu_util_max": 96.0,
        "power_w_mean": 406.7,
        "power_w_max": 658.8,
        "cpu_percent_mean": 84.9,
        "rss_mb_max": 1470.0,
    }
    inference = {
        "lengths": [
            {
                "prompt_tokens": n,
                "prefill_ms": 12.25,
                "decode_tokens_per_sec": 1234567.0,
                "cache_bytes": 2**30,
            }
            for n in (128, 512, 2048)
        ]
    }
    env = {
        "python": "3.11.9",
        "torch": "2.5.1+cu124",
        "platform": "Linux-6.8.0-x86_64-with-glibc2.39" * 3,
    }  # a long value must wrap
    for opt, method in [("adamw", None), ("adamwspam", "magnitude"), ("adamwprune", "state")]:
        for seed in (1, 2, 3):
            run = make_run(
                root,
                f"gpt2_{opt}_{method or 'none'}_with_a_long_descriptive_suffix_s{seed}",
                13187.41 + seed,
                optimizer=opt,
                method=method,
                seed=seed,
                monitor=monitor,
                inference=inference,
                environment=env,
                tokens_per_sec=12345678.9,
                error="CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; "
                "79.10 GiB total capacity; 60.12 GiB already allocated)",
            )
            (run / "output.log").write_text("iter 1\n")
            (run / "eval.json").write_text(
                json.dumps(
                    {
                        "format": 1,
                        "sets": {
                            name: {"kind": "perplexity", "perplexity": 42.5}
                            for name in ("wikitext-2", "wikitext-103", "lambada_openai")
                        },
                        "lm_eval": {
                            "tasks": {
                                task: {"acc_norm": {"value": 0.25 + seed / 100}}
                                for task in (
                                    "hellaswag",
                                    "arc_easy",
                                    "arc_challenge",
                                    "piqa",
                                    "winogrande",
                                    "openbookqa",
                                )
                            }
                        },
                    }
                )
            )
    page = build_report(root)[0]
    dom, fit = _probe(page, tmp_path / "p")
    assert "gpt2_adamwprune_state_with_a_long_descriptive_suffix_s3" in dom.stdout
    # 14 seed-table figures: the 5 of training, then the 9 others in tables of six
    assert dom.stdout.count('<table class="seeds-more">') == 2
    _fits(fit)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_real_matrix_report_loads_without_errors(project, tmp_path):
    import numpy as np
    from PIL import Image

    synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(
        project / ".config",
        {
            **TINY,
            "DATA_CUSTOM_PATH": "corpus.txt",
            "DATA_DIR": str(project / "data"),
            "OPTIMIZER_MODE": "multiple",
            "OPTIMIZER_ENABLE_ADAMW": "y",
            "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
            "PRUNING_MODE": "multiple",
            "PRUNING_ENABLE_NONE": "y",
            "PRUNING_ENABLE_MAGNITUDE": "y",
        },
    )
    trained = make(project, "test-matrix", "YES=1")
    assert trained.returncode == 0 and "4 completed" in trained.stdout, trained.stderr
    assert make(project, "report").returncode == 0
    matrix = (project / "results" / "latest").resolve()
    runs = json.loads((matrix / "matrix.json").read_text())["runs"]
    assert len(runs) == 4 and {r["state"] for r in runs.values()} == {"completed"}

    page = matrix / "index.html"
    dom, fit = _probe(page, tmp_path / "p1")
    _fits(fit)
    images = int(re.search(r'data-images="(\d+)"', dom.stdout).group(1))
    bad = json.loads(
        re.search(r'data-bad-images="([^"]*)"', dom.stdout).group(1).replace("&quot;", '"')
    )
    assert images >= 2 and bad == []
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert [line for line in console if re.search(r"error|uncaught", line, re.I)] == []
    for run_id in runs:
        assert run_id in dom.stdout

    shot = tmp_path / "shot.png"
    _chromium(tmp_path / "p2", f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri())
    rgb = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert rgb.shape[:2] == (2000, 1200)
    assert (rgb.sum(axis=2) < 200).sum() > 1000  # text
    assert ((rgb[..., 2] > 150) & (rgb[..., 0] < 100)).sum() > 500  # plot lines, links


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_tuned_report_fits_1280_px(tuned, tmp_path):
    """The tuning table (two searched symbols on one row, a running column) and the
    tuning curve load and fit the window beside the other tables."""
    page = build_report(tuned)[0]
    dom, fit = _probe(page, tmp_path / "p")
    assert (
        '<table class="tuning">' in dom.stdout and "GPT2_WARMUP_STEPS at the low end" in dom.stdout
    )
    assert (
        json.loads(html.unescape(re.search(r'data-bad-images="([^"]*)"', dom.stdout).group(1)))
        == []
    )
    _fits(fit)
