"""Distributed GDA and PCG against their serial references (run by tests/mpi/test_balance_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/balance_script.py [seed]``

Every rank builds the same random model with P processors (the first edge a slow link), runs the
distributed form with its own load, capacity and neighbour weights, and rank 0 compares the gathered
per-edge flows (relative 10⁻⁹), iteration counts, convergence and counters with the serial form
(:func:`tests.mpi.harness.agree`). Rank 0 prints one ``FAIL ...`` line per disagreement and
``OK balance P`` if there is none; the exit code is 1 on every rank if anything failed.
"""

from __future__ import annotations

import sys

from mpi4py import MPI

from hermes.runtime.plain import plain

from hermes.balance.diffusion.gda import StopParams, gda, gda_distributed
from hermes.balance.diffusion.spectral import epsilon0
from hermes.balance.flow import check_balancing, flow_error
from hermes.balance.potential.pcg import pcg, pcg_distributed
from hermes.errors import BalancerError, GraphError
from tests.mpi.harness import (
    RankView,
    agree,
    finish,
    random_model,
    same_error,
    seed_arg,
    slow_first_edge,
)
from tests.tolerances import balancing_floor, potential_flow_tol


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    model = random_model(comm.Get_size(), seed)
    links = slow_first_edge(model)
    v = RankView.of(comm, model, links)
    eps0 = comm.bcast(epsilon0(model) if v.rank == 0 else None, root=0)  # networkx imported on rank 0 only
    cases = [  # name, distributed form, serial form
        ("gda0", lambda nb: gda_distributed(nb, v.load, v.cap, v.weights, eps0,
                                            StopParams.of(tolerance=1e-6, max_iterations=20000, check_every=1)),
         lambda: gda(model, eps0, StopParams.of(tolerance=1e-6, max_iterations=20000, check_every=1), links=links)),
        ("gda1", lambda nb: gda_distributed(nb, v.load, v.cap, v.weights, 1.0,
                                            StopParams.of(tolerance=1e-6, max_iterations=50, check_every=3)),
         lambda: gda(model, 1.0, StopParams.of(tolerance=1e-6, max_iterations=50, check_every=3), links=links)),
        ("gda1-check4", lambda nb: gda_distributed(nb, v.load, v.cap, v.weights, 1.0,
                                                   StopParams.of(tolerance=1e-3, check_every=4)),
         lambda: gda(model, 1.0, StopParams.of(tolerance=1e-3, check_every=4), links=links)),
        ("pcg", lambda nb: pcg_distributed(nb, v.load, v.cap, v.weights, tolerance=1e-10),
         lambda: pcg(model, tolerance=1e-10, links=links)),
        ("pcg-single", lambda nb: pcg_distributed(nb, v.load, v.cap, v.weights, tolerance=1e-10,
                                                  form="single-reduction"),
         lambda: pcg(model, tolerance=1e-10, links=links, form="single-reduction")),
    ]
    failures: list[str] = []
    for name, run_dist, run_serial in cases:
        # both forms accumulate in the same order (ordered_total, ordered_row_sums): bit for bit on any BLAS
        got = agree(v, name, run_dist, run_serial, failures)
        if got is None:
            continue
        ref, flow = got
        # PCG stops on its recursive residual ≤ tol ‖b‖ (tol = 1e-10), whose drift from the true one stays below
        # tol here (tests/balance/test_pcg.py::defect_tol); a potential flow is minimal to cond × defect
        if name.startswith("pcg") and not (check_balancing(model, flow) <= 2e-10 + balancing_floor(model, flow)
                                  and flow_error(model, flow) <= potential_flow_tol(model, flow)):
            failures.append(f"{name}: flow differs from the minimal flow by {flow_error(model, flow):.3e}")
        if name == "gda1" and ref.converged:
            failures.append("gda1: expected to stop at max_iterations=50 without converging")
        if ref.iterations == 0 and name != "gda1":
            failures.append(f"{name}: no iterations, the test model is already balanced")

    # collective-safe errors: one rank with a bad capacity, every rank with a negative ε
    last = v.rank == v.size - 1
    same_error(comm, "zero capacity", GraphError,
               lambda: pcg_distributed(v.fresh(), v.load, 0.0 if last else v.cap, v.weights), failures)
    same_error(comm, "negative eps", BalancerError,
               lambda: gda_distributed(v.fresh(), v.load, v.cap, v.weights, -0.5), failures)
    return finish(comm, "balance", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(7)))
