"""The practical FOS of Jeannot & Vernier serially: relative-speed matrix, cost/benefit gate, shaker, detection.

The serial reference of :func:`~hermes.balance.diffusion.fos.fos_distributed` (the algorithm, its parameters and
how the α-β link model enters are described in :mod:`hermes.balance.diffusion.fos`): :func:`fos_iter` runs every
rank at once on the processor graph with the same arithmetic and
random streams (bit-identical flows), replaying the messages on per-rank α-β clocks when links are given;
:func:`program_time` prices a run as 001 §4.2 does. The parameter checks, M_r and the gate are shared with
the distributed form.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field, model_validator

from hermes.balance.diffusion.detection import Replay, bfs_tree, edge_costs, fos_counters
from hermes.balance.flow import FlowResult, neighbour_table, ordered_row_sums, ordered_total, validate_model
from hermes.balance.interface import Flag, NonNegative, Params, Positive, Seed, StopTolerance, integer_type, number_type
from hermes.balance.model import Model
from hermes.errors import BalancerError

__all__ = ["DEFAULT_KAPPA", "FOSParams", "relative_speed_matrix", "FOSState", "fos_iter", "fos", "program_time"]

#: κ = −ln(p)/τ for p = ½ at τ = 2 (001 §3.3.1's example; the printed ln(0.5)/2 has the wrong sign)
DEFAULT_KAPPA = -math.log(0.5) / 2


class FOSParams(Params):
    """Parameters of ``fos`` (001 §3; defaults: variant B, the decrement schedule, tree detection)."""

    variant: Literal["A", "B"] = Field("B", description="relative-speed matrix M_r without (A) or with (B) self term")
    k: Positive | None = Field(1000.0, description="cost/benefit factor (null: no gate)")
    k_schedule: Literal["constant", "decrement", "halving"] = Field("decrement", description="how k changes")
    integer: Flag = Field(False, description="integer loads")
    shaker: Flag = Field(False, description="random unit moves against stalls (needs integer)")
    kappa: Positive = Field(DEFAULT_KAPPA, description="shaker probability e^{−κU} (κ = −ln(p)/τ)")
    detection: Flag = Field(True, description="spanning-tree convergence detection")
    tolerance: StopTolerance = Field(1e-3, description="relative residual to stop at (0: run max_iterations)")
    max_iterations: integer_type(ge=0) = Field(1000, description="iteration limit")
    seed: Seed = Field(0, description="shaker's random stream")
    unit_bytes: NonNegative = Field(64.0, description="bytes one load unit costs to move")
    unit_time: Positive = Field(1e-6, description="seconds one load unit costs to compute")

    @model_validator(mode="after")
    def _together(self):
        if self.shaker and not self.integer:
            raise ValueError("the shaker needs integer loads (integer: true)")
        if self.k is not None and self.k_schedule == "halving" and not self.detection:
            raise ValueError("k_schedule 'halving' needs detection (the iteration time travels on its tree)")
        return self


@dataclass(frozen=True)
class FOSConfig:
    """What both ends of a pair need to evaluate its FOS transfer identically."""

    integer: bool
    gate: bool
    thresh: float  # dead band of real loads on w_s/c_s − w_r/c_r
    unit_bytes: float


def benefit(ws, wr, gs, gr, amount):
    """001 eq. (4), single form: ``max(Cmp_s(w_s), Cmp_r(w_r)) − max(Cmp_s(w_s − L), Cmp_r(w_r + L))``."""
    return np.maximum(ws * gs, wr * gr) - np.maximum((ws - amount) * gs, (wr + amount) * gr)


@dataclass(frozen=True)
class Pairs:
    """The two ends of each pair (sender s, receiver r) as :func:`fos_amounts` reads them, one entry per pair:
    loads ``ws``, ``wr``, capacities ``cs``, ``cr`` and seconds per load unit ``gs``, ``gr`` (Cmp(w) = w g)."""

    ws: NDArray[np.float64]
    wr: NDArray[np.float64]
    cs: NDArray[np.float64]
    cr: NDArray[np.float64]
    gs: NDArray[np.float64]
    gr: NDArray[np.float64]


def fos_amounts(amount, ends: Pairs, k: float, lat, bw, cfg: FOSConfig):
    """FOS transfer sender → receiver of each pair, evaluated from the sender's side at both ends.

    ``amount`` is M_r's transfer of each pair, ``ends`` its sender's and receiver's data, ``k`` the gate factor,
    ``lat``, ``bw`` the latency and bandwidth of its link."""
    x = np.floor(amount) if cfg.integer else np.where(ends.ws / ends.cs - ends.wr / ends.cr > cfg.thresh, amount, 0.0)
    if cfg.gate:
        x = np.where(lat + x * cfg.unit_bytes / bw < k * benefit(ends.ws, ends.wr, ends.gs, ends.gr, x), x, 0.0)
    return x


def fos_delta(cr_sum: float, variant: str) -> float:
    s = cr_sum + 0.5 if variant == "B" else cr_sum
    return 1.0 / s if s > 0 else math.inf


def _mr_edges(model: Model, variant: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(Mr_ab, Mr_ba) on every edge (a, b) = ``model.edges[k]``."""
    nbr, _, sign = neighbour_table(model)
    c = model.capacities
    crsum = ordered_row_sums(np.where(sign != 0, c[nbr] / (c[:, None] + c[nbr]), 0.0))
    delta = np.array([fos_delta(float(s), variant) for s in crsum])
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


def fos_iter(model: Model, params: FOSParams | None = None, *, links=None, root: int = 0,
             build_tree: bool = True) -> Iterator[FOSState]:
    """Run the practical FOS serially, yielding the state after every iteration (iteration 0 first).

    Parameters
    ----------
    model : Model
    params : FOSParams, optional
        The parameters below (default: ``FOSParams()``; from raw values: ``FOSParams.of(k=None, ...)``).
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
    links : hermes.runtime.clock.Links, optional
        Link α-β: the gate's costs and the per-rank times.
    root, build_tree
        Root of the detection tree; whether its distributed BFS is counted (False: a tree kept from an
        earlier call, as the registry does across phases).

    Raises
    ------
    BalancerError
        A bad root, or non-integral loads with ``integer``. GraphError for an unusable model.

    Notes
    -----
    Iteration (001 §3.1–3.3; eq. 3 with f_ij ∈ {0, 1}), every pair {i, j}: ``L = Mr_ij w_i − Mr_ji w_j``;
    the sender s (``L > 0``) moves ``x = ⌊L⌋`` (integer) or L (real, outside the dead band) to r iff
    ``α_sr + x·unit_bytes/B_sr < k·Benefit(x)``, Benefit in the single form of :func:`benefit` (the
    printed L < 0 case has a sign error). Shaker: ``U_ij`` counts successive iterations in which the
    pair was unbalanced (moving one unit from s does not raise the pair's larger Cmp) and FOS did not
    move; s then draws ``alea`` from its own stream (``SeedSequence(seed).spawn(p)[s]``) and moves one
    unit if ``alea < e^{−κU}`` and it still has the load. A shaken unit does not reset U (else the
    swap back happens at once with probability 1); an FOS transfer or balance does. Detection: with
    ``t_s`` the first iteration in which no rank moved load and h the tree height, everyone stops after
    iteration ``t_s + 2h − 1`` (``t_s`` if h = 0); see :func:`fos_distributed`.
    """
    validate_model(model)
    prm = FOSParams() if params is None else params
    variant, k, k_schedule, integer, shaker = prm.variant, prm.k, prm.k_schedule, prm.integer, prm.shaker
    kappa, detection, tolerance, max_iterations, seed = prm.kappa, prm.detection, prm.tolerance, prm.max_iterations, \
        prm.seed
    unit_bytes, unit_time = prm.unit_bytes, prm.unit_time
    p, e, c = model.p, model.edges, model.capacities
    if not (isinstance(root, (int, np.integer)) and 0 <= root < p):
        raise BalancerError(f"root must be a rank in 0..{p - 1}, got {root!r}")
    if integer and not np.all(model.loads == np.floor(model.loads)):
        raise BalancerError("integer mode needs integral loads")
    cfg = FOSConfig(bool(integer), k is not None, tolerance / max(p - 1, 1) * ordered_total(model.loads),
                  float(unit_bytes))
    halving = cfg.gate and k_schedule == "halving"
    mab, mba = _mr_edges(model, variant)
    g = unit_time / (p * c)
    lat, bw = edge_costs(model, links)
    nbr, edge, sign = neighbour_table(model)
    mask = sign != 0
    a, b = e[:, 0], e[:, 1]
    parent, depth = bfs_tree(model, int(root))
    h = int(depth.max())
    tree = (parent[b] == a) | (parent[a] == b)
    rep = Replay(model, links) if links is not None else None
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
        x = fos_amounts(amount, Pairs(loads[s], loads[r], c[s], c[r], g[s], g[r]), kk, lat, bw, cfg)
        if shaker:
            unbal = (amount > 0) & (benefit(loads[s], loads[r], g[s], g[r], 1.0) >= 0)
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
    """The practical FOS (001 §3), serial reference of :func:`fos_distributed`; parameters of :func:`fos_iter`
    (``params``: the fields of :class:`FOSParams`, validated here).

    Returns
    -------
    FlowResult
        ``converged``: detection stopped the run (always False without detection).
        ``convergence_factor``: second largest eigenvalue modulus of M_r (1 for variant A on a bipartite
        graph). ``extra``: ``loads``, ``k``, ``stop``, ``t_stable`` (first iteration without transfers),
        ``root``, ``height``, ``transfers`` (pair transfers made), ``detection_messages``, ``rank_times``.
    """
    o = FOSParams.of(params)
    state, t_s, transfers = None, None, 0
    for state in fos_iter(model, o, links=links, root=root, build_tree=build_tree):
        transfers += int(np.count_nonzero(state.step))
        t_s = state.iteration if t_s is None and state.iteration > 0 and state.quiet.all() else t_s
    assert state is not None
    h = int(bfs_tree(model, root)[1].max())
    counters, det = fos_counters(model, state.iteration, detection=o.detection, shaker=o.shaker,
                                 halving=o.k is not None and o.k_schedule == "halving", height=h,
                                 build_tree=build_tree)
    counters.time = float(np.max(state.times))
    factor = None
    if compute_factor:
        from hermes.balance.diffusion.spectral import convergence_factor

        factor = convergence_factor(relative_speed_matrix(model, o.variant).T, model.capacities)
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.stop == state.iteration,
                      counters=counters, convergence_factor=factor,
                      extra={"loads": state.loads, "k": state.k, "stop": state.stop, "t_stable": t_s, "root": root,
                             "height": h, "transfers": transfers, "detection_messages": det,
                             "rank_times": state.times if links is not None else None})


def program_time(model: Model, states: Iterable[FOSState], app_iterations: int, *, unit_time: float = 1e-6,
                 unit_bytes: float = 64.0, links=None) -> float:
    """Run time of 001 §4.2's synchronous iterative program balanced by ``states`` (from :func:`fos_iter`).

    ``T = t_msg + Σ_{t ≤ n} max_k Cost(x_k^{(t)}) + Σ_{s=1}^{N} max_i Cmp_i(w_i^{(min(s, n))})``: the balancer's
    messages (largest per-rank α-β clock), the load moved in each of its n iterations (slowest link used)
    and N application iterations, the s-th after balancing step s (one step per program iteration, as
    in the paper). The gain of an algorithm 2 over an algorithm 1 is ``(T1 − T2)/T1``.
    """
    lat, bw = edge_costs(model, links)
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
