"""``mincost``: the balancing flow of least total cost ``Σ_k |f_k| / w_k`` (an l1 flow), not the 2-norm minimal one.

Every diffusion, polynomial and PCG scheme of the thesis computes the flow that minimises ``Σ_k f_k² / w_k``
(:func:`hermes.balance.flow.minimal_flow`). That flow spreads the excess over every path between a surplus and a
deficit, so a front of heavy cells sends load through chains of neighbours: on the 64-rank experiment of
results/scale.md it moves more distinct cells than METIS scratch-remap in the first
phase. The flow that minimises the *l1* cost

    minimise  Σ_k |f_k| / w_k      subject to  A f = l − l̄

is a transportation problem on the processor graph (a minimum-cost flow). The balancer uses the conductance costs
(edge k costs w_max / w_k): with ``balancer.conductance: boundary`` a unit crossing a short common boundary or a
slow link costs more, so the flow prefers the long boundaries the realisation can meet without stretching
subdomains; under ``conductance: links`` the balancer gathers the boundaries itself (:func:`with_boundaries`).
:func:`mincost_flow` also offers ``cost="hops"`` (every edge costs 1): its value is the least number
of load-hops of any balancing flow, the bound results/scale.md quotes. It is not offered to runs: such a flow
crosses boundaries of a single cell edge as readily as long ones, and on the 64-rank experiment the realisation
could not meet it (imbalance 1.72 → 2.72).

It is solved as a linear program (HiGHS through :func:`scipy.optimize.linprog`; ``f = f⁺ − f⁻``, both ≥ 0).
An optimal basic solution is supported on a forest (positive costs leave no cycle in an optimum), hence
acyclic, so the topological migration order of Th. 21 exists; the flow is then re-solved exactly on its support
(leaves peeled one by one, O(p)) so that the balancing defect is round-off, not the LP's tolerance.
The l1 optimum is generally not unique; HiGHS returns a vertex, and the same input gives the same vertex.

Rounds. The first round of a phase moves the bulk of the excess with the least-cost flow. A later round
(``balancer.min_rounds``, 3, while they pay; more while the imbalance exceeds ``balancer.imbalance_tolerance``)
corrects what the realisation could not meet — cells are discrete, and a least-cost flow may ask a small
subdomain of heavy cells for much load across one boundary. With ``later: minimal`` (default) those rounds use the minimal (2-norm) flow, which spreads the small residue
over every edge; measured on the thesis' heterogeneous 15-rank scenario, least-cost later rounds left phase 7 at
imbalance 1.159 (total 251.0 s), minimal ones at 1.065 (238.4 s). ``slack: s`` lets loads end at up to
``(1 + s) l̄_i`` and moves only the excess above that bound, to the nearest ranks with room.

Distributed form: every rank holds the global model (p loads, capacities and edge weights, gathered by the
driver), rank 0 solves the program and broadcasts the q edge flows — one collective, charged to the clock.
The solve itself is local computation and, as for the spectra of ``auto``, is not charged to the virtual clock:
measured on this project's 2-core machine for random loads on square processor meshes, 3 ms for p = 64, 35 ms
for p = 1,024 (1,984 edges), 0.25 s for p = 4,096 (8,064 edges).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field
from scipy.optimize import linprog

from hermes.balance.central import charge_central, lp_units, sparse_solve_units, with_central
from hermes.balance.flow import FlowResult, minimal_flow, validate_model
from hermes.balance.interface import BalanceContext, Decision, Params, number_type
from hermes.balance.model import Model, derived, edge_values
from hermes.balance.registry import register
from hermes.runtime.comm import Counters, bcast
from hermes.errors import BalancerError, GraphError

__all__ = ["COSTS", "edge_costs", "mincost_flow", "mincost", "with_boundaries", "MinCostParams"]

COSTS = ("hops", "conductance")


def edge_costs(model: Model, cost: str = "conductance") -> NDArray[np.float64]:
    """The cost of one unit of load on each edge: 1 (``hops``) or ``w_max / w_k`` (``conductance``)."""
    if cost == "hops":
        return np.ones(model.q)
    if cost == "conductance":
        w = np.asarray(model.weights, dtype=np.float64)
        return w.max() / w
    raise BalancerError(f"mincost: edge cost must be one of {', '.join(COSTS)}, got {cost!r}")


def mincost_flow(model: Model, cost: str = "conductance", slack: float = 0.0) -> NDArray[np.float64]:
    """The balancing flow of least ``Σ_k cost_k |f_k|`` on ``model`` (see the module docstring).

    Parameters
    ----------
    model : Model
    cost : "conductance" or "hops"
        :func:`edge_costs`.
    slack : float
        0: the flow balances exactly (``A f = l − l̄``). s > 0: every load ends at most ``(1 + s) l̄_i``
        (``l − A f ≤ (1 + s) l̄``), so the excess above that bound moves, to the nearest ranks with room —
        what METIS's ``ufactor`` allows a partition, without requiring underloaded ranks far away to fill up.

    Returns
    -------
    ndarray of float64, shape (q,)
        ``flow[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``; with ``slack = 0`` ``A f = l − l̄``
        to round-off.

    Raises
    ------
    GraphError
        Disconnected model, non-positive capacity or weight.
    BalancerError
        If the linear program fails (it cannot on a connected graph: the minimal flow is feasible).
    """
    validate_model(model)
    q = model.q
    if model.p == 1 or q == 0:
        return np.zeros(q)
    if not (np.isfinite(slack) and 0.0 <= slack < 1.0):
        raise BalancerError(f"balancer.slack: must be in [0, 1), got {slack!r}")
    c = edge_costs(model, cost)
    a = model.incidence.tocsr()
    a2 = sp.hstack([a, -a]).tocsr()
    if slack == 0.0:
        b = model.loads - model.fair_loads
        res = linprog(np.concatenate([c, c]), A_eq=a2, b_eq=b, bounds=(0, None), method="highs")
    else:  # l − A f ≤ (1 + s) l̄
        res = linprog(np.concatenate([c, c]), A_ub=-a2, b_ub=(1.0 + slack) * model.fair_loads - model.loads,
                      bounds=(0, None), method="highs")
    if res.status != 0:
        raise BalancerError(f"mincost: the linear program failed ({res.message})")
    f = res.x[:q] - res.x[q:]
    if slack != 0.0:
        b = a @ f  # the loads the program chose; the forest re-solve below meets them exactly
    # exact on the support: the optimum's support is a forest, whose incidence has full column rank
    scale = max(float(np.abs(f).max()), 1.0)
    support = np.flatnonzero(np.abs(f) > 1e-9 * scale)
    out = _forest_flow(model.p, model.edges, support, b)
    return f if out is None else out


def _forest_flow(p: int, edges: NDArray[np.int64], support: NDArray[np.int64], b: NDArray[np.float64]
                 ) -> NDArray[np.float64] | None:
    """The flow on the forest ``support`` with ``A f = b`` (exactly, by peeling leaves: O(p)); None if the support
    holds a cycle (not an optimum's; the caller keeps the solver's flow)."""
    out = np.zeros(len(edges))
    rest = np.array(b, dtype=np.float64)
    incident: list[set[int]] = [set() for _ in range(p)]
    for k in support.tolist():
        i, j = int(edges[k, 0]), int(edges[k, 1])
        incident[i].add(k)
        incident[j].add(k)
    leaves = [v for v in range(p) if len(incident[v]) == 1]
    done = 0
    while leaves:
        v = leaves.pop()
        if len(incident[v]) != 1:
            continue
        k = incident[v].pop()
        i, j = int(edges[k, 0]), int(edges[k, 1])
        other = j if v == i else i
        # (A f)_v = +f_k if v is the tail i, −f_k if the head j
        out[k] = rest[v] if v == i else -rest[v]
        rest[other] -= (1.0 if other == i else -1.0) * out[k]  # edge k's term in the other endpoint's row
        rest[v] = 0.0
        incident[other].discard(k)
        done += 1
        if len(incident[other]) == 1:
            leaves.append(other)
    return out if done == support.size else None


def _counters(p: int, q: int) -> Counters:
    return Counters(iterations=1, exchange_rounds=0, collectives={"bcast": 1} if p > 1 else {}, messages=0,
                    bytes=8 * q if p > 1 else 0)


def mincost(model: Model, slack: float = 0.0, later: str = "minimal", *, links=None) -> FlowResult:
    """Serial reference of ``mincost``: the first round's flow (conductance costs) and the α-β cost of its one
    broadcast of q words (``later`` concerns later rounds, which a serial reference on one model does not have)."""
    flow = mincost_flow(model, slack=slack)
    counters = _counters(model.p, model.q)
    if links is not None and model.p > 1:  # a broadcast costs what the clock charges a tree collective
        counters.time = links.collective_cost(model.p, 8.0 * model.q)
    return FlowResult(flow=flow, iterations=1, converged=True, counters=counters, extra={"l1": float(np.abs(flow).sum())})


class MinCostParams(Params):
    """Parameters of ``mincost``."""

    slack: number_type(ge=0.0, lt=1.0) = Field(
        0.0, description="0: balance exactly; s > 0: move only what brings every load to at most (1 + s) times "
        "its fair share")
    later: Literal["mincost", "minimal"] = Field(
        "minimal", description="the flow of the phase's later rounds, which correct what the first left: the "
        "least-cost flow again, or the minimal (2-norm) flow, which spreads a small residue over every edge")


def with_boundaries(comm, model: Model, dom) -> Model:
    """``model`` with every edge weight multiplied by the subdomains' common boundary (cut edges) over the longest
    — what ``balancer.conductance: boundary`` gives every flow balancer
    (:func:`hermes.balance.policy.conductances`).
    Collective bookkeeping (an allgather of each rank's boundary lengths, uncharged like the model itself).

    The least-cost flow needs it even when the scenario keeps ``conductance: links``: on uniform links every edge
    would cost the same, and the flow would cross a boundary of one cell edge as readily as a long one (on the
    64-rank experiment such a flow could not be realised: imbalance 1.72 → 2.72)."""
    length = edge_values(comm, comm.Get_rank(), dom.neighbour_ranks, dom.boundary_lengths, model.edges, default=0.0)
    share = np.maximum(length, 1.0) / max(float(length.max(initial=0.0)), 1.0)
    # the same on every rank: once per model and boundaries (hosted processors share the model)
    return derived(model, ("with-boundaries", share.tobytes()),
                   lambda: Model(model.p, model.edges, model.loads, model.capacities, model.weights * share))


@register("mincost", params=MinCostParams,
          serial=with_central(mincost, lambda m, prm: [(lp_units(m.p, m.q), 0)]),
          doc="least-cost (l1) balancing flow minimising Σ|f|/w (a linear program on rank 0, one broadcast)")
def _run(ctx: BalanceContext) -> Decision:
    model, p = ctx.model, ctx.comm.Get_size()
    flow = np.zeros(model.q)
    error = ""
    kind = "minimal" if ctx.round > 0 and ctx.params["later"] == "minimal" else "mincost"
    if kind == "mincost" and ctx.conductance == "links" and ctx.dom is not None:
        model = with_boundaries(ctx.comm, model, ctx.dom)
    counters = ctx.nb.counters  # the phase's balancing counters (summary.json's balance_counters)
    # rank 0 solves: its clock pays the work, the others wait for it in the broadcast (docs/COSTS.md)
    charge_central(ctx.comm, ctx.clock, counters, sparse_solve_units(p) if kind == "minimal" else lp_units(p, model.q))
    if ctx.comm.Get_rank() == 0:
        try:
            flow = minimal_flow(model) if kind == "minimal" else mincost_flow(model, slack=ctx.params["slack"])
        except (BalancerError, GraphError) as err:
            error = f"{type(err).__name__}|{err}"
    error = ctx.comm.bcast(error, root=0)  # bookkeeping: one rank's failure ends every rank's balancing
    if error:
        name, _, text = error.partition("|")
        raise (GraphError if name == "GraphError" else BalancerError)(text)
    if p > 1:
        flow = bcast(ctx.comm, flow, 0, ctx.clock, counters=counters)
    counters.iterations = 1
    moved = float(np.abs(flow).sum())
    return Decision(flow=np.asarray(flow, dtype=np.float64), iterations=1, converged=True, counters=counters,
                    info={"flow": kind, "l1": moved})
