"""The set-up of a run (collective): rank 0 reads and partitions the mesh (METIS, target fractions = the first
phase's capacities), every rank receives its cells, and the run's state is built (:func:`start`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hermes.adaptation import Adapter
from hermes.app.mesh.kernels import initial_fields
from hermes.balance.realisation.selection import get_selection
from hermes.balance.registry import get_balancer
from hermes.runtime.clock import Links, make_clock
from hermes.runtime.comm import Bookkeeping, agree
from hermes.data.distributed import LocalDomain, scatter_domain
from hermes.data.refine import from_mesh
from hermes.data.refine_dist import scatter_trimesh
from hermes.errors import ScenarioError
from hermes.extraload import CapacitySchedule
from hermes.lifecycle.feed import Feed, open_load
from hermes.lifecycle.state import RunState, Setup
from hermes.progress import Progress, quiet
from hermes.scenario import Scenario, check_processors
from hermes.sections import MeshSpec, PlatformProfile

__all__ = ["load_mesh", "distribute", "start"]

log = logging.getLogger(__name__)


# -- set-up --------------------------------------------------------------------------------------------------
def load_mesh(spec: MeshSpec, resolve: Callable[[str], Path]):
    """Read or generate the mesh of the scenario's ``mesh`` section (serial; rank 0; ``resolve``: the scenario's,
    for a file)."""
    from hermes.data.formats import select_constraint
    from hermes.data.generators import grid, parse_grid_spec
    from hermes.data.io import read_mesh

    if spec.grid is not None:
        nx, ny = parse_grid_spec(spec.grid)
        mesh = grid(nx, ny)
    else:
        path = resolve(spec.file)
        mesh = select_constraint(read_mesh(path, units=spec.units), spec.constraint, f"mesh.file: {path}")
    if spec.weight != 1.0:
        mesh = mesh.with_weights(mesh.weights * spec.weight)
    return mesh


def approximations(sc: Scenario, mesh=None) -> list[str]:
    """What a run does otherwise than its scenario says, one line each (docs/LIMITS.md): flat balancer keys only
    other balancers know (ignored), and, given the read ``mesh``, zero first vertex weights made 1."""
    lines = []
    ignored = sc.balancer.ignored
    if ignored:
        keys = ", ".join(f"balancer.{k}" for k in ignored)
        lines.append(f"{keys}: not a parameter of {sc.balancer.algorithm!r} (other balancers'): ignored")
    zero = (mesh.meta.get("zero_weights_replaced") or 0) if mesh is not None else 0
    if zero:
        lines.append(f"{_mesh_where(sc)}: {zero} zero vertex weights made 1 (a work unit needs positive work)")
    return lines


def _mesh_where(sc: Scenario) -> str:
    return f"mesh.grid {sc.mesh.grid}" if sc.mesh.grid is not None else f"mesh.file {sc.resolve(sc.mesh.file)}"


def _read_and_partition(sc: Scenario, p: int, processes: int | None = None,
                        say: Progress = quiet()):
    """Rank 0: the mesh, its initial partition (METIS, targets = the first phase's capacities), fields; ``say``
    names each step as it starts (its status) and prints a line after it."""
    from hermes.data.io import dropped_text
    from hermes.data.partition import metis_partition
    from hermes.lifecycle.preflight import check_refinable, check_size

    t = time.perf_counter()
    say.status(f"set-up: {'generating' if sc.mesh.grid is not None else 'reading'} the mesh")
    sched = CapacitySchedule.from_platform(sc.platform, sc.resolve, p)
    caps = None if sc.platform.capacities == "homo" else sched.base.tolist()
    rows = None if sched.table is None else sched.table.tolist()
    if sc.mesh.grid_cells is not None:  # cells ≥ processors, magnitudes, memory: before the grid is built
        check_size(sc, sc.mesh.grid_cells, p, capacities=caps, schedule=rows, ranks_here=processes)
    mesh = load_mesh(sc.mesh, sc.resolve)
    dropped = dropped_text(mesh)
    if dropped is not None:  # rank 0 only reads the mesh: one line for the job
        log.warning("mesh.file %s: its %s cells are the work units; dropped: %s", sc.resolve(sc.mesh.file),
                    "/".join(dict.fromkeys(mesh.meta.get("cell_types") or ["top-dimension"])), dropped)
    for line in approximations(sc, mesh):  # what the scenario asked for and hermes does otherwise: said once
        log.warning("%s", line)
    if sc.mesh.grid_cells is None:
        check_size(sc, mesh.n_cells, p, capacities=caps, schedule=rows, ranks_here=processes,
                   weights=(float(mesh.weights.min()), float(mesh.weights.max())))
    check_refinable(sc.adaptation, mesh, _mesh_where(sc))
    tm = None
    if sc.adaptation.kind == "refine":  # the work units become the triangles
        say.status("set-up: the mesh as triangles (adaptation.kind: refine)")
        tm, origin = from_mesh(mesh)
        mesh = tm.to_mesh(name=mesh.name, weights=mesh.weights[origin])
    say(f"set-up: mesh {mesh.name} ({mesh.n_cells} cells) {'generated' if sc.mesh.grid is not None else 'read'} "
        f"in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    extra = mesh.meta.get("constraints")  # mesh.constraint: all: every weight balanced by the first partition
    say.status(f"set-up: partitioning {mesh.n_cells} cells (METIS, {p} part{'s' * (p != 1)})")
    owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, targets=sched.at(1), seed=sc.seed,
                            constraints=extra)
    say(f"set-up: initial partition (METIS, {p} part{'s' * (p != 1)}"
        f"{f', {extra.shape[1] + 1} constraints' if extra is not None else ''}) in {time.perf_counter() - t:.1f} s")
    fields = initial_fields(mesh.coords)
    if extra is not None:
        from hermes.balance.constraints import FIELD

        fields.update({FIELD.format(k + 2): np.ascontiguousarray(extra[:, k]) for k in range(extra.shape[1])})
    return mesh, owner, fields, tm


def distribute(comm, sc: Scenario, say: Progress = quiet()) -> tuple[LocalDomain, Setup]:
    """Rank 0 reads and partitions the mesh, every rank receives its cells (collective; a bad mesh raises the
    same error on every rank); ``say`` names each step and prints a line after it (rank 0)."""
    rank, p = comm.Get_rank(), comm.Get_size()
    from hermes.machine import ranks_on_this_machine

    here = ranks_on_this_machine(comm.processes)  # the job's processes on this machine
    payload = agree(comm, _read_and_partition, sc, p, here, say) if rank == 0 else agree(comm, lambda: None)
    t = time.perf_counter()
    mesh, owner, fields, tm = payload if rank == 0 else (None, None, None, None)
    meta = (mesh.name, mesh.n_cells, (mesh.coords.min(axis=0), mesh.coords.max(axis=0))) if rank == 0 else None
    say.status(f"set-up: scattering the cells to {p} processor{'s' * (p != 1)}")
    name, n_cells, bbox = comm.bcast(meta, root=0)
    if sc.adaptation.kind == "refine":
        dom = scatter_trimesh(comm, tm, owner, fields, weights=None if mesh is None else mesh.weights)
    else:
        dom = scatter_domain(comm, mesh, owner, fields)
    say(f"set-up: cells sent to their {p} processor{'s' * (p != 1)} in {time.perf_counter() - t:.1f} s")
    return dom, Setup(mesh, owner, name, n_cells, bbox, tm)


def start(comm, sc: Scenario, *, say: Progress = quiet()) -> RunState:
    """Set up a run on every rank (collective): balancer, schedule, mesh, clock, adapter (``say``: rank 0's
    progress, a silent one elsewhere)."""
    p = comm.Get_size()
    if sc.processors is not None and sc.processors != p:
        raise ScenarioError(f"processors: the scenario asks for {sc.processors} processors but the job has {p} "
                            f"ranks (run with mpiexec -n {sc.processors}, or --set processors={p})")
    say.status("set-up: checking the scenario against the job")
    balancer = get_balancer(sc.balancer.algorithm)
    params, select = sc.balancer.params, get_selection(sc.balancer.selection)
    agree(comm, check_processors, sc, p)  # links, schedule, extra load against the job's size (one line)
    sched = agree(comm, CapacitySchedule.from_platform, sc.platform, sc.resolve, p)
    n = comm.processes
    on = f"{p} processor{'s' * (p != 1)}" + ("" if n == p else f" on {n} process{'es' * (n != 1)}")
    say(f"hermes: {sc.name} on {on}, balancer {balancer.name}, "
        f"{sc.adaptation.phases} phase{'s' * (sc.adaptation.phases != 1)}, clock {sc.clock}")
    wall_start = time.perf_counter()
    dom, setup = distribute(comm, sc, say)
    say.status("set-up: clock, extra load, monitor and adaptation")
    pl = sc.platform
    links = Links(pl.latency, pl.bandwidth, {tuple(sorted(k.ranks)): (
        k.latency if k.latency is not None else pl.latency, k.bandwidth if k.bandwidth is not None else pl.bandwidth)
        for k in pl.links})
    load = open_load(comm, sc.extraload, sc.resolve, sc.clock, links)
    clock = make_clock(sc.clock, comm.Get_rank(), p, links, pl.speed, sched.at(1)[comm.Get_rank()], load)
    if pl.profile is not None:  # the balancer's messages at the profile's costs (Clock.balancing)
        profile = agree(comm, PlatformProfile.load, pl.profile, sc.resolve)
        clock.balance_links, clock.balance_prices = profile.links(pl.bandwidth), profile.prices()
    book = Bookkeeping(comm)
    weight_initial = book.sum(dom.load)
    adapter = Adapter(comm, sc.adaptation, sc.application, sc.seed, setup.bbox, clock)
    state = RunState(comm, sc, book, balancer, params, select, sched, clock, adapter,
                     dom, setup, cells_initial=book.sum(dom.n), weight_initial=weight_initial, say=say,
                     wall_start=wall_start, load=load)
    state.feed = Feed.create(comm, sc.monitor, sc.extraload is not None, clock, state.probe_work)
    say(f"set-up: mesh, initial partition and distribution in {time.perf_counter() - wall_start:.1f} s wall")
    if state.rank == 0:
        _record_initial(state)
    say.status(None)
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
        out["level_000"] = np.zeros(mesh.n_cells, dtype=np.int64)  # with or without VTU: the pictures draw them

