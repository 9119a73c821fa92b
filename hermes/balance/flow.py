"""The exact minimal balancing flow (the oracle of every balancer) and the shared result types.

For a model H = (G, l, c, w) the unique balancing flow that minimises ``Σ_k f_k² / w_k`` is

    f* = W Aᵀ L⁺ (l − l̄),        L = A W Aᵀ,

(thesis Th. 19–20, eq. 8.1.5; JPDC Th. 1). Every diffusion, polynomial and PCG scheme of the thesis
computes exactly this flow (Th. 13/14/17/18/22), so tests compare them with :func:`minimal_flow`.
Its orientation is acyclic (Th. 21): :func:`topological_order` gives the order in which ranks can
migrate.

This module also holds what the balancer families share: :class:`FlowResult` (serial reference),
:class:`LocalFlowResult` (one rank of the distributed form), :func:`validate_model`,
:func:`agree_local_inputs` (the collective input check of the distributed forms), the
deterministic sum used by both forms, and :func:`alpha_beta_time`, which replays the α-β model of
:class:`hermes.runtime.clock.VirtualClock` for a known sequence of exchanges and collectives so that a
serial reference can report the time its distributed form would be charged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.balance.model import Model
from hermes.runtime.comm import Counters, NeighbourComm, gather_error
from hermes.errors import BalancerError, GraphError

__all__ = [
    "child_stream",
    "run_bulk",
    "BulkInputs",
    "bulk_inputs",
    "bulk_flow_results",
    "FlowResult",
    "LocalFlowResult",
    "minimal_flow",
    "flow_error",
    "check_balancing",
    "topological_order",
    "validate_model",
    "agree_local_inputs",
    "ordered_total",
    "neighbour_table",
    "ordered_row_sums",
    "alpha_beta_time",
]

_TINY = np.finfo(np.float64).tiny


@dataclass
class FlowResult:
    """Outcome of a serial balancer run (the reference of a distributed form).

    Attributes
    ----------
    flow : ndarray of float64, shape (q,)
        Flow on ``model.edges``; ``flow[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``.
    iterations : int
    converged : bool
    counters : hermes.runtime.comm.Counters
        What the distributed form reports: ``exchange_rounds`` and ``collectives`` per rank (the
        same on every rank), ``messages`` and ``bytes`` summed over the ranks, ``time`` the largest
        per-rank virtual time (0 without links).
    convergence_factor : float or None
        Second largest eigenvalue modulus of the iteration matrix, when the method has one.
    extra : dict
        Method-specific details (final loads, residual, ε, per-rank times, ...).
    """

    flow: NDArray[np.float64]
    iterations: int
    converged: bool
    counters: Counters
    convergence_factor: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class LocalFlowResult:
    """Outcome of a distributed balancer on one rank.

    Attributes
    ----------
    flows : ndarray of float64, shape (len(nb.neighbours),)
        Flow to each neighbour, aligned with ``nb.neighbours``; positive means this rank sends.
    iterations : int
    converged : bool
    counters : hermes.runtime.comm.Counters
        This rank's counters (``nb.counters``).
    extra : dict
        Method-specific details (final load, residual, ...).
    """

    flows: NDArray[np.float64]
    iterations: int
    converged: bool
    counters: Counters
    extra: dict[str, Any] = field(default_factory=dict)


# -- validation and shared helpers ------------------------------------------------------------
def validate_model(model: Model) -> None:
    """Raise :class:`GraphError` if the algorithms cannot work on ``model``.

    ``Model.create`` already rejects these, but a model built with ``check_connected=False`` or
    through the raw constructor reaches the balancers unchecked.

    Raises
    ------
    GraphError
        Disconnected processor graph, or a non-positive capacity or edge weight.
    """
    c = np.asarray(model.capacities, dtype=np.float64)
    if np.any(~np.isfinite(c)) or np.any(c <= 0):
        bad = int(np.flatnonzero(~(c > 0))[0]) if np.any(~(c > 0)) else int(np.flatnonzero(~np.isfinite(c))[0])
        raise GraphError(f"capacity of processor {bad} must be positive, got {c[bad]}")
    w = np.asarray(model.weights, dtype=np.float64)
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise GraphError("edge weights must be positive")
    if not model.is_connected:
        raise GraphError("processor graph is disconnected")


def input_error(nb: NeighbourComm, load: float, capacity: float, weights, *,
                extra_checks: Callable[[], object] | None = None) -> str | None:
    """What is wrong with one rank's balancer inputs (:func:`agree_local_inputs`' checks), as ``Kind|message``, or
    None."""
    nbrs = nb.neighbours
    w = np.asarray(weights, dtype=np.float64).ravel()
    error = None
    try:
        if extra_checks is not None:
            extra_checks()
        if w.shape != (len(nbrs),):
            raise GraphError(f"rank {nb.rank}: {w.size} edge weights for {len(nbrs)} neighbours")
        if np.any(~np.isfinite(w)) or np.any(w <= 0):
            raise GraphError(f"rank {nb.rank}: edge weights must be positive")
        if not (math.isfinite(capacity) and capacity > 0):
            raise GraphError(f"capacity of processor {nb.rank} must be positive, got {capacity}")
        if not (math.isfinite(load) and load >= 0):
            raise GraphError(f"load of processor {nb.rank} must be non-negative, got {load}")
        if nb.size > 1 and len(nbrs) == 0:
            raise GraphError(f"processor graph is disconnected: rank {nb.rank} has no neighbours")
    except (BalancerError, GraphError) as err:
        error = f"{type(err).__name__}|{err}"
    return error


def agree_local_inputs(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], *,
                       extra_checks: Callable[[], object] | None = None) -> float:
    """Check one rank's balancer inputs, agree on them collectively and return ``Σ l`` over all ranks.

    The common start of every distributed balancer (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load, capacity : float
        This rank's load l_i ≥ 0 and capacity c_i > 0.
    weights : ndarray, shape (len(nb.neighbours),)
        Weight of the edge to each neighbour (finite, positive).
    extra_checks : callable, optional
        Run first; may raise :class:`BalancerError` or :class:`GraphError` (e.g. for bad ε, ``tol``
        or ``max_iter``), which is then agreed like the checks made here.

    Returns
    -------
    float
        The total load ``Σ_r l_r`` (the first component of the allreduce, unconverted).

    Raises
    ------
    BalancerError, GraphError
        On every rank, the first failing rank's error, if any rank has bad parameters.

    Notes
    -----
    Communication: one allreduce (sum) of the 2-vector (l_i, error flag); only if some rank failed,
    additionally one allgather of the error messages (:func:`hermes.runtime.comm.gather_error`).
    """
    error = input_error(nb, load, capacity, weights, extra_checks=extra_checks)
    total, bad = nb.allreduce(np.array([float(load) if error is None else 0.0, float(error is not None)]))
    if bad > 0:
        raise_input_error(nb, error)
    return total


def raise_input_error(nb: NeighbourComm, error: str | None) -> None:
    """Raise the first rank's input error on every rank (collective: the ranks agreed that one failed)."""
    msg = gather_error(nb.comm, error) or "GraphError|invalid balancer input on another rank"
    kind, _, text = msg.partition("|")
    raise (BalancerError if kind == "BalancerError" else GraphError)(text)


def run_bulk(nb: NeighbourComm, name: str, part: tuple, kernel: Callable[[Any, list], Any]) -> LocalFlowResult:
    """Run ``kernel`` once per MPI process for the processors it hosts (:meth:`Communicator.bulk`, ``part``: this
    processor's ``(nb, load, capacity, weights, *params)``) and return this processor's result; an input that was
    bad on some processor (:func:`bulk_inputs`) raises on every one, as :func:`agree_local_inputs` does."""
    out = nb.comm.bulk(name, part, kernel)
    if isinstance(out, tuple):
        raise_input_error(nb, out[1])
    return out


@dataclass
class BulkInputs:
    """The checked inputs of a bulk kernel's processors: their banked neighbours, loads, capacities, concatenated
    edge weights and the total load (the input check's allreduce)."""

    bn: Any
    nbs: list
    loads: NDArray[np.float64]
    caps: NDArray[np.float64]
    weights: NDArray[np.float64]
    total: Any


def bulk_inputs(group, parts: list, extra_checks: Callable[..., object] | None = None) -> BulkInputs | list:
    """The start every bulk kernel shares: each processor's :func:`input_error` (with ``extra_checks(*params)``
    on its ``parts`` entry ``(nb, load, capacity, weights, *params)``), then one allreduce of the loads of the
    processors without an error and the count of those with one — :func:`agree_local_inputs`' collective for all the
    processors of the process. Returns the inputs, or (after storing the clocks) every processor's
    ``("error", message)`` when some processor's input was bad."""
    from hermes.runtime.bulk import BankedNeighbours

    nbs = [pt[0] for pt in parts]
    bn = BankedNeighbours(group, nbs)
    errors = [input_error(pt[0], pt[1], pt[2], pt[3],
                          extra_checks=None if extra_checks is None else (lambda pt=pt: extra_checks(*pt[4:])))
              for pt in parts]
    loads = np.array([pt[1] for pt in parts])
    total, bad = bn.allreduce(np.column_stack((np.where([e is None for e in errors], loads, 0.0),
                                               [float(e is not None) for e in errors])))
    if bad > 0:
        bn.store()
        return [("error", e) for e in errors]
    weights = np.concatenate([pt[3] for pt in parts]) if parts else np.zeros(0)
    return BulkInputs(bn, nbs, loads, np.array([pt[2] for pt in parts]), weights, total)


def bulk_flow_results(inputs: BulkInputs, flows: NDArray[np.float64], iterations: int,
                      extra: Callable[[int], dict[str, Any]]) -> list:
    """Every processor's :class:`LocalFlowResult` from the concatenated ``flows`` (its slice, converged where finite;
    ``extra(i)`` its extra values), its counters' iterations set."""
    bn, res = inputs.bn, []
    for i, nb in enumerate(inputs.nbs):
        nb.counters.iterations = iterations
        f = flows[bn.ptr[i]:bn.ptr[i + 1]].copy()
        res.append(LocalFlowResult(flows=f, iterations=iterations, converged=bool(np.all(np.isfinite(f))),
                                   counters=nb.counters, extra=extra(i)))
    return res


def child_stream(seed, k: int) -> np.random.Generator:
    """The generator of child ``k`` of ``SeedSequence(seed)``: the stream of ``SeedSequence(seed).spawn(n)[k]``
    for any n > k, bit for bit, without making the n children (a rank that took its own of p children made
    all p of them: p² seed sequences per balancing over a process' ranks)."""
    root = np.random.SeedSequence(seed)
    return np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, k),
                                                        pool_size=root.pool_size))


def ordered_total(x: NDArray[np.float64]) -> float:
    """``Σ x_r`` accumulated in rank order, bit for bit what :func:`hermes.runtime.comm.allreduce` returns."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.cumsum(x)[-1]) if x.size else 0.0


def neighbour_table(model: Model) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Padded per-rank neighbour tables in sorted neighbour order (the order of ``NeighbourComm``).

    Returns
    -------
    nbr : ndarray of int64, shape (p, Δ)
        ``nbr[i, t]`` is the t-th neighbour of i (padding: i itself).
    edge : ndarray of int64, shape (p, Δ)
        Index of the edge {i, nbr[i, t]} in ``model.edges`` (padding: 0).
    sign : ndarray of float64, shape (p, Δ)
        +1 where i is the tail ``edges[k, 0]``, −1 where it is the head, 0 on padding.

    Notes
    -----
    Serial references accumulate per-rank sums column by column over this table, which adds the
    terms in the same order as a rank looping over its sorted neighbours: the serial and the
    distributed forms then agree bit for bit.
    """
    p, e = model.p, model.edges
    q = len(e)
    tail = np.concatenate([e[:, 0], e[:, 1]])
    head = np.concatenate([e[:, 1], e[:, 0]])
    kk = np.concatenate([np.arange(q), np.arange(q)])
    sg = np.concatenate([np.ones(q), -np.ones(q)])
    order = np.lexsort((head, tail))
    tail, head, kk, sg = tail[order], head[order], kk[order], sg[order]
    deg = np.bincount(tail, minlength=p)
    width = int(deg.max()) if p and q else 0
    start = np.concatenate(([0], np.cumsum(deg)[:-1]))
    col = np.arange(len(tail)) - start[tail]
    nbr = np.tile(np.arange(p, dtype=np.int64)[:, None], (1, width))
    edge = np.zeros((p, width), dtype=np.int64)
    sign = np.zeros((p, width), dtype=np.float64)
    nbr[tail, col] = head
    edge[tail, col] = kk
    sign[tail, col] = sg
    return nbr, edge, sign


def ordered_row_sums(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row sums of a (p, Δ) table accumulated column by column (0.0 + t0 + t1 + ...)."""
    acc = np.zeros(table.shape[0])
    for t in range(table.shape[1]):
        acc = acc + table[:, t]
    return acc


# -- the oracle --------------------------------------------------------------------------------
def minimal_flow(model: Model) -> NDArray[np.float64]:
    """The minimal balancing flow ``f* = W Aᵀ L⁺ (l − l̄)`` (thesis Th. 19–20).

    Parameters
    ----------
    model : Model

    Returns
    -------
    ndarray of float64, shape (q,)
        ``f*[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``; ``A f* = l − l̄``.

    Raises
    ------
    GraphError
        If the model is disconnected or has a non-positive capacity or weight.

    Notes
    -----
    ``L y = b`` with ``b = l − l̄ ⊥ 1`` is solved by grounding the last processor (``y_{p−1} = 0``):
    the reduced Laplacian is symmetric positive definite and, because ``Σ b = 0``, the dropped
    equation holds automatically (sparse LU with a minimum-degree ordering). The flow
    ``f = W Aᵀ y`` does not depend on the constant added to ``y``; two refinement steps
    ``f ← f + W Aᵀ L⁺ (b − A f)`` reduce the balancing defect to round-off (the corrections stay in
    the range of ``W Aᵀ``, so the flow stays minimal). This is eq. (8.1.5) with the
    potential ``u* = D^{-1/2} v*`` of problem (8.1.4).
    """
    validate_model(model)
    if model.p == 1 or model.q == 0:
        return np.zeros(model.q)
    import scipy.sparse.linalg as spla

    b = model.loads - model.fair_loads
    lap = model.laplacian.tocsc()
    m = model.p - 1
    red = lap[:m, :m].tocsc()
    lu = spla.splu(red, permc_spec="MMD_AT_PLUS_A", options={"SymmetricMode": True})
    e, w, a = model.edges, model.weights, model.incidence
    f = np.zeros(model.q)
    for _ in range(3):  # solve, then refine the balancing defect b − A f twice
        d = b - a @ f
        y = np.zeros(model.p)
        y[:m] = lu.solve(d[:m])
        f = f + w * (y[e[:, 0]] - y[e[:, 1]])
    return f


def flow_error(model: Model, flow: NDArray[np.float64]) -> float:
    """Relative distance ``‖f − f*‖₂ / max(‖f*‖₂, tiny)`` to the minimal flow."""
    ref = minimal_flow(model)
    return float(np.linalg.norm(np.asarray(flow, dtype=np.float64) - ref) / max(np.linalg.norm(ref), _TINY))


def check_balancing(model: Model, flow: NDArray[np.float64]) -> float:
    """Relative balancing defect ``‖A f − (l − l̄)‖₂ / max(‖l − l̄‖₂, ‖l‖₂ ε_mach, tiny)``.

    A value near machine precision means ``flow`` is a balancing flow.
    """
    b = model.loads - model.fair_loads
    defect = model.incidence @ np.asarray(flow, dtype=np.float64) - b
    scale = max(float(np.linalg.norm(b)), float(np.linalg.norm(model.loads)) * np.finfo(float).eps, _TINY)
    return float(np.linalg.norm(defect) / scale)


def topological_order(model: Model, flow: NDArray[np.float64], tol: float | None = None) -> list[NDArray[np.int64]]:
    """Rank levels of the flow digraph, for migrating in topological order (thesis Th. 21).

    Parameters
    ----------
    model : Model
    flow : ndarray of float64, shape (q,)
    tol : float, optional
        Edges with ``|flow| ≤ tol`` carry no flow. Default ``1e-9 · max |flow|``.

    Returns
    -------
    list of int64 arrays
        ``levels[0]`` are the ranks with no incoming flow; a rank's level is one more than the
        largest level of the ranks sending to it. Every rank appears exactly once.

    Raises
    ------
    GraphError
        If the oriented edges contain a directed cycle.

    Notes
    -----
    Edge k is oriented ``edges[k,0] → edges[k,1]`` when ``flow[k] > tol`` and the other way when
    ``flow[k] < −tol``. Kahn's algorithm processed frontier by frontier yields the longest-path
    layering. For the minimal flow ``f*_k = w_k (y_i − y_j)`` the orientation follows decreasing
    potential ``y``, hence is acyclic (Th. 21).
    """
    f = np.asarray(flow, dtype=np.float64)
    if f.shape != (model.q,):
        raise ValueError(f"flow has shape {f.shape}, expected ({model.q},)")
    if tol is None:
        tol = 1e-9 * (float(np.max(np.abs(f))) if f.size else 0.0)
    e = model.edges
    pos, neg = f > tol, f < -tol
    src = np.concatenate([e[pos, 0], e[neg, 1]])
    dst = np.concatenate([e[pos, 1], e[neg, 0]])
    p = model.p
    indeg = np.bincount(dst, minlength=p)
    out = sp.csr_array((np.ones(len(src)), (src, dst)), shape=(p, p)) if len(src) else sp.csr_array((p, p))
    levels: list[NDArray[np.int64]] = []
    frontier = np.flatnonzero(indeg == 0)
    done = 0
    while frontier.size:
        levels.append(frontier.astype(np.int64))
        done += frontier.size
        sub = out[frontier]
        hit = np.bincount(sub.indices, minlength=p)  # arcs from the frontier into each rank
        was = indeg > 0
        indeg = indeg - hit
        frontier = np.flatnonzero(was & (indeg == 0))
    if done != p:
        raise GraphError(f"flow orientation has a cycle through {p - done} ranks")
    return levels


# -- α-β time of a known communication schedule ------------------------------------------------
def alpha_beta_time(model: Model, links, schedule: Iterable[tuple[int, Sequence[tuple[str, int]]]]
                    ) -> NDArray[np.float64]:
    """Per-rank virtual time of a communication schedule, as :class:`~hermes.runtime.clock.VirtualClock` charges it.

    Parameters
    ----------
    model : Model
        Its graph gives the neighbour exchanges (one message per direction of every edge).
    links : hermes.runtime.clock.Links
    schedule : iterable of (repeat, block)
        ``block`` is a sequence of events ``("exchange", words)`` (every rank sends ``words``
        float64 to each neighbour) or ``("allreduce", words)``; each block is played ``repeat``
        times, in order.

    Returns
    -------
    ndarray of float64, shape (p,)
        The time each rank's clock advanced (its ``counters.time``), starting from all zero.

    Notes
    -----
    Exchange on rank i: ``t_i ← max(t_i + max_j (α_ij + β_ij b), max_j (t_j + α_ji + β_ji b))``
    (own sends overlap, then wait for the last arrival). Allreduce:
    ``t ← max_r t_r + ⌈log2 p⌉ (α + β b)`` on the default link. A block that starts from equal
    clocks and ends with an allreduce leaves equal clocks advanced by the same amount, so repeats of
    it cost one simulation.
    """
    e = model.edges
    p = model.p
    src = np.concatenate([e[:, 0], e[:, 1]])
    dst = np.concatenate([e[:, 1], e[:, 0]])
    params = np.array([links.params(int(i), int(j)) for i, j in e.tolist()], dtype=np.float64).reshape(-1, 2)
    alpha = np.concatenate([params[:, 0], params[:, 0]])
    bw = np.concatenate([params[:, 1], params[:, 1]])

    def exchange(t: NDArray[np.float64], words: int) -> NDArray[np.float64]:
        cost = alpha + 8.0 * words / bw
        own = np.zeros(p)
        np.maximum.at(own, src, cost)
        last = np.full(p, -np.inf)
        np.maximum.at(last, dst, t[src] + cost)
        return np.maximum(t + own, last)

    def allreduce(t: NDArray[np.float64], words: int) -> NDArray[np.float64]:
        return np.full(p, float(np.max(t)) + links.collective_cost(p, 8.0 * words))

    t = np.zeros(p)
    for repeat, block in schedule:
        if repeat <= 0 or not block:
            continue
        ends_sync = block[-1][0] == "allreduce"
        for r in range(int(repeat)):
            uniform = bool(np.all(t == t[0]))
            t0 = t.copy()
            for kind, words in block:
                t = exchange(t, words) if kind == "exchange" else allreduce(t, words)
            if uniform and ends_sync and r + 1 < repeat:
                t = t + (repeat - r - 1) * (t[0] - t0[0])
                break
    return t
