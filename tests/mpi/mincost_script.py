"""The distributed ``mincost`` balancer against its serial reference.

Run by tests/mpi/test_mincost_mpi.py: ``mpiexec -n P python -m mpi4py tests/mpi/mincost_script.py [seed]``.
Every rank builds the same random model and runs the registry form: rank 0 solves, one broadcast, so every rank
must hold the serial flow bit for bit, with one broadcast counted and its α-β time charged; a later round
(``ctx.round > 0``) gives the minimal flow with ``later: minimal`` and the least-cost flow again with ``later:
mincost``; a bad model fails with the same GraphError on every rank (no rank waits).
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.potential.mincost import mincost, mincost_flow
from hermes.balance.registry import check_params, get_balancer
from hermes.errors import GraphError
from tests.mpi.harness import RankView, finish, random_model, same_error, seed_arg


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    p = comm.Get_size()
    model = random_model(p, seed)
    v = RankView.of(comm, model)
    info = get_balancer("mincost")
    failures: list[str] = []
    cases = [({}, 0, mincost_flow(model)), ({"later": "mincost"}, 1, mincost_flow(model)),
             ({}, 1, minimal_flow(model)), ({"slack": 0.1}, 0, mincost_flow(model, slack=0.1))]
    for params, round_, want in cases:
        full = check_params("mincost", params)
        ctx = v.context(full)
        ctx.round = round_
        decision = info.run(ctx)
        tag = f"{params} round {round_}"
        if not np.array_equal(decision.flow, want):
            failures.append(f"{tag}: rank {v.rank} flow differs from the serial one")
        if decision.counters.collectives != {"bcast": 1}:
            failures.append(f"{tag}: rank {v.rank} collectives {decision.counters.collectives}")
        ref = info.serial(model, links=v.links)  # the registry's reference: the LP's central work priced too
        if round_ == 0 and not params and not abs(decision.counters.time - ref.counters.time) <= 1e-15:
            failures.append(f"{tag}: rank {v.rank} charged {decision.counters.time}, serial {ref.counters.time}")
    failures = [line for part in comm.allgather(failures) for line in part]
    bad = Model.create(p, [(0, 1)] + [(i, i + 1) for i in range(2, p - 1)], np.ones(p), np.ones(p),
                       check_connected=False)
    bv = RankView.of(comm, bad)
    same_error(comm, "disconnected", GraphError, lambda: info.run(bv.context(check_params("mincost", {}))), failures)
    return finish(comm, "mincost", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(3)))
