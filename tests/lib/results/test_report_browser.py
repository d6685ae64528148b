"""The HTML report in a real browser, from a real tiny matrix.

`make test-matrix` trains four tiny runs (two optimizers, dense and pruned) (one process each), `make report`
writes index.html, and headless Chromium loads it: the page must log no console
error, every image must decode (a probe script added to a copy of the page
records each <img> that failed into the DOM Chromium dumps), and the screenshot
must show text and plots, not a blank page. Skips without Chromium; CI installs
it (the Debian package).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.engine]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files"]
PROBE = """<script>
window.addEventListener("load", () => {
  const bad = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                                  .map(i => i.getAttribute("src"));
  document.body.setAttribute("data-images", String(document.images.length));
  document.body.setAttribute("data-bad-images", JSON.stringify(bad));
});
</script>"""


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_real_matrix_report_loads_without_errors(project, tmp_path):
    import numpy as np
    from PIL import Image

    synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(project / ".config", {**TINY, "DATA_CUSTOM_PATH": "corpus.txt",
                                       "DATA_DIR": str(project / "data"),
                                       "OPTIMIZER_MODE": "multiple", "OPTIMIZER_ENABLE_ADAMW": "y",
                                       "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
                                       "PRUNING_MODE": "multiple", "PRUNING_ENABLE_NONE": "y",
                                       "PRUNING_ENABLE_MAGNITUDE": "y"})
    trained = make(project, "test-matrix", "YES=1")
    assert trained.returncode == 0 and "4 completed" in trained.stdout, trained.stderr
    assert make(project, "report").returncode == 0
    matrix = (project / "results" / "latest").resolve()
    runs = json.loads((matrix / "matrix.json").read_text())["runs"]
    assert len(runs) == 4 and {r["state"] for r in runs.values()} == {"completed"}

    page = matrix / "index.html"
    probed = matrix / "probed.html"  # beside index.html: image paths stay relative
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(tmp_path / "p1", "--enable-logging=stderr", "--v=0",
                    "--virtual-time-budget=10000", "--dump-dom", probed.as_uri())
    images = int(re.search(r'data-images="(\d+)"', dom.stdout).group(1))
    bad = json.loads(re.search(r'data-bad-images="([^"]*)"', dom.stdout).group(1)
                     .replace("&quot;", '"'))
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
