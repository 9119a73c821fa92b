"""The fluid study of monitor sources (benchmarks/extraload_sources.py) on a load with a hand solution."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import extraload_sources as study
from hermes.extraload.tasks import parse_tasks

ROOT = Path(__file__).resolve().parents[2]


def test_stationary_load_every_monitoring_source_finds_the_oracle():
    # CPU-bound tasks from t = 0: processor 0 with priority 1 (application share 1/2), processor 1 with
    # priority 3 (share 1/4); rate 100 -> available 50, 25, 100, 100 (sum 275). W = 1100 per phase:
    # balanced, every processor needs 1100 / 275 = 4 s; equal shares (nominal) leave processor 1 with
    # 275 units at 25/s = 11 s. The load never changes, so the probe, the last measurement and every
    # forecast equal the oracle from phase 1 on.
    tasks = parse_tasks([{"processor": 0, "repeat": "forever", "script": [{"work": 1e6}]},
                         {"processor": 1, "priority": 3, "repeat": "forever", "script": [{"work": 1e6}]}])
    kw = dict(p=4, rate=100.0, works=[1100.0] * 3, iterations=5)
    for source, phase in (("nominal", 11.0), ("measured", 4.0), ("forecast", 4.0), ("oracle", 4.0)):
        total, rows = study.run(tasks, source, **kw)
        # the probe (10 units per rank) takes 10/25 = 0.4 s on the slowest processor before phase 1
        assert total == pytest.approx(0.4 + 3 * phase, rel=1e-12), source
        assert [d for d, _ in rows] == pytest.approx([phase] * 3, rel=1e-12)


@pytest.mark.slow
def test_study_script_prints_the_four_sources(tmp_path):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "benchmarks.extraload_sources", "--phases", "2",
                          "--iterations", "3"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    rows = [ln.split("|")[1].strip() for ln in res.stdout.splitlines() if ln.startswith("|")][2:]
    assert rows == ["nominal", "measured", "forecast", "oracle"]
