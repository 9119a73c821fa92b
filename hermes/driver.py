"""The driver: runs an experiment's adaptation phases under MPI (HeRMeS, thesis Fig. 10.1–10.2).

:func:`run` reads as the HeRMeS cycle. Set-up (:func:`start`: rank 0 reads and partitions the mesh with
METIS, target fractions = the capacities; every rank receives its cells), then for each phase k:

1. :func:`extra_load` — the capacity schedule sets the processors' capacities for phase k;
2. :func:`adapt` — the marking (a region, or the kernel's error indicator) changes the work:
   ``adaptation.kind: weights`` multiplies the marked cells' weights, ``refine`` changes the mesh
   (:mod:`hermes.adaptation`);
3. :func:`monitor` — capacities and link costs are measured (not for ``none``);
4. :func:`decide` — another balancing round runs while the measured imbalance exceeds
   ``balancer.trigger``, rounds remain and the last round changed it (lowered it, or raised it: the next
   round's flow is computed on the subdomain graph the failed one left); with ``trigger: auto`` while the
   round's expected gain over the phase's iterations exceeds its modelled cost (:mod:`hermes.balance.payoff`,
   recorded as the phase's ``balance_decision``);
5. :func:`balance` — the balancer computes a flow (or new destinations);
6. :func:`realise` — a flow becomes cell destinations, level by level in its topological order, the
   selection strategy choosing the cells (:mod:`hermes.balance.realisation`), and
7. :func:`migrate` — the cells move, with all they carry (:mod:`hermes.data.migrate`); realise and
   migrate alternate level by level, so they are one step in code; after the rounds, :func:`refine` moves
   boundary cells to straighten the subdomains within a load tolerance (``balancer.refinement``,
   :mod:`hermes.balance.refinement`);
8. :func:`compute` — ``application.iterations`` solver iterations (thesis Alg. 2);
9. :func:`record` — per-rank figures are gathered on rank 0.

Each step is a function over the run's state (:class:`RunState`, what a rank keeps across phases) and the
phase's (:class:`PhaseState`); the records are dataclasses (:class:`PhaseRecord`, :class:`RankRecord`).
Rank 0 writes the run directory at the end (:func:`hermes.results.write_run`).

What costs simulated time and what does not: every collective below is either modelled — charged to the
clock through :mod:`hermes.comm` (the monitor's probes, the balancer's own messages, the migration, the
solver's halo exchanges and reduction, the end-of-phase synchronisation) — or the testbed's bookkeeping,
through :class:`hermes.comm.Bookkeeping` and never charged (records, checks, the global model H that the
thesis' methods assume known, the trigger's global imbalance).

Refinement (``adaptation.kind: refine``)
    Set-up turns the mesh into a :class:`~hermes.data.refine.TriMesh` (quadrilaterals become two
    triangles, each a work unit with its polygon's weight) and distributes it with its geometry
    fields. Each phase then unites split families, coarsens, refines and checks the accounting
    (:class:`hermes.adaptation.Adapter`). Ids grow with gaps; balancers get a view numbered
    ``0..N−1`` contiguously by rank (ParMETIS' ``vtxdist`` order) when there are gaps. With
    ``kernel: jacobi`` rank 0 replays the run serially on the whole mesh and compares the solutions
    cell by cell.
"""

from __future__ import annotations

import logging
import os
import platform as _platform
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from hermes.adaptation import Adapter
from hermes.app.async_mesh import ASYNC_TAG, solve_phase_async
from hermes.app.kernels import initial_fields, jacobi_serial
from hermes.app.simulate import LoopStats, solve_phase
from hermes.balance.flow import topological_order
from hermes.balance.interface import BalanceContext, BalancerInfo, Decision
from hermes.balance.model import Model, derived, edge_values
from hermes.balance.payoff import History, Payoff, excess, first_estimate, iteration_time, payoff
from hermes.balance.realisation import realise_flow
from hermes.balance.refinement import refine_boundary
from hermes.balance.registry import BALANCERS, get_balancer
from hermes.balance.selection import Selection, get_selection
from hermes.checkpoint import CHECKPOINT, load_state, save_state
from hermes.clock import CATEGORIES, Clock, Links, make_clock
from hermes.comm import Bookkeeping, Counters, NeighbourComm, agree, allreduce
from hermes.data.distributed import LocalDomain, dense_view, gather_to_root, scatter_domain
from hermes.data.migrate import MigrationStats, migrate
from hermes.data.refine import TriMesh, from_mesh
from hermes.data.refine_dist import gather_trimesh, scatter_trimesh
from hermes.errors import BalancerError, HermesError, OutputError, ScenarioError
from hermes.extraload import CapacitySchedule
from hermes.hosting import shared, shared_value
from hermes.metrics import cell_bytes, imbalance, partition_quality_local
from hermes.monitor import Estimates
from hermes.monitor import monitor as measure
from hermes.records import CSV_COLUMNS, MONITOR_COLUMNS, PhaseRecord, RankRecord, RunResult
from hermes.results import (RunDirError, claim_dir, open_run_dir, reason, run_dir_for, write_atomic, write_csv,
                            write_records, write_run)
from hermes.scenario import Scenario, check_processors
from hermes.version import __version__
from hermes.watch import Watch, close_load, open_load
from hermes.watchdog import Watchdog

__all__ = ["run", "load_mesh", "RunState", "PhaseState", "start", "extra_load", "adapt", "monitor", "decide",
           "balance", "realise", "migrate_cells", "refine", "compute", "record", "finish", "versions", "resume",
           "save_checkpoint"]

log = logging.getLogger(__name__)


# -- state ---------------------------------------------------------------------------------------------------
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
    say: Callable[[str], None]
    wall_start: float
    #: the balancer's own per-rank memory across phases (``BalanceContext.state``)
    balancer_state: dict[str, Any] = field(default_factory=dict)
    #: rank 0: the records so far
    phases: list[PhaseRecord] = field(default_factory=list)
    rows: list[RankRecord] = field(default_factory=list)
    #: rank 0: per-cell arrays of every phase (partitions.npz) and refined geometry (geometry.npz)
    partitions: dict[str, np.ndarray] = field(default_factory=dict)
    geometry: dict[str, np.ndarray] = field(default_factory=dict)
    total_moves: int = 0
    #: what the last balancing round cost and reached (``trigger: auto``)
    history: History = field(default_factory=History)
    #: the extra load (hermes.watch.open_load) and the monitor's series (None without those sections)
    load: Any = None
    watch: Watch | None = None
    #: the solver's global residual after the last phase (:class:`LoopStats`)
    residual: float | None = None

    @property
    def columns(self) -> list[str]:
        """The columns of phases.csv."""
        return CSV_COLUMNS + MONITOR_COLUMNS if self.watch is not None else CSV_COLUMNS

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
    #: the monitor's record fields of this rank and the phase's forecast errors (with a Watch)
    watched: dict[str, float] = field(default_factory=dict)
    watch_errors: dict[str, Any] | None = None
    #: the monitor's link weights times the common boundaries (``conductance: boundary``), by neighbour
    weights: np.ndarray | None = None
    #: the decisions of ``trigger: auto`` (:meth:`hermes.balance.payoff.Payoff.as_dict`)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    #: a flow moved cells in this phase (the refinement runs only then)
    flow_moved: bool = False
    refinement: dict[str, Any] = field(default_factory=dict)


# -- set-up --------------------------------------------------------------------------------------------------
def load_mesh(sc: Scenario):
    """Read or generate the scenario's mesh (serial; rank 0)."""
    from hermes.data.formats import select_constraint
    from hermes.data.generators import grid, parse_grid_spec
    from hermes.data.io import read_mesh

    if sc.mesh.grid is not None:
        nx, ny = parse_grid_spec(sc.mesh.grid)
        mesh = grid(nx, ny)
    else:
        path = sc.resolve(sc.mesh.file)
        mesh = select_constraint(read_mesh(path, units=sc.mesh.units), sc.mesh.constraint, f"mesh.file: {path}")
    if sc.mesh.weight != 1.0:
        mesh = mesh.with_weights(mesh.weights * sc.mesh.weight)
    return mesh


def _mesh_where(sc: Scenario) -> str:
    return f"mesh.grid {sc.mesh.grid}" if sc.mesh.grid is not None else f"mesh.file {sc.resolve(sc.mesh.file)}"


def _read_and_partition(sc: Scenario, p: int, processes: int | None = None,
                        say: Callable[[str], None] = lambda s: None):
    """Rank 0: the mesh, its initial partition (METIS, targets = the first phase's capacities), fields; ``say``
    prints a progress line after each step."""
    from hermes.data.partition import metis_partition
    from hermes.preflight import check_refinable, check_size

    t = time.perf_counter()
    sched = CapacitySchedule.from_scenario(sc, p)
    caps = None if sc.platform.capacities == "homo" else sched.base.tolist()
    rows = None if sched.table is None else sched.table.tolist()
    if sc.mesh.grid_cells is not None:  # cells ≥ processors, magnitudes, memory: before the grid is built
        check_size(sc, sc.mesh.grid_cells, p, capacities=caps, schedule=rows, ranks_here=processes)
    mesh = load_mesh(sc)
    if sc.mesh.grid_cells is None:
        check_size(sc, mesh.n_cells, p, capacities=caps, schedule=rows, ranks_here=processes,
                   weights=(float(mesh.weights.min()), float(mesh.weights.max())))
    check_refinable(sc, mesh, _mesh_where(sc))
    tm = None
    if sc.adaptation.kind == "refine":  # the work units become the triangles
        tm, origin = from_mesh(mesh)
        mesh = tm.to_mesh(name=mesh.name, weights=mesh.weights[origin])
    say(f"set-up: mesh {mesh.name} ({mesh.n_cells} cells) {'generated' if sc.mesh.grid is not None else 'read'} "
        f"in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, targets=sched.at(1), seed=sc.seed)
    say(f"set-up: initial partition (METIS, {p} part{'s' * (p != 1)}) in {time.perf_counter() - t:.1f} s")
    return mesh, owner, initial_fields(mesh.coords), tm


def distribute(comm, sc: Scenario, say: Callable[[str], None] = lambda s: None) -> tuple[LocalDomain, Setup]:
    """Rank 0 reads and partitions the mesh, every rank receives its cells (collective; a bad mesh raises the
    same error on every rank); ``say`` prints a progress line after each step (rank 0)."""
    rank, p = comm.Get_rank(), comm.Get_size()
    from hermes.preflight import ranks_on_this_machine

    host = getattr(comm, "host", None)  # hosted processors (hermes.hosting): the processes on this machine
    here = None if host is None else ranks_on_this_machine(host.n)
    payload = agree(comm, _read_and_partition, sc, p, here, say) if rank == 0 else agree(comm, lambda: None)
    t = time.perf_counter()
    mesh, owner, fields, tm = payload if rank == 0 else (None, None, None, None)
    meta = (mesh.name, mesh.n_cells, (mesh.coords.min(axis=0), mesh.coords.max(axis=0))) if rank == 0 else None
    name, n_cells, bbox = comm.bcast(meta, root=0)
    if sc.adaptation.kind == "refine":
        dom = scatter_trimesh(comm, tm, owner, fields, weights=None if mesh is None else mesh.weights)
    else:
        dom = scatter_domain(comm, mesh, owner, fields)
    say(f"set-up: cells sent to their {p} processor{'s' * (p != 1)} in {time.perf_counter() - t:.1f} s")
    return dom, Setup(mesh, owner, name, n_cells, bbox, tm)


def start(comm, sc: Scenario, *, say: Callable[[str], None] = lambda s: None) -> RunState:
    """Set up a run on every rank (collective): balancer, schedule, mesh, clock, adapter."""
    p = comm.Get_size()
    if sc.processors is not None and sc.processors != p:
        raise ScenarioError(f"processors: the scenario asks for {sc.processors} processors but the job has {p} "
                            f"ranks (run with mpiexec -n {sc.processors}, or --set processors={p})")
    balancer = get_balancer(sc.balancer.algorithm)
    params, select = sc.balancer.params, get_selection(sc.balancer.selection)
    agree(comm, check_processors, sc, p)  # links, schedule, extra load against the job's size (one line)
    sched = agree(comm, CapacitySchedule.from_scenario, sc, p)
    host = getattr(comm, "host", None)
    on = f"{p} processor{'s' * (p != 1)}" + ("" if host is None or host.n == p else
                                               f" on {host.n} process{'es' * (host.n != 1)}")
    say(f"hermes: {sc.name} on {on}, balancer {balancer.name}, "
        f"{sc.adaptation.phases} phase{'s' * (sc.adaptation.phases != 1)}, clock {sc.clock}")
    wall_start = time.perf_counter()
    dom, setup = distribute(comm, sc, say)
    pl = sc.platform
    links = Links(pl.latency, pl.bandwidth, {tuple(sorted(k.ranks)): (
        k.latency if k.latency is not None else pl.latency, k.bandwidth if k.bandwidth is not None else pl.bandwidth)
        for k in pl.links})
    load = open_load(comm, sc, links)
    clock = make_clock(sc.clock, comm.Get_rank(), p, links, pl.speed, sched.at(1)[comm.Get_rank()], load)
    book = Bookkeeping(comm)
    weight_initial = book.sum(dom.load)
    state = RunState(comm, sc, book, balancer, params, select, sched, clock, Adapter(comm, sc, setup.bbox, clock),
                     dom, setup, cells_initial=book.sum(dom.n), weight_initial=weight_initial, say=say,
                     wall_start=wall_start, load=load)
    state.watch = Watch.create(comm, sc, clock, state.probe_work)
    say(f"set-up: mesh, initial partition and distribution in {time.perf_counter() - wall_start:.1f} s wall")
    if state.rank == 0:
        _record_initial(state)
    return state


def _record_initial(r: RunState) -> None:
    """Rank 0: the initial partition's per-cell arrays (phase 000)."""
    mesh, out = r.setup.mesh, r.partitions
    out["owner_000"] = r.setup.owner.astype(np.int32)
    out["weight_000"] = mesh.weights.copy()
    if r.sc.output.vtu:
        out["u_000"] = initial_fields(mesh.coords)["u"]
    if r.refining:
        out["gid_000"] = np.arange(mesh.n_cells, dtype=np.int64)
        if r.sc.output.vtu:
            out["level_000"] = np.zeros(mesh.n_cells, dtype=np.int64)


# -- the steps of a phase -----------------------------------------------------------------------------------
def extra_load(r: RunState, k: int) -> PhaseState:
    """Step 1: the capacities of phase ``k`` from the schedule; the phase's clock references."""
    caps = r.sched.at(k)
    r.clock.set_capacity(caps[r.rank])
    r.clock.begin_phase(k)  # external tasks tied to phases start or stop (nothing without an extra load)
    if r.watch is not None:
        r.watch.begin(r.clock)
    return PhaseState(k, caps, r.clock.elapsed(), r.clock.snapshot())


def adapt(r: RunState, ph: PhaseState) -> None:
    """Step 2: the adaptation (weights or refinement; collective), then the loads as the phase starts."""
    r.dom, ph.change = r.adapter.step(r.dom, ph.k)
    ph.dense = not r.refining or r.book.max(int(r.dom.gid.max(initial=-1))) + 1 == r.book.sum(r.dom.n)
    ph.gid_before = r.dom.gid  # the cells this rank holds before balancing: the migration volume's reference
    ph.loads = np.array(r.book.allgather(r.dom.load))
    ph.imbalance_before = imbalance(ph.loads, ph.caps)


def monitor(r: RunState, ph: PhaseState) -> None:
    """Step 3: measure this rank's capacity and links (charged to ``balance``) and gather the model H."""
    ph.est = measure(r.comm, r.clock, r.dom.neighbour_ranks, r.probe_work)
    if ph.rounds == 0:
        ph.capacity_estimate = ph.est.capacity
    if r.watch is not None and r.watch.steers:  # the balancer sees the monitor's source, not the probe
        capacity, weights = _seen(r, ph)
        ph.est = replace(ph.est, capacity=capacity, weights=weights)
        if ph.rounds == 0:
            ph.capacity_estimate = capacity
    me, est = r.rank, ph.est
    # a tuple of tuples: hosted processors share what is gathered instead of copying it p times (hermes.hosting)
    entry = (est.capacity, tuple((me, int(j), float(w)) for j, w in zip(est.neighbours, est.weights) if me < j))
    allent = r.book.allgather(entry)

    def build() -> Model:
        edges = [(i, j) for _, es in allent for i, j, _ in es]
        weights = [w for _, es in allent for _, _, w in es]
        return Model.create(r.p, np.array(edges, dtype=np.int64).reshape(-1, 2), list(ph.loads),
                            [a[0] for a in allent], weights)

    # hosted processors share one model (read-only), as they share one link-cost matrix (_gather_costs)
    ph.model = shared_value(r.book.comm, "model", allent, ph.loads, build, freeze=_read_only_model)


def _shared_model(p: int, edges, loads, capacities, weights) -> Model:
    """A model several hosted processors will share: its arrays read-only."""
    model = Model(p, edges, np.array(loads, copy=True), np.array(capacities, copy=True), np.array(weights, copy=True))
    _read_only_model(model)
    return model


def _read_only_model(model: Model) -> None:
    for a in (model.edges, model.loads, model.capacities, model.weights):
        a.flags.writeable = False


def _seen(r: RunState, ph: PhaseState) -> tuple[float, np.ndarray]:
    """This rank's capacity and link weights as the monitor's source gives them (``monitor`` section);
    the oracle's horizon is the phase's work at the platform's nominal total rate."""
    sc, app = r.sc, r.sc.application
    nominal = sc.platform.speed * r.p * ph.caps
    horizon = app.iterations * float(ph.loads.sum()) * app.work_per_weight / (sc.platform.speed * r.p)
    view = r.watch.view(r.clock, nominal, max(horizon, 1e-9))
    pairs = np.array([(r.rank, int(j)) for j in ph.est.neighbours], dtype=np.int64).reshape(-1, 2)
    return float(view.capacities[r.rank]), view.weights(pairs, r.watch.spec.link_weight)


def decide(r: RunState, ph: PhaseState) -> bool:
    """Step 4: whether another balancing round runs: rounds remain, the last one moved cells and changed the
    imbalance (lowered it; or raised it: a realisation that failed — a subdomain cut in two by earlier moves
    cannot pass on what it received — leaves a new subdomain graph, and the next round's flow is computed on
    it), the measured imbalance exceeds rounding noise and the trigger — a number, or ``auto``: the
    round's expected gain exceeds its modelled cost (:func:`estimate_payoff`, recorded in ``ph.decisions``)."""
    bal = r.sc.balancer
    if not (ph.moved_last_round and ph.rounds < bal.rounds and 1 + 1e-9 < ph.model.imbalance != ph.last):
        return False
    if bal.trigger != "auto":
        return ph.model.imbalance > bal.trigger
    est = estimate_payoff(r, ph)
    ph.decisions.append(est.as_dict())
    return est.balance


def estimate_payoff(r: RunState, ph: PhaseState) -> Payoff:
    """The next round's gain and cost (:mod:`hermes.balance.payoff`): costs measured by the run (the last
    round's balancing; the last balanced phase's migration per unit of excess load, times the excess now), or
    before any round the balancer's serial reference on the model; every input is the same on every rank."""
    h, app = r.history, r.sc.application
    fixed = 0.0
    if h.balance_time is None:
        bpw = r.book.sum(float(cell_bytes(r.dom).sum())) / max(r.book.sum(r.dom.load), 1e-300)
        # the same on every rank: once per model (hosted processors share one)
        tb, tm, src = derived(ph.model, ("first-estimate", bpw),
                              lambda: first_estimate(r.balancer, ph.model, r.params, r.clock.links, bpw))
    else:
        # with decide: always a phase's first round commits to the refinement: its last measured time, once
        if r.sc.balancer.refinement.decide == "always" and not ph.flow_moved:
            fixed = h.refine_time or 0.0
        tb, tm = h.balance_time, h.migrate_estimate(excess(ph.model), fixed)
        src = "measured: last round's balancing, last balanced phase's migration per unit of excess"
        if fixed:
            src += ", plus the last boundary refinement's"
    after = h.imbalance_after if h.imbalance_after is not None else 1.0
    return payoff(ph.rounds, ph.model, iterations=app.iterations, work_per_weight=app.work_per_weight,
                  speed=r.sc.platform.speed, expected_after=after, balance_cost=tb, migrate_cost=tm, source=src,
                  migrate_fixed=fixed)


def balance(r: RunState, ph: PhaseState) -> Decision:
    """Step 5: the balancer's decision (collective; charged to ``balance``)."""
    ph.last = ph.model.imbalance
    nb = NeighbourComm(r.comm, ph.est.neighbours, r.clock, ph.counters)
    est = ph.est
    with r.clock.activity("balance"):
        view = r.dom if ph.dense else dense_view(r.comm, r.dom, r.clock, ph.counters)
        weights = est.weights if ph.weights is None else ph.weights
        ctx = BalanceContext(comm=r.comm, clock=r.clock, nb=nb, model=ph.model, load=r.dom.load,
                             capacity=est.capacity, weights=weights, dom=view, params=r.params, seed=r.sc.seed,
                             state=r.balancer_state, latency=est.latency, bandwidth=est.bandwidth,
                             round=ph.rounds, conductance=r.sc.balancer.conductance)
        decision = agree(r.comm, _run_balancer, r.balancer, ctx)
    ph.iterations += decision.iterations
    return decision


def _run_balancer(info: BalancerInfo, ctx: BalanceContext) -> Decision:
    """``info.run(ctx)``, with a plug-in's failure as one line: an exception other than a HermesError — an
    interrupt or a ``SystemExit`` included — ends the job at once (its message on stderr, the same on every rank
    that fails, then ``MPI_Abort``: the other ranks may be waiting in the plug-in's own collectives), and an
    answer that is not a :class:`Decision` of the model's shape is a BalancerError on every rank."""
    builtin = info.name in BALANCERS and BALANCERS[info.name] is info
    try:
        decision = info.run(ctx)
    except HermesError:
        raise
    except BaseException as err:
        if builtin:
            raise
        import sys

        text = " ".join(str(err).split())[:300]
        print(f"hermes: error: balancer {info.name!r} failed: {type(err).__name__}{': ' + text if text else ''}",
              file=sys.stderr, flush=True)
        ctx.comm.Abort(1)
        raise  # pragma: no cover  (Abort does not return)
    if not builtin:
        _check_decision(info.name, decision, ctx)
    return decision


def _check_decision(name: str, decision: Any, ctx: BalanceContext) -> None:
    """A plug-in's answer is a Decision with a finite flow on the model's edges or this rank's cells' owners."""
    if not isinstance(decision, Decision):
        raise BalancerError(f"balancer {name!r} returned {type(decision).__name__}, not a hermes.balance.Decision")
    if decision.flow is not None:
        flow = np.asarray(decision.flow)
        if flow.shape != (ctx.model.q,) or flow.dtype.kind not in "iuf" or not np.all(np.isfinite(flow)):
            raise BalancerError(f"balancer {name!r} returned a flow of shape {flow.shape} ({flow.dtype}); the model "
                                f"has {ctx.model.q} edges: expected that many finite numbers")
        decision.flow = flow.astype(np.float64)
    if decision.dest is not None:
        dest = np.asarray(decision.dest)
        p = ctx.comm.Get_size()
        if dest.shape != (ctx.dom.n,) or dest.dtype.kind not in "iu" or (dest.size and (dest.min() < 0 or
                                                                                         dest.max() >= p)):
            raise BalancerError(f"balancer {name!r} returned destinations of shape {dest.shape} ({dest.dtype}); "
                                f"expected one rank in [0, {p}) for each of this rank's {ctx.dom.n} cells")
        decision.dest = dest.astype(np.int64)


def realise(r: RunState, ph: PhaseState, decision: Decision) -> MigrationStats:
    """Steps 6–7: cells move — to the balancer's destinations, or realising its flow level by level in
    topological order (the selection strategy picks the cells; charged to ``migrate``). A flow that would not
    lower the imbalance is refused (:func:`_worsens`)."""
    stats = MigrationStats()
    with r.clock.activity("migrate"):
        if decision.dest is not None:
            r.dom, stats = migrate(r.comm, r.dom, decision.dest, r.clock)
        elif decision.flow is not None and np.any(decision.flow != 0) and not _worsens(r.comm, ph.model, decision):
            # the realisation acts on the global flow: its levels are the topological order of the whole flow DAG
            cost = _gather_costs(r.book, r.p, ph.est)
            flow, model = decision.flow, ph.model
            # the same on every rank: once per model and flow (hosted processors share the model)
            levels = derived(model, ("levels", flow.tobytes()),
                             lambda: topological_order(model, flow, 1e-12 * max(model.loads.sum(), 1.0)))
            r.dom, stats, realised = realise_flow(r.comm, r.dom, model.edges, flow, cost, r.clock, levels=levels,
                                                  select=r.select, exact=r.sc.balancer.ghosts == "exact",
                                                  adaptive=r.sc.balancer.realisation == "adaptive")
            ph.flow_moved = True
            if r.rank == 0 and log.isEnabledFor(logging.DEBUG):
                for e, f, done in zip(model.edges.tolist(), flow, realised):
                    if abs(f) > 1e-9 or done:
                        log.debug("phase %d edge %s flow %.3f realised %.3f", ph.k, e, f, done)
    return stats


migrate_cells = realise  # the HeRMeS cycle names them apart; they alternate level by level in one step


def refine(r: RunState, ph: PhaseState) -> None:
    """Step 7′: after the rounds, if a flow moved cells, the boundary refinement of ``balancer.refinement``
    (:func:`hermes.balance.refinement.refine_boundary`; charged to ``migrate``, its moves counted with the
    phase's migration)."""
    spec = r.sc.balancer.refinement
    if spec.passes == 0 or not ph.flow_moved:
        return
    decision = _refinement_pays(r, ph) if spec.decide == "auto" else {}
    if decision and not decision["refine"]:
        ph.refinement = {"passes": 0, "decision": decision}
        return
    cut_before = r.book.sum(int(r.dom.cut_mask.sum())) // 2
    imbalance_before = float(ph.model.imbalance)
    spent = r.clock.totals["migrate"]
    with r.clock.activity("migrate"):
        cost = _gather_costs(r.book, r.p, ph.est)
        r.dom, st = refine_boundary(r.comm, r.dom, ph.model.fair_loads, cost, r.clock, tolerance=spec.tolerance,
                                    passes=spec.passes, geometric=spec.geometric, below=spec.below)
    r.history.refine_time = r.book.max(r.clock.totals["migrate"] - spent)
    ph.stats.add(st.migration)
    ph.loads = np.array(r.book.allgather(r.dom.load))
    ph.model = ph.model.with_loads(list(ph.loads))
    ph.refinement = {"passes": st.passes, "cells": r.book.sum(st.cells_sent), "weight": r.book.sum(st.weight_sent),
                     "migrate_time": r.history.refine_time,
                     "edge_cut_before": cut_before, "imbalance_before": imbalance_before,
                     "imbalance_after": float(ph.model.imbalance), **({"decision": decision} if decision else {})}


def _refinement_pays(r: RunState, ph: PhaseState) -> dict[str, Any]:
    """``refinement.decide: auto`` — whether the boundary refinement is worth its price in this phase (the same on
    every rank). It costs up to ``τ`` of every rank's compute (it fills the load tolerance) and its migration, for
    a shorter cut; a shorter cut can at most save the ghost exchange. The rule refines only when the phase's ghost
    exchange with its sends serialised, ``N · max_i Σ_j (α_ij + b·e_ij / B_ij)`` (``e_ij`` the cut edges between
    i and j, α and B the monitor's latency and bandwidth, ``b`` = ``application.bytes_per_edge``), exceeds
    ``N · τ · κL/(s p) + T_r`` (``T_r`` the migration time of the last refinement that ran, 0 before any).

    The left side bounds the exchange from above (the virtual clock overlaps a rank's sends and charges the
    largest), so a skipped refinement could not have paid; a refinement that runs is not promised to pay — the
    rule is a gate on the ratio of communication to computation: compute-bound phases never refine, phases whose
    serialised exchange exceeds ``τ`` of their compute do, for the cut's sake (BENCHMARKS.md, issue 10)."""
    app, spec, est = r.sc.application, r.sc.balancer.refinement, ph.est
    nb, length = r.dom.neighbour_ranks, r.dom.boundary_lengths.astype(np.float64)
    lat = np.full(nb.size, float(np.mean(est.latency)) if est.latency.size else r.clock.links.latency)
    bw = np.full(nb.size, float(np.mean(est.bandwidth)) if est.bandwidth.size else r.clock.links.bandwidth)
    pos, known = _find(est.neighbours, nb)
    lat[known], bw[known] = est.latency[pos[known]], est.bandwidth[pos[known]]
    t_comm = r.book.max(float(np.sum(lat + app.bytes_per_edge * length / bw)))
    t_it = iteration_time(ph.model, app.work_per_weight, r.sc.platform.speed)
    bound = app.iterations * t_comm
    cost = app.iterations * spec.tolerance * t_it + (r.history.refine_time or 0.0)
    return {"refine": bool(bound > cost), "communication": bound, "cost": cost}


def balance_rounds(r: RunState, ph: PhaseState) -> None:
    """Steps 3–7: monitor, then balancing rounds while :func:`decide` says so, then :func:`refine`."""
    if r.balancer.name == "none":
        return
    auto = r.sc.balancer.trigger == "auto"
    monitor(r, ph)
    _conductances(r, ph)
    while decide(r, ph):
        _round(r, ph, auto)
    refine(r, ph)  # its time is History.refine_time, not part of the rounds' migration rate (estimate_payoff)
    if auto and ph.rounds:  # a phase its balancing left no better than it began tells nothing of what it reaches
        final = float(ph.model.imbalance)
        r.history.imbalance_after = final if final < ph.imbalance_before else None


def _round(r: RunState, ph: PhaseState, auto: bool) -> None:
    """One balancing round: the links measured again if the subdomain graph changed, the balancer's decision,
    its realisation, the loads gathered, and under ``trigger: auto`` the round's measured costs recorded."""
    if ph.rounds:  # the subdomain graph changed: measure the new links
        monitor(r, ph)
        _conductances(r, ph)
    spent = dict(r.clock.totals)
    excess_before = excess(ph.model)
    decision = balance(r, ph)
    st = realise(r, ph, decision)
    ph.infos.append(_jsonable(decision.info))  # after the realisation, which may add 'rejected'
    ph.stats.add(st)
    ph.rounds += 1
    ph.moved_last_round = r.book.sum(st.cells_sent) != 0
    if ph.moved_last_round:
        ph.loads = np.array(r.book.allgather(r.dom.load))
        ph.model = ph.model.with_loads(list(ph.loads))
    if auto:
        r.history.record(r.book.max(r.clock.totals["balance"] - spent["balance"]),
                         r.book.max(r.clock.totals["migrate"] - spent["migrate"]), excess_before, ph.k)


def _find(keys: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``query`` in the sorted array ``keys`` and which of them it holds (a neighbour list against
    another: the monitor's of the phase and the domain's now)."""
    pos = np.searchsorted(keys, query)
    found = pos < keys.size
    found[found] = keys[pos[found]] == query[found]
    return pos, found


def _conductances(r: RunState, ph: PhaseState) -> None:
    """``conductance: boundary``: the model's edge weights (and this rank's ``ph.weights``) become the monitor's
    link weights times the number of cut edges between the two subdomains over the largest such number
    (bookkeeping, like the model itself). A flow then crosses long boundaries rather than short ones, so each
    boundary moves by a similar depth."""
    if r.sc.balancer.conductance != "boundary":
        return
    nb, length = r.dom.neighbour_ranks, r.dom.boundary_lengths.astype(np.float64)
    top = max(r.book.max(float(length.max(initial=0.0))), 1.0)
    est = ph.est
    share = np.ones(est.neighbours.size)
    pos, ok = _find(nb, est.neighbours)
    share[ok] = length[pos[ok]] / top
    ph.weights = est.weights * share
    m = ph.model
    w = edge_values(r.book, r.rank, est.neighbours, ph.weights, m.edges)  # the same on every rank
    # once per model and weights: hosted processors share the model with conductances too
    ph.model = derived(m, ("boundary-conductance", w.tobytes()), lambda: _shared_model(m.p, m.edges, m.loads,
                                                                                      m.capacities, w))


def compute(r: RunState, ph: PhaseState) -> None:
    """Step 8: the solver's iterations (thesis Alg. 2; ``application.mode: async``: asynchronous iterations,
    :mod:`hermes.app.async_mesh`, with the phase's own message tag), then every rank synchronised (charged)."""
    app = r.sc.application
    solve = solve_phase if app.mode == "sync" else partial(solve_phase_async, tag=ASYNC_TAG + ph.k % 1000)
    r.dom, ph.loop = solve(r.comm, r.dom, r.clock, kernel=app.kernel, iterations=app.iterations,
                           work_per_weight=app.work_per_weight, bytes_per_edge=app.bytes_per_edge)
    r.residual = ph.loop.residual
    allreduce(r.comm, 0.0, r.clock)
    if r.watch is not None:  # what the platform gave the application in this phase (collective, uncharged)
        ph.watched, ph.watch_errors = r.watch.observe(r.clock, ph.k, r.book)


def record(r: RunState, ph: PhaseState) -> str:
    """Step 9: the phase's records, gathered on rank 0 (bookkeeping); the head of the phase's progress line."""
    book, clock, dom, st = r.book, r.clock, r.dom, ph.stats
    t_phase = book.max(clock.elapsed() - ph.t_start)
    delta = {c: clock.totals[c] - ph.snap[c] for c in clock.totals}
    row = RankRecord(ph.k, r.rank, dom.n, dom.load, float(ph.caps[r.rank]), float(ph.caps[r.rank] * ph.loads.sum()),
                     ph.capacity_estimate, *(delta[c] for c in CATEGORIES), st.cells_sent, st.cells_received,
                     st.weight_sent, st.weight_received, st.bytes_sent, **ph.watched)
    rows = book.gather(row)
    moved, moved_w = book.sum(st.cells_sent), book.sum(st.weight_sent)
    quality = partition_quality_local(r.comm, dom, capacities=ph.caps, prev_gid=ph.gid_before,
                                      bytes_per_cell=cell_bytes(dom))
    r.total_moves += moved
    cells_now, weight_now = book.sum(dom.n), book.sum(dom.load)
    arrays = _phase_arrays(r, ph.k) if _records_partitions(r.sc.output) else ({}, {})
    imb_after = imbalance(ph.loads, ph.caps)
    if r.rank == 0:
        r.rows.extend(rows)
        mean = {c: float(np.mean([getattr(x, f"{c}_time") for x in rows])) for c in CATEGORIES}
        r.phases.append(PhaseRecord(ph.k, t_phase, *mean.values(), ph.imbalance_before, imb_after, moved, moved_w,
                                    quality["edge_cut"], ph.iterations, ph.rounds, ph.counters.as_dict(), ph.infos,
                                    quality, cells_now, weight_now, ph.change, ph.decisions, ph.refinement,
                                    ph.watch_errors))
        r.partitions.update(arrays[0])
        r.geometry.update(arrays[1])
    return (f"phase {ph.k}/{r.sc.adaptation.phases}: imbalance {ph.imbalance_before:.3f} -> {imb_after:.3f}, "
            f"moved {moved} cells, {r.sc.clock} time {t_phase:.4g} s")


def pictures_to_draw(sc: Scenario, phases: int) -> int:
    """How many PNG files the end of a run of ``phases`` phases draws (:func:`draw`): a partition per phase and
    the initial one, ``phases.png``, and ``monitor.png`` with an extra load or a monitor."""
    if not sc.output.pictures:
        return 0
    return phases + 2 + (sc.extraload is not None or sc.monitor is not None)


def eta(phase_wall: float, left: int, write_wall: float, pictures: int) -> str:
    """The ETA of a progress line: ``left`` phases as long as the last one (``phase_wall`` seconds: the phases of
    an adaptive run grow, the last one is the best guess of the next), the final records written as fast as the
    last phase's were (``write_wall``), then the pictures — counted, not timed: none is drawn before the end, so
    there is no time of this run's to estimate them from."""
    text = f"ETA {left * phase_wall + write_wall:.0f} s"
    return text + (f" + drawing {pictures} pictures" if pictures else "")


# -- the run -------------------------------------------------------------------------------------------------
def run(sc: Scenario, comm, *, out_dir: str | Path | None = None, quiet: bool = False,
        progress: Callable[[str], None] | None = None, write: bool = True, force: bool = False,
        timeout: float | None = None, lock_token: str | None = None) -> RunResult | None:
    """Run the scenario on ``comm`` (collective). Returns the result on rank 0, None elsewhere.

    The run directory (``out_dir``, else ``output.dir``, else ``runs/<name>-<timestamp>``) is checked before
    any work and prepared after the set-up (:func:`hermes.results.open_run_dir`: a previous hermes run in it
    is replaced, an unfinished one only with ``force``); every finished phase's records are written as the
    phase ends (summary.json with ``"complete": false`` until the end), and with ``output.checkpoint_every:
    K`` the distributed state every K phases (:func:`resume` continues from it). ``timeout`` (else
    ``run.timeout``) arms the :class:`~hermes.watchdog.Watchdog`. Rank 0 holds the run directory's lock
    (:func:`hermes.results.claim_dir`) from the first check to the end, or joins the lock of the launcher that
    started the job (``lock_token``).

    Raises
    ------
    HermesError
        On every rank, with the same one-line message, for bad input found at any rank.
    """
    say = progress if (progress is not None and comm.Get_rank() == 0 and not quiet) else (lambda s: None)
    where, held = None, []
    if write:
        path, key = run_dir_for(sc, out_dir) if comm.Get_rank() == 0 else (None, None)

        def claim():
            held.append(claim_dir(path, key, force=force, token=lock_token, name=sc.name))
            return held[-1].path  # the default directory may have become path-2 (another run in the same second)

        where = Bookkeeping(comm).bcast(agree(comm, lambda: claim() if path else None))
    try:
        with Watchdog(comm, timeout if timeout is not None else sc.run.timeout) as dog:
            r = start(comm, sc, say=say)
            try:
                out = None
                if where is not None:
                    token = held[0].token if held else None
                    out = Path(agree(comm, lambda: _open(r, where, key, force, token) if r.rank == 0 else None)
                               or where)
                dog.beat(0)
                return _phases(r, 1, out, dog, last_checkpoint=None)
            finally:
                close_load(r.load)  # real task processes end with the run (they also die with the process)
    finally:
        for lock in held:
            lock.release(remove_if_unused=True)


def resume(run_dir: str | Path, comm, *, quiet: bool = False, progress: Callable[[str], None] | None = None,
           timeout: float | None = None, pictures: bool | None = None,
           lock_token: str | None = None) -> RunResult | None:
    """Continue the run in ``run_dir`` from its last checkpoint (collective; the same number of ranks).

    Every rank reads back its state (:mod:`hermes.checkpoint`), rank 0 rewrites the records to the
    checkpoint's phase, and the run goes on as if it had never stopped: the virtual clock's results — the
    summary but its wall times, phases.csv, the per-cell arrays — are those of an uninterrupted run.
    ``pictures`` False skips them (None: as the scenario says).

    Raises
    ------
    HermesError
        On every rank (one line): no checkpoint, another number of ranks, a damaged file, an edited
        scenario.yaml (the run goes on with the scenario it started with).
    """
    say = progress if (progress is not None and comm.Get_rank() == 0 and not quiet) else (lambda s: None)
    out = Path(run_dir)
    held = []  # rank 0 holds the run directory's lock (or joins its launcher's, lock_token) to the end
    agree(comm, lambda: held.append(claim_dir(out, "--resume", force=True, token=lock_token))
          if comm.Get_rank() == 0 else None)
    try:
        return _resume(out, comm, say, timeout, pictures)
    finally:
        for lock in held:
            lock.release(remove_if_unused=True)


def _resume(out: Path, comm, say: Callable[[str], None], timeout: float | None,
            pictures: bool | None) -> RunResult | None:
    r, head = load_state(comm, out, lambda sc: _refs(comm, sc, say))
    r.wall_start = time.perf_counter() - head.get("wall_seconds", 0.0)
    if pictures is not None and pictures != r.sc.output.pictures:
        r.sc = r.sc.model_copy(update={"output": r.sc.output.model_copy(update={"pictures": pictures})})
    k = head["phase"]
    say(f"hermes: resuming {out} after phase {k}/{r.sc.adaptation.phases} on {r.p} ranks")
    with Watchdog(comm, timeout if timeout is not None else r.sc.run.timeout) as dog:
        agree(comm, lambda: _write_progress(r, out, k) if r.rank == 0 else None)
        dog.beat(k)
        return _phases(r, k + 1, out, dog, last_checkpoint=k)


def _phases(r: RunState, first: int, out: Path | None, dog: Watchdog, *,
            last_checkpoint: int | None) -> RunResult | None:
    """The phases ``first``… of the run, each recorded as it ends (and checkpointed when due), then
    :func:`finish`."""
    pictures = pictures_to_draw(r.sc, r.sc.adaptation.phases) if out is not None else 0
    # a refined run's pictures are drawn while the phases run (each phase its own mesh and window)
    ahead = _draw_ahead(r, out)
    try:
        return _phase_loop(r, first, out, dog, last_checkpoint, pictures, ahead)
    finally:
        if ahead is not None:
            ahead.close()


def _draw_ahead(r: RunState, out: Path | None):
    """Rank 0 of a refined run with pictures: the worker that draws each phase's picture as it is recorded."""
    if out is None or r.rank != 0 or not r.sc.output.pictures or not r.refining:
        return None
    from hermes.results import base_geometry
    from hermes.viz.ahead import DrawAhead

    return DrawAhead(out, base_geometry(r.setup.mesh))


def _phase_loop(r: RunState, first: int, out: Path | None, dog: Watchdog, last_checkpoint: int | None,
                pictures: int, ahead) -> RunResult | None:
    """:func:`_phases`' loop (``ahead``: rank 0's drawing worker or None)."""
    sc = r.sc
    every = sc.output.checkpoint_every
    for k in range(first, sc.adaptation.phases + 1):
        t = time.perf_counter()
        ph = extra_load(r, k)
        adapt(r, ph)
        balance_rounds(r, ph)  # monitor → decide → balance → realise → migrate, per round
        compute(r, ph)
        line = record(r, ph)
        t_write = time.perf_counter()
        if out is not None:
            if every is not None and k % every == 0 and k < sc.adaptation.phases:
                save_checkpoint(r, k, out)
                last_checkpoint = k
            agree(r.comm, lambda at=last_checkpoint: _write_progress(r, out, at) if r.rank == 0 else None)
            if ahead is not None:  # the phase (and the initial partition with phase 1: its fair loads) to draw
                ahead.submit([0, k] if k == 1 else [k], r.geometry, r.partitions,
                             _progress_summary(r, last_checkpoint), r.rank_rows(), r.columns)
            _fault(r, k)
        now = time.perf_counter()
        left = sc.adaptation.phases - k
        r.say(f"{line} | wall {now - r.wall_start:.1f} s, {eta(now - t, left, now - t_write, pictures)}")
        dog.beat(k)
    return finish(r, out_dir=out, write=out is not None, watchdog=dog, ahead=ahead)


def _open(r: RunState, path: Path, key: str, force: bool, token: str | None = None) -> Path:
    """Rank 0, after the set-up (holding the directory's lock, ``token``): the run directory emptied of an
    earlier run, marked, with the scenario and the (empty) records."""
    out = open_run_dir(path, key, force=force, token=token)
    write_atomic(out / "scenario.yaml", _scenario_yaml(r.sc))
    _write_progress(r, out, None)
    return out


def _scenario_yaml(sc: Scenario) -> str:
    """The text of the run directory's scenario.yaml (a checkpoint records its SHA-256)."""
    from hermes.loaders import dump_yaml

    return dump_yaml(sc.to_dict(), sort_keys=False)


def _summary_head(r: RunState) -> dict[str, Any]:
    """Rank 0: what the summary says before the first phase (its first keys)."""
    sc = r.sc
    return {"scenario": sc.name, "processors": r.p, "balancer": r.balancer.name, "balancer_params": r.params,
            "clock": sc.clock, "seed": sc.seed, "versions": versions(), "mesh": r.setup.name,
            "kernel": sc.application.kernel}


def _progress_summary(r: RunState, checkpoint_phase: int | None) -> dict[str, Any]:
    """Rank 0: summary.json of an unfinished run (``"complete": false``, the phases finished so far)."""
    return {"complete": False, "checkpoint": checkpoint_phase, **_summary_head(r),
            "adaptation": r.sc.adaptation.kind, "cells_initial": r.cells_initial,
            "weight_initial": r.weight_initial, "phases": [ph.as_dict() for ph in r.phases]}


def _write_progress(r: RunState, out: Path, checkpoint_phase: int | None) -> None:
    """Rank 0: the records of the phases finished so far — phases.csv and summary.json with ``"complete":
    false`` and the phase of the last checkpoint (each written atomically)."""
    try:
        write_records(out, _progress_summary(r, checkpoint_phase), r.rank_rows(), r.columns)
    except (OSError, OutputError) as err:
        raise RunDirError(f"cannot write the records in {out} ({reason(err)})") from None


def _refs(comm, sc: Scenario, say: Callable[[str], None]) -> dict[str, Any]:
    """What a checkpoint stores as references by name: the communicator, the printer, registry entries."""
    return {"comm": comm, "say": say, "balancer": get_balancer(sc.balancer.algorithm),
            "select": get_selection(sc.balancer.selection)}


def save_checkpoint(r: RunState, k: int, out: Path) -> None:
    """Save every rank's :class:`RunState` after phase ``k`` in ``out/checkpoint`` (collective; see
    :mod:`hermes.checkpoint`).

    The manifest records the SHA-256 of the scenario.yaml the run wrote (:func:`_open`): a new run's first
    checkpoint hashes that text, later ones keep what the checkpoint before them recorded (a resumed run
    checked the file against it; its scenario may differ from the file by ``--no-pictures``)."""
    import hashlib

    from hermes.checkpoint import read_manifest

    def scenario_sha256() -> str | None:
        if r.rank != 0:
            return None
        if (out / CHECKPOINT / "manifest.json").exists():
            return read_manifest(out).scenario_sha256
        return hashlib.sha256(_scenario_yaml(r.sc).encode()).hexdigest()

    refs = {"comm": r.comm, "say": r.say, "balancer": r.balancer, "select": r.select}
    save_state(r.comm, r, phase=k, run_dir=out, scenario=r.sc, refs=refs,
               keep={"wall_seconds": time.perf_counter() - r.wall_start},
               scenario_sha256=agree(r.comm, scenario_sha256))


def _fault(r: RunState, k: int) -> None:
    """The kill-and-resume test's fault: with ``HERMES_FAULT=kill:RANK:PHASE`` in the environment, rank RANK
    kills itself (SIGKILL, as ``kill -9`` would) once phase PHASE's records and checkpoint are written."""
    if os.environ.get("HERMES_FAULT") == f"kill:{r.rank}:{k}":
        os.kill(os.getpid(), signal.SIGKILL)


def finish(r: RunState, *, out_dir: str | Path | None = None, write: bool = True,
           watchdog: Watchdog | None = None, ahead=None) -> RunResult | None:
    """The final checks (nothing lost), the summary and, on rank 0, the run directory (collective); the
    watchdog stops once the collective part is over."""
    book, sc, dom = r.book, r.sc, r.dom
    cells_final, weight_final = book.sum(dom.n), book.sum(dom.load)
    final_imb = imbalance(np.array(book.allgather(dom.load)), r.sched.at(sc.adaptation.phases))
    total_time = book.max(r.clock.elapsed())
    u_err = _jacobi_error(r)
    r.adapter.check_totals(r.cells_initial, cells_final, r.weight_initial, weight_final)
    if watchdog is not None:
        watchdog.stop()
    # rank 0 writes; a failure to write (a full disk, a read-only medium) is one line on every rank
    return agree(r.comm, _finish_root, r, total_time, final_imb, u_err, cells_final, weight_final, out_dir, write,
                 ahead)


def _finish_root(r: RunState, total_time: float, final_imb: float, u_err, cells_final: int, weight_final: float,
                 out_dir: str | Path | None, write: bool, ahead=None) -> RunResult | None:
    """Rank 0: the summary, the run directory's files, then its VTU files and pictures (None elsewhere;
    ``ahead``: the worker that drew pictures while the phases ran)."""
    if r.rank != 0:
        return None
    sc = r.sc
    summary = {
        "complete": True,
        "scenario": sc.name, "processors": r.p, "balancer": r.balancer.name, "balancer_params": r.params,
        "clock": sc.clock, "seed": sc.seed, "versions": versions(), "mesh": r.setup.name,
        "kernel": sc.application.kernel,
        # async only (a sync summary stays as it was): the mode and the last phase's global residual
        **({"mode": "async", "final_residual": r.residual} if sc.application.mode == "async" else {}),
        "total_time": total_time, "final_imbalance": final_imb,
        "adaptation": sc.adaptation.kind, "cells_initial": r.cells_initial, "cells_final": cells_final,
        "cells_refined": r.adapter.totals["refined"], "cells_coarsened": r.adapter.totals["coarsened"],
        "weight_initial": r.weight_initial, "weight_final": weight_final, "migrated_cells": r.total_moves,
        "jacobi_max_rel_error": u_err, "replay_mismatches": r.adapter.mismatches,
        "wall_seconds": time.perf_counter() - r.wall_start, "adapt_wall_seconds": r.adapter.walls,
        "phases": [ph.as_dict() for ph in r.phases],
    }
    result = RunResult(summary, r.rank_rows())
    if write:
        out = Path(out_dir or run_dir_for(sc)[0])
        t = time.perf_counter()
        try:
            result.out_dir = write_run(sc, summary, result.ranks, r.columns, r.partitions, r.setup.mesh, out,
                                       r.geometry)
            if r.watch is not None and r.watch.link_rows:
                write_csv(result.out_dir / "links.csv", r.watch.link_rows)
            spec = sc.output.trace_spec
            if spec is not None:
                from hermes.trace.record import write_run_trace

                write_run_trace(result.out_dir, cells_per_block=spec.cells_per_block, compress=spec.compress)
        except (OSError, OutputError) as err:
            raise RunDirError(f"cannot write the results in {out} ({reason(err)}); the records of the phases "
                              f"finished before are kept") from None
        shutil.rmtree(result.out_dir / CHECKPOINT, ignore_errors=True)  # a finished run has nothing to resume
        pictures = pictures_to_draw(sc, sc.adaptation.phases)
        files = " and ".join([f"{pictures} pictures"] * (pictures > 0) + ["the VTU files"] * sc.output.vtu)
        r.say(f"results written in {time.perf_counter() - t:.1f} s" + (f"; drawing {files}" if files else ""))
        t = time.perf_counter()
        draw(result.out_dir, sc, r.say, ahead)
        if files:
            r.say(f"drawn: {files} in {time.perf_counter() - t:.1f} s")
    return result


def draw(out: Path, sc: Scenario, say: Callable[[str], None] | None = None, ahead=None) -> None:
    """The run's VTU files and pictures, as the scenario asks (``say``: a progress line after every picture;
    ``ahead``: the :class:`hermes.viz.ahead.DrawAhead` that drew some while the phases ran — the rest here).
    A picture hermes cannot draw from the records is a warning; a file it cannot write (a full disk, a
    read-only medium) is a RunDirError after the records are complete."""
    try:
        if sc.output.vtu:
            from hermes.viz.vtu import write_run_vtu

            try:
                write_run_vtu(out)
            except OutputError:
                raise
            except HermesError as err:
                log.warning("VTU files not written: %s", err)
        if sc.output.pictures:
            from hermes.viz import plot_run
            from hermes.viz.parallel import default_workers

            try:
                if ahead is None:
                    plot_run(out, progress=say, workers=default_workers(sc.adaptation.phases + 1))
                else:  # phases.png and, from the last back, the pictures the worker has not started; then
                    plot_run(out, phases=[], progress=say)  # what neither drew
                    here = ahead.take_over(say)
                    done = set(ahead.finish())
                    if say is not None:
                        say(f"drawn {len(done)} partition pictures while the phases ran"
                            + (f", {len(here)} here" if here else ""))
                    done |= set(here)
                    rest = [k for k in range(sc.adaptation.phases + 1) if k not in done]
                    if rest:
                        plot_run(out, phases=rest, timeline=False, progress=say, workers=default_workers(len(rest)))
            except OutputError:
                raise
            except HermesError as err:
                log.warning("pictures not written: %s", err)
            if sc.extraload is not None or sc.monitor is not None:
                _draw_monitor(out)
    except (OSError, OutputError) as err:
        raise RunDirError(f"cannot write the pictures in {out} ({reason(err)}); the run's records are "
                          f"complete") from None


def _draw_monitor(out: Path) -> None:
    """monitor.png: true vs forecast (vs measured) capacity per rank over the phases, from phases.csv."""
    import csv

    from hermes.viz.monitor import monitor_arrays, plot_monitor

    try:
        with open(out / "phases.csv", newline="") as f:
            a = monitor_arrays(csv.DictReader(f))
        plot_monitor(out / "monitor.png", a["phases"], a["true"], a["forecast"], a["measured"])
    except OutputError:
        raise
    except HermesError as err:
        log.warning("monitor.png not written: %s", err)


def _jacobi_error(r: RunState) -> float | None:
    """max |u − u_serial| / max |u_serial| of a jacobi run, on rank 0 (collective).

    ``u_serial`` is the serial *synchronous* Jacobi of as many sweeps. A sync run equals it bit for bit
    (unrefined); an async run (``application.mode: async``) legitimately differs, its ghosts being stale, so
    there the figure is the async solution's distance to the serial sync one — reported, never checked —
    next to ``final_residual`` in the summary."""
    app, sc = r.sc.application, r.sc
    if app.kernel != "jacobi":
        return None
    if r.refining:
        return r.adapter.jacobi_error(r.dom, r.setup.trimesh)
    g = gather_to_root(r.comm, r.dom, r.setup.n_cells, extra={"u": r.dom.fields["u"]})
    if r.rank != 0:
        return None
    mesh = r.setup.mesh
    ref = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, sc.adaptation.phases * app.iterations)
    return float(np.max(np.abs(g[2]["u"] - ref)) / max(np.max(np.abs(ref)), 1e-300))


def versions() -> dict[str, str]:
    """The versions of hermes and of what it ran on (summary.json's ``versions``)."""
    import mpi4py
    import scipy
    from mpi4py import MPI

    out = {"hermes": __version__, "python": _platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__, "mpi4py": mpi4py.__version__,
           "mpi": MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()}  # Open MPI ends it with NUL
    try:
        import pymetis

        out["pymetis"] = getattr(pymetis, "version", getattr(pymetis, "__version__", "?"))
    except ImportError:  # pragma: no cover
        pass
    return {k: str(v) for k, v in out.items()}


# -- helpers of the steps ------------------------------------------------------------------------------------
def _worsens(comm, model: Model, decision) -> bool:
    """Whether the flow would not lower the imbalance of the model (collective: one verdict for all
    ranks). Such a flow — a numerically broken one, e.g. MPA far
    beyond the sizes where its sequence is accurate (docs/BALANCERS.md) — is not applied, and the
    decision's info says so."""
    after = imbalance(model.apply_flow(decision.flow), model.capacities)
    if not Bookkeeping(comm).max(int(after >= model.imbalance)):
        return False
    decision.info["rejected"] = f"the flow would not lower the imbalance ({model.imbalance:.4g} -> {after:.4g})"
    return True


def _phase_arrays(r: RunState, phase: int):
    """Rank 0: the phase's per-cell arrays for partitions.npz and, for a refined mesh, its geometry for
    geometry.npz (``coords_XXX``, ...); ({}, {}) elsewhere (collective)."""
    tag, comm, dom = f"{phase:03d}", r.comm, r.dom
    n = r.setup.n_cells if not r.refining else r.book.max(int(dom.gid.max(initial=-1))) + 1
    extra = {name: dom.fields[name] for name in ("u", "level") if name in dom.fields} if r.sc.output.vtu else None
    g = gather_to_root(comm, dom, n, extra=extra)
    tm = gather_trimesh(comm, dom) if r.refining else None
    if r.rank != 0:
        return {}, {}
    own, wts, fields = g
    alive = np.flatnonzero(own >= 0) if r.refining else slice(None)
    parts = {f"owner_{tag}": own[alive].astype(np.int32), f"weight_{tag}": wts[alive],
             **{f"{name}_{tag}": v[alive] for name, v in fields.items()}}
    if not r.refining:
        return parts, {}
    parts[f"gid_{tag}"] = alive
    return parts, {f"coords_{tag}": tm.centroids, f"points_{tag}": tm.points, f"cell_nodes_{tag}": tm.tris.ravel(),
                   f"cell_ptr_{tag}": np.arange(0, 3 * tm.n_cells + 1, 3, dtype=np.int64)}


def _records_partitions(output) -> bool:
    """Whether the run keeps every phase's per-cell arrays (partitions.npz): for themselves, the pictures, the VTU
    files or the trace."""
    return bool(output.partitions or output.pictures or output.vtu or output.trace_spec is not None)


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """The scalar and string entries of a Decision's info (what summary.json can hold)."""
    out = {}
    for k, v in (info or {}).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (np.integer, np.floating)):
            out[k] = v.item()
    return out


def _gather_costs(book: Bookkeeping, p: int, est: Estimates) -> np.ndarray:
    """The p×p link-cost matrix w̃ of the gain function (0 off the subdomain graph)."""
    rows = book.allgather((tuple(est.neighbours.tolist()), tuple(est.costs.tolist())))  # tuples: shared hosted

    def build() -> np.ndarray:
        cost = np.zeros((p, p))
        for i, (nbrs, cs) in enumerate(rows):
            cost[i, nbrs] = cs
        return cost

    return shared(book.comm, "link-costs", rows, build)  # hosted processors share one read-only matrix
