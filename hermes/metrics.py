"""Partition quality, written once: used by the driver, the reports and the tests.

Serial functions work on whole-mesh arrays (owner per cell); ``*_local`` variants work on a
:class:`~hermes.data.distributed.LocalDomain` and return what this rank contributes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hermes.balance.model import imbalance

__all__ = ["imbalance", "edge_cut", "part_loads", "boundary_cells", "migration_volume", "validate_partition",
           "edge_cut_local"]


def part_loads(owner: NDArray[np.int64], weights: NDArray[np.float64], p: int) -> NDArray[np.float64]:
    """Σ of cell weights per part."""
    return np.bincount(owner, weights=weights, minlength=p)


def edge_cut(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], owner: NDArray[np.int64]) -> int:
    """Number of undirected edges whose ends lie in different parts."""
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    return int(np.count_nonzero(owner[rows] != owner[adjncy]) // 2)


def edge_cut_local(dom) -> int:
    """This rank's cut adjacency entries; the global edge cut is the sum over ranks divided by 2."""
    return int(np.count_nonzero(dom.cut_mask))


def boundary_cells(xadj, adjncy, owner) -> int:
    """Cells with a neighbour in another part."""
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    return int(np.unique(rows[owner[rows] != owner[adjncy]]).size)


def migration_volume(old_owner, new_owner, weights) -> tuple[int, float]:
    """(cells, weight) whose owner changed."""
    moved = np.asarray(old_owner) != np.asarray(new_owner)
    return int(moved.sum()), float(np.asarray(weights)[moved].sum())


def validate_partition(owner: NDArray[np.int64], n: int, p: int) -> None:
    """Every cell on exactly one rank in 0..p-1 and no rank empty; raises ValueError otherwise."""
    owner = np.asarray(owner)
    if owner.shape != (n,):
        raise ValueError(f"partition has {owner.size} entries for {n} cells")
    if owner.size and (owner.min() < 0 or owner.max() >= p):
        raise ValueError("partition assigns a cell to no rank or to a rank out of range")
    empty = np.flatnonzero(np.bincount(owner, minlength=p) == 0)
    if empty.size:
        raise ValueError(f"rank {int(empty[0])} has no cells")
