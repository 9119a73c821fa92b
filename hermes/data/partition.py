"""Static partitioning with METIS (target fractions per part) and relabelling by maximum overlap.

:func:`metis_partition` computes an initial distribution (and the "scratch" repartitioning of the
``metis`` balancer) with part sizes proportional to processor capacities; :func:`remap` relabels a
new partition so that as much work as possible stays on its current processor (scratch-remap,
Oliker & Biswas 1998; Schloegel, Karypis & Kumar 2001).
"""

from __future__ import annotations

import functools
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
    constraints: ArrayLike | None = None,
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
    constraints : array_like of float, shape (n, k), optional
        Further vertex weights to balance at once (``mesh.constraint: all``): non-negative, a zero stays zero.
        METIS' multi-constraint k-way partitioning (``ncon = k + 1``, every constraint within ``ufactor`` and
        split by the same ``targets``), called in the METIS that pymetis bundles (:func:`_metis_multi`: pymetis
        2025.2's ``part_graph`` derives ``ncon`` as ``len(vweights) // (n + 1)``, which is 1 for any graph).

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
    extra = None
    if constraints is not None:
        extra = np.asarray(constraints, dtype=np.float64)
        if extra.ndim == 1:
            extra = extra[:, None]
        if extra.ndim != 2 or extra.shape[0] != n or not np.all(np.isfinite(extra)) or np.any(extra < 0):
            raise GraphError(f"constraint weights must be {n} rows of non-negative finite numbers")
        if extra.shape[1] == 0:
            extra = None
    if nparts == 1:
        return np.zeros(n, dtype=np.int64)

    import pymetis

    vw = metis_vertex_weights(w)
    if extra is not None:
        vwgt = np.column_stack([vw] + [constraint_units(c) for c in extra.T])
        owner = _metis_multi(xadj, adjncy, vwgt, nparts, tp, seed, ufactor, ew)
    else:
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


def constraint_units(weights: ArrayLike) -> NDArray[np.int64]:
    """Non-negative integer METIS units for one further constraint: integers as they are when their sum fits
    :data:`WEIGHT_TOTAL_CAP`, otherwise scaled so the total is the cap (a zero stays zero; a positive weight gets
    at least one unit). All zero: all zero (METIS then ignores the constraint)."""
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if total == 0:
        return np.zeros(w.size, dtype=np.int64)
    if np.all(w == np.round(w)) and total <= WEIGHT_TOTAL_CAP:
        return w.astype(np.int64)
    scaled = np.round(w * (WEIGHT_TOTAL_CAP / total)).astype(np.int64)
    return np.where(w > 0, np.maximum(scaled, 1), 0)


@functools.cache
def _metis_lib():
    """The METIS library pymetis bundles (ctypes), its ``idx_t`` dtype and its ``real_t`` dtype (probed once: a
    two-vertex partition with target fractions ½, ½ is accepted only when they are read at the right width)."""
    import ctypes

    import pymetis
    import pymetis._internal as internal

    try:
        lib = ctypes.CDLL(internal.__file__)
        lib.METIS_PartGraphKway, lib.METIS_PartGraphRecursive, lib.METIS_SetDefaultOptions  # noqa: B018
    except (OSError, AttributeError) as err:
        raise GraphError(f"multi-constraint partitioning needs the METIS symbols of pymetis' library "
                         f"({internal.__file__}): {err}") from None
    idx = np.dtype(pymetis.zero_copy_dtype())
    found = None
    for real in (np.dtype(np.float32), np.dtype(np.float64)):
        xadj, adj = np.array([0, 1, 2], dtype=idx), np.array([1, 0], dtype=idx)
        part = np.zeros(2, dtype=idx)
        status = _call(lib, "METIS_PartGraphRecursive", idx, xadj, adj, np.ones(2, dtype=idx), 1, 2,
                       # padded to 16 bytes each: read at the other width they stay within the arrays
                       np.array([0.5, 0.5, 0.0, 0.0], dtype=real), np.array([1.03, 1.03, 1.03, 1.03], dtype=real),
                       _options(lib, idx, 30, 0),
                       None, part)
        if status == 1 and sorted(part.tolist()) == [0, 1]:
            found = real
            break
    if found is None:
        raise GraphError("multi-constraint partitioning: could not call pymetis' METIS library (no real_t width "
                         "accepted its target fractions)")
    return lib, idx, found


def _options(lib, idx: np.dtype, ufactor: int, seed: int) -> NDArray:
    import pymetis

    opts = np.zeros(pymetis._internal.Options._len(), dtype=idx)
    import ctypes

    lib.METIS_SetDefaultOptions(ctypes.c_void_p(opts.ctypes.data))
    opts[pymetis.OptionKey.UFACTOR] = ufactor
    opts[pymetis.OptionKey.SEED] = seed
    opts[pymetis.OptionKey.CONTIG] = 0
    return opts


def _call(lib, fn: str, idx: np.dtype, xadj, adjncy, vwgt, ncon: int, nparts: int, tpwgts, ubvec, options,
          adjwgt, part) -> int:
    import ctypes

    n = np.array([xadj.size - 1], dtype=idx)
    nc, npart, cut = np.array([ncon], dtype=idx), np.array([nparts], dtype=idx), np.zeros(1, dtype=idx)

    def ptr(a):
        return None if a is None else ctypes.c_void_p(a.ctypes.data)

    f = getattr(lib, fn)
    f.restype = ctypes.c_int
    return int(f(ptr(n), ptr(nc), ptr(xadj), ptr(adjncy), ptr(vwgt), None, ptr(adjwgt), ptr(npart), ptr(tpwgts),
                 ptr(ubvec), ptr(options), ptr(cut), ptr(part)))


def _metis_multi(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], vwgt: NDArray[np.int64], nparts: int,
                 tp: NDArray[np.float64] | None, seed: int, ufactor: int,
                 ew: NDArray[np.int64] | None) -> NDArray[np.int64]:
    """METIS with ``ncon = vwgt.shape[1]`` constraints (k-way above 8 parts, recursive bisection otherwise, as
    pymetis chooses), every constraint within ``1 + ufactor/1000`` and split by the fractions ``tp``."""
    lib, idx, real = _metis_lib()
    n, ncon = vwgt.shape
    tpw = None
    if tp is not None:
        tpw = np.repeat(tp, ncon).astype(real)
    ub = np.full(ncon, 1.0 + ufactor / 1000.0, dtype=real)
    part = np.zeros(n, dtype=idx)
    fn = "METIS_PartGraphKway" if nparts > 8 else "METIS_PartGraphRecursive"
    status = _call(lib, fn, idx, np.ascontiguousarray(xadj, dtype=idx), np.ascontiguousarray(adjncy, dtype=idx),
                   np.ascontiguousarray(vwgt, dtype=idx), ncon, nparts, tpw, ub, _options(lib, idx, ufactor, seed),
                   None if ew is None else np.ascontiguousarray(ew, dtype=idx), part)
    if status != 1:
        raise GraphError(f"METIS multi-constraint partitioning ({ncon} constraints, {nparts} parts) failed with "
                         f"status {status}")
    return part.astype(np.int64)


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
