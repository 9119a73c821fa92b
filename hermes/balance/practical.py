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
  :mod:`hermes.balance.detection`, which also holds the counters and the α-β replay; re-exported here).

How the α-β parameters enter: ``Cost(L) = α_ij + L · unit_bytes / B_ij`` (ExcCost; the application-dependent
PreExcCost and PostExcCost are 0), with α_ij and B_ij the latency and bandwidth of the link (from
:class:`hermes.clock.Links`; without links, ``Links()``'s latency and ``B_ij = w_ij ×`` its bandwidth, the weights
being conductances ∝ bandwidth), and ``Cmp_i(w) = w · unit_time / (p c_i)`` (c normalised to sum 1).

The flow is a balancing flow when the gate lets balancing finish (gate off or a fast network): the loads
end within ``tolerance`` (real loads) or about one unit per edge (integer loads) of fair. It is *not* the
minimal flow of thesis Th. 20 on graphs with cycles (M_r ignores the edge weights). On a slow network the
gate stops early on purpose: the flow moves the loads only part of the way (001 §4.2.2, Table 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.balance.flow import (
    FlowResult, LocalFlowResult, agree_local_inputs, neighbour_table, ordered_row_sums, ordered_total, validate_model,
)
from hermes.balance.detection import (Tree, _build_tree, _edge_costs, _Replay, _TreeRounds, bfs_tree, fos_counters,
                                      graph_center)
from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext, BalancerInfo, Decision, flow_from_local
from hermes.clock import Links
from hermes.comm import NeighbourComm
from hermes.errors import BalancerError, GraphError

__all__ = ["DEFAULT_KAPPA", "Tree", "relative_speed_matrix", "bfs_tree", "graph_center", "FOSState", "fos_iter",
           "fos", "fos_counters", "fos_distributed", "program_time", "REGISTRY"]

#: κ = −ln(p)/τ for p = ½ at τ = 2 (001 §3.3.1's example; the printed ln(0.5)/2 has the wrong sign)
DEFAULT_KAPPA = -math.log(0.5) / 2
_SCHEDULES = ("constant", "decrement", "halving")
_NAMES = ("variant", "k", "k_schedule", "integer", "shaker", "kappa", "detection", "tolerance", "max_iterations",
          "seed", "unit_bytes", "unit_time")
_DEFAULTS = dict(zip(_NAMES, ("B", 1000.0, "decrement", False, False, DEFAULT_KAPPA, True, 1e-3, 1000, 0, 64.0,
                              1e-6)))


def _check_params(variant, k, k_schedule, integer, shaker, kappa, detection, tolerance, max_iterations, seed,
                  unit_bytes, unit_time) -> None:
    def num(x) -> bool:
        return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)

    def count(x) -> bool:
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0

    if variant not in ("A", "B"):
        raise BalancerError(f"variant must be 'A' or 'B', got {variant!r}")
    if k is not None and not (num(k) and k > 0):
        raise BalancerError(f"k must be a positive number (or null: no cost/benefit gate), got {k!r}")
    if k_schedule not in _SCHEDULES:
        raise BalancerError(f"k_schedule must be one of {', '.join(_SCHEDULES)}, got {k_schedule!r}")
    for name, v in (("integer", integer), ("shaker", shaker), ("detection", detection)):
        if not isinstance(v, (bool, np.bool_)):
            raise BalancerError(f"{name} must be true or false, got {v!r}")
    if shaker and not integer:
        raise BalancerError("the shaker needs integer loads (integer: true)")
    if k is not None and k_schedule == "halving" and not detection:
        raise BalancerError("k_schedule 'halving' needs detection (the iteration time travels on its tree)")
    if not (num(kappa) and kappa > 0):
        raise BalancerError(f"kappa must be > 0 (κ = −ln(p)/τ), got {kappa!r}")
    if not (num(tolerance) and 0 <= tolerance < 1):
        raise BalancerError(f"tolerance must be in [0, 1), got {tolerance!r}")
    if not count(max_iterations) or not count(seed):
        raise BalancerError(f"max_iterations and seed must be integers ≥ 0, got {max_iterations!r} and {seed!r}")
    if not (num(unit_bytes) and unit_bytes >= 0 and num(unit_time) and unit_time > 0):
        raise BalancerError(f"unit_bytes must be ≥ 0 and unit_time > 0, got {unit_bytes!r} and {unit_time!r}")


@dataclass(frozen=True)
class _Config:
    """What both ends of a pair need to evaluate its FOS transfer identically."""

    integer: bool
    gate: bool
    thresh: float  # dead band of real loads on w_s/c_s − w_r/c_r
    unit_bytes: float


def _benefit(ws, wr, gs, gr, amount):
    """001 eq. (4), single form: ``max(Cmp_s(w_s), Cmp_r(w_r)) − max(Cmp_s(w_s − L), Cmp_r(w_r + L))``."""
    return np.maximum(ws * gs, wr * gr) - np.maximum((ws - amount) * gs, (wr + amount) * gr)


def _fos_amounts(amount, ws, wr, cs, cr, gs, gr, k: float, lat, bw, cfg: _Config):
    """FOS transfer sender → receiver of each pair, evaluated from the sender's side at both ends."""
    x = np.floor(amount) if cfg.integer else np.where(ws / cs - wr / cr > cfg.thresh, amount, 0.0)
    if cfg.gate:
        x = np.where(lat + x * cfg.unit_bytes / bw < k * _benefit(ws, wr, gs, gr, x), x, 0.0)
    return x


def _delta(cr_sum: float, variant: str) -> float:
    s = cr_sum + 0.5 if variant == "B" else cr_sum
    return 1.0 / s if s > 0 else math.inf


def _mr_edges(model: Model, variant: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(Mr_ab, Mr_ba) on every edge (a, b) = ``model.edges[k]``."""
    nbr, _, sign = neighbour_table(model)
    c = model.capacities
    crsum = ordered_row_sums(np.where(sign != 0, c[nbr] / (c[:, None] + c[nbr]), 0.0))
    delta = np.array([_delta(float(s), variant) for s in crsum])
    a, b = model.edges[:, 0], model.edges[:, 1]
    m = np.minimum(delta[a], delta[b])
    return m * (c[b] / (c[a] + c[b])), m * (c[a] / (c[a] + c[b]))


def relative_speed_matrix(model: Model, variant: str = "B") -> sp.csr_array:
    """The local relative-speed matrix M_r of 001 §3.2 (rows are senders). Raises BalancerError, GraphError."""
    validate_model(model)
    if variant not in ("A", "B"):
        raise BalancerError(f"variant must be 'A' or 'B', got {variant!r}")
    mab, mba = _mr_edges(model, variant)
    e, p = model.edges, model.p
    rows, cols = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
    off = sp.csr_array((np.concatenate([mab, mba]), (rows, cols)), shape=(p, p))
    return (off + sp.diags_array(1.0 - np.asarray(off.sum(axis=1)).ravel())).tocsr()


# -- serial reference ------------------------------------------------------------------------------
@dataclass
class FOSState:
    """One step of :func:`fos_iter`: loads after it, accumulated ``flow`` and this iteration's ``step`` on
    ``model.edges``, ``quiet`` ranks (no transfer: 001's "stable"), gate factor ``k`` for the next
    iteration, detection's ``stop`` iteration once decided, and per-rank α-β ``times`` (0 without links)."""

    iteration: int
    loads: NDArray[np.float64]
    flow: NDArray[np.float64]
    step: NDArray[np.float64]
    quiet: NDArray[np.bool_]
    k: float
    stop: int | None
    times: NDArray[np.float64]


def fos_iter(model: Model, *, variant: str = "B", k: float | None = 1000.0, k_schedule: str = "decrement",
             integer: bool = False, shaker: bool = False, kappa: float = DEFAULT_KAPPA, detection: bool = True,
             tolerance: float = 1e-3, max_iterations: int = 1000, seed: int = 0, unit_bytes: float = 64.0,
             unit_time: float = 1e-6, links=None, root: int = 0, build_tree: bool = True) -> Iterator[FOSState]:
    """Run the practical FOS serially, yielding the state after every iteration (iteration 0 first).

    Parameters
    ----------
    model : Model
    variant : "A" or "B"
        M_r without / with the self term.
    k : float or None
        Initial gate factor k⁽⁰⁾ (001 §4: 1000); None switches the gate off (plain FOS).
    k_schedule : "constant", "decrement" or "halving"
        ``k ← max(k − 1, 0)`` per iteration (Fig. 4); "halving" (with detection) also halves k when the synchronous
        iteration time ``T(t) = max_i (Cmp_i(w_i) + max cost of i's transfers)`` grew (Fig. 5); T travels on
        the detection tree, so iteration t's comparison is applied after iteration ``t + 2h − 1``.
    integer, shaker, kappa
        Integer loads (transfers ``⌊L⌋`` units); the shaker (needs ``integer``) with decay κ > 0.
    detection : bool
        Stop by spanning-tree detection; without it FOS runs ``max_iterations`` (001's Algo1).
    tolerance : float
        Real loads: dead band ``|u_i − u_j| ≤ tolerance/(p − 1)`` on ``u = l/l̄`` of a pair, so that a
        quiet ungated network has ``max|l − l̄|/l̄ ≤ tolerance``.
    max_iterations, seed : int
    unit_bytes, unit_time : float
        Bytes to move one load unit; seconds to compute one unit on an average processor (c = 1/p).
    links : hermes.clock.Links, optional
        Link α-β: the gate's costs and the per-rank times.
    root, build_tree
        Root of the detection tree; whether its distributed BFS is counted (False: a tree kept from an
        earlier call, as the registry does across phases).

    Raises
    ------
    BalancerError
        Bad parameters, or non-integral loads with ``integer``. GraphError for an unusable model.

    Notes
    -----
    Iteration (001 §3.1–3.3; eq. 3 with f_ij ∈ {0, 1}), every pair {i, j}: ``L = Mr_ij w_i − Mr_ji w_j``;
    the sender s (``L > 0``) moves ``x = ⌊L⌋`` (integer) or L (real, outside the dead band) to r iff
    ``α_sr + x·unit_bytes/B_sr < k·Benefit(x)``, Benefit in the single form of :func:`_benefit` (the
    printed L < 0 case has a sign error). Shaker: ``U_ij`` counts successive iterations in which the
    pair was unbalanced (moving one unit from s does not raise the pair's larger Cmp) and FOS did not
    move; s then draws ``alea`` from its own stream (``SeedSequence(seed).spawn(p)[s]``) and moves one
    unit if ``alea < e^{−κU}`` and it still has the load. A shaken unit does not reset U (else the
    swap back happens at once with probability 1); an FOS transfer or balance does. Detection: with
    ``t_s`` the first iteration in which no rank moved load and h the tree height, everyone stops after
    iteration ``t_s + 2h − 1`` (``t_s`` if h = 0); see :func:`fos_distributed`.
    """
    validate_model(model)
    _check_params(variant, k, k_schedule, integer, shaker, kappa, detection, tolerance, max_iterations, seed,
                  unit_bytes, unit_time)
    p, e, c = model.p, model.edges, model.capacities
    if not (isinstance(root, (int, np.integer)) and 0 <= root < p):
        raise BalancerError(f"root must be a rank in 0..{p - 1}, got {root!r}")
    if integer and not np.all(model.loads == np.floor(model.loads)):
        raise BalancerError("integer mode needs integral loads")
    cfg = _Config(bool(integer), k is not None, tolerance / max(p - 1, 1) * ordered_total(model.loads),
                  float(unit_bytes))
    halving = cfg.gate and k_schedule == "halving"
    mab, mba = _mr_edges(model, variant)
    g = unit_time / (p * c)
    lat, bw = _edge_costs(model, links)
    nbr, edge, sign = neighbour_table(model)
    mask = sign != 0
    a, b = e[:, 0], e[:, 1]
    parent, depth = bfs_tree(model, int(root))
    h = int(depth.max())
    tree = (parent[b] == a) | (parent[a] == b)
    rep = _Replay(model, links) if links is not None else None
    if rep is not None:
        rep.allreduce(2)
        rep.exchange(), rep.exchange()
        if detection and build_tree:
            rep.allreduce()
            for _ in range(h):
                rep.exchange(), rep.allreduce()
            rep.exchange()
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(p)] if shaker else []
    kk = float(k) if k is not None else math.inf
    U = np.zeros(model.q)
    loads, flow = model.loads.copy(), np.zeros(model.q)
    lag = h + max(h - 1, 0)  # rounds until every rank knows the root's verdict / the global T
    big_t = [0.0]  # T(t) for t ≥ 1 (index 0 unused)
    n, t_s, stop = 0, None, None
    times = (lambda: rep.t.copy()) if rep is not None else (lambda: np.zeros(p))
    yield FOSState(0, loads, flow, np.zeros(model.q), np.ones(p, dtype=bool), kk, None, times())
    while n < max_iterations and not (stop is not None and n >= stop):
        n += 1
        lab = mab * loads[a] - mba * loads[b]
        fwd = lab > 0
        s, r = np.where(fwd, a, b), np.where(fwd, b, a)
        amount = np.abs(lab)
        x = _fos_amounts(amount, loads[s], loads[r], c[s], c[r], g[s], g[r], kk, lat, bw, cfg)
        if shaker:
            unbal = (amount > 0) & (_benefit(loads[s], loads[r], g[s], g[r], 1.0) >= 0)
            U = np.where(x > 0, 0.0, np.where(unbal, U + 1.0, 0.0))
            rem = loads - np.bincount(s, weights=x, minlength=p)
            for i in range(p):  # rank i's draws, in its sorted neighbour order
                for t in np.flatnonzero(mask[i]).tolist():
                    j, q = int(nbr[i, t]), int(edge[i, t])
                    if s[q] == i and x[q] == 0 and unbal[q] and rngs[i].random() < math.exp(-kappa * U[q]) \
                            and (loads[j] + 1.0) * g[j] <= rem[i] * g[i]:
                        x[q], rem[i] = x[q] + 1.0, rem[i] - 1.0
        step = np.where(fwd, x, -x)
        loads = loads - ordered_row_sums(np.where(mask, sign * step[edge], 0.0))
        flow = flow + step
        moved = step != 0
        quiet = np.ones(p, dtype=bool)
        quiet[a[moved]] = quiet[b[moved]] = False
        if rep is not None:
            rep.exchange()
            if shaker:
                rep.exchange()
        if cfg.gate and k_schedule != "constant":
            kk = max(kk - 1.0, 0.0)
            if halving:
                cost = np.where(moved, lat + np.abs(step) * cfg.unit_bytes / bw, 0.0)
                mx = np.zeros(p)
                np.maximum.at(mx, a, cost), np.maximum.at(mx, b, cost)
                big_t.append(float(np.max(loads * g + mx)))
                j = n - lag
                kk = kk / 2.0 if j >= 2 and big_t[j] > big_t[j - 1] else kk
        if detection:
            if rep is not None:
                rep.exchange(tree, 2 if halving else 1)
            t_s = n if t_s is None and quiet.all() else t_s
            if stop is None and t_s is not None and n == t_s + h:
                stop = t_s + lag
        yield FOSState(n, loads, flow, step, quiet, kk, stop, times())


def fos(model: Model, *, links=None, root: int = 0, build_tree: bool = True, compute_factor: bool = True,
        **params) -> FlowResult:
    """The practical FOS (001 §3), serial reference of :func:`fos_distributed`; parameters of :func:`fos_iter`.

    Returns
    -------
    FlowResult
        ``converged``: detection stopped the run (always False without detection).
        ``convergence_factor``: second largest eigenvalue modulus of M_r (1 for variant A on a bipartite
        graph). ``extra``: ``loads``, ``k``, ``stop``, ``t_stable`` (first iteration without transfers),
        ``root``, ``height``, ``transfers`` (pair transfers made), ``detection_messages``, ``rank_times``.
    """
    state, t_s, transfers = None, None, 0
    for state in fos_iter(model, links=links, root=root, build_tree=build_tree, **params):
        transfers += int(np.count_nonzero(state.step))
        t_s = state.iteration if t_s is None and state.iteration > 0 and state.quiet.all() else t_s
    assert state is not None
    o = {**_DEFAULTS, **params}
    h = int(bfs_tree(model, root)[1].max())
    counters, det = fos_counters(model, state.iteration, detection=o["detection"], shaker=o["shaker"],
                                 halving=o["k"] is not None and o["k_schedule"] == "halving", height=h,
                                 build_tree=build_tree)
    counters.time = float(np.max(state.times))
    factor = None
    if compute_factor:
        from hermes.balance.diffusion import convergence_factor

        factor = convergence_factor(relative_speed_matrix(model, o["variant"]).T, model.capacities)
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.stop == state.iteration,
                      counters=counters, convergence_factor=factor,
                      extra={"loads": state.loads, "k": state.k, "stop": state.stop, "t_stable": t_s, "root": root,
                             "height": h, "transfers": transfers, "detection_messages": det,
                             "rank_times": state.times if links is not None else None})


# -- distributed form ------------------------------------------------------------------------------
def _ordered_sum(values) -> float:
    acc = 0.0
    for v in values:
        acc = acc + float(v)
    return acc


def fos_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], *,
                    variant: str = "B", k: float | None = 1000.0, k_schedule: str = "decrement",
                    integer: bool = False, shaker: bool = False, kappa: float = DEFAULT_KAPPA,
                    detection: bool = True, tolerance: float = 1e-3, max_iterations: int = 1000, seed: int = 0,
                    unit_bytes: float = 64.0, unit_time: float = 1e-6, latency=None, bandwidth=None,
                    root: int = 0, tree: Tree | None = None) -> LocalFlowResult:
    """The practical FOS on one rank (SPMD; every rank of ``nb.comm`` must call it with the same parameters).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load, capacity : float
        l_i and c_i (capacities normalised to sum 1 over the ranks).
    weights : ndarray, shape (len(nb.neighbours),)
        Edge weights (conductances); they scale the bandwidths when ``bandwidth`` is None.
    latency, bandwidth : ndarray, optional
        α (s) and bandwidth (bytes/s) of the link to each neighbour, for the gate's costs (default as
        :func:`fos_iter` without links).
    root, tree
        Root of the detection tree; a :class:`Tree` returned by an earlier call (``extra["tree"]``) to
        skip building it (every rank must pass one, or none).
    Other parameters
        As :func:`fos_iter`.

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
    (:class:`~hermes.balance.detection._TreeRounds`). All ranks stop ``2h − 1`` rounds after the first iteration
    without transfers, h = ecc(root) (the radius when the root is a center). Counters:
    :func:`~hermes.balance.detection.fos_counters`.
    """
    nbrs = nb.neighbours
    deg, p = len(nbrs), nb.size
    w = np.asarray(weights, dtype=np.float64).ravel()
    lat = np.full(deg, Links().latency) if latency is None else np.asarray(latency, dtype=np.float64).ravel()
    bw = Links().bandwidth * w if bandwidth is None else np.asarray(bandwidth, dtype=np.float64).ravel()

    def check() -> None:
        _check_params(variant, k, k_schedule, integer, shaker, kappa, detection, tolerance, max_iterations, seed,
                      unit_bytes, unit_time)
        if not (isinstance(root, (int, np.integer)) and 0 <= root < p):
            raise BalancerError(f"root must be a rank in 0..{p - 1}, got {root!r}")
        if integer and math.isfinite(load) and float(load) != math.floor(float(load)):
            raise BalancerError("integer mode needs integral loads")
        if lat.shape != (deg,) or bw.shape != (deg,) or not (np.all(lat >= 0) and np.all(bw > 0)):
            raise GraphError(f"rank {nb.rank}: need a latency ≥ 0 and a bandwidth > 0 per neighbour")

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check)
    load, ci = float(load), float(capacity)
    cfg = _Config(bool(integer), k is not None, tolerance / max(p - 1, 1) * total, float(unit_bytes))
    halving = cfg.gate and k_schedule == "halving"
    cj = nb.exchange_scalar(ci)  # M_r handshake (Alg. 1): the speed C_i, not the load, then δ_i
    delta = _delta(_ordered_sum(cj / (ci + cj)), variant)
    m = np.minimum(delta, nb.exchange_scalar(delta))
    m_out, m_in = m * (cj / (ci + cj)), m * (ci / (ci + cj))
    gi, gj = unit_time / (p * ci), unit_time / (p * cj)
    built = detection and tree is None
    tree = _build_tree(nb, root) if built else tree
    det = _TreeRounds(nb, tree, halving) if detection else None
    lag = tree.height + max(tree.height - 1, 0) if detection else 0
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[nb.rank]) if shaker else None
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
        x = _fos_amounts(np.abs(lij), ws, wr, np.where(send, ci, cj), np.where(send, cj, ci), gs, gr, kk, lat, bw,
                         cfg)
        if shaker:
            unbal = (np.abs(lij) > 0) & (_benefit(ws, wr, gs, gr, 1.0) >= 0)
            U = np.where(x > 0, 0.0, np.where(unbal, U + 1.0, 0.0))
            out = np.where(send, x, 0.0)
            rem = load - _ordered_sum(out)
            for t in range(deg):
                if send[t] and x[t] == 0 and unbal[t] and rng.random() < math.exp(-kappa * U[t]) \
                        and (wj[t] + 1.0) * gj[t] <= rem * gi:
                    out[t], rem = out[t] + 1.0, rem - 1.0
            net = out - np.array([v[0] for v in nb.exchange(out, recv_sizes=np.ones(deg))], dtype=np.float64)
        else:
            net = np.where(send, x, np.where(lij < 0, -x, 0.0))
        load = load - _ordered_sum(net)
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


def program_time(model: Model, states: Iterable[FOSState], app_iterations: int, *, unit_time: float = 1e-6,
                 unit_bytes: float = 64.0, links=None) -> float:
    """Run time of 001 §4.2's synchronous iterative program balanced by ``states`` (from :func:`fos_iter`).

    ``T = t_msg + Σ_{t ≤ n} max_k Cost(x_k^{(t)}) + Σ_{s=1}^{N} max_i Cmp_i(w_i^{(min(s, n))})``: the balancer's
    messages (largest per-rank α-β clock), the load moved in each of its n iterations (slowest link used)
    and N application iterations, the s-th after balancing step s (one step per program iteration, as
    in the paper). The gain of an algorithm 2 over an algorithm 1 is ``(T1 − T2)/T1``.
    """
    lat, bw = _edge_costs(model, links)
    g = unit_time / (model.p * model.capacities)
    total, n, last = 0.0, 0, None
    for last in states:
        if last.iteration == 0:
            continue
        n, moved = last.iteration, last.step != 0
        total += float(np.max(lat[moved] + np.abs(last.step[moved]) * unit_bytes / bw[moved], initial=0.0))
        total += float(np.max(last.loads * g)) if n <= app_iterations else 0.0
    if last is None:
        raise ValueError("program_time needs at least the initial state")
    return total + max(app_iterations - n, 0) * float(np.max(last.loads * g)) + float(np.max(last.times))


# -- registry --------------------------------------------------------------------------------------
def _check_entry(params: dict) -> None:
    try:
        _check_params(*(params[x] for x in _NAMES))
    except BalancerError as err:
        raise BalancerError(f"balancer.{err}") from None


def _serial_entry(model: Model, *, links=None, **params) -> FlowResult:
    return fos(model, links=links, root=graph_center(model), **params)


def _run_entry(ctx: BalanceContext) -> Decision:
    """hermes adapter: link α-β as measured by the monitor (else the configured links), root at a center of ``ctx.model``; the detection
    tree is built once and kept in ``ctx.state`` while the processor graph stays the same."""
    if ctx.latency is not None and ctx.bandwidth is not None:  # the monitor's measurements
        par = np.column_stack([ctx.latency, ctx.bandwidth]).astype(float).reshape(-1, 2)
    else:
        par = np.array([ctx.clock.links.params(ctx.nb.rank, int(j)) for j in ctx.nb.neighbours], dtype=float)
    par = par.reshape(-1, 2)
    key = (graph_center(ctx.model), ctx.model.edges.tobytes())  # identical on every rank
    kept = ctx.state.get("fos_tree")
    res = fos_distributed(ctx.nb, ctx.load, ctx.capacity, ctx.weights, latency=par[:, 0], bandwidth=par[:, 1],
                          root=key[0], tree=kept[1] if kept and kept[0] == key else None, **ctx.params)
    if res.extra["tree"] is not None:
        ctx.state["fos_tree"] = (key, res.extra["tree"])
    flow = flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, res.flows)
    return Decision(flow=flow, iterations=res.iterations, converged=res.converged, counters=res.counters,
                    info={"root": key[0], "stop": res.extra["stop"]})


REGISTRY: dict[str, BalancerInfo] = {
    "fos": BalancerInfo(
        "fos", _run_entry, dict(_DEFAULTS),
        "practical FOS of Jeannot & Vernier (001 §3): relative-speed matrix M_r (variant A|B), cost/benefit gate "
        "(k, null = off; k_schedule constant|decrement|halving), integer loads + shaker (kappa), spanning-tree "
        "detection; unit_bytes / unit_time price a load unit against the links' α-β",
        _serial_entry, _check_entry),
}
