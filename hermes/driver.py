"""The driver: runs an experiment's adaptation phases under MPI (HeRMeS, thesis Fig. 10.1–10.2).

Set-up (rank 0 reads and partitions the mesh with METIS, target fractions = the capacities; every
rank receives its cells), then for each phase k = 1..n:

1. **extra load** — the capacity schedule sets the processors' capacities for phase k;
2. **adapt** — the marking (a region, or the kernel's error indicator) changes the work:
   ``adaptation.kind: weights`` multiplies the marked cells' weights by the factor, ``refine`` changes
   the mesh (below; :mod:`hermes.adaptation`);
3. **monitor** — capacities and link costs are measured (skipped by ``none``);
4. **decide** — balance only if the measured imbalance exceeds ``balancer.trigger``;
5. **balance** — the balancer computes a flow (or new destinations);
6. **migrate** — cells move (selection strategy gain, peel or wavefront; topological order of the flow);
7. **compute** — ``application.iterations`` solver iterations (thesis Alg. 2);
8. **record** — per-rank figures are gathered on rank 0.

Rank 0 writes the run directory atomically at the end (and the pictures).

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

import datetime as _dt
import logging
import platform as _platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from hermes import __version__
from hermes.adaptation import Adapter
from hermes.app.kernels import initial_fields, jacobi_serial
from hermes.app.simulate import solve_phase
from hermes.balance.flow import topological_order
from hermes.balance.interface import BalanceContext
from hermes.balance.model import Model
from hermes.balance.realisation import realise_flow
from hermes.balance.registry import get_balancer
from hermes.balance.selection import get_selection
from hermes.clock import CATEGORIES, Links, make_clock
from hermes.comm import Counters, NeighbourComm, agree, allreduce
from hermes.data.distributed import gather_to_root, halo_plan, scatter_domain
from hermes.data.migrate import MigrationStats, migrate
from hermes.data.refine import from_mesh
from hermes.data.refine_dist import gather_trimesh, scatter_trimesh
from hermes.errors import HermesError, MeshError, ScenarioError
from hermes.extraload import CapacitySchedule
from hermes.metrics import cell_bytes, imbalance, partition_quality_local
from hermes.monitor import monitor
from hermes.results import write_atomic, write_csv, write_json, write_npz
from hermes.scenario import Scenario

__all__ = ["run", "load_mesh", "RunResult"]

log = logging.getLogger(__name__)

PHASE_KEYS = ("phase", "time", "compute_time", "comm_time", "sync_time", "balance_time", "migrate_time",
              "adapt_time", "imbalance_before", "imbalance_after", "migrated_cells", "migrated_weight", "edge_cut",
              "balance_iterations")
CSV_COLUMNS = ["phase", "rank", "cells", "load", "capacity", "fair_load", "capacity_estimate", "compute_time",
               "comm_time", "sync_time", "balance_time", "migrate_time", "adapt_time", "cells_sent", "cells_received",
               "weight_sent", "weight_received", "bytes_sent"]


class RunResult(dict):
    """The summary (a dict, as written to summary.json) plus ``out_dir``; only on rank 0."""

    out_dir: Path


def load_mesh(sc: Scenario):
    """Read or generate the scenario's mesh (serial; rank 0)."""
    from hermes.data.generators import grid, parse_grid_spec
    from hermes.data.io import read_mesh

    if sc.mesh.grid is not None:
        nx, ny = parse_grid_spec(sc.mesh.grid)
        mesh = grid(nx, ny)
    else:
        mesh = read_mesh(sc.resolve(sc.mesh.file), units=sc.mesh.units)
    if sc.mesh.weight != 1.0:
        mesh = mesh.with_weights(mesh.weights * sc.mesh.weight)
    return mesh


def _versions() -> dict[str, str]:
    import mpi4py
    import scipy
    from mpi4py import MPI

    out = {"hermes": __version__, "python": _platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__, "mpi4py": mpi4py.__version__,
           "mpi": MPI.Get_library_version().splitlines()[0].strip()}
    try:
        import pymetis

        out["pymetis"] = getattr(pymetis, "version", getattr(pymetis, "__version__", "?"))
    except ImportError:  # pragma: no cover
        pass
    return {k: str(v) for k, v in out.items()}


def _setup(comm, sc: Scenario, p: int):
    """Rank 0: mesh, initial partition, fields; broadcast any error so all ranks stop together."""
    from hermes.data.partition import metis_partition

    err, payload = None, None
    if comm.Get_rank() == 0:
        try:
            mesh = load_mesh(sc)
            if mesh.n_cells < p:
                raise MeshError(f"more processors ({p}) than cells ({mesh.n_cells}) in mesh '{mesh.name}'")
            sched = CapacitySchedule.from_scenario(sc, p)
            tm = None
            if sc.adaptation.kind == "refine":  # the work units become the triangles
                tm, origin = from_mesh(mesh)
                mesh = tm.to_mesh(name=mesh.name, weights=mesh.weights[origin])
            owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, targets=sched.at(1), seed=sc.seed)
            fields = initial_fields(mesh.coords)
            lo, hi = mesh.coords.min(axis=0), mesh.coords.max(axis=0)
            payload = (mesh, owner, fields, (lo, hi), tm)
        except HermesError as e:
            err = (type(e).__name__, str(e))
    err = comm.bcast(err, root=0)
    if err is not None:
        import hermes.errors as he

        raise getattr(he, err[0], HermesError)(err[1])
    if comm.Get_rank() == 0:
        mesh, owner, fields, bbox, tm = payload
        meta = (mesh.name, mesh.n_cells, bbox)
    else:
        mesh = owner = fields = tm = None
        meta = None
    name, n_cells, bbox = comm.bcast(meta, root=0)
    if sc.adaptation.kind == "refine":
        dom = scatter_trimesh(comm, tm, owner, fields, weights=None if mesh is None else mesh.weights)
    else:
        dom = scatter_domain(comm, mesh, owner, fields)
    return dom, mesh, owner, name, n_cells, bbox, tm


def run(sc: Scenario, comm, *, out_dir: str | Path | None = None, quiet: bool = False,
        progress: Callable[[str], None] | None = None, write: bool = True) -> RunResult | None:
    """Run the scenario on ``comm`` (collective). Returns the summary on rank 0, None elsewhere.

    Raises
    ------
    HermesError
        On every rank, with the same one-line message, for bad input found at any rank.
    """
    rank, p = comm.Get_rank(), comm.Get_size()
    if sc.processors is not None and sc.processors != p:
        raise ScenarioError(f"processors: the scenario asks for {sc.processors} processors but the job has {p} "
                            f"ranks (run with mpiexec -n {sc.processors}, or --set processors={p})")
    bal = get_balancer(sc.balancer.algorithm)
    params = sc.balancer.params
    select = get_selection(sc.balancer.selection)
    sched = agree(comm, CapacitySchedule.from_scenario, sc, p)
    wall_start = time.perf_counter()
    say = progress if (progress is not None and rank == 0 and not quiet) else (lambda s: None)

    dom, mesh, owner0, mesh_name, n_cells, bbox, tm0 = _setup(comm, sc, p)
    pl = sc.platform
    links = Links(pl.latency, pl.bandwidth, {tuple(sorted(l.ranks)): (l.latency if l.latency is not None else
                  pl.latency, l.bandwidth if l.bandwidth is not None else pl.bandwidth) for l in pl.links})
    clock = make_clock(sc.clock, rank, p, links, pl.speed, sched.at(1)[rank])
    app = sc.application
    ad = sc.adaptation
    refining = ad.kind == "refine"
    record = sc.output.partitions or sc.output.pictures or sc.output.vtu  # per-phase arrays gathered on rank 0
    weight_initial = comm.allreduce(dom.load)
    cells_initial = comm.allreduce(dom.n)
    say(f"hermes: {mesh_name} ({n_cells} cells) on {p} ranks, balancer {bal.name}, {ad.phases} phases, "
        f"clock {sc.clock}")

    partitions: dict[str, np.ndarray] = {}
    phase_geometry: dict[str, np.ndarray] = {}  # refined meshes: coords_XXX, points_XXX, ... (geometry.npz)
    if rank == 0:
        partitions["owner_000"] = owner0.astype(np.int32)
        partitions["weight_000"] = mesh.weights.copy()
        if sc.output.vtu:
            partitions["u_000"] = initial_fields(mesh.coords)["u"]
        if refining:
            partitions["gid_000"] = np.arange(mesh.n_cells, dtype=np.int64)
            if sc.output.vtu:
                partitions["level_000"] = np.zeros(mesh.n_cells, dtype=np.int64)
    phases: list[dict[str, Any]] = []
    csv_rows: list[dict[str, Any]] = []
    total_moves = 0
    adapter = Adapter(comm, sc, bbox, clock)
    probe_work = pl.speed * 1e-3
    balancer_state: dict[str, Any] = {}  # the balancer's own per-rank memory across phases

    for k in range(1, ad.phases + 1):
        caps = sched.at(k)
        clock.set_capacity(caps[rank])
        t_start = clock.elapsed()
        snap = clock.snapshot()

        # adapt
        dom, change = adapter.step(dom, k)
        dense = not refining or comm.allreduce(int(dom.gid.max(initial=-1)), op=_max_op()) + 1 == \
            comm.allreduce(dom.n)
        gid_before = dom.gid  # the cells this rank holds before balancing: the migration volume's reference
        loads = np.array(comm.allgather(dom.load))
        imb_before = imbalance(loads, caps)

        # monitor, decide, balance, migrate
        stats = MigrationStats()
        iters = 0
        cap_est = float("nan")
        counters = Counters()
        rounds = 0
        infos: list[dict[str, Any]] = []  # what the balancer reported per round (e.g. AdA's case, auto's choice)
        if bal.name != "none":
            est = monitor(comm, clock, dom.neighbour_ranks, probe_work)
            cap_est = est.capacity
            model = _gather_model(comm, dom, est)
            last = np.inf
            # a round runs while the imbalance exceeds the trigger (and rounding noise) and still drops
            while rounds < sc.balancer.rounds and max(sc.balancer.trigger, 1 + 1e-9) < model.imbalance < last:
                if rounds:  # the subdomain graph changed: measure the new links
                    est = monitor(comm, clock, dom.neighbour_ranks, probe_work)
                    model = _gather_model(comm, dom, est)
                last = model.imbalance
                dom, st, it, info = _balance_once(comm, clock, bal, params, sc.seed, dom, est, model, counters, k,
                                                  balancer_state, select, dense)
                infos.append(_jsonable(info))
                stats.add(st)
                iters += it
                rounds += 1
                if comm.allreduce(st.cells_sent) == 0:
                    break
                model = model.with_loads(comm.allgather(dom.load))
        loads_after = np.array(comm.allgather(dom.load))
        imb_after = imbalance(loads_after, caps)

        # compute
        dom, loop = solve_phase(comm, dom, clock, kernel=app.kernel, iterations=app.iterations,
                                work_per_weight=app.work_per_weight, bytes_per_edge=app.bytes_per_edge)
        allreduce(comm, 0.0, clock)  # end of phase: every rank synchronised

        # record
        t_phase = comm.allreduce(clock.elapsed() - t_start, op=_max_op())
        delta = {c: clock.totals[c] - snap[c] for c in clock.totals}
        row = {"phase": k, "rank": rank, "cells": dom.n, "load": dom.load, "capacity": float(caps[rank]),
               "fair_load": float(caps[rank] * loads_after.sum()), "capacity_estimate": cap_est,
               **{f"{c}_time": delta[c] for c in CATEGORIES},
               "cells_sent": stats.cells_sent, "cells_received": stats.cells_received,
               "weight_sent": stats.weight_sent, "weight_received": stats.weight_received,
               "bytes_sent": stats.bytes_sent}
        rows = comm.gather(row, root=0)
        moved = comm.allreduce(stats.cells_sent)
        moved_w = comm.allreduce(stats.weight_sent)
        quality = partition_quality_local(comm, dom, capacities=caps, prev_gid=gid_before,
                                          bytes_per_cell=cell_bytes(dom))
        cut = quality["edge_cut"]
        total_moves += moved
        cells_now = comm.allreduce(dom.n)
        weight_now = comm.allreduce(dom.load)
        recorded = _record_phase(comm, sc, dom, k, n_cells, refining) if record else ({}, {})
        if rank == 0:
            csv_rows.extend(rows)
            mean = {c: float(np.mean([r[f"{c}_time"] for r in rows])) for c in CATEGORIES}
            phases.append({"phase": k, "time": t_phase, **{f"{c}_time": v for c, v in mean.items()},
                           "imbalance_before": imb_before, "imbalance_after": imb_after, "migrated_cells": moved,
                           "migrated_weight": moved_w, "edge_cut": cut, "balance_iterations": iters,
                           "balance_rounds": rounds,
                           "balance_counters": counters.as_dict(), "balance_info": infos, "quality": quality,
                           "cells": cells_now, "weight": weight_now, **change})
            partitions.update(recorded[0])
            phase_geometry.update(recorded[1])
        say(f"phase {k}/{ad.phases}: imbalance {imb_before:.3f} -> {imb_after:.3f}, moved {moved} cells, "
            f"time {t_phase:.4g} s")

    # final checks: nothing lost
    cells_final = comm.allreduce(dom.n)
    weight_final = comm.allreduce(dom.load)
    final_loads = np.array(comm.allgather(dom.load))
    final_imb = imbalance(final_loads, sched.at(ad.phases))
    total_time = comm.allreduce(clock.elapsed(), op=_max_op())
    u_err = None
    if app.kernel == "jacobi" and refining:
        u_err = adapter.jacobi_error(dom, tm0)
    elif app.kernel == "jacobi":
        g = gather_to_root(comm, dom, n_cells, extra={"u": dom.fields["u"]})
        if rank == 0:
            ref = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, ad.phases * app.iterations)
            u_err = float(np.max(np.abs(g[2]["u"] - ref)) / max(np.max(np.abs(ref)), 1e-300))
    adapter.check_totals(cells_initial, cells_final, weight_initial, weight_final)
    refined, coarsened = adapter.totals["refined"], adapter.totals["coarsened"]
    if rank != 0:
        return None

    summary = RunResult({
        "scenario": sc.name, "processors": p, "balancer": bal.name, "balancer_params": params,
        "clock": sc.clock, "seed": sc.seed, "versions": _versions(), "mesh": mesh_name,
        "kernel": app.kernel, "total_time": total_time, "final_imbalance": final_imb,
        "adaptation": ad.kind, "cells_initial": cells_initial, "cells_final": cells_final,
        "cells_refined": refined, "cells_coarsened": coarsened, "weight_initial": weight_initial,
        "weight_final": weight_final, "migrated_cells": total_moves, "jacobi_max_rel_error": u_err,
        "replay_mismatches": adapter.mismatches,
        "wall_seconds": time.perf_counter() - wall_start, "adapt_wall_seconds": adapter.walls, "phases": phases,
    })
    if write:
        out = _write_outputs(sc, summary, csv_rows, partitions, mesh, out_dir or sc.output.dir, phase_geometry)
        summary.out_dir = out
    return summary


def _balance_once(comm, clock, bal, params, seed, dom, est, model, counters, phase, state, select=None,
                  dense=True):
    """One decide-balance-migrate step (collective): returns (domain, migration stats, iterations).

    ``dense=False`` (ids with gaps, after refinement): the balancer sees :func:`_dense_view`.
    """
    rank, p = comm.Get_rank(), comm.Get_size()
    nb = NeighbourComm(comm, est.neighbours, clock, counters)
    with clock.activity("balance"):
        view = dom if dense else _dense_view(comm, dom, clock, counters)
        ctx = BalanceContext(comm=comm, clock=clock, nb=nb, model=model, load=dom.load, capacity=est.capacity,
                             weights=est.weights, dom=view, params=params, seed=seed, state=state,
                             latency=est.latency, bandwidth=est.bandwidth)
        decision = agree(comm, bal.run, ctx)
    stats = MigrationStats()
    with clock.activity("migrate"):
        if decision.dest is not None:
            dom, stats = migrate(comm, dom, decision.dest, clock)
        elif decision.flow is not None and np.any(decision.flow != 0) and not _worsens(comm, model, decision):
            cost = _gather_costs(comm, p, est)
            levels = topological_order(model, decision.flow, 1e-12 * max(model.loads.sum(), 1.0))
            dom, stats, realised = realise_flow(comm, dom, model.edges, decision.flow, cost, clock, levels=levels,
                                                select=select)
            if rank == 0 and log.isEnabledFor(logging.DEBUG):
                for e, f, r in zip(model.edges.tolist(), decision.flow, realised):
                    if abs(f) > 1e-9 or r:
                        log.debug("phase %d edge %s flow %.3f realised %.3f", phase, e, f, r)
    return dom, stats, decision.iterations, decision.info


def _worsens(comm, model: Model, decision) -> bool:
    """Whether the flow would not lower the imbalance of the model (collective: one verdict for all
    ranks). Such a flow — a numerically broken one, e.g. MPA far
    beyond the sizes where its sequence is accurate (docs/BALANCERS.md) — is not applied, and the
    decision's info says so."""
    after = imbalance(model.apply_flow(decision.flow), model.capacities)
    if not comm.allreduce(int(after >= model.imbalance), op=_max_op()):
        return False
    decision.info["rejected"] = f"the flow would not lower the imbalance ({model.imbalance:.4g} -> {after:.4g})"
    return True


def _dense_view(comm, dom, clock, counters):
    """The domain with ids ``0..N−1``, contiguous by rank (ParMETIS' ``vtxdist`` numbering), for balancers
    that index arrays by id (collective: an exclusive scan and one ghost exchange)."""
    off = comm.exscan(dom.n) or 0
    new = off + np.arange(dom.n, dtype=np.int64)
    plan = halo_plan(dom)
    nb = NeighbourComm(comm, plan.ranks, clock, counters)
    got = nb.exchange([new[i].astype(np.float64) for i in plan.send_idx],
                      recv_sizes=np.array([g.size for g in plan.recv_gid], dtype=np.int64))
    old_g = np.concatenate(plan.recv_gid) if plan.recv_gid else np.zeros(0, np.int64)
    new_g = np.concatenate(got).astype(np.int64) if got else np.zeros(0, np.int64)
    o = np.argsort(old_g)
    li = dom.local_index
    loc = li >= 0
    adj = np.empty_like(dom.adjncy)
    adj[loc] = new[li[loc]]
    adj[~loc] = new_g[o][np.searchsorted(old_g[o], dom.adjncy[~loc])]
    return replace(dom, gid=new, adjncy=adj)


def _record_phase(comm, sc: Scenario, dom, phase: int, n_cells: int, refining: bool):
    """Rank 0: the phase's per-cell arrays for partitions.npz and, for a refined mesh, its geometry for
    geometry.npz (``coords_XXX``, ...); ({}, {}) elsewhere (collective)."""
    tag = f"{phase:03d}"
    n = n_cells if not refining else comm.allreduce(int(dom.gid.max(initial=-1)), op=_max_op()) + 1
    g = gather_to_root(comm, dom, n, extra=_vtu_fields(sc, dom))
    tm = gather_trimesh(comm, dom) if refining else None
    if comm.Get_rank() != 0:
        return {}, {}
    own, wts, extra = g
    alive = np.flatnonzero(own >= 0) if refining else slice(None)
    parts = {f"owner_{tag}": own[alive].astype(np.int32), f"weight_{tag}": wts[alive],
             **{f"{name}_{tag}": v[alive] for name, v in extra.items()}}
    if not refining:
        return parts, {}
    parts[f"gid_{tag}"] = alive
    return parts, {f"coords_{tag}": tm.centroids, f"points_{tag}": tm.points, f"cell_nodes_{tag}": tm.tris.ravel(),
                   f"cell_ptr_{tag}": np.arange(0, 3 * tm.n_cells + 1, 3, dtype=np.int64)}


def _vtu_fields(sc: Scenario, dom) -> dict[str, np.ndarray] | None:
    """The per-cell fields recorded for ParaView each phase (the solution ``u``), when ``output.vtu``."""
    if not sc.output.vtu:
        return None
    return {name: dom.fields[name] for name in ("u", "level") if name in dom.fields}


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """The scalar and string entries of a Decision's info (what summary.json can hold)."""
    out = {}
    for k, v in (info or {}).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (np.integer, np.floating)):
            out[k] = v.item()
    return out


def _max_op():
    from mpi4py import MPI

    return MPI.MAX


def _gather_model(comm, dom, est) -> Model:
    """The global H = (G, l, c, w), identical on every rank (one allgather of per-rank entries)."""
    me = comm.Get_rank()
    entry = (dom.load, est.capacity, [(me, int(j), float(w)) for j, w in zip(est.neighbours, est.weights) if me < j])
    allent = comm.allgather(entry)
    edges = [(i, j) for _, _, es in allent for i, j, _ in es]
    weights = [w for _, _, es in allent for _, _, w in es]
    return Model.create(len(allent), np.array(edges, dtype=np.int64).reshape(-1, 2), [a[0] for a in allent],
                        [a[1] for a in allent], weights)


def _gather_costs(comm, p: int, est) -> np.ndarray:
    """The p×p link-cost matrix w̃ of the gain function (0 off the subdomain graph)."""
    cost = np.zeros((p, p))
    for i, (nbrs, cs) in enumerate(comm.allgather((est.neighbours.tolist(), est.costs.tolist()))):
        cost[i, nbrs] = cs
    return cost


def _write_outputs(sc: Scenario, summary: dict, csv_rows: list[dict], partitions: dict, mesh,
                   out_dir: str | Path | None, phase_geometry: dict | None = None) -> Path:
    out = Path(out_dir) if out_dir is not None else Path("runs") / f"{sc.name}-{_dt.datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "scenario.yaml", yaml.safe_dump(sc.to_dict(), sort_keys=False))
    write_csv(out / "phases.csv", csv_rows, CSV_COLUMNS)
    if sc.output.partitions or sc.output.pictures or sc.output.vtu:
        geo = {"coords": mesh.coords, "xadj": mesh.xadj, "adjncy": mesh.adjncy}
        if mesh.has_polygons:
            geo.update(points=mesh.points, cell_ptr=mesh.cell_ptr, cell_nodes=mesh.cell_nodes)
        geo.update(phase_geometry or {})
        write_npz(out / "geometry.npz", **geo)
        write_npz(out / "partitions.npz", **partitions)
    write_json(out / "summary.json", dict(summary))
    if sc.output.vtu:
        from hermes.viz.vtu import write_run_vtu

        try:
            write_run_vtu(out)
        except HermesError as err:  # like the pictures: report, keep the results
            log.warning("VTU files not written: %s", err)
    if sc.output.pictures:
        from hermes.viz import plot_run

        try:
            plot_run(out)
        except HermesError as err:  # pictures are a convenience: report, keep the results
            log.warning("pictures not written: %s", err)
    return out
