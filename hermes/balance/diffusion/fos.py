"""The practical first-order scheme of Jeannot & Vernier (RR-5875, 2006, §3–4): balancer ``fos``.

FOS on heterogeneous processors, ``w_i ← w_i − Σ_j α_ij f_ij (w_i/C_i − w_j/C_j)`` (001 eq. 3; the sum runs
over the neighbours j), with the paper's practical additions:

* the **local relative-speed matrix** M_r (§3.2): ``Cr_ij = C_j/(C_i + C_j)``, ``δ_i = 1/Σ_j Cr_ij``
  (variant A) or ``1/(½ + Σ_j Cr_ij)`` (variant B: self term ``Cr_ii = C_i/2C_i``), ``Mr_ij = min(δ_i, δ_j) Cr_ij``,
  ``Mr_ii = 1 − Σ_j Mr_ij``. M_r is row-stochastic (row i: where i's load goes, ``W ← M_rᵀ W``) with
  ``C_i Mr_ij = C_j Mr_ji``, so loads tend to ``l̄ ∝ C``: ``α_ij = C_i Mr_ij``, and the off-diagonal of
  eq. (3)'s matrix divides by the *sender's* capacity (the text prints C_j). Variant A has a zero diagonal
  on regular graphs and oscillates on bipartite ones (homogeneous 4-cycle: period 2); B is aperiodic (Th. 1);
* the **cost/benefit gate** with factor k (§3.1): the predicted exchange ``L_ij = Mr_ij w_i − Mr_ji w_j``
  happens (f_ij = 1) only if ``Cost(L) < k · Benefit(L)``, k constant, decremented (Fig. 4) or also halved
  when the iteration time grows (Fig. 5);
* integer loads with the **shaker** (§3.3.1) and **spanning-tree convergence detection** (§3.3.2,
  :mod:`hermes.balance.diffusion.detection`, which also holds the counters and the α-β replay).

How the α-β parameters enter: ``Cost(L) = α_ij + L · unit_bytes / B_ij`` (ExcCost; the application-dependent
PreExcCost and PostExcCost are 0), with α_ij and B_ij the latency and bandwidth of the link (from
:class:`hermes.runtime.clock.Links`; without links, ``Links()``'s latency and ``B_ij = w_ij ×`` its bandwidth, the
weights being conductances ∝ bandwidth), and ``Cmp_i(w) = w · unit_time / (p c_i)`` (c normalised to sum 1).

The flow is a balancing flow when the gate lets balancing finish (gate off or a fast network): the loads
end within ``tolerance`` (real loads) or about one unit per edge (integer loads) of fair. It is *not* the
minimal flow of thesis Th. 20 on graphs with cycles (M_r ignores the edge weights). On a slow network the
gate stops early on purpose: the flow moves the loads only part of the way (001 §4.2.2, Table 1).

The serial reference (:func:`fos_iter`, :func:`fos`), M_r, the gate and :func:`program_time` are in
:mod:`hermes.balance.diffusion.fos_serial`; this module holds the distributed form and the registry entry and
re-exports every public name there.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from hermes.balance.central import central_value, centre_units, with_central
from hermes.balance.diffusion.detection import (
    LinkCosts,
    Tree,
    TreeRounds,
    build_tree_rounds,
    graph_center,
)
from hermes.balance.diffusion.fos_serial import (
    FOSConfig,
    FOSParams,
    Pairs,
    benefit,
    fos,
    fos_amounts,
    fos_delta,
)
from hermes.balance.flow import FlowResult, LocalFlowResult, agree_local_inputs, child_stream
from hermes.balance.interface import BalanceContext, Decision, flow_from_local
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.runtime.clock import Links
from hermes.runtime.comm import NeighbourComm, ordered_sum
from hermes.errors import BalancerError, GraphError

__all__ = ["fos_distributed"]


# -- distributed form ------------------------------------------------------------------------------
def fos_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64],
                    params: FOSParams | None = None, *, links: LinkCosts | None = None, root: int = 0,
                    tree: Tree | None = None) -> LocalFlowResult:
    """The practical FOS on one rank (SPMD; every rank of ``nb.comm`` must call it with the same parameters).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load, capacity : float
        l_i and c_i (capacities normalised to sum 1 over the ranks).
    weights : ndarray, shape (len(nb.neighbours),)
        Edge weights (conductances); they scale the bandwidths when ``links`` is None.
    params : FOSParams, optional
        As :func:`fos_iter` (default: ``FOSParams()``), the same on every rank.
    links : LinkCosts, optional
        α (s) and bandwidth (bytes/s) of the link to each neighbour, for the gate's costs (default as
        :func:`fos_iter` without links).
    root, tree
        Root of the detection tree; a :class:`Tree` returned by an earlier call (``extra["tree"]``) to
        skip building it (every rank must pass one, or none).

    Returns
    -------
    LocalFlowResult
        ``flows[t] > 0``: this rank sent that much (net) to ``nb.neighbours[t]``; ``extra``: final
        ``load`` and ``k``, ``stop``, this rank's ``detection_messages`` and its ``tree``.

    Raises
    ------
    BalancerError, GraphError
        On every rank, if any rank has bad parameters or inputs (agreed by :func:`agree_local_inputs`).

    Notes
    -----
    The steps and arithmetic of :func:`fos_iter`: bit-identical flows and the same random draws (this rank
    uses stream ``rank`` of ``SeedSequence(seed).spawn(p)``). "halving" needs the synchronous iteration
    time T(t), which 001's application measures for free; here it rides on the detection tree
    (:class:`~hermes.balance.diffusion.detection.TreeRounds`). All ranks stop ``2h − 1`` rounds after the first
    iteration
    without transfers, h = ecc(root) (the radius when the root is a center). Counters:
    :func:`~hermes.balance.diffusion.detection.fos_counters`.
    """
    prm = FOSParams() if params is None else params
    variant, k, k_schedule, integer, shaker = prm.variant, prm.k, prm.k_schedule, prm.integer, prm.shaker
    kappa, detection, tolerance, max_iterations, seed = prm.kappa, prm.detection, prm.tolerance, prm.max_iterations, \
        prm.seed
    unit_bytes, unit_time = prm.unit_bytes, prm.unit_time
    nbrs = nb.neighbours
    deg, p = len(nbrs), nb.size
    w = np.asarray(weights, dtype=np.float64).ravel()
    lat = np.full(deg, Links().latency) if links is None else np.asarray(links.latency, dtype=np.float64).ravel()
    bw = Links().bandwidth * w if links is None else np.asarray(links.bandwidth, dtype=np.float64).ravel()

    def check() -> None:
        if not (isinstance(root, (int, np.integer)) and 0 <= root < p):
            raise BalancerError(f"root must be a rank in 0..{p - 1}, got {root!r}")
        if integer and math.isfinite(load) and float(load) != math.floor(float(load)):
            raise BalancerError("integer mode needs integral loads")
        if lat.shape != (deg,) or bw.shape != (deg,) or not (np.all(lat >= 0) and np.all(bw > 0)):
            raise GraphError(f"rank {nb.rank}: need a latency ≥ 0 and a bandwidth > 0 per neighbour")

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check)
    load, ci = float(load), float(capacity)
    cfg = FOSConfig(bool(integer), k is not None, tolerance / max(p - 1, 1) * total, float(unit_bytes))
    halving = cfg.gate and k_schedule == "halving"
    cj = nb.exchange_scalar(ci)  # M_r handshake (Alg. 1): the speed C_i, not the load, then δ_i
    delta = fos_delta(ordered_sum(cj / (ci + cj)), variant)
    m = np.minimum(delta, nb.exchange_scalar(delta))
    m_out, m_in = m * (cj / (ci + cj)), m * (ci / (ci + cj))
    gi, gj = unit_time / (p * ci), unit_time / (p * cj)
    built = detection and tree is None
    tree = build_tree_rounds(nb, root) if built else tree
    det = TreeRounds(nb, tree, halving) if detection else None
    lag = tree.height + max(tree.height - 1, 0) if detection else 0
    rng = child_stream(seed, nb.rank) if shaker else None
    kk = float(k) if k is not None else math.inf
    U, flows = np.zeros(deg), np.zeros(deg)
    n = 0
    while n < max_iterations and not (det is not None and det.stop is not None and n >= det.stop):
        n += 1
        wj = nb.exchange_scalar(load)
        lij = m_out * load - m_in * wj
        send = lij > 0
        ws, wr, gs, gr = (np.where(send, load, wj), np.where(send, wj, load), np.where(send, gi, gj),
                          np.where(send, gj, gi))
        x = fos_amounts(np.abs(lij), Pairs(ws, wr, np.where(send, ci, cj), np.where(send, cj, ci), gs, gr), kk, lat,
                        bw, cfg)
        if shaker:
            unbal = (np.abs(lij) > 0) & (benefit(ws, wr, gs, gr, 1.0) >= 0)
            U = np.where(x > 0, 0.0, np.where(unbal, U + 1.0, 0.0))
            out = np.where(send, x, 0.0)
            rem = load - ordered_sum(out)
            for t in range(deg):
                if send[t] and x[t] == 0 and unbal[t] and rng.random() < math.exp(-kappa * U[t]) \
                        and (wj[t] + 1.0) * gj[t] <= rem * gi:
                    out[t], rem = out[t] + 1.0, rem - 1.0
            net = out - np.array([v[0] for v in nb.exchange(out, recv_sizes=np.ones(deg))], dtype=np.float64)
        else:
            net = np.where(send, x, np.where(lij < 0, -x, 0.0))
        load = load - ordered_sum(net)
        flows = flows + net
        moved = net != 0
        if cfg.gate and k_schedule != "constant":
            kk = max(kk - 1.0, 0.0)
        if det is not None:
            cost = np.where(moved, lat + np.abs(net) * cfg.unit_bytes / bw, 0.0)
            det.round(n, not moved.any(), load * gi + float(np.max(cost, initial=0.0)))
            j = n - lag
            if halving and j >= 2:
                kk = kk / 2.0 if det.known[j] > det.known[j - 1] else kk
                det.known.pop(j - 1)
    nb.counters.iterations = n
    stop = det.stop if det is not None else None
    msgs = (deg * (tree.height + 1) if built else 0) + (det.messages if det is not None else 0)
    return LocalFlowResult(flows=flows, iterations=n, converged=stop == n, counters=nb.counters,
                           extra={"load": load, "k": kk, "stop": stop, "detection_messages": msgs, "tree": tree})


# -- registry --------------------------------------------------------------------------------------
def _serial_entry(model: Model, *, links=None, **params) -> FlowResult:
    return fos(model, links=links, root=graph_center(model), **params)


@register("fos", params=FOSParams, serial=with_central(_serial_entry, lambda m, prm: [(centre_units(m), 1)]),
          doc="practical FOS of Jeannot & Vernier (001 §3): relative-speed matrix M_r (variant A|B), cost/benefit "
              "gate (k, null = off; k_schedule constant|decrement|halving), integer loads + shaker (kappa), "
              "spanning-tree detection; unit_bytes / unit_time price a load unit against the links' α-β")
def _run_entry(ctx: BalanceContext) -> Decision:
    """hermes adapter: link α-β as measured by the monitor (else the configured links), root at a center of
    ``ctx.model``; the detection
    tree is built once and kept in ``ctx.state`` while the processor graph stays the same."""
    if ctx.latency is not None and ctx.bandwidth is not None:  # the monitor's measurements
        par = np.column_stack([ctx.latency, ctx.bandwidth]).astype(float).reshape(-1, 2)
    else:
        par = np.array([ctx.clock.links.params(ctx.nb.rank, int(j)) for j in ctx.nb.neighbours], dtype=float)
    par = par.reshape(-1, 2)
    # identical on every rank; the centre charged as computed on rank 0 and broadcast (docs/COSTS.md)
    key = (int(central_value(ctx, graph_center(ctx.model), centre_units(ctx.model))), ctx.model.edges.tobytes())
    kept = ctx.state.get("fos_tree")
    res = fos_distributed(ctx.nb, ctx.load, ctx.capacity, ctx.weights, FOSParams.of(ctx.params),
                          links=LinkCosts(par[:, 0], par[:, 1]), root=key[0],
                          tree=kept[1] if kept and kept[0] == key else None)
    if res.extra["tree"] is not None:
        ctx.state["fos_tree"] = (key, res.extra["tree"])
    flow = flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, res.flows)
    return Decision(flow=flow, iterations=res.iterations, converged=res.converged, counters=res.counters,
                    info={"root": key[0], "stop": res.extra["stop"]})
