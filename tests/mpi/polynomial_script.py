"""Distributed LPS, LPA, MPA and AdA against their serial references (run by tests/mpi/test_polynomial_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/polynomial_script.py [seed]``

Every rank builds the same random model with P processors and runs the distributed forms with its own
load, capacity and neighbour weights; rank 0 compares the gathered per-edge flows (bit for bit), the
iterations, convergence, counters (per rank and summed) and the α-β times with the serial forms
(:func:`tests.mpi.harness.agree`), and the flows with the minimal flow. AdA runs a sequence of four calls
(recompute, reuse-loads, reuse-capacities, recompute after a weight change), each rank carrying its own
state. Rank 0 prints one ``FAIL ...`` line per disagreement and ``OK polynomial P`` if there is none.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.flow import check_balancing, flow_error, minimal_flow
from hermes.balance.model import Model
from hermes.balance.polynomial.ada import ada, ada_distributed
from hermes.balance.polynomial.charpoly import laplacian_polynomial
from hermes.balance.polynomial.leja import spectral_plan
from hermes.balance.polynomial.lps import lpa, lpa_distributed, lps, lps_distributed
from hermes.balance.polynomial.mpa import MPAParams, mpa, mpa_distributed, mpa_scale
from hermes.balance.registry import check_params, get_balancer
from hermes.errors import BalancerError
from tests.mpi.harness import RankView, agree, finish, random_model, same_error, seed_arg, slow_first_edge
from tests.tolerances import (
    balancing_tol,
    flow_tol,
    mpa_flow_tol,
    operator_flow_bound,
    polynomial_flow_tol,
    potential_flow_tol,
)


def ada_models(model: Model, seed: int) -> list[Model]:
    """``model`` then three models for AdA's cases: new loads, new loads and capacities, new weights."""
    p, e = model.p, model.edges
    rng = np.random.default_rng(seed + 1)
    m1 = model.with_loads(rng.uniform(0.0, 10.0, p))
    m2 = Model.create(p, e, rng.uniform(0.0, 10.0, p), rng.uniform(0.5, 3.0, p), model.weights)
    m3 = Model.create(p, e, m2.loads, m2.capacities, model.weights * rng.uniform(0.5, 2.0, model.q))
    return [model, m1, m2, m3]


def ada_cases(comm, models: list[Model], links, operator: str = "faddeev") -> list[tuple]:
    """AdA on ``models`` in turn, each rank and the serial form carrying their own state from call to call;
    ``operator``: Θ by the thesis' Faddeev steps or in product form over the eigenvalues (the nodes handed to
    the ranks as the registry does, computed only when Θ is; the kernels charge no spectrum)."""
    rank_state: list = [None]
    serial_state: list = [None]

    def step(m: Model, expected: str) -> tuple:
        v = RankView.of(comm, m, links)
        nodes = (lambda: spectral_plan(m).nodes) if operator == "eigen" else None

        def dist(nb):
            res = ada_distributed(nb, v.load, v.cap, v.weights, rank_state[0], nodes=nodes)
            rank_state[0] = res.extra["state"]
            return res

        def ser():
            res = ada(m, serial_state[0], operator=operator, spectrum="free", links=links)
            serial_state[0] = res.extra["state"]
            return res

        return f"ada-{'eigen-' * (operator == 'eigen')}{expected}", v, dist, ser

    return [step(m, expected) for m, expected in zip(models, ["recompute", "reuse-loads", "reuse-capacities",
                                                             "recompute"], strict=True)]


def a_priori_tol(name: str, model: Model, models: list[Model], ref, seed: int) -> float:
    """The serial tests' bound on ``flow_error`` of case ``name`` on ``model`` (tests/tolerances.py): the
    monomial-basis bound of LPS/LPA and of a recomputing AdA, the Hankel estimate of MPA, and for AdA's reuse
    cases the operator of the first model applied to every change since (tests/balance/test_ada.py)."""
    first, m1, m2 = models[:3]
    if name.startswith("mpa"):
        return mpa_flow_tol(model, ref, seed)
    if name in ("ada-reuse-loads", "ada-reuse-capacities"):
        v = np.abs(first.loads) + np.abs(m1.loads - first.loads)
        if name == "ada-reuse-capacities":
            v = v + np.abs(m2.loads - m1.loads) + m2.loads.sum() * np.abs(m2.capacities - m1.capacities)
        return operator_flow_bound(first, v) / float(np.linalg.norm(minimal_flow(model))) + flow_tol(model)
    return polynomial_flow_tol(model)


def ada_case(rep, ref):
    """Each rank took the serial form's AdA case, the one the test name expects."""
    case = rep.info["ada_case"]
    if case != ref.extra["ada_case"]:
        yield f"case {case}, serial {ref.extra['ada_case']}"


def registry_cases(comm, models: list[Model], links, seed: int, failures: list[str]) -> None:
    """The hermes-run forms (registry adapters): flow equal to the registry's serial form; AdA keeps its
    state in ctx.state from call to call."""
    model, m1, m2 = models[:3]
    state: dict = {}
    serial_ada = None
    for name, params, m in [("lps", {"coefficients": "newton"}, model), ("lpa", {"refine": 1}, model),
                            ("mpa", {}, model), ("ada", {}, model), ("ada", {}, m1), ("ada", {}, m2)]:
        info = get_balancer(name)
        full = check_params(name, params)
        decision = info.run(RankView.of(comm, m, links).context(full, seed=seed, state=state))
        if comm.Get_rank() != 0:
            continue
        if name in ("lpa", "mpa", "ada") and not decision.info.get("spectrum_computed", False):
            full = {**full, "spectrum": "free"}  # the plan lpa computed is reused: nothing charged
        if name == "mpa":
            ref = info.serial(m, seed=seed, **full, links=links)
        elif name == "ada":
            ref = info.serial(m, state=serial_ada, **full)
            serial_ada = ref.extra["state"]
            if decision.info.get("ada_case") != ref.extra["ada_case"]:
                failures.append(f"registry ada: case {decision.info.get('ada_case')}, serial {ref.extra['ada_case']}")
        else:
            ref = info.serial(m, **full, links=links)
        if not np.array_equal(decision.flow, ref.flow):
            failures.append(f"registry {name}: run and serial flows differ")
        if decision.counters.collectives != ref.counters.collectives:
            failures.append(f"registry {name}: collectives {decision.counters.collectives}, "
                            f"serial {ref.counters.collectives}")
        t_ref = float(ref.extra["rank_times"][0]) if name != "ada" else decision.counters.time
        if not abs(decision.counters.time - t_ref) <= 1e-12 * abs(t_ref):  # the spectrum's charge included
            failures.append(f"registry {name}: rank 0 time {decision.counters.time!r}, serial {t_ref!r}")
    kinds = {k: type(v).__name__ for k, v in state.items()}
    if comm.Get_rank() == 0 and kinds != {"spectral_plan": "tuple", "ada": "AdARankState"}:
        failures.append(f"registry ada: ctx.state holds {state!r}")


def main(seed: int) -> int:
    comm = plain(MPI.COMM_WORLD)
    model = random_model(comm.Get_size(), seed)
    links = slow_first_edge(model)
    v = RankView.of(comm, model, links)
    models = ada_models(model, seed)
    poly = laplacian_polynomial(model, "berkowitz")
    newton = laplacian_polynomial(model, "newton")
    cases = [  # name, rank view, distributed form, serial form
        ("lps", v, lambda nb: lps_distributed(nb, v.load, v.cap, v.weights, poly),
         lambda: lps(model, poly, links=links)),
        ("lps-refine", v, lambda nb: lps_distributed(nb, v.load, v.cap, v.weights, poly, refine=1),
         lambda: lps(model, poly, refine=1, links=links)),
        ("lpa", v, lambda nb: lpa_distributed(nb, v.load, v.cap, v.weights),
         lambda: lpa(model, "faddeev", links=links)),
        ("lpa-newton-refine", v,
         lambda nb: lpa_distributed(nb, v.load, v.cap, v.weights, coefficients=newton, refine=2),
         lambda: lpa(model, "newton", refine=2, links=links)),
        ("mpa", v, lambda nb: mpa_distributed(nb, v.load, v.cap, v.weights, seed=seed, scale=mpa_scale(model)),
         lambda: mpa(model, MPAParams.of(polynomial="berlekamp-massey"), seed=seed, links=links)),
        ("mpa-refine", v,
         lambda nb: mpa_distributed(nb, v.load, v.cap, v.weights, MPAParams.of(refine=1), seed=seed,
                                    scale=mpa_scale(model)),
         lambda: mpa(model, MPAParams.of(polynomial="berlekamp-massey", refine=1), seed=seed, links=links)),
        *ada_cases(comm, models, links),
        *ada_cases(comm, models, links, "eigen"),
    ]
    failures: list[str] = []
    for name, view, run_dist, run_serial in cases:
        got = agree(view, name, run_dist, run_serial, failures, info_keys=("ada_case",),
                    per_rank=ada_case if name.startswith("ada") else None)
        if got is None:
            continue
        ref, flow = got
        if name.startswith("ada") and not name.endswith(ref.extra["ada_case"]):
            failures.append(f"{name}: serial took case {ref.extra['ada_case']}")
        # a potential flow is minimal to cond × its defect (rigorous), and the defect is what the method's
        # a-priori bound allows
        err = flow_error(view.model, flow)
        # the eigen operator has no a-priori bound of the monomial kind: the a-posteriori one alone
        tol = (potential_flow_tol(view.model, flow) if name.startswith("ada-eigen")
               else a_priori_tol(name, view.model, models, ref, seed))
        if not err <= min(tol, potential_flow_tol(view.model, flow)):
            failures.append(f"{name}: flow differs from the minimal flow by {err:.3e} (bound {tol:.3e})")
        if not check_balancing(view.model, flow) <= balancing_tol(view.model, tol):
            failures.append(f"{name}: balancing defect {check_balancing(view.model, flow):.3e}")

    registry_cases(comm, models, links, seed, failures)
    # collective-safe errors: a bad refine on one rank only
    same_error(comm, "bad refine", BalancerError,
               lambda: lpa_distributed(v.fresh(), v.load, v.cap, v.weights, refine=-1 if v.rank == v.size - 1 else 0),
               failures)
    return finish(comm, "polynomial", failures)


if __name__ == "__main__":
    sys.exit(main(seed_arg(7)))
