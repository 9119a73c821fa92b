"""``mincost``: the balancing flow of least total cost ``Σ_k |f_k| / w_k`` (an l1 flow), not the 2-norm minimal one.

Every diffusion, polynomial and PCG scheme of the thesis computes the flow that minimises ``Σ_k f_k² / w_k``
(:func:`hermes.balance.flow.minimal_flow`). That flow spreads the excess over every path between a surplus and a
deficit, so a front of heavy cells sends load through chains of neighbours: on the 64-rank experiment of
BENCHMARKS.md ("Fair balancing at scale") it moves more distinct cells than METIS scratch-remap in the first
phase. The flow that minimises the *l1* cost

    minimise  Σ_k |f_k| / w_k      subject to  A f = l − l̄

is a transportation problem on the processor graph (a minimum-cost flow). The balancer uses the conductance costs
(edge k costs w_max / w_k): with ``balancer.conductance: boundary`` a unit crossing a short common boundary or a
slow link costs more, so the flow prefers the long boundaries the realisation can meet without stretching
subdomains. :func:`mincost_flow` also offers ``cost="hops"`` (every edge costs 1): its value is the least number
of load-hops of any balancing flow, the bound BENCHMARKS.md quotes. It is not offered to runs: such a flow
crosses boundaries of a single cell edge as readily as long ones, and on the 64-rank experiment the realisation
could not meet it (imbalance 1.72 → 2.49).

It is solved as a linear program (HiGHS through :func:`scipy.optimize.linprog`; ``f = f⁺ − f⁻``, both ≥ 0).
An optimal basic solution is supported on a forest (positive costs leave no cycle in an optimum), hence
acyclic, so the topological migration order of Th. 21 exists; the flow is then re-solved exactly on its support
(least squares on the forest's incidence) so that the balancing defect is round-off, not the LP's tolerance.
The l1 optimum is generally not unique; HiGHS returns a vertex, and the same input gives the same vertex.

Distributed form: every rank holds the global model (p loads, capacities and edge weights, gathered by the
driver), rank 0 solves the program and broadcasts the q edge flows — one collective, charged to the clock.
The solve itself is local computation (milliseconds for p = 64, linear programs with thousands of edges take
well under a second) and, as for the spectra of ``auto``, is not charged to the virtual clock.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from hermes.balance.flow import FlowResult, validate_model
from hermes.balance.interface import BalanceContext, Decision
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.comm import Counters, bcast
from hermes.errors import BalancerError

__all__ = ["COSTS", "edge_costs", "mincost_flow", "mincost"]

COSTS = ("hops", "conductance")


def edge_costs(model: Model, cost: str = "conductance") -> NDArray[np.float64]:
    """The cost of one unit of load on each edge: 1 (``hops``) or ``w_max / w_k`` (``conductance``)."""
    if cost == "hops":
        return np.ones(model.q)
    if cost == "conductance":
        w = np.asarray(model.weights, dtype=np.float64)
        return w.max() / w
    raise BalancerError(f"balancer.cost: must be one of {', '.join(COSTS)}, got {cost!r}")


def mincost_flow(model: Model, cost: str = "conductance") -> NDArray[np.float64]:
    """The balancing flow of least ``Σ_k cost_k |f_k|`` on ``model`` (see the module docstring).

    Returns
    -------
    ndarray of float64, shape (q,)
        ``flow[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``; ``A f = l − l̄`` to round-off.

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
    b = model.loads - model.fair_loads
    c = edge_costs(model, cost)
    a = model.incidence.tocsr()
    res = linprog(np.concatenate([c, c]), A_eq=sp.hstack([a, -a]).tocsr(), b_eq=b, bounds=(0, None),
                  method="highs")
    if res.status != 0:
        raise BalancerError(f"mincost: the linear program failed ({res.message})")
    f = res.x[:q] - res.x[q:]
    # exact on the support: the optimum's support is a forest, whose incidence has full column rank
    scale = max(float(np.abs(f).max()), 1.0)
    support = np.flatnonzero(np.abs(f) > 1e-9 * scale)
    out = np.zeros(q)
    if support.size:
        sub = a[:, support].toarray()
        out[support] = np.linalg.lstsq(sub, b, rcond=None)[0]
    return out


def _counters(p: int, q: int) -> Counters:
    return Counters(iterations=1, exchange_rounds=0, collectives={"bcast": 1} if p > 1 else {}, messages=0,
                    bytes=8 * q if p > 1 else 0)


def mincost(model: Model, *, links=None) -> FlowResult:
    """Serial reference of ``mincost``: the flow (conductance costs) and the α-β cost of its one broadcast of q
    words."""
    flow = mincost_flow(model)
    counters = _counters(model.p, model.q)
    if links is not None and model.p > 1:  # a broadcast costs what the clock charges a tree collective
        counters.time = links.collective_cost(model.p, 8.0 * model.q)
    return FlowResult(flow=flow, iterations=1, converged=True, counters=counters, extra={"l1": float(np.abs(flow).sum())})


@register("mincost", serial=mincost,
          doc="least-cost (l1) balancing flow minimising Σ|f|/w (a linear program on rank 0, one broadcast)")
def _run(ctx: BalanceContext) -> Decision:
    model, p = ctx.model, ctx.comm.Get_size()
    flow = np.zeros(model.q)
    error = ""
    if ctx.comm.Get_rank() == 0:
        try:
            flow = mincost_flow(model)
        except BalancerError as err:
            error = str(err)
    error = ctx.comm.bcast(error, root=0)  # bookkeeping: one rank's failure ends every rank's balancing
    if error:
        raise BalancerError(error)
    counters = Counters()
    if p > 1:
        flow = bcast(ctx.comm, flow, 0, ctx.clock, counters=counters)
    counters.iterations = 1
    moved = float(np.abs(flow).sum())
    return Decision(flow=np.asarray(flow, dtype=np.float64), iterations=1, converged=True, counters=counters,
                    info={"l1": moved})
