"""Implicit diffusion schemes (Watts et al.; the generalized scheme): serial reference and distributed form.

An implicit scheme (thesis §7.2) takes a backward-Euler step of the diffusion equation,

    (I + D^{1/2} 𝓛 D^{-1/2}) l⁽ᵏ⁺¹⁾ = l⁽ᵏ⁾,   i.e.   (I + L D⁻¹) l⁽ᵏ⁺¹⁾ = l⁽ᵏ⁾,   L = A U Aᵀ   (eq. 7.2.2),

which converges for every ``u > 0`` (the eigenvalues of ``(I + L D⁻¹)⁻¹`` are ``1/(1 + μ_k) ∈ (0, 1]``)
and moves ``U Aᵀ D⁻¹ l⁽ᵏ⁺¹⁾`` per step; its total flow is the GDA flow of ``M = I − A U Aᵀ D⁻¹``
(Th. 18). Each outer step solves the system by Jacobi sweeps with neighbour exchanges:

* generalized scheme (thesis Alg. 6): ``u_k = α s_k(ε) w_k`` with the scalars of M¹(ε) (α = 1 is the
  thesis' scheme; α > 1 is a longer implicit time step);
* Watts et al. (thesis Alg. 5): ``u_k = α c_i c_j / (c_i + c_j)`` — heterogeneous processors,
  uniform communication: the model's edge weights are ignored.

``lazy=True`` halves u, as for the explicit schemes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.central import with_central
from hermes.balance.diffusion.gda import (
    Eps,
    GDAState,
    StopParams,
    check_stopping,
    eps0_charges,
    eps_value,
    final_state,
    local_sweeps,
    sweep_counters,
    sweep_states,
)
from hermes.balance.diffusion.matrices import check_eps, check_positive, local_edge_rates, setup
from hermes.balance.flow import (
    FlowResult,
    LocalFlowResult,
    agree_local_inputs,
    minimal_flow,
    neighbour_table,
    ordered_row_sums,
)
from hermes.balance.interface import (MAX_ITERATIONS, BalanceContext, Decision, Tolerance, flow_balancer, integer_type,
                                      number_type)
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["MAX_SWEEPS", "implicit_rates", "implicit_flow", "inner_sweeps", "implicit_iter", "implicit",
           "implicit_counters", "implicit_distributed", "WattsParams", "ImplicitParams", "ALPHA_MIN"]


#: inner Jacobi sweeps per implicit step, given or computed (:func:`inner_sweeps`): the inner solve is an iteration
#: and is bounded as one; the count from inner_tolerance grows like α δ/c (α = 1e6 on a 16-path: 2.6e7 sweeps, 2 min)
MAX_SWEEPS = MAX_ITERATIONS


def _check(alpha, inner_tolerance, watts, lazy) -> None:
    check_positive(alpha, "α (implicit time step)")
    try:
        ok = 0.0 < float(inner_tolerance) < 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise BalancerError(f"inner tolerance must be in (0, 1), got {inner_tolerance!r}")
    if not isinstance(watts, (bool, np.bool_)) or not isinstance(lazy, (bool, np.bool_)):
        raise BalancerError(f"watts and lazy must be true or false, got {watts!r}, {lazy!r}")


def _watts_rates(ci, cj, alpha: float, lazy: bool):
    """``α c_i c_j / (c_i + c_j)``, symmetric in (i, j) bit for bit."""
    u = float(alpha) * (ci * cj / (ci + cj))
    return 0.5 * u if lazy else u


def _serial_rates(model: Model, eps, watts: bool, alpha: float, lazy: bool):
    """(:func:`~hermes.balance.diffusion.matrices.setup` of the model, rates u) with the distributed form's
    arithmetic."""
    if watts:
        s = setup(model, 0.0, 5, False, None)
        c, e = model.capacities, model.edges
        return s, np.asarray(_watts_rates(c[e[:, 0]], c[e[:, 1]], alpha, bool(lazy)), dtype=np.float64)
    s = setup(model, eps, 1, lazy, None)
    return s, float(alpha) * s.u


def implicit_rates(model: Model, eps: str | float = "eps0", *, watts: bool = False, alpha: float = 1.0,
                   lazy: bool = False) -> NDArray[np.float64]:
    """Edge rates u of the implicit scheme (Alg. 6: ``α s_k(ε) w_k``; Alg. 5, ``watts``: ``α c_i c_j/(c_i+c_j)``)."""
    _check(alpha, 0.5, watts, lazy)
    return _serial_rates(model, eps, watts, alpha, lazy)[1]


def implicit_flow(model: Model, eps: str | float = "eps0", *, watts: bool = False) -> NDArray[np.float64]:
    """The flow the implicit scheme converges to: the minimal flow for conductances u (Th. 18).

    For Alg. 6 this is :func:`~hermes.balance.diffusion.gda.diffusion_flow` of M¹(ε); for Watts' scheme the
    minimal flow for ``c_i c_j / (c_i + c_j)`` (α and lazy scale u and do not change it).
    """
    u = implicit_rates(model, eps, watts=watts)
    return minimal_flow(Model(model.p, model.edges, model.loads, model.capacities, u))


def inner_sweeps(beta_max: float, inner_tolerance: float) -> int:
    """Number m of Jacobi sweeps per outer step: ``A γ^m ≤ τ`` with ``γ = 1 − 1/β_max``.

    Parameters
    ----------
    beta_max : float
        ``max_i β_i``, ``β_i = 1 + δ_i^u / c_i`` (one allreduce(max) in the distributed form).
    inner_tolerance : float in (0, 1)
        τ.

    Returns
    -------
    int
        ``m = max(1, ⌈ln(τ / A) / ln γ⌉)``, ``A = max(1, μ̂ √β_max)``, ``μ̂ = 2 (β_max − 1)``.

    Raises
    ------
    BalancerError
        If m exceeds MAX_SWEEPS (a long implicit step α on fast neighbours of a slow processor); β_max is the
        same on every rank, so every rank raises.

    Notes
    -----
    Thesis Alg. 5/6 take ``m = ⌈ln τ / ln(max_i β_i⁻¹ Σ_j T_ij)⌉``. hermes changes two things.
    (1) The contraction: ``γ = max_i δ_i^u / (c_i + δ_i^u) = 1 − 1/β_max`` is the ∞-norm of the Jacobi
    matrix of the equivalent system in ``z = D⁻¹ y`` (same iterates, ``J_y = D J_z D⁻¹``), always < 1,
    whereas the printed row sums ``β_i⁻¹ Σ_j u_ij / c_j`` exceed 1 when a processor's neighbours are
    much slower than itself (the formula then gives no m). (2) The amplification A: the inner error
    reaches the loads multiplied by ``L D⁻¹`` (eigenvalues up to ``μ̂``, Gershgorin on the columns)
    and converted between the ``D``- and ``D + Δ^u``-weighted norms (``√β_max``). With the printed
    count the outer iteration diverges for long steps and loose τ (α = 8, τ = 0.3 on a 6-path,
    tests/balance/test_implicit.py); with A the inexact step contracts every eigenmode μ of
    ``L D⁻¹`` by at most ``(1 + τ μ) / (1 + μ) < 1``.
    """
    if beta_max <= 1.0:
        return 1
    gamma = 1.0 - 1.0 / beta_max
    amp = max(1.0, 2.0 * (beta_max - 1.0) * math.sqrt(beta_max))
    m = max(1, math.ceil(math.log(inner_tolerance / amp) / math.log(gamma)))
    if m > MAX_SWEEPS:
        raise BalancerError(f"the implicit step's inner solve needs {m} Jacobi sweeps (β_max = {beta_max:.3g}, "
                            f"inner_tolerance {inner_tolerance:g}), more than {MAX_SWEEPS}: take a smaller alpha")
    return m


def _check_sweeps(sweeps) -> None:
    if sweeps is not None and (isinstance(sweeps, bool) or not isinstance(sweeps, (int, np.integer))
                               or not 0 <= sweeps <= MAX_SWEEPS):
        raise BalancerError(f"sweeps must be None or an integer in 0..{MAX_SWEEPS}, got {sweeps!r}")


def implicit_iter(model: Model, eps: str | float = "eps0", params: WattsParams | None = None, *,
                  watts: bool = False) -> Iterator[GDAState]:
    """Run the implicit scheme serially, yielding the state after every outer step.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ε of the M¹(ε) scalars (Alg. 6; ignored by Watts' scheme).
    params : WattsParams, optional
        The scheme's parameters, as :func:`implicit_distributed` takes them (default ``WattsParams()``; from raw
        values: ``WattsParams.of(alpha=8.0, sweeps=2)``): ``alpha`` > 0, the implicit time step (U is multiplied
        by α); ``lazy``, halve U; ``inner_tolerance`` in (0, 1), the error reduction of the inner solve, which
        sets the number of Jacobi sweeps (:func:`inner_sweeps`); ``sweeps`` ≥ 0, if not None, this number m of
        Jacobi sweeps instead (0: the explicit GDA step ``l ← M l``); ``tolerance``, ``max_iterations``,
        ``check_every``, the stopping rule on the outer steps, as in :func:`hermes.balance.diffusion.gda.gda_iter`.
    watts : bool
        Watts et al.'s rates (Alg. 5) instead of Alg. 6's.

    Yields
    ------
    GDAState
        ``extra`` information (the sweep count m) is in :func:`implicit`'s result.

    Notes
    -----
    Thesis Alg. 5/6, corrected: ``β_i = 1 + Σ_j u_ij / c_i`` (Alg. 6 prints ``/ c_j``; Alg. 5 has
    the right form, ``1 + α Σ_j c_j / (c_i + c_j)``), ``T_ij = u_ij / c_j``, and the update uses
    β_i (printed ``β_j``). One outer step: ``y ← l``; m times: exchange y, ``y_i ← (l_i + Σ_j T_ij y_j)
    / β_i`` (a Jacobi sweep on ``(I + L D⁻¹) y = l``); exchange y once more; move
    ``x_ij = u_ij (y_i/c_i − y_j/c_j)``: ``l ← l − A x``, ``f ← f + x``. The printed flow update
    (each endpoint's own ``β_i⁻¹ T_ij (c_j/c_i l_i − l_j^{(m−1)})`` with ``l ← l^{(m)}``) is not
    antisymmetric and does not conserve the load for an inexact solve; this form is, and since every
    x lies in the range of ``U Aᵀ``, once the loads converge the flow is exactly the GDA flow
    (Th. 18) whatever m. The loads converge if m is large enough (:func:`inner_sweeps`).
    """
    prm = WattsParams() if params is None else params
    alpha, lazy, inner_tolerance, sweeps = prm.alpha, prm.lazy, prm.inner_tolerance, prm.sweeps
    _check(alpha, inner_tolerance, watts, lazy)
    _check_sweeps(sweeps)
    check_stopping(prm.tolerance, prm.max_iterations, prm.check_every)
    s, u = _serial_rates(model, eps, watts, alpha, lazy)
    c, e = model.capacities, model.edges
    table_u = np.where(s.mask, u[s.edge], 0.0)
    beta = 1.0 + ordered_row_sums(table_u) / c  # β_i = 1 + δ_i^u / c_i
    m = int(sweeps) if sweeps is not None else inner_sweeps(float(np.max(beta)), float(inner_tolerance))
    nbr_table = neighbour_table(model)[0]
    tcoef = np.where(s.mask, table_u / c[nbr_table], 0.0)  # T_ij = u_ij / c_j

    def step(loads: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        y = loads
        for _ in range(m):
            y = (loads + ordered_row_sums(tcoef * y[nbr_table])) / beta
        h = y / c
        return u * (h[e[:, 0]] - h[e[:, 1]])

    yield from sweep_states(model, s, step, tolerance=prm.tolerance, max_iterations=prm.max_iterations,
                            check_every=prm.check_every)


def _sweeps(model: Model, eps, watts, alpha, lazy, inner_tolerance, sweeps) -> int:
    if sweeps is not None:
        return int(sweeps)
    s, u = _serial_rates(model, eps, watts, alpha, lazy)
    beta = 1.0 + ordered_row_sums(np.where(s.mask, u[s.edge], 0.0)) / model.capacities
    return inner_sweeps(float(np.max(beta)), float(inner_tolerance))


def implicit_counters(model: Model, iterations: int, sweeps: int, check_every: int = 1, links=None) -> Counters:
    """Counters of :func:`implicit_distributed` after ``iterations`` outer steps of ``sweeps`` Jacobi sweeps.

    Notes
    -----
    With n outer steps, m sweeps and ``C = 1 + ⌈n / check_every⌉`` checks:
    ``exchange_rounds = 1 + n (m + 1)``; ``collectives = {"allreduce": 2 + C}`` (total load, β_max,
    residual checks); ``messages = 2q (1 + n (m + 1))``; ``bytes = 24p + 32q + 16 q n (m + 1) + 8p C``
    (:func:`~hermes.balance.diffusion.gda.sweep_counters` with ``setup = (1,)`` and ``m + 1`` exchanges
    per iteration).
    """
    return sweep_counters(model, iterations, check_every, links, setup=(1,), exchanges=int(sweeps) + 1)[0]


def implicit(model: Model, eps: str | float = "eps0", params: WattsParams | None = None, *, watts: bool = False,
             links=None) -> FlowResult:
    """Implicit diffusion (thesis Alg. 6, or Alg. 5 with ``watts``): serial reference of :func:`implicit_distributed`.

    Parameters
    ----------
    model : Model
    eps, params, watts
        As in :func:`implicit_iter`.
    links : hermes.runtime.clock.Links, optional
        If given, ``counters.time`` is the α-β time the distributed form would be charged.

    Returns
    -------
    FlowResult
        ``convergence_factor`` is ``1 / (1 + μ₂)``, the rate of the exact outer iteration (μ₂ the
        smallest non-zero eigenvalue of ``L D⁻¹``); ``extra`` holds ``sweeps`` (m), ``eps``, ``alpha``,
        ``watts``, ``lazy``, ``residual``, ``loads`` and ``rank_times``.

    Raises
    ------
    BalancerError
        Bad ε, α, inner tolerance or stopping parameters. GraphError for an unusable model.
    """
    prm = WattsParams() if params is None else params
    alpha, lazy, inner_tolerance, sweeps = prm.alpha, prm.lazy, prm.inner_tolerance, prm.sweeps
    _check(alpha, inner_tolerance, watts, lazy)
    _check_sweeps(sweeps)
    s, u = _serial_rates(model, eps, watts, alpha, lazy)
    m = _sweeps(model, s.eps, watts, alpha, lazy, inner_tolerance, sweeps)
    state = final_state(implicit_iter(model, s.eps, prm, watts=watts))
    counters, times = sweep_counters(model, state.iteration, prm.check_every, links, setup=(1,), exchanges=m + 1)
    factor = _outer_factor(model, u)
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.residual <= prm.tolerance,
                      counters=counters,
                      convergence_factor=factor,
                      extra={"sweeps": m, "eps": None if watts else s.eps, "alpha": float(alpha), "watts": bool(watts),
                             "lazy": bool(lazy), "residual": state.residual, "loads": state.loads,
                             "rank_times": times})


def _outer_factor(model: Model, u: NDArray[np.float64]) -> float | None:
    """``1/(1 + μ₂(D^{-1/2} A U Aᵀ D^{-1/2}))`` (eq. 7.2.3), dense; None above 2000 processors."""
    if model.p < 2:
        return 0.0
    if model.p > 2000:
        return None
    r = 1.0 / np.sqrt(model.capacities)
    lap = Model(model.p, model.edges, model.loads, model.capacities, u).laplacian.toarray() * r[:, None] * r[None, :]
    mu = np.linalg.eigvalsh(0.5 * (lap + lap.T))
    return float(1.0 / (1.0 + mu[1]))


def implicit_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], eps: float,
                         params: WattsParams | None = None, *, watts: bool = False) -> LocalFlowResult:
    """The implicit scheme on one rank (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb, load, capacity, weights
        As in :func:`hermes.balance.diffusion.gda.gda_distributed`.
    eps : float
        ε ≥ 0 of the M¹(ε) scalars (ignored with ``watts``; the caller computes ε₀).
    params : WattsParams, optional
        ``alpha``, ``inner_tolerance``, ``sweeps``, ``lazy`` and the stopping rule, as :func:`implicit_iter` takes them
        (default ``WattsParams()``; checked again here, collectively).
    watts : bool
        Watts et al.'s scheme (Alg. 5) instead of the generalized one (Alg. 6).

    Returns
    -------
    LocalFlowResult
        ``extra`` holds ``load``, ``residual`` and ``sweeps``.

    Notes
    -----
    After the input agreement and the (c_i, δ_i^w) exchange, one allreduce(max) of
    ``β_i = 1 + δ_i^u / c_i`` fixes the sweep count m (:func:`inner_sweeps`; done even when ``sweeps``
    is given, to keep the schedule); each outer step
    then does m + 1 exchanges of y_i (:func:`implicit_iter`) and the residual check every
    ``check_every`` steps. Counters: :func:`implicit_counters`.
    """
    prm = WattsParams() if params is None else params
    alpha, lazy, inner_tolerance, sweeps = prm.alpha, prm.lazy, prm.inner_tolerance, prm.sweeps
    tolerance, max_iterations, check_every = prm.tolerance, prm.max_iterations, prm.check_every
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check_parameters() -> None:
        check_eps(eps)
        _check(alpha, inner_tolerance, watts, lazy)
        _check_sweeps(sweeps)
        check_stopping(tolerance, max_iterations, check_every)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check_parameters)
    capacity, load = float(capacity), float(load)
    u1, cj = local_edge_rates(nb, capacity, w, check_eps(eps), 1 if not watts else 5, lazy=lazy)
    u = np.asarray(_watts_rates(capacity, cj, alpha, bool(lazy)), dtype=np.float64) if watts else float(alpha) * u1
    beta = 1.0 + ordered_sum(u) / capacity
    beta_max = float(nb.allreduce(beta, op="max"))
    m = int(sweeps) if sweeps is not None else inner_sweeps(beta_max, float(inner_tolerance))
    tcoef = u / cj

    def step(load: float, n: int) -> NDArray[np.float64]:
        y = load
        for _ in range(m):
            yj = nb.exchange_scalar(y)
            y = (load + ordered_sum(tcoef * yj)) / beta
        yj = nb.exchange_scalar(y)
        return u * (y / capacity - yj / cj)

    res = local_sweeps(nb, load, capacity * total, step, tolerance=tolerance, max_iterations=max_iterations,
                       check_every=check_every)
    res.extra["sweeps"] = m
    return res


# -- registry ------------------------------------------------------------------------------------------
#: the smallest implicit step α a user gives: an outer step multiplies the slowest mode by 1/(1 + α μ₂) ≈ 1 − α μ₂,
#: so the outer steps to converge grow as 1/α against the thesis' α = 1; α ≥ 0.01 keeps them within about 100
#: times (α = 5e-324 moved no load in 10⁵ outer steps)
ALPHA_MIN = 0.01


class WattsParams(StopParams):
    """Parameters of ``implicit_watts``."""

    alpha: number_type(ge=ALPHA_MIN, le=1e6) = Field(
        1.0, description=f"implicit step α (≥ {ALPHA_MIN:g}: an outer step contracts the slowest mode by "
        "1/(1 + α μ₂), so the outer steps grow as 1/α below α = 1; ≤ 1e6: the inner solve's diagonal 1 + α δ/c "
        "must not swamp the loads)")
    inner_tolerance: Tolerance = Field(1e-2, description="inner Jacobi tolerance (≥ 1e-15: below about 10 "
                                       "machine epsilons the inner solve cannot meet it)")
    sweeps: integer_type(ge=0, le=MAX_SWEEPS) | None = Field(
        None, description="inner sweeps per step (null: from inner_tolerance; either way at most "
        f"{MAX_SWEEPS}: each costs a neighbour exchange in every outer step)")


class ImplicitParams(WattsParams):
    """Parameters of ``implicit``."""

    eps: Eps = Field("eps0", description="ε of M¹(ε): 'eps0' (thesis Cor. 2) or a number ≥ 0")


def _implicit(model, *, eps="eps0", links=None, **params):
    """Serial reference of ``implicit`` (thesis Alg. 6)."""
    return implicit(model, eps, WattsParams.of(params), watts=False, links=links)


def _watts(model, *, eps="eps0", links=None, **params):
    """Serial reference of ``implicit_watts`` (thesis Alg. 5)."""
    return implicit(model, eps, WattsParams.of(params), watts=True, links=links)


def _dist(nb, load, capacity, weights, *, eps_value, eps=None, watts, **params):
    return implicit_distributed(nb, load, capacity, weights, eps_value, WattsParams.of(params), watts=watts)


@register("implicit", params=ImplicitParams, serial=with_central(_implicit, eps0_charges),
          doc="generalized implicit diffusion scheme (thesis Alg. 6, eq. 7.2.2)")
def run_implicit(ctx: BalanceContext) -> Decision:
    return flow_balancer(functools.partial(_dist, watts=False),
                         eps_value=eps_value(ctx.model, ctx.params["eps"], ctx))(ctx)


@register("implicit_watts", params=WattsParams, serial=_watts,
          doc="implicit diffusion of Watts et al., uniform links (thesis Alg. 5)")
def run_implicit_watts(ctx: BalanceContext) -> Decision:
    return flow_balancer(functools.partial(_dist, watts=True), eps_value=0.0)(ctx)
