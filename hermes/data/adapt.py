"""Adaptation by weights: each phase multiplies the weights of a region's cells by a factor.

This is the thesis' experiment (§10.2: "the weights of a subset of vertices ... were multiplied by a
factor of 2") and ParMETIS' ``adaptgraph``. Regions: ``random`` (a fraction of all cells), ``box``,
``disc`` and ``front`` (a band that moves along x from phase to phase, like a shock crossing the
domain); any region can be thinned to a random ``fraction`` of its cells.

The random choice is a counter-based hash of (seed, phase, global id): a cell's fate does not depend
on which rank holds it, so runs with different balancers or rank counts adapt the same cells.
Geometric parameters are fractions of the mesh bounding box when ``relative`` is true.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["uniform_hash", "region_mask", "adapt_weights"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def uniform_hash(seed: int, phase: int, gid: NDArray[np.int64]) -> NDArray[np.float64]:
    """SplitMix64 of (seed, phase, gid) mapped to [0, 1): reproducible, independent of the distribution."""
    with np.errstate(over="ignore"):
        z = (np.asarray(gid, dtype=np.uint64) + np.uint64(1)) * _GOLD
        z ^= np.uint64((int(seed) * 0x632BE59BD9B4E019 + int(phase) * 0x85EBCA77C2B2AE63) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)


def region_mask(region, coords: NDArray[np.float64], gid: NDArray[np.int64], phase: int, seed: int,
                bbox: tuple[NDArray, NDArray]) -> NDArray[np.bool_]:
    """Cells of ``region`` (a :class:`hermes.sections.RegionSpec`) at adaptation ``phase`` (1-based)."""
    lo, hi = (np.asarray(b, dtype=np.float64) for b in bbox)
    span = np.where(hi > lo, hi - lo, 1.0)
    x = (coords[:, :2] - lo[:2]) / span[:2] if region.relative else coords[:, :2]
    n = coords.shape[0]
    if region.kind == "random":
        mask = np.ones(n, dtype=bool)
    elif region.kind == "box":
        x0, y0, x1, y1 = region.box
        mask = (x[:, 0] >= x0) & (x[:, 0] <= x1) & (x[:, 1] >= y0) & (x[:, 1] <= y1)
    elif region.kind == "disc":
        c = np.asarray(region.center, dtype=np.float64)
        mask = np.sum((x - c) ** 2, axis=1) <= region.radius**2
    elif region.kind == "front":
        pos = region.start + region.speed * (phase - 1)
        mask = np.abs(x[:, 0] - pos) <= 0.5 * region.width
    else:  # validated by the scenario schema
        raise ValueError(f"unknown region kind {region.kind!r}")
    if region.fraction < 1.0:
        mask &= uniform_hash(seed, phase, gid) < region.fraction
    return mask


def adapt_weights(weights: NDArray[np.float64], mask: NDArray[np.bool_], factor: float) -> NDArray[np.float64]:
    """New weights: ``factor ×`` on the region, unchanged elsewhere (a new array)."""
    out = np.array(weights, dtype=np.float64, copy=True)
    out[mask] *= factor
    return out
