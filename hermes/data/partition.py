"""Static partitioning with METIS (target fractions per part) and relabelling by maximum overlap.

:func:`metis_partition` computes an initial distribution (and the "scratch" repartitioning of the
``metis`` balancer) with part sizes proportional to processor capacities; :func:`remap` relabels a
new partition so that as much work as possible stays on its current processor (scratch-remap,
Oliker & Biswas 1998; Schloegel, Karypis & Kumar 2001).
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import GraphError, MeshError

__all__ = ["metis_partition", "remap", "metis_vertex_weights"]

log = logging.getLogger(__name__)

#: Upper bound on the total integer vertex weight handed to METIS (headroom below 2**31 for
#: 32-bit ``idx_t`` builds and for METIS' internal sums such as ``ubfactor * total``).
WEIGHT_TOTAL_CAP = 2**30
#: Integer units given to the smallest weight when weights are not integer multiples of it.
WEIGHT_RESOLUTION = 1000


def metis_vertex_weights(weights: ArrayLike) -> NDArray[np.int64]:
    """Positive integer vertex weights for METIS, proportional to float ``weights``.

    Parameters
    ----------
    weights : array_like of float
        Positive finite weights.

    Returns
    -------
    ndarray of int64
        If every ``w / w.min()`` is an integer and their sum is at most :data:`WEIGHT_TOTAL_CAP`,
        exactly ``w / w.min()`` (unit weights stay 1). Otherwise ``max(1, round(w * s))`` with
        ``s = min(WEIGHT_RESOLUTION / w.min(), WEIGHT_TOTAL_CAP / w.sum())``: the smallest weight
        gets up to 1000 units (relative rounding error ≤ 0.05 %), and the total stays ≤ 2**30 (plus at
        most one unit per vertex from the ``max(1, ·)``), so it fits a 32-bit ``idx_t`` with room for
        METIS' internal sums. Under the cap, weights below ``1 / s`` are raised to 1 unit.
    """
    w = np.asarray(weights, dtype=np.float64)
    q = w / w.min()
    rq = np.round(q)
    if np.all(np.abs(q - rq) <= 1e-9 * q) and rq.sum() <= WEIGHT_TOTAL_CAP:
        return rq.astype(np.int64)
    s = min(WEIGHT_RESOLUTION / w.min(), WEIGHT_TOTAL_CAP / w.sum())
    return np.maximum(1, np.round(w * s)).astype(np.int64)


def _check_graph(xadj: ArrayLike, adjncy: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    xadj = np.ascontiguousarray(xadj, dtype=np.int64)
    adjncy = np.ascontiguousarray(adjncy, dtype=np.int64)
    n = xadj.size - 1
    if n < 1 or xadj[0] != 0 or xadj[-1] != adjncy.size or np.any(np.diff(xadj) < 0):
        raise GraphError("malformed CSR adjacency (xadj, adjncy) for partitioning")
    if adjncy.size and (adjncy.min() < 0 or adjncy.max() >= n):
        raise GraphError(f"neighbour index out of range 0..{n - 1} in the graph to partition")
    return xadj, adjncy, n


def _fill_empty_parts(owner: NDArray[np.int64], w: NDArray[np.float64], nparts: int) -> int:
    """Give every empty part one vertex, in place; returns the number of parts filled.

    For each empty part in increasing order: among the parts with at least two vertices take the
    heaviest (lowest label on ties), and move its lightest vertex (lowest id on ties).
    """
    filled = 0
    for p in np.flatnonzero(np.bincount(owner, minlength=nparts) == 0):
        counts = np.bincount(owner, minlength=nparts)
        load = np.bincount(owner, weights=w, minlength=nparts)
        load[counts < 2] = -np.inf
        donor = int(np.argmax(load))
        members = np.flatnonzero(owner == donor)
        owner[members[np.argmin(w[members])]] = p
        filled += 1
    return filled


def metis_partition(
    xadj: ArrayLike,
    adjncy: ArrayLike,
    weights: ArrayLike | None,
    nparts: int,
    *,
    targets: ArrayLike | None = None,
    seed: int = 0,
    ufactor: int = 30,
    edge_weights: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """Partition a graph into ``nparts`` parts of prescribed weight fractions with METIS.

    Parameters
    ----------
    xadj, adjncy : array_like of int
        Symmetric CSR adjacency without self loops (``Mesh.xadj``, ``Mesh.adjncy``).
    weights : array_like of float or None
        Positive work per vertex (None: unit weights), converted by :func:`metis_vertex_weights`.
    nparts : int
        Number of parts (processors), ``1 ≤ nparts ≤ n``.
    targets : array_like of float, optional
        Positive fraction of the total weight wanted in each part (``tpwgts``), normalised to sum 1;
        None means equal parts. For heterogeneous processors these are the capacities.
    seed : int
        METIS random seed (``METIS_OPTION_SEED``); the result is deterministic for a given seed.
    ufactor : int
        Allowed load imbalance in tenths of a percent (``METIS_OPTION_UFACTOR``; 30 = 3 %).
    edge_weights : array_like of float, optional
        Positive weight per CSR entry (symmetric), rounded like the vertex weights (smallest → 1).

    Returns
    -------
    ndarray of int64, shape (n,)
        The part (owner) of every vertex; every part is non-empty.

    Raises
    ------
    GraphError
        ``nparts < 1``, malformed graph, weights or targets of the wrong length, non-positive or
        non-finite weights or targets.
    MeshError
        ``nparts > n``: more processors than cells.

    Notes
    -----
    Calls ``pymetis.part_graph(nparts, adjacency=CSRAdjacency(xadj, adjncy), vweights, eweights,
    tpwgts, options=Options(ufactor, contig=0, seed))`` (multilevel k-way for ``nparts > 8``,
    recursive bisection otherwise, pymetis' default). ``nparts == 1`` returns zeros without METIS.
    METIS can leave a part empty on tiny or very unevenly weighted graphs; each empty part then
    receives the lightest vertex of the heaviest part that has at least two vertices, so the result
    is always a valid distribution (deterministically).
    """
    xadj, adjncy, n = _check_graph(xadj, adjncy)
    if isinstance(nparts, bool) or not isinstance(nparts, (int, np.integer)) or nparts < 1:
        raise GraphError(f"number of parts must be a positive integer, got {nparts!r}")
    nparts = int(nparts)
    if nparts > n:
        raise MeshError(f"more processors ({nparts}) than cells ({n})")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise GraphError(f"vertex weights must be {n} positive finite numbers")
    tp = None
    if targets is not None:
        tp = np.asarray(targets, dtype=np.float64)
        if tp.shape != (nparts,) or not np.all(np.isfinite(tp)) or np.any(tp <= 0):
            raise GraphError(f"target fractions must be {nparts} positive finite numbers")
        tp = tp / tp.sum()
    ew = None
    if edge_weights is not None:
        e = np.asarray(edge_weights, dtype=np.float64)
        if e.shape != adjncy.shape or not np.all(np.isfinite(e)) or np.any(e <= 0):
            raise GraphError(f"edge weights must be {adjncy.size} positive finite numbers")
        ew = metis_vertex_weights(e) if e.size else None
    if nparts == 1:
        return np.zeros(n, dtype=np.int64)

    import pymetis

    vw = metis_vertex_weights(w)
    result = pymetis.part_graph(
        nparts,
        adjacency=pymetis.CSRAdjacency(xadj, adjncy),
        vweights=vw,
        eweights=ew,
        tpwgts=None if tp is None else tp.tolist(),
        options=pymetis.Options(ufactor=int(ufactor), contig=0, seed=int(seed)),
    )
    owner = np.array(result.vertex_part, dtype=np.int64)
    filled = _fill_empty_parts(owner, w, nparts)
    if filled:
        log.debug("METIS left %d of %d parts empty; filled with one vertex each", filled, nparts)
    return owner


def remap(
    old_owner: ArrayLike,
    new_owner: ArrayLike,
    weights: ArrayLike | None,
    nparts: int,
    *,
    targets: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """Relabel the parts of ``new_owner`` so that the most weight stays on its old owner.

    With heterogeneous ``targets`` (the part fractions the partition was computed for), a part is
    only relabelled to a rank with the same target: otherwise a part sized for a fast processor could
    land on a slow one.

    Parameters
    ----------
    old_owner, new_owner : array_like of int, shape (n,)
        Current and newly computed part of every vertex, labels in ``0..nparts-1``.
    weights : array_like of float or None
        Weight (migration volume) of every vertex; None counts vertices.
    nparts : int
        Number of parts.

    Returns
    -------
    ndarray of int64, shape (n,)
        ``perm[new_owner]`` for the label permutation ``perm`` that maximises the weight with
        ``perm[new_owner[v]] == old_owner[v]``; the parts themselves are unchanged.

    Raises
    ------
    GraphError
        Shapes differ, labels out of range, or weights not finite and non-negative.

    Notes
    -----
    With overlap ``M[p, q] = Σ {w_v : new_owner[v] = p, old_owner[v] = q}`` (one ``bincount``), the
    permutation is a maximum-weight perfect matching of the bipartite overlap graph, solved exactly
    by ``scipy.optimize.linear_sum_assignment(M, maximize=True)`` — the optimal variant of the
    greedy remapping of Oliker & Biswas (1998).
    """
    from scipy.optimize import linear_sum_assignment

    old = np.asarray(old_owner, dtype=np.int64)
    new = np.asarray(new_owner, dtype=np.int64)
    if old.ndim != 1 or old.shape != new.shape:
        raise GraphError(f"old and new owners must be equal-length vectors, got {old.shape} and {new.shape}")
    nparts = int(nparts)
    if nparts < 1:
        raise GraphError(f"number of parts must be positive, got {nparts}")
    for name, owner in (("old", old), ("new", new)):
        if owner.size and (owner.min() < 0 or owner.max() >= nparts):
            raise GraphError(f"{name} owner labels must lie in 0..{nparts - 1}")
    w = np.ones(old.size) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != old.shape or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise GraphError(f"weights must be {old.size} finite non-negative numbers")
    overlap = np.bincount(new * nparts + old, weights=w, minlength=nparts * nparts).reshape(nparts, nparts)
    if targets is not None:
        # part p was sized for targets[p]: it may only take the label of a rank with the same target
        t = np.asarray(targets, dtype=np.float64)
        if t.shape != (nparts,):
            raise GraphError(f"need {nparts} targets, got {t.size}")
        same = np.isclose(t[:, None], t[None, :], rtol=1e-9, atol=0.0)
        overlap = np.where(same, overlap, -1.0 - overlap.sum())
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    perm = np.empty(nparts, dtype=np.int64)
    perm[rows] = cols
    return perm[new]
