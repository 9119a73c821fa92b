"""Distributed LPS, LPA, MPA and AdA against their serial references (run by tests/mpi/test_polynomial_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/polynomial_script.py [seed]``

Every rank builds the same random model with P processors and runs the distributed forms with its own
load, capacity and neighbour weights on a NeighbourComm with a VirtualClock; rank 0 compares the gathered
per-edge flows (bit for bit), the counters (per rank and summed) and the α-β times with the serial forms,
and the flows with the minimal flow. AdA runs a sequence of four calls (recompute, reuse-loads,
reuse-capacities, recompute after a weight change), each rank carrying its own state. Rank 0 prints one
``FAIL ...`` line per disagreement and ``OK polynomial P`` if there is none.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from hermes.balance.flow import flow_error
from hermes.balance.incremental import ada, ada_distributed
from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext, check_params, get_balancer
from hermes.balance.polynomial import (laplacian_polynomial, lpa, lpa_distributed, lps, lps_distributed, mpa,
                                       mpa_distributed, mpa_scale)
from hermes.clock import Links, VirtualClock
from hermes.comm import NeighbourComm
from hermes.errors import BalancerError


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
    links = Links(latency=1e-4, bandwidth=1e8, overrides={(int(e[0, 0]), int(e[0, 1])): (7e-4, 2e7)})
    index = {(int(i), int(j)): k for k, (i, j) in enumerate(e.tolist())}
    nbrs = model.neighbours[rank]
    kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)

    def fresh(m: Model) -> NeighbourComm:
        return NeighbourComm(comm, nbrs, VirtualClock(rank, size, links, speed=1e6, capacity=m.capacities[rank]))

    def mine(m: Model) -> tuple[float, float, np.ndarray]:
        return float(m.loads[rank]), float(m.capacities[rank]), m.weights[kidx]

    poly = laplacian_polynomial(model, "berkowitz")
    newton = laplacian_polynomial(model, "newton")
    cases = [
        ("lps", model, lambda nb, l, c, w: lps_distributed(nb, l, c, w, poly), lambda: lps(model, poly, links=links)),
        ("lps-refine", model, lambda nb, l, c, w: lps_distributed(nb, l, c, w, poly, refine=1),
         lambda: lps(model, poly, refine=1, links=links)),
        ("lpa", model, lambda nb, l, c, w: lpa_distributed(nb, l, c, w), lambda: lpa(model, links=links)),
        ("lpa-newton-refine", model, lambda nb, l, c, w: lpa_distributed(nb, l, c, w, coefficients=newton, refine=2),
         lambda: lpa(model, "newton", refine=2, links=links)),
        ("mpa", model, lambda nb, l, c, w: mpa_distributed(nb, l, c, w, seed=seed, scale=mpa_scale(model)),
         lambda: mpa(model, seed=seed, links=links)),
        ("mpa-refine", model,
         lambda nb, l, c, w: mpa_distributed(nb, l, c, w, seed=seed, scale=mpa_scale(model), refine=1),
         lambda: mpa(model, seed=seed, refine=1, links=links)),
    ]
    # AdA: a sequence of models, each rank carrying its own state
    rng = np.random.default_rng(seed + 1)
    m1 = model.with_loads(rng.uniform(0.0, 10.0, size))
    m2 = Model.create(size, e, rng.uniform(0.0, 10.0, size), rng.uniform(0.5, 3.0, size), model.weights)
    m3 = Model.create(size, e, m2.loads, m2.capacities, model.weights * rng.uniform(0.5, 2.0, model.q))
    rank_state: list = [None]
    serial_state: list = [None]

    def ada_step(m: Model, expected: str):
        def dist(nb, l, c, w):
            res = ada_distributed(nb, l, c, w, rank_state[0])
            rank_state[0] = res.extra["state"]
            return res

        def ser():
            res = ada(m, serial_state[0], links=links)
            serial_state[0] = res.extra["state"]
            return res

        return (f"ada-{expected}", m, dist, ser)

    cases += [ada_step(model, "recompute"), ada_step(m1, "reuse-loads"), ada_step(m2, "reuse-capacities"),
              ada_step(m3, "recompute")]

    failures: list[str] = []
    for name, m, run_dist, run_serial in cases:
        res = run_dist(fresh(m), *mine(m))
        rows = comm.gather((rank, nbrs, kidx, res.flows, res.iterations, res.counters.as_dict(),
                            res.extra.get("ada_case")), root=0)
        if rank != 0:
            continue
        ref = run_serial()
        flow = np.full(m.q, np.nan)
        back = np.full(m.q, np.nan)
        for r, nbr_r, k_r, flows_r, it_r, cnt, case in rows:
            tail = nbr_r > r
            flow[k_r[tail]] = flows_r[tail]
            back[k_r[~tail]] = flows_r[~tail]
            if it_r != ref.iterations:
                failures.append(f"{name}: rank {r} did {it_r} iterations, serial {ref.iterations}")
            for key in ("iterations", "exchange_rounds", "collectives"):
                if cnt[key] != getattr(ref.counters, key):
                    failures.append(f"{name}: rank {r} {key}={cnt[key]}, serial {getattr(ref.counters, key)}")
            t_ref = float(ref.extra["rank_times"][r])
            if not abs(cnt["time"] - t_ref) <= 1e-9 * max(abs(t_ref), 1e-300):
                failures.append(f"{name}: rank {r} time {cnt['time']!r}, serial {t_ref!r}")
            if name.startswith("ada") and (case != ref.extra["ada_case"] or not name.endswith(case)):
                failures.append(f"{name}: rank {r} case {case}, serial {ref.extra['ada_case']}")
        for key in ("messages", "bytes"):
            tot = sum(row[5][key] for row in rows)
            if tot != getattr(ref.counters, key):
                failures.append(f"{name}: Σ {key} = {tot}, serial {getattr(ref.counters, key)}")
        if not (np.all(np.isfinite(flow)) and np.all(np.isfinite(back))):
            failures.append(f"{name}: some edge has no flow reported")
        elif not np.array_equal(flow, -back):
            failures.append(f"{name}: endpoints disagree, max |f_ij + f_ji| = {np.max(np.abs(flow + back))}")
        elif not np.array_equal(flow, ref.flow):
            err = np.linalg.norm(flow - ref.flow) / np.linalg.norm(ref.flow)
            failures.append(f"{name}: distributed flow differs from serial (relative {err:.3e})")
        if not flow_error(m, flow) <= 1e-9:
            failures.append(f"{name}: flow differs from the minimal flow by {flow_error(m, flow):.3e}")

    # the hermes-run forms (registry adapters): flow equal to the registry's serial form; AdA keeps its
    # state in ctx.state from call to call
    state: dict = {}
    serial_ada = None
    for name, params, m in [("lps", {"coefficients": "newton"}, model), ("lpa", {"refine": 1}, model),
                            ("mpa", {}, model), ("ada", {}, model), ("ada", {}, m1), ("ada", {}, m2)]:
        info = get_balancer(name)
        full = check_params(name, params)
        load, cap, w = mine(m)
        ctx = BalanceContext(comm=comm, clock=None, nb=fresh(m), model=m, load=load, capacity=cap, weights=w,
                             dom=None, params=full, seed=seed, state=state)
        decision = info.run(ctx)
        if rank != 0:
            continue
        if name == "mpa":
            ref = info.serial(m, seed=seed, **full)
        elif name == "ada":
            ref = info.serial(m, state=serial_ada, **full)
            serial_ada = ref.extra["state"]
            if decision.info.get("ada_case") != ref.extra["ada_case"]:
                failures.append(f"registry ada: case {decision.info.get('ada_case')}, serial {ref.extra['ada_case']}")
        else:
            ref = info.serial(m, **full)
        if not np.array_equal(decision.flow, ref.flow):
            failures.append(f"registry {name}: run and serial flows differ")
        if decision.counters.collectives != ref.counters.collectives:
            failures.append(f"registry {name}: collectives {decision.counters.collectives}, "
                            f"serial {ref.counters.collectives}")
    if rank == 0 and [type(v).__name__ for v in state.values()] != ["AdARankState"]:
        failures.append(f"registry ada: ctx.state holds {state!r}")

    # collective-safe errors: a bad refine on one rank only
    try:
        lpa_distributed(fresh(model), *mine(model), refine=-1 if rank == size - 1 else 0)
        got = None
    except BalancerError as err:
        got = str(err)
    every = comm.gather(got, root=0)
    if rank == 0 and (None in every or len(set(every)) != 1):
        failures.append(f"bad refine: ranks raised {every}")

    nfail = comm.bcast(len(failures) if rank == 0 else None, root=0)
    if rank == 0:
        for line in failures:
            print("FAIL " + line, flush=True)
        if not failures:
            print(f"OK polynomial {size}", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
