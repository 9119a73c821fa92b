"""monitor.png (hermes.viz.monitor): arrays from phases.csv rows and a valid picture."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.errors import HermesError
from hermes.viz.monitor import monitor_arrays, plot_monitor


def test_rows_to_arrays_and_picture(tmp_path):
    rows = [{"phase": k, "rank": r, "capacity_true": 0.25 + 0.05 * (r - 1.5) * k / 3,
             "capacity_forecast": "" if k == 1 else 0.25, "capacity_measured": 0.25}
            for k in (1, 2, 3) for r in range(4)]
    a = monitor_arrays(rows)
    assert a["true"].shape == (3, 4) and np.isnan(a["forecast"][0]).all() and a["forecast"][1, 2] == 0.25
    out = plot_monitor(tmp_path / "monitor.png", a["phases"], a["true"], a["forecast"], a["measured"], title="t")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_shapes_and_rows(tmp_path):
    with pytest.raises(HermesError, match="3 phases but arrays"):
        plot_monitor(tmp_path / "m.png", [1, 2, 3], np.ones((3, 2)), np.ones((2, 2)))
    with pytest.raises(HermesError, match="no rows"):
        monitor_arrays([])
    with pytest.raises(HermesError, match="'phase' and 'rank'"):
        monitor_arrays([{"phase": 1}])
    assert not list(tmp_path.iterdir())
