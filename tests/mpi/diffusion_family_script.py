"""Every diffusion-family registry entry, distributed under mpiexec, against its serial reference.

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/diffusion_family_script.py [seed]``
(run by tests/mpi/test_diffusion_family_mpi.py).

Every rank builds the same models with P processors (a random heterogeneous graph and a homogeneous
star, on which M⁶ is negative), calls the entry's ``run`` through a real :class:`BalanceContext`
(the adapter computes ε₀, α, ω on every rank) and rank 0 compares the assembled flow (bit for bit),
the iteration count, ``converged``, every rank's counters and α-β time with ``serial``
(:func:`tests.mpi.harness.compare`). Then the distributed forms must raise the same error on every
rank for bad parameters. Rank 0 prints one ``FAIL ...`` line per disagreement and
``OK diffusion-family P`` if there is none.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.diffusion.gda import gda_distributed
from hermes.balance.diffusion.implicit import WattsParams, implicit_distributed
from hermes.balance.diffusion.sos import sos_distributed
from hermes.balance.model import Model
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from tests.mpi.harness import (
    RankView,
    compare,
    finish,
    gather,
    random_model,
    same_error,
    seed_arg,
    slow_first_edge,
)

#: the balancers this family registers
REGISTRY = {name: BALANCERS[name] for name in
            ("gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit", "implicit_watts")}

VARIANTS = [
    {"tolerance": 1e-6},
    {"tolerance": 1e-4, "lazy": True, "check_every": 3},
    {"tolerance": 1e-9, "max_iterations": 7, "check_every": 3},  # stops at max_iterations
]
EXTRA = {"sos": [{"tolerance": 1e-6, "omega": 1.3}],
         "implicit": [{"tolerance": 1e-6, "alpha": 4.0, "inner_tolerance": 0.1, "eps": 1.0}],
         "implicit_watts": [{"tolerance": 1e-6, "alpha": 0.5}, {"tolerance": 1e-6, "sweeps": 2}]}


def star_model(p: int) -> Model:
    return Model.create(p, [(0, i) for i in range(1, p)], np.arange(p, dtype=float) + 1.0, np.ones(p))


def nonnegative(rep, ref):
    """M⁶'s sign test (``info["nonnegative"]``) agrees with the serial form's."""
    if rep.info["nonnegative"] != ref.extra["nonnegative"]:
        yield f"nonnegative={rep.info['nonnegative']}, serial {ref.extra['nonnegative']}"


def run_case(view: RankView, name: str, params: dict, failures: list[str]):
    """Run entry ``name`` with ``params`` through its adapter and compare with ``serial``; the reference on rank 0."""
    info = REGISTRY[name]
    merged = {**info.defaults, **params}
    info.check(merged)
    dec = info.run(view.context(merged))
    reports = gather(view, dec, ("nonnegative",))
    if reports is None:
        return None
    tag = f"{name} {params}"
    ref = info.serial(view.model, **merged, links=view.links)
    compare(tag, view.model, ref, reports, failures, flow=dec.flow, per_rank=nonnegative if name == "gda6" else None)
    if params.get("max_iterations") == 7 and view.size >= 4 and (ref.converged or ref.iterations != 7):
        failures.append(f"{tag}: expected to stop unconverged at 7 iterations, got {ref.iterations}")
    if ref.iterations == 0:
        failures.append(f"{tag}: no iterations, the test model is already balanced")
    return ref


def error_cases(v: RankView, failures: list[str]) -> None:
    load, cap, w = v.load, v.cap, v.weights
    last = v.rank == v.size - 1
    for name, expected, call in [
        ("omega 2.5", BalancerError, lambda nb: sos_distributed(nb, load, cap, w, 0.1, 2.5)),
        ("omega on one rank", BalancerError, lambda nb: sos_distributed(nb, load, cap, w, 0.1, 0.0 if last else 1.5)),
        ("M6 without alpha", BalancerError, lambda nb: gda_distributed(nb, load, cap, w, 0.0, kind=6)),
        ("kind 7", BalancerError, lambda nb: gda_distributed(nb, load, cap, w, 0.0, kind=7)),
        ("inner tolerance on one rank", BalancerError,
         lambda nb: implicit_distributed(nb, load, cap, w, 0.1,  # unvalidated on one rank: the kernel's check
                                         WattsParams.model_construct(inner_tolerance=1.5 if last else 0.1))),
        ("zero capacity", GraphError, lambda nb: sos_distributed(nb, load, 0.0 if last else cap, w, 0.1, 1.5)),
    ]:
        same_error(v.comm, name, expected, lambda: call(v.fresh()), failures)



def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    size = comm.Get_size()
    model = random_model(size, seed)
    view = RankView.of(comm, model, slow_first_edge(model))
    failures: list[str] = []
    for name in REGISTRY:
        for params in VARIANTS + EXTRA.get(name, []):
            run_case(view, name, params, failures)
    ref = run_case(RankView.of(comm, star_model(size), Links()), "gda6", {"tolerance": 1e-6}, failures)
    if ref is not None and size >= 4 and ref.extra["nonnegative"]:
        failures.append("gda6 on the star: M⁶ should have a negative diagonal (thesis §5.6)")
    error_cases(RankView.of(comm, model, Links()), failures)
    return finish(comm, "diffusion-family", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(7)))
