"""Distributed practical FOS against its serial reference (run by tests/mpi/test_practical_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/practical_script.py [seed]``

Every rank builds the same seeded models, runs :func:`fos_distributed` with its own load, capacity,
neighbour weights and link α-β on a NeighbourComm with a VirtualClock, and rank 0 compares the gathered
per-edge flows, iterations, stop iteration, counters, detection messages and times with :func:`fos`.
The registry entry ``fos`` is run once through its hermes adapter. Rank 0 prints one ``FAIL ...`` line
per disagreement and ``OK practical P`` if there is none; the exit code is 1 on every rank on failure.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from hermes.balance.model import Model
from hermes.balance.practical import REGISTRY, fos, fos_distributed, graph_center
from hermes.balance.registry import BalanceContext
from hermes.clock import Links, VirtualClock
from hermes.comm import NeighbourComm
from hermes.errors import BalancerError, GraphError


def random_model(p: int, seed: int, integer: bool, homogeneous: bool = False) -> Model:
    """Random tree plus a few extra edges, heterogeneous (or equal) capacities and weights; integer or real loads."""
    rng = np.random.default_rng(seed)
    edges = {(int(rng.integers(0, i)), i) for i in range(1, p)}
    for _ in range(p // 2):
        i, j = sorted(int(v) for v in rng.choice(p, size=2, replace=False))
        edges.add((i, j))
    edges = sorted(edges)
    loads = rng.integers(0, 40, p).astype(float) if integer else rng.uniform(0.0, 10.0, p)
    loads[0] += 60.0
    caps = np.ones(p) if homogeneous else rng.uniform(0.5, 3.0, p)
    return Model.create(p, edges, loads, caps, rng.uniform(0.2, 1.0, len(edges)))


def main(seed: int) -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    failures: list[str] = []
    slow = {"unit_time": 1e-3, "unit_bytes": 1e3}
    cases = [  # name, integer loads ("homo": and equal capacities), parameters
        ("real-B-decrement", False, {"variant": "B", "tolerance": 1e-4, "max_iterations": 3000}),
        ("real-B-halving-slow", False, {"k": 50.0, "k_schedule": "halving", **slow}),
        ("real-A-plain", False, {"variant": "A", "k": None, "detection": False, "max_iterations": 40}),
        ("int-B-shaker", True, {"integer": True, "shaker": True, "k": None, "seed": seed, "kappa": 0.2}),
        ("int-B-gate-shaker", True, {"integer": True, "shaker": True, "k": 20.0, "k_schedule": "constant",
                                     "seed": seed + 1, **slow}),
        ("int-A-short", True, {"variant": "A", "integer": True, "max_iterations": 3}),
        ("homo-int-shaker", "homo", {"integer": True, "shaker": True, "k": None, "seed": seed, "kappa": 0.05}),
        ("homo-int-halving", "homo", {"integer": True, "k": 300.0, "k_schedule": "halving", **slow}),
    ]
    for name, integer, params in cases:
        model = random_model(size, seed, bool(integer), homogeneous=integer == "homo")
        e = model.edges
        links = Links(latency=1e-4, bandwidth=1e8, overrides={(int(e[0, 0]), int(e[0, 1])): (4e-2, 1.25e5)})
        index = {(int(i), int(j)): k for k, (i, j) in enumerate(e.tolist())}
        nbrs = model.neighbours[rank]
        kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)
        lat = np.array([links.params(rank, int(j))[0] for j in nbrs])
        bw = np.array([links.params(rank, int(j))[1] for j in nbrs])
        load, cap = float(model.loads[rank]), float(model.capacities[rank])
        root = graph_center(model)
        clock = VirtualClock(rank, size, links, speed=1e6, capacity=cap)
        nb = NeighbourComm(comm, nbrs, clock)
        res = fos_distributed(nb, load, cap, model.weights[kidx], latency=lat, bandwidth=bw, root=root, **params)
        rows = comm.gather((rank, nbrs, kidx, res.flows, res.iterations, res.converged, res.counters.as_dict(),
                            res.extra), root=0)
        if rank != 0:
            continue
        ref = fos(model, links=links, root=root, **params)
        flow, back = np.full(model.q, np.nan), np.full(model.q, np.nan)
        for r, nbr_r, k_r, flows_r, it_r, conv_r, cnt, extra in rows:
            tail = nbr_r > r
            flow[k_r[tail]] = flows_r[tail]
            back[k_r[~tail]] = flows_r[~tail]
            if (it_r, conv_r, extra["stop"]) != (ref.iterations, ref.converged, ref.extra["stop"]):
                failures.append(f"{name}: rank {r} (iterations, converged, stop) = {(it_r, conv_r, extra['stop'])}, "
                                f"serial {(ref.iterations, ref.converged, ref.extra['stop'])}")
            for key in ("iterations", "exchange_rounds", "collectives"):
                if cnt[key] != getattr(ref.counters, key):
                    failures.append(f"{name}: rank {r} {key}={cnt[key]}, serial {getattr(ref.counters, key)}")
            t_ref = float(ref.extra["rank_times"][r])
            if not abs(cnt["time"] - t_ref) <= 1e-9 * max(abs(t_ref), 1e-300):
                failures.append(f"{name}: rank {r} time {cnt['time']!r}, serial {t_ref!r}")
            if extra["load"] != ref.extra["loads"][r] or extra["k"] != ref.extra["k"]:
                failures.append(f"{name}: rank {r} final load/k {extra['load']}/{extra['k']}, serial "
                                f"{ref.extra['loads'][r]}/{ref.extra['k']}")
        for key in ("messages", "bytes"):
            tot = sum(row[6][key] for row in rows)
            if tot != getattr(ref.counters, key):
                failures.append(f"{name}: Σ {key} = {tot}, serial {getattr(ref.counters, key)}")
        det = sum(row[7]["detection_messages"] for row in rows)
        if det != ref.extra["detection_messages"]:
            failures.append(f"{name}: Σ detection messages = {det}, serial {ref.extra['detection_messages']}")
        if not (np.all(np.isfinite(flow)) and np.array_equal(flow, -back)):
            failures.append(f"{name}: edge endpoints disagree or miss a flow")
        elif not np.array_equal(flow, ref.flow):
            failures.append(f"{name}: flow differs from serial by {np.max(np.abs(flow - ref.flow)):.3e}")
        if ref.extra["transfers"] == 0:
            failures.append(f"{name}: no transfer at all, the case tests nothing")

    # the registry entry through its hermes adapter (twice: the second call reuses the kept tree)
    info = REGISTRY["fos"]
    params = {**info.defaults, "k_schedule": "halving", "tolerance": 1e-3}
    model = random_model(size, seed + 7, False)
    links = Links(latency=2e-4, bandwidth=5e7)
    nbrs = model.neighbours[rank]
    index = {(int(i), int(j)): k for k, (i, j) in enumerate(model.edges.tolist())}
    kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)
    state: dict = {}
    for call, build in ((1, True), (2, False)):
        clock = VirtualClock(rank, size, links, speed=1e6, capacity=float(model.capacities[rank]))
        ctx = BalanceContext(comm=comm, clock=clock, nb=NeighbourComm(comm, nbrs, clock), model=model,
                             load=float(model.loads[rank]), capacity=float(model.capacities[rank]),
                             weights=model.weights[kidx], dom=None, params=params, state=state)
        decision = info.run(ctx)
        cnt = comm.gather(decision.counters.as_dict(), root=0)
        if rank == 0:
            ref = info.serial(model, links=links, **params) if build else \
                fos(model, links=links, root=graph_center(model), build_tree=False, **params)
            if not np.array_equal(decision.flow, ref.flow) or decision.iterations != ref.iterations:
                failures.append(f"registry fos call {call}: adapter and serial reference disagree")
            if sum(c["messages"] for c in cnt) != ref.counters.messages or \
                    cnt[0]["collectives"] != ref.counters.collectives:
                failures.append(f"registry fos call {call}: counters {cnt[0]} differ from serial {ref.counters}")
            if not ref.converged:
                failures.append(f"registry fos call {call}: detection did not stop the run")

    # collective-safe errors: a bad capacity on one rank, shaker without integer loads on all
    model = random_model(size, seed, False)
    nbrs = model.neighbours[rank]
    for name, expected, kwargs in [
        ("zero capacity", GraphError, {"capacity": 0.0 if rank == size - 1 else 0.3}),
        ("shaker without integer", BalancerError, {"capacity": 0.3, "shaker": True}),
    ]:
        clock = VirtualClock(rank, size, Links(), speed=1e6, capacity=1.0)
        try:
            fos_distributed(NeighbourComm(comm, nbrs, clock), 1.0, weights=np.ones(len(nbrs)), **kwargs)
            got = None
        except (GraphError, BalancerError) as err:
            got = (type(err).__name__, str(err))
        every = comm.gather(got, root=0)
        if rank == 0 and ({g[0] if g else None for g in every} != {expected.__name__}
                          or len({g[1] if g else None for g in every}) != 1):
            failures.append(f"{name}: ranks raised {sorted(map(str, every))}")

    nfail = comm.bcast(len(failures) if rank == 0 else None, root=0)
    if rank == 0:
        for line in failures:
            print("FAIL " + line, flush=True)
        if not failures:
            print(f"OK practical {size}", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
