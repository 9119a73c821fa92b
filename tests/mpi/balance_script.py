"""Distributed GDA and PCG against their serial references (run by tests/mpi/test_balance_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/balance_script.py [seed]``

Every rank builds the same random model with P processors, runs the distributed form with its own
load, capacity and neighbour weights on a NeighbourComm with a VirtualClock, and rank 0 compares the
gathered per-edge flows, iteration counts and counters with the serial form. Rank 0 prints one
``FAIL ...`` line per disagreement and ``OK balance P`` if there is none; the exit code is 1 on
every rank if anything failed.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from hermes.balance.diffusion import epsilon0, gda, gda_distributed
from hermes.balance.flow import flow_error
from hermes.balance.model import Model
from hermes.balance.potential import pcg, pcg_distributed
from hermes.clock import Links, VirtualClock
from hermes.comm import NeighbourComm
from hermes.errors import BalancerError, GraphError


def random_model(p: int, seed: int) -> Model:
    """Random tree plus a few extra edges, heterogeneous loads, capacities and weights."""
    rng = np.random.default_rng(seed)
    edges = {(int(rng.integers(0, i)), i) for i in range(1, p)}
    for _ in range(p // 2):
        i, j = sorted(int(v) for v in rng.choice(p, size=2, replace=False))
        edges.add((i, j))
    edges = sorted(edges)
    return Model.create(p, edges, rng.uniform(0.0, 10.0, p), rng.uniform(0.5, 3.0, p),
                        rng.uniform(0.2, 1.0, len(edges)))


def main(seed: int) -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    model = random_model(size, seed)
    e = model.edges
    # heterogeneous links: the first edge is slow
    links = Links(latency=1e-4, bandwidth=1e8, overrides={(int(e[0, 0]), int(e[0, 1])): (7e-4, 2e7)})
    index = {(int(i), int(j)): k for k, (i, j) in enumerate(e.tolist())}
    nbrs = model.neighbours[rank]
    kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)
    weights = model.weights[kidx]
    load, cap = float(model.loads[rank]), float(model.capacities[rank])

    def fresh() -> NeighbourComm:
        clock = VirtualClock(rank, size, links, speed=1e6, capacity=cap)
        return NeighbourComm(comm, nbrs, clock)

    eps0 = comm.bcast(epsilon0(model) if rank == 0 else None, root=0)  # networkx imported on rank 0 only
    cases = [
        ("gda0", lambda nb: gda_distributed(nb, load, cap, weights, eps0, tol=1e-6, max_iter=20000, check_every=1),
         lambda: gda(model, eps0, tol=1e-6, max_iter=20000, check_every=1, links=links)),
        ("gda1", lambda nb: gda_distributed(nb, load, cap, weights, 1.0, tol=1e-6, max_iter=50, check_every=3),
         lambda: gda(model, 1.0, tol=1e-6, max_iter=50, check_every=3, links=links)),
        ("gda1-check4", lambda nb: gda_distributed(nb, load, cap, weights, 1.0, tol=1e-3, check_every=4),
         lambda: gda(model, 1.0, tol=1e-3, check_every=4, links=links)),
        ("pcg", lambda nb: pcg_distributed(nb, load, cap, weights, tol=1e-10),
         lambda: pcg(model, tol=1e-10, links=links)),
    ]
    failures: list[str] = []
    for name, run_dist, run_serial in cases:
        nb = fresh()
        res = run_dist(nb)
        rows = comm.gather((rank, nbrs, kidx, res.flows, res.iterations, res.converged, res.counters.as_dict()),
                           root=0)
        if rank != 0:
            continue
        ref = run_serial()
        flow = np.full(model.q, np.nan)
        back = np.full(model.q, np.nan)
        for r, nbr_r, k_r, flows_r, it_r, conv_r, cnt in rows:
            tail = nbr_r > r  # this rank is edges[k, 0]
            flow[k_r[tail]] = flows_r[tail]
            back[k_r[~tail]] = flows_r[~tail]
            if it_r != ref.iterations:
                failures.append(f"{name}: rank {r} did {it_r} iterations, serial {ref.iterations}")
            if conv_r != ref.converged:
                failures.append(f"{name}: rank {r} converged={conv_r}, serial {ref.converged}")
            for key in ("iterations", "exchange_rounds", "collectives"):
                if cnt[key] != getattr(ref.counters, key):
                    failures.append(f"{name}: rank {r} {key}={cnt[key]}, serial {getattr(ref.counters, key)}")
            t_ref = float(ref.extra["rank_times"][r])
            if not abs(cnt["time"] - t_ref) <= 1e-9 * max(abs(t_ref), 1e-300):
                failures.append(f"{name}: rank {r} time {cnt['time']!r}, serial {t_ref!r}")
        for key in ("messages", "bytes"):
            tot = sum(row[6][key] for row in rows)
            if tot != getattr(ref.counters, key):
                failures.append(f"{name}: Σ {key} = {tot}, serial {getattr(ref.counters, key)}")
        if not np.all(np.isfinite(flow)) or not np.all(np.isfinite(back)):
            failures.append(f"{name}: some edge has no flow reported")
        elif not np.array_equal(flow, -back):
            failures.append(f"{name}: endpoints disagree, max |f_ij + f_ji| = {np.max(np.abs(flow + back))}")
        scale = max(float(np.linalg.norm(ref.flow)), 1e-300)
        err = float(np.linalg.norm(flow - ref.flow)) / scale
        if not err <= 1e-9:
            failures.append(f"{name}: distributed flow differs from serial by {err:.3e} (relative)")
        if name == "pcg" and not flow_error(model, flow) <= 1e-8:
            failures.append(f"pcg: flow differs from the minimal flow by {flow_error(model, flow):.3e}")
        if name == "gda1" and ref.converged:
            failures.append("gda1: expected to stop at max_iter=50 without converging")
        if ref.iterations == 0 and name != "gda1":
            failures.append(f"{name}: no iterations, the test model is already balanced")

    # collective-safe errors: one rank with a bad capacity, every rank with a negative ε
    for name, expected, call in [
        ("zero capacity", GraphError,
         lambda nb: pcg_distributed(nb, load, 0.0 if rank == size - 1 else cap, weights)),
        ("negative eps", BalancerError, lambda nb: gda_distributed(nb, load, cap, weights, -0.5)),
    ]:
        try:
            call(fresh())
            got = None
        except (GraphError, BalancerError) as err:
            got = (type(err).__name__, str(err))
        every = comm.gather(got, root=0)
        if rank == 0:
            kinds = {g[0] if g else None for g in every}
            msgs = {g[1] if g else None for g in every}
            if kinds != {expected.__name__} or len(msgs) != 1:
                failures.append(f"{name}: ranks raised {sorted(map(str, every))}")

    nfail = comm.bcast(len(failures) if rank == 0 else None, root=0)
    if rank == 0:
        for line in failures:
            print("FAIL " + line, flush=True)
        if not failures:
            print(f"OK balance {size}", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
