"""The method of potentials: conjugate gradients on the Laplacian (PCG, thesis Alg. 8; Hu et al.).

The minimal balancing flow is ``f* = W Aᵀ x`` where x solves ``L x = l − l̄`` with ``L = A W Aᵀ``
(thesis Th. 19–20, §8.1). Since ``l − l̄ ⊥ 1`` and L is symmetric positive semi-definite with null
space ``span{1}`` on a connected graph, conjugate gradients started from ``x = 0`` stay in the range
of L and converge in at most as many iterations as L has distinct non-zero eigenvalues (Golub &
Van Loan; thesis §8.1). Each iteration costs one neighbour exchange and two allreduces (``form: thesis``, thesis
Alg. 8), or one exchange and one allreduce of two words (``form: single-reduction``: the same Krylov iterates in
Chronopoulos and Gear's recurrence, which computes ``rᵀr`` and ``(L r)ᵀ r`` together; A. T. Chronopoulos and
C. W. Gear, J. Comput. Appl. Math. 25 (1989) 153–168). At 1,024 processors a reduction costs ⌈log₂ p⌉ = 10
latencies where a neighbour exchange costs one: halving the reductions is most of pcg's balancing time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.flow import (
    FlowResult,
    LocalFlowResult,
    agree_local_inputs,
    alpha_beta_time,
    bulk_inputs,
    neighbour_table,
    ordered_row_sums,
    ordered_total,
    run_bulk,
    validate_model,
)
from hermes.balance.interface import (MAX_ITERATIONS, BalanceContext, Decision, OptionalCount, Params, Tolerance,
                                      flow_balancer)
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["PCGState", "PCGParams", "FORMS", "pcg_iter", "pcg", "pcg_counters", "pcg_distributed"]

#: ``form``: thesis (Alg. 8, two reductions per iteration) or single-reduction (Chronopoulos–Gear, one)
FORMS = ("thesis", "single-reduction")


@dataclass
class PCGState:
    """One step of :func:`pcg_iter`.

    Attributes
    ----------
    iteration : int
        CG iterations done (0 = initial state).
    potential : ndarray, shape (p,)
        The iterate x (potentials; ``L x → l − l̄``).
    flow : ndarray, shape (q,)
        ``w_k (x_i − x_j)`` on ``model.edges``.
    residual : float
        ``√ρ / ‖b‖`` (relative residual norm; 0 when ``b = 0``).
    converged : bool
        Whether the stopping test ``√ρ ≤ tolerance ‖b‖`` holds.
    """

    iteration: int
    potential: NDArray[np.float64]
    flow: NDArray[np.float64]
    residual: float
    converged: bool


def _check_params(tolerance: float, max_iterations: int | None, form: str = "thesis") -> None:
    if form not in FORMS:
        raise BalancerError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    if not (math.isfinite(float(tolerance)) and tolerance >= 0):
        raise BalancerError(f"tolerance must be ≥ 0, got {tolerance!r}")
    if max_iterations is not None and (int(max_iterations) != max_iterations
                                       or not 0 <= max_iterations <= MAX_ITERATIONS):  # (None: 10 p)
        raise BalancerError(f"max_iterations must be an integer in 0..{MAX_ITERATIONS}, got {max_iterations!r}")


def _relres(rho: float, bnorm2: float) -> float:
    return math.sqrt(rho / bnorm2) if bnorm2 > 0 else 0.0


#: a right-hand side below this fraction of the total load counts as balanced: with measured
#: capacities Σc = 1 only to within rounding, so such a b lies partly outside the range of the
#: singular L and CG on it would amplify rounding noise into a spurious flow
BALANCED_FLOOR = 1e-12


def _done(rho: float, bnorm2: float, tolerance: float, total: float = 0.0) -> bool:
    """The stopping test of Alg. 8, ``√ρ ≤ tolerance √(bᵀb)``, or ``‖b‖ ≤ 1e-12 Σl`` (already balanced)."""
    if math.sqrt(bnorm2) <= BALANCED_FLOOR * abs(total):
        return True
    return math.sqrt(rho) <= tolerance * math.sqrt(bnorm2)


def pcg_iter(model: Model, *, tolerance: float = 1e-8, max_iterations: int | None = None,
             form: str = "thesis") -> Iterator[PCGState]:
    """Conjugate gradients on ``L x = l − l̄``, yielding the state after every iteration.

    Parameters
    ----------
    model : Model
    tolerance : float
        Stop when ``√ρ ≤ tolerance ‖b‖`` with ``b = l − l̄`` and ``ρ = ‖b − L x‖²``.
    max_iterations : int, optional
        Default ``10 p``.
    form : str
        ``thesis`` (Alg. 8 below) or ``single-reduction`` (:func:`_single_reduction_iter`).

    Yields
    ------
    PCGState
        Starting with iteration 0.

    Raises
    ------
    BalancerError
        Bad ``tolerance`` or ``max_iterations``. GraphError for an unusable model.

    Notes
    -----
    Thesis Alg. 8 (parallel form of Alg. 7), with two transcription errors of the printed text
    fixed: ``w`` is reset to 0 before accumulating ``w = Σ_j w_ij (u_i − u_j)`` (so ``w = L u``), and
    ``ρ₀ ← ρ₁`` is saved before ``ρ₁`` is recomputed (so ``β = ρ_k / ρ_{k−1}``). One iteration::

        u = r (first) or r + (ρ₁/ρ₀) u;  w = L u;  α = ρ₁ / (uᵀw);
        x ← x + α u;  r ← r − α w;  ρ₀ ← ρ₁;  ρ₁ = rᵀr.

    Sign convention: the thesis takes ``b = l̄ − l``; hermes solves ``L x = l − l̄`` so that the flow
    on edge {i, j} is ``w_ij (x_i − x_j)`` from i to j and ``A f = L x = l − l̄`` (the load goes
    downhill in potential). If ``uᵀw ≤ 0`` (breakdown, only possible at round-off level) the step
    is skipped and the iteration stops after its second allreduce. Sums per rank run over the
    sorted neighbours and global sums in rank order, so the iterates match
    :func:`pcg_distributed` bit for bit.
    """
    validate_model(model)
    _check_params(tolerance, max_iterations, form)
    max_iterations = 10 * model.p if max_iterations is None else max_iterations
    nbr, edge, sign = neighbour_table(model)
    mask = sign != 0
    wt = np.where(mask, model.weights[edge], 0.0)
    e, wk = model.edges, model.weights
    total = ordered_total(model.loads)
    b = model.loads - model.capacities * total
    bnorm2 = ordered_total(b * b)
    if form == "single-reduction":
        yield from _single_reduction_iter(model, b, bnorm2, total, tolerance, max_iterations,
                                          lambda v: ordered_row_sums(np.where(mask, wt * (v[:, None] - v[nbr]), 0.0)),
                                          lambda *vs: [ordered_total(v) for v in vs])
        return
    x = np.zeros(model.p)
    r = b - np.zeros(model.p)
    rho1 = ordered_total(r * r)
    rho0 = rho1
    u = r
    k = 0
    yield PCGState(0, x, np.zeros(model.q), _relres(rho1, bnorm2), _done(rho1, bnorm2, tolerance, total))
    while not _done(rho1, bnorm2, tolerance, total) and k < max_iterations:
        k += 1
        u = r if k == 1 else r + (rho1 / rho0) * u
        w = ordered_row_sums(np.where(mask, wt * (u[:, None] - u[nbr]), 0.0))
        dotp = ordered_total(u * w)
        stalled = not dotp > 0
        alpha = 0.0 if stalled else rho1 / dotp
        x = x + alpha * u
        r = r - alpha * w
        rho0 = rho1
        rho1 = ordered_total(r * r)
        yield PCGState(k, x, wk * (x[e[:, 0]] - x[e[:, 1]]), _relres(rho1, bnorm2),
                       _done(rho1, bnorm2, tolerance, total))
        if stalled:
            return


def _pcg_times(model: Model, n: int, links, form: str = "thesis") -> NDArray[np.float64] | None:
    if links is None:
        return None
    if form == "single-reduction":
        schedule = [(1, [("allreduce", 2), ("allreduce", 1), ("exchange", 1), ("allreduce", 2)]),
                    (n, [("exchange", 1), ("allreduce", 2)]),
                    (1, [("exchange", 1)])]
    else:
        schedule = [(1, [("allreduce", 2), ("allreduce", 1), ("allreduce", 1)]),
                    (n, [("exchange", 1), ("allreduce", 1), ("allreduce", 1)]),
                    (1, [("exchange", 1)])]
    return alpha_beta_time(model, links, schedule)


def pcg_counters(model: Model, iterations: int, links=None, *, form: str = "thesis") -> Counters:
    """Counters of :func:`pcg_distributed` after ``iterations`` CG iterations, computed analytically.

    Notes
    -----
    With n iterations, p ranks, q edges (Alg. 8: 3 initial allreduces, then per iteration one
    exchange of u and the allreduces of uᵀw and rᵀr, then the exchange of x):

    * ``exchange_rounds = n + 1``;
    * ``collectives = {"allreduce": 3 + 2n}``;
    * ``messages = 2q (n + 1)`` summed over the ranks;
    * ``bytes = 32 p + 16 q (n + 1) + 16 p n`` summed over the ranks (the first allreduce carries
      (load, error flag): 2 words; every other allreduce and message one word);
    * ``time``: largest per-rank α-β time under ``links``, 0 if ``links`` is None.

    ``form: single-reduction``: the two initial allreduces, an exchange of r and one allreduce of (rᵀr, wᵀr), then
    per iteration one exchange and one allreduce of two words, then the exchange of x: ``exchange_rounds = n + 2``,
    ``collectives = {"allreduce": 3 + n}``, ``messages = 2q (n + 2)``, ``bytes = 40 p + 16 q (n + 2) + 16 p n``.
    """
    n, p, q = int(iterations), model.p, model.q
    times = _pcg_times(model, n, links, form)
    if form == "single-reduction":
        return Counters(iterations=n, exchange_rounds=n + 2, collectives={"allreduce": 3 + n},
                        messages=2 * q * (n + 2), bytes=40 * p + 16 * q * (n + 2) + 16 * p * n,
                        time=float(np.max(times)) if times is not None else 0.0)
    return Counters(iterations=n, exchange_rounds=n + 1, collectives={"allreduce": 3 + 2 * n},
                    messages=2 * q * (n + 1), bytes=32 * p + 16 * q * (n + 1) + 16 * p * n,
                    time=float(np.max(times)) if times is not None else 0.0)


def _single_reduction_steps(b, bnorm2: float, total: float, tolerance: float, max_iterations: int, laplacian,
                            sums):
    """Chronopoulos and Gear's conjugate gradients on ``L x = b`` from ``x = 0``, for every form (whole vectors,
    one rank's scalars, a process' processors as vectors): ``laplacian(v)`` is ``L v`` (one neighbour exchange),
    ``sums(a, b)`` the global sums of a and b (one reduction of two words). Yields ``(k, x, γ)`` after every
    iteration (``γ = rᵀr``), starting with iteration 0; the last yield is after a breakdown (``δ − β γ / α ≤ 0``,
    round-off level only) or the stopping test. One iteration::

        p = r + β p;  s = w + β s;  x ← x + α p;  r ← r − α s;  w = L r;  (γ′, δ) = (rᵀr, wᵀr);
        β = γ′ / γ;  α = γ′ / (δ − β γ′ / α);  γ = γ′

    (``p = r``, ``s = w``, ``α = γ / δ`` at the first), the iterates of Alg. 8 in exact arithmetic."""
    x = b * 0.0
    r = b - 0.0
    w = laplacian(r)
    gamma, delta = sums(r * r, w * r)
    k = 0
    yield k, x, gamma
    p = s = None
    alpha = beta = 0.0
    while not _done(gamma, bnorm2, tolerance, total) and k < max_iterations:
        k += 1
        denom = delta if k == 1 else delta - beta * gamma / alpha
        stalled = not denom > 0
        alpha = 0.0 if stalled else gamma / denom
        p = r if k == 1 else r + beta * p
        s = w if k == 1 else w + beta * s
        x = x + alpha * p
        r = r - alpha * s
        w = laplacian(r)
        new, delta = sums(r * r, w * r)
        beta = new / gamma if gamma > 0 else 0.0
        gamma = new
        yield k, x, gamma
        if stalled:
            return


def _single_reduction_iter(model: Model, b, bnorm2: float, total: float, tolerance: float, max_iterations: int,
                           laplacian, sums) -> Iterator[PCGState]:
    """:func:`pcg_iter`'s states of ``form: single-reduction`` (:func:`_single_reduction_steps`)."""
    e, wk = model.edges, model.weights
    for k, x, gamma in _single_reduction_steps(b, bnorm2, total, tolerance, max_iterations, laplacian, sums):
        yield PCGState(k, x, wk * (x[e[:, 0]] - x[e[:, 1]]) if k else np.zeros(model.q), _relres(gamma, bnorm2),
                       _done(gamma, bnorm2, tolerance, total))


def pcg(model: Model, *, tolerance: float = 1e-8, max_iterations: int | None = None, links=None,
        form: str = "thesis") -> FlowResult:
    """Minimal balancing flow by conjugate gradients (thesis Alg. 8): serial reference of :func:`pcg_distributed`.

    Parameters
    ----------
    model : Model
    tolerance : float
        Relative residual: stop when ``√ρ ≤ tolerance ‖l − l̄‖``.
    max_iterations : int, optional
        Default ``10 p``.
    links : hermes.runtime.clock.Links, optional
        If given, ``counters.time`` is the α-β time the distributed form would be charged.
    form : str
        ``thesis`` or ``single-reduction`` (:data:`FORMS`).

    Returns
    -------
    FlowResult
        ``convergence_factor`` is None; ``extra`` holds ``residual``, ``potential`` and ``rank_times``.

    Raises
    ------
    BalancerError
        Bad ``tolerance`` or ``max_iterations``.
    GraphError
        Disconnected graph, non-positive capacity or weight.

    Notes
    -----
    Update rule: :func:`pcg_iter`; counters: :func:`pcg_counters`.
    """
    state = None
    for state in pcg_iter(model, tolerance=tolerance, max_iterations=max_iterations, form=form):
        pass
    assert state is not None
    counters = pcg_counters(model, state.iteration, form=form)
    times = _pcg_times(model, state.iteration, links, form)
    counters.time = float(np.max(times)) if times is not None else 0.0
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.converged,
                      counters=counters, convergence_factor=None,
                      extra={"residual": state.residual, "potential": state.potential, "rank_times": times})


def pcg_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], *,
                    tolerance: float = 1e-8, max_iterations: int | None = None,
                    form: str = "thesis") -> LocalFlowResult:
    """PCG (thesis Alg. 8) on one rank (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load : float
    capacity : float
        Normalised so that the capacities of all ranks sum to 1.
    weights : ndarray, shape (len(nb.neighbours),)
        Weight of the edge to each neighbour.
    tolerance : float
        Relative residual tolerance.
    max_iterations : int, optional
        Default ``10 · nb.size``.

    Returns
    -------
    LocalFlowResult
        ``flows[t] = w_t (x_i − x_t) > 0``: this rank sends to ``nb.neighbours[t]``. ``extra``
        holds ``potential`` and ``residual``.

    Raises
    ------
    BalancerError, GraphError
        On every rank, if any rank has a bad ``tolerance``, ``max_iterations``, load, capacity or edge weight
        (agreed collectively by :func:`agree_local_inputs`).

    Notes
    -----
    Alg. 8 with ``w`` reset before accumulation and ``ρ₀ ← ρ₁`` before the new ``ρ₁`` (see
    :func:`pcg_iter`). Communication: allreduce (l_i, error flag) → ``Σ l``; allreduce ``b_i²``;
    allreduce ``r_i²`` (ρ₀); per iteration one exchange of ``u_i`` and allreduces of ``u_i w_i`` and
    ``r_i²``; finally one exchange of ``x_i``. Counters: :func:`pcg_counters`.
    """
    wt = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, wt,
                               extra_checks=lambda: _check_params(tolerance, max_iterations, form))
    if max_iterations is None:
        max_iterations = 10 * nb.size
    load, capacity = float(load), float(capacity)
    b = load - capacity * total
    bnorm2 = nb.allreduce(b * b)
    if form == "single-reduction":
        k, x, rho1 = 0, 0.0, 0.0
        for k, x, rho1 in _single_reduction_steps(
                b, bnorm2, total, tolerance, max_iterations,
                lambda v: ordered_sum(wt * (v - nb.exchange_scalar(v))),
                lambda a, c: tuple(float(t) for t in nb.allreduce(np.array([a, c])))):
            pass
        return _local_result(nb, wt, x, k, rho1, bnorm2, tolerance, total)
    x = 0.0
    r = b - 0.0
    rho1 = nb.allreduce(r * r)
    rho0 = rho1
    u = r
    k = 0
    while not _done(rho1, bnorm2, tolerance, total) and k < max_iterations:
        k += 1
        u = r if k == 1 else r + (rho1 / rho0) * u
        uj = nb.exchange_scalar(u)
        w = ordered_sum(wt * (u - uj))
        dotp = nb.allreduce(u * w)
        stalled = not dotp > 0
        alpha = 0.0 if stalled else rho1 / dotp
        x = x + alpha * u
        r = r - alpha * w
        rho0 = rho1
        rho1 = nb.allreduce(r * r)
        if stalled:
            break
    return _local_result(nb, wt, x, k, rho1, bnorm2, tolerance, total)


def _local_result(nb: NeighbourComm, wt, x: float, k: int, rho1: float, bnorm2: float, tolerance: float,
                  total: float) -> LocalFlowResult:
    """One rank's flows from its potential (one exchange of x) and its result."""
    xj = nb.exchange_scalar(x)
    flows = wt * (x - xj)
    nb.counters.iterations = k
    return LocalFlowResult(flows=flows, iterations=k, converged=_done(rho1, bnorm2, tolerance, total),
                           counters=nb.counters,
                           extra={"potential": x, "residual": _relres(rho1, bnorm2)})


class PCGParams(Params):
    """Parameters of ``pcg``."""

    tolerance: Tolerance = Field(1e-8, description="relative residual: stop when √ρ ≤ tolerance ‖l − l̄‖")
    max_iterations: OptionalCount = Field(None, description="iteration limit (null: 10 p)")
    form: Literal["thesis", "single-reduction"] = Field(
        "thesis", description="thesis: Alg. 8, two allreduces per iteration; single-reduction: Chronopoulos and "
        "Gear's recurrence, one allreduce of two words per iteration (the same iterates in exact arithmetic)")


def pcg_bulk(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], *,
             tolerance: float = 1e-8, max_iterations: int | None = None, form: str = "thesis") -> LocalFlowResult:
    """:func:`pcg_distributed` run once per MPI process for all the processors it hosts (``run.bulk: auto``;
    :meth:`hermes.runtime.communicator.Communicator.bulk`): the same iterations, flows, clocks and counters, bit for
    bit — the processors' scalars as vectors, their neighbour exchanges and allreduces through
    :class:`~hermes.runtime.bulk.BankedNeighbours`, the stopping test on the same global values. Collective; the
    processors' clocks must be virtual without an extra load."""
    part = (nb, float(load), float(capacity), np.asarray(weights, dtype=np.float64).ravel(), tolerance,
            max_iterations, form)
    return run_bulk(nb, "pcg", part, _pcg_kernel)


def _pcg_kernel(group, parts: list) -> list:
    got = bulk_inputs(group, parts, extra_checks=_check_params)
    if isinstance(got, list):
        return got
    bn, nbs, loads, caps, wt, total = got.bn, got.nbs, got.loads, got.caps, got.weights, got.total
    tolerance, max_iterations, form = parts[0][4], parts[0][5], parts[0][6]
    if max_iterations is None:
        max_iterations = 10 * group.size
    own = bn.owner
    b = loads - caps * total
    bnorm2 = float(bn.allreduce(b * b)[0])
    if form == "single-reduction":
        k, x, rho1 = 0, np.zeros(len(parts)), 0.0
        for k, x, rho1 in _single_reduction_steps(
                b, bnorm2, total, tolerance, max_iterations,
                lambda v: bn.ordered_sums(wt * (v[own] - bn.exchange_scalar(v))),
                lambda a, c: tuple(float(t) for t in bn.allreduce(np.column_stack((a, c))))):
            pass
        return _bulk_results(bn, nbs, wt, x, k, rho1, bnorm2, tolerance, total)
    x = np.zeros(len(parts))
    r = b - 0.0
    rho1 = float(bn.allreduce(r * r)[0])
    rho0 = rho1
    u = r
    k = 0
    while not _done(rho1, bnorm2, tolerance, total) and k < max_iterations:
        k += 1
        u = r if k == 1 else r + (rho1 / rho0) * u
        uj = bn.exchange_scalar(u)
        w = bn.ordered_sums(wt * (u[own] - uj))
        dotp = float(bn.allreduce(u * w)[0])
        stalled = not dotp > 0
        alpha = 0.0 if stalled else rho1 / dotp
        x = x + alpha * u
        r = r - alpha * w
        rho0 = rho1
        rho1 = float(bn.allreduce(r * r)[0])
        if stalled:
            break
    return _bulk_results(bn, nbs, wt, x, k, rho1, bnorm2, tolerance, total)


def _bulk_results(bn, nbs, wt, x, k: int, rho1: float, bnorm2: float, tolerance: float, total: float) -> list:
    """Every processor's flows from its potential (one exchange of x) and its result, as :func:`_local_result`."""
    own = bn.owner
    xj = bn.exchange_scalar(x)
    flows = wt * (x[own] - xj)
    bn.store()
    converged = _done(rho1, bnorm2, tolerance, total)
    res = []
    for i, nb in enumerate(nbs):
        nb.counters.iterations = k
        res.append(LocalFlowResult(flows=flows[bn.ptr[i]:bn.ptr[i + 1]].copy(), iterations=k, converged=converged,
                                   counters=nb.counters, extra={"potential": x[i] if k else 0.0,
                                                                        "residual": _relres(rho1, bnorm2)}))
    return res


@register("pcg", params=PCGParams, serial=pcg, doc="method of potentials by conjugate gradients (thesis Alg. 8)")
def run_pcg(ctx: BalanceContext) -> Decision:
    from hermes.runtime.clock import ClockBank

    bulk = ctx.bulk == "auto" and ClockBank.bankable([ctx.clock])
    return flow_balancer(pcg_bulk if bulk else pcg_distributed)(ctx)
