"""The minimum-polynomial algorithm MPA (thesis §8.5, Alg. 13–15): from the spectrum or by Berlekamp–Massey.

MPA balances with the minimal polynomial ``q`` of A = L D⁻¹ (q(A) l = 0), of degree d ≤ p, which
needs fewer steps than LPS's characteristic polynomial when A has repeated eigenvalues:

* ``polynomial="spectrum"`` (default): A is diagonalizable, so q's roots are its distinct eigenvalues;
  applied as the product ``Π_k (I − A/μ_k)`` over the non-zero ones in Leja order
  (:func:`hermes.balance.polynomial.leja.leja_flow`): d − 1 neighbour steps of one word, no collective. For generic
  l and u Wiedemann's sequence below finds this same polynomial, so from the spectrum MPA and LPS's
  eigen form are the same scheme; what differs in the thesis is only how the polynomial is obtained.
* ``polynomial="berlekamp-massey"`` (thesis Alg. 13–15, Wiedemann): 2p Krylov steps ``b_k = A b_{k−1}``,
  one gather of the projections ``S_k = uᵀ b_k`` (random u), Berlekamp–Massey (Alg. 14) for the minimal
  generating polynomial ``α_0 x^d + … + α_d`` (``α_d = 0``),
  ``y = D⁻¹ (α_0 b_{d−2} + … + α_{d−2} b_0) / α_{d−1}``, one exchange of y. In double precision the
  sequence is ill-conditioned: measured (random trees, paths, rings, meshes and stars, heterogeneous)
  below 1e-8 up to p = 4 (5 with refine), but at any p when the minimal polynomial has a low degree
  d ≲ 6 (complete graphs, stars, hypercubes, homogeneous rings): its accuracy is governed by d, not p.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

import numpy as np
from pydantic import Field

from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, validate_model
from hermes.balance.interface import (MAX_PROCESSORS, BalanceContext, Decision, Params, flow_balancer, integer_type,
                                      number_type)
from hermes.balance.model import Model
from hermes.balance.polynomial.charpoly import (
    NeighbourTables,
    PolyState,
    berlekamp_massey,
    check_eigen_refine,
    literal_refine,
    neighbour_krylov,
    poly_local_result,
    poly_result,
    polynomial_potential,
)
from hermes.balance.polynomial.leja import (Refine, leja_distributed, leja_flow, leja_iter, plan_refine, product_form,
                                           resolve_refine, spectral_plan, with_plan_info)
from hermes.balance.polynomial.precompute import SPECTRUM_CHARGES
from hermes.balance.registry import register
from hermes.runtime.comm import NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["POLYNOMIALS", "mpa_scale", "mpa_iter", "mpa", "mpa_schedule", "mpa_distributed", "MPAParams"]

#: how MPA obtains its minimal polynomial: from the spectrum (default) or by Berlekamp–Massey (Alg. 13–15)
POLYNOMIALS = ("spectrum", "berlekamp-massey")


def mpa_scale(model: Model) -> float:
    """Power of two ≥ the Gershgorin bound ``max_i 2 δ_i^w / c_i`` on the eigenvalues of ``L D⁻¹``.

    MPA divides every Krylov step by it (exact in binary arithmetic) so that ``(L D⁻¹)^{2p} l`` cannot overflow.
    """
    g = float(np.max(2.0 * model.weighted_degree / model.capacities)) if model.q else 1.0
    return float(2.0 ** math.ceil(math.log2(g))) if g > 0 else 1.0


def _mpa_steps(p: int, max_degree) -> int:
    return 2 * (p if max_degree is None else min(p, int(max_degree)))


def _check_mpa(tolerance, max_degree, prefix: str = "", polynomial: str = "berlekamp-massey") -> None:
    sep = ":" if prefix else ""
    if polynomial not in POLYNOMIALS:
        raise BalancerError(f"{prefix}polynomial{sep} must be one of {', '.join(POLYNOMIALS)}, got {polynomial!r}")
    if isinstance(tolerance, bool) or not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 1):
        raise BalancerError(f"{prefix}tolerance{sep} must be a number in [0, 1), got {tolerance!r}")
    if max_degree is not None and (isinstance(max_degree, bool) or not isinstance(max_degree, (int, np.integer))
                                   or max_degree < 1):
        raise BalancerError(f"{prefix}max_degree{sep} must be a positive integer, got {max_degree!r}")


def _mpa_coef(alpha) -> tuple[list, float]:
    """Terms of ``y`` in ``b_0, b_1, …``: ``α_{d−2−t}``, t = 0..d−2, and the divisor ``α_{d−1}``."""
    d = len(alpha) - 1
    return [alpha[d - 2 - t] for t in range(d - 1)], (alpha[d - 1] if d >= 1 else 1.0)


def mpa_iter(model: Model, *, polynomial: str = "spectrum", tolerance: float = 1e-13, max_degree: int | None = None,
             seed: int = 0, scale: float | None = None, refine="auto") -> Iterator[PolyState]:
    """MPA serially (thesis Alg. 15): yields every Krylov vector, the flow last.

    Parameters
    ----------
    polynomial : {"spectrum", "berlekamp-massey"}
        ``spectrum`` (default): the minimal polynomial of A from its distinct eigenvalues, applied in Leja
        product form (:func:`hermes.balance.polynomial.leja.leja_iter`; for generic l and u Wiedemann's sequence finds
        exactly this polynomial, so the scheme coincides with LPS's eigen form; ``value`` is the remaining
        imbalance and ``tolerance``, ``max_degree``, ``seed``, ``scale`` are unused). ``berlekamp-massey``:
        the thesis' Krylov sequence and Berlekamp–Massey (Alg. 13–15), below.
    refine : int or "auto"
        Refinement sweeps (``auto``: spectrum form only, from the predicted error; 0 for the thesis' form).
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
    _check_mpa(tolerance, max_degree, polynomial=polynomial)
    if polynomial == "spectrum":
        yield from _spectrum_iter(model, refine)
        return
    refine = literal_refine(refine)
    p, c, g = model.p, model.capacities, NeighbourTables(model)
    if p == 1:
        yield PolyState(0, model.loads, np.zeros(0), {"degree": 0})
        return
    s = mpa_scale(model) if scale is None else float(scale)
    vs = g.krylov(model.loads, _mpa_steps(p, max_degree), s)
    yield from (PolyState(k, v) for k, v in enumerate(vs))
    u = np.random.default_rng(seed).standard_normal(p)
    alpha = berlekamp_massey(np.cumsum(u[None, :] * np.array(vs), axis=1)[:, -1], tolerance, stop_after=2)
    coef, div = _mpa_coef(alpha)
    flow = g.potential_flow(polynomial_potential(coef, vs, div * s, c))
    for _ in range(refine):
        flow = flow + g.potential_flow(polynomial_potential(coef, g.krylov(g.defect(flow), len(coef) - 1, s), div * s, c))
    yield PolyState(len(vs) - 1, vs[-1], flow, {"degree": len(alpha) - 1, "alpha": alpha, "scale": s})


def mpa_schedule(p: int, steps: int, degree: int, refine: int = 0) -> list:
    if p < 2:
        return [(1, [("allreduce", 2)])]
    return [(1, [("allreduce", 2)]), (steps, [("exchange", 1)]), (1, [("allgather", steps + 1), ("exchange", 1)]),
            (refine * (max(degree - 2, 0) + 1), [("exchange", 1)])]


def mpa(model: Model, params: MPAParams | None = None, *, seed: int = 0, scale: float | None = None,
        links=None) -> FlowResult:
    """Minimum-polynomial algorithm MPA (thesis Alg. 15): serial reference of :func:`mpa_distributed`.

    ``params`` (default ``MPAParams()``; from raw values: ``MPAParams.of(polynomial="berlekamp-massey")``) gives
    ``polynomial``, ``tolerance``, ``max_degree``, ``refine`` and ``spectrum``; ``seed`` and ``scale`` are those of
    :func:`mpa_iter` (Berlekamp–Massey's start vector and the Krylov scaling), ``links`` the α-β costs of the
    counted messages.

    Returns
    -------
    FlowResult
        ``iterations = 2p`` Krylov steps (2·max_degree if smaller), ``extra["degree"]``. Counters:
        ``exchange_rounds = 2p + 1`` (+ ``refine (max(d−2, 0) + 1)``), collectives
        ``{"allreduce": 1, "allgather": 1}`` (input check; the gather of ``u_i v_i[0..2p]``): the thesis'
        estimate, (2p+1) local phases and ``T^gs`` (§8.6). ``spectrum``: as LPS with ``eigen``
        (n = d − 1 steps of one word, ``{"allreduce": 1}``, and with ``spectrum: charged`` the precomputation),
        ``extra["degree"] = d``.
    """
    prm = MPAParams() if params is None else params
    polynomial, tolerance, max_degree, refine = prm.polynomial, prm.tolerance, prm.max_degree, prm.refine
    _check_mpa(tolerance, max_degree, polynomial=polynomial)
    if polynomial == "spectrum":
        res = leja_flow(model, refine=check_eigen_refine(refine), links=links, spectrum=prm.spectrum)
        res.extra["degree"] = res.extra["steps"] + 1 if model.p > 1 else 0
        return res
    *_, last = mpa_iter(model, polynomial=polynomial, tolerance=tolerance, max_degree=max_degree, seed=seed,
                        scale=scale, refine=refine)
    d = last.info["degree"]
    n = _mpa_steps(model.p, max_degree) if model.p > 1 else 0
    return poly_result(model, last.flow, n, mpa_schedule(model.p, n, d, literal_refine(refine)), links, degree=d,
                   alpha=last.info.get("alpha"))


def mpa_distributed(nb: NeighbourComm, load: float, capacity: float, weights, params: MPAParams | None = None, *,
                    seed: int = 0, scale: float = 1.0) -> LocalFlowResult:
    """MPA by Berlekamp–Massey on one rank (SPMD). ``scale`` must be the same on every rank (the registry passes
    :func:`mpa_scale`).

    ``params`` (default ``MPAParams()``; from raw values: ``MPAParams.of(refine=1)``) gives ``tolerance``,
    ``max_degree`` and ``refine`` (``auto`` is the literal algorithm, 0 sweeps); its ``polynomial`` is not read:
    this is the ``berlekamp-massey`` form (the registry runs the ``spectrum`` form with
    :func:`~hermes.balance.polynomial.leja.leja_distributed`). The values are checked again here, collectively.

    Notes
    -----
    See :func:`mpa_iter`. Alg. 15's gather is one collective of the 2p+1 products ``u_i v_i[k]``, summed in
    rank order (every rank then runs the same Berlekamp–Massey). ``extra["degree"]``.
    """
    prm = MPAParams() if params is None else params
    tolerance, max_degree = prm.tolerance, prm.max_degree
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check() -> None:
        _check_mpa(tolerance, max_degree)
        literal_refine(prm.refine)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check)
    refine = literal_refine(prm.refine)
    p, capacity, s = nb.size, float(capacity), float(scale)
    if p == 1:
        return poly_local_result(nb, np.zeros(0), 0, degree=0)
    n = _mpa_steps(p, max_degree)
    vs = neighbour_krylov(nb, float(load), n, capacity, w, s)
    u = np.random.default_rng(seed).standard_normal(p)
    alpha = berlekamp_massey(nb.allreduce(u[nb.rank] * np.array(vs), kind="allgather"), tolerance, stop_after=2)
    coef, div = _mpa_coef(alpha)
    y = polynomial_potential(coef, vs, div * s, capacity)
    flows = -w * (y - nb.exchange_scalar(y))
    for _ in range(refine):
        x0 = (float(load) - capacity * total) - ordered_sum(flows)
        y = polynomial_potential(coef, neighbour_krylov(nb, x0, len(coef) - 1, capacity, w, s), div * s, capacity)
        flows = flows - w * (y - nb.exchange_scalar(y))
    return poly_local_result(nb, flows, n, degree=len(alpha) - 1)


def _spectrum_iter(model: Model, refine) -> Iterator[PolyState]:
    """The spectrum form's states: the remaining imbalance after every step, the flow last."""
    plan = spectral_plan(model)
    r = resolve_refine(plan, check_eigen_refine(refine))
    last = None
    for last in leja_iter(model, plan, refine=r):
        yield PolyState(last.iteration, last.residual)
    yield PolyState(last.iteration, last.residual, last.flow, {"plan": plan, "refine": r,
                                                               "degree": plan.steps + 1 if model.p > 1 else 0})


# -- registry -------------------------------------------------------------------------------------------
class MPAParams(Params):
    """Parameters of ``mpa``."""

    polynomial: Literal["spectrum", "berlekamp-massey"] = Field(
        "spectrum", description="the minimal polynomial from the distinct eigenvalues (Leja product form) or by "
        "Berlekamp–Massey on 2p Krylov steps (the thesis' Alg. 14, accurate to p ≈ 5)")
    tolerance: number_type(ge=0, lt=1) = Field(
        1e-13, description="Berlekamp–Massey: a discrepancy below this (relative) counts as zero")
    max_degree: integer_type(ge=1, le=MAX_PROCESSORS) | None = Field(
        None, description="stop the minimal polynomial at this degree (null: 2p; a degree beyond p acts as p)")
    refine: Refine = Field("auto", description="refinement sweeps: 0..20 or auto")
    spectrum: Literal[SPECTRUM_CHARGES] = Field(
        "charged", description="spectrum form: the spectral precomputation (gather of the graph, eigensolve on "
        "rank 0, broadcast) charged to the clock when computed, or free (the thesis' globally known H)")


def _mpa_dist(nb, load, capacity, weights, *, plan, seed, scale, **params):
    """:func:`mpa_distributed` (or the Leja product form of the plan) as :func:`flow_balancer` calls it;
    ``params``: the balancer's (polynomial, tolerance, max_degree, refine)."""
    if plan[0] is not None:
        return product_form(nb, load, capacity, weights, plan)
    return mpa_distributed(nb, load, capacity, weights, MPAParams.of(params), seed=seed, scale=scale)


def _serial(model, *, seed: int = 0, links=None, **params):
    """Serial reference of ``mpa`` as the registry calls it: the balancer's parameters as keywords."""
    return mpa(model, MPAParams.of(params), seed=seed, links=links)


@register("mpa", params=MPAParams, serial=_serial,
          doc="minimum-polynomial algorithm (thesis Alg. 13–15); polynomial spectrum (default): the minimal "
              "polynomial from the distinct eigenvalues in Leja product form (= lps eigen); berlekamp-massey: 2p "
              "Krylov steps, one gather, Berlekamp–Massey (accurate to p ≈ 5)")
def run_mpa(ctx: BalanceContext) -> Decision:
    return with_plan_info(ctx, flow_balancer(_mpa_dist, seed=lambda ctx: ctx.seed,
                                             scale=lambda ctx: mpa_scale(ctx.model), plan=plan_refine)(ctx))
