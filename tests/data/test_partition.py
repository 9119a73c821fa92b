from __future__ import annotations

import itertools

import numpy as np
import pytest

from hermes.data.generators import grid
from hermes.data.mesh import csr_from_edges
from hermes.data.partition import (
    WEIGHT_RESOLUTION,
    WEIGHT_TOTAL_CAP,
    _fill_empty_parts,
    metis_partition,
    metis_vertex_weights,
    remap,
)
from hermes.errors import GraphError, MeshError


def path_graph(n: int):
    return csr_from_edges(n, np.column_stack([np.arange(n - 1), np.arange(1, n)]))


def part_fractions(owner, w, nparts):
    return np.bincount(owner, weights=w, minlength=nparts) / w.sum()


# --------------------------------------------------------------------------------------------
# metis_partition
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nparts", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("weighted", [False, True])
def test_partition_is_valid(nparts, weighted):
    mesh = grid(12, 9)
    w = np.random.default_rng(nparts).uniform(0.5, 4, mesh.n_cells) if weighted else None
    owner = metis_partition(mesh.xadj, mesh.adjncy, w, nparts)
    assert owner.dtype == np.int64 and owner.shape == (mesh.n_cells,)
    assert owner.min() == 0 and owner.max() == nparts - 1
    assert np.all(np.bincount(owner, minlength=nparts) > 0)


@pytest.mark.parametrize("weighted", [False, True])
def test_partition_honours_target_fractions(weighted):
    mesh = grid(100, 100)
    targets = np.array([0.4, 0.3, 0.2, 0.1])
    w = np.random.default_rng(7).uniform(0.2, 5.0, mesh.n_cells) if weighted else np.ones(mesh.n_cells)
    owner = metis_partition(mesh.xadj, mesh.adjncy, w if weighted else None, 4, targets=targets)
    frac = part_fractions(owner, w, 4)
    # METIS bounds each part by target · (1 + ufactor/1000) (plus one vertex); in practice far tighter
    assert np.all(frac <= targets * 1.03 + w.max() / w.sum())
    np.testing.assert_allclose(frac, targets, atol=0.005)
    # and the parts are spatially compact: the cut is far below that of a random assignment (~15,000)
    rows = np.repeat(np.arange(mesh.n_cells), mesh.degree)
    assert np.sum(owner[rows] != owner[mesh.adjncy]) / 2 < 1000


def test_targets_are_normalised():
    mesh = grid(40, 40)
    a = metis_partition(mesh.xadj, mesh.adjncy, None, 3, targets=[2, 1, 1])
    b = metis_partition(mesh.xadj, mesh.adjncy, None, 3, targets=[0.5, 0.25, 0.25])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(part_fractions(a, np.ones(1600), 3), [0.5, 0.25, 0.25], atol=0.01)


def test_partition_is_deterministic_for_a_seed():
    mesh = grid(30, 30)
    w = np.random.default_rng(3).uniform(1, 2, mesh.n_cells)
    a = metis_partition(mesh.xadj, mesh.adjncy, w, 5, seed=11)
    b = metis_partition(mesh.xadj, mesh.adjncy, w, 5, seed=11)
    np.testing.assert_array_equal(a, b)


def test_single_part_is_all_zeros():
    mesh = grid(5, 5)
    owner = metis_partition(mesh.xadj, mesh.adjncy, None, 1)
    np.testing.assert_array_equal(owner, np.zeros(25, dtype=np.int64))


def test_as_many_parts_as_vertices():
    mesh = grid(4, 3)
    owner = metis_partition(mesh.xadj, mesh.adjncy, None, 12)
    np.testing.assert_array_equal(np.sort(owner), np.arange(12))


def test_empty_parts_left_by_metis_are_filled():
    import pymetis

    xadj, adjncy = path_graph(4)
    w = [1, 2, 9, 28]
    raw = pymetis.part_graph(3, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=w,
                             options=pymetis.Options(ufactor=30, contig=0, seed=0))
    assert np.any(np.bincount(raw.vertex_part, minlength=3) == 0)  # METIS itself leaves a part empty
    owner = metis_partition(xadj, adjncy, np.array(w, dtype=float), 3)
    assert np.all(np.bincount(owner, minlength=3) > 0)
    xadj, adjncy = path_graph(2)
    owner = metis_partition(xadj, adjncy, [1.0, 2.0], 2)
    assert sorted(owner.tolist()) == [0, 1]


def test_fill_empty_parts_moves_lightest_vertex_of_heaviest_part():
    owner = np.array([0, 0, 0, 1, 1, 3])
    w = np.array([5.0, 1.0, 3.0, 2.0, 2.0, 50.0])  # part 3 is heaviest but has one vertex
    filled = _fill_empty_parts(owner, w, 5)
    assert filled == 2
    # part 2 takes vertex 1, the lightest of part 0 (load 9); part 4 takes vertex 2 from part 0 (load 8 > 4)
    np.testing.assert_array_equal(owner, [0, 2, 4, 1, 1, 3])


def test_edge_weights_are_accepted():
    mesh = grid(10, 10)
    ew = np.full(mesh.adjncy.size, 2.5)
    owner = metis_partition(mesh.xadj, mesh.adjncy, None, 4, edge_weights=ew)
    assert np.all(np.bincount(owner, minlength=4) > 0)


@pytest.mark.parametrize("nparts", [5, 100])
def test_more_parts_than_vertices(nparts):
    xadj, adjncy = path_graph(4)
    with pytest.raises(MeshError, match=rf"more processors \({nparts}\) than cells \(4\)"):
        metis_partition(xadj, adjncy, None, nparts)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nparts": 0},
        {"nparts": -2},
        {"nparts": 2.0},
        {"nparts": 2, "targets": [1.0]},
        {"nparts": 2, "targets": [1.0, 0.0]},
        {"nparts": 2, "targets": [1.0, np.nan]},
        {"nparts": 2, "weights": [1.0, 1.0, 0.0, 1.0]},
        {"nparts": 2, "weights": [1.0, 1.0]},
        {"nparts": 2, "edge_weights": [1.0]},
    ],
)
def test_bad_partition_arguments(kwargs):
    xadj, adjncy = path_graph(4)
    kwargs = {"weights": None, **kwargs}
    with pytest.raises(GraphError) as err:
        metis_partition(xadj, adjncy, kwargs.pop("weights"), kwargs.pop("nparts"), **kwargs)
    assert "\n" not in str(err.value)


def test_malformed_graph():
    with pytest.raises(GraphError):
        metis_partition([0, 1, 3], [1, 0], None, 2)
    with pytest.raises(GraphError):
        metis_partition([0, 1, 2], [1, 5], None, 2)


# --------------------------------------------------------------------------------------------
# integer weights
# --------------------------------------------------------------------------------------------


def test_vertex_weights_integral_multiples_are_exact():
    np.testing.assert_array_equal(metis_vertex_weights(np.ones(5)), np.ones(5))
    np.testing.assert_array_equal(metis_vertex_weights([0.5, 1.0, 2.0, 4.5]), [1, 2, 4, 9])


def test_vertex_weights_floats_are_proportional():
    w = np.random.default_rng(0).uniform(0.1, 10, 1000)
    vw = metis_vertex_weights(w)
    assert vw.dtype == np.int64 and vw.min() >= 1
    # quantisation, not rounding: each weight is rounded to an integer of ≥ WEIGHT_RESOLUTION units (relative
    # error ≤ ½ / WEIGHT_RESOLUTION), and so is their total
    np.testing.assert_allclose(vw / vw.sum(), w / w.sum(), rtol=2 * 0.5 / WEIGHT_RESOLUTION)


def test_vertex_weights_total_is_capped():
    w = np.concatenate([[1e-6], np.full(10_000, 1e3)])  # ratio 1e9: would overflow 32-bit sums
    vw = metis_vertex_weights(w)
    assert vw.min() >= 1
    assert vw.sum() <= WEIGHT_TOTAL_CAP + w.size
    np.testing.assert_allclose(vw[1:] / vw[1:].sum(), 1 / 10_000)


# --------------------------------------------------------------------------------------------
# remap
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nparts", [2, 5, 9])
def test_remap_undoes_a_permutation(nparts):
    rng = np.random.default_rng(nparts)
    old = rng.integers(0, nparts, 500)
    cycle = rng.permutation(nparts)
    perm = np.empty(nparts, dtype=np.int64)
    perm[cycle] = np.roll(cycle, 1)  # a cyclic relabelling: no label keeps its name
    assert np.all(perm != np.arange(nparts))
    np.testing.assert_array_equal(remap(old, perm[old], None, nparts), old)
    w = rng.uniform(0.1, 3, 500)
    np.testing.assert_array_equal(remap(old, perm[old], w, nparts), old)


def test_remap_is_optimal_and_only_relabels():
    rng = np.random.default_rng(5)
    nparts, n = 4, 400
    old = rng.integers(0, nparts, n)
    new = np.where(rng.random(n) < 0.6, (old + 1) % nparts, rng.integers(0, nparts, n))
    w = rng.uniform(0.1, 3, n)
    out = remap(old, new, w, nparts)
    kept = w[out == old].sum()
    assert kept > w[new == old].sum()
    best = max(w[np.array(p)[new] == old].sum() for p in itertools.permutations(range(nparts)))
    assert kept == pytest.approx(best)
    # same parts, other labels: new -> out is a bijection
    pairs = set(zip(new.tolist(), out.tolist()))
    assert len(pairs) == nparts and len({b for _, b in pairs}) == nparts


def test_remap_after_repartitioning_keeps_more_weight_home():
    mesh = grid(40, 40)
    old = metis_partition(mesh.xadj, mesh.adjncy, None, 6)
    w = np.ones(mesh.n_cells)
    w[: mesh.n_cells // 4] = 4.0  # the bottom rows got refined
    new = metis_partition(mesh.xadj, mesh.adjncy, w, 6, seed=1)
    out = remap(old, new, w, 6)
    assert w[out == old].sum() >= w[new == old].sum()
    assert w[out == old].sum() > 0.3 * w.sum()
    np.testing.assert_allclose(np.sort(np.bincount(out, weights=w)), np.sort(np.bincount(new, weights=w)))


@pytest.mark.parametrize(
    "old, new, weights, nparts",
    [
        ([0, 1], [0, 1, 1], None, 2),
        ([0, 2], [0, 1], None, 2),
        ([0, 1], [0, -1], None, 2),
        ([0, 1], [1, 0], [1.0], 2),
        ([0, 1], [1, 0], [1.0, -1.0], 2),
        ([0, 0], [0, 0], None, 0),
    ],
)
def test_remap_rejects_bad_input(old, new, weights, nparts):
    with pytest.raises(GraphError):
        remap(old, new, weights, nparts)
