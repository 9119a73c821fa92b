from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hermes.errors import ScenarioError
from hermes.extraload.schedule import CapacitySchedule, read_schedule_csv
from hermes.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_thesis_table_10_6_loads_normalised():
    t = read_schedule_csv(ROOT / "configs" / "thesis-table-10.6.csv")
    assert t.shape == (7, 15)
    assert t[0, 0] == pytest.approx(0.0667) and t[2, 14] == pytest.approx(0.0196)
    sc = load_scenario(ROOT / "scenarios" / "thesis-heterogeneous.yaml")
    s = CapacitySchedule.from_platform(sc.platform, sc.resolve, 15)
    for k in range(1, 8):
        assert s.at(k).sum() == pytest.approx(1.0)
    # the ratio between processors is the table's
    assert s.at(3)[0] / s.at(3)[14] == pytest.approx(0.1176 / 0.0196)
    assert np.array_equal(s.at(9), s.at(7))  # past the table the last row stays


def test_bad_schedule_files(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("processor,a1\nP1,0.5\nP2,zero\n")
    with pytest.raises(ScenarioError, match="numbers"):
        read_schedule_csv(p)
    p.write_text("processor,a1\nP1,0.5\nP2,0\n")
    with pytest.raises(ScenarioError, match="positive"):
        read_schedule_csv(p)
