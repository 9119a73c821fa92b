"""The README's Python API example runs as written (from the repository root, launching mpiexec itself)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_api_example_runs():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- api-example -->\s*```python\n(.*?)```\s*<!-- /api-example -->", text, re.S)
    assert block, "the README lost its API example"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    res = subprocess.run([sys.executable, "-c", block.group(1)], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout.strip().splitlines()
    # hermes.run shows its progress by default (the run's lines), then the example prints its own lines
    assert any(ln.startswith("hermes: quickstart on 4 processors") for ln in out), out[:5]
    assert any(ln.startswith("phase 2/2: imbalance ") for ln in out), out
    heads = ("total time ", "results:  ", "pictures: ", "phase 2/2: imbalance ")  # hermes' last lines
    lines = out[[k for k, ln in enumerate(out) if ln.startswith(heads)][-1] + 1:]
    assert len(lines) == 1 + 2 + 1 + 1 + 2 * 2, lines  # totals, two phases, the flow, the mesh, two balancers × phases
    assert lines[4].split() == [lines[4].split()[0], "8"]
    replays = [ln.split() for ln in lines[5:]]
    assert [(r[0], r[1]) for r in replays] == [("1", "grapevine"), ("1", "metis"), ("2", "grapevine"), ("2", "metis")]
    # the trace's imbalance before each phase is the run's (lines 1-2: phase, before, after, moved, sends), up to the
    # rounding of sums of the quickstart's 1,200 scaled cell loads (relative error ≤ 1,200 ε)
    for k, r in enumerate(replays):
        assert float(r[2]) == pytest.approx(float(lines[1 + k // 2].split()[1]), rel=1200 * 2.3e-16)
