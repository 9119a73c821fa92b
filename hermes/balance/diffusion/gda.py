"""Generalized diffusion (GDA) with the matrices M¹(ε) … M⁶: serial reference and distributed form.

The generalized diffusion algorithm (thesis Alg. 3, ch. 5; JPDC Alg. 1, §3) iterates
``l ← M l`` with a generalized diffusion matrix ``M = I − A U Aᵀ D⁻¹`` (thesis §5.4, eq. 5.0.1) of
edge rates ``u_k = m_ij c_j``. The six matrices of thesis §5.6 (eq. 5.6.1–5.6.6), their rates,
spectrum and bounds are in :mod:`hermes.balance.diffusion.matrices`. ``lazy=True`` iterates with ½(I + M)
(thesis ch. 6).

In flow form one iteration moves ``x_k = u_k (l_i/c_i − l_j/c_j)`` from i to j. The accumulated flow is
the balancing flow minimal in ``‖·‖_{2,U^{-1/2}}`` (Lemma 7, Th. 14): :func:`diffusion_flow`, i.e.
the minimal flow of the model with conductances u. It is the w-minimal flow (Th. 20) when u ∝ w
(M², M⁶, M¹ with constant s_k, and on trees, which have one balancing flow); the lazy matrix
gives the same flow as M (u/2 has the same minimiser). SOS (:mod:`hermes.balance.diffusion.sos`)
and the implicit schemes (:mod:`hermes.balance.diffusion.implicit`) reach the same flow (Th. 17/18); they share
this module's iteration drivers (:func:`sweep_states`, :func:`local_sweeps`), stopping rule and
analytic counters (:func:`sweep_counters`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BeforeValidator, Field

from hermes.balance.central import central_value, connectivity_units, eigen_units, with_central
from hermes.balance.diffusion.matrices import (
    GLOBAL_KINDS,
    Setup,
    check_eps,
    check_matrix,
    diagonal_report,
    diffusion_bounds,
    diffusion_matrix,
    local_edge_rates,
    setup,
)
from hermes.balance.diffusion.spectral import (
    convergence_factor,
    elsasser_alpha,
    epsilon0,
)
from hermes.balance.flow import (
    FlowResult,
    LocalFlowResult,
    agree_local_inputs,
    alpha_beta_time,
    ordered_total,
)
from hermes.balance.interface import (MAX_ITERATIONS, BalanceContext, Count, Decision, Flag, Params,
                                      StopTolerance, flow_balancer, number_type)
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["GDAState", "check_stopping", "residual", "setup_words", "final_state", "sweep_states",
           "sweep_result", "local_sweeps", "gda_iter", "gda", "sweep_counters", "gda_counters", "gda_distributed",
           "StopParams", "Eps", "eps_value", "m6_nonnegative", "run_gda"]


# -- shared by the diffusion-type schemes (GDA, SOS, implicit) --------------------------------------
@dataclass
class GDAState:
    """One step of :func:`gda_iter` (also used by the SOS and implicit generators).

    Attributes
    ----------
    iteration : int
        Number of sweeps ``l ← M l`` done so far (0 = initial state).
    loads : ndarray, shape (p,)
    flow : ndarray, shape (q,)
        Accumulated flow on ``model.edges``.
    residual : float
        ``max_i |l_i − l̄_i| / l̄_i`` of ``loads``.
    checked : bool
        Whether the stopping rule was evaluated here (every ``check_every`` sweeps, at 0 and at
        ``max_iterations``): only then does the distributed form know the residual.
    """

    iteration: int
    loads: NDArray[np.float64]
    flow: NDArray[np.float64]
    residual: float
    checked: bool


def check_stopping(tolerance: float, max_iterations: int, check_every: int) -> None:
    """Validate the stopping rule of :func:`gda_iter`; BalancerError (one line) if a parameter is bad.

    ``tolerance`` must be ≥ 0, ``max_iterations`` an integer in 0..MAX_ITERATIONS and ``check_every`` one in
    1..MAX_ITERATIONS.
    """
    if not (math.isfinite(float(tolerance)) and tolerance >= 0):
        raise BalancerError(f"tolerance must be ≥ 0, got {tolerance!r}")
    if int(max_iterations) != max_iterations or not 0 <= max_iterations <= MAX_ITERATIONS:
        raise BalancerError(f"max_iterations must be an integer in 0..{MAX_ITERATIONS}, got {max_iterations!r}")
    if int(check_every) != check_every or not 1 <= check_every <= MAX_ITERATIONS:
        raise BalancerError(f"check_every must be an integer in 1..{MAX_ITERATIONS}, got {check_every!r}")


def residual(loads: NDArray[np.float64], fair: NDArray[np.float64]) -> float:
    """``max_i |l_i − l̄_i| / l̄_i``, the stopping criterion of the serial forms (0 when the total load is 0)."""
    if not np.all(fair > 0):  # zero total load: nothing to balance
        return 0.0
    return float(np.max(np.abs(loads - fair) / fair))


def setup_words(kind: int) -> tuple[int, ...]:
    """The ``setup`` of :func:`sweep_counters` for M^kind: ``(3,)`` for M², M³, M⁴ (c_min, c_max, Δ^w), else ``()``."""
    return (3,) if kind in GLOBAL_KINDS else ()


def final_state(states: Iterable[GDAState]) -> GDAState:
    """Run a generator such as :func:`gda_iter` to the end and return its last state."""
    state = None
    for state in states:
        pass
    assert state is not None
    return state


def sweep_states(model: Model, s: Setup, step: Callable[[NDArray[np.float64], int], NDArray[np.float64]], *,
                 tolerance: float, max_iterations: int, check_every: int) -> Iterator[GDAState]:
    """The loop of the serial diffusion-type generators (GDA, SOS, implicit), yielding every state.

    Parameters
    ----------
    model : Model
    s : Setup
        Its :meth:`~hermes.balance.diffusion.matrices.Setup.outflow` applies A to an edge flow.
    step : callable
        ``step(loads, n) -> x``: the edge flow (shape (q,)) of sweep ``n + 1`` from the current loads.
    tolerance, max_iterations, check_every
        The stopping rule of :func:`gda_iter` (validated by the caller).

    Notes
    -----
    State 0 is the initial loads; each sweep does ``l ← l − A x``, ``f ← f + x``. The residual is
    evaluated after every sweep, but the loop stops only at a check (every ``check_every`` sweeps
    and at ``max_iterations``), as the distributed form (:func:`local_sweeps`) does.
    """
    fair = model.capacities * ordered_total(model.loads)
    loads = model.loads.copy()
    flow = np.zeros(model.q)
    n = 0
    r = residual(loads, fair)
    yield GDAState(0, loads, flow, r, True)
    if r <= tolerance:
        return
    while n < max_iterations:
        x = step(loads, n)
        loads = loads - s.outflow(x)
        flow = flow + x
        n += 1
        checked = n % check_every == 0 or n == max_iterations
        r = residual(loads, fair)
        yield GDAState(n, loads, flow, r, checked)
        if checked and r <= tolerance:
            return


def gda_iter(model: Model, eps: str | float = "eps0", stop: StopParams | None = None, *, kind: int = 1,
             alpha: float | None = None) -> Iterator[GDAState]:
    """Run GDA with M^kind(ε) serially, yielding the state after every sweep.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ε of M¹ … M⁴ (ignored by M⁵, M⁶).
    stop : StopParams, optional
        ``lazy`` (iterate with ½(I + M)) and the stopping rule (default ``StopParams()``; from raw values:
        ``StopParams.of(tolerance=1e-6)``): stop when ``max_i |l_i − l̄_i| / l̄_i ≤ tolerance`` at a check,
        after at most ``max_iterations`` sweeps; the residual is checked before the first sweep, after every
        ``check_every`` sweeps and after sweep ``max_iterations``.
    kind : int in 1..6
        The diffusion matrix (module docstring).
    alpha : float, optional
        α of M⁶ (default :func:`elsasser_alpha`).

    Yields
    ------
    GDAState
        Starting with iteration 0; the last one yielded is the final state.

    Raises
    ------
    BalancerError
        Bad ε, kind, lazy, α, tolerance, max_iterations or check_every. GraphError for an unusable model.

    Notes
    -----
    Thesis Alg. 3 with the loop nesting fixed (one synchronous sweep per iteration):
    ``x_k = u_k (l_i/c_i − l_j/c_j)`` on every edge ``e_k = {i, j}``, ``l ← l − A x`` (i.e.
    ``l ← M l``) and ``f ← f + x``. Per-rank sums run over the neighbours in sorted order and ``Σ l``
    in rank order, so the result matches :func:`gda_distributed` bit for bit.
    """
    stop = StopParams() if stop is None else stop
    s = setup(model, eps, kind, stop.lazy, alpha)
    check_stopping(stop.tolerance, stop.max_iterations, stop.check_every)
    c, e = model.capacities, model.edges

    def step(loads: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        h = loads / c
        return s.u * (h[e[:, 0]] - h[e[:, 1]])

    yield from sweep_states(model, s, step, tolerance=stop.tolerance, max_iterations=stop.max_iterations,
                            check_every=stop.check_every)


def sweep_counters(model: Model, iterations: int, check_every: int = 1, links=None, *,
                   setup: tuple[int, ...] = (), exchanges: int = 1) -> tuple[Counters, NDArray | None]:
    """Counters (and per-rank α-β times) of a diffusion-type distributed form, computed analytically.

    Parameters
    ----------
    model : Model
    iterations : int
        n, the number of (outer) iterations.
    check_every : int
    links : hermes.runtime.clock.Links, optional
    setup : tuple of int
        Word counts of the allreduces done after the (c_i, δ_i^w) exchange and before the first
        residual check (e.g. (3,) for the (c_min, c_max, Δ^w) of M² … M⁴).
    exchanges : int
        e, neighbour exchanges of one scalar per iteration (1 for GDA and SOS).

    Returns
    -------
    (Counters, ndarray or None)
        The counters and the per-rank times (None without links).

    Notes
    -----
    The schedule: allreduce (l_i, error flag); exchange (c_i, δ_i^w); the ``setup`` allreduces;
    allreduce(max) of the residual; then per iteration e exchanges and, every ``check_every``
    iterations and after the last, one residual allreduce. With ``C = 1 + ⌈n / check_every⌉``
    checks: ``exchange_rounds = 1 + e n``; ``collectives = {"allreduce": 1 + len(setup) + C}``;
    ``messages = 2q (1 + e n)``; ``bytes = 16p + 32q + 8p Σ setup + 16 q e n + 8p C``.
    """
    n, ce = int(iterations), int(check_every)
    checks = 1 + -(-n // ce)
    p, q = model.p, model.q
    times = None
    if links is not None:
        step = [("exchange", 1)] * exchanges
        schedule = [(1, [("allreduce", 2), ("exchange", 2)] + [("allreduce", w) for w in setup]
                     + [("allreduce", 1)]), (n // ce, step * ce + [("allreduce", 1)])]
        if n % ce:
            schedule.append((1, step * (n % ce) + [("allreduce", 1)]))
        times = alpha_beta_time(model, links, schedule)
    cnt = Counters(iterations=n, exchange_rounds=1 + exchanges * n,
                   collectives={"allreduce": 1 + len(setup) + checks}, messages=2 * q * (1 + exchanges * n),
                   bytes=16 * p + 32 * q + 8 * p * sum(setup) + 16 * q * exchanges * n + 8 * p * checks,
                   time=float(np.max(times)) if times is not None else 0.0)
    return cnt, times


def gda_counters(model: Model, iterations: int, check_every: int = 1, links=None, *, kind: int = 1) -> Counters:
    """Counters of :func:`gda_distributed` after ``iterations`` sweeps, computed analytically.

    Notes
    -----
    With n sweeps, ``C = 1 + ⌈n / check_every⌉`` residual checks, p ranks and q edges, and
    ``g = 1`` for M², M³, M⁴ (one allreduce(max) of (−c_i, c_i, δ_i^w)), else ``g = 0``:

    * ``exchange_rounds = 1 + n`` (the (c_i, δ_i^w) exchange, then one per sweep);
    * ``collectives = {"allreduce": 1 + g + C}`` (total load, [c_min, c_max, Δ^w,] residual checks);
    * ``messages = 2q (1 + n)`` summed over the ranks (one per edge direction and round);
    * ``bytes = 16 p + 32 q + 24 p g + 16 q n + 8 p C`` summed over the ranks;
    * ``time``: the largest per-rank virtual time of this schedule under ``links``
      (:func:`~hermes.balance.flow.alpha_beta_time`), 0 if ``links`` is None.
    """
    return sweep_counters(model, iterations, check_every, links, setup=setup_words(kind))[0]


def sweep_result(model: Model, s: Setup, state: GDAState, stop: StopParams, *, kind: int, links,
                 compute_factor: bool, head: dict | None = None) -> FlowResult:
    """The FlowResult of a serial scheme on M^kind (GDA, SOS) from its final state.

    ``stop`` is the run's :class:`StopParams` (``lazy``, ``tolerance``, ``check_every`` are read). ``extra``
    holds ``head`` (e.g. SOS's ω) followed by ``eps``, ``kind``, ``lazy``, ``alpha``, ``residual``, ``loads``,
    ``rank_times``, :func:`~hermes.balance.diffusion.matrices.diagonal_report` and, with ``compute_factor``,
    ``bounds``; ``convergence_factor`` is λ_M then (else None). Counters: :func:`sweep_counters` with
    :func:`setup_words`.
    """
    lazy = stop.lazy
    counters, times = sweep_counters(model, state.iteration, stop.check_every, links, setup=setup_words(kind))
    extra = {**(head or {}), "eps": s.eps, "kind": kind, "lazy": bool(lazy), "alpha": s.alpha,
             "residual": state.residual, "loads": state.loads, "rank_times": times}
    extra.update(diagonal_report(model, s, kind))
    factor = None
    if compute_factor:
        factor = convergence_factor(diffusion_matrix(model, s.eps, kind, lazy=lazy, alpha=s.alpha), model.capacities)
        extra["bounds"] = diffusion_bounds(model, s.eps, kind, lazy=lazy, alpha=s.alpha)
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.residual <= stop.tolerance,
                      counters=counters, convergence_factor=factor, extra=extra)


def gda(model: Model, eps: str | float = "eps0", stop: StopParams | None = None, *, kind: int = 1,
        alpha: float | None = None, links=None, compute_factor: bool = True) -> FlowResult:
    """GDA with M^kind(ε) (thesis Alg. 3, eq. 5.6.1–5.6.6): the serial reference of :func:`gda_distributed`.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ``"eps0"`` is ε₀ of thesis Cor. 2 (GDA0 with kind 1); 1.0 gives GDA1.
    stop : StopParams, optional
        ``lazy`` and the stopping rule (``tolerance``, ``max_iterations``, ``check_every``), see
        :func:`gda_iter`; default ``StopParams()``.
    kind, alpha
        The matrix, see :func:`gda_iter`.
    links : hermes.runtime.clock.Links, optional
        If given, ``counters.time`` is the α-β time the distributed form would be charged.
    compute_factor : bool
        Also compute the convergence factor λ_M (an eigenvalue problem) and the bounds of
        :func:`diffusion_bounds`.

    Returns
    -------
    FlowResult
        ``extra`` holds ``eps``, ``kind``, ``lazy``, ``alpha`` (M⁶), ``residual``, ``loads`` (final),
        ``rank_times``, ``min_diagonal`` and ``nonnegative`` (False: M is not a GDM, only possible
        for M⁶) and, with ``compute_factor``, ``bounds``.

    Raises
    ------
    BalancerError
        Bad ε, kind, lazy, α or stopping parameters.
    GraphError
        Disconnected graph, non-positive capacity or weight.

    Notes
    -----
    See :func:`gda_iter` for the update rule and :func:`gda_counters` for the counters.
    """
    stop = StopParams() if stop is None else stop
    s = setup(model, eps, kind, stop.lazy, alpha)
    state = final_state(gda_iter(model, s.eps, stop, kind=kind, alpha=s.alpha))
    return sweep_result(model, s, state, stop, kind=kind, links=links, compute_factor=compute_factor)


# -- distributed form -----------------------------------------------------------------------------
def local_sweeps(nb: NeighbourComm, load: float, fair: float, step: Callable[[float, int], NDArray[np.float64]], *,
                 tolerance: float, max_iterations: int, check_every: int) -> LocalFlowResult:
    """The loop of the distributed diffusion-type forms (GDA, SOS, implicit) on one rank (collective).

    Parameters
    ----------
    nb : NeighbourComm
        Its counters get ``iterations``.
    load, fair : float
        This rank's load l_i and its fair share ``l̄_i = c_i Σ l``.
    step : callable
        ``step(load, n) -> x``: the flows to ``nb.neighbours`` of sweep ``n + 1`` (it does the exchanges).
    tolerance, max_iterations, check_every
        The stopping rule of :func:`gda_iter` (validated by the caller).

    Returns
    -------
    LocalFlowResult
        ``extra`` holds the final ``load`` and ``residual``.

    Notes
    -----
    Per sweep ``l_i ← l_i − Σ_j x_ij``, ``f_ij ← f_ij + x_ij``; one allreduce(max) of
    ``|l_i − l̄_i| / l̄_i`` before the first sweep, every ``check_every`` sweeps and after ``max_iterations``.
    """
    flows = np.zeros(len(nb.neighbours))

    def global_residual(load: float) -> float:
        local = abs(load - fair) / fair if fair > 0 else 0.0
        return float(nb.allreduce(local, op="max"))

    n = 0
    r = global_residual(load)
    while r > tolerance and n < max_iterations:
        x = step(load, n)
        load = load - ordered_sum(x)
        flows = flows + x
        n += 1
        if n % check_every == 0 or n == max_iterations:
            r = global_residual(load)
    nb.counters.iterations = n
    return LocalFlowResult(flows=flows, iterations=n, converged=r <= tolerance, counters=nb.counters,
                           extra={"load": load, "residual": r})


def gda_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], eps: float,
                    stop: StopParams | None = None, *, kind: int = 1, alpha: float | None = None) -> LocalFlowResult:
    """GDA with M^kind(ε) on one rank (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load : float
        This rank's load l_i.
    capacity : float
        This rank's capacity c_i, normalised so that the capacities of all ranks sum to 1.
    weights : ndarray, shape (len(nb.neighbours),)
        Weight of the edge to each neighbour.
    eps : float
        ε ≥ 0 of M¹ … M⁴ (the caller computes ε₀ from the global graph, e.g. with :func:`epsilon0`);
        ignored by M⁵ and M⁶.
    stop : StopParams, optional
        ``lazy`` (iterate with ½(I + M)) and the stopping rule of :func:`gda_iter` (``tolerance``,
        ``max_iterations``, ``check_every``); default ``StopParams()``. The values are checked again here,
        collectively, so an object built without validation on one rank fails on every rank.
    kind : int in 1..6
    alpha : float
        α of M⁶, required for kind 6 (the thesis assumes the spectrum of 𝓛 known; the registry
        adapter computes it with :func:`elsasser_alpha` from the global model).

    Returns
    -------
    LocalFlowResult
        ``flows[t] > 0``: this rank sends that much to ``nb.neighbours[t]``. ``extra`` holds the
        final ``load``, ``residual`` and ``nonnegative`` (this rank's diagonal entry ≥ 0).

    Raises
    ------
    BalancerError, GraphError
        On every rank, if any rank has a bad ε, kind, lazy, α, ``tolerance``, ``max_iterations``,
        ``check_every``, load, capacity or edge weight (agreed by :func:`agree_local_inputs`).

    Notes
    -----
    Thesis Alg. 3 with one synchronous sweep per iteration. Communication: one allreduce of
    (l_i, error flag) for ``Σ l`` (and collective validation), the set-up of
    :func:`local_edge_rates`, then per sweep one exchange of l_i and ``x_ij = u_ij (l_i/c_i − l_j/c_j)``,
    ``l_i ← l_i − Σ_j x_ij``, ``f_ij ← f_ij + x_ij``; every ``check_every`` sweeps (and at 0 and
    ``max_iterations``) one allreduce(max) of ``|l_i − l̄_i| / l̄_i`` (:func:`local_sweeps`). Counters:
    :func:`gda_counters`.
    """
    stop = StopParams() if stop is None else stop
    lazy, tolerance, max_iterations, check_every = stop.lazy, stop.tolerance, stop.max_iterations, stop.check_every
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check_parameters() -> None:
        check_eps(eps)
        check_matrix(kind, lazy, alpha, need_alpha=True)
        check_stopping(tolerance, max_iterations, check_every)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check_parameters)
    capacity, load = float(capacity), float(load)
    u, cj = local_edge_rates(nb, capacity, w, check_eps(eps), kind, lazy=lazy, alpha=alpha)

    def step(load: float, n: int) -> NDArray[np.float64]:
        lj = nb.exchange_scalar(load)
        return u * (load / capacity - lj / cj)

    res = local_sweeps(nb, load, capacity * total, step, tolerance=tolerance, max_iterations=max_iterations,
                       check_every=check_every)
    res.extra["nonnegative"] = 1.0 - ordered_sum(u) / capacity >= -1e-12
    return res


# -- registry ------------------------------------------------------------------------------------------
class StopParams(Params):
    """The stopping rule shared by the diffusion family (gda0 … gda6, sos, implicit schemes)."""

    tolerance: StopTolerance = Field(
        1e-3, description="stop when max_i |l_i − l̄_i| / l̄_i ≤ tolerance (0: run max_iterations sweeps)")
    max_iterations: Count = Field(100_000, description="sweep limit (one neighbour exchange each)")
    check_every: Count = Field(1, description="sweeps between two global residual checks (one allreduce each)")
    lazy: Flag = Field(False, description="iterate with ½(I + M) (thesis ch. 6)")


#: the largest ε of M¹(ε) a user gives. The rates are u_k = w_k min(c_i / (δ_i + ε), c_j / (δ_j + ε)) with the
#: link weights w ≤ 1 the monitor gives (bandwidths relative to the fastest link) and δ_i the weighted degree: ε
#: divides a sweep's movement by about (δ + ε) / δ, so the sweeps to converge grow by that factor; ε ≤ 1000 keeps
#: the factor within 1000 / δ (ε = 1e100 gave rates of 1e-100: no load moved in max_iterations sweeps)
MAX_EPS = 1e3


def _eps(v: Any) -> Any:
    if v == "eps0" or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                       and 0 <= v <= MAX_EPS):
        return v
    raise ValueError(f"must be 'eps0' or a number in [0, {MAX_EPS:g}], got {v!r}")


#: ε of M¹(ε) as a parameter (sos, implicit): ``eps0`` (thesis Cor. 2) or a number in [0, MAX_EPS] (added to the
#: degrees: a larger ε slows the diffusion down, see :data:`MAX_EPS`)
Eps = Annotated[Literal["eps0"] | number_type(ge=0, le=MAX_EPS), BeforeValidator(_eps)]


def eps0_charges(model: Model, params) -> list[tuple[float, int]]:
    """The central work of an :data:`Eps` parameter (``params["eps"]``): ε₀'s edge connectivity, or nothing."""
    return [(connectivity_units(model), 1)] if params.get("eps", "eps0") == "eps0" else []


def eps_value(model: Model, eps, ctx=None) -> float:
    """The value of an :data:`Eps` parameter on ``model``; given the balancing context ``ctx`` (collective), ε₀ is
    charged as computed on rank 0 and broadcast (hermes.balance.central.central_value)."""
    if eps != "eps0":
        return float(eps)
    value = epsilon0(model)
    return value if ctx is None else central_value(ctx, value, connectivity_units(model))


def m6_nonnegative(model: Model, alpha: float, lazy: bool) -> bool:
    """Whether M⁶ (or its lazy form) is non-negative: ``min_i 1 − α δ_i^w / c_i ≥ 0``."""
    diag = 1.0 - alpha * model.weighted_degree / model.capacities
    return bool(np.min(0.5 * (1.0 + diag) if lazy else diag) >= -1e-12)


def _gda_dist(nb, load, capacity, weights, *, eps, kind=1, alpha=None, **stop):
    """:func:`gda_distributed` as :func:`flow_balancer` calls it (the stopping rule as its parameters object)."""
    return gda_distributed(nb, load, capacity, weights, eps, StopParams.of(stop), kind=kind, alpha=alpha)


def _eps0_charge(model: Model, params) -> list[tuple[float, int]]:
    """ε₀'s central work, as the distributed form charges it (hermes.balance.central): the edge connectivity."""
    return [(connectivity_units(model), 1)]


def _alpha_charge(model: Model, params) -> list[tuple[float, int]]:
    """M⁶'s α: a dense eigensolve on rank 0, broadcast."""
    return [(eigen_units(model.p), 1)]


def _gda_serial(model, *, eps, kind=1, links=None, compute_factor=True, **stop):
    """:func:`gda` as the registry's serial reference (``serial(model, *, links=None, **params)``) is called: the
    stopping rule as its parameters object."""
    return gda(model, eps, StopParams.of(stop), kind=kind, links=links, compute_factor=compute_factor)


def run_gda(ctx: BalanceContext, kind: int) -> Decision:
    """The distributed GDA with M^kind in ``hermes run``: ε = ε₀ for M¹ … M⁴ (0 for M⁵, M⁶), α of Elsässer et al.
    for M⁶ (its decision tells whether M⁶ was non-negative)."""
    fixed: dict[str, Any] = {}
    if kind <= 4:
        fixed["eps"] = central_value(ctx, epsilon0(ctx.model), connectivity_units(ctx.model))
    if kind == 6:
        fixed["alpha"] = central_value(ctx, elsasser_alpha(ctx.model), eigen_units(ctx.model.p))
    distributed = functools.partial(_gda_dist, kind=kind) if kind <= 4 else \
        functools.partial(_gda_dist, kind=kind, eps=0.0)
    dec = flow_balancer(distributed, **fixed)(ctx)
    if kind == 6:
        dec.info["nonnegative"] = m6_nonnegative(ctx.model, dec.info["alpha"], ctx.params["lazy"])
    return dec


@register("gda0", params=StopParams,
          serial=with_central(functools.partial(_gda_serial, eps="eps0"), _eps0_charge),
          doc="generalized diffusion with M¹(ε₀) (thesis Alg. 3, eq. 5.6.1, Cor. 2)")
def run_gda0(ctx: BalanceContext) -> Decision:
    return flow_balancer(_gda_dist, eps=central_value(ctx, epsilon0(ctx.model), connectivity_units(ctx.model)))(ctx)


@register("gda1", params=StopParams, serial=functools.partial(_gda_serial, eps=1.0),
          doc="generalized diffusion with M¹(1) (thesis Alg. 3, eq. 5.6.1)")
def run_gda1(ctx: BalanceContext) -> Decision:
    return flow_balancer(_gda_dist, eps=1.0)(ctx)


@register("gda2", params=StopParams,
          serial=with_central(functools.partial(_gda_serial, eps="eps0", kind=2), _eps0_charge),
          doc="generalized diffusion with M²(ε₀) (thesis eq. 5.6.2, JPDC eq. 4.2)")
def run_gda2(ctx: BalanceContext) -> Decision:
    return run_gda(ctx, 2)


@register("gda3", params=StopParams,
          serial=with_central(functools.partial(_gda_serial, eps="eps0", kind=3), _eps0_charge),
          doc="generalized diffusion with M³(ε₀) (thesis eq. 5.6.3, JPDC eq. 4.3)")
def run_gda3(ctx: BalanceContext) -> Decision:
    return run_gda(ctx, 3)


@register("gda4", params=StopParams,
          serial=with_central(functools.partial(_gda_serial, eps="eps0", kind=4), _eps0_charge),
          doc="generalized diffusion with M⁴(ε₀) (thesis eq. 5.6.4, JPDC eq. 4.4)")
def run_gda4(ctx: BalanceContext) -> Decision:
    return run_gda(ctx, 4)


@register("gda5", params=StopParams, serial=functools.partial(_gda_serial, eps=0.0, kind=5),
          doc="generalized diffusion with M⁵, the 'bad example' (thesis eq. 5.6.5, JPDC eq. 4.5)")
def run_gda5(ctx: BalanceContext) -> Decision:
    return run_gda(ctx, 5)


@register("gda6", params=StopParams,
          serial=with_central(functools.partial(_gda_serial, eps=0.0, kind=6), _alpha_charge),
          doc="generalized diffusion with M⁶ of Elsässer et al., α = 2/(μ₂+μ_p) "
              "(thesis eq. 5.6.6, JPDC eq. 4.6; may be negative, e.g. on stars)")
def run_gda6(ctx: BalanceContext) -> Decision:
    return run_gda(ctx, 6)
