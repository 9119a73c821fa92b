"""AdA: the incremental balancing operator (thesis ch. 9, Alg. 16–17, Functions 18–22).

The minimal balancing flow is linear in the loads, ``φ = Θ l`` with the balancing operator
(Def. 9.1.1, Th. 24, 25)::

    Θ = W Aᵀ (L + c cᵀ)⁻¹ = −W Aᵀ Y,   Y = D⁻¹ U,   U = (A^{p−2} + a_1 A^{p−3} + … + a_{p−2} I) / a_{p−1},

``A = L D⁻¹``; rank r keeps the row ``Y_r`` and its neighbours' rows, so it knows the rows of Θ of its edges:
``Θ_(r,j) = −w_rj (Y_r − Y_j)``. AdA computes Θ once and then, depending on what changed since the previous
call (Alg. 16):

* only the loads (§9.3): ``φ' = φ + Θ (l' − l)`` — case ``"reuse-loads"``;
* the capacities (§9.2): ``Θ' = Θ − Θ (c' − c) eᵀ`` (``Y' = Y − (Y δc) eᵀ``) and
  ``φ' = φ − (Σ l) Θ (c' − c)``, after the load update if the loads changed too — ``"reuse-capacities"``;
* the topology or the communication costs (§9.4): Θ recomputed from scratch — ``"recompute"``.

How Θ is computed (``operator``):

* ``eigen`` (default): LPA's rows in product form over the distinct eigenvalues of 𝓛 in Leja order
  (:func:`hermes.balance.polynomial.leja.leja_rows`: n steps of one p-word exchange, no reduction), the
  spectrum computed once and charged as the eigen forms of LPS/LPA/MPA do (``spectrum: charged | free``);
  accurate where those are (homogeneous graphs, heterogeneous ones to p ≈ 16–40), and ``refine: auto`` repairs
  the rest while Θ still contracts the defect;
* ``faddeev``: the thesis' own, LPA's parallel Faddeev–LeVerrier (p−1 steps of one p-word exchange and one
  allreduce, Functions 20–22), whose monomial coefficients lose accuracy beyond p ≈ 12 (path:22 homogeneous:
  flow error 5e-4, 2e+2 at p = 40; refinement cannot repair an operator that far off).

The state is explicit: :func:`ada` (serial, whole model) and :func:`ada_distributed` (one rank) take the
previous state and return the new one in ``extra["state"]``; inside ``hermes run`` the registry entry keeps
it in ``BalanceContext.state["ada"]`` from phase to phase. The case is ``extra["ada_case"]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, ordered_total, validate_model
from hermes.balance.interface import Params, flow_balancer
from hermes.balance.model import Model
from hermes.balance.polynomial.balancing_operator import operator_row_distributed, operator_rows, row_flows
from hermes.balance.polynomial.charpoly import NeighbourTables, check_eigen_refine, ordered_dot, schedule_counters
from hermes.balance.polynomial.leja import (Refine, charged_plan, check_spectrum, leja_row_distributed, leja_rows,
                                           serial_spectrum, spectral_plan, spectrum_report)
from hermes.balance.polynomial.precompute import SPECTRUM_CHARGES
from hermes.balance.registry import register
from hermes.runtime.comm import NeighbourComm, ordered_sum
from hermes.errors import BalancerError

__all__ = ["AdAOperator", "AdARankState", "ada_case", "ada_schedule", "ada", "ada_distributed", "AdAParams"]

CASES = ("reuse-loads", "reuse-capacities", "recompute")


@dataclass(frozen=True)
class AdAOperator:
    """Serial AdA state: the model it was computed for, ``Y`` (p×p, ``Θ = −W Aᵀ Y``) and the flow φ = Θ l."""

    edges: NDArray[np.int64]
    weights: NDArray[np.float64]
    loads: NDArray[np.float64]
    capacities: NDArray[np.float64]
    rows: NDArray[np.float64]
    flow: NDArray[np.float64]
    case: str


@dataclass(frozen=True)
class AdARankState:
    """One rank's AdA state: its neighbours and weights, its row ``Y_r``, the neighbours' rows, the global
    loads and capacities of the last call and its per-neighbour flows φ."""

    size: int
    neighbours: NDArray[np.int64]
    weights: NDArray[np.float64]
    loads: NDArray[np.float64]
    capacities: NDArray[np.float64]
    row: NDArray[np.float64]
    rows: NDArray[np.float64]
    flows: NDArray[np.float64]
    case: str


#: capacity changes below this relative size count as none: measured capacities differ from phase to
#: phase by rounding alone, and applying such a change would only move the flow by the same relative amount
CAPACITY_RTOL = 1e-12


def ada_case(topology_changed: bool, loads_old, loads, caps_old, caps) -> str:
    """Which branch of Alg. 16 applies (``recompute`` whenever the topology or the weights changed).

    Capacities that changed by less than :data:`CAPACITY_RTOL` (relative) count as unchanged.
    """
    if topology_changed:
        return "recompute"
    c, c0 = np.asarray(caps, dtype=float), np.asarray(caps_old, dtype=float)
    changed = np.any(np.abs(c - c0) > CAPACITY_RTOL * np.abs(c0))
    return "reuse-capacities" if changed else "reuse-loads"


#: ``refine: auto`` stops when the largest balance defect is at most this × p × Σ|l| (rounding level) ...
AUTO_DEFECT = float(np.finfo(np.float64).eps)
#: ... or when a sweep shrank it by less than this factor (the refinement stagnates), after at most 20 sweeps
AUTO_SHRINK = 0.5
AUTO_MAX = 20


def _refine_more(defect: float, previous: float | None, sweeps: int, floor: float) -> bool:
    """``refine: auto``: whether to apply another sweep to a flow whose largest defect is ``defect``."""
    return sweeps < AUTO_MAX and defect > floor and (previous is None or defect < AUTO_SHRINK * previous)


def _auto_floor(loads: NDArray[np.float64]) -> float:
    return AUTO_DEFECT * len(loads) * float(np.sum(np.abs(loads)))


OPERATORS = ("eigen", "faddeev")


def ada_schedule(p: int, case: str, refine: int = 0, steps: int | None = None) -> list:
    """Communication schedule of one AdA call (see :func:`ada_distributed`); ``refine``: the allgathers of the
    defects (``refine: auto``: one per sweep and the last check); ``steps``: the eigen operator's product-form
    steps (None: the Faddeev operator's p−1 steps, each with an allreduce)."""
    sched = [(1, [("allreduce", 2), ("allgather", 3 * p)])]
    if p > 1 and case == "recompute":
        sched += ([(p - 1, [("exchange", p), ("allreduce", 1)])] if steps is None else [(steps, [("exchange", p)])])
        sched.append((1, [("exchange", p)]))
    elif p > 1 and case == "reuse-capacities":
        sched.append((1, [("exchange", 1)]))
    if p > 1:
        sched.append((refine, [("allgather", p)]))
    return sched


def _check_operator(operator) -> str:
    if not isinstance(operator, str) or operator not in OPERATORS:
        raise BalancerError(f"operator must be one of {', '.join(OPERATORS)}, got {operator!r}")
    return operator


def ada(model: Model, state: AdAOperator | None = None, *, refine: int | str = "auto", operator: str = "eigen",
        spectrum: str = "charged", links=None) -> FlowResult:
    """AdA serially (thesis Alg. 16): the serial reference of :func:`ada_distributed`.

    Parameters
    ----------
    model : Model
        The current H = (G, l, c, w).
    state : AdAOperator, optional
        ``extra["state"]`` of the previous call; None computes Θ from scratch.
    refine : int or "auto"
        Refinement sweeps ``φ ← φ + Θ (l − l̄ − A φ)`` after the update (one allgather of the defects each);
        0 is the thesis' AdA. ``auto`` (default): sweeps while the largest defect exceeds ε p Σ|l| and the last
        sweep halved it (at most 20; a sweep that did not lower it is undone), one allgather per sweep and one
        for the last check: the monomial (Faddeev) form of Θ loses accuracy with p (thesis' forms: p ≈ 12,
        :mod:`hermes.balance.polynomial.lps`), and the refinement restores it while Θ still contracts the defect
        (path:22: flow error 1e-4 without, rounding level with). ``extra["refine"]``: the sweeps applied.
    operator : {"eigen", "faddeev"}
        How Θ is computed when it is (see the module docstring).
    spectrum : {"charged", "free"}
        ``eigen``: whether the spectrum's computation (gather, eigensolve, broadcast of the n nodes) comes first
        in the counters and times of a call that recomputes Θ (:mod:`hermes.balance.polynomial.precompute`).
    links : hermes.runtime.clock.Links, optional

    Returns
    -------
    FlowResult
        ``extra["ada_case"]`` ∈ {reuse-loads, reuse-capacities, recompute}, ``extra["state"]`` for the next
        call. ``iterations`` is p−1 (faddeev) or n (eigen) when Θ was recomputed, else 0; with ``eigen`` and a
        recomputed Θ, the spectrum's report (``spectrum``, ``spectrum_computed``, ``spectrum_time``) and the
        plan's ``predicted_error`` after the sweeps applied (LPA's estimate: a refinement sweep ``φ ← φ + Θ d`` is
        one more product-form pass); ``converged`` is then false when it is ≥ 1 (Θ useless: the heterogeneous
        graphs where every eigen form fails), as LPA's.

    Notes
    -----
    Loads changed: ``φ ← φ + Θ (l' − l)`` (§9.3). Capacities changed: ``α = Y (c' − c)``,
    ``Y ← Y − α eᵀ``, ``φ_ij ← φ_ij + (Σ l') w_ij (α_i − α_j)`` (§9.2: ``φ' = φ − (Σl) Θ(c' − c)``;
    the printed Function 19 has the opposite sign, which does not give the minimal flow), after the load
    update when both changed. Counters: :func:`ada_schedule`.
    """
    validate_model(model)
    refine = check_eigen_refine(refine)
    _check_operator(operator)
    check_spectrum(spectrum)
    p, g = model.p, NeighbourTables(model)
    l, c = model.loads, model.capacities
    topo = (state is None or len(state.loads) != p or not np.array_equal(state.edges, model.edges)
            or not np.array_equal(state.weights, model.weights))
    case = ada_case(topo, None if topo else state.loads, l, None if topo else state.capacities, c)
    iterations, steps, plan = 0, None, None
    if case == "recompute" and operator == "eigen" and p > 1:
        plan = spectral_plan(model)
        nodes = plan.nodes
        rows = leja_rows(model, nodes)
        flow = g.operator_flow(rows, l)
        iterations = steps = len(nodes)
    elif case == "recompute":
        *_, (_, _, rows) = operator_rows(model)
        flow = g.operator_flow(rows, l) if p > 1 else np.zeros(0)
        iterations = p - 1
    else:
        rows, flow = state.rows, state.flow
        dl = l - state.loads
        if np.any(dl != 0) and p > 1:
            flow = flow + g.operator_flow(rows, dl)
        if case == "reuse-capacities":
            alpha = np.cumsum(rows * (c - state.capacities), axis=1)[:, -1]
            rows = rows - alpha[:, None]
            e = model.edges
            flow = flow + ordered_total(l) * model.weights * (alpha[e[:, 0]] - alpha[e[:, 1]])
    flow, sweeps, gathers = _refined(g.defect, lambda d: g.operator_flow(rows, d), flow, refine, l if p > 1 else None)
    new = AdAOperator(model.edges, model.weights, l, c, rows, flow, case)
    cnt, times = schedule_counters(model, iterations, ada_schedule(p, case, gathers, steps), links)
    spent, ok = {}, bool(np.all(np.isfinite(flow)))
    if plan is not None:  # the nodes computed: the spectrum paid (or stated free) as the eigen forms do
        cnt, times, spent = serial_spectrum(cnt, times, model, steps - 1, links, spectrum, plan.extra_units)
        spent["predicted_error"] = plan.predicted_error_after(sweeps)
        ok = ok and spent["predicted_error"] < 1.0
    return FlowResult(flow=flow, iterations=iterations, converged=ok, counters=cnt,
                      extra={"ada_case": case, "state": new, "rank_times": times, "refine": sweeps, **spent})


def _refined(defects, correction, flow, refine, loads):
    """The refinement sweeps ``φ ← φ + Θ d`` with ``d = defects(φ)`` (all ranks' defects: an allgather) and
    ``correction(d) = Θ d``; (flow, sweeps applied, allgathers). ``loads`` None: one processor, no sweep."""
    if loads is None:
        return flow, 0, 0
    if refine != "auto":
        for _ in range(refine):
            flow = flow + correction(defects(flow))
        return flow, refine, refine
    floor, previous, kept, gathers, sweeps = _auto_floor(loads), None, None, 0, 0
    while True:
        d = defects(flow)
        gathers += 1
        largest = float(np.max(np.abs(d)))
        if previous is not None and not largest < previous:  # the last sweep did not help: undo it
            return kept, sweeps - 1, gathers
        if not _refine_more(largest, previous, sweeps, floor):
            return flow, sweeps, gathers
        kept, previous = flow, largest
        flow = flow + correction(d)
        sweeps += 1


def ada_distributed(nb: NeighbourComm, load: float, capacity: float, weights, state: AdARankState | None = None,
                    *, refine: int | str = "auto", nodes=None) -> LocalFlowResult:
    """AdA on one rank (SPMD; every rank of ``nb.comm`` must call it, each with its own previous state).

    Returns
    -------
    LocalFlowResult
        ``extra["ada_case"]`` and ``extra["state"]`` (this rank's :class:`AdARankState` for the next call).

    Notes
    -----
    Communication: the input-check allreduce; one allgather of (l_r, c_r, changed_r) where changed_r says
    that this rank's neighbours or weights differ from its state (Functions 18/19 broadcast the changed
    loads and capacities; one collective gives them all and the agreement on the case). Then

    * ``recompute``: with ``nodes`` (the eigen operator: the product form's nodes, or a collective callable
      returning them, called only here), LPA's rows in product form
      (:func:`~hermes.balance.polynomial.leja.leja_row_distributed`, one p-word exchange per node); without,
      LPA's p−1 Faddeev steps (:func:`~hermes.balance.polynomial.lps.operator_row_distributed`, one p-word
      exchange and one allreduce each); then one exchange of the rows ``Y_r`` (Functions 20–22);
    * ``reuse-capacities``: one exchange of ``α_r = Y_r · (c' − c)`` (Function 19);
    * ``reuse-loads``: nothing: the neighbours' rows are kept in the state (Function 18 sends them again);
    * ``refine`` allgathers of the local defects ``l_r − c_r Σl − Σ_j φ_rj`` (``auto``: as :func:`ada`, the
      same sweeps on every rank as in the serial form).
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    total = agree_local_inputs(nb, load, capacity, w, extra_checks=lambda: check_eigen_refine(refine))
    p, r, nbrs = nb.size, nb.rank, nb.neighbours
    load, capacity = float(load), float(capacity)
    mine = (state is None or state.size != p or not np.array_equal(state.neighbours, nbrs)
            or not np.array_equal(state.weights, w))
    info = nb.allgather_rows([load, capacity, float(mine)])
    loads, caps, topo = info[:, 0].copy(), info[:, 1].copy(), bool(np.any(info[:, 2] > 0))
    case = ada_case(topo, None if topo else state.loads, loads, None if topo else state.capacities, caps)
    iterations = 0
    if p == 1:
        row, rows, flows = np.ones(1), np.zeros((0, 1)), np.zeros(0)
    elif case == "recompute":
        if nodes is None:
            row, iterations = operator_row_distributed(nb, capacity, w), p - 1
        else:
            nodes = nodes() if callable(nodes) else nodes
            row, iterations = leja_row_distributed(nb, capacity, w, nodes), len(nodes)
        rows = np.array(nb.exchange([row] * len(w), recv_sizes=np.full(len(w), p)))
        flows = row_flows(w, row, rows, loads)
    else:
        row, rows, flows = state.row, state.rows, state.flows
        dl = loads - state.loads
        if np.any(dl != 0):
            flows = flows + row_flows(w, row, rows, dl)
        if case == "reuse-capacities":
            a_r = ordered_dot(row, caps - state.capacities)
            a_j = nb.exchange_scalar(a_r)
            row, rows = row - a_r, rows - a_j[:, None]
            flows = flows + total * w * (a_r - a_j)
    b = load - capacity * total
    flows, sweeps, _ = _refined(lambda f: nb.allgather_rows(b - ordered_sum(f))[:, 0],
                                lambda d: row_flows(w, row, rows, d), flows, refine, loads if p > 1 else None)
    new = AdARankState(p, nbrs.copy(), w.copy(), loads, caps, row, rows, flows, case)
    nb.counters.iterations = iterations
    return LocalFlowResult(flows=flows, iterations=iterations, converged=bool(np.all(np.isfinite(flows))),
                           counters=nb.counters, extra={"ada_case": case, "state": new, "refine": sweeps})


# -- registry -------------------------------------------------------------------------------------------
def _serial(model, *, refine="auto", operator="eigen", spectrum="charged", links=None, state=None):
    return ada(model, state, refine=refine, operator=operator, spectrum=spectrum, links=links)


def _dist(nb, load, capacity, weights, *, store, plan, **params):
    """:func:`ada_distributed` as :func:`flow_balancer` calls it: the rank's AdA state kept in ``store``;
    ``params``: the balancer's (:class:`AdAParams`), ``plan`` the eigen operator's nodes (when Θ is recomputed)."""
    prm = AdAParams.of(params)
    res = ada_distributed(nb, load, capacity, weights, store.get("ada"), refine=prm.refine,
                          nodes=plan if prm.operator == "eigen" else None)
    store["ada"] = res.extra["state"]
    return res


def _plan(ctx):
    """The eigen operator's nodes, computed (and charged: :func:`~hermes.balance.polynomial.leja.charged_plan`,
    rank 0 broadcasts the n nodes) only when AdA recomputes Θ — a collective all ranks reach together."""
    return lambda: charged_plan(ctx, lambda plan: plan.nodes).nodes


_inner = flow_balancer(_dist, store=lambda ctx: ctx.state, plan=_plan)


class AdAParams(Params):
    """Parameters of ``ada``."""

    refine: Refine = Field(
        "auto", description="refinement sweeps φ ← φ + Θ (l − l̄ − A φ) after the update: 0..20 (0 with operator "
        "faddeev: the thesis' AdA) or auto (while the defect shrinks and exceeds rounding)")
    operator: Literal["eigen", "faddeev"] = Field(
        "eigen", description="Θ from LPA's rows in product form over the eigenvalues (eigen) or from the thesis' "
        "Faddeev steps (faddeev, accurate to p ≈ 12)")
    spectrum: Literal[SPECTRUM_CHARGES] = Field(
        "charged", description="eigen: the spectrum's computation charged to the clock when Θ is recomputed "
        "(charged) or not (free)")


@register("ada", params=AdAParams, serial=_serial,
          doc="incremental balancing operator AdA (thesis ch. 9, Alg. 16–17): Θ from LPA's rows (eigen or the "
              "thesis' Faddeev steps), reused while only loads or capacities change")
def _run(ctx):
    """hermes-run form: the rank's AdA state lives in ``ctx.state["ada"]`` from phase to phase."""
    decision = _inner(ctx)
    decision.info["ada_case"] = ctx.state["ada"].case
    if ctx.params["operator"] == "eigen" and "spectrum_report" in ctx.state:  # Θ recomputed: the spectrum paid
        decision.info.update(spectrum_report(ctx))
    if ctx.params["operator"] == "eigen" and decision.info["ada_case"] == "recompute" and ctx.model.p > 1:
        err = ctx.state["spectral_plan"][1].predicted_error_after(int(decision.info["refine"]))
        decision.info["predicted_error"] = err
        decision.converged = decision.converged and err < 1.0
    return decision
