"""``benchmarks.outputs diff`` on hand-made run directories: summary.json, phases.csv and partitions.npz, exactly
and with ``--rtol`` (docs/design/bulk-emulation.md §6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import outputs

SUMMARY = {"total_time": 1.25, "cells_initial": 400, "final_imbalance": 1.0031, "wall_seconds": 3.5,
           "versions": {"numpy": "2"}, "phases": [{"sync_time": 0.1, "edge_cut": 40, "balance": "pcg"},
                                                   {"sync_time": 0.3, "edge_cut": 42, "balance": "pcg"}]}
PHASES = [{"phase": 1, "rank": 0, "compute_time": 0.7, "cells": 200},
          {"phase": 1, "rank": 1, "compute_time": 0.9, "cells": 200}]


def write_run(d: Path, summary: dict | None = None, phases: list[dict] | None = None, partitions: bool = True,
              owner: np.ndarray | None = None) -> Path:
    """A run directory as ``hermes run`` leaves it: summary.json, phases.csv, partitions.npz."""
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary or SUMMARY, indent=2))
    rows = phases or PHASES
    (d / "phases.csv").write_text(",".join(rows[0]) + "\n" + "".join(",".join(repr(v) for v in r.values()) + "\n"
                                                                     for r in rows))
    if partitions:
        w = np.ones(6)
        w[2] = np.nan  # NaN equals NaN in the comparison
        np.savez(d / "partitions.npz", owner_000=np.array([0, 0, 0, 1, 1, 1]) if owner is None else owner,
                 weight_000=w)
    return d


def pair(tmp_path: Path, **new) -> tuple[Path, Path]:
    old, neu = tmp_path / "old", tmp_path / "new"
    write_run(old / "case")
    write_run(neu / "case", **new)
    return old, neu


def bump(x: float, rel: float) -> float:
    y = x * (1.0 + rel)
    assert y != x and abs(y - x) / max(abs(x), abs(y)) < 1e-12
    return y


def test_identical_runs(tmp_path, capsys):
    old, new = pair(tmp_path)
    assert outputs.main(["diff", str(old), str(new)]) == 0
    assert capsys.readouterr().out.splitlines() == ["1 cases compared, 0 files differ"]
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 0
    assert "no field needed rtol 1e-12" in capsys.readouterr().out


def test_ignored_fields_stay_ignored(tmp_path):
    old, new = pair(tmp_path, summary={**SUMMARY, "wall_seconds": 99.0, "versions": {"numpy": "3"}})
    assert outputs.main(["diff", str(old), str(new)]) == 0
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 0


def test_a_float_off_by_1e_15_needs_the_tolerance(tmp_path, capsys):
    phases = [dict(p) for p in SUMMARY["phases"]]
    phases[0]["sync_time"] = bump(0.1, 1e-15)
    phases[1]["sync_time"] = bump(0.3, 2e-15)
    old, new = pair(tmp_path, summary={**SUMMARY, "phases": phases})
    assert outputs.main(["diff", str(old), str(new)]) == 1
    assert "case/summary.json: differs in ['phases']" in capsys.readouterr().out
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 0
    out = capsys.readouterr().out
    assert "case/summary.json: within rtol 1e-12 in phases[*].sync_time" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  summary.json phases[*].sync_time: ")]
    gap = float(line.split(": ")[1].split()[0])
    assert 1e-16 < gap < 1e-14 and line.endswith("(2 values, 1 cases)")
    # a tolerance too tight for the gap is a real difference
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-17"]) == 1


def test_a_csv_float_within_the_tolerance_by_column(tmp_path, capsys):
    rows = [dict(r) for r in PHASES]
    rows[1]["compute_time"] = bump(0.9, 1e-15)
    old, new = pair(tmp_path, phases=rows)
    assert outputs.main(["diff", str(old), str(new)]) == 1
    assert "case/phases.csv: differs" in capsys.readouterr().out
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 0
    assert "  phases.csv compute_time: " in capsys.readouterr().out


@pytest.mark.parametrize("where", ["json", "csv"])
def test_an_integer_stays_exact_under_the_tolerance(tmp_path, capsys, where):
    if where == "json":
        new = {"summary": {**SUMMARY, "cells_initial": 401}}
    else:
        rows = [dict(r) for r in PHASES]
        rows[0]["cells"] = 201
        new = {"phases": rows}
    old, neu = pair(tmp_path, **new)
    assert outputs.main(["diff", str(old), str(neu), "--rtol", "0.5"]) == 1
    out = capsys.readouterr().out
    assert ("cells_initial: old 400, new 401" if where == "json" else "cells: row 0: old 200, new 201") in out
    assert "1 files differ" in out


def test_a_string_and_a_type_stay_exact(tmp_path):
    phases = [dict(p) for p in SUMMARY["phases"]]
    phases[1]["balance"] = "gda0"
    old, new = pair(tmp_path, summary={**SUMMARY, "phases": phases, "total_time": 1})  # 1.25 against the int 1
    assert outputs.main(["diff", str(old), str(new), "--rtol", "0.5"]) == 1


def test_differing_partitions(tmp_path, capsys):
    old, new = pair(tmp_path, owner=np.array([0, 0, 1, 1, 1, 1]))
    assert outputs.main(["diff", str(old), str(new)]) == 1
    assert "case/partitions.npz: differs in owner_000: values differ" in capsys.readouterr().out
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 1  # the partitions stay exact


@pytest.mark.parametrize("owner,what", [(np.array([0, 0, 0, 1, 1, 1], dtype=np.int32), "dtype int64 in old, int32"),
                                        (np.array([0, 0, 0, 1, 1]), "shape (6,) in old, (5,)")])
def test_partitions_differing_in_dtype_or_shape(tmp_path, capsys, owner, what):
    old, new = pair(tmp_path, owner=owner)
    assert outputs.main(["diff", str(old), str(new)]) == 1
    assert what in capsys.readouterr().out


@pytest.mark.parametrize("side", ["old", "new"])
def test_partitions_missing_on_one_side(tmp_path, capsys, side):
    old, new = tmp_path / "old", tmp_path / "new"
    write_run(old / "case", partitions=side != "old")
    write_run(new / "case", partitions=side != "new")
    assert outputs.main(["diff", str(old), str(new)]) == 1
    assert f"case/partitions.npz: missing in {side}" in capsys.readouterr().out
    assert outputs.main(["diff", str(old), str(new), "--rtol", "1e-12"]) == 1


def test_partitions_missing_on_both_sides_are_not_compared(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write_run(old / "case", partitions=False)
    write_run(new / "case", partitions=False)
    assert outputs.main(["diff", str(old), str(new)]) == 0


def test_relative_gap():
    assert outputs.relative_gap(1.0, 1.0) == 0.0
    assert outputs.relative_gap(float("nan"), float("nan")) == 0.0
    assert outputs.relative_gap(0.0, 1e-300) == 1.0
    assert outputs.relative_gap(float("inf"), 1.0) == float("inf")
    assert outputs.relative_gap(float("nan"), 1.0) == float("inf")
