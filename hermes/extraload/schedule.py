"""Capacity schedules: the processors' capacities phase by phase (thesis Table 10.6).

A schedule is a (phases × p) table of relative capacities. Phase k (1-based) uses row k−1; past the
last row the last row stays in force. Each row is normalised to sum 1. Without a schedule the base
capacities hold throughout.

CSV format (as ``configs/thesis-table-10.6.csv``): a header ``processor,adpt1,adpt2,...`` and one row
per processor — the layout of the thesis' table.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hermes.errors import ScenarioError

__all__ = ["CapacitySchedule", "read_schedule_csv", "read_capacities"]


def read_schedule_csv(path: str | Path) -> NDArray[np.float64]:
    """Read a processors × phases CSV; returns a phases × processors array."""
    path = Path(path)
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read schedule ({err.__class__.__name__})") from None
    rows = [r for r in rows if r and not r[0].lstrip().startswith("#")]
    if len(rows) < 2:
        raise ScenarioError(f"{path}: schedule needs a header and one row per processor")
    try:
        table = np.array([[float(x) for x in r[1:]] for r in rows[1:]], dtype=np.float64)
    except ValueError:
        raise ScenarioError(f"{path}: schedule values must be numbers") from None
    if table.ndim != 2 or table.shape[1] != len(rows[0]) - 1:
        raise ScenarioError(f"{path}: every row needs {len(rows[0]) - 1} capacities")
    if np.any(~np.isfinite(table)) or np.any(table <= 0):
        raise ScenarioError(f"{path}: capacities must be positive")
    return table.T.copy()


def read_capacities(path: str | Path) -> NDArray[np.float64]:
    """A capacity list from a text file: numbers separated by commas, spaces or newlines."""
    try:
        vals = np.array(Path(path).read_text().replace(",", " ").split(), dtype=np.float64)
    except (OSError, ValueError, UnicodeDecodeError):
        raise ScenarioError(f"{path}: capacities must be a list of numbers") from None
    if vals.size == 0 or np.any(~np.isfinite(vals)) or np.any(vals <= 0):
        raise ScenarioError(f"{path}: capacities must be positive numbers")
    return vals


@dataclass(frozen=True)
class CapacitySchedule:
    """Capacities per phase (rows normalised to sum 1)."""

    base: NDArray[np.float64]
    table: NDArray[np.float64] | None = None

    @classmethod
    def from_scenario(cls, sc, p: int) -> CapacitySchedule:
        caps = sc.platform.capacities
        if caps == "homo":
            base = np.full(p, 1.0 / p)
        elif isinstance(caps, str):
            base = read_capacities(sc.resolve(caps))
        else:
            base = np.asarray(caps, dtype=np.float64)
        if base.size != p:
            raise ScenarioError(f"platform.capacities: {base.size} values for {p} processors")
        sched = sc.platform.schedule
        table = None
        if isinstance(sched, str):
            table = read_schedule_csv(sc.resolve(sched))
        elif sched is not None:
            table = np.asarray(sched, dtype=np.float64)
        if table is not None and table.shape[1] != p:
            raise ScenarioError(f"platform.schedule: {table.shape[1]} processors in the schedule, {p} in the run")
        return cls(base=base / base.sum(), table=None if table is None else table / table.sum(axis=1, keepdims=True))

    def at(self, phase: int) -> NDArray[np.float64]:
        """Capacities in force during ``phase`` (1-based); phase 0 = the base capacities."""
        if self.table is None or phase < 1:
            return self.base if self.table is None else self.table[0]
        return self.table[min(phase, len(self.table)) - 1]
