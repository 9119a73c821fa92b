"""The polynomial schemes in product form over the Laplacian's eigenvalues, in Leja order (stable LPS / LPA / MPA).

The Laplacian polynomial of LPS/LPA and MPA's minimal polynomial vanish on the spectrum of
``A = L D⁻¹`` (similar to 𝓛 = D^{-1/2} L D^{-1/2}, thesis §8.1–8.5). A is diagonalizable, so its minimal
polynomial has simple roots: with the distinct non-zero eigenvalues ``μ_1, …, μ_n`` of 𝓛 (n = d − 1, d the
number of distinct eigenvalues, zero included) the Richardson-type scheme::

    x_0 = l − l̄,    x_{k+1} = (I − A / μ_k) x_k,    f ← f + W Aᵀ D⁻¹ x_k / μ_k

annihilates one eigencomponent per step and reaches ``x_n = 0`` exactly in n neighbour steps (one scalar
``x_i / c_i`` exchanged per step, no collective). ``f`` is a potential flow that balances, hence the
minimal flow (thesis Th. 19–20, 22). The thesis (§8.2) dismissed eigenvalues because computing them at
run time was infeasible in 2003; the dense p × p generalized Laplacian costs milliseconds to seconds for p
in the thousands, and the plan (:class:`SpectralPlan`) depends only on the graph, the capacities and the
weights, so it is reused while they do not change.

Stability depends on the order of the μ_k. A rounding error made at step i in the component of an
eigenvalue μ_m is multiplied by ``Π_{i<j≤k} (1 − μ_m / μ_j)`` up to step k; the (log of the) largest such
product over i ≤ k and m, :func:`log_amplification`, is the scheme's amplification Γ. In ascending or
descending order Γ grows like 10^{p/2} on paths (Reichel 1991: Richardson iteration needs a Leja
ordering); the Leja order (each next node maximises the product of its distances to the nodes taken)
keeps it at 10^2–10^6 on homogeneous paths, rings, meshes and tori up to 128 processors. It cannot help
when the spectrum itself is badly spread: heterogeneous capacities produce clusters of tiny eigenvalues
next to large ones, and on heterogeneous paths of 48 processors Γ ≈ 10^13, on a heterogeneous 8 × 8 mesh
10^31. No order does much better: every order has ``Γ ≥ √(max_m Π_{j≠m} |1 − μ_m/μ_j|)``
(:func:`log_lower_bound`), 10^15.8 for that mesh — beyond what double precision can absorb
(``predicted_error`` says so and ``auto`` then avoids this scheme).

Eigenvalues closer than the accuracy of the symmetric eigensolver are merged (:func:`distinct_nodes`):
``eigvalsh`` is backward stable, each computed eigenvalue is within ``‖E‖₂ ≲ c p ε ‖𝓛‖₂`` of an exact one
(Weyl), so two computed values closer than that cannot be told apart; taking their mean as one node
leaves a component of relative size ≤ τ μ_max / μ_k, the same size as the error the eigensolver already
commits. ``τ = 16 p ε`` (c = 16). Repeated eigenvalues (rings, meshes, tori, stars) merge to one node: the
scheme takes as many steps as the graph has distinct eigenvalues.

References: thesis §8.2–8.5 (LPS Alg. 9, LPA Alg. 12, MPA Alg. 15); L. Reichel, "The application of Leja
points to Richardson iteration and polynomial preconditioning", Linear Algebra Appl. 154–156 (1991).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BeforeValidator

from hermes.balance.flow import (FlowResult, LocalFlowResult, agree_local_inputs, bulk_flow_results, bulk_inputs,
                                 ordered_total, run_bulk, validate_model)
from hermes.balance.interface import integer_type
from hermes.balance.model import Model, derived
from hermes.balance.polynomial.charpoly import (
    NeighbourTables,
    check_refine,
    generalized_laplacian,
    neighbour_step,
    schedule_counters,
)
from hermes.balance.polynomial.precompute import SPECTRUM_CHARGES, add_spectrum, charge_spectrum
from hermes.runtime.clock import WallClock
from hermes.runtime.comm import NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["SPECTRUM_LIMIT", "MERGE_FACTOR", "PREDICT_FACTOR", "ORDERS", "laplacian_spectrum", "distinct_nodes",
           "leja_order", "log_amplification", "log_lower_bound", "SpectralPlan", "spectral_plan", "LejaState",
           "leja_iter", "leja_flow", "leja_schedule", "leja_distributed", "leja_bulk", "leja_rows",
           "leja_row_distributed", "trial_defects", "trial_units", "interval_leja_order", "interval_units",
           "plan_key", "cached_plan", "charged_plan", "spectrum_report", "check_spectrum", "serial_spectrum",
           "resolve_refine", "Refine",
           "plan_refine", "product_form", "with_plan_info"]

#: largest p whose dense spectrum is computed (eigvalsh: O(p³), ~1 min at 8000)
SPECTRUM_LIMIT = 8000
#: eigenvalues closer than ``MERGE_FACTOR · p · ε · μ_max`` are one node (the eigensolver's resolution)
MERGE_FACTOR = 16.0
#: the node orders :func:`spectral_plan` accepts; "leja" is the stable one, the others are for study
ORDERS = ("leja", "ascending", "descending")
_EPS = float(np.finfo(np.float64).eps)
#: C in the error estimate C ε (p Γ + κ) (:attr:`SpectralPlan.predicted_error`): 3 × the largest ratio
#: measured with C = 10
PREDICT_FACTOR = 30.0
#: grid points per node of :func:`interval_leja_order` (8: its Γ is that of a 4× finer grid on the study's graph)
INTERVAL_GRID = 8
#: flops counted for a logarithm and its sum in the order's and Γ's products (a libm log is 10–20 flops)
LOG_FLOPS = 20.0
#: sweeps the trial measures (:func:`trial_defects`) when the bound on the error says nothing
TRIAL_SWEEPS = 4
#: the trial load's seed (identical input, identical plan)
TRIAL_SEED = 20261206
#: margin on the trial's defect for the spread between loads (a margin, not a measured bound: :func:`trial_defects`)
TRIAL_FACTOR = 10.0
#: flops per graph entry and step of the trial (a multiply-add for the flow, one for the residual, a division)
TRIAL_FLOPS = 4.0
#: log of a factor that is exactly zero (the step that annihilates a component): cuts every product through it
_LOG_ZERO = -1e6


# -- the spectrum and its nodes -------------------------------------------------------------------------
def laplacian_spectrum(model: Model) -> NDArray[np.float64]:
    """The p eigenvalues of the generalized Laplacian 𝓛 = D^{-1/2} L D^{-1/2}, ascending (dense ``eigvalsh``).

    Raises
    ------
    BalancerError
        If ``p > SPECTRUM_LIMIT`` (the dense eigensolver would take minutes).
    """
    validate_model(model)
    if model.p > SPECTRUM_LIMIT:
        raise BalancerError(f"p = {model.p} > {SPECTRUM_LIMIT}: the dense spectrum of the generalized Laplacian "
                            f"is too costly; use pcg or chebyshev with bounds 'cheap'")
    def build() -> NDArray[np.float64]:
        lap = generalized_laplacian(model)
        return np.linalg.eigvalsh(0.5 * (lap + lap.T))

    return derived(model, "spectrum", build).copy()  # once per model (hosted processors share one)


def distinct_nodes(mu: NDArray[np.float64], p: int | None = None) -> tuple[NDArray[np.float64], float]:
    """The distinct non-zero eigenvalues (ascending) and the merge tolerance used.

    Parameters
    ----------
    mu : ndarray
        All eigenvalues of 𝓛, ascending; ``mu[0]`` is the zero of a connected graph and is dropped.
    p : int, optional
        Dimension (default ``len(mu)``).

    Returns
    -------
    nodes : ndarray
        Means of the clusters of ``mu[1:]`` whose consecutive gaps are ≤ ``tol``.
    tol : float
        ``MERGE_FACTOR · p · ε · μ_max`` (see the module docstring).
    """
    mu = np.asarray(mu, dtype=np.float64)
    p = len(mu) if p is None else int(p)
    if len(mu) < 2:
        return np.zeros(0), 0.0
    tol = MERGE_FACTOR * p * _EPS * float(mu[-1])
    rest = mu[1:]
    group = np.concatenate(([0], np.cumsum(np.diff(rest) > tol)))
    nodes = np.bincount(group, weights=rest) / np.bincount(group)
    return nodes, tol


def leja_order(nodes: NDArray[np.float64], start: str = "max") -> NDArray[np.float64]:
    """Leja ordering: start at the largest (or smallest) node, then each next node maximises Π_j |μ − μ_j|.

    The products are kept as sums of logarithms (no overflow); ties go to the first in ascending order.
    """
    nodes = np.sort(np.asarray(nodes, dtype=np.float64))
    n = len(nodes)
    if n == 0:
        return nodes
    taken = np.zeros(n, dtype=bool)
    logs = np.zeros(n)
    out = np.empty(n)
    k = n - 1 if start == "max" else 0
    for t in range(n):
        out[t] = nodes[k]
        taken[k] = True
        with np.errstate(divide="ignore"):
            logs = logs + np.log(np.abs(nodes - nodes[k]))
        if t + 1 < n:
            k = int(np.argmax(np.where(taken, -np.inf, logs)))
    return out


def log_amplification(order: NDArray[np.float64], mu: NDArray[np.float64]) -> float:
    """``log10 Γ``, ``Γ = max_{m, i ≤ k} Π_{i<j≤k} |1 − μ_m / μ_j|`` over the eigenvalues μ_m of ``mu``.

    Notes
    -----
    The growth of the iterates (i = 0) and the amplification of a rounding error made at step i in any
    eigencomponent, until any later step k. A factor that is exactly zero (μ_m is the node μ_j) ends
    every product through it: an error made before the step that annihilates its component dies there.
    Computed in O(n · len(mu)) with running minima of prefix sums of ``log|1 − μ_m/μ_j|``.
    """
    order = np.asarray(order, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    if len(order) == 0 or len(mu) == 0:
        return 0.0
    with np.errstate(divide="ignore"):
        lg = np.log(np.abs(1.0 - mu[:, None] / order[None, :]))
    lg[~np.isfinite(lg)] = _LOG_ZERO
    pre = np.concatenate([np.zeros((len(mu), 1)), np.cumsum(lg, axis=1)], axis=1)
    best = np.max(pre - np.minimum.accumulate(pre, axis=1))
    return float(best) / math.log(10.0)


def log_lower_bound(nodes: NDArray[np.float64]) -> float:
    """``log10 √(max_m Λ_m)``, ``Λ_m = Π_{j≠m} |1 − μ_m/μ_j|``: a lower bound on Γ for *every* order of ``nodes``.

    Notes
    -----
    Whatever the order, the component of μ_m is multiplied by the factors of the nodes taken before μ_m
    (its growth, products from step 0) and a rounding error made when μ_m is taken by those of the nodes
    after it; the two products multiply to Λ_m, so one of them is ≥ √Λ_m, and both are terms of Γ. The
    quantity ``Π|1 − μ_j/μ_k|`` of issue 10: beyond 10¹⁶ for Λ, i.e. 10⁸ for the bound, no ordering of
    these nodes keeps the error of one sweep below ε Γ ≈ 10⁻⁸.
    """
    nodes = np.asarray(nodes, dtype=np.float64)
    if len(nodes) < 2:
        return 0.0
    with np.errstate(divide="ignore"):
        lg = np.log10(np.abs(1.0 - nodes[:, None] / nodes[None, :]))
    np.fill_diagonal(lg, 0.0)
    return 0.5 * float(np.max(np.sum(lg, axis=1)))


@dataclass(frozen=True)
class SpectralPlan:
    """The nodes of the product form and what double precision makes of them.

    Attributes
    ----------
    eigenvalues : ndarray
        All p eigenvalues of 𝓛, ascending.
    nodes : ndarray
        The distinct non-zero eigenvalues in the order of the steps.
    merge_tol : float
        Eigenvalues closer than this were merged (:func:`distinct_nodes`).
    log10_amplification : float
        ``log10 Γ`` of ``nodes`` (:func:`log_amplification`).
    order : str
        ``leja`` (the Leja start, max or min, with the smaller Γ), ``leja-interval`` (:func:`interval_leja_order`,
        tried where the discrete orders' bound is ≥ 1 and taken if its Γ is smaller), ``ascending`` or
        ``descending``.
    """

    eigenvalues: NDArray[np.float64]
    nodes: NDArray[np.float64]
    merge_tol: float
    log10_amplification: float
    order: str
    #: measured relative defects after 1, 2, … sweeps on a seeded trial load (:func:`trial_defects`), kept when
    #: the bound :attr:`bound_error` says nothing (≥ 1); empty otherwise
    trial: tuple[float, ...] = ()
    #: rank 0's work units beyond the eigensolve and the discrete Leja orders (0 where their bound is < 1): the
    #: interval order (:func:`interval_units`) and the trial (:func:`trial_units`)
    extra_units: float = 0.0

    @cached_property
    def log10_lower_bound(self) -> float:
        """:func:`log_lower_bound` of the nodes: no order of them has a smaller ``log10 Γ``."""
        return log_lower_bound(self.nodes)

    @cached_property
    def log10_condition(self) -> float:
        """``max_m log10 |R(μ_m ± 16 ε μ_max)|``, R(μ) = Π_j (1 − μ/μ_j) the scheme's residual polynomial: its value at
        points double precision cannot tell from the eigenvalues (the data, capacities and weights in double
        precision, fix them no closer). Where it is ≫ 0 no backward-stable evaluation of the polynomial, in any
        order or basis, can be accurate. Reported with the trial (bookkeeping: it decides nothing)."""
        nodes = np.sort(self.nodes)
        if len(nodes) < 2:
            return -math.inf
        eta = MERGE_FACTOR * _EPS * float(nodes[-1])
        with np.errstate(divide="ignore"):
            return max(float(np.max(np.sum(np.log10(np.abs(1.0 - (nodes + s * eta)[:, None] / nodes[None, :])),
                                           axis=1))) for s in (-1.0, 1.0))

    @property
    def steps(self) -> int:
        """Neighbour steps of one sweep (the number of distinct non-zero eigenvalues)."""
        return int(len(self.nodes))

    @cached_property
    def condition(self) -> float:
        """``μ_max / μ_2`` of 𝓛 (1 for p ≤ 2)."""
        return float(self.eigenvalues[-1] / self.eigenvalues[1]) if len(self.eigenvalues) > 2 else 1.0

    @property
    def predicted_error(self) -> float:
        """The relative flow-error estimate of one sweep: :attr:`bound_error`, or where that bound is ≥ 1 and a
        trial was measured, ``TRIAL_FACTOR`` times the trial's defect after one sweep (capped by the bound)."""
        return self.predicted_error_after(0)

    @property
    def bound_error(self) -> float:
        """``C ε (p Γ + κ)`` with ``C = PREDICT_FACTOR``: the worst-case relative flow-error estimate of one sweep.

        ``p Γ``: rounding errors of p-term sums amplified by Γ; ``κ = μ_max/μ_2``: the eigenvalues themselves
        are known to ``ε μ_max``, which leaves a component of relative size ``ε κ`` unannihilated. For loads
        far from balance (‖l‖ ≈ ‖l − l̄‖); nearly balanced loads lose a further ``‖l‖/‖l − l̄‖`` when
        ``l − c Σl`` is formed, as with every method. Measured over random trees, paths, rings, meshes,
        stars (p ≤ 48, 3 seeds, heterogeneous and homogeneous) and the paths, rings, meshes, tori, trees,
        stars and METIS subdomain graphs of ``benchmarks/poly_accuracy.py``: the error stayed below this
        estimate (docs/BALANCERS.md gives the largest ratio seen). Capped at 1e300.
        """
        p = len(self.eigenvalues)
        lg = math.log10(PREDICT_FACTOR * _EPS) + math.log10(p * 10.0 ** min(self.log10_amplification, 290.0)
                                                          + self.condition)
        return float(10.0 ** min(lg, 300.0))

    def predicted_error_after(self, refine: int) -> float:
        """Estimate with ``refine`` refinement sweeps: ``max(C ε (p + κ), e^(refine+1))``, e = :attr:`bound_error`.

        A refinement sweep applies the same (perturbed) polynomial to the defect, so it multiplies the error
        by about e; it cannot go below the rounding floor ``C ε (p + κ)``, and does not help when e ≥ 1. Where
        ``e ≥ 1`` (Γ is a worst case over every rounding error; at 1,024 processors it reaches 10^27–10^50 while a
        sweep's actual error is 10⁻²) and :attr:`trial` was measured: ``TRIAL_FACTOR`` times the trial's defect
        after ``refine + 1`` sweeps (beyond the sweeps measured, the last measured contraction continued), at
        least the floor, at most ``e``.
        """
        e = self.bound_error
        floor = PREDICT_FACTOR * _EPS * (len(self.eigenvalues) + self.condition)
        if e >= 1.0 and self.trial:
            t = list(self.trial)
            k = int(refine)
            if k < len(t):
                est = t[k]
            else:
                q = t[-1] / t[-2] if len(t) > 1 and 0 < t[-2] and t[-1] < t[-2] else 1.0
                est = t[-1] * q ** (k - len(t) + 1)
            est = TRIAL_FACTOR * est if math.isfinite(est) else math.inf
            return float(min(e, max(floor, est)))
        if e >= 1.0:
            return e
        return max(floor, e ** (int(refine) + 1))

    def report(self, refine: int) -> dict[str, Any]:
        """:meth:`info` with ``refine`` and the error predicted after that many sweeps (what results report)."""
        return {**self.info(), "refine": int(refine), "predicted_error": self.predicted_error_after(refine)}

    def info(self) -> dict[str, Any]:
        """Scalars for reports: steps, amplification, predicted error, merged eigenvalues, condition."""
        out = {"steps": self.steps, "log10_amplification": round(self.log10_amplification, 3),
               "log10_amplification_any_order": round(self.log10_lower_bound, 3),
               "predicted_error": self.predicted_error, "merged": int(len(self.eigenvalues) - 1 - self.steps),
               "condition": self.condition, "order": self.order}
        if self.trial:
            out["trial_defect"] = self.trial[0]
            out["log10_condition"] = round(self.log10_condition, 3)
        return out


def spectral_plan(model: Model, order: str = "leja") -> SpectralPlan:
    """Eigenvalues of 𝓛, their distinct non-zero nodes in ``order`` and the amplification.

    Raises
    ------
    BalancerError
        Unknown ``order``, or p beyond ``SPECTRUM_LIMIT``.
    """
    if order not in ORDERS:
        raise BalancerError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    mu = laplacian_spectrum(model)
    nodes, tol = distinct_nodes(mu, model.p)
    rest = mu[1:]
    if order == "leja":
        cands = [leja_order(nodes, "max"), leja_order(nodes, "min")]
        amps = [log_amplification(c, rest) for c in cands]
        k = int(np.argmin(amps))
        plan = SpectralPlan(mu, cands[k], tol, amps[k], "leja")
        if plan.bound_error >= 1.0 and len(nodes) > 2:
            # the bound says nothing: the Leja points of the interval, each taken as the nearest node left
            seq = interval_leja_order(nodes)
            amp = log_amplification(seq, rest)
            extra = interval_units(len(nodes))
            better = amp < plan.log10_amplification
            plan = (SpectralPlan(mu, seq, tol, amp, "leja-interval", extra_units=extra) if better
                    else dataclasses.replace(plan, extra_units=extra))
    else:
        seq = np.sort(nodes) if order == "ascending" else np.sort(nodes)[::-1]
        plan = SpectralPlan(mu, seq, tol, log_amplification(seq, rest), order)
    if plan.bound_error < 1.0 or model.p < 2:
        return plan
    trial = tuple(trial_defects(model, plan.nodes, TRIAL_SWEEPS))
    return dataclasses.replace(plan, trial=trial,
                               extra_units=plan.extra_units + trial_units(model, plan.steps, TRIAL_SWEEPS))


def interval_leja_order(nodes: NDArray[np.float64], grid: int = INTERVAL_GRID) -> NDArray[np.float64]:
    """The nodes in the order of the Leja points of the interval [min, max] they span: each next point maximises
    Π_j |x − x_j| over ``grid · n`` equispaced points of the interval (the products kept as sums of logarithms; the
    first point is the maximum), and the step takes the nearest node not yet taken (x_j: the nodes taken).

    Notes
    -----
    The discrete Leja order of :func:`leja_order` follows the nodes' own distribution; where it differs from the
    interval's equilibrium (arcsine) distribution — few eigenvalues near the ends of a subdomain graph's spectrum —
    it runs out of nodes near the ends early and its products grow there: 10^39 on 10⁶ cells in 1,024 METIS parts,
    where this order gives 10^4.6 (results/lps_depth.md). Reichel (1991) orders Richardson's parameters by the
    Leja points of the set that contains the spectrum; this is that order, snapped to the eigenvalues so that the
    scheme still annihilates each of them.
    """
    nodes = np.sort(np.asarray(nodes, dtype=np.float64))
    n = len(nodes)
    if n < 2:
        return nodes
    xs = np.linspace(nodes[0], nodes[-1], max(grid * n, 2))
    taken = np.zeros(n, dtype=bool)
    logs = np.zeros(xs.size)
    out = np.empty(n)
    x = nodes[-1]
    for t in range(n):
        k = int(np.argmin(np.where(taken, np.inf, np.abs(nodes - x))))
        out[t] = nodes[k]
        taken[k] = True
        with np.errstate(divide="ignore"):
            logs = logs + np.log(np.abs(xs - nodes[k]))
        x = xs[int(np.argmax(logs))]
    return out


def interval_units(n: int, grid: int = INTERVAL_GRID) -> float:
    """Work units of :func:`interval_leja_order` and the Γ of its order: ``grid · n²`` logarithms and sums for the
    order and ``n²`` for Γ, ``LOG_FLOPS`` flops each, ``WallClock.FLOPS_PER_UNIT`` flops a unit."""
    return float((grid + 1) * n * n) * LOG_FLOPS / WallClock.FLOPS_PER_UNIT


def trial_defects(model: Model, nodes, sweeps: int) -> list[float]:
    """Relative defects ``max|l − l̄ − A f| / max|l − l̄|`` after 1, …, ``sweeps`` sweeps of the product form over
    ``nodes`` on ``model``'s graph, capacities and weights with a seeded trial load (uniform in [0, 2) times the
    capacities, seed :data:`TRIAL_SEED`): the error a sweep actually makes, where Γ only bounds it.

    Rounding errors enter every eigencomponent whatever the load, and the trial load has all of them; the
    estimate is therefore of the scheme on this graph, not of one load. ``TRIAL_FACTOR`` (10) is a margin for the
    spread between loads, not a measured bound; the trial's deviation from balance is of the loads' own size, and a
    load nearer balance loses a further ``‖l‖/‖l − l̄‖`` relative to its deviation, as with the bound and every
    method (:attr:`SpectralPlan.bound_error`)."""
    rng = np.random.default_rng(TRIAL_SEED)
    trial = dataclasses.replace(model, loads=model.capacities * rng.uniform(0.0, 2.0, model.p) * model.p)
    g = NeighbourTables(trial)
    x0 = trial.loads - trial.capacities * ordered_total(trial.loads)
    scale = float(np.max(np.abs(x0))) or 1.0
    out: list[float] = []
    with np.errstate(all="ignore"):
        for state in _sweeps(trial, np.asarray(nodes, dtype=np.float64), sweeps - 1):
            if state.iteration and state.iteration % len(nodes) == 0:
                d = float(np.max(np.abs(g.defect(state.flow)))) / scale
                out.append(d if math.isfinite(d) else math.inf)
    return out


def trial_units(model: Model, steps: int, sweeps: int) -> float:
    """Work units of :func:`trial_defects` on rank 0: ``sweeps · steps`` neighbour steps of ``TRIAL_FLOPS`` flops
    per entry of the graph (p + 2q), ``WallClock.FLOPS_PER_UNIT`` flops a unit."""
    return float(sweeps * steps * (model.p + 2 * model.q)) * TRIAL_FLOPS / WallClock.FLOPS_PER_UNIT


def plan_key(model: Model) -> tuple:
    """What a plan depends on (graph, capacities, weights), as a hashable key for reuse across phases."""
    return (model.p, model.edges.tobytes(), model.capacities.tobytes(), model.weights.tobytes())


def _check_nodes(nodes) -> NDArray[np.float64]:
    nodes = np.asarray(nodes, dtype=np.float64).ravel()
    if not np.all(np.isfinite(nodes)) or np.any(nodes <= 0):
        raise BalancerError("nodes must be positive finite eigenvalues")
    return nodes


# -- the scheme, serially --------------------------------------------------------------------------------
@dataclass
class LejaState:
    """One neighbour step of :func:`leja_iter`.

    ``residual`` is ``x_k`` (the remaining imbalance ``l − l̄ − A f``), ``flow`` the flow so far on
    ``model.edges``, ``node`` the eigenvalue annihilated by this step (None for the initial state).
    """

    iteration: int
    sweep: int
    node: float | None
    residual: NDArray[np.float64]
    flow: NDArray[np.float64]
    info: dict[str, Any] = field(default_factory=dict)


def leja_iter(model: Model, plan: SpectralPlan | None = None, *, refine: int = 0) -> Iterator[LejaState]:
    """The product-form scheme serially: yields the state after every neighbour step.

    Parameters
    ----------
    model : Model
    plan : SpectralPlan, optional
        Default :func:`spectral_plan` ``(model)`` (Leja order).
    refine : int
        Further sweeps over the same nodes started from the balance defect ``l − l̄ − A f``.

    Notes
    -----
    Step k with node μ: ``z = x / c``; on edge (i, j) ``g = w_ij (z_i − z_j) / μ`` (i sends to j if > 0);
    ``f ← f + g``; ``x ← x − (Σ_j w_ij (z_i − z_j)) / μ`` (sum over the sorted neighbours). This is rank
    i's arithmetic in :func:`leja_distributed`, so the two agree bit for bit. A refinement sweep starts
    from ``l_i − c_i Σl − Σ_j f_ij`` (what each rank knows locally).
    """
    validate_model(model)
    refine = check_refine(refine)
    plan = spectral_plan(model) if plan is None else plan
    yield from _sweeps(model, _check_nodes(plan.nodes), refine)


def _sweeps(model: Model, nodes: NDArray[np.float64], refine: int) -> Iterator[LejaState]:
    """:func:`leja_iter`'s steps over ``nodes`` (checked by the caller)."""
    g, c, e = NeighbourTables(model), model.capacities, model.edges
    x = model.loads - c * ordered_total(model.loads)
    flow = np.zeros(model.q)
    k = 0
    yield LejaState(0, 0, None, x, flow)
    for sweep in range(refine + 1 if model.p > 1 else 0):
        if sweep:
            x = g.defect(flow)
        for mu in nodes:
            z = x / c
            flow = flow + model.weights * (z[e[:, 0]] - z[e[:, 1]]) / mu
            x = x - g.apply(z) / mu
            k += 1
            yield LejaState(k, sweep, float(mu), x, flow)


def leja_schedule(p: int, steps: int, refine: int = 0) -> list:
    """Input-check allreduce, then ``(refine + 1) · steps`` exchanges of one word."""
    return [(1, [("allreduce", 2)]), ((refine + 1) * steps if p > 1 else 0, [("exchange", 1)])]


def leja_flow(model: Model, *, order: str = "leja", refine=0, plan: SpectralPlan | None = None,
              links=None, spectrum: str = "charged") -> FlowResult:
    """Minimal flow by the product form over the distinct eigenvalues: serial reference of :func:`leja_distributed`.

    Parameters
    ----------
    refine : int or "auto"
        Refinement sweeps, or ``auto`` (:func:`resolve_refine`).
    spectrum : {"charged", "free"}
        Whether the spectral precomputation (gather, eigensolve, broadcast:
        :mod:`hermes.balance.polynomial.precompute`) comes first in the counters and times.

    Returns
    -------
    FlowResult
        ``iterations = (refine + 1) · n`` neighbour steps (n distinct non-zero eigenvalues); counters
        ``exchange_rounds`` the same, ``collectives {"allreduce": 1}`` (the input check; charged: and one
        ``gather`` and one ``bcast``); ``extra``: the plan's :meth:`SpectralPlan.report` (steps, log10
        amplification, predicted error, merged, condition, refine) and :func:`spectrum_report`'s keys.
        ``converged``: the flow is finite and its predicted error below 1.
    """
    validate_model(model)
    check_spectrum(spectrum)
    plan = spectral_plan(model, order) if plan is None else plan
    r = resolve_refine(plan, refine)
    *_, last = leja_iter(model, plan, refine=r)
    n = last.iteration
    cnt, times = schedule_counters(model, n, leja_schedule(model.p, plan.steps, r), links)
    cnt, times, spent = serial_spectrum(cnt, times, model, plan.steps, links, spectrum, plan.extra_units)
    report = plan.report(r)
    ok = bool(np.all(np.isfinite(last.flow))) and report["predicted_error"] < 1.0
    return FlowResult(flow=last.flow, iterations=n, converged=ok, counters=cnt,
                      extra={**report, **spent, "rank_times": times})


def leja_distributed(nb: NeighbourComm, load: float, capacity: float, weights, nodes, *,
                     refine: int = 0) -> LocalFlowResult:
    """The product-form scheme on one rank (SPMD): ``nodes`` the same on every rank (:attr:`SpectralPlan.nodes`).

    Notes
    -----
    See :func:`leja_iter`. Communication: the input-check allreduce (Σl), then per step one exchange of
    ``x_i / c_i``; no other collective. Every rank knows the number of steps beforehand: termination needs
    no global test.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check() -> None:
        check_refine(refine)
        _check_nodes(nodes)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check)
    nodes = _check_nodes(nodes)
    capacity = float(capacity)
    fair = float(load) - capacity * total
    flows, x, k = np.zeros(len(w)), fair, 0
    for sweep in range(refine + 1 if nb.size > 1 else 0):
        if sweep:
            x = fair - ordered_sum(flows)
        for mu in nodes:
            z = x / capacity
            zj = nb.exchange_scalar(z)
            flows = flows + w * (z - zj) / mu
            acc = 0.0
            for t in range(len(zj)):
                acc = acc + w[t] * (z - zj[t])
            x = x - acc / mu
            k += 1
    nb.counters.iterations = k
    return LocalFlowResult(flows=flows, iterations=k, converged=bool(np.all(np.isfinite(flows))),
                           counters=nb.counters, extra={"residual": x})


def leja_bulk(nb: NeighbourComm, load: float, capacity: float, weights, nodes, *, refine: int = 0) -> LocalFlowResult:
    """:func:`leja_distributed` run once per MPI process for all the processors it hosts (``run.bulk: auto``): the
    same steps, flows, clocks and counters — each processor's scalars as a vector, its exchanges through
    :class:`~hermes.runtime.bulk.BankedNeighbours`. Collective; virtual clocks without an extra load."""
    check_refine(refine)
    part = (nb, float(load), float(capacity), np.asarray(weights, dtype=np.float64).ravel(), _check_nodes(nodes),
            int(refine))
    return run_bulk(nb, "leja", part, _leja_kernel)


def _leja_kernel(group, parts: list) -> list:
    got = bulk_inputs(group, parts)
    if isinstance(got, list):
        return got
    bn, caps, w = got.bn, got.caps, got.weights
    nodes, refine = parts[0][4], parts[0][5]
    own = bn.owner
    fair = got.loads - caps * got.total
    x, flows, k = fair, np.zeros(w.size), 0
    for sweep in range(refine + 1 if group.size > 1 else 0):
        if sweep:
            x = fair - bn.ordered_sums(flows)
        for mu in nodes:
            z = x / caps
            zj = bn.exchange_scalar(z)
            step = w * (z[own] - zj)
            flows = flows + step / mu
            x = x - bn.ordered_sums(step) / mu
            k += 1
    bn.store()
    return bulk_flow_results(got, flows, k, lambda i: {"residual": x[i]})


# -- LPA's rows of the balancing operator in product form ---------------------------------------------
def leja_rows(model: Model, nodes) -> NDArray[np.float64]:
    """``Y`` (p × p, row i on rank i) with ``Θ = −W Aᵀ Y`` from the product form (LPA, thesis Alg. 12, Th. 23).

    Notes
    -----
    ``P_0 = I``, ``P_{k+1} = P_k − A P_k / μ_k``, ``U = Σ_k P_k / μ_k`` (so ``A U = I`` on the range of A);
    ``Y = −D⁻¹ U`` (the sign of LPA's ``U = M_{p−1}/a_{p−1}``, which acts as ``−A⁺``). Row r of ``A P`` is
    ``Σ_j w_rj (P[r]/c_r − P[j]/c_j)``: one exchange of p words per step, as in LPA.
    """
    nodes = _check_nodes(nodes)
    g, c = NeighbourTables(model), model.capacities
    pk = np.eye(model.p)
    u = np.zeros((model.p, model.p))
    for mu in nodes:
        u = u + pk / mu
        pk = pk - g.apply(pk / c[:, None]) / mu
    return -u / c[:, None]


def leja_row_distributed(nb: NeighbourComm, capacity: float, weights, nodes) -> NDArray[np.float64]:
    """Rank r's row ``Y_r`` of :func:`leja_rows` (one exchange of p words per node)."""
    nodes = _check_nodes(nodes)
    row = np.zeros(nb.size)
    row[nb.rank] = 1.0
    u = np.zeros(nb.size)
    for mu in nodes:
        u = u + row / mu
        row = row - neighbour_step(nb, row / capacity, weights) / mu
    return -u / capacity


# -- reuse across phases and the refinement choice ---------------------------------------------------------
def check_spectrum(spectrum) -> str:
    """``spectrum`` itself if it is one of :data:`SPECTRUM_CHARGES`, else BalancerError (one line)."""
    if not isinstance(spectrum, str) or spectrum not in SPECTRUM_CHARGES:
        raise BalancerError(f"spectrum must be one of {', '.join(SPECTRUM_CHARGES)}, got {spectrum!r}")
    return spectrum


def serial_spectrum(cnt, times, model: Model, steps: int, links, spectrum: str, extra_units: float = 0.0):
    """The serial references' counters and times with the precomputation charged (``spectrum: charged``) or
    not, and the report (:func:`spectrum_report`'s keys) for their ``extra``."""
    before = cnt.time
    if spectrum == "charged":
        cnt, times = add_spectrum(cnt, times, model, steps, links, extra_units)
    return cnt, times, {"spectrum": spectrum, "spectrum_computed": True, "spectrum_time": cnt.time - before}


def charged_plan(ctx, words=None, extra: bool = True) -> SpectralPlan:
    """:func:`cached_plan` in a balancer: when the plan is computed (not reused) the precomputation is charged
    to the clock (:func:`~hermes.balance.polynomial.precompute.charge_spectrum`) unless ``spectrum: free``;
    :func:`spectrum_report` then says what happened (collective: every rank decides alike, the model is the same).

    ``words(plan)``: what rank 0 broadcasts (default: the nodes and the refinement count; Chebyshev: its bounds
    and step count). ``extra``: whether the plan's interval order and trial (:attr:`SpectralPlan.extra_units`) are
    charged too — by the balancers that apply its order (not Chebyshev's exact bounds, which read the eigenvalues
    only). A plan another balancer computed on the same state (``auto``'s) is reused, not paid twice."""
    fresh = ctx.state.get("spectral_plan") is None or ctx.state["spectral_plan"][0] != plan_key(ctx.model)
    plan = cached_plan(ctx.model, ctx.state, ctx.comm)
    if fresh:
        mode = check_spectrum(ctx.params.get("spectrum", "charged"))
        spent = 0.0
        if mode == "charged":
            sent = (np.append(plan.nodes, resolve_refine(plan, ctx.params.get("refine", "auto"))) if words is None
                    else words(plan))
            spent = charge_spectrum(ctx.comm, ctx.clock, ctx.nb.counters, ctx.model, sent,
                                    plan.extra_units if extra else 0.0)
        ctx.state["spectrum_report"] = {"spectrum": mode, "spectrum_computed": True, "spectrum_time": spent}
    return plan


def spectrum_report(ctx) -> dict[str, Any]:
    """What the balance record says of the spectrum this call: computed (and charged, with the seconds of this
    rank's clock, or free) or reused from an earlier phase (nothing charged). Read once per call."""
    return ctx.state.pop("spectrum_report", None) or {"spectrum": ctx.params.get("spectrum", "charged"),
                                                      "spectrum_computed": False, "spectrum_time": 0.0}


def cached_plan(model: Model, state: dict, comm=None) -> SpectralPlan:
    """The Leja plan of ``model``, kept in ``state["spectral_plan"]`` and reused while the graph, capacities
    and weights are unchanged (the loads do not enter it) — as AdA reuses Θ (thesis ch. 9).

    With ``comm``, the processors one process hosts compute it once for all of them
    (:meth:`~hermes.runtime.communicator.Communicator.shared_value`: the same inputs, the same plan, read-only): at
    4,096 processors the dense eigensolve and the amplification were otherwise repeated by each of 2,048 processors."""
    key = plan_key(model)
    saved = state.get("spectral_plan")
    if saved is None or saved[0] != key:
        build = lambda: spectral_plan(model)  # noqa: E731
        plan = build() if comm is None else comm.shared_value("spectral-plan", [], _plan_inputs(model), build,
                                                              freeze=_freeze_plan)
        saved = (key, plan)
        state["spectral_plan"] = saved
    return saved[1]


def _plan_inputs(model: Model) -> NDArray[np.float64]:
    """Everything :func:`spectral_plan` reads of ``model`` as one array (sizes first, so equal arrays mean equal
    inputs): p, the number of edges, the edges, the capacities, the weights."""
    return np.concatenate(([model.p, len(model.edges)], np.asarray(model.edges, dtype=np.float64).ravel(),
                           model.capacities, model.weights)).astype(np.float64)


def _freeze_plan(plan: SpectralPlan) -> None:
    plan.eigenvalues.flags.writeable = False
    plan.nodes.flags.writeable = False


#: ``refine: auto`` takes the fewest sweeps whose predicted error is at most this
AUTO_REFINE_TARGET = 1e-10
#: and at most this many
AUTO_REFINE_MAX = 3


def resolve_refine(plan: SpectralPlan, refine) -> int:
    """``refine`` itself, or for ``"auto"`` the fewest sweeps r ≤ 3 with predicted error ≤ 1e-10 (3 if none;
    0 if one sweep's predicted error is ≥ 1, where refinement diverges)."""
    if refine != "auto":
        return check_refine(refine)
    if plan.predicted_error >= 1.0:
        return 0  # refinement cannot contract an error of order one
    for r in range(AUTO_REFINE_MAX + 1):
        if plan.predicted_error_after(r) <= AUTO_REFINE_TARGET:
            return r
    return AUTO_REFINE_MAX


# -- the parameters and plan of the registered eigen forms (lps, lpa, mpa) ------------------------------
def _refine_value(v: Any) -> Any:
    if v == "auto":
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= 20:
        raise ValueError(f"must be an integer in 0..20 or 'auto', got {v!r}")
    return int(v)


#: refinement sweeps: an integer 0..20, or ``auto`` (the eigen forms refine until the predicted error is
#: ≤ 1e-10, at most 3 sweeps; the thesis' monomial forms read auto as 0)
Refine = Annotated[Literal["auto"] | integer_type(ge=0, le=20), BeforeValidator(_refine_value)]


def _eigen(ctx) -> bool:
    return ctx.params.get("coefficients", ctx.params.get("polynomial")) in ("eigen", "spectrum")


def plan_refine(ctx) -> tuple[SpectralPlan | None, Any, bool]:
    """The cached Leja plan (``ctx.state``), the resolved refinement of an eigen-form run, and whether the product
    form runs in bulk (``run.bulk: auto`` on a virtual clock: :func:`leja_bulk`)."""
    from hermes.runtime.clock import ClockBank

    bulk = ctx.bulk == "auto" and ClockBank.bankable([ctx.clock])
    if not _eigen(ctx):
        return None, ctx.params.get("refine", 0), bulk
    plan = charged_plan(ctx)
    return plan, resolve_refine(plan, ctx.params.get("refine", 0)), bulk


def product_form(nb: NeighbourComm, load: float, capacity: float, weights, plan) -> LocalFlowResult:
    """The eigen forms' flow on this rank from :func:`plan_refine`'s triple: :func:`leja_bulk` or
    :func:`leja_distributed` (the same result)."""
    run = leja_bulk if plan[2] else leja_distributed
    return run(nb, load, capacity, weights, plan[0].nodes, refine=plan[1])


def with_plan_info(ctx, decision):
    """``decision`` with the eigen form's plan report in its info (the balancers lps, lpa, mpa)."""
    if _eigen(ctx):
        plan, r, _ = plan_refine(ctx)
        decision.info = {**decision.info, **plan.report(r), **spectrum_report(ctx)}
    return decision
