"""Newest-vertex bisection: conformity, area, angles, identity history, coarsening back, field transfer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import Delaunay

from hermes.data.generators import grid, lshape_triangles
from hermes.data.mesh import validate_graph
from hermes.data.refine import (
    TriMesh,
    coarsen,
    conformity_problems,
    edge_table,
    from_mesh,
    min_angles,
    nvb_mesh,
    refine,
)
from hermes.errors import MeshError
from tests.tolerances import EPS, area_tol, gamma, sum_tol


def random_mesh(seed: int, n: int = 80) -> TriMesh:
    """Delaunay triangulation of random points in the unit square (corners included)."""
    rng = np.random.default_rng(seed)
    pts = np.concatenate([rng.random((n, 2)), [[0, 0], [1, 0], [0, 1], [1, 1]]])
    return nvb_mesh(pts, Delaunay(pts).simplices)


MESHES = {
    "lshape": lambda seed: nvb_mesh(*lshape_triangles(4)),
    "delaunay": random_mesh,
    "grid": lambda seed: from_mesh(grid(7, 5))[0],
}


def brute_force_hanging(points, tris) -> int:
    """Vertices strictly inside some edge, by testing every (edge, vertex) pair."""
    keys, _ = edge_table(tris)
    lo, hi = np.divmod(keys, np.int64(1 << 31))
    d = points[hi] - points[lo]
    w = points[None, :, :] - points[lo][:, None, :]
    cross = np.abs(d[:, None, 0] * w[..., 1] - d[:, None, 1] * w[..., 0])
    t = np.einsum("ek,evk->ev", d, w)
    l2 = np.sum(d * d, axis=1)[:, None]
    # a vertex on the edge has |w| ≤ |d|, so its computed cross product is at most 2 γ_3 |d|² (plus the
    # midpoints' own rounding, u |x| |d|); an off-edge vertex of a mesh is far above that
    tol = 2 * gamma(3) + EPS * np.max(np.abs(points)) / np.sqrt(np.maximum(l2, np.finfo(float).tiny))
    return int(np.count_nonzero((cross <= tol * l2) & (t > tol * l2) & (t < l2 * (1 - tol))))


def refine_randomly(tm: TriMesh, seed: int, steps: int, frac: float = 0.2, edges: str = "all") -> list[TriMesh]:
    rng = np.random.default_rng(seed)
    out = [tm]
    for _ in range(steps):
        out.append(refine(out[-1], rng.random(out[-1].n_cells) < frac, edges=edges).mesh)
    return out


@pytest.mark.parametrize("kind", sorted(MESHES))
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("edges", ["all", "refinement"])
def test_random_refinement_keeps_mesh_conforming_with_the_same_area(kind, seed, edges):
    tm = MESHES[kind](seed)
    area = tm.areas.sum()
    seq = refine_randomly(tm, seed, 4, edges=edges)
    for m in seq[1:]:
        assert conformity_problems(m.points, m.tris) == []
        assert np.all(m.areas > 0)
        assert m.areas.sum() == pytest.approx(area, abs=area_tol(m.points[m.tris]) + area_tol(tm.points[tm.tris]))
        # every edge is in one or two triangles; the dual graph is the edge adjacency
        _, t2e = edge_table(m.tris)
        count = np.bincount(t2e.ravel())
        assert set(np.unique(count)) <= {1, 2}
        xadj, adjncy = m.graph
        assert adjncy.size == 2 * int(np.sum(count == 2))
        validate_graph(m.to_mesh())
    assert seq[-1].n_cells > seq[2].n_cells > tm.n_cells and brute_force_hanging(seq[2].points, seq[2].tris) == 0


def test_conformity_check_catches_hanging_nodes_and_bad_orientation():
    tm = nvb_mesh(*lshape_triangles(2))
    # bisect one triangle of a compatible pair without its neighbour: a hanging node on the shared diagonal
    keys, t2e = edge_table(tm.tris)
    count = np.bincount(t2e.ravel(), minlength=keys.size)
    i = int(np.flatnonzero(count[t2e[:, 0]] == 2)[0])
    a, b, c = tm.tris[i]
    pts = np.concatenate([tm.points, [0.5 * (tm.points[a] + tm.points[b])]])
    m = tm.points.shape[0]
    tris = np.concatenate([np.delete(tm.tris, i, axis=0), [[c, a, m], [b, c, m]]])
    assert np.all(nvb_mesh(pts, tris).areas > 0)
    assert any("hanging" in s for s in conformity_problems(pts, tris))
    assert brute_force_hanging(pts, tris) == 1
    flipped = tm.tris.copy()
    flipped[0] = flipped[0, [0, 2, 1]]
    assert conformity_problems(tm.points, flipped)


@pytest.mark.parametrize("kind", ["lshape", "delaunay"])
def test_min_angle_stays_bounded(kind):
    tm = MESHES[kind](3)
    uniform = tm
    for _ in range(4):  # 8 bisection levels everywhere: every NVB shape up to level 8 appears here
        uniform = refine(uniform, np.ones(uniform.n_cells, bool)).mesh
    floor = min_angles(uniform.points, uniform.tris).min()
    assert floor >= 0.5 * min_angles(tm.points, tm.tris).min()
    m = refine_randomly(tm, 3, 6, frac=0.3)[-1]
    assert m.level.max() <= 12
    deep = m.level <= 8
    # NVB keeps a finite set of similarity classes: the same angles up to their evaluation, atan2 of a
    # cross and a dot product (γ_6 absolute, plus the corners' rounding u X / shortest edge), on each side
    edges = np.linalg.norm(np.diff(m.points[m.tris], axis=1, append=m.points[m.tris][:, :1]), axis=2)
    slack = 2 * (gamma(6) + EPS * np.max(np.abs(m.points)) / edges.min())
    assert min_angles(m.points, m.tris)[deep].min() >= floor - slack


@pytest.mark.parametrize("kind", sorted(MESHES))
def test_refine_then_coarsen_returns_the_original_mesh_with_its_ids(kind):
    tm = MESHES[kind](5)
    m = refine_randomly(tm, 5, 4, frac=0.25)[-1]
    back = coarsen(m, np.ones(m.n_cells, bool), passes=None)
    c = back.mesh
    assert np.array_equal(c.points, tm.points) and np.array_equal(c.tris, tm.tris)
    assert np.array_equal(c.gid, tm.gid) and not c.level.any() and c.lineage.shape == (tm.n_cells, 0)
    assert back.rounds >= m.level.max() // 2
    one = coarsen(m, np.ones(m.n_cells, bool))  # one pass only: still conforming, fewer cells
    assert tm.n_cells < one.mesh.n_cells < m.n_cells and one.rounds == 1
    assert conformity_problems(one.mesh.points, one.mesh.tris) == []


def test_partial_coarsening_keeps_unmasked_cells_and_conformity():
    tm = random_mesh(7)
    m = refine_randomly(tm, 7, 4, frac=0.3)[-1]
    rng = np.random.default_rng(7)
    mask = rng.random(m.n_cells) < 0.6
    c = coarsen(m, mask, passes=None).mesh
    assert conformity_problems(c.points, c.tris) == []
    assert c.areas.sum() == pytest.approx(tm.areas.sum(), abs=area_tol(c.points[c.tris]) + area_tol(tm.points[tm.tris]))
    assert tm.n_cells < c.n_cells < m.n_cells
    kept = {(g, *p) for g, p in zip(c.gid.tolist(), map(tuple, c.points[c.tris].reshape(-1, 6).tolist()))}
    for g, p in zip(m.gid[~mask].tolist(), m.points[m.tris[~mask]].reshape(-1, 6).tolist()):
        assert (g, *p) in kept


def test_ids_levels_and_parent_map():
    tm = nvb_mesh(*lshape_triangles(3))
    m1 = refine(tm, np.arange(tm.n_cells) % 5 == 0).mesh
    ad = refine(m1, np.arange(m1.n_cells) % 3 == 0)
    m2 = ad.mesh
    assert np.all(np.diff(m2.gid) > 0)
    old = np.isin(m2.gid, m1.gid)
    src = ad.origin
    assert np.array_equal(m2.gid[old], m1.gid[src[old]])  # untouched cells keep their id
    new = ~old
    # the 2 × bisections fresh ids go to the new leaves and to the intermediate cells (now their ancestors)
    fresh = np.union1d(m2.gid[new], m2.lineage[m2.lineage >= m1.next_gid])
    assert np.array_equal(fresh, m1.next_gid + np.arange(2 * ad.changed))
    assert np.array_equal(m2.lineage[new, m1.level[src[new]]], m1.gid[src[new]])  # the old cell is an ancestor
    assert np.all(m2.level[new] > m1.level[src[new]]) and np.all(m2.level[new] <= m1.level[src[new]] + 2)
    par = m2.parent
    assert np.all(par[m2.level == 0] == -1) and np.all(par[m2.level > 0] >= 0)
    # children areas: a cell at level L has 2^-L of its root's area
    root = np.where(m2.level > 0, m2.lineage[:, 0], m2.gid)
    # each area within γ_6 of |d1||d2|-sized terms and the corners' rounding (tests/tolerances.py::area_tol)
    each = np.array([area_tol(m2.points[t][None]) for t in m2.tris]) * 2.0 ** m2.level
    assert np.all(np.abs(m2.areas * 2.0 ** m2.level - tm.areas[root])
                  <= each + np.array([area_tol(tm.points[t][None]) for t in tm.tris])[root])
    again = refine(m1, np.arange(m1.n_cells) % 3 == 0).mesh  # deterministic
    assert np.array_equal(again.tris, m2.tris) and np.array_equal(again.gid, m2.gid)


def test_fields_copy_on_refinement_and_average_on_coarsening():
    tm = random_mesh(2)
    rng = np.random.default_rng(2)
    w = rng.uniform(1, 3, tm.n_cells)
    u = rng.normal(size=tm.n_cells)
    tag = np.arange(tm.n_cells) % 7
    ad = refine(tm, rng.random(tm.n_cells) < 0.3)
    m = ad.mesh
    w1, u1, tag1 = ad.apply(w), ad.apply(u), ad.apply(tag)
    root = np.where(m.level > 0, m.lineage[:, 0], m.gid)
    assert np.array_equal(w1, w[root]) and np.array_equal(u1, u[root]) and np.array_equal(tag1, tag[root])
    assert tag1.dtype == tag.dtype
    # weight accounting: each bisection adds one copy of the bisected cell's weight
    leaves = np.bincount(root, minlength=tm.n_cells)
    assert ad.changed == int(np.sum(leaves - 1))
    # the same positive weights summed in two groupings (each an exact copy): γ of their number on each side
    assert w1.sum() == pytest.approx(w.sum() + np.sum(w * (leaves - 1)), abs=2 * sum_tol(w1) + sum_tol(w))
    u1 = u1 + rng.normal(size=u1.size)  # the solver changes the children's values
    back = coarsen(m, np.ones(m.n_cells, bool), passes=None)
    assert np.array_equal(back.apply(w1), w)  # equal children: the mean is exact
    u0 = back.apply(u1)
    expect = np.bincount(np.searchsorted(tm.gid, root), weights=u1 * 2.0 ** -m.level, minlength=tm.n_cells)
    # means of ≤ 2^L children weighted by exact powers of two: the sums' bound on each side
    t = back.transfer
    scale = abs(t) @ np.abs(u1)
    assert np.all(np.abs(u0 - expect) <= 2 * gamma(int(np.max(np.diff(t.tocsr().indptr))) + 1) * scale)
    assert np.allclose(t.sum(axis=1), 1.0, rtol=0, atol=2 * gamma(int(np.max(np.diff(t.tocsr().indptr)))))


def test_quads_are_split_into_two_triangles():
    g = grid(6, 4)
    tm, origin = from_mesh(g)
    assert tm.n_cells == 2 * g.n_cells and np.array_equal(np.bincount(origin), np.full(g.n_cells, 2))
    assert tm.areas.sum() == pytest.approx(24.0, abs=area_tol(tm.points[tm.tris]))
    assert conformity_problems(tm.points, tm.tris) == []
    # both halves of a square share their refinement edge (the diagonal): a compatible pair
    k = np.minimum(tm.tris[:, 0], tm.tris[:, 1]) * 10**6 + np.maximum(tm.tris[:, 0], tm.tris[:, 1])
    assert np.array_equal(k[0::2], k[1::2])


def test_initial_labeling_and_bad_input():
    pts = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    tm = nvb_mesh(pts, np.array([[0, 2, 1]]))  # clockwise
    assert tm.areas[0] > 0
    a, b, _ = tm.tris[0]
    assert {int(a), int(b)} == {1, 2}  # the longest edge is the refinement edge
    with pytest.raises(MeshError, match="degenerate"):
        nvb_mesh(np.array([[0.0, 0], [1, 0], [2, 0]]), np.array([[0, 1, 2]]))
    with pytest.raises(MeshError, match="out of range"):
        nvb_mesh(pts, np.array([[0, 1, 3]]))
    with pytest.raises(MeshError, match="marking"):
        refine(tm, np.ones(2, bool))
    with pytest.raises(MeshError, match="edges"):
        refine(tm, np.ones(1, bool), edges="red")
    with pytest.raises(MeshError, match="polygons"):
        from hermes.data.mesh import Mesh
        from_mesh(Mesh("g", np.array([0, 0]), np.zeros(0, np.int64), np.ones(1), np.zeros((1, 2))))
