"""Chebyshev-accelerated diffusion: neighbour steps only, a step count known beforehand from spectral bounds.

With ``A = L D⁻¹`` (spectrum of 𝓛 = D^{-1/2} L D^{-1/2}, non-zero part in ``[a, b]``) the loads follow the
shifted and scaled Chebyshev polynomial ``x_k = T_k((θ − A)/δ) x_0 / T_k(θ/δ)``, ``θ = (b+a)/2``,
``δ = (b−a)/2``, ``x_0 = l − l̄`` — the optimal polynomial on ``[a, b]`` with value 1 at 0 (Golub–Varga's
semi-iterative method; second-order diffusion with the optimal varying ω, thesis ch. 6). Saad's stable
three-term form (Iterative Methods for Sparse Linear Systems, 2nd ed., Alg. 12.1) applied to ``A z = x_0``::

    d_0 = x_0 / θ,  ρ_0 = δ/θ;   repeat:  g = W Aᵀ D⁻¹ d  (per edge w_ij (d_i/c_i − d_j/c_j)),
    f ← f + g,  x ← x − A g,  ρ' = 1 / (2θ/δ − ρ),  d ← ρ' ρ d + (2ρ'/δ) x,  ρ ← ρ'.

One exchange of the scalar ``d_i / c_i`` per step and no collective: ``x`` is the remaining imbalance,
``f`` a sum of potential flows, hence the minimal flow in the limit. With ``σ = θ/δ`` the energy norm
of the remaining flow (``Σ_k f_k²/w_k`` of the minimal flow of ``x_k``) is at most ``1/T_k(σ)`` times
that of the whole flow, because it equals ``Σ_m p_k(μ_m)² v_m² / μ_m`` in the eigenbasis (v = D^{-1/2}x_0).
So ``k = ⌈acosh(1/τ) / acosh(σ)⌉ ≈ ½ √κ ln(2/τ)`` steps (κ = b/a) give a relative energy error ≤ τ, and
every rank knows k beforehand: no global convergence test, no reduction per step. The Euclidean flow
error is at most ``√(w_max / w_min)`` times the energy error; :func:`chebyshev_steps` asks for
``τ = tol / √(w_max/w_min)``.

Bounds (:func:`spectral_bounds`):

* ``exact``: ``a = μ_2``, ``b = μ_p`` from the dense spectrum of 𝓛
  (:func:`hermes.balance.polynomial.leja.laplacian_spectrum`, computed once and reused while the graph,
  capacities and weights do not change). Like the eigen forms of LPS/LPA/MPA, the computation is charged to
  the clock when it is done (``spectrum: charged``, the default: gather of the graph, rank 0's eigensolve,
  broadcast of ``a, b, k``; :mod:`hermes.balance.polynomial.precompute`) or not (``spectrum: free``);
  ``auto``, which computes the same spectrum to decide, pays for it once;
* ``lanczos`` (the default): ``lanczos_steps`` steps of the Lanczos recurrence on 𝓛 from the imbalance itself,
  distributed — per step one neighbour exchange and two allreduces, charged as they run
  (:mod:`hermes.balance.diffusion.lanczos`): the extreme Ritz values widened by their residuals. O(edges) per
  step where ``exact`` is a dense eigensolve of 4/3 p³ flops on one processor; recomputed every round (the
  imbalance is its start). Not a guarantee that ``a ≤ μ₂`` (see that module): the step count is planned for
  ``[a, b]``, and what it leaves is the result's residual, balanced by the phase's next round;
* ``cheap``: Gershgorin ``b = max_i 2 δ_i^w / c_i`` (the column sums of |A|) and Mohar's
  ``λ_2(L) ≥ 4 w_min / (p D)`` (D the diameter; B. Mohar, "Eigenvalues, diameter, and mean distance in
  graphs", Graphs Combin. 7 (1991)) with ``μ_2(𝓛) ≥ λ_2(L) / c_max`` (Rayleigh quotient with
  ``Σ c_i u_i = 0``): no eigensolver, but a pessimistic κ and many more steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.central import central_value, centre_units, with_central
from hermes.balance.flow import (FlowResult, LocalFlowResult, agree_local_inputs, bulk_flow_results, bulk_inputs,
                                 ordered_total, run_bulk, validate_model)
from hermes.balance.interface import (MAX_ITERATIONS, Decision, OptionalCount, Params, Tolerance, flow_from_local,
                                     integer_type)
from hermes.balance.diffusion.lanczos import LanczosBounds, lanczos_bounds, lanczos_bulk, lanczos_distributed
from hermes.balance.model import Model
from hermes.balance.polynomial.charpoly import NeighbourTables, schedule_counters
from hermes.balance.polynomial.leja import (charged_plan, check_spectrum, laplacian_spectrum, plan_key,
                                           serial_spectrum, spectrum_report)
from hermes.balance.polynomial.precompute import SPECTRUM_CHARGES
from hermes.balance.registry import register
from hermes.runtime.comm import NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["BOUNDS", "spectral_bounds", "bounds_from_spectrum", "chebyshev_steps", "ChebyshevState", "chebyshev_iter",
           "chebyshev", "chebyshev_schedule", "chebyshev_distributed", "ChebyshevParams"]

BOUNDS = ("lanczos", "exact", "cheap")
#: Lanczos steps at most (``lanczos_steps``): the bounds' residuals are within 10⁻³ long before on the study's graphs
LANCZOS_STEPS = 60
#: the exact bounds are widened by this relative margin (the eigensolver's accuracy, 16 p ε, made generous)
_MARGIN = 1e-9


def spectral_bounds(model: Model, kind: str = "exact", lanczos_steps: int = LANCZOS_STEPS) -> tuple[float, float]:
    """``(a, b)`` with the non-zero eigenvalues of 𝓛 inside ``[a, b]`` (see the module docstring; ``lanczos``: the
    estimate from the model's imbalance, ``(1, 1)`` if the loads are balanced).

    Raises
    ------
    BalancerError
        Unknown ``kind``.
    """
    if kind not in BOUNDS:
        raise BalancerError(f"bounds must be one of {', '.join(BOUNDS)}, got {kind!r}")
    validate_model(model)
    if model.p < 2:
        return 1.0, 1.0
    if kind == "exact":
        return bounds_from_spectrum(laplacian_spectrum(model))
    if kind == "lanczos":
        bd = lanczos_bounds(model, lanczos_steps)
        return (1.0, 1.0) if bd is None else (bd.a, bd.b)
    import scipy.sparse.csgraph as csg

    diam = int(np.max(csg.shortest_path(model.laplacian != 0, unweighted=True, directed=False)))
    c = model.capacities
    a = 4.0 * float(model.weights.min()) / (model.p * diam) / float(c.max())
    b = float(np.max(2.0 * model.weighted_degree / c))
    return a, b


def bounds_from_spectrum(mu: NDArray[np.float64]) -> tuple[float, float]:
    """``(μ_2, μ_p)`` of an ascending spectrum of 𝓛, widened by the relative margin 10⁻⁹."""
    return float(mu[1]) * (1.0 - _MARGIN), float(mu[-1]) * (1.0 + _MARGIN)


def chebyshev_steps(a: float, b: float, tol: float, weight_ratio: float = 1.0) -> int:
    """Steps k with ``1/T_k(σ) ≤ tol / √weight_ratio``, ``σ = (b+a)/(b−a)`` (0 if ``a ≥ b``: one eigenvalue).

    With ``a = b`` the first step ``x ← x − A x / a`` already balances exactly; 1 step is returned.
    """
    if not (0 < a <= b and math.isfinite(b)):
        raise BalancerError(f"spectral bounds must satisfy 0 < a ≤ b, got a = {a!r}, b = {b!r}")
    tau = tol / math.sqrt(max(weight_ratio, 1.0))
    if b - a <= 1e-12 * b:
        return 1
    sigma = (b + a) / (b - a)
    return max(1, math.ceil(math.acosh(1.0 / tau) / math.acosh(sigma)))


def _check(tol, bounds, max_iterations=None) -> None:
    if isinstance(tol, bool) or not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise BalancerError(f"tolerance must be a number in (0, 1), got {tol!r}")
    if bounds not in BOUNDS:
        raise BalancerError(f"bounds must be one of {', '.join(BOUNDS)}, got {bounds!r}")
    if max_iterations is not None and (isinstance(max_iterations, bool) or not isinstance(max_iterations, int)
                                       or not 1 <= max_iterations <= MAX_ITERATIONS):
        raise BalancerError(f"max_iterations must be an integer in 1..{MAX_ITERATIONS}, got {max_iterations!r}")


@dataclass
class ChebyshevState:
    """One step of :func:`chebyshev_iter`: the remaining imbalance ``residual`` and the flow so far."""

    iteration: int
    residual: NDArray[np.float64]
    flow: NDArray[np.float64]


def chebyshev_iter(model: Model, a: float, b: float, steps: int) -> Iterator[ChebyshevState]:
    """The Chebyshev scheme serially for ``steps`` steps on bounds ``[a, b]``, yielding every state.

    Notes
    -----
    Rank i's arithmetic of :func:`chebyshev_distributed` (sums over the sorted neighbours): the two agree
    bit for bit.
    """
    validate_model(model)
    g, c, e, w = NeighbourTables(model), model.capacities, model.edges, model.weights
    x = model.loads - c * ordered_total(model.loads)
    flow = np.zeros(model.q)
    yield ChebyshevState(0, x, flow)
    if model.p < 2:
        return
    theta, delta = 0.5 * (b + a), 0.5 * (b - a)
    d, rho = x / theta, delta / theta
    for k in range(1, steps + 1):
        z = d / c
        flow = flow + w * (z[e[:, 0]] - z[e[:, 1]])
        x = x - g.apply(z)
        rho_new = 1.0 / (2.0 * theta / delta - rho) if delta > 0 else 0.0
        d = rho_new * rho * d + (2.0 * rho_new / delta if delta > 0 else 1.0 / theta) * x
        rho = rho_new
        yield ChebyshevState(k, x, flow)


def chebyshev_schedule(p: int, steps: int, lanczos: int | None = None) -> list:
    """The messages of :func:`chebyshev_distributed` (and with ``lanczos`` steps, first those of
    :func:`hermes.balance.diffusion.lanczos.lanczos_distributed` after its own input check)."""
    head = [] if lanczos is None else [(1, [("allreduce", 2), ("allreduce", 1)]),
                                       (lanczos, [("exchange", 1), ("allreduce", 3), ("allreduce", 1)])]
    return [*head, (1, [("allreduce", 2)]), (steps if p > 1 else 0, [("exchange", 1)])]


def chebyshev(model: Model, *, tolerance: float = 1e-10, bounds: str = "lanczos", max_iterations: int | None = None,
              spectrum: str = "charged", lanczos_steps: int = LANCZOS_STEPS, links=None) -> FlowResult:
    """Minimal flow by Chebyshev-accelerated diffusion: serial reference of :func:`chebyshev_distributed`.

    Parameters
    ----------
    tolerance : float
        Target relative flow error (Euclidean), guaranteed by the step count for bounds that hold.
    bounds : {"lanczos", "exact", "cheap"}
    lanczos_steps : int
        With ``bounds: lanczos``: the Lanczos steps at most.
    max_iterations : int, optional
        Cap on the step count (the guarantee is then lost; ``converged`` says whether it held).
    spectrum : {"charged", "free"}
        With ``bounds: exact``: whether the spectrum's computation (gather, eigensolve, broadcast of the three
        words ``a, b, k``) comes first in the counters and times; ``cheap`` computes no spectrum.

    Returns
    -------
    FlowResult
        ``iterations`` = k; counters: k exchanges of one word, ``{"allreduce": 1}`` (input check; exact and
        charged: and one ``gather`` and one ``bcast``); ``extra``: bounds, κ = b/a, the planned steps, and with
        exact bounds the spectrum's report (``spectrum``, ``spectrum_computed``, ``spectrum_time``).
    """
    _check(tolerance, bounds, max_iterations)
    check_spectrum(spectrum)
    lz = lanczos_bounds(model, lanczos_steps) if bounds == "lanczos" and model.p > 1 else None
    if bounds == "lanczos":
        a, b = (1.0, 1.0) if lz is None else (lz.a, lz.b)
        k_plan = 0 if lz is None else chebyshev_steps(a, b, tolerance, _weight_ratio(model.weights))
    else:
        a, b = spectral_bounds(model, bounds)
        k_plan = chebyshev_steps(a, b, tolerance, _weight_ratio(model.weights)) if model.p > 1 else 0
    k = k_plan if max_iterations is None else min(k_plan, max_iterations)
    *_, last = chebyshev_iter(model, a, b, k)
    steps_lz = None if bounds != "lanczos" or model.p < 2 else (lz.steps if lz is not None else 0)
    cnt, times = schedule_counters(model, k, chebyshev_schedule(model.p, k, steps_lz), links)
    spent = {}
    if bounds == "exact" and model.p > 1:
        cnt, times, spent = serial_spectrum(cnt, times, model, len(_PLAN_WORDS) - 1, links, spectrum)
    return FlowResult(flow=last.flow, iterations=k, converged=k == k_plan and bool(np.all(np.isfinite(last.flow))),
                      counters=cnt, extra={"a": a, "b": b, "kappa": b / a, "planned_steps": k_plan, **spent,
                                           **_lanczos_info(lz), "rank_times": times})


def _lanczos_info(lz: LanczosBounds | None) -> dict:
    """What a Lanczos estimate reports: its steps, extreme Ritz values and residuals."""
    if lz is None:
        return {}
    return {"lanczos_steps": lz.steps, "ritz_min": lz.ritz[0], "ritz_max": lz.ritz[1],
            "ritz_residual_min": lz.residuals[0], "ritz_residual_max": lz.residuals[1]}


def _weight_ratio(w) -> float:
    w = np.asarray(w, dtype=np.float64)
    return float(w.max() / w.min()) if w.size else 1.0


def chebyshev_distributed(nb: NeighbourComm, load: float, capacity: float, weights, *, a: float, b: float,
                          steps: int) -> LocalFlowResult:
    """Chebyshev diffusion on one rank (SPMD): bounds ``a, b`` and ``steps`` the same on every rank.

    Notes
    -----
    See :func:`chebyshev_iter`. Communication: the input-check allreduce, then ``steps`` exchanges of
    ``d_i / c_i``. ``extra["residual"]`` is the rank's remaining imbalance ``x_i``.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, w)
    capacity = float(capacity)
    x = float(load) - capacity * total
    flows = np.zeros(len(w))
    if nb.size > 1:
        theta, delta = 0.5 * (b + a), 0.5 * (b - a)
        d, rho = x / theta, delta / theta
        for _ in range(steps):
            z = d / capacity
            zj = nb.exchange_scalar(z)
            flows = flows + w * (z - zj)
            acc = 0.0
            for t in range(len(zj)):
                acc = acc + w[t] * (z - zj[t])
            x = x - acc
            rho_new = 1.0 / (2.0 * theta / delta - rho) if delta > 0 else 0.0
            d = rho_new * rho * d + (2.0 * rho_new / delta if delta > 0 else 1.0 / theta) * x
            rho = rho_new
    n = steps if nb.size > 1 else 0
    nb.counters.iterations = n
    return LocalFlowResult(flows=flows, iterations=n, converged=bool(np.all(np.isfinite(flows))),
                           counters=nb.counters, extra={"residual": x, "defect": float(load) - capacity * total
                                                        - ordered_sum(flows)})


def chebyshev_bulk(nb: NeighbourComm, load: float, capacity: float, weights, *, a: float, b: float,
                   steps: int) -> LocalFlowResult:
    """:func:`chebyshev_distributed` run once per MPI process for all the processors it hosts (``run.bulk: auto``):
    the same steps, flows, clocks and counters, bit for bit — each processor's scalars as a vector, its exchanges
    through :class:`~hermes.runtime.bulk.BankedNeighbours`. Collective; virtual clocks without an extra load."""
    part = (nb, float(load), float(capacity), np.asarray(weights, dtype=np.float64).ravel(), float(a), float(b),
            int(steps))
    return run_bulk(nb, "chebyshev", part, _chebyshev_kernel)


def _chebyshev_kernel(group, parts: list) -> list:
    got = bulk_inputs(group, parts)
    if isinstance(got, list):
        return got
    bn, loads, caps, w, total = got.bn, got.loads, got.caps, got.weights, got.total
    a, b, steps = parts[0][4:]
    own = bn.owner
    x = loads - caps * total
    flows = np.zeros(w.size)
    if group.size > 1:
        theta, delta = 0.5 * (b + a), 0.5 * (b - a)
        d, rho = x / theta, delta / theta
        for _ in range(steps):
            z = d / caps
            zj = bn.exchange_scalar(z)
            step = w * (z[own] - zj)
            flows = flows + step
            x = x - bn.ordered_sums(step)
            rho_new = 1.0 / (2.0 * theta / delta - rho) if delta > 0 else 0.0
            d = rho_new * rho * d + (2.0 * rho_new / delta if delta > 0 else 1.0 / theta) * x
            rho = rho_new
    bn.store()
    n = steps if group.size > 1 else 0
    defect = loads - caps * total - bn.ordered_sums(flows)
    return bulk_flow_results(got, flows, n, lambda i: {"residual": x[i], "defect": float(defect[i])})


# -- registry -------------------------------------------------------------------------------------------
#: what rank 0 broadcasts after the exact bounds' eigensolve: a, b and the step count k
_PLAN_WORDS = ("a", "b", "k")


def _steps(model: Model, a: float, b: float, params) -> int:
    k = chebyshev_steps(a, b, params["tolerance"], _weight_ratio(model.weights)) if model.p > 1 else 0
    return k if params["max_iterations"] is None else min(k, params["max_iterations"])


def _plan(ctx) -> tuple[float, float, int, dict]:
    """Bounds, steps and the spectrum's report. Exact bounds come from the spectral plan kept in ``ctx.state``
    (:func:`hermes.balance.polynomial.leja.charged_plan`: computed and charged once per graph / capacities /
    weights, or reused — ``auto``'s included); cheap ones are computed once and kept there too."""
    params = ctx.params
    if params["bounds"] == "exact" and ctx.model.p > 1:
        def words(plan) -> NDArray[np.float64]:
            a, b = bounds_from_spectrum(plan.eigenvalues)
            return np.array([a, b, float(_steps(ctx.model, a, b, params))])

        a, b = bounds_from_spectrum(charged_plan(ctx, words, extra=False).eigenvalues)
        return a, b, _steps(ctx.model, a, b, params), spectrum_report(ctx)
    key = (plan_key(ctx.model), params["bounds"], params["tolerance"], params["max_iterations"])
    saved = ctx.state.get("chebyshev")
    if saved is None or saved[0] != key:
        a, b = spectral_bounds(ctx.model, params["bounds"])
        # cheap bounds' shortest paths from every vertex, as rank 0 would compute and broadcast them (docs/COSTS.md)
        central_value(ctx, 0.0, centre_units(ctx.model))
        saved = (key, (a, b, _steps(ctx.model, a, b, params)))
        ctx.state["chebyshev"] = saved
    return (*saved[1], {})


def _lanczos_plan(ctx) -> tuple[float, float, int, dict]:
    """Bounds and steps from the distributed Lanczos estimate (collective, charged; every round: the imbalance
    is its start). Balanced loads: no steps."""
    params = ctx.params
    if ctx.model.p < 2:
        return 1.0, 1.0, 0, {}
    from hermes.runtime.clock import ClockBank

    total = agree_local_inputs(ctx.nb, ctx.load, ctx.capacity, ctx.weights)
    run = lanczos_bulk if ctx.bulk == "auto" and ClockBank.bankable([ctx.clock]) else lanczos_distributed
    lz = run(ctx.nb, ctx.load, ctx.capacity, ctx.weights, total, params["lanczos_steps"])
    if lz is None:
        return 1.0, 1.0, 0, {}
    return lz.a, lz.b, _steps(ctx.model, lz.a, lz.b, params), _lanczos_info(lz)


class ChebyshevParams(Params):
    """Parameters of ``chebyshev``."""

    tolerance: Tolerance = Field(1e-10, description="relative flow error the step count guarantees")
    bounds: Literal["lanczos", "exact", "cheap"] = Field(
        "lanczos", description="spectral bounds from distributed Lanczos steps on the imbalance (lanczos: one "
        "exchange and two allreduces per step, charged), the eigenvalues (exact: a dense eigensolve on one "
        "processor) or Gershgorin / Mohar (cheap)")
    lanczos_steps: integer_type(ge=1, le=1000) = Field(
        LANCZOS_STEPS, description="bounds: lanczos — the Lanczos steps at most (fewer once the extreme Ritz "
        "residuals are within 1e-3 of their values)")
    max_iterations: OptionalCount = Field(None, description="step limit (null: none)")
    spectrum: Literal[SPECTRUM_CHARGES] = Field(
        "charged", description="exact bounds: the eigensolve charged to the clock when computed (charged) or not "
                               "(free); cheap bounds compute no spectrum")


@register("chebyshev", params=ChebyshevParams,
          serial=with_central(chebyshev, lambda m, prm: [(centre_units(m), 1)] if prm.get("bounds") == "cheap" else []),
          doc="Chebyshev-accelerated diffusion: ⌈acosh(1/τ)/acosh(σ)⌉ neighbour steps from spectral bounds "
              "(lanczos | exact | cheap), no reduction per step")
def _run(ctx) -> Decision:
    _check(ctx.params["tolerance"], ctx.params["bounds"], ctx.params["max_iterations"])
    if ctx.params["bounds"] == "lanczos":
        a, b, k, spent = _lanczos_plan(ctx)
    else:
        a, b, k, spent = _plan(ctx)
    from hermes.runtime.clock import ClockBank

    solve = chebyshev_bulk if ctx.bulk == "auto" and ClockBank.bankable([ctx.clock]) else chebyshev_distributed
    res = solve(ctx.nb, ctx.load, ctx.capacity, ctx.weights, a=a, b=b, steps=k)
    flow = flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, res.flows)
    return Decision(flow=flow, iterations=res.iterations, converged=res.converged, counters=res.counters,
                    info={"a": a, "b": b, "kappa": b / a, "steps": k, **spent})
