"""Capacity schedules: the processors' capacities phase by phase (thesis Table 10.6).

A schedule is a (phases × p) table of relative capacities. Phase k (1-based) uses row k−1; past the
last row the last row stays in force. Each row is normalised to sum 1. Without a schedule the base
capacities hold throughout.

CSV format (as ``configs/thesis-table-10.6.csv``): a header ``processor,adpt1,adpt2,...`` and one row
per processor — the layout of the thesis' table.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hermes.errors import ScenarioError

__all__ = ["CapacitySchedule", "read_schedule_csv", "read_capacities"]


#: the largest capacity or schedule file hermes reads (a table of 100 000 processors × 100 phases is ~70 MB)
MAX_TABLE_BYTES = 256 * 2**20


def _limits() -> tuple[float, int, int]:
    from hermes.bounds import BIG, MAX_PHASES, MAX_PROCESSORS

    return BIG, MAX_PHASES, MAX_PROCESSORS


def _capacity_ok(v: float) -> bool:
    """A capacity within hermes' rule for numbers: positive, 1e-100 to 1e100 (no subnormal, hermes.bounds)."""
    from hermes.bounds import BIG, TINY

    return math.isfinite(v) and TINY <= v <= BIG


def _processor_id(text: str) -> int | None:
    """A schedule row's processor: an integer from 0, or ``P1``, ``P2``, ... (the thesis' numbering, from 1)."""
    t = text.strip()
    if t.isdigit() and len(t) <= 9:
        return int(t)
    if len(t) > 1 and t[0] in "Pp" and t[1:].isdigit() and len(t) <= 10:
        return int(t[1:]) - 1
    return None


def read_schedule_csv(path: str | Path) -> NDArray[np.float64]:
    """Read a processors × phases CSV; returns a phases × processors array.

    The header is ``processor,adpt1,adpt2,...``; each row a processor and its capacity in every phase. The
    processors are ``0`` … ``p−1`` or ``P1`` … ``Pp`` (the thesis' numbering), each once, in any order (rows are
    put in processor order). Lines starting with ``#`` and blank lines are skipped.

    Raises
    ------
    ScenarioError
        One line naming the file and the row: not comma-separated, a row of another width, an id that is not
        an integer, repeated or out of range, a capacity that is not a positive finite number up to ``BIG``.
    """
    from hermes.loaders import read_text

    big, max_phases, max_procs = _limits()
    path = Path(path)
    text = read_text(path, "schedule", max_bytes=MAX_TABLE_BYTES)
    try:
        numbered = [(n, r) for n, r in enumerate(csv.reader(text.splitlines()), 1)
                    if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
    except csv.Error as err:  # a field beyond csv's size limit, a NUL byte
        raise ScenarioError(f"{path}: not a CSV schedule ({err})") from None
    if len(numbered) < 2:
        raise ScenarioError(f"{path}: schedule needs a header and one row per processor")
    header = numbered[0][1]
    if len(header) < 2:
        sep = next((c for c in (";", "\t", "|") if c in header[0]), None)
        hint = f" (it is separated by {sep!r}: use commas)" if sep else ""
        raise ScenarioError(f"{path}: the header needs 'processor' and one column per phase, separated by commas "
                            f"(processor,adpt1,adpt2,...){hint}")
    width = len(header)
    if width - 1 > max_phases or len(numbered) - 1 > max_procs:
        raise ScenarioError(f"{path}: at most {max_phases} phases and {max_procs} processors")
    ids, rows = [], []
    for n, r in numbered[1:]:
        if len(r) != width:
            raise ScenarioError(f"{path}, line {n}: {len(r)} fields, the header has {width}")
        pid = _processor_id(r[0])
        if pid is None:
            raise ScenarioError(f"{path}, line {n}: {r[0].strip()[:20]!r} is not a processor id (0, 1, 2, ... or the "
                                f"thesis' P1, P2, ...)")
        try:
            vals = [float(x) for x in r[1:]]
        except ValueError:
            raise ScenarioError(f"{path}, line {n}: schedule values must be numbers") from None
        if not all(_capacity_ok(v) for v in vals):
            raise ScenarioError(f"{path}, line {n}: capacities must be positive finite numbers from 1e-100 up to "
                                f"{big:g}")
        ids.append(pid)
        rows.append(vals)
    p = len(ids)
    seen = set()

    def r_text(pid: int) -> str:
        return f"{pid} (P{pid + 1})"

    for (n, _), pid in zip(numbered[1:], ids):
        if not 0 <= pid < p:
            raise ScenarioError(f"{path}, line {n}: processor {r_text(pid)} is out of range (the file has {p} "
                                f"processors: 0 to {p - 1}, or P1 to P{p})")
        if pid in seen:
            raise ScenarioError(f"{path}, line {n}: processor {r_text(pid)} is given twice")
        seen.add(pid)
    table = np.array(rows, dtype=np.float64)[np.argsort(ids, kind="stable")]
    return table.T.copy()


def read_capacities(path: str | Path) -> NDArray[np.float64]:
    """A capacity list from a text file: numbers separated by commas, spaces or newlines (positive, finite, at
    most ``BIG``; at most ``MAX_PROCESSORS`` of them)."""
    from hermes.loaders import read_text

    big, _, max_procs = _limits()
    text = read_text(path, "capacities", max_bytes=MAX_TABLE_BYTES)
    try:
        vals = np.array(text.replace(",", " ").split(), dtype=np.float64)
    except ValueError:
        raise ScenarioError(f"{path}: capacities must be a list of numbers") from None
    if vals.size == 0 or not all(_capacity_ok(v) for v in vals.tolist()):
        raise ScenarioError(f"{path}: capacities must be positive numbers from 1e-100 up to {big:g}")
    if vals.size > max_procs:
        raise ScenarioError(f"{path}: {vals.size} capacities, more than {max_procs} processors")
    return vals


@dataclass(frozen=True)
class CapacitySchedule:
    """Capacities per phase (rows normalised to sum 1)."""

    base: NDArray[np.float64]
    table: NDArray[np.float64] | None = None

    @classmethod
    def from_platform(cls, platform, resolve, p: int) -> CapacitySchedule:
        """The schedule of a run on ``p`` processors from the scenario's ``platform`` section (``capacities``:
        ``homo``, a list or a file; ``schedule``: None, rows or a file), files found by ``resolve`` (the
        scenario's path rule)."""
        caps = platform.capacities
        if caps == "homo":
            base = np.full(p, 1.0 / p)
        elif isinstance(caps, str):
            base = read_capacities(resolve(caps))
        else:
            base = np.asarray(caps, dtype=np.float64)
        if base.size != p:
            raise ScenarioError(f"platform.capacities: {base.size} values for {p} processors")
        sched = platform.schedule
        table = None
        if isinstance(sched, str):
            table = read_schedule_csv(resolve(sched))
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
