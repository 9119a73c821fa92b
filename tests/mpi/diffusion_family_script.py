"""Every diffusion-family registry entry, distributed under mpiexec, against its serial reference.

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/diffusion_family_script.py [seed]``
(run by tests/mpi/test_diffusion_family_mpi.py).

Every rank builds the same models with P processors (a random heterogeneous graph and a homogeneous
star, on which M⁶ is negative), calls the entry's ``run`` through a real :class:`BalanceContext`
(the adapter computes ε₀, α, ω on every rank) and rank 0 compares the assembled flow (bit for bit),
the iteration count, ``converged``, every rank's counters and α-β time with ``serial``. Then the
distributed forms must raise the same error on every rank for bad parameters. Rank 0 prints one
``FAIL ...`` line per disagreement and ``OK diffusion-family P`` if there is none.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from hermes.balance.diffusion import gda_distributed
from hermes.balance.diffusion_family import REGISTRY
from hermes.balance.implicit import implicit_distributed
from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext
from hermes.balance.second_order import sos_distributed
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


def star_model(p: int) -> Model:
    return Model.create(p, [(0, i) for i in range(1, p)], np.arange(p, dtype=float) + 1.0, np.ones(p))


VARIANTS = [
    {"tolerance": 1e-6},
    {"tolerance": 1e-4, "lazy": True, "check_every": 3},
    {"tolerance": 1e-9, "max_iterations": 7, "check_every": 3},  # stops at max_iterations
]
EXTRA = {"sos": [{"tolerance": 1e-6, "omega": 1.3}],
         "implicit": [{"tolerance": 1e-6, "alpha": 4.0, "inner_tolerance": 0.1, "eps": 1.0}],
         "implicit_watts": [{"tolerance": 1e-6, "alpha": 0.5}, {"tolerance": 1e-6, "sweeps": 2}]}


def run_case(comm, model, links, name, params, failures):
    rank, size = comm.Get_rank(), comm.Get_size()
    info = REGISTRY[name]
    merged = {**info.defaults, **params}
    info.check(merged)
    e = model.edges
    index = {(int(i), int(j)): k for k, (i, j) in enumerate(e.tolist())}
    nbrs = model.neighbours[rank]
    kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)
    cap = float(model.capacities[rank])
    clock = VirtualClock(rank, size, links, speed=1e6, capacity=cap)
    nb = NeighbourComm(comm, nbrs, clock)
    ctx = BalanceContext(comm=comm, clock=clock, nb=nb, model=model, load=float(model.loads[rank]), capacity=cap,
                         weights=model.weights[kidx], dom=None, params=merged)
    dec = info.run(ctx)
    rows = comm.gather((rank, dec.iterations, dec.converged, dec.counters.as_dict(), dec.info), root=0)
    if rank != 0:
        return
    tag = f"{name} {params}"
    ref = info.serial(model, **merged, links=links)
    if not np.array_equal(dec.flow, ref.flow):
        err = np.linalg.norm(dec.flow - ref.flow) / max(np.linalg.norm(ref.flow), 1e-300)
        failures.append(f"{tag}: distributed flow differs from serial (relative {err:.3e})")
    for r, it, conv, cnt, dinfo in rows:
        if it != ref.iterations or conv != ref.converged:
            failures.append(f"{tag}: rank {r} iterations/converged {it}/{conv}, "
                            f"serial {ref.iterations}/{ref.converged}")
        for key in ("iterations", "exchange_rounds", "collectives"):
            if cnt[key] != getattr(ref.counters, key):
                failures.append(f"{tag}: rank {r} {key}={cnt[key]}, serial {getattr(ref.counters, key)}")
        t_ref = float(ref.extra["rank_times"][r])
        if not abs(cnt["time"] - t_ref) <= 1e-9 * max(abs(t_ref), 1e-300):
            failures.append(f"{tag}: rank {r} time {cnt['time']!r}, serial {t_ref!r}")
        if name == "gda6" and dinfo.get("nonnegative") != ref.extra["nonnegative"]:
            failures.append(f"{tag}: rank {r} nonnegative={dinfo.get('nonnegative')}, "
                            f"serial {ref.extra['nonnegative']}")
    for key in ("messages", "bytes"):
        tot = sum(row[3][key] for row in rows)
        if tot != getattr(ref.counters, key):
            failures.append(f"{tag}: Σ {key} = {tot}, serial {getattr(ref.counters, key)}")
    if params.get("max_iterations") == 7 and size >= 4 and (ref.converged or ref.iterations != 7):
        failures.append(f"{tag}: expected to stop unconverged at 7 iterations, got {ref.iterations}")
    if ref.iterations == 0:
        failures.append(f"{tag}: no iterations, the test model is already balanced")
    return ref


def error_cases(comm, model, failures):
    rank, size = comm.Get_rank(), comm.Get_size()
    index = {(int(i), int(j)): k for k, (i, j) in enumerate(model.edges.tolist())}
    nbrs = model.neighbours[rank]
    w = model.weights[[index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()]]
    load, cap = float(model.loads[rank]), float(model.capacities[rank])
    last = rank == size - 1

    def fresh():
        return NeighbourComm(comm, nbrs, VirtualClock(rank, size, Links(), speed=1e6, capacity=cap))

    for name, expected, call in [
        ("omega 2.5", BalancerError, lambda nb: sos_distributed(nb, load, cap, w, 0.1, 2.5)),
        ("omega on one rank", BalancerError, lambda nb: sos_distributed(nb, load, cap, w, 0.1, 0.0 if last else 1.5)),
        ("M6 without alpha", BalancerError, lambda nb: gda_distributed(nb, load, cap, w, 0.0, kind=6)),
        ("kind 7", BalancerError, lambda nb: gda_distributed(nb, load, cap, w, 0.0, kind=7)),
        ("inner tolerance on one rank", BalancerError,
         lambda nb: implicit_distributed(nb, load, cap, w, 0.1, inner_tol=1.5 if last else 0.1)),
        ("zero capacity", GraphError, lambda nb: sos_distributed(nb, load, 0.0 if last else cap, w, 0.1, 1.5)),
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


def main(seed: int) -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    model = random_model(size, seed)
    e = model.edges
    links = Links(latency=1e-4, bandwidth=1e8, overrides={(int(e[0, 0]), int(e[0, 1])): (7e-4, 2e7)})
    failures: list[str] = []
    for name in REGISTRY:
        for params in VARIANTS + EXTRA.get(name, []):
            run_case(comm, model, links, name, params, failures)
    star = star_model(size)
    ref = run_case(comm, star, Links(), "gda6", {"tolerance": 1e-6}, failures)
    if rank == 0 and size >= 4 and ref.extra["nonnegative"]:
        failures.append("gda6 on the star: M⁶ should have a negative diagonal (thesis §5.6)")
    error_cases(comm, model, failures)
    nfail = comm.bcast(len(failures) if rank == 0 else None, root=0)
    if rank == 0:
        for line in failures:
            print("FAIL " + line, flush=True)
        if not failures:
            print(f"OK diffusion-family {size}", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
