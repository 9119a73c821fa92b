"""Balancing policy: when a phase balances, what a round is worth, the model's conductances, whether a flow is
applied and whether the boundary refinement runs.

The driver (:mod:`hermes.lifecycle.phase`) sequences a phase; the functions here decide. Each receives the
sections of the scenario it reads — ``balancer`` (a :class:`~hermes.sections.BalancerSpec`: ``trigger``,
``rounds``, ``conductance``, ``refinement``), the cost model's :class:`~hermes.balance.payoff.PhaseCost`
(``iterations``, ``work_per_weight``, ``bytes_per_edge`` of the ``application`` section and the platform's
``speed``) — and the phase's measured
data (the model H, the monitor's :class:`~hermes.monitor.Estimates`, this rank's domain), never the whole
scenario nor the run's state. Every answer is the same on every rank: its inputs are, or are gathered by
uncharged bookkeeping (:class:`hermes.runtime.comm.Bookkeeping`) first.

* :func:`another_round` — a balancing round runs while rounds remain, the last one moved cells and changed the
  imbalance, and the imbalance exceeds ``balancer.trigger`` (a number) or, with ``trigger: auto``, the round's
  expected gain exceeds its modelled cost (:func:`estimate_payoff`, :mod:`hermes.balance.payoff`).
* :func:`conductances` — ``conductance: boundary`` weighs the model's edges by the common boundaries.
* :func:`worsens` — a flow that would not lower the model's imbalance is refused.
* :func:`refinement_decision` — after the rounds, whether the boundary refinement
  (:func:`hermes.balance.refinement.refine_boundary`) runs; ``refinement.decide: auto`` weighs its price
  (:func:`refinement_pays`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hermes.balance.model import Model, derived, edge_values
from hermes.balance.payoff import History, Payoff, PhaseCost, excess, first_estimate, payoff
from hermes.runtime.comm import Bookkeeping
from hermes.metrics import cell_bytes, imbalance

__all__ = ["another_round", "rounds_remain", "estimate_payoff", "first_round_cost", "conductances", "worsens",
           "refinement_decision", "refinement_pays", "read_only"]


def another_round(balancer, model: Model, *, rounds: int, moved_last_round: bool, last: float,
                  estimate: Callable[[], Payoff],
                  granularity: Callable[[], float] = lambda: 0.0) -> tuple[bool, Payoff | None]:
    """Whether another balancing round runs, and under ``trigger: auto`` the payoff that decided it.

    Rounds remain (:func:`rounds_remain`: fewer than ``balancer.rounds``, and beyond ``balancer.min_rounds`` the
    model's imbalance exceeds 1 + ``balancer.imbalance_tolerance`` and the cells' granularity), the last one moved
    cells and changed the imbalance (lowered it; or raised it: a realisation that failed — a subdomain cut in two by
    earlier moves cannot pass on what it received — leaves a new subdomain graph, and the next round's flow is
    computed on it), the model's imbalance exceeds rounding noise and the trigger — a number, or ``auto``: the round's expected gain exceeds
    its modelled cost (``estimate()``, called only then: see :func:`estimate_payoff`).

    Parameters
    ----------
    balancer : the scenario's ``balancer`` section (``trigger``, ``rounds``).
    model : the model H now.
    rounds : the rounds the phase ran so far.
    moved_last_round : whether the last round moved cells (True before the first).
    last : the model imbalance before the last round (``inf`` before the first).
    estimate : the next round's :class:`~hermes.balance.payoff.Payoff` (collective: called on every rank or none).
    granularity : the heaviest cell over the smallest fair load (:func:`rounds_remain`; collective like
        ``estimate``).
    """
    if not (moved_last_round and 1 + 1e-9 < model.imbalance != last
            and rounds_remain(balancer, rounds, model.imbalance, granularity)):
        return False, None
    if balancer.trigger != "auto":
        return bool(model.imbalance > balancer.trigger), None
    est = estimate()
    return est.balance, est


def rounds_remain(balancer, rounds: int, imbalance: float, granularity: Callable[[], float] = lambda: 0.0) -> bool:
    """Whether the phase may run another round after ``rounds``: fewer than ``balancer.rounds`` so far, and either
    fewer than ``balancer.min_rounds`` or ``imbalance`` above 1 + max(``balancer.imbalance_tolerance``,
    ``granularity()``) — at depth a flow's first rounds leave more than the tolerance (docs/design/depth.md §3);
    ``granularity()`` (called only then) is the heaviest cell over the smallest fair load, below which no round
    can bring the imbalance."""
    if rounds >= balancer.rounds:
        return False
    if rounds < balancer.min_rounds:
        return True
    return imbalance > 1.0 + max(balancer.imbalance_tolerance, granularity())


def first_round_cost(book: Bookkeeping, dom, model: Model, info, params: dict[str, Any],
                     links) -> tuple[float, float, str]:
    """(T_b, T_m, source) before any round was measured: the balancer's serial reference on the model
    (:func:`hermes.balance.payoff.first_estimate`), its migration priced at this run's bytes per unit of weight
    (collective bookkeeping: two sums over the ranks' cells). ``info`` is the :class:`BalancerInfo`."""
    bpw = book.sum(float(cell_bytes(dom).sum())) / max(book.sum(dom.load), 1e-300)
    # the same on every rank: once per model (hosted processors share one)
    return derived(model, ("first-estimate", bpw), lambda: first_estimate(info, model, params, links, bpw))


def estimate_payoff(history: History, model: Model, balancer, phase: PhaseCost, *, rounds: int, flow_moved: bool,
                    first: Callable[[], tuple[float, float, str]]) -> Payoff:
    """The next round's gain and cost (:mod:`hermes.balance.payoff`) over the phase ``phase`` describes: costs
    measured by the run (the last round's balancing; the last balanced phase's migration per unit of excess load,
    times the excess now), or before any round ``first()`` (:func:`first_round_cost`); every input is the same on
    every rank.

    With ``balancer.refinement.decide: always`` a phase's first round (no flow moved cells yet, ``flow_moved``
    False) commits to the boundary refinement: its last measured time is added, once."""
    fixed = 0.0
    if history.balance_time is None:
        tb, tm, src = first()
    else:
        if balancer.refinement.decide == "always" and not flow_moved:
            fixed = history.refine_time or 0.0
        tb, tm = history.balance_time, history.migrate_estimate(excess(model), fixed)
        src = "measured: last round's balancing, last balanced phase's migration per unit of excess"
        if fixed:
            src += ", plus the last boundary refinement's"
    after = history.imbalance_after if history.imbalance_after is not None else 1.0
    return payoff(rounds, model, phase, expected_after=after, balance_cost=tb, migrate_cost=tm, source=src,
                  migrate_fixed=fixed)


def worsens(comm, model: Model, decision) -> bool:
    """Whether the decision's flow would not lower the imbalance of the model (collective: one verdict for all
    ranks). Such a flow — a numerically broken one, e.g. MPA far beyond the sizes where its sequence is accurate
    (docs/BALANCERS.md) — is not applied, and the decision's info says so."""
    finite = bool(np.all(np.isfinite(decision.flow)))
    after = imbalance(model.apply_flow(decision.flow), model.capacities) if finite else float("nan")
    # a flow the balancer itself estimates to be wrong (an eigen form's predicted error ≥ 1), or one that carries
    # more than the whole load over one link, is numerical debris even where its rounded net sums look balanced
    # (lps at 1,024 processors: 10¹⁸ on the links, the imbalance "lowered" 1.47 -> 1.1 and 57 once realised)
    predicted = decision.info.get("predicted_error")
    condition = decision.info.get("log10_condition")
    doubtful = isinstance(predicted, (int, float)) and not predicted < 1.0
    total = float(np.sum(model.loads))
    oversized = finite and decision.flow.size > 0 and float(np.max(np.abs(decision.flow))) > total
    # a flow with an infinite or NaN value (an overflow) is refused as one that would not lower the imbalance
    if not Bookkeeping(comm).max(int(doubtful or oversized or not (after < model.imbalance))):
        return False
    if not finite:
        why = "the flow is not finite (an overflow)"
    elif doubtful:
        why = f"the balancer's own error estimate is {predicted:.3g} (not below 1): its flow is not the balancing flow"
        if isinstance(condition, (int, float)) and condition > 0:
            why += (f"; its polynomial varies by 10^{condition:.1f} within double precision's resolution of the "
                    f"eigenvalues, so no evaluation of it can be accurate on this graph")
    elif oversized:
        why = (f"the flow carries {float(np.max(np.abs(decision.flow))):.4g} over one link, more than the whole "
               f"load {total:.4g} (a numerical failure)")
    else:
        why = f"the flow would not lower the imbalance ({model.imbalance:.4g} -> {after:.4g})"
    decision.info["rejected"] = why
    return True


# -- conductances ---------------------------------------------------------------------------------------------
def _find(keys: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``query`` in the sorted array ``keys`` and which of them it holds (a neighbour list against
    another: the monitor's of the phase and the domain's now)."""
    pos = np.searchsorted(keys, query)
    found = pos < keys.size
    found[found] = keys[pos[found]] == query[found]
    return pos, found


def read_only(model: Model) -> None:
    """Make the model's arrays read-only (a model several hosted processors share)."""
    for a in (model.edges, model.loads, model.capacities, model.weights):
        a.flags.writeable = False


def _shared_model(p: int, edges, loads, capacities, weights) -> Model:
    """A model several hosted processors will share: its arrays read-only."""
    model = Model(p, edges, np.array(loads, copy=True), np.array(capacities, copy=True), np.array(weights, copy=True))
    read_only(model)
    return model


def conductances(kind: str, book: Bookkeeping, rank: int, dom, est, model: Model) -> tuple[np.ndarray | None, Model]:
    """The link weights this rank's balancer sees and the model: unchanged (None, ``model``) for
    ``balancer.conductance: links``; for ``boundary`` the monitor's link weights times the number of cut edges
    between the two subdomains over the largest such number (bookkeeping, like the model itself), on this rank's
    links and on the model's edges. A flow then crosses long boundaries rather than short ones, so each boundary
    moves by a similar depth."""
    if kind != "boundary":
        return None, model
    nb, length = dom.neighbour_ranks, dom.boundary_lengths.astype(np.float64)
    top = max(book.max(float(length.max(initial=0.0))), 1.0)
    share = np.ones(est.neighbours.size)
    pos, ok = _find(nb, est.neighbours)
    share[ok] = length[pos[ok]] / top
    weights = est.weights * share
    m = model
    w = edge_values(book.comm, rank, est.neighbours, weights, m.edges)  # the same on every rank
    # once per model and weights: hosted processors share the model with conductances too
    return weights, derived(m, ("boundary-conductance", w.tobytes()),
                            lambda: _shared_model(m.p, m.edges, m.loads, m.capacities, w))


# -- the boundary refinement ------------------------------------------------------------------------------------
def refinement_decision(spec, flow_moved: bool, price: Callable[[], dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """Whether the boundary refinement of ``balancer.refinement`` (``spec``) runs after the rounds, and the
    decision to record ({} unless ``decide: auto``). It runs only when it has passes and a flow moved cells in
    the phase; under ``decide: auto`` when ``price()`` (:func:`refinement_pays`) says it pays."""
    if spec.passes == 0 or not flow_moved:
        return False, {}
    decision = price() if spec.decide == "auto" else {}
    return (not decision or decision["refine"]), decision


def refinement_pays(spec, phase: PhaseCost, book: Bookkeeping, dom, est, model: Model, links,
                    refine_time: float | None) -> dict[str, Any]:
    """``refinement.decide: auto`` — whether the boundary refinement is worth its price in this phase (the same on
    every rank). It costs up to ``τ`` of every rank's compute (it fills the load tolerance) and its migration, for
    a shorter cut; a shorter cut can at most save the ghost exchange. The rule refines only when the phase's ghost
    exchange with its sends serialised, ``N · max_i Σ_j (α_ij + b·e_ij / B_ij)`` (``e_ij`` the cut edges between
    i and j, α and B the monitor's latency and bandwidth — ``links``' where it measured none —, ``b`` =
    ``phase.bytes_per_edge``, N = ``phase.iterations``), exceeds ``N · τ · κL/(s p) + T_r`` (``T_r`` =
    ``refine_time``, the migration time of the last refinement that ran, 0 before any).

    The left side bounds the exchange from above (the virtual clock overlaps a rank's sends and charges the
    largest), so a skipped refinement could not have paid; a refinement that runs is not promised to pay — the
    rule is a gate on the ratio of communication to computation: compute-bound phases never refine, phases whose
    serialised exchange exceeds ``τ`` of their compute do, for the cut's sake (results/scale.md)."""
    nb, length = dom.neighbour_ranks, dom.boundary_lengths.astype(np.float64)
    lat = np.full(nb.size, float(np.mean(est.latency)) if est.latency.size else links.latency)
    bw = np.full(nb.size, float(np.mean(est.bandwidth)) if est.bandwidth.size else links.bandwidth)
    pos, known = _find(est.neighbours, nb)
    lat[known], bw[known] = est.latency[pos[known]], est.bandwidth[pos[known]]
    t_comm = book.max(float(np.sum(lat + phase.bytes_per_edge * length / bw)))
    t_it = phase.iteration_time(model)
    bound = phase.iterations * t_comm
    cost = phase.iterations * spec.tolerance * t_it + (refine_time or 0.0)
    return {"refine": bool(bound > cost), "communication": bound, "cost": cost}
