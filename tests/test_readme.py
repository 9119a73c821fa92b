"""The README's Python API example runs as written (from the repository root, launching mpiexec itself)."""

from __future__ import annotations

import pytest

import os
import re
import subprocess
import sys
from pathlib import Path

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
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1 + 2 + 1 + 1  # totals, two phases, the flow, the mesh
    assert lines[-1].split() == [lines[-1].split()[0], "8"]
