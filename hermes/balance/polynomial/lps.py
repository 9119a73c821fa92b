"""Laplacian-polynomial balancing schemes LPS and LPA (thesis §8.2–8.4), and the registry of LPS, LPA, MPA.

With ``A = L D⁻¹`` (similar to the generalized Laplacian 𝓛 = D^{-1/2} L D^{-1/2}, same characteristic
polynomial ``χ(μ) = Σ_k a_k μ^{p−k}``, ``a_0 = 1``, ``a_p = 0``) Cayley–Hamilton gives the minimal flow as a
polynomial in A (thesis eq. 8.2.4, Lemma 14, Th. 22–23)::

    φ = −W Aᵀ D⁻¹ U l,    U = (A^{p−2} + a_1 A^{p−3} + … + a_{p−2} I) / a_{p−1},

i.e. ``φ_ij = −w_ij (y_i − y_j)`` with potentials ``y = D⁻¹ U l``. The schemes differ in how they get the
polynomial and apply it:

* **LPS** (Alg. 9): coefficients known beforehand (Faddeev–LeVerrier Alg. 11, Newton's identities
  Alg. 10, or division-free Berkowitz, §8.2.1); ``u = Σ_t a_{p−2−t} Aᵗ l`` by p−2 neighbour steps,
  then one exchange of ``y``: p−1 communication phases, no collective (but hermes' input check).
* **LPA** (Alg. 12): Faddeev–LeVerrier run in parallel, rank r holding row r of the iterate
  ``M_{k+1} = A M_k + a_k I``, ``a_k = −tr(A M_k)/k`` (one allreduce of the trace per step): p−1 neighbour
  steps, then one exchange of the rows ``Y_r = U_r / c_r`` and one allgather of the loads.
* **MPA** (Alg. 13–15): the minimal polynomial, :mod:`hermes.balance.polynomial.mpa`.

Every flow equals :func:`~hermes.balance.flow.minimal_flow` in exact arithmetic. In double precision the
monomial basis limits the thesis' forms; the default forms are therefore the **eigen** ones
(``coefficients="eigen"``; MPA: ``polynomial="spectrum"``): the same polynomial applied as the product
``Π_k (I − A/μ_k)`` over the distinct non-zero eigenvalues of the generalized Laplacian in Leja order
(:mod:`hermes.balance.polynomial.leja`; A is diagonalizable, so the Laplacian polynomial's repeated roots add nothing
and LPS, MPA coincide: n ≤ p − 1 steps of one word; LPA keeps its rows of the balancing operator and one
allgather). Their accuracy is predicted from the amplification Γ of the node order
(``extra["predicted_error"]``), ``refine: auto`` adds the sweeps it needs, and they stay accurate to
p ≥ 128 on homogeneous paths, rings, meshes, tori, stars and random geometric graphs
(``benchmarks/poly_accuracy.py``, docs/BALANCERS.md). The thesis' forms remain available by parameter
as the faithful reference. Measured for them (largest relative flow error over random trees, paths,
rings, meshes and stars, capacities in [0.5, 3), weights in [0.2, 1), 5 seeds each): LPS and LPA stay
below 1e-8 up to p = 9 (p = 10 without stars) with every coefficient method — exact rational
coefficients give errors of the same size: evaluating the polynomial is itself ill-conditioned. Two
``refine`` sweeps of iterative refinement ``f ← f + Θ̃ (l − l̄ − A f)`` (the computed operator applied to
the local balance defects) extend this to p = 12 (13); beyond, the errors reach O(1), and near p = 24
a_{p−1} itself rounds to 0 (BalancerError).

The coefficient methods, Berlekamp–Massey and the Krylov kernels are in :mod:`hermes.balance.polynomial.charpoly`,
LPA's rows of the balancing operator in :mod:`hermes.balance.polynomial.balancing_operator` (the public names of both
are re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
from pydantic import Field

from hermes.balance.central import charge_central, charpoly_units, with_central
from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, ordered_total, validate_model
from hermes.balance.interface import BalanceContext, Decision, Params, flow_balancer
from hermes.balance.model import Model
from hermes.balance.polynomial.balancing_operator import operator_row_distributed, operator_rows, refine_rows, row_flows
from hermes.balance.polynomial.charpoly import (
    COEFFICIENT_METHODS,
    NeighbourTables,
    PolyState,
    check_eigen_refine,
    check_method,
    check_refine,
    laplacian_polynomial,
    literal_refine,
    neighbour_krylov,
    poly_local_result,
    poly_result,
    polynomial_potential,
)
from hermes.balance.polynomial.leja import (
    Refine,
    SpectralPlan,
    leja_distributed,
    leja_flow,
    leja_iter,
    leja_row_distributed,
    leja_rows,
    check_spectrum,
    plan_refine,
    product_form,
    resolve_refine,
    serial_spectrum,
    spectral_plan,
    with_plan_info,
)
from hermes.balance.polynomial.precompute import SPECTRUM_CHARGES
from hermes.balance.registry import register
from hermes.runtime.comm import NeighbourComm, bcast, ordered_sum
from hermes.errors import BalancerError

__all__ = ["lps_iter", "lps", "lps_schedule", "lps_distributed", "lpa_iter", "lpa", "lpa_eigen_schedule",
           "lpa_schedule", "lpa_distributed", "FORMS", "LPSParams"]

#: the coefficient forms of LPS and LPA: ``eigen`` (product form over the distinct eigenvalues in Leja
#: order, :mod:`hermes.balance.polynomial.leja`; the default) or the thesis' coefficient algorithms
FORMS = ("eigen",) + COEFFICIENT_METHODS


def _check_form(coefficients, name: str = "coefficients") -> None:
    if isinstance(coefficients, str) and coefficients not in FORMS:
        raise BalancerError(f"{name} must be one of {', '.join(FORMS)}, got {coefficients!r}")



# -- LPS (thesis Alg. 9) ----------------------------------------------------------------------------------
def _lps_coef(a, p: int):
    return [a[p - 2 - t] for t in range(p - 1)]


def lps_iter(model: Model, coefficients="eigen", *, refine="auto") -> Iterator[PolyState]:
    """LPS serially (thesis Alg. 9): yields the Krylov vector of every neighbour step, the flow last.

    Parameters
    ----------
    model : Model
    coefficients : {"eigen", "faddeev", "newton", "berkowitz"} or array
        ``eigen``: the product form over the distinct eigenvalues in Leja order
        (:func:`hermes.balance.polynomial.leja.leja_iter`; ``value`` is the remaining imbalance ``x_k``). Otherwise
        the thesis' monomial form with the Laplacian-polynomial coefficients computed by that method
        (:func:`laplacian_polynomial`), or ``[1, a_1, …]`` themselves.
    refine : int or "auto"
        Refinement sweeps: the polynomial applied again to the local balance defects (``auto``: eigen
        form only, from the predicted error).

    Notes
    -----
    Alg. 9 in the similar form ``A = L D⁻¹ = D^{1/2} 𝓛 D^{-1/2}`` (rank i sends ``x_i / c_i``, so it needs
    no neighbour capacities): ``b_0 = l``, ``b_{t+1} = A b_t``,
    ``y = Σ_{t=0}^{p−2} a_{p−2−t} b_t / (a_{p−1} c)``, ``f_ij = −w_ij (y_i − y_j)`` (eq. 8.2.4, Lemma 14).
    The printed loop sends ``s^{(p−2)}`` once more although ``s^{(p−1)}`` is never used: p−2 steps suffice.
    """
    validate_model(model)
    _check_form(coefficients)
    if isinstance(coefficients, str) and coefficients == "eigen":
        plan = spectral_plan(model)
        r = resolve_refine(plan, check_eigen_refine(refine))
        last = None
        for last in leja_iter(model, plan, refine=r):
            yield PolyState(last.iteration, last.residual)
        yield PolyState(last.iteration, last.residual, last.flow, {"plan": plan, "refine": r})
        return
    refine = literal_refine(refine)
    a = laplacian_polynomial(model, coefficients) if isinstance(coefficients, str) else np.asarray(coefficients)
    p, c, g = model.p, model.capacities, NeighbourTables(model)
    flow = np.zeros(model.q)
    if p > 1:
        xs = g.krylov(model.loads, p - 2)
        yield from (PolyState(t, x) for t, x in enumerate(xs))
        for sweep in range(refine + 1):
            xs = xs if sweep == 0 else g.krylov(g.defect(flow), p - 2)
            flow = flow + g.potential_flow(polynomial_potential(_lps_coef(a, p), xs, a[p - 1], c))
    yield PolyState(max(p - 2, 0), xs[-1] if p > 1 else model.loads, flow, {"coefficients": a})


def lps_schedule(p: int, refine: int = 0) -> list:
    return [(1, [("allreduce", 2)]), ((refine + 1) * (p - 1), [("exchange", 1)])]


def lps(model: Model, coefficients="eigen", *, refine="auto", spectrum: str = "charged", links=None) -> FlowResult:
    """Laplacian-polynomial scheme LPS (thesis Alg. 9): serial reference of :func:`lps_distributed`.

    Returns
    -------
    FlowResult
        Monomial forms: ``iterations = p − 2`` (neighbour steps of the polynomial). Counters:
        ``{"allreduce": 1}`` (input check), ``exchange_rounds = (refine + 1)(p − 1)`` of one word: the
        thesis' p−1 communication phases. ``eigen``: ``iterations = exchange_rounds = (refine + 1) n``
        (n distinct non-zero eigenvalues, ≤ p − 1; :func:`hermes.balance.polynomial.leja.leja_flow`), ``extra`` the
        plan's steps, amplification and predicted error; ``spectrum`` (charged: the precomputation first,
        :mod:`hermes.balance.polynomial.precompute`; ignored by the monomial forms, which compute no spectrum).
    """
    _check_form(coefficients)
    if isinstance(coefficients, str) and coefficients == "eigen":
        return leja_flow(model, refine=check_eigen_refine(refine), links=links, spectrum=spectrum)
    refine = literal_refine(refine)
    *_, last = lps_iter(model, coefficients, refine=refine)
    return poly_result(model, last.flow, max(model.p - 2, 0), lps_schedule(model.p, refine), links,
                   coefficients=last.info["coefficients"])


def lps_distributed(nb: NeighbourComm, load: float, capacity: float, weights, coefficients, *,
                    refine: int = 0) -> LocalFlowResult:
    """LPS on one rank (SPMD): ``coefficients`` ``[1, a_1, …]`` of the Laplacian polynomial, the same on every rank.

    Notes
    -----
    See :func:`lps_iter`. Communication: the input-check allreduce (Σl), then per sweep p−2 exchanges of
    ``x_i / c_i`` and one of ``y_i``; a refinement sweep starts from ``l_i − c_i Σl − Σ_j f_ij``.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, w, extra_checks=lambda: check_refine(refine))
    p, a, capacity = nb.size, np.asarray(coefficients, dtype=np.float64), float(capacity)
    flows, x0 = np.zeros(len(w)), float(load)
    for _ in range(refine + 1 if p > 1 else 0):
        y = polynomial_potential(_lps_coef(a, p), neighbour_krylov(nb, x0, p - 2, capacity, w), a[p - 1], capacity)
        flows = flows - w * (y - nb.exchange_scalar(y))
        x0 = (float(load) - capacity * total) - ordered_sum(flows)
    return poly_local_result(nb, flows, max(p - 2, 0))


# -- LPA (thesis Alg. 11, 12, §9.4) -----------------------------------------------------------------------
def lpa_iter(model: Model, coefficients="eigen", *, refine="auto") -> Iterator[PolyState]:
    """LPA serially (thesis Alg. 12): yields the coefficients after every Faddeev step, the flow last.

    Parameters
    ----------
    coefficients : {"eigen", "faddeev", "newton", "berkowitz"}
        ``eigen`` (default): the rows ``Y_r`` from the product form over the distinct eigenvalues in Leja
        order (:func:`hermes.balance.polynomial.leja.leja_rows`; one step per node, ``value`` the nodes so far), and
        the centred loads ``l − c Σl`` allgathered. ``faddeev``: the traces are allreduced step by step
        (Alg. 12); otherwise the Laplacian-polynomial coefficients are computed beforehand by that method
        and the allreduces are skipped.
    refine : int or "auto"
        Refinement sweeps ``f ← f + Θ̃ (l − l̄ − A f)`` with the rows held (one allgather each); ``auto``
        (eigen only) from the predicted error.

    Notes
    -----
    ``f_ij = −w_ij Σ_k (Y_ik − Y_jk) l_k``: the rows are exchanged, the loads allgathered (Alg. 12's end).
    """
    validate_model(model)
    _check_form(coefficients)
    if coefficients == "eigen":
        yield from _lpa_eigen_iter(model, spectral_plan(model), check_eigen_refine(refine))
        return
    refine = literal_refine(refine)
    check_method(coefficients)
    known = None if coefficients == "faddeev" else laplacian_polynomial(model, coefficients)
    g, a, rows = NeighbourTables(model), [1.0], None
    for k, a_k, y in operator_rows(model, known):
        if y is None:
            a.append(a_k)
            yield PolyState(k, np.array(a))
        rows = y
    flow = g.operator_flow(rows, model.loads) if model.p > 1 else np.zeros(0)
    for _ in range(refine if model.p > 1 else 0):
        flow = flow + g.operator_flow(rows, g.defect(flow))
    yield PolyState(model.p - 1, np.array(a), flow, {"rows": rows})


def _lpa_eigen_iter(model: Model, plan: SpectralPlan, refine) -> Iterator[PolyState]:
    r = resolve_refine(plan, refine)
    for k in range(plan.steps):
        yield PolyState(k + 1, plan.nodes[:k + 1].copy())
    g = NeighbourTables(model)
    rows = leja_rows(model, plan.nodes)
    flow = g.operator_flow(rows, model.loads - model.capacities * ordered_total(model.loads)) if model.p > 1 \
        else np.zeros(0)
    for _ in range(r if model.p > 1 else 0):
        flow = flow + g.operator_flow(rows, g.defect(flow))
    yield PolyState(plan.steps, plan.nodes.copy(), flow, {"rows": rows, "plan": plan, "refine": r})


def lpa_eigen_schedule(p: int, steps: int, refine: int = 0) -> list:
    """Input check; ``steps`` exchanges of the p-word rows; the row exchange and the allgather of the centred
    loads; one allgather per refinement sweep."""
    if p < 2:
        return [(1, [("allreduce", 2)])]
    return [(1, [("allreduce", 2)]), (steps, [("exchange", p)]), (1, [("exchange", p), ("allgather", p)]),
            (refine, [("allgather", p)])]


def lpa_schedule(p: int, refine: int = 0, known: bool = False) -> list:
    if p < 2:
        return [(1, [("allreduce", 2)])]
    step = [("exchange", p)] if known else [("exchange", p), ("allreduce", 1)]
    return [(1, [("allreduce", 2)]), (p - 1, step), (1, [("exchange", p), ("allgather", p)]),
            (refine, [("allgather", p)])]


def lpa(model: Model, coefficients="eigen", *, refine="auto", spectrum: str = "charged", links=None) -> FlowResult:
    """Improved Laplacian-polynomial algorithm LPA (thesis Alg. 12): serial reference of :func:`lpa_distributed`.

    Returns
    -------
    FlowResult
        ``iterations = p − 1`` Faddeev steps. Counters: ``exchange_rounds = p`` (the steps and the row
        exchange, p words each), collectives ``{"allreduce": p, "allgather": 1 + refine}`` (input check and
        p−1 traces — ``allreduce: 1`` with known coefficients —, the loads, the refinement defects), the
        collectives of the thesis' estimate ``T^gcomm = p T^ar + T^ag`` (§8.6). ``eigen``: n steps (the
        distinct non-zero eigenvalues), ``exchange_rounds = n + 1``, ``{"allreduce": 1, "allgather":
        1 + refine}`` (charged spectrum: and one ``gather``, one ``bcast``, as :func:`lps`); ``extra`` the plan's
        amplification and predicted error, and what the spectrum cost (``spectrum_time``).
    """
    *_, last = lpa_iter(model, coefficients, refine=refine)
    if coefficients == "eigen":
        plan, r = last.info["plan"], last.info["refine"]
        res = poly_result(model, last.flow, plan.steps if model.p > 1 else 0,
                          lpa_eigen_schedule(model.p, plan.steps, r), links, **plan.report(r))
        res.counters, times, spent = serial_spectrum(res.counters, res.extra["rank_times"], model, plan.steps, links,
                                                     check_spectrum(spectrum), plan.extra_units)
        res.extra.update(spent, rank_times=times)
        return res
    return poly_result(model, last.flow, max(model.p - 1, 0),
                   lpa_schedule(model.p, literal_refine(refine), coefficients != "faddeev"),
                   links, coefficients=last.value)


def lpa_distributed(nb: NeighbourComm, load: float, capacity: float, weights, *, coefficients=None,
                    nodes=None, refine: int = 0) -> LocalFlowResult:
    """LPA on one rank (SPMD; every rank of ``nb.comm`` must call it).

    ``nodes`` (the plan's :attr:`~hermes.balance.polynomial.leja.SpectralPlan.nodes`, the same on every rank) select
    the eigen form: the rows by :func:`hermes.balance.polynomial.leja.leja_row_distributed` and the centred loads
    ``l_r − c_r Σl`` allgathered. Otherwise ``coefficients`` ``[1, a_1, …]`` known on every rank skip the
    trace allreduces (None: Alg. 12). ``extra`` holds ``row`` (``Y_r``) and ``rows`` (the neighbours' rows).
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, w, extra_checks=lambda: check_refine(refine))
    p = nb.size
    if p == 1:
        return poly_local_result(nb, np.zeros(0), 0)
    fair = float(load) - float(capacity) * total
    if nodes is not None:
        row, x, steps = leja_row_distributed(nb, float(capacity), w, nodes), fair, len(nodes)
    else:
        row, x, steps = operator_row_distributed(nb, float(capacity), w, coefficients), float(load), p - 1
    rows = np.array(nb.exchange([row] * len(w), recv_sizes=np.full(len(w), p)))
    flows = row_flows(w, row, rows, nb.allgather_rows(x)[:, 0])
    flows = refine_rows(nb, flows, w, row, rows, fair, refine)
    return poly_local_result(nb, flows, steps, row=row, rows=rows)


# -- registry -------------------------------------------------------------------------------------------
class LPSParams(Params):
    """Parameters of ``lps`` and ``lpa``."""

    coefficients: Literal["eigen", "faddeev", "newton", "berkowitz"] = Field(
        "eigen", description="eigen: product form over the distinct eigenvalues in Leja order; or the thesis' "
        "coefficient algorithms (monomial form, accurate to p ≈ 10–12)")
    refine: Refine = Field("auto", description="refinement sweeps f ← f + Θ̃ (l − l̄ − A f): 0..20 or auto")
    spectrum: Literal[SPECTRUM_CHARGES] = Field(
        "charged", description="eigen form: the spectral precomputation (gather of the graph, eigensolve on rank 0, "
        "broadcast) charged to the clock when computed, or free (the thesis' globally known H)")


def _lps_dist(nb, load, capacity, weights, *, poly, plan, **params):
    """:func:`lps_distributed` (or the Leja product form of the plan) as :func:`flow_balancer` calls it;
    ``params``: the balancer's (:class:`LPSParams`), ``poly`` the coefficients computed centrally."""
    if plan[0] is not None:
        return product_form(nb, load, capacity, weights, plan)
    return lps_distributed(nb, load, capacity, weights, poly, refine=literal_refine(LPSParams.of(params).refine))


def _lpa_dist(nb, load, capacity, weights, *, known, plan, **params):
    """:func:`lpa_distributed` as :func:`flow_balancer` calls it: over the plan's nodes (eigen form) or from the
    ``known`` coefficients; ``params``: the balancer's (:class:`LPSParams`)."""
    if plan[0] is not None:
        return lpa_distributed(nb, load, capacity, weights, nodes=plan[0].nodes, refine=plan[1])
    refine = literal_refine(LPSParams.of(params).refine)
    return lpa_distributed(nb, load, capacity, weights, coefficients=known, refine=refine)


def _central_polynomial(ctx, method: str):
    """The Laplacian polynomial's coefficients as rank 0 would compute and broadcast them (docs/COSTS.md: its
    ``2 p⁴`` flops charged to rank 0, the p + 1 words broadcast; collective)."""
    coef = laplacian_polynomial(ctx.model, method)
    charge_central(ctx.comm, ctx.clock, ctx.nb.counters, charpoly_units(ctx.model.p))
    if ctx.comm.Get_size() > 1 and ctx.clock is not None:
        bcast(ctx.comm, np.zeros(np.size(coef)), 0, ctx.clock, counters=ctx.nb.counters)
    return coef


def _coefficient_charges(model: Model, params, free: tuple[str, ...]) -> list[tuple[float, int]]:
    """The serial references' share of :func:`_central_polynomial`: the coefficients' central work and broadcast,
    unless ``params["coefficients"]`` is one of ``free`` (computed in the iteration, or the spectral plan's)."""
    method = params.get("coefficients", "faddeev")
    return [] if method in free else [(charpoly_units(model.p), model.p + 1)]


def _known(ctx):
    method = ctx.params.get("coefficients", "faddeev")
    return None if method in ("faddeev", "eigen") else _central_polynomial(ctx, method)


def _poly(ctx):
    method = ctx.params["coefficients"]
    return None if method == "eigen" else _central_polynomial(ctx, method)


_EIGEN_DOC = ("; coefficients eigen (default): product form over the distinct eigenvalues in Leja order, plan "
              "reused while the graph is unchanged, refine auto from the predicted error")


@register("lps", params=LPSParams, serial=with_central(lps, lambda m, prm: _coefficient_charges(m, prm, ("eigen",))),
          doc="Laplacian-polynomial scheme (thesis Alg. 9): neighbour steps only, no collective but the input check; "
              "coefficients faddeev | newton | berkowitz: the thesis' monomial form (accurate to p ≈ 10)" + _EIGEN_DOC)
def run_lps(ctx: BalanceContext) -> Decision:
    return with_plan_info(ctx, flow_balancer(_lps_dist, poly=_poly, plan=plan_refine)(ctx))


@register("lpa", params=LPSParams,
          serial=with_central(lpa, lambda m, prm: _coefficient_charges(m, prm, ("faddeev", "eigen"))),
          doc="improved Laplacian-polynomial algorithm (thesis Alg. 11–12): rows of the balancing operator, one "
              "allgather of the loads; coefficients faddeev: parallel Faddeev–LeVerrier with one allreduce per step "
              "(newton | berkowitz: none; accurate to p ≈ 12)" + _EIGEN_DOC)
def run_lpa(ctx: BalanceContext) -> Decision:
    return with_plan_info(ctx, flow_balancer(_lpa_dist, known=_known, plan=plan_refine)(ctx))
