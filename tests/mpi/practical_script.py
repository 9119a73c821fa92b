"""Distributed practical FOS against its serial reference (run by tests/mpi/test_practical_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/practical_script.py [seed]``

Every rank builds the same seeded models, runs :func:`fos_distributed` with its own load, capacity,
neighbour weights and link α-β, and rank 0 compares the gathered per-edge flows (bit for bit),
iterations, convergence, counters and times (:func:`tests.mpi.harness.agree`), and the stop iteration,
final load and k, detection messages with :func:`fos`. The registry entry ``fos`` is run through its
hermes adapter. Rank 0 prints one ``FAIL ...`` line per disagreement and ``OK practical P`` if there is
none; the exit code is 1 on every rank on failure.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.central import add_central, centre_units
from hermes.balance.diffusion.detection import LinkCosts, graph_center
from hermes.balance.diffusion.fos import fos_distributed
from hermes.balance.diffusion.fos_serial import FOSParams, fos
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.mpi.harness import RankView, agree, finish, random_model, same_error, seed_arg, slow_first_edge

#: the balancers this family registers
REGISTRY = {name: BALANCERS[name] for name in
            ("fos",)}

SLOW = {"unit_time": 1e-3, "unit_bytes": 1e3}


def cases(seed: int) -> list[tuple]:
    """Name, integer loads ("homo": and unit capacities), parameters of :func:`fos`."""
    return [
        ("real-B-decrement", False, {"variant": "B", "tolerance": 1e-4, "max_iterations": 3000}),
        ("real-B-halving-slow", False, {"k": 50.0, "k_schedule": "halving", **SLOW}),
        ("real-A-plain", False, {"variant": "A", "k": None, "detection": False, "max_iterations": 40}),
        ("int-B-shaker", True, {"integer": True, "shaker": True, "k": None, "seed": seed, "kappa": 0.2}),
        ("int-B-gate-shaker", True, {"integer": True, "shaker": True, "k": 20.0, "k_schedule": "constant",
                                     "seed": seed + 1, **SLOW}),
        ("int-A-short", True, {"variant": "A", "integer": True, "max_iterations": 3}),
        ("homo-int-shaker", "homo", {"integer": True, "shaker": True, "k": None, "seed": seed, "kappa": 0.05}),
        ("homo-int-halving", "homo", {"integer": True, "k": 300.0, "k_schedule": "halving", **SLOW}),
    ]


def stop_load_k(rep, ref):
    """Each rank's stop iteration, final load and final k are the serial form's."""
    info = rep.info
    if info["stop"] != ref.extra["stop"]:
        yield f"stop {info['stop']}, serial {ref.extra['stop']}"
    if info["load"] != ref.extra["loads"][rep.rank] or info["k"] != ref.extra["k"]:
        yield f"final load/k {info['load']}/{info['k']}, serial {ref.extra['loads'][rep.rank]}/{ref.extra['k']}"


def run_case(comm, name: str, integer, params: dict, seed: int, failures: list[str]) -> None:
    model = random_model(comm.Get_size(), seed, integer=bool(integer), homogeneous=integer == "homo", boost=60.0)
    links = slow_first_edge(model, 4e-2, 1.25e5)
    v = RankView.of(comm, model, links)
    lat, bw = np.array([links.params(v.rank, int(j)) for j in v.nbrs]).T
    root = graph_center(model)
    got = agree(v, name, lambda nb: fos_distributed(nb, v.load, v.cap, v.weights, FOSParams.of(params),
                                                    links=LinkCosts(lat, bw), root=root),
                lambda: fos(model, links=links, root=root, **params), failures,
                info_keys=("stop", "load", "k", "detection_messages"), per_rank=stop_load_k,
                summed_extra=("detection_messages",))
    if got is not None and got[0].extra["transfers"] == 0:
        failures.append(f"{name}: no transfer at all, the case tests nothing")


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    rank, size = comm.Get_rank(), comm.Get_size()
    failures: list[str] = []
    for name, integer, params in cases(seed):
        run_case(comm, name, integer, params, seed, failures)

    # the registry entry through its hermes adapter (twice: the second call reuses the kept tree)
    info = REGISTRY["fos"]
    params = {**info.defaults, "k_schedule": "halving", "tolerance": 1e-3}
    model = random_model(size, seed + 7, boost=60.0)
    links = Links(latency=2e-4, bandwidth=5e7)
    v = RankView.of(comm, model, links)
    state: dict = {}
    for call, build in ((1, True), (2, False)):
        decision = info.run(v.context(params, state=state))
        cnt = comm.gather(decision.counters.as_dict(), root=0)
        if rank == 0:
            ref = info.serial(model, links=links, **params) if build else \
                add_central(fos(model, links=links, root=graph_center(model), build_tree=False, **params), model,
                            [(centre_units(model), 1)], links)  # the centre is charged on every call (docs/COSTS.md)
            if not np.array_equal(decision.flow, ref.flow) or decision.iterations != ref.iterations:
                failures.append(f"registry fos call {call}: adapter and serial reference disagree")
            if sum(c["messages"] for c in cnt) != ref.counters.messages or \
                    cnt[0]["collectives"] != ref.counters.collectives:
                failures.append(f"registry fos call {call}: counters {cnt[0]} differ from serial {ref.counters}")
            if not ref.converged:
                failures.append(f"registry fos call {call}: detection did not stop the run")

    # collective-safe errors: a bad capacity on one rank, shaker without integer loads on all
    v = RankView.of(comm, random_model(size, seed, boost=60.0))
    for name, expected, capacity, params in [
        ("zero capacity", GraphError, 0.0 if rank == size - 1 else 0.3, {}),
        ("shaker without integer", BalancerError, 0.3, {"shaker": True}),
    ]:
        same_error(comm, name, expected,
                   lambda: fos_distributed(v.fresh(capacity=1.0), 1.0, capacity, np.ones(len(v.nbrs)),
                                           FOSParams.of(params)),
                   failures)

    return finish(comm, "practical", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(3)))
