"""`make results` and `make report` through a results/latest that leads out of the
results folder: one `error:` paragraph and nothing written where it leads (the other
writing commands are driven in-process by tests/lib/run/test_results_links.py)."""

from __future__ import annotations

import json

import pytest

from tests.scripts.conftest import make

pytestmark = pytest.mark.slow  # two make runs (13 s); the fast in-process tests keep the promise


def test_make_results_refuses_a_latest_link_out_of_the_results_folder(project, tmp_path):
    outside = tmp_path / "someone-else" / "run"
    outside.mkdir(parents=True)
    (outside / "config.txt").write_text("")
    (outside / "metrics.json").write_text(json.dumps({"status": "completed"}))
    (project / "results").mkdir()
    (project / "results" / "latest").symlink_to(outside)
    for target in ("results", "report"):
        out = make(project, target)
        assert out.returncode == 2, out.stdout + out.stderr
        ours = [line for line in out.stderr.splitlines() if not line.startswith("make: *** ")]
        assert ours == [
            f"error: {project / 'results' / 'latest'} leads to {outside}, outside the results "
            f"folder {project / 'results'}: nothing was written. A link in the results folder "
            f"does not take a command out of it; to use that folder, name it: "
            f"RESULTS={outside}"
        ]
    assert sorted(p.name for p in outside.iterdir()) == ["config.txt", "metrics.json"]
