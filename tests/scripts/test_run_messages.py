"""What `make sample`, `make export` and `make eval` say about a run that is not there."""

from __future__ import annotations

import pytest

from tests.scripts.conftest import make


@pytest.mark.parametrize("target", ["sample", "export"])
def test_a_run_that_does_not_exist_is_named_as_such(project, tmp_path, target):
    missing = tmp_path / "nonexistent"
    out = make(project, target, f"RUN={missing}")
    assert out.returncode != 0
    assert out.stderr.startswith(f"error: there is no run at {missing}: no such folder. "), (
        out.stderr
    )
    ours = [line for line in out.stderr.splitlines() if not line.startswith("make: *** ")]
    assert len(ours) == 1 and "Traceback" not in out.stderr  # one paragraph, and make's line
    assert "has not saved one yet" not in out.stderr
    assert "holds no runs: start one with `make`" in out.stderr  # the project's results/
