"""Partition quality, written once: used by the driver, the reports and the tests.

Serial functions work on whole-mesh arrays (owner per cell); ``*_local`` variants work on a
:class:`~hermes.data.distributed.LocalDomain` and return what this rank contributes.

:func:`partition_quality` gathers the per-phase figures of a partition (imbalance, edge cut count and
weight, boundary cells, neighbouring subdomains per part, migration volume in cells, weight and bytes)
in one dictionary with the keys :data:`QUALITY_KEYS`; :func:`partition_quality_local` computes the same
numbers on a distributed domain with one collective (an ``allgather`` of nine numbers per rank).

The movement of cells has one vocabulary (docs/RUNNING.md, "What a run writes"): ``cells_moved``, the distinct
cells that changed owner in a phase (what ``migration_cells`` counts here), and ``cell_sends``, the cells the
migration messages carried (a cell passed on through an intermediate rank counts once per hop, so
``cell_sends >= cells_moved``). A run's summary.json records both in every phase and as totals;
:func:`cells_moved` and :func:`cell_sends` read them from a phase record, also from one written before they
existed (``quality.migration_cells`` and ``migrated_cells``, the deprecated aliases kept beside them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.errors import HermesError

__all__ = ["imbalance", "edge_cut", "subdomain_graph", "boundary_cells", "migration_volume", "QUALITY_KEYS",
           "partition_quality", "partition_quality_local", "cell_bytes", "cells_moved", "cell_sends"]

#: The keys of :func:`partition_quality` and :func:`partition_quality_local`, in this order.
QUALITY_KEYS = ("parts", "imbalance", "max_load", "edge_cut", "edge_cut_weight", "boundary_cells",
                "neighbours_max", "neighbours_mean", "migration_cells", "migration_weight", "migration_bytes")


def imbalance(loads: NDArray[np.float64], capacities: NDArray[np.float64]) -> float:
    """The thesis' imbalance ``max_i l_i / l̄_i`` with ``l̄ = c Σ l`` (1.0 is perfectly fair)."""
    loads = np.asarray(loads, dtype=np.float64)
    c = np.asarray(capacities, dtype=np.float64)
    c = c / c.sum()
    total = loads.sum()
    if total <= 0:
        return 1.0
    return float(np.max(loads / (c * total)))


def subdomain_graph(xadj: NDArray[np.int64], adjncy: NDArray[np.int64],
                    owner: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The subdomain graph of a partition: its edges ``(i, j)``, ``i < j``, in lexicographic order, and the number
    of cut dual edges (the common boundary) of each."""
    xadj, adjncy, owner = (np.asarray(a, dtype=np.int64) for a in (xadj, adjncy, owner))
    rows = np.repeat(np.arange(xadj.size - 1, dtype=np.int64), np.diff(xadj))
    a, b = owner[rows], owner[adjncy]
    cut = (rows < adjncy) & (a != b)  # each cut dual edge once
    pairs = np.sort(np.column_stack([a[cut], b[cut]]), axis=1)
    edges, boundary = np.unique(pairs, axis=0, return_counts=True)
    return edges.reshape(-1, 2).astype(np.int64), boundary.astype(np.int64)


def edge_cut(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], owner: NDArray[np.int64]) -> int:
    """Number of undirected edges whose ends lie in different parts."""
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    return int(np.count_nonzero(owner[rows] != owner[adjncy]) // 2)


def boundary_cells(xadj, adjncy, owner) -> int:
    """Cells with a neighbour in another part."""
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    return int(np.unique(rows[owner[rows] != owner[adjncy]]).size)


def migration_volume(old_owner, new_owner, weights) -> tuple[int, float]:
    """(cells, weight) whose owner changed."""
    moved = np.asarray(old_owner) != np.asarray(new_owner)
    return int(moved.sum()), float(np.asarray(weights)[moved].sum())


# ------------------------------------------------------------------------------------ per-phase quality
def partition_quality(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], owner: NDArray[np.int64],
                      weights: NDArray[np.float64], *, p: int | None = None,
                      capacities: NDArray[np.float64] | None = None,
                      edge_weights: NDArray[np.float64] | None = None,
                      prev_owner: NDArray[np.int64] | None = None,
                      bytes_per_cell: float | NDArray | None = None) -> dict[str, int | float | None]:
    """The quality figures of a partition of a whole mesh (serial reference).

    Parameters
    ----------
    xadj, adjncy : ndarray of int
        Symmetric CSR adjacency of the ``n`` work units.
    owner : ndarray of int, shape (n,)
        Part (rank) of every unit.
    weights : ndarray of float, shape (n,)
        Work weight of every unit.
    p : int, optional
        Number of parts; default ``len(capacities)`` or ``owner.max() + 1``. Parts without units count
        (load 0, no neighbours).
    capacities : ndarray of float, shape (p,), optional
        Relative processor capacities for the imbalance (default: equal).
    edge_weights : ndarray of float, same length as ``adjncy``, optional
        Weight of every CSR entry (symmetric); default 1, so ``edge_cut_weight == edge_cut``.
    prev_owner : ndarray of int, shape (n,), optional
        The owners before (previous phase); without it the ``migration_*`` entries are None.
    bytes_per_cell : float or ndarray of shape (n,), optional
        What moving a unit costs in bytes (e.g. :func:`cell_bytes`); without it ``migration_bytes``
        is None.

    Returns
    -------
    dict
        ``parts`` (p), ``imbalance`` (max l_i / l̄_i with l̄ = c Σ l), ``max_load``, ``edge_cut``
        (undirected edges between parts), ``edge_cut_weight`` (their Σ weight), ``boundary_cells``
        (units with a neighbour in another part), ``neighbours_max`` / ``neighbours_mean`` (number of
        adjacent parts per part, over all p parts), ``migration_cells`` / ``migration_weight`` /
        ``migration_bytes`` (units whose owner differs from ``prev_owner``: net volume, a unit that
        moved twice counts once; a run's phase records publish ``migration_cells`` as ``cells_moved``).

    Raises
    ------
    HermesError
        If an array has the wrong shape or an owner lies outside ``0..p-1``.
    """
    xadj, adjncy = np.asarray(xadj, dtype=np.int64), np.asarray(adjncy, dtype=np.int64)
    if xadj.ndim != 1 or xadj.size == 0 or adjncy.size != xadj[-1]:
        raise HermesError(f"malformed CSR adjacency: xadj of shape {xadj.shape}, {adjncy.size} entries")
    n = xadj.size - 1
    owner = _vector(owner, n, "owner", np.int64)
    weights = _vector(weights, n, "weights", np.float64)
    if capacities is not None:
        capacities = np.asarray(capacities, dtype=np.float64).ravel()
    if p is None:
        p = capacities.size if capacities is not None else int(owner.max(initial=-1)) + 1
    if capacities is not None and capacities.size != p:
        raise HermesError(f"{capacities.size} capacities for {p} parts")
    if owner.size and (owner.min() < 0 or owner.max() >= p):
        raise HermesError(f"an owner lies outside the parts 0..{p - 1}")
    ew = None if edge_weights is None else _vector(edge_weights, adjncy.size, "edge_weights", np.float64)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
    cut = owner[rows] != owner[adjncy]
    pairs = np.unique(owner[rows[cut]] * p + owner[adjncy[cut]])
    nbrs = np.bincount(pairs // p, minlength=p) if p else np.zeros(0, np.int64)
    loads = np.bincount(owner, weights=weights, minlength=p)
    mig: tuple = (None, None, None)
    if prev_owner is not None:
        moved = _vector(prev_owner, n, "prev_owner", np.int64) != owner
        nbytes = None
        if bytes_per_cell is not None:
            b = np.asarray(bytes_per_cell, dtype=np.float64)
            nbytes = float(b) * int(moved.sum()) if b.ndim == 0 else _vector(b, n, "bytes_per_cell",
                                                                               np.float64)[moved].sum()
        mig = (int(moved.sum()), float(weights[moved].sum()), None if nbytes is None else _integral(nbytes))
    return _quality(p, loads, capacities, int(np.count_nonzero(cut)),
                    float(ew[cut].sum()) if ew is not None else float(np.count_nonzero(cut)),
                    int(np.unique(rows[cut]).size), nbrs, mig)


def partition_quality_local(comm, dom, *, capacities: NDArray[np.float64] | None = None,
                            edge_weights: NDArray[np.float64] | None = None,
                            prev_gid: NDArray[np.int64] | None = None,
                            bytes_per_cell: float | NDArray | None = None) -> dict[str, int | float | None]:
    """:func:`partition_quality` of a distributed partition, identical on every rank (collective).

    Parameters
    ----------
    comm : mpi4py communicator
        The ranks of the partition; rank r owns ``dom``.
    dom : hermes.data.distributed.LocalDomain
        This rank's cells; its ``nbr_owner`` must be current (as after ``migrate``).
    capacities : ndarray of float, shape (p,), optional
        Same on every rank; default equal.
    edge_weights : ndarray of float, same length as ``dom.adjncy``, optional
        Weight of every local adjacency entry (symmetric across ranks).
    prev_gid : ndarray of int, optional
        Global ids this rank owned before (e.g. ``dom.gid`` taken before balancing). A cell owned now
        but not before has migrated here; without it the ``migration_*`` entries are None.
    bytes_per_cell : float or ndarray of shape (dom.n,), optional
        Bytes per owned cell, e.g. :func:`cell_bytes` ``(dom)``; without it ``migration_bytes`` is None.

    Returns
    -------
    dict
        As :func:`partition_quality` on the gathered arrays (``edge_cut_weight`` up to rounding).

    Raises
    ------
    HermesError
        On every rank if an argument has the wrong shape on any rank (agreed in the one collective).

    Notes
    -----
    Each rank contributes (load, cut adjacency entries, their weight, boundary cells, adjacent ranks,
    migrated-in cells, weight and bytes, an error flag) to one table (the communicator's ``shared_rows``: built
    once per process; the messages are gathered only if a flag is set); the edge cut is half the
    sum of cut entries. Every migrated cell is counted once, by the rank that owns it now.
    """
    p = comm.Get_size()
    bad = ""
    cut = dom.cut_mask
    cut_w = float(np.count_nonzero(cut))
    if edge_weights is not None:
        ew = np.asarray(edge_weights, dtype=np.float64)
        if ew.shape != dom.adjncy.shape:
            bad = f"edge_weights has shape {ew.shape} for {dom.adjncy.size} adjacency entries"
        else:
            cut_w = float(ew[cut].sum())
    if capacities is not None and np.asarray(capacities).size != p:
        bad = f"{np.asarray(capacities).size} capacities for {p} ranks"
    mig = [np.nan, np.nan, np.nan]
    if prev_gid is not None:
        moved = ~np.isin(dom.gid, np.asarray(prev_gid, dtype=np.int64))
        mig[:2] = [float(moved.sum()), float(dom.weight[moved].sum())]
        if bytes_per_cell is not None:
            b = np.asarray(bytes_per_cell, dtype=np.float64)
            if b.ndim == 0:
                mig[2] = float(b) * float(moved.sum())
            elif b.shape != (dom.n,):
                bad = f"bytes_per_cell has shape {b.shape} for {dom.n} cells"
            else:
                mig[2] = float(b[moved].sum())
    row = np.array([dom.load, int(np.count_nonzero(cut)), cut_w, dom.boundary_cells, int(dom.neighbour_ranks.size),
                    *mig, 1.0 if bad else 0.0], dtype=np.float64)
    a = comm.shared_rows(row)
    if a[:, -1].any():
        errors = [(r, m) for r, m in enumerate(comm.allgather(bad)) if m]
        raise HermesError(f"partition quality: rank {errors[0][0]}: {errors[0][1]}")
    a = a[:, :-1]
    mig_t = (None, None, None)
    if prev_gid is not None:
        mig_t = (int(a[:, 5].sum()), float(a[:, 6].sum()),
                 None if bytes_per_cell is None else _integral(float(a[:, 7].sum())))
    cap = None if capacities is None else np.asarray(capacities, dtype=np.float64).ravel()
    return _quality(p, a[:, 0], cap, int(a[:, 1].sum()), float(a[:, 2].sum()), int(a[:, 3].sum()),
                    a[:, 4].astype(np.int64), mig_t)


def cells_moved(phase: Mapping[str, Any]) -> Any:
    """The distinct cells that changed owner in a phase record of summary.json: its ``cells_moved``, else (a
    summary written before that key) ``quality.migration_cells``; None when neither is recorded. The value is
    returned as recorded (a reader of untrusted files checks its type).

    Examples
    --------
    >>> cells_moved({"cells_moved": 85, "cell_sends": 88})
    85
    >>> cells_moved({"migrated_cells": 88, "quality": {"migration_cells": 85}})
    85
    """
    if phase.get("cells_moved") is not None:
        return phase["cells_moved"]
    quality = phase.get("quality")
    return quality.get("migration_cells") if isinstance(quality, Mapping) else None


def cell_sends(phase: Mapping[str, Any]) -> Any:
    """The cells carried by migration messages in a phase record of summary.json (or the totals of a summary):
    its ``cell_sends``, else (written before that key) ``migrated_cells``; None when neither is recorded.

    Examples
    --------
    >>> cell_sends({"cells_moved": 85, "cell_sends": 88})
    88
    >>> cell_sends({"migrated_cells": 88})
    88
    """
    return phase["cell_sends"] if phase.get("cell_sends") is not None else phase.get("migrated_cells")


def cell_bytes(dom) -> NDArray[np.int64]:
    """Bytes every owned cell occupies in a migration packet (what ``LocalDomain.take`` packs for it).

    A cell carries its global id, weight, coordinates, degree, its adjacency entries with their owners,
    and every field; ``cell_bytes(dom)[mask].sum()`` equals the array bytes of ``dom.take(mask)``.
    """
    deg = np.diff(dom.xadj)
    fixed = dom.gid.itemsize + dom.weight.itemsize + deg.itemsize + _row_bytes(dom.coords)
    fixed += sum(_row_bytes(v) for v in dom.fields.values())
    return fixed + deg * (dom.adjncy.itemsize + dom.nbr_owner.itemsize)


def _row_bytes(a: NDArray) -> int:
    return int(a.itemsize * int(np.prod(a.shape[1:], dtype=np.int64)))


def _vector(a, n: int, name: str, dtype) -> NDArray:
    a = np.asarray(a, dtype=dtype)
    if a.shape != (n,):
        raise HermesError(f"{name} has shape {a.shape}, expected ({n},)")
    return a


def _integral(x: float) -> int | float:
    return int(round(x)) if float(x).is_integer() else float(x)


def _quality(p: int, loads, capacities, cut_entries: int, cut_weight: float, boundary: int, nbrs,
             mig: tuple) -> dict[str, int | float | None]:
    loads = np.asarray(loads, dtype=np.float64)
    caps = np.ones(p) if capacities is None else capacities
    return {
        "parts": int(p),
        "imbalance": imbalance(loads, caps) if p else 1.0,
        "max_load": float(loads.max(initial=0.0)),
        "edge_cut": cut_entries // 2,
        "edge_cut_weight": cut_weight / 2,
        "boundary_cells": boundary,
        "neighbours_max": int(np.max(nbrs, initial=0)),
        "neighbours_mean": float(np.mean(nbrs)) if p else 0.0,
        "migration_cells": mig[0],
        "migration_weight": mig[1],
        "migration_bytes": mig[2],
    }
