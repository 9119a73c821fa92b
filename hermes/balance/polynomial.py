"""Polynomial balancing schemes: LPS, LPA (Laplacian polynomial) and MPA (minimum polynomial), thesis §8.2–8.5.

With ``A = L D⁻¹`` (similar to the generalized Laplacian 𝓛 = D^{-1/2} L D^{-1/2}, same characteristic
polynomial ``χ(μ) = Σ_k a_k μ^{p−k}``, ``a_0 = 1``, ``a_p = 0``) Cayley–Hamilton gives the minimal flow as a
polynomial in A (thesis eq. 8.2.4, Lemma 14, Th. 22–23)::

    φ = −W Aᵀ D⁻¹ U l,    U = (A^{p−2} + a_1 A^{p−3} + … + a_{p−2} I) / a_{p−1},

i.e. ``φ_ij = −w_ij (y_i − y_j)`` with potentials ``y = D⁻¹ U l``. The three schemes differ in how they
get the polynomial and apply it:

* **LPS** (Alg. 9): coefficients known beforehand (Faddeev–LeVerrier Alg. 11, Newton's identities
  Alg. 10, or division-free Berkowitz, §8.2.1); ``u = Σ_t a_{p−2−t} Aᵗ l`` by p−2 neighbour steps,
  then one exchange of ``y``: p−1 communication phases, no collective (but hermes' input check).
* **LPA** (Alg. 12): Faddeev–LeVerrier run in parallel, rank r holding row r of the iterate
  ``M_{k+1} = A M_k + a_k I``, ``a_k = −tr(A M_k)/k`` (one allreduce of the trace per step): p−1 neighbour
  steps, then one exchange of the rows ``Y_r = U_r / c_r`` and one allgather of the loads.
* **MPA** (Alg. 13–15, Wiedemann): 2p Krylov steps ``b_k = A b_{k−1}``, one gather of the projections
  ``S_k = uᵀ b_k`` (random u), Berlekamp–Massey (Alg. 14) for the minimal generating polynomial
  ``α_0 x^d + … + α_d`` (``α_d = 0``), ``y = D⁻¹ (α_0 b_{d−2} + … + α_{d−2} b_0) / α_{d−1}``, one
  exchange of y.

Every flow equals :func:`~hermes.balance.flow.minimal_flow` in exact arithmetic. In double precision the
monomial basis limits them. Measured (largest relative flow error over random trees, paths, rings, meshes
and stars, capacities in [0.5, 3), weights in [0.2, 1), 5 seeds each): LPS and LPA stay below 1e-8 up to
p = 9 (p = 10 without stars) with every coefficient method — exact rational coefficients give errors of
the same size: evaluating the polynomial is itself ill-conditioned. Two ``refine`` sweeps of iterative
refinement ``f ← f + Θ̃ (l − l̄ − A f)`` (the computed operator applied to the local balance defects)
extend this to p = 12 (13); beyond, the errors reach O(1), and near p = 24 a_{p−1} itself rounds to 0
(BalancerError). MPA stays below 1e-8 up to p = 4 (5 with refine) on these graphs, but at any p when the
minimal polynomial has a low degree d ≲ 6 (complete graphs, stars, hypercubes, homogeneous rings): its
accuracy is governed by d, not p.

The coefficient methods, Berlekamp–Massey and the Krylov kernels are in :mod:`hermes.balance.charpoly`,
LPA's rows of the balancing operator in :mod:`hermes.balance.balancing_operator` (the public names of both
are re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.balancing_operator import _refine_rows, _row_flows, operator_row_distributed, operator_rows
from hermes.balance.charpoly import (COEFFICIENT_METHODS, _allgather, _check_method, _check_refine, _Graph, _nb_krylov,
                                    _ordered, _potential, schedule_counters, berlekamp_massey, charpoly_berkowitz, charpoly_faddeev, charpoly_newton,
                                    generalized_laplacian, laplacian_polynomial)
from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, alpha_beta_time, validate_model
from hermes.balance.model import Model
from hermes.balance.registry import BalancerInfo, flow_balancer
from hermes.comm import Counters, NeighbourComm
from hermes.errors import BalancerError

__all__ = ["COEFFICIENT_METHODS", "generalized_laplacian", "charpoly_faddeev", "charpoly_newton",
           "charpoly_berkowitz", "laplacian_polynomial", "berlekamp_massey", "mpa_scale", "PolyState",
           "operator_rows", "operator_row_distributed", "schedule_counters", "lps_iter", "lps", "lps_schedule",
           "lps_distributed", "lpa_iter", "lpa", "lpa_schedule", "lpa_distributed", "mpa_iter", "mpa", "mpa_schedule",
           "mpa_distributed", "REGISTRY"]


def mpa_scale(model: Model) -> float:
    """Power of two ≥ the Gershgorin bound ``max_i 2 δ_i^w / c_i`` on the eigenvalues of ``L D⁻¹``.

    MPA divides every Krylov step by it (exact in binary arithmetic) so that ``(L D⁻¹)^{2p} l`` cannot overflow.
    """
    g = float(np.max(2.0 * model.weighted_degree / model.capacities)) if model.q else 1.0
    return float(2.0 ** math.ceil(math.log2(g))) if g > 0 else 1.0


# -- shared state and counters (the Krylov kernels are in hermes.balance.charpoly) -------------------------
@dataclass
class PolyState:
    """One step of a polynomial scheme's serial generator.

    ``iteration`` counts neighbour steps; ``value`` is the Krylov vector ``b_k`` (LPS, MPA) or the
    coefficients ``a_0..a_k`` found so far (LPA). ``flow`` is set on the last state only.
    """

    iteration: int
    value: NDArray[np.float64]
    flow: NDArray[np.float64] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def _result(model, flow, iterations, schedule, links, **extra) -> FlowResult:
    cnt, times = schedule_counters(model, iterations, schedule, links)
    return FlowResult(flow=flow, iterations=iterations, converged=bool(np.all(np.isfinite(flow))), counters=cnt,
                      extra={**extra, "rank_times": times})


def _local(nb, flows, iterations, **extra) -> LocalFlowResult:
    nb.counters.iterations = iterations
    return LocalFlowResult(flows=np.asarray(flows, dtype=np.float64), iterations=iterations,
                           converged=bool(np.all(np.isfinite(flows))), counters=nb.counters, extra=extra)


# -- LPS (thesis Alg. 9) ----------------------------------------------------------------------------------
def _lps_coef(a, p: int):
    return [a[p - 2 - t] for t in range(p - 1)]


def lps_iter(model: Model, coefficients="faddeev", *, refine: int = 0) -> Iterator[PolyState]:
    """LPS serially (thesis Alg. 9): yields the Krylov vector of every neighbour step, the flow last.

    Parameters
    ----------
    model : Model
    coefficients : {"faddeev", "newton", "berkowitz"} or array
        How the Laplacian-polynomial coefficients are computed (:func:`laplacian_polynomial`), or
        ``[1, a_1, …]`` themselves.
    refine : int
        Refinement sweeps: the polynomial applied again to the local balance defects.

    Notes
    -----
    Alg. 9 in the similar form ``A = L D⁻¹ = D^{1/2} 𝓛 D^{-1/2}`` (rank i sends ``x_i / c_i``, so it needs
    no neighbour capacities): ``b_0 = l``, ``b_{t+1} = A b_t``,
    ``y = Σ_{t=0}^{p−2} a_{p−2−t} b_t / (a_{p−1} c)``, ``f_ij = −w_ij (y_i − y_j)`` (eq. 8.2.4, Lemma 14).
    The printed loop sends ``s^{(p−2)}`` once more although ``s^{(p−1)}`` is never used: p−2 steps suffice.
    """
    validate_model(model)
    refine = _check_refine(refine)
    a = laplacian_polynomial(model, coefficients) if isinstance(coefficients, str) else np.asarray(coefficients)
    p, c, g = model.p, model.capacities, _Graph(model)
    flow = np.zeros(model.q)
    if p > 1:
        xs = g.krylov(model.loads, p - 2)
        yield from (PolyState(t, x) for t, x in enumerate(xs))
        for sweep in range(refine + 1):
            xs = xs if sweep == 0 else g.krylov(g.defect(flow), p - 2)
            flow = flow + g.potential_flow(_potential(_lps_coef(a, p), xs, a[p - 1], c))
    yield PolyState(max(p - 2, 0), xs[-1] if p > 1 else model.loads, flow, {"coefficients": a})


def lps_schedule(p: int, refine: int = 0) -> list:
    return [(1, [("allreduce", 2)]), ((refine + 1) * (p - 1), [("exchange", 1)])]


def lps(model: Model, coefficients="faddeev", *, refine: int = 0, links=None) -> FlowResult:
    """Laplacian-polynomial scheme LPS (thesis Alg. 9): serial reference of :func:`lps_distributed`.

    Returns
    -------
    FlowResult
        ``iterations = p − 2`` (neighbour steps of the polynomial). Counters: ``{"allreduce": 1}`` (input
        check), ``exchange_rounds = (refine + 1)(p − 1)`` of one word: the thesis' p−1 communication phases.
    """
    *_, last = lps_iter(model, coefficients, refine=refine)
    return _result(model, last.flow, max(model.p - 2, 0), lps_schedule(model.p, refine), links,
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
    total = agree_local_inputs(nb, load, capacity, w, extra_checks=lambda: _check_refine(refine))
    p, a, capacity = nb.size, np.asarray(coefficients, dtype=np.float64), float(capacity)
    flows, x0 = np.zeros(len(w)), float(load)
    for _ in range(refine + 1 if p > 1 else 0):
        y = _potential(_lps_coef(a, p), _nb_krylov(nb, x0, p - 2, capacity, w), a[p - 1], capacity)
        flows = flows - w * (y - nb.exchange_scalar(y))
        x0 = (float(load) - capacity * total) - _ordered(flows)
    return _local(nb, flows, max(p - 2, 0))


# -- LPA (thesis Alg. 11, 12, §9.4) -----------------------------------------------------------------------
def lpa_iter(model: Model, coefficients="faddeev", *, refine: int = 0) -> Iterator[PolyState]:
    """LPA serially (thesis Alg. 12): yields the coefficients after every Faddeev step, the flow last.

    Parameters
    ----------
    coefficients : {"faddeev", "newton", "berkowitz"}
        ``faddeev``: the traces are allreduced step by step (Alg. 12); otherwise the Laplacian-polynomial
        coefficients are computed beforehand by that method and the allreduces are skipped.
    refine : int
        Refinement sweeps ``f ← f + Θ̃ (l − l̄ − A f)`` with the rows held (one allgather each).

    Notes
    -----
    ``f_ij = −w_ij Σ_k (Y_ik − Y_jk) l_k``: the rows are exchanged, the loads allgathered (Alg. 12's end).
    """
    validate_model(model)
    refine = _check_refine(refine)
    _check_method(coefficients)
    known = None if coefficients == "faddeev" else laplacian_polynomial(model, coefficients)
    g, a, rows = _Graph(model), [1.0], None
    for k, a_k, y in operator_rows(model, known):
        if y is None:
            a.append(a_k)
            yield PolyState(k, np.array(a))
        rows = y
    flow = g.operator_flow(rows, model.loads) if model.p > 1 else np.zeros(0)
    for _ in range(refine if model.p > 1 else 0):
        flow = flow + g.operator_flow(rows, g.defect(flow))
    yield PolyState(model.p - 1, np.array(a), flow, {"rows": rows})


def lpa_schedule(p: int, refine: int = 0, known: bool = False) -> list:
    if p < 2:
        return [(1, [("allreduce", 2)])]
    step = [("exchange", p)] if known else [("exchange", p), ("allreduce", 1)]
    return [(1, [("allreduce", 2)]), (p - 1, step), (1, [("exchange", p), ("allgather", p)]),
            (refine, [("allgather", p)])]


def lpa(model: Model, coefficients="faddeev", *, refine: int = 0, links=None) -> FlowResult:
    """Improved Laplacian-polynomial algorithm LPA (thesis Alg. 12): serial reference of :func:`lpa_distributed`.

    Returns
    -------
    FlowResult
        ``iterations = p − 1`` Faddeev steps. Counters: ``exchange_rounds = p`` (the steps and the row
        exchange, p words each), collectives ``{"allreduce": p, "allgather": 1 + refine}`` (input check and
        p−1 traces — ``allreduce: 1`` with known coefficients —, the loads, the refinement defects), the
        collectives of the thesis' estimate ``T^gcomm = p T^ar + T^ag`` (§8.6).
    """
    *_, last = lpa_iter(model, coefficients, refine=refine)
    return _result(model, last.flow, max(model.p - 1, 0), lpa_schedule(model.p, refine, coefficients != "faddeev"),
                   links, coefficients=last.value)


def lpa_distributed(nb: NeighbourComm, load: float, capacity: float, weights, *, coefficients=None,
                    refine: int = 0) -> LocalFlowResult:
    """LPA on one rank (SPMD; every rank of ``nb.comm`` must call it).

    ``coefficients`` ``[1, a_1, …]`` known on every rank skip the trace allreduces (None: Alg. 12).
    ``extra`` holds ``row`` (``Y_r``) and ``rows`` (the neighbours' rows).
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, w, extra_checks=lambda: _check_refine(refine))
    p = nb.size
    if p == 1:
        return _local(nb, np.zeros(0), 0)
    row = operator_row_distributed(nb, float(capacity), w, coefficients)
    rows = np.array(nb.exchange([row] * len(w), recv_sizes=np.full(len(w), p)))
    flows = _row_flows(w, row, rows, _allgather(nb, float(load))[:, 0])
    flows = _refine_rows(nb, flows, w, row, rows, float(load) - float(capacity) * total, refine)
    return _local(nb, flows, p - 1, row=row, rows=rows)


# -- MPA (thesis Alg. 13–15) ------------------------------------------------------------------------------
def _mpa_steps(p: int, max_degree) -> int:
    return 2 * (p if max_degree is None else min(p, int(max_degree)))


def _check_mpa(tolerance, max_degree, prefix: str = "") -> None:
    sep = ":" if prefix else ""
    if isinstance(tolerance, bool) or not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 1):
        raise BalancerError(f"{prefix}tolerance{sep} must be a number in [0, 1), got {tolerance!r}")
    if max_degree is not None and (isinstance(max_degree, bool) or not isinstance(max_degree, (int, np.integer))
                                   or max_degree < 1):
        raise BalancerError(f"{prefix}max_degree{sep} must be a positive integer, got {max_degree!r}")


def _mpa_coef(alpha) -> tuple[list, float]:
    """Terms of ``y`` in ``b_0, b_1, …``: ``α_{d−2−t}``, t = 0..d−2, and the divisor ``α_{d−1}``."""
    d = len(alpha) - 1
    return [alpha[d - 2 - t] for t in range(d - 1)], (alpha[d - 1] if d >= 1 else 1.0)


def mpa_iter(model: Model, *, tolerance: float = 1e-13, max_degree: int | None = None, seed: int = 0,
             scale: float | None = None, refine: int = 0) -> Iterator[PolyState]:
    """MPA serially (thesis Alg. 15): yields every Krylov vector, the flow last.

    Parameters
    ----------
    tolerance : float
        Relative zero threshold of Berlekamp–Massey's discrepancy (:func:`berlekamp_massey`).
    max_degree : int, optional
        A known bound d on the degree of the minimal polynomial: 2d Krylov steps instead of 2p (an
        underestimate gives a wrong flow).
    seed : int
        The random projection ``u`` (standard normal, the same on every rank).
    scale : float, optional
        Divides every Krylov step (default :func:`mpa_scale`, a power of two: no rounding).
    refine : int
        Sweeps applying the polynomial found to the local balance defects (d−2 steps, one exchange).

    Notes
    -----
    Alg. 15 read with k from 1 and j over the neighbours: ``b_k = A b_{k−1} / s`` for k = 1..2p (rank i
    holds ``v[k] = (b_k)_i``); one gather of ``u_i v[0..2p]`` gives ``S_k = uᵀ b_k``; Berlekamp–Massey on S
    gives ``α_0 x^d + … + α_d`` (``α_d ≈ 0``: the eigenvalue 0); ``y = (α_0 b_{d−2} + … + α_{d−2} b_0) /
    (α_{d−1} s c)`` and ``f_ij = −w_ij (y_i − y_j)``. With ``B = A/s`` and ``g = s c y``:
    ``B g = q(B) l / α_{d−1} − l = (eᵀl) c − l`` (thesis §8.5), so f is a balancing flow.
    ``info["degree"]`` is d, the number of distinct eigenvalues of A excited by l and u.
    """
    validate_model(model)
    _check_mpa(tolerance, max_degree)
    refine = _check_refine(refine)
    p, c, g = model.p, model.capacities, _Graph(model)
    if p == 1:
        yield PolyState(0, model.loads, np.zeros(0), {"degree": 0})
        return
    s = mpa_scale(model) if scale is None else float(scale)
    vs = g.krylov(model.loads, _mpa_steps(p, max_degree), s)
    yield from (PolyState(k, v) for k, v in enumerate(vs))
    u = np.random.default_rng(seed).standard_normal(p)
    alpha = berlekamp_massey(np.cumsum(u[None, :] * np.array(vs), axis=1)[:, -1], tolerance, stop_after=2)
    coef, div = _mpa_coef(alpha)
    flow = g.potential_flow(_potential(coef, vs, div * s, c))
    for _ in range(refine):
        flow = flow + g.potential_flow(_potential(coef, g.krylov(g.defect(flow), len(coef) - 1, s), div * s, c))
    yield PolyState(len(vs) - 1, vs[-1], flow, {"degree": len(alpha) - 1, "alpha": alpha, "scale": s})


def mpa_schedule(p: int, steps: int, degree: int, refine: int = 0) -> list:
    if p < 2:
        return [(1, [("allreduce", 2)])]
    return [(1, [("allreduce", 2)]), (steps, [("exchange", 1)]), (1, [("allgather", steps + 1), ("exchange", 1)]),
            (refine * (max(degree - 2, 0) + 1), [("exchange", 1)])]


def mpa(model: Model, *, tolerance: float = 1e-13, max_degree: int | None = None, seed: int = 0,
        scale: float | None = None, refine: int = 0, links=None) -> FlowResult:
    """Minimum-polynomial algorithm MPA (thesis Alg. 15): serial reference of :func:`mpa_distributed`.

    Returns
    -------
    FlowResult
        ``iterations = 2p`` Krylov steps (2·max_degree if smaller), ``extra["degree"]``. Counters:
        ``exchange_rounds = 2p + 1`` (+ ``refine (max(d−2, 0) + 1)``), collectives
        ``{"allreduce": 1, "allgather": 1}`` (input check; the gather of ``u_i v_i[0..2p]``): the thesis'
        estimate, (2p+1) local phases and ``T^gs`` (§8.6).
    """
    *_, last = mpa_iter(model, tolerance=tolerance, max_degree=max_degree, seed=seed, scale=scale, refine=refine)
    d = last.info["degree"]
    n = _mpa_steps(model.p, max_degree) if model.p > 1 else 0
    return _result(model, last.flow, n, mpa_schedule(model.p, n, d, refine), links, degree=d,
                   alpha=last.info.get("alpha"))


def mpa_distributed(nb: NeighbourComm, load: float, capacity: float, weights, *, tolerance: float = 1e-13,
                    max_degree: int | None = None, seed: int = 0, scale: float = 1.0,
                    refine: int = 0) -> LocalFlowResult:
    """MPA on one rank (SPMD). ``scale`` must be the same on every rank (the registry passes :func:`mpa_scale`).

    Notes
    -----
    See :func:`mpa_iter`. Alg. 15's gather is one collective of the 2p+1 products ``u_i v_i[k]``, summed in
    rank order (every rank then runs the same Berlekamp–Massey). ``extra["degree"]``.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check() -> None:
        _check_mpa(tolerance, max_degree)
        _check_refine(refine)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check)
    p, capacity, s = nb.size, float(capacity), float(scale)
    if p == 1:
        return _local(nb, np.zeros(0), 0, degree=0)
    n = _mpa_steps(p, max_degree)
    vs = _nb_krylov(nb, float(load), n, capacity, w, s)
    u = np.random.default_rng(seed).standard_normal(p)
    alpha = berlekamp_massey(nb.allreduce(u[nb.rank] * np.array(vs), kind="allgather"), tolerance, stop_after=2)
    coef, div = _mpa_coef(alpha)
    y = _potential(coef, vs, div * s, capacity)
    flows = -w * (y - nb.exchange_scalar(y))
    for _ in range(refine):
        x0 = (float(load) - capacity * total) - _ordered(flows)
        y = _potential(coef, _nb_krylov(nb, x0, len(coef) - 1, capacity, w, s), div * s, capacity)
        flows = flows - w * (y - nb.exchange_scalar(y))
    return _local(nb, flows, n, degree=len(alpha) - 1)


# -- registry -------------------------------------------------------------------------------------------
def _check_params(params: dict) -> None:
    """Registry check hook: one-line ``balancer.<key>: ...`` errors."""
    if "coefficients" in params:
        _check_method(params["coefficients"], "balancer.coefficients:")
    _check_refine(params.get("refine", 0), "balancer.refine:")
    if "max_degree" in params:
        _check_mpa(params.get("tolerance", 0.0), params["max_degree"], "balancer.")


def _lps_dist(nb, load, capacity, weights, *, coefficients, refine, poly):
    return lps_distributed(nb, load, capacity, weights, poly, refine=refine)


def _lpa_dist(nb, load, capacity, weights, *, coefficients, refine, known):
    return lpa_distributed(nb, load, capacity, weights, coefficients=known, refine=refine)


def _mpa_dist(nb, load, capacity, weights, *, seed, scale, **params):
    return mpa_distributed(nb, load, capacity, weights, seed=seed, scale=scale, **params)


def _known(ctx):
    method = ctx.params.get("coefficients", "faddeev")
    return None if method == "faddeev" else laplacian_polynomial(ctx.model, method)


REGISTRY: dict[str, BalancerInfo] = {
    "lps": BalancerInfo(
        "lps", flow_balancer(_lps_dist, poly=lambda ctx: laplacian_polynomial(ctx.model, ctx.params["coefficients"])),
        {"coefficients": "faddeev", "refine": 0},
        "Laplacian-polynomial scheme (thesis Alg. 9): coefficients computed beforehand from the model "
        "(faddeev | newton | berkowitz), p−1 neighbour phases, no collective but the input check",
        lambda model, *, coefficients="faddeev", refine=0, links=None: lps(model, coefficients, refine=refine,
                                                                            links=links), _check_params),
    "lpa": BalancerInfo(
        "lpa", flow_balancer(_lpa_dist, known=_known), {"coefficients": "faddeev", "refine": 0},
        "improved Laplacian-polynomial algorithm (thesis Alg. 11–12): parallel Faddeev–LeVerrier, p−1 steps "
        "with one allreduce each (none with coefficients newton | berkowitz), one allgather of the loads",
        lambda model, *, coefficients="faddeev", refine=0, links=None: lpa(model, coefficients, refine=refine,
                                                                            links=links), _check_params),
    "mpa": BalancerInfo(
        "mpa", flow_balancer(_mpa_dist, seed=lambda ctx: ctx.seed, scale=lambda ctx: mpa_scale(ctx.model)),
        {"tolerance": 1e-13, "max_degree": None, "refine": 0},
        "minimum-polynomial algorithm (thesis Alg. 13–15): 2p Krylov steps, one gather, Berlekamp–Massey",
        mpa, _check_params),
}
