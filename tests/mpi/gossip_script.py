"""Distributed Grapevine against its serial reference (run by tests/mpi/test_gossip_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/gossip_script.py [seed]``

Every rank builds the same random objects (loads, initial ranks, speeds), runs
:func:`grapevine_distributed` on its own objects (in a shuffled order) and rank 0 compares the
gathered final assignment, the history and the counters with :func:`grapevine`; then the hermes-run
adapter (registry entry ``grapevine``) on a stub context, and collective errors. Rank 0 prints one
``FAIL ...`` line per disagreement and ``OK gossip P`` if there is none; exit code 1 on every rank
if anything failed.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.gossip.grapevine import RankObjects, grapevine_distributed
from hermes.balance.gossip.grapevine_serial import GrapevineParams, grapevine
from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext, check_params, get_balancer
from hermes.runtime.clock import Links, VirtualClock, WallClock
from hermes.runtime.comm import NeighbourComm
from hermes.errors import BalancerError


def assignment(rows, n: int) -> np.ndarray:
    """The final rank of each of the n objects from every rank's (ids, dest, ...) row."""
    final = np.full(n, -1)
    for ids, dest, *_ in rows:
        final[ids] = dest
    return final


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    me, p = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(seed)
    failures: list[str] = []
    links = Links(latency=1e-4, bandwidth=1e8, overrides={(0, 1): (7e-4, 2e7)})

    def clock(kind: str = "virtual"):
        return (VirtualClock if kind == "virtual" else WallClock)(me, p, links, 1e6, 1.0 / p)

    cases = [
        ("lognormal-6", rng.lognormal(0, 1, 400), rng.integers(0, 2, 400), rng.uniform(0.5, 2, p), "original",
         dict(iterations=6, rounds=3, fanout=2), "virtual"),
        ("lognormal-6'", rng.lognormal(0, 1, 400), rng.integers(0, 2, 400), rng.uniform(0.5, 2, p), "modified",
         dict(iterations=6, rounds=3, fanout=2), "virtual"),
        ("iso-6'", np.ones(103), rng.integers(0, 1, 103), np.ones(p), "modified",
         dict(iterations=8, rounds=2, fanout=5, threshold=1.0), "wall"),
        ("uniform-T1.2", rng.uniform(0.1, 1.0, 250), rng.integers(0, p // 2, 250), None, "modified",
         dict(iterations=10, rounds=1, fanout=1, threshold=1.2), "virtual"),
        ("uniform-6'-current", rng.uniform(1e-5, 0.1, 300), rng.integers(0, 2, 300), None, "modified",
         dict(iterations=5, rounds=2, fanout=2, source_load="current"), "virtual"),
    ]
    for name, loads, owner, speeds, crit, kw, kind in cases:
        prm = GrapevineParams.of(kw, criterion=crit)
        ref = grapevine(loads, owner, p, prm, seed=[seed, 1], speeds=speeds) if me == 0 else None
        mine = np.flatnonzero(owner == me)
        mine = mine[np.random.default_rng(me).permutation(mine.size)]  # any local order
        objects = RankObjects(mine, loads[mine], speed=1.0 if speeds is None else float(speeds[me]))
        res = grapevine_distributed(comm, objects, prm, clock=clock(kind), seed=[seed, 1])
        rows = comm.gather((mine, res.dest, res.counters.as_dict(), res.history, res.iterations, res.converged),
                           root=0)
        if me != 0:
            continue
        final = assignment(rows, loads.size)
        if not np.array_equal(final, ref.object_rank):
            failures.append(f"{name}: {np.count_nonzero(final != ref.object_rank)} objects end elsewhere than serial")
        if sum(h["transfers"] for h in ref.history) == 0:
            failures.append(f"{name}: nothing moved, the case tests nothing")
        for r, (_, _, cnt, hist, it, conv) in enumerate(rows):
            if hist != ref.history or it != ref.iterations or conv != ref.converged:
                failures.append(f"{name}: rank {r} history/iterations/converged differ from serial")
            for key in ("iterations", "exchange_rounds", "collectives"):
                if cnt[key] != getattr(ref.counters, key):
                    failures.append(f"{name}: rank {r} {key}={cnt[key]}, serial {getattr(ref.counters, key)}")
            if kind == "virtual" and not cnt["time"] > 0:
                failures.append(f"{name}: rank {r} charged no virtual time")
        for key in ("messages", "bytes"):
            tot = sum(row[2][key] for row in rows)
            if tot != getattr(ref.counters, key):
                failures.append(f"{name}: Σ {key} = {tot}, serial {getattr(ref.counters, key)}")
    for name, loads, owner, speeds, crit, kw, kind in cases:  # the token stage: the same moves and history
        ref = grapevine(loads, owner, p, GrapevineParams.of(kw, criterion=crit), seed=[seed, 1],
                        speeds=speeds) if me == 0 else None
        mine = np.flatnonzero(owner == me)
        token = GrapevineParams.of(kw, criterion=crit, transfer="token")
        objects = RankObjects(mine, loads[mine], speed=1.0 if speeds is None else float(speeds[me]))
        res = grapevine_distributed(comm, objects, token, clock=clock(kind), seed=[seed, 1])
        rows = comm.gather((mine, res.dest, res.history, res.iterations), root=0)
        if me != 0:
            continue
        final = assignment(rows, loads.size)
        if not np.array_equal(final, ref.object_rank):
            failures.append(f"{name} token: {np.count_nonzero(final != ref.object_rank)} objects end elsewhere")
        if any(hist != ref.history or it != ref.iterations for _, _, hist, it in rows):
            failures.append(f"{name} token: history or iterations differ from serial")

    # the hermes-run adapter: cells = objects, speed = p·c_i, seed mixed with the call number
    weights = rng.uniform(0.2, 3.0, 300)
    owner = rng.integers(0, max(1, p - 1), 300)
    caps = rng.uniform(1.0, 3.0, p)
    model = Model.create(p, [(i, i + 1) for i in range(p - 1)], np.bincount(owner, weights, minlength=p), caps)
    gid = np.flatnonzero(owner == me)
    nbrs = np.array([j for j in (me - 1, me + 1) if 0 <= j < p], dtype=np.int64)
    params = check_params("grapevine", {"iterations": 5, "rounds": 3, "criterion": "modified"})
    ctx = BalanceContext(comm=comm, clock=clock(), nb=NeighbourComm(comm, nbrs, clock()), model=model,
                         load=float(weights[gid].sum()), capacity=float(model.capacities[me]),
                         weights=np.ones(nbrs.size), dom=SimpleNamespace(gid=gid, weight=weights[gid]), params=params,
                         seed=seed)
    for call in range(2):
        dec = get_balancer("grapevine").run(ctx)
        got = comm.gather((gid, dec.dest), root=0)
        if me == 0:
            ref = grapevine(weights, owner, p, GrapevineParams(iterations=5, rounds=3, criterion="modified"),
                            seed=[seed, call], speeds=p * model.capacities)
            final = np.full(weights.size, -1)
            for ids, dest in got:
                final[ids] = dest
            if not np.array_equal(final, ref.object_rank):
                failures.append(f"registry call {call}: assignment differs from serial")
            if dec.counters is not ctx.nb.counters or dec.iterations != ref.iterations:
                failures.append(f"registry call {call}: counters or iterations not reported")
    calls = comm.gather(ctx.state.get("grapevine_calls"), root=0)
    if me == 0 and calls != [2] * p:
        failures.append(f"per-rank call counters {calls}, expected 2 everywhere")

    # collective-safe errors: one rank with a negative load, every rank with a bad fanout
    for name, call in [
        ("negative load", lambda: grapevine_distributed(comm, RankObjects([me], [-1.0 if me == p - 1 else 1.0]),
                                                        seed=0)),
        ("fanout 0", lambda: grapevine_distributed(comm, RankObjects([me], [1.0]),
                                                   GrapevineParams.model_construct(fanout=0), seed=0)),
    ]:
        try:
            call()
            err = None
        except BalancerError as e:
            err = str(e)
        every = comm.gather(err, root=0)
        if me == 0 and (None in every or len(set(every)) != 1):
            failures.append(f"{name}: ranks raised {every}")

    nfail = comm.bcast(len(failures) if me == 0 else None, root=0)
    if me == 0:
        for line in failures:
            print("FAIL " + line, flush=True)
        if not failures:
            print(f"OK gossip {p}", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
