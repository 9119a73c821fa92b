"""mesh.constraint: all, serially: reading the weights as given, METIS' multi-constraint partitioning through the
library pymetis bundles, the per-weight imbalance, and the repair's selection rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hermes.balance.constraints import _take, constraint_fields, constraint_imbalances
from hermes.data.formats import read_chaco, select_constraint, write_chaco
from hermes.data.generators import grid
from hermes.data.partition import constraint_units, metis_partition
from hermes.errors import MeshError


def _write(path: Path, mesh, w: np.ndarray) -> Path:
    return write_chaco(mesh, path, coords=False, vertex_weights=w)


def _three_weights(n: int) -> np.ndarray:
    i = np.arange(n)
    return np.column_stack((1.0 + (i % 3 == 0), (i % 7 == 0).astype(float), np.where(i < n // 5, 4.0, 0.0)))


def test_all_reads_every_weight_as_given(tmp_path):
    mesh = grid(12, 10)
    w = _three_weights(mesh.n_cells)
    m = select_constraint(read_chaco(_write(tmp_path / "g.graph", mesh, w)), "all", "g")
    np.testing.assert_array_equal(m.weights, w[:, 0])
    np.testing.assert_array_equal(m.meta["constraints"], w[:, 1:])  # zeros stay zeros (no replacement by 1)
    assert m.meta["constraint"] == "all" and m.meta["zero_weights_replaced"] == 0


def test_all_refuses_a_zero_first_weight_in_one_line(tmp_path):
    mesh = grid(6, 5)
    w = _three_weights(mesh.n_cells)
    w[17, 0] = 0.0
    with pytest.raises(MeshError, match=r"^mesh\.constraint: all: g: vertex 18 has first weight 0 .*must be "
                                        r"positive[^\n]*$"):
        select_constraint(read_chaco(_write(tmp_path / "g.graph", mesh, w)), "all", "g")


def test_all_on_a_single_weight_mesh_is_the_mesh():
    mesh = grid(4, 4)
    assert select_constraint(mesh, "all", "g") is mesh


def test_metis_balances_every_constraint_at_once():
    """Three weights, 6 parts of unequal targets: every weight within METIS' tolerance (ufactor 30) plus the
    granularity of its heaviest vertex over the smallest part's share (a bound METIS' refinement can reach)."""
    mesh = grid(40, 30)
    w = _three_weights(mesh.n_cells)
    targets = np.array([2.0, 1.0, 1.0, 1.0, 1.5, 1.5])
    tp = targets / targets.sum()
    own = metis_partition(mesh.xadj, mesh.adjncy, w[:, 0], 6, targets=targets, seed=1, constraints=w[:, 1:])
    assert own.shape == (mesh.n_cells,) and set(own.tolist()) == set(range(6))
    single = metis_partition(mesh.xadj, mesh.adjncy, w[:, 0], 6, targets=targets, seed=1)
    for c in range(3):
        share = np.bincount(own, w[:, c], minlength=6) / (tp * w[:, c].sum())
        bound = 1.03 + 2 * w[:, c].max() / (tp.min() * w[:, c].sum()) + 0.03
        assert share.max() <= bound, (c, share.max(), bound)
    # the further weights are what made the difference: one constraint alone leaves the third far off
    third = np.bincount(single, w[:, 2], minlength=6) / (tp * w[:, 2].sum())
    assert third.max() > 1.3


def test_metis_constraints_are_deterministic_and_checked():
    mesh = grid(20, 20)
    w = _three_weights(mesh.n_cells)
    a = metis_partition(mesh.xadj, mesh.adjncy, w[:, 0], 4, seed=5, constraints=w[:, 1:])
    b = metis_partition(mesh.xadj, mesh.adjncy, w[:, 0], 4, seed=5, constraints=w[:, 1:])
    np.testing.assert_array_equal(a, b)
    bad = w[:, 1:].copy()
    bad[3, 0] = -1.0
    from hermes.errors import GraphError

    with pytest.raises(GraphError, match="non-negative"):
        metis_partition(mesh.xadj, mesh.adjncy, w[:, 0], 4, constraints=bad)


def test_constraint_units_keep_zeros_and_integers():
    np.testing.assert_array_equal(constraint_units([0, 3, 0, 1]), [0, 3, 0, 1])
    u = constraint_units([0.0, 0.5, 1e-12, 2.0])
    assert u[0] == 0 and u[2] >= 1 and u[3] == pytest.approx(4 * u[1], rel=1e-6)
    np.testing.assert_array_equal(constraint_units([0.0, 0.0]), [0, 0])


def test_imbalance_per_constraint_is_the_loads_formula_on_each_weight():
    sums = np.array([[10.0, 3.0, 0.0], [10.0, 1.0, 0.0], [20.0, 0.0, 0.0]])
    caps = np.array([1.0, 1.0, 2.0])
    assert constraint_imbalances(sums, caps) == [1.0, 3.0 / (0.25 * 4.0), 1.0]


def test_take_rounds_to_whole_cells_within_half_a_cell():
    order = np.arange(5)
    w = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    assert _take(order, w, 2.4, 10).tolist() == [0, 1]
    assert _take(order, w, 2.5, 10).tolist() == [0, 1, 2]
    assert _take(order, w, 0.4, 10).size == 0
    assert _take(order, w, 9.0, 3).tolist() == [0, 1, 2]  # a rank keeps at least one cell: room


def test_constraint_fields_in_weight_order():
    assert constraint_fields(["u", "weight_10", "weight_2", "weight_x", "weight_3"]) == ["weight_2", "weight_3",
                                                                                        "weight_10"]
