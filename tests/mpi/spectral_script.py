"""Distributed eigen-form LPS / LPA / MPA and Chebyshev diffusion against their serial references.

Run by tests/mpi/test_spectral_mpi.py: ``mpiexec -n P python -m mpi4py tests/mpi/spectral_script.py [seed]``.
Every rank builds the same random model, computes the same spectral plan (the graph is global) and runs
the distributed forms; rank 0 compares flows (bit for bit), iterations, counters and α-β times with the
serial forms (:func:`tests.mpi.harness.agree`) and the flows with the minimal flow within the bound the
plan predicts (``SpectralPlan.predicted_error_after``; Chebyshev: its tolerance). The registry forms
(``hermes run``) must give the serial registry flow and keep the plan in ``ctx.state``.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.diffusion.chebyshev import (LANCZOS_STEPS, chebyshev, chebyshev_distributed, chebyshev_steps,
                                                spectral_bounds)
from hermes.balance.diffusion.lanczos import lanczos_distributed
from hermes.balance.flow import agree_local_inputs, flow_error
from hermes.balance.polynomial.leja import leja_distributed, leja_flow, spectral_plan
from hermes.balance.polynomial.lps import lpa, lpa_distributed
from hermes.balance.registry import check_params, get_balancer
from hermes.errors import BalancerError
from tests.mpi.harness import RankView, agree, finish, random_model, same_error, seed_arg, slow_first_edge


def _lanczos_chebyshev(nb, v, model):
    """chebyshev with its default ``bounds: lanczos``, as its registry form runs it: the input check, the Lanczos
    steps, then the Chebyshev steps on their bounds."""
    total = agree_local_inputs(nb, v.load, v.cap, v.weights)
    lz = lanczos_distributed(nb, v.load, v.cap, v.weights, total, LANCZOS_STEPS)
    k = chebyshev_steps(lz.a, lz.b, 1e-10, float(model.weights.max() / model.weights.min()))
    return chebyshev_distributed(nb, v.load, v.cap, v.weights, a=lz.a, b=lz.b, steps=k)


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    model = random_model(comm.Get_size(), seed)
    links = slow_first_edge(model)
    v = RankView.of(comm, model, links)
    plan = spectral_plan(model)
    a, b = spectral_bounds(model, "exact")
    k = chebyshev_steps(a, b, 1e-10, float(model.weights.max() / model.weights.min()))
    # the kernels take the nodes as given: their serial forms without the spectral precomputation
    cases = [  # name, distributed form, serial form, flow-error bound
        ("leja", lambda nb: leja_distributed(nb, v.load, v.cap, v.weights, plan.nodes),
         lambda: leja_flow(model, plan=plan, links=links, spectrum="free"), plan.predicted_error_after(0)),
        ("leja-refine", lambda nb: leja_distributed(nb, v.load, v.cap, v.weights, plan.nodes, refine=1),
         lambda: leja_flow(model, plan=plan, refine=1, links=links, spectrum="free"), plan.predicted_error_after(1)),
        ("lpa-eigen", lambda nb: lpa_distributed(nb, v.load, v.cap, v.weights, nodes=plan.nodes, refine=1),
         lambda: lpa(model, "eigen", refine=1, links=links, spectrum="free"), plan.predicted_error_after(1)),
        ("chebyshev", lambda nb: chebyshev_distributed(nb, v.load, v.cap, v.weights, a=a, b=b, steps=k),
         lambda: chebyshev(model, tolerance=1e-10, bounds="exact", links=links, spectrum="free"), 1e-10),
        ("chebyshev-lanczos", lambda nb: _lanczos_chebyshev(nb, v, model),
         lambda: chebyshev(model, tolerance=1e-10, bounds="lanczos", links=links), 1e-8),
    ]
    failures: list[str] = []
    for name, run_dist, run_serial, bound in cases:
        got = agree(v, name, run_dist, run_serial, failures)
        if got is not None and not flow_error(model, got[1]) <= bound:
            failures.append(f"{name}: flow error {flow_error(model, got[1]):.3e} above the bound {bound:.3e}")
    state: dict = {}
    for name, given in (("lps", {}), ("lpa", {}), ("mpa", {}), ("chebyshev", {"bounds": "exact"}), ("auto", {}),
                        ("chebyshev", {})):
        info = get_balancer(name)
        full = check_params(name, given)
        decision = info.run(v.context(full, seed=seed, state=state))
        if comm.Get_rank() == 0:
            reused = decision.info.get("spectrum_computed") is False  # lps computed the plan, the others reuse it
            if name == "chebyshev" and given and not reused:
                failures.append("registry chebyshev: computed the spectrum lps had computed")
            ref = info.serial(model, **({**full, "spectrum": "free"} if reused and "spectrum" in full else full))
            want = {k: n for k, n in ref.counters.collectives.items() if not (reused and k in ("gather", "bcast"))}
            if not np.array_equal(decision.flow, ref.flow):
                failures.append(f"registry {name}: run and serial flows differ")
            if decision.counters.collectives != want:
                failures.append(f"registry {name}: collectives {decision.counters.collectives}, "
                                f"serial {ref.counters.collectives}")
    # one spectral plan for all five: Chebyshev's exact bounds read it too (nothing of Chebyshev's own is kept)
    if comm.Get_rank() == 0 and sorted(state) != ["spectral_plan"]:
        failures.append(f"registry: ctx.state holds {sorted(state)}")
    same_error(comm, "bad nodes", BalancerError,
               lambda: leja_distributed(v.fresh(), v.load, v.cap, v.weights,
                                        -plan.nodes if v.rank == v.size - 1 else plan.nodes), failures)
    return finish(comm, "spectral", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(5)))
