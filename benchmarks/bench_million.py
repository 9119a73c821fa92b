"""Benchmark: 10⁶ cells on 8 ranks — load → partition → distribute → refine → balance → migrate.

Each step is the data-management code hermes run uses, timed with the wall clock (max over ranks,
after a barrier) and with the peak resident memory of every rank (``ru_maxrss``) after the step.
Rank 0 generates and partitions the whole mesh (as the thesis' HeRMeS does with METIS); after the
distribution no rank holds more than its share plus its ghost layer.

    .venv/bin/python -m benchmarks.bench_million [--cells 1000000] [--ranks 8] [--selection gain|peel|wavefront]

Started without mpiexec, it launches itself under mpiexec with ``--ranks`` processes.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(cells: int, selection: str = "gain") -> None:
    import numpy as np
    from mpi4py import MPI

    from hermes.adaptation import adapt_mesh
    from hermes.balance.flow import topological_order
    from hermes.balance.model import Model
    from hermes.balance.realisation.realise import RealiseOptions, SubdomainFlow, realise_flow
    from hermes.balance.realisation.selection import get_selection
    from hermes.balance.registry import BALANCERS, BalanceContext, check_params
    from hermes.runtime.clock import Links, VirtualClock
    from hermes.runtime.comm import Counters, NeighbourComm
    from hermes.runtime.plain import plain
    from hermes.data.adapt import region_mask
    from hermes.data.cfd_meshes import large
    from hermes.data.partition import metis_partition
    from hermes.data.refine import from_mesh
    from hermes.data.refine_dist import scatter_trimesh
    from hermes.metrics import imbalance
    from hermes.sections import RegionSpec

    comm = plain(MPI.COMM_WORLD)  # the runtime communicator hermes' functions take
    rank, p = comm.Get_rank(), comm.Get_size()
    rows = []

    def step(name, fn):
        comm.Barrier()
        t = time.perf_counter()
        out = fn()
        comm.Barrier()
        dt = comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
        mem = comm.gather(_peak_mb(), root=0)
        rows.append((name, dt, mem))
        return out

    state = {}

    def load():
        if rank == 0:
            state["tm"], _ = from_mesh(large(cells))

    def partition():
        if rank == 0:
            tm = state["tm"]
            xadj, adjncy = tm.graph
            state["owner"] = metis_partition(xadj, adjncy, np.ones(tm.n_cells), p, seed=0)

    def distribute():
        tm = state.pop("tm", None)
        dom = scatter_trimesh(comm, tm, state.pop("owner", None))
        del tm
        return dom

    step("load (generate, rank 0)", load)
    step("partition (METIS, rank 0)", partition)
    dom = step("distribute", distribute)
    n_local = comm.gather(dom.n, root=0)
    ext = np.array(comm.allgather((dom.coords.min(axis=0), dom.coords.max(axis=0))))
    bbox = (ext[:, 0].min(axis=0), ext[:, 1].max(axis=0))
    region = RegionSpec(kind="disc", center=(0.3, 0.3), radius=0.25)
    marked = region_mask(region, dom.coords, dom.gid, 1, 0, bbox)
    dom = step("refine (disc, 1 level)", lambda: adapt_mesh(comm, dom, marked, ~marked, max_level=1)).dom
    cells_after = comm.allreduce(dom.n)
    loads = np.array(comm.allgather(dom.load))
    imb_before = imbalance(loads, np.full(p, 1.0 / p))

    def balance():
        nbrs = dom.neighbour_ranks
        me = rank
        entry = (dom.load, [(me, int(j)) for j in nbrs if me < j])
        allent = comm.allgather(entry)
        edges = np.array([e for _, es in allent for e in es], dtype=np.int64).reshape(-1, 2)
        model = Model.create(p, edges, [a[0] for a in allent], np.full(p, 1.0 / p))
        clock = VirtualClock(rank, p, Links(), 1e6, 1.0 / p)
        nb = NeighbourComm(comm, nbrs, clock, Counters())
        ctx = BalanceContext(comm=comm, clock=clock, nb=nb, model=model, load=dom.load, capacity=1.0 / p,
                             weights=np.ones(len(nbrs)), dom=dom, params=check_params("pcg", {}))
        decision = BALANCERS["pcg"].run(ctx)
        state["model"], state["flow"], state["clock"] = model, decision.flow, clock

    step("balance (PCG flow)", balance)

    def migrate_step():
        model, flow = state["model"], state["flow"]
        cost = np.where(np.abs(model.laplacian.toarray()) > 0, 1.0, 0.0)
        np.fill_diagonal(cost, 0.0)
        levels = topological_order(model, flow, 1e-9 * model.loads.sum())
        new, st, _ = realise_flow(comm, dom, SubdomainFlow(model.edges, flow), cost, state["clock"], levels=levels,
                                  options=RealiseOptions(get_selection(selection)))
        state["moved"] = comm.allreduce(st.cells_sent)
        return new

    dom = step(f"migrate ({selection} selection)", migrate_step)
    loads = np.array(comm.allgather(dom.load))
    imb_after = imbalance(loads, np.full(p, 1.0 / p))
    n_final = comm.gather(dom.n, root=0)
    total = comm.allreduce(dom.n)
    if rank == 0:
        print(f"{cells:,} cells generated, {p} ranks; after refinement {cells_after:,} cells "
              f"(+{cells_after - cells:,}); imbalance {imb_before:.3f} -> {imb_after:.3f}, "
              f"{state['moved']:,} cells migrated; cells conserved by migration: {total == cells_after}")
        print(f"cells per rank after distribution: {min(n_local):,} .. {max(n_local):,}; "
              f"after migration: {min(n_final):,} .. {max(n_final):,}")
        print("| step | wall s (max over ranks) | peak RSS rank 0 MB | peak RSS other ranks MB (min .. max) |")
        print("|---|---|---|---|")
        for name, dt, mem in rows:
            print(f"| {name} | {dt:.2f} | {mem[0]:.0f} | {min(mem[1:]):.0f} .. {max(mem[1:]):.0f} |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--selection", default="gain", help="gain | peel | wavefront")
    args = ap.parse_args()
    from hermes.runtime.launch import mpiexec_command, under_mpi_launcher

    if not under_mpi_launcher():
        cmd = mpiexec_command(args.ranks, [])
        i = cmd.index("-m", cmd.index("mpi4py") + 1)
        cmd = cmd[:i] + [os.path.abspath(__file__), "--cells", str(args.cells), "--selection", args.selection]
        return subprocess.call(cmd)
    run(args.cells, args.selection)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
