"""The state of a run: what a rank keeps from phase to phase (:class:`RunState`), one phase's working data
(:class:`PhaseState`) and what the set-up read (:class:`Setup`).

The steps of :mod:`hermes.lifecycle.phase` are functions over these; a checkpoint
(:mod:`hermes.lifecycle.checkpoint`) saves every rank's :class:`RunState` whole, as data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hermes.adaptation import Adapter
from hermes.app.mesh.simulate import LoopStats
from hermes.balance.interface import BalancerInfo
from hermes.balance.model import Model
from hermes.balance.payoff import History
from hermes.balance.realisation.selection import Selection
from hermes.runtime.clock import Clock
from hermes.runtime.comm import Bookkeeping, Counters
from hermes.data.distributed import LocalDomain
from hermes.data.migrate import MigrationStats
from hermes.data.refine import TriMesh
from hermes.extraload import CapacitySchedule
from hermes.lifecycle.feed import Feed
from hermes.lifecycle.records import CSV_COLUMNS, MONITOR_COLUMNS, PhaseRecord, RankRecord, constraint_csv_columns
from hermes.monitor import Estimates
from hermes.progress import Progress
from hermes.scenario import Scenario

__all__ = ["Setup", "RunState", "PhaseState"]


@dataclass
class Setup:
    """What the set-up read: the whole mesh and the initial partition on rank 0 (None elsewhere)."""

    mesh: Any
    owner: np.ndarray | None
    name: str
    n_cells: int
    bbox: tuple
    trimesh: TriMesh | None


@dataclass
class RunState:
    """What a rank keeps from phase to phase."""

    comm: Any
    #: the whole scenario: the phase steps (:mod:`hermes.lifecycle.phase`) and the end of the run read seven of
    #: its sections, and a checkpoint records it with the state (a resumed run goes on with it)
    sc: Scenario
    book: Bookkeeping
    balancer: BalancerInfo
    params: dict[str, Any]
    select: Selection
    sched: CapacitySchedule
    clock: Clock
    adapter: Adapter
    dom: LocalDomain
    setup: Setup
    cells_initial: int
    weight_initial: float
    #: rank 0's lines and status (:class:`hermes.progress.Progress`; a silent one elsewhere): a checkpoint
    #: stores it by name and a resumed run is handed its own
    say: Progress
    wall_start: float
    #: the balancer's own per-rank memory across phases (``BalanceContext.state``)
    balancer_state: dict[str, Any] = field(default_factory=dict)
    #: rank 0: the records so far
    phases: list[PhaseRecord] = field(default_factory=list)
    rows: list[RankRecord] = field(default_factory=list)
    #: rank 0: per-cell arrays of every phase (partitions.npz) and refined geometry (geometry.npz)
    partitions: dict[str, np.ndarray] = field(default_factory=dict)
    geometry: dict[str, np.ndarray] = field(default_factory=dict)
    #: the cells migration messages carried so far (summary.json's ``cell_sends``)
    total_moves: int = 0
    #: what the last balancing round cost and reached (``trigger: auto``)
    history: History = field(default_factory=History)
    #: the extra load (:func:`hermes.lifecycle.feed.open_load`) and the monitor feed (None without those sections)
    load: Any = None
    feed: Feed | None = None
    #: the solver's global residual after the last phase (:class:`LoopStats`)
    residual: float | None = None

    @property
    def columns(self) -> list[str]:
        """The columns of phases.csv."""
        cols = CSV_COLUMNS + MONITOR_COLUMNS if self.feed is not None else CSV_COLUMNS
        from hermes.balance.constraints import constraint_fields

        ncon = 1 + len(constraint_fields(self.dom.fields))
        return cols + constraint_csv_columns(ncon) if ncon > 1 else cols

    def rank_rows(self) -> list[dict[str, Any]]:
        return [x.as_dict() for x in self.rows]

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def p(self) -> int:
        return self.comm.Get_size()

    @property
    def refining(self) -> bool:
        return self.sc.adaptation.kind == "refine"

    @property
    def probe_work(self) -> float:
        """Work units of the monitor's capacity probe (1 ms of an average processor)."""
        return self.sc.platform.speed * 1e-3


@dataclass
class PhaseState:
    """One phase's working data."""

    k: int
    caps: np.ndarray
    t_start: float
    snap: dict[str, float]
    change: dict[str, Any] = field(default_factory=dict)
    #: ids are 0..N−1 without gaps (always, unless refinement left gaps)
    dense: bool = True
    gid_before: np.ndarray | None = None
    #: every rank's load, as the bookkeeping last saw it
    loads: np.ndarray | None = None
    imbalance_before: float = 1.0
    est: Estimates | None = None
    model: Model | None = None
    #: the model imbalance before the last round (a round must lower it)
    last: float = np.inf
    rounds: int = 0
    moved_last_round: bool = True
    stats: MigrationStats = field(default_factory=MigrationStats)
    counters: Counters = field(default_factory=Counters)
    iterations: int = 0
    infos: list[dict[str, Any]] = field(default_factory=list)
    capacity_estimate: float = float("nan")
    loop: LoopStats | None = None
    #: the monitor's record fields of this rank and the phase's forecast errors (with a Feed)
    fed: dict[str, float] = field(default_factory=dict)
    feed_errors: dict[str, Any] | None = None
    #: the monitor's link weights times the common boundaries (``conductance: boundary``), by neighbour
    weights: np.ndarray | None = None
    #: the decisions of ``trigger: auto`` (:meth:`hermes.balance.payoff.Payoff.as_dict`)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    #: a flow moved cells in this phase (the refinement runs only then)
    flow_moved: bool = False
    refinement: dict[str, Any] = field(default_factory=dict)
    #: under ``balancer.delivery: direct``, once a flow is realised: the cells as they were (their data), while
    #: ``RunState.dom`` holds the plan's identity records (hermes.data.migrate.plan_of) until the delivery
    full: LocalDomain | None = None
    #: ``mesh.constraint: all``: the repair's figures (:meth:`hermes.balance.constraints.RepairResult.as_dict`)
    constraints: dict[str, Any] = field(default_factory=dict)

