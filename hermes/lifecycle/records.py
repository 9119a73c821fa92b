"""The records of a run: one row per rank and phase (``phases.csv``), one entry per phase (``summary.json``'s
``phases``), and the :class:`RunResult` that :func:`hermes.run` returns and :func:`hermes.load_run` reads back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import HermesError

__all__ = ["RankRecord", "PhaseRecord", "RunResult", "CSV_COLUMNS", "MONITOR_COLUMNS", "constraint_csv_columns"]


@dataclass
class RankRecord:
    """One row of ``phases.csv``: what rank ``rank`` did in ``phase`` (times are this rank's, per category)."""

    phase: int
    rank: int
    cells: int
    load: float
    capacity: float
    fair_load: float
    capacity_estimate: float
    compute_time: float
    comm_time: float
    sync_time: float
    balance_time: float
    migrate_time: float
    adapt_time: float
    cells_sent: int
    cells_received: int
    weight_sent: float
    weight_received: float
    bytes_sent: int
    #: with an extra load or a monitor section (hermes.lifecycle.feed): normalised capacities the processor really
    #: offered in the phase, the monitor measured, and the monitor had forecast for it
    capacity_true: float | None = None
    capacity_measured: float | None = None
    capacity_forecast: float | None = None
    #: ``mesh.constraint: all``: the rank's sum of every further weight (``weight_2`` ...) and the phase's
    #: ``imbalance_per_constraint_1`` ... (one per weight, the load's first), written after the other columns
    constraints: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row, without the monitor's columns when the run has none (and the constraints' when it has none)."""
        row = {k: v for k, v in asdict(self).items() if k != "constraints" and (v is not None or
                                                                                 k not in MONITOR_COLUMNS)}
        return {**row, **(self.constraints or {})}


#: the monitor's columns (present when a run has an extra load or a monitor section)
MONITOR_COLUMNS = ["capacity_true", "capacity_measured", "capacity_forecast"]
CSV_COLUMNS = [c for c in RankRecord.__dataclass_fields__ if c not in MONITOR_COLUMNS and c != "constraints"]


def constraint_csv_columns(ncon: int) -> list[str]:
    """The columns of phases.csv under ``mesh.constraint: all`` with ``ncon`` weights
    (:attr:`RankRecord.constraints`)."""
    return [f"weight_{k}" for k in range(2, ncon + 1)] + [f"imbalance_per_constraint_{k}" for k in range(1, ncon + 1)]


@dataclass
class PhaseRecord:
    """One entry of ``summary.json``'s ``phases``: the phase as a whole (times are means over the ranks, so
    the categories add up to ``time``, the slowest rank's)."""

    phase: int
    time: float
    compute_time: float
    comm_time: float
    sync_time: float
    balance_time: float
    migrate_time: float
    adapt_time: float
    imbalance_before: float
    imbalance_after: float
    #: the cells the phase's migration messages carried (a cell passed on through an intermediate rank counts
    #: once per hop), written as ``cell_sends`` and as its deprecated alias ``migrated_cells``; the distinct cells
    #: that changed owner, ``cells_moved``, are the quality's ``migration_cells`` (:meth:`as_dict`)
    migrated_cells: int
    migrated_weight: float
    edge_cut: int
    balance_iterations: int
    balance_rounds: int
    balance_counters: dict[str, Any]
    balance_info: list[dict[str, Any]]
    quality: dict[str, Any]
    cells: int
    weight: float
    #: the adaptation's figures (``refined``, ``coarsened`` and, when refining, the weight they changed and
    #: ``united_cells``)
    change: dict[str, Any] = field(default_factory=dict)
    #: ``balancer.trigger: auto``: every decision's estimates and choice (:mod:`hermes.balance.payoff`)
    balance_decision: list[dict[str, Any]] = field(default_factory=list)
    #: ``balancer.refinement``: passes, cells and weight moved, its migration time (``migrate_time``, the slowest
    #: rank's), edge cut before, imbalance before and after;
    #: with ``decide: auto`` also ``decision`` (``refine``, ``communication``, ``cost``), and only
    #: ``{passes: 0, decision}`` when it was skipped
    refinement: dict[str, Any] = field(default_factory=dict)
    #: with an extra load or a monitor section: what the balancer saw (``source``) and the forecast errors
    #: of the phase (mean absolute relative, normalised capacities and measured links)
    monitor: dict[str, Any] | None = None
    #: ``mesh.constraint: all``: the imbalance of every weight at the phase's end (the load's first; the same
    #: formula as ``imbalance_after`` on each weight's per-rank sums) and the repair's figures
    #: (:meth:`hermes.balance.constraints.RepairResult.as_dict`)
    imbalance_per_constraint: list[float] | None = None
    constraint_repair: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The summary entry: the fields, then the adaptation's figures; ``balance_decision``, ``refinement`` and
        ``monitor`` only when there are any (runs without them write what they always wrote).

        The movement of cells comes first by its names (docs/RUNNING.md): ``cells_moved`` (distinct cells that
        changed owner, ``quality.migration_cells``) and ``cell_sends`` (cells carried by migration messages),
        before ``migrated_cells``, the deprecated alias of ``cell_sends`` (kept for one release, as
        ``quality.migration_cells`` is)."""
        out = asdict(self)
        optional = ("change", "balance_decision", "refinement", "monitor", "imbalance_per_constraint",
                    "constraint_repair")
        entry: dict[str, Any] = {}
        for k, v in out.items():
            if k == "migrated_cells":
                entry["cells_moved"] = self.quality.get("migration_cells")
                entry["cell_sends"] = v
            if k not in optional:
                entry[k] = v
        return {**entry, **{k: out[k] for k in optional[1:] if out[k]}, **out["change"]}


@dataclass
class RunResult:
    """What :func:`run` returns on rank 0: the summary (as written to ``summary.json``), the per-rank rows of
    ``phases.csv`` and the run directory (None when nothing was written).

    ``result["total_time"]`` reads the summary.
    """

    summary: dict[str, Any]
    ranks: list[dict[str, Any]]
    out_dir: Path | None = None

    def __getitem__(self, key: str) -> Any:
        return self.summary[key]

    @property
    def phases(self) -> list[dict[str, Any]]:
        return self.summary["phases"]

    def to_pandas(self):
        """(phases, ranks) as pandas DataFrames (pandas is a dependency of hermes, imported only here)."""
        try:
            import pandas as pd
        except ImportError:
            raise HermesError("to_pandas needs pandas: pip install pandas") from None
        return pd.json_normalize(self.phases), pd.DataFrame(self.ranks, columns=CSV_COLUMNS)
