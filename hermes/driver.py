"""The driver: runs an experiment's adaptation phases under MPI (HeRMeS, thesis Fig. 10.1–10.2).

Set-up (rank 0 reads and partitions the mesh with METIS, target fractions = the capacities; every
rank receives its cells), then for each phase k = 1..n:

1. **extra load** — the capacity schedule sets the processors' capacities for phase k;
2. **adapt** — ``adaptation.kind: weights``: the region's cell weights are multiplied by the factor;
   ``refine``: the mesh changes (below);
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
    fields. Each phase first merges the sibling pairs the region has left (``coarsen``, one pass of
    :func:`~hermes.data.refine_dist.coarsen_domain`), then bisects the region's cells below
    ``max_level`` (:func:`~hermes.data.refine_dist.refine_domain`) — the two steps of
    :func:`~hermes.data.refine_dist.adapt_domain`, called apart so each is accounted: the
    bisections and merges and the weight they add (a copy of the parent's weight per bisection) or
    remove (a merged parent gets its children's mean) are read back from the cells' lineage and
    checked against the total weight and cell count (collectively; a mismatch raises). The region
    is evaluated on the cell centroids, and a ``fraction`` thins it by a hash of the centroid (not
    of the id, which depends on the distribution), so a serial replay marks the same cells. Ids
    grow with gaps; balancers get a view numbered ``0..N−1`` contiguously by rank (ParMETIS'
    ``vtxdist`` order) when there are gaps. With ``kernel: jacobi`` rank 0 replays the run serially
    on the whole mesh (same marking, the serial refinement, the coarsening the ranks actually did —
    a rank merges only families it holds whole and never removes a vertex on a rank boundary, so
    the replay removes exactly the vertices the ranks removed — the same ``u``/``f`` transfer and
    the same sweeps) and compares the solutions cell by cell, matched by their vertices.
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
from hermes.app.kernels import initial_fields, jacobi_serial, jacobi_sweeps
from hermes.app.simulate import solve_phase
from hermes.balance.flow import topological_order
from hermes.balance.model import Model, imbalance
from hermes.balance.registry import BalanceContext, check_params, get_balancer
from hermes.balance.selection import get_selection
from hermes.clock import Links, make_clock
from hermes.comm import Counters, NeighbourComm, agree, allreduce
from hermes.data.adapt import adapt_weights, region_mask
from hermes.data.distributed import gather_to_root, halo_plan, scatter_domain
from hermes.data.migrate import MigrationStats, migrate, realise_flow
from hermes.data.refine import Adaptation, TriMesh, from_mesh, merge_pairs, refine
from hermes.data.refine_dist import coarsen_domain, gather_trimesh, refine_domain, scatter_trimesh
from hermes.errors import HermesError, MeshError, ScenarioError
from hermes.extraload import CapacitySchedule
from hermes.metrics import cell_bytes, partition_quality_local
from hermes.monitor import monitor
from hermes.results import write_atomic, write_csv, write_json, write_npz
from hermes.scenario import Scenario

__all__ = ["run", "load_mesh", "RunResult"]

log = logging.getLogger(__name__)

PHASE_KEYS = ("phase", "time", "compute_time", "comm_time", "sync_time", "balance_time", "migrate_time",
              "imbalance_before", "imbalance_after", "migrated_cells", "migrated_weight", "edge_cut",
              "balance_iterations")
CSV_COLUMNS = ["phase", "rank", "cells", "load", "capacity", "fair_load", "capacity_estimate", "compute_time",
               "comm_time", "sync_time", "balance_time", "migrate_time", "cells_sent", "cells_received",
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
    params = check_params(bal.name, sc.balancer.params)
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
    removed: list[np.ndarray] = []  # refined jacobi runs: the vertices coarsening removed, per phase (rank 0)
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
    adapted = {"refined": 0, "coarsened": 0, "weight": 0.0}  # bisections, merges and weight they added (all ranks)
    adapt_walls: list[float] = []  # wall time of each phase's adaptation (max over ranks): not in the phases,
    # which stay deterministic under the virtual clock
    probe_work = pl.speed * 1e-3
    balancer_state: dict[str, Any] = {}  # the balancer's own per-rank memory across phases

    for k in range(1, ad.phases + 1):
        caps = sched.at(k)
        clock.set_capacity(caps[rank])
        t_start = clock.elapsed()
        snap = clock.snapshot()

        # adapt
        t_adapt = time.perf_counter()
        if refining:
            dom, change, gone_xy = _refine_phase(comm, sc, dom, k, bbox)
            if app.kernel == "jacobi":
                parts = comm.gather(gone_xy, root=0)
                if rank == 0:
                    removed.append(np.concatenate(parts))
        else:
            mask = region_mask(ad.region, dom.coords, dom.gid, k, sc.seed, bbox)
            dom = replace(dom, weight=adapt_weights(dom.weight, mask, ad.factor))
            change = {"refined": 0, "coarsened": 0}
        for key in ("refined", "coarsened"):
            adapted[key] += change[key]
        adapted["weight"] += change.get("weight_refined", 0.0) + change.get("weight_coarsened", 0.0)
        adapt_walls.append(comm.allreduce(time.perf_counter() - t_adapt, op=_max_op()))
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
               **{f"{c}_time": delta[c] for c in ("compute", "comm", "sync", "balance", "migrate")},
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
            mean = {c: float(np.mean([r[f"{c}_time"] for r in rows])) for c in ("compute", "comm", "sync",
                                                                              "balance", "migrate")}
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
        u_err = _jacobi_check_refined(comm, sc, dom, tm0, bbox, removed)
    elif app.kernel == "jacobi":
        g = gather_to_root(comm, dom, n_cells, extra={"u": dom.fields["u"]})
        if rank == 0:
            ref = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, ad.phases * app.iterations)
            u_err = float(np.max(np.abs(g[2]["u"] - ref)) / max(np.max(np.abs(ref)), 1e-300))
    # every cell and, for refinement, every unit of weight accounted for (same verdict on every rank)
    refined, coarsened = adapted["refined"], adapted["coarsened"]
    if cells_final != cells_initial + refined - coarsened:
        raise RuntimeError(f"cells not accounted for: {cells_initial} + {refined} bisections - {coarsened} merges "
                           f"!= {cells_final}")
    if refining and abs(weight_final - weight_initial - adapted["weight"]) > 1e-10 * (weight_initial + weight_final):
        raise RuntimeError(f"weight not accounted for: {weight_initial!r} + {adapted['weight']!r} from adaptation "
                           f"!= {weight_final!r}")
    if rank != 0:
        return None

    summary = RunResult({
        "scenario": sc.name, "processors": p, "balancer": bal.name, "balancer_params": params,
        "clock": sc.clock, "seed": sc.seed, "versions": _versions(), "mesh": mesh_name,
        "kernel": app.kernel, "total_time": total_time, "final_imbalance": final_imb,
        "adaptation": ad.kind, "cells_initial": cells_initial, "cells_final": cells_final,
        "cells_refined": refined, "cells_coarsened": coarsened, "weight_initial": weight_initial,
        "weight_final": weight_final, "migrated_cells": total_moves, "jacobi_max_rel_error": u_err,
        "wall_seconds": time.perf_counter() - wall_start, "adapt_wall_seconds": adapt_walls, "phases": phases,
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
        elif decision.flow is not None and np.any(decision.flow != 0):
            cost = _gather_costs(comm, p, est)
            levels = topological_order(model, decision.flow, 1e-12 * max(model.loads.sum(), 1.0))
            dom, stats, realised = realise_flow(comm, dom, model.edges, decision.flow, cost, clock, levels=levels,
                                                select=select)
            if rank == 0 and log.isEnabledFor(logging.DEBUG):
                for e, f, r in zip(model.edges.tolist(), decision.flow, realised):
                    if abs(f) > 1e-9 or r:
                        log.debug("phase %d edge %s flow %.3f realised %.3f", phase, e, f, r)
    return dom, stats, decision.iterations, decision.info


def _position_key(coords: np.ndarray) -> np.ndarray:
    """A uint64 per cell from the bits of its centroid: the same on every rank and in a serial replay."""
    b = np.ascontiguousarray(coords[:, :2], dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        return b[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ b[:, 1]


def _marker(sc: Scenario, coords: np.ndarray, phase: int, bbox) -> np.ndarray:
    """The refinement region at ``phase`` on cell centroids (thinned by a position hash, not by id)."""
    return region_mask(sc.adaptation.region, coords, _position_key(coords), phase, sc.seed, bbox)


def _refine_phase(comm, sc: Scenario, dom, phase: int, bbox):
    """Coarsen where the region has left, refine where it is (collective); check the accounting.

    Returns the new domain, the phase's changes (``refined`` bisections, ``coarsened`` merges, and the
    weight each added) and the coordinates of the vertices this rank's coarsening removed.
    """
    ad = sc.adaptation
    start, bad = dom, False
    merges, w_c, gone_xy = 0, 0.0, np.zeros((0, 2))
    if ad.coarsen:
        dom, cs = coarsen_domain(comm, dom, ~_marker(sc, dom.coords, phase, bbox), passes=1)
        merges, w_c, ok = _coarsen_change(start, dom)
        bad = not ok or merges != cs.merges
        if sc.application.kernel == "jacobi":
            gone_xy = _removed_vertices(start, dom)
    mid = dom
    want = _marker(sc, dom.coords, phase, bbox) & (dom.fields["level"] < ad.max_level)
    dom, rs = refine_domain(comm, dom, want, edges=ad.edges)
    bis, w_r, ok = _refine_change(mid, dom)
    bad = bad or not ok or bis != rs.bisections
    rows = np.array(comm.allgather((merges, bis, w_c, w_r, start.load, dom.load, float(bad))))
    m, b, wc, wr, w0, w1, nbad = rows.sum(axis=0)  # same order on every rank: the same verdict
    if nbad or abs(w1 - (w0 + wc + wr)) > 1e-10 * (w0 + abs(wc) + abs(wr)):
        raise RuntimeError(f"phase {phase}: refinement accounting broken ({int(b)} bisections adding {wr:.17g}, "
                           f"{int(m)} merges adding {wc:.17g}, weight {w0:.17g} -> {w1:.17g}, {int(nbad)} ranks "
                           f"with inconsistent cells)")
    change = {"refined": int(b), "coarsened": int(m), "weight_refined": float(wr), "weight_coarsened": float(wc)}
    return dom, change, gone_xy


def _refine_change(before, after) -> tuple[int, float, bool]:
    """Bisections and added weight read from the cells: an old cell that vanished left ``d ≥ 2`` new
    cells (its deepest old ancestor in their lineage), i.e. ``d − 1`` bisections each adding a copy
    of its weight. Also whether the cells are consistent with that."""
    gone = ~np.isin(before.gid, after.gid)
    fresh = ~np.isin(after.gid, before.gid)
    if not fresh.any():
        return 0, 0.0, not gone.any()
    lin = after.fields["lineage"][fresh]
    hit = np.isin(lin, before.gid[gone])
    anc = lin[np.arange(lin.shape[0]), np.argmax(hit, axis=1)]
    d = np.bincount(np.searchsorted(before.gid, anc), minlength=before.n)
    g = np.flatnonzero(gone)
    ok = bool(np.all(hit.sum(axis=1) == 1) and np.all(d[g] >= 2) and d.sum() == d[g].sum())
    return int((d[g] - 1).sum()), float(np.sum((d[g] - 1) * before.weight[g])), ok


def _coarsen_change(before, after) -> tuple[int, float, bool]:
    """Merges and added (negative) weight read from the cells: every new cell is a parent whose two
    vanished children name it in their lineage; it weighs their mean."""
    gone = np.flatnonzero(~np.isin(before.gid, after.gid))
    fresh = np.flatnonzero(~np.isin(after.gid, before.gid))
    if gone.size == 0:
        return 0, 0.0, fresh.size == 0
    lv = before.fields["level"][gone]
    par = before.fields["lineage"][gone, np.maximum(lv - 1, 0)]
    pos = np.minimum(np.searchsorted(after.gid, par), after.n - 1)
    cnt = np.bincount(pos, minlength=after.n)
    sums = np.bincount(pos, weights=before.weight[gone], minlength=after.n)
    ok = bool(np.all(lv > 0) and np.all(after.gid[pos] == par) and np.all(cnt[fresh] == 2)
              and cnt.sum() == cnt[fresh].sum())
    return int(fresh.size), float(np.sum(sums[fresh] / 2.0 - sums[fresh])), ok


def _removed_vertices(before, after) -> np.ndarray:
    """Coordinates of the vertices this rank's cells used before and not after (coarsening removed them)."""
    vid, first = np.unique(before.fields["nodes"].ravel(), return_index=True)
    gone = ~np.isin(vid, after.fields["nodes"].ravel())
    return before.fields["xy"].reshape(-1, 2)[first[gone]]


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


def _cell_rows(tm: TriMesh) -> tuple[np.ndarray, np.ndarray]:
    """Each cell as a row (its vertices' coordinates in NVB order, its level) and the order sorting the
    rows: two meshes with the same cells give the same sorted rows whatever their ids."""
    r = np.column_stack([tm.points[tm.tris].reshape(-1, 6), tm.level])
    return np.lexsort(r.T[::-1]), r


def _coarsen_as(tm: TriMesh, mask: np.ndarray, removed_xy: np.ndarray) -> Adaptation:
    """The serial coarsening pass removing only the vertices at ``removed_xy`` (what the ranks did)."""
    xy = tm.points[:, 0] + 1j * tm.points[:, 1]
    frozen = np.flatnonzero(~np.isin(xy, removed_xy[:, 0] + 1j * removed_xy[:, 1]))
    tris, gid, level, lineage, transfer, merged, _ = merge_pairs(tm.tris, tm.gid, tm.level, tm.lineage, mask,
                                                                 frozen)
    used = np.zeros(tm.points.shape[0], dtype=bool)
    used[tris.ravel()] = True
    return Adaptation(TriMesh(tm.points[used], (np.cumsum(used) - 1)[tris], gid, level, lineage), transfer,
                      merged, 1)


def _replay_refined(sc: Scenario, tm: TriMesh, bbox, removed: list[np.ndarray]) -> tuple[TriMesh, np.ndarray]:
    """Rank 0: the serial reference of a refined jacobi run (module docstring)."""
    ad = sc.adaptation
    fields = initial_fields(tm.centroids)
    u, f = fields["u"], fields["f"]
    for k in range(1, ad.phases + 1):
        if ad.coarsen:
            a = _coarsen_as(tm, ~_marker(sc, tm.centroids, k, bbox), removed[k - 1])
            tm, u, f = a.mesh, a.apply(u), a.apply(f)
        a = refine(tm, _marker(sc, tm.centroids, k, bbox) & (tm.level < ad.max_level), edges=ad.edges)
        tm, u, f = a.mesh, a.apply(u), a.apply(f)
        u = jacobi_sweeps(*tm.graph, f, u, sc.application.iterations)
    return tm, u


def _jacobi_check_refined(comm, sc: Scenario, dom, tm0: TriMesh | None, bbox, removed) -> float | None:
    """max |u − u_serial| / max |u_serial| over the cells (matched by their vertices), on rank 0 (collective)."""
    g = gather_trimesh(comm, dom)
    us = comm.gather((dom.gid, dom.fields["u"]), root=0)
    err, u_err = None, None
    if comm.Get_rank() == 0:
        gid = np.concatenate([a for a, _ in us])
        u = np.concatenate([b for _, b in us])[np.argsort(gid, kind="stable")]
        ref, ref_u = _replay_refined(sc, tm0, bbox, removed)
        (oa, ra), (ob, rb) = _cell_rows(g), _cell_rows(ref)
        if ra.shape != rb.shape or not np.array_equal(ra[oa], rb[ob]):
            err = (f"the serial replay's mesh ({ref.n_cells} cells) differs from the distributed one "
                   f"({g.n_cells} cells)")
        else:
            u_err = float(np.max(np.abs(u[oa] - ref_u[ob])) / max(np.max(np.abs(ref_u)), 1e-300))
    err = comm.bcast(err, root=0)
    if err:
        raise RuntimeError(err)
    return u_err


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
