"""The second-order scheme (SOS) on a generalized diffusion matrix: serial reference and distributed form.

SOS (thesis §7.1.2, Alg. 4; Muthukrishnan et al.) accelerates a diffusion matrix M by

    l⁽¹⁾ = M l⁽⁰⁾,      l⁽ᵏ⁾ = ω M l⁽ᵏ⁻¹⁾ + (1 − ω) l⁽ᵏ⁻²⁾   (k ≥ 2),

a polynomial scheme ``l⁽ⁿ⁾ = P_n(M) l⁽⁰⁾`` with ``P_n(1) = 1``; it converges for ``ω ∈ (0, 2)`` and
fastest for ``ω_opt = 2 / (1 + √(1 − λ_M²))`` (Varga). Because λ_M is an eigenvalue problem, the
thesis proposes (eq. 7.1.7) ``ω* = 2 / (1 + √(K (2 − K)))`` with
``K = 4 e(G) w_min / (Δ^w + ε) · (c_min / c_max) sin²(π / 2p)``: ``1 − K`` is the bound (5.5.6) of
Cor. 2 on λ_{M¹(ε)}, so ω* is ω_opt evaluated at that bound (``1 − (1 − K)² = K (2 − K)``).

The flow of step k is ``ψ⁽ᵏ⁾ = ω x⁽ᵏ⁾ − (1 − ω) ψ⁽ᵏ⁻¹⁾`` with ``x⁽ᵏ⁾ = U Aᵀ D⁻¹ l⁽ᵏ⁾`` the GDA flow
of the current loads and ``ψ⁽⁰⁾ = x⁽⁰⁾``; every ψ lies in the range of ``U Aᵀ``, so the accumulated
flow converges to the same ``‖·‖_{2,U^{-1/2}}``-minimal flow as GDA with M (Th. 17):
:func:`hermes.balance.diffusion.gda.diffusion_flow`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.central import central_value, connectivity_units, eigen_units, with_central
from hermes.balance.diffusion.gda import (
    Eps,
    GDAState,
    StopParams,
    check_stopping,
    eps0_charges,
    eps_value,
    final_state,
    local_sweeps,
    setup_words,
    sweep_counters,
    sweep_result,
    sweep_states,
)
from hermes.balance.diffusion.matrices import (check_eps, check_matrix, diffusion_matrix, local_edge_rates,
                                               resolve_eps, setup)
from hermes.balance.diffusion.spectral import convergence_factor, edge_connectivity
from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, validate_model
from hermes.balance.interface import BalanceContext, Decision, flow_balancer, number_type
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, NeighbourComm
from hermes.errors import BalancerError

__all__ = ["omega_star", "omega_opt", "check_omega", "sos_iter", "sos", "sos_counters", "sos_distributed",
           "SOSParams", "SOSOptParams", "OMEGA_MIN"]


def check_omega(omega) -> float:
    """Return ω as a float; BalancerError unless ``0 < ω < 2`` (the convergence range, thesis §7.1.2)."""
    try:
        value = float(omega)
    except (TypeError, ValueError):
        raise BalancerError(f"ω must be a number in (0, 2), got {omega!r}") from None
    if not (0.0 < value < 2.0):
        raise BalancerError(f"ω must be in (0, 2) for the second-order scheme to converge, got {omega!r}")
    return value


def omega_star(model: Model, eps: str | float = "eps0", *, lazy: bool = False) -> float:
    """ω* of thesis eq. (7.1.7) for SOS on M¹(ε).

    Returns
    -------
    float
        ``2 / (1 + √(K (2 − K)))`` with ``K = 4 e(G) w_min / (Δ^w + ε) · (c_min / c_max) sin²(π/2p)``;
        for the lazy matrix ½(I + M), whose λ is at most ``1 − K/2``, K is halved. 1.0 for p = 1.

    Raises
    ------
    BalancerError
        Bad ε, or ω* ∉ (0, 2). ω* → 2 as K → 2 (p = 2, ε = 0, equal capacities, where M¹(0) is
        periodic and neither GDA nor SOS converges).

    Notes
    -----
    ``1 − K`` is the right-hand side of Cor. 2 (5.5.6), an upper bound on λ_{M¹(ε)} for ε ≥ ε₀, so
    then ω* ≥ ω_opt; the SOS still converges (ω* < 2) with rate ``√(ω* − 1)``. The quantities e(G),
    w_min, Δ^w, c_min/c_max are global: the registry adapter computes ω* from the model.
    """
    validate_model(model)
    e = resolve_eps(model, eps)
    if model.p < 2:
        return 1.0
    c = model.capacities
    k = (4.0 * edge_connectivity(model) * float(model.weights.min()) / (float(model.weighted_degree.max()) + e)
         * (c.min() / c.max()) * math.sin(math.pi / (2 * model.p)) ** 2)
    if lazy:
        k = 0.5 * k
    return check_omega(2.0 / (1.0 + math.sqrt(max(k * (2.0 - k), 0.0))))


def omega_opt(model: Model, eps: str | float = "eps0", kind: int = 1, *, lazy: bool = False,
              alpha: float | None = None) -> float:
    """``ω_opt = 2 / (1 + √(1 − λ_M²))`` (thesis §7.1.2, Varga) for SOS on M^kind(ε) (or ½(I + M)).

    Notes
    -----
    Needs λ_M (:func:`~hermes.balance.diffusion.matrices.convergence_factor`, an eigenvalue problem): the
    thesis assumes it known; the registry adapter computes it from the global model.
    """
    s = setup(model, eps, kind, lazy, alpha)
    lam = convergence_factor(diffusion_matrix(model, s.eps, kind, lazy=lazy, alpha=s.alpha), model.capacities)
    return check_omega(2.0 / (1.0 + math.sqrt(max(1.0 - lam * lam, 0.0))))


def _resolve_omega(model: Model, omega, eps, kind, lazy, alpha) -> float:
    if isinstance(omega, str):
        if omega == "star":
            if kind != 1:
                raise BalancerError("ω* (eq. 7.1.7) is defined for M¹(ε) only; give ω or use 'opt'")
            return omega_star(model, eps, lazy=lazy)
        if omega == "opt":
            return omega_opt(model, eps, kind, lazy=lazy, alpha=alpha)
        raise BalancerError(f"unknown ω {omega!r}: expected 'star', 'opt' or a number in (0, 2)")
    return check_omega(omega)


def sos_iter(model: Model, eps: str | float = "eps0", stop: StopParams | None = None, *, omega: str | float = "star",
             kind: int = 1, alpha: float | None = None) -> Iterator[GDAState]:
    """Run the second-order scheme serially, yielding the state after every step.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ε of the matrix (M¹ … M⁴).
    stop : StopParams, optional
        ``lazy`` and the stopping rule (``tolerance``, ``max_iterations``, ``check_every``) of
        :func:`hermes.balance.diffusion.gda.gda_iter`; default ``StopParams()``.
    omega : "star", "opt" or float in (0, 2)
        ω* (eq. 7.1.7, M¹ only), ω_opt, or an explicit value.
    kind, alpha
        The diffusion matrix, as in :func:`hermes.balance.diffusion.gda.gda_iter`.

    Yields
    ------
    GDAState
        Iteration 0 first; the last one yielded is the final state.

    Raises
    ------
    BalancerError
        ω outside (0, 2), bad ε, kind, stopping parameters. GraphError for an unusable model.

    Notes
    -----
    Thesis Alg. 4, corrected: the load update and ``k ← k + 1`` belong after the neighbour loop (as in
    Alg. 3), and the first step is the plain diffusion step ``l⁽¹⁾ = M l⁽⁰⁾`` of the scheme's
    definition (the algorithm as printed, with ψ⁽⁻¹⁾ = 0 and ω in δ⁽⁰⁾, would start with
    ``((1 − ω) I + ω M) l⁽⁰⁾``). Per step, on every edge ``e_k = {i, j}``:
    ``x = u_k (l_i/c_i − l_j/c_j)``, ``ψ ← ω x − (1 − ω) ψ`` (ψ ← x at step 0), ``l ← l − A ψ``,
    ``f ← f + ψ``. The load update ``l⁽ᵏ⁺¹⁾ = l⁽ᵏ⁾ − A ψ⁽ᵏ⁾`` equals
    ``ω M l⁽ᵏ⁾ + (1 − ω) l⁽ᵏ⁻¹⁾`` and keeps the flow consistent with the loads. With ω = 1 it is GDA
    bit for bit.
    """
    stop = StopParams() if stop is None else stop
    lazy = stop.lazy
    s = setup(model, eps, kind, lazy, alpha)
    w = _resolve_omega(model, omega, s.eps, kind, lazy, s.alpha)
    check_stopping(stop.tolerance, stop.max_iterations, stop.check_every)
    c, e = model.capacities, model.edges
    psi = np.zeros(model.q)

    def step(loads: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        nonlocal psi
        h = loads / c
        x = s.u * (h[e[:, 0]] - h[e[:, 1]])
        psi = x if n == 0 else w * x - (1.0 - w) * psi
        return psi

    yield from sweep_states(model, s, step, tolerance=stop.tolerance, max_iterations=stop.max_iterations,
                            check_every=stop.check_every)


def sos_counters(model: Model, iterations: int, check_every: int = 1, links=None, *, kind: int = 1) -> Counters:
    """Counters of :func:`sos_distributed`: those of GDA (one exchange of l_i per step, ψ stays local).

    Notes
    -----
    See :func:`hermes.balance.diffusion.gda.gda_counters` (``exchange_rounds = 1 + n``,
    ``collectives = {"allreduce": 1 + g + C}``, ``messages = 2q (1 + n)``,
    ``bytes = 16p + 32q + 24pg + 16qn + 8pC``).
    """
    return sweep_counters(model, iterations, check_every, links, setup=setup_words(kind))[0]


def sos(model: Model, eps: str | float = "eps0", stop: StopParams | None = None, *, omega: str | float = "star",
        kind: int = 1, alpha: float | None = None, links=None, compute_factor: bool = True) -> FlowResult:
    """Second-order scheme (thesis Alg. 4, eq. 7.1.7): serial reference of :func:`sos_distributed`.

    Parameters
    ----------
    model, eps, stop, omega, kind, alpha
        See :func:`sos_iter`.
    links : hermes.runtime.clock.Links, optional
        If given, ``counters.time`` is the α-β time of the distributed form.
    compute_factor : bool
        Also report λ_M of the underlying matrix and the bounds of
        :func:`~hermes.balance.diffusion.matrices.diffusion_bounds`.

    Returns
    -------
    FlowResult
        ``convergence_factor`` is λ_M of M (the SOS's own asymptotic rate is ``extra["rate"]``:
        ``√(ω − 1)`` for ω ≥ ω_opt, else the largest root modulus of ``r² − ω λ r + (ω − 1)`` over the
        spectrum); ``extra`` holds ``omega``, ``eps``, ``kind``, ``lazy``, ``alpha``, ``residual``,
        ``loads``, ``rank_times``, ``min_diagonal``, ``nonnegative`` and, with ``compute_factor``,
        ``bounds`` and ``rate``.
    """
    stop = StopParams() if stop is None else stop
    s = setup(model, eps, kind, stop.lazy, alpha)
    w = _resolve_omega(model, omega, s.eps, kind, stop.lazy, s.alpha)
    state = final_state(sos_iter(model, s.eps, stop, omega=w, kind=kind, alpha=s.alpha))
    res = sweep_result(model, s, state, stop, kind=kind, links=links, compute_factor=compute_factor,
                       head={"omega": w})
    if compute_factor:
        res.extra["rate"] = _sos_rate(res.convergence_factor, w)
    return res


def _sos_rate(lam: float, w: float) -> float:
    """Largest modulus of the roots of ``r² − ω λ r + (ω − 1) = 0`` for λ = ±λ_M (the SOS rate)."""
    disc = (w * lam) ** 2 - 4.0 * (w - 1.0)
    if disc <= 0:
        return math.sqrt(w - 1.0)
    return 0.5 * (w * lam + math.sqrt(disc))


def sos_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], eps: float,
                    omega: float, stop: StopParams | None = None) -> LocalFlowResult:
    """The second-order scheme on M¹(ε) on one rank (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb, load, capacity, weights, eps, stop
        As in :func:`hermes.balance.diffusion.gda.gda_distributed` (the matrix is M¹(ε), as the registry's
        ``sos`` and ``sos_opt`` run it; the serial :func:`sos` also iterates on M² … M⁶).
    omega : float in (0, 2)
        The caller computes ω* (:func:`omega_star`) or ω_opt (:func:`omega_opt`) from the global
        model, as the thesis assumes these quantities known.

    Returns
    -------
    LocalFlowResult
        ``flows[t] > 0``: this rank sends to ``nb.neighbours[t]``; ``extra``: ``load``, ``residual``.

    Raises
    ------
    BalancerError, GraphError
        On every rank if any rank has ω ∉ (0, 2) or another bad input (collective agreement).

    Notes
    -----
    Thesis Alg. 4 (corrected, see :func:`sos_iter`). Per step one exchange of l_i; the per-edge
    ``ψ_ij`` stay local (both endpoints compute ``ψ_ji = −ψ_ij`` exactly). Counters:
    :func:`sos_counters`.
    """
    stop = StopParams() if stop is None else stop
    lazy, tolerance, max_iterations, check_every = stop.lazy, stop.tolerance, stop.max_iterations, stop.check_every
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check_parameters() -> None:
        check_eps(eps)
        check_omega(omega)
        check_matrix(1, lazy, None, need_alpha=True)
        check_stopping(tolerance, max_iterations, check_every)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check_parameters)
    om = float(omega)
    capacity, load = float(capacity), float(load)
    u, cj = local_edge_rates(nb, capacity, w, check_eps(eps), 1, lazy=lazy)
    psi = np.zeros(len(nb.neighbours))

    def step(load: float, n: int) -> NDArray[np.float64]:
        nonlocal psi
        lj = nb.exchange_scalar(load)
        x = u * (load / capacity - lj / cj)
        psi = x if n == 0 else om * x - (1.0 - om) * psi
        return psi

    return local_sweeps(nb, load, capacity * total, step, tolerance=tolerance, max_iterations=max_iterations,
                        check_every=check_every)


# -- registry ------------------------------------------------------------------------------------------
#: how far a given ω stays from the ends of SOS' convergence range (0, 2). The slowest mode's root of
#: r² − ω μ₂ r − (1 − ω) = 0 has modulus ≈ 1 − ω (1 − μ₂) / 2 as ω → 0, so the sweeps grow as 2/ω times those of
#: first-order diffusion (ω = 1); and modulus at least √(ω − 1) as ω → 2 (the product of the roots is ω − 1), so
#: at least 2 ln(1/τ) / (2 − ω) sweeps whatever the graph. ω in [0.01, 1.99] keeps both within about 200 times
#: (ω = 5e-324 moved no load in 10⁵ sweeps, 316 s). ω* and ω_opt (computed, sos_opt) are not bounded by it.
OMEGA_MIN = 0.01


class SOSOptParams(StopParams):
    """Parameters of ``sos_opt``."""

    eps: Eps = Field("eps0", description="ε of M¹(ε): 'eps0' (thesis Cor. 2) or a number ≥ 0")


class SOSParams(SOSOptParams):
    """Parameters of ``sos``."""

    omega: number_type(ge=OMEGA_MIN, le=2 - OMEGA_MIN) | None = Field(
        None, description=f"ω in [{OMEGA_MIN:g}, {2 - OMEGA_MIN:g}] (null: ω*, eq. 7.1.7; the band where the "
        "sweeps stay within 200 times those of first-order diffusion, see OMEGA_MIN)")


def _sos_star(model, *, eps="eps0", omega=None, links=None, **stop):
    """Serial reference of ``sos``: ω* (eq. 7.1.7) unless ω is given."""
    return sos(model, eps, StopParams.of(stop), omega="star" if omega is None else omega, links=links)


def _sos_opt(model, *, eps="eps0", links=None, **stop):
    """Serial reference of ``sos_opt``: ω_opt from λ_M."""
    return sos(model, eps, StopParams.of(stop), omega="opt", links=links)


def _dist(nb, load, capacity, weights, *, eps_value, omega_value, **params):
    """:func:`sos_distributed` as :func:`flow_balancer` calls it: ``params`` are the balancer's (``eps`` and
    ``omega`` as given, resolved by the caller into ``eps_value`` and ``omega_value``)."""
    return sos_distributed(nb, load, capacity, weights, eps_value, omega_value, SOSParams.of(params))


def run_sos(ctx: BalanceContext, optimal: bool) -> Decision:
    """The distributed SOS in ``hermes run``: ε and ω (ω_opt, the given ω or ω*) computed from ``ctx.model`` on
    every rank (deterministic, so all ranks agree)."""
    eps = eps_value(ctx.model, ctx.params["eps"], ctx)
    if optimal:  # ω_opt from the dense spectrum, computed on rank 0 and broadcast (docs/COSTS.md)
        omega = central_value(ctx, omega_opt(ctx.model, eps, lazy=ctx.params["lazy"]), eigen_units(ctx.model.p))
    else:
        given = ctx.params.get("omega")
        omega = float(given) if given is not None else central_value(
            ctx, omega_star(ctx.model, eps, lazy=ctx.params["lazy"]), connectivity_units(ctx.model))
    return flow_balancer(_dist, eps_value=eps, omega_value=omega)(ctx)


@register("sos", params=SOSParams, serial=with_central(_sos_star, lambda m, prm: eps0_charges(m, prm) + (
    [(connectivity_units(m), 1)] if prm.get("omega") is None else [])),
          doc="second-order scheme on M¹(ε) with ω* (thesis Alg. 4, eq. 7.1.7) or a given ω")
def run_sos_star(ctx: BalanceContext) -> Decision:
    return run_sos(ctx, optimal=False)


@register("sos_opt", params=SOSOptParams,
          serial=with_central(_sos_opt, lambda m, prm: eps0_charges(m, prm) + [(eigen_units(m.p), 1)]),
          doc="second-order scheme on M¹(ε) with ω_opt = 2/(1+√(1−λ²)) (thesis §7.1.2)")
def run_sos_opt(ctx: BalanceContext) -> Decision:
    return run_sos(ctx, optimal=True)
