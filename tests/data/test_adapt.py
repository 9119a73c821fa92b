from __future__ import annotations

import numpy as np
import pytest

from hermes.data.adapt import adapt_weights, region_mask, uniform_hash
from hermes.data.generators import grid
from hermes.sections import RegionSpec


def test_hash_is_uniform_reproducible_and_order_independent():
    g = np.arange(100_000)
    u = uniform_hash(7, 3, g)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01
    perm = np.random.default_rng(0).permutation(g.size)
    assert np.array_equal(uniform_hash(7, 3, g[perm]), u[perm])
    assert not np.array_equal(uniform_hash(8, 3, g), u)
    assert not np.array_equal(uniform_hash(7, 4, g), u)


@pytest.mark.parametrize(
    "spec, expect",
    [
        (dict(kind="box", box=(0.0, 0.0, 0.5, 1.0)), lambda x, y: x <= 0.5),
        (dict(kind="disc", center=(0.5, 0.5), radius=0.25), lambda x, y: (x - 0.5) ** 2 + (y - 0.5) ** 2 <= 0.0625),
    ],
)
def test_geometric_regions(spec, expect):
    m = grid(20, 10)
    lo, hi = m.coords.min(axis=0), m.coords.max(axis=0)
    mask = region_mask(RegionSpec(**spec), m.coords, np.arange(m.n_cells), 1, 0, (lo, hi))
    x, y = ((m.coords - lo) / (hi - lo)).T
    assert np.array_equal(mask, expect(x, y))
    assert 0 < mask.sum() < m.n_cells


def test_front_moves_with_phase_and_fraction_thins():
    m = grid(40, 4)
    bbox = (m.coords.min(axis=0), m.coords.max(axis=0))
    front = RegionSpec(kind="front", start=0.1, speed=0.3, width=0.1)
    x1 = m.coords[region_mask(front, m.coords, np.arange(m.n_cells), 1, 0, bbox), 0].mean()
    x2 = m.coords[region_mask(front, m.coords, np.arange(m.n_cells), 2, 0, bbox), 0].mean()
    assert x2 > x1
    rnd = RegionSpec(kind="random", fraction=0.25)
    big = grid(100, 100)
    frac = region_mask(rnd, big.coords, np.arange(big.n_cells), 1, 5, (big.coords.min(0), big.coords.max(0))).mean()
    assert abs(frac - 0.25) < 0.02


def test_adapt_weights_multiplies_only_region_and_returns_new_array():
    w = np.ones(5)
    out = adapt_weights(w, np.array([1, 0, 1, 0, 0], bool), 2.0)
    assert out.tolist() == [2, 1, 2, 1, 1] and w.tolist() == [1] * 5
