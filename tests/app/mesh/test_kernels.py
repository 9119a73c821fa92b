"""The serial Jacobi reference as one CSR mat-vec per sweep (hermes.app.mesh.kernels.jacobi_sweeps) gives the bits of
the row-by-column form it replaced (``_row_sums`` of ``u[adjncy]``): both add each row's neighbour values left to right
from 0.0 in the stored order, and the CSR product multiplies by exactly 1.0 — the same floating-point operations in
the same order, so the comparison is exact equality, with no tolerance, on any IEEE-754 machine."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.mesh.kernels import SIGMA, _row_sums, jacobi_sweeps, neighbour_sum_matrix, source_term
from hermes.data.generators import grid


def _reference(xadj, adjncy, f, u, sweeps):
    """The form before: column k of every row added in order k = 0, 1, ..."""
    deg = np.diff(xadj)
    for _ in range(sweeps):
        u = (f + _row_sums(xadj, u[adjncy])) / (SIGMA + deg)
    return u


def _random_graph(rng, n):
    """Rows of 0-9 neighbours in no particular order, some repeated (the CSR form must neither sort nor merge)."""
    deg = rng.integers(0, 10, n)
    xadj = np.concatenate(([0], np.cumsum(deg))).astype(np.int64)
    adjncy = rng.integers(0, n, int(xadj[-1])).astype(np.int64)
    return xadj, adjncy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_csr_sweeps_are_the_row_sums_bit_for_bit_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    xadj, adjncy = _random_graph(rng, 500)
    f = rng.standard_normal(500) * 10.0 ** rng.integers(-8, 8, 500)
    u = rng.standard_normal(500) * 10.0 ** rng.integers(-8, 8, 500)
    u[::7] = -0.0
    got, want = jacobi_sweeps(xadj, adjncy, f, u, 5), _reference(xadj, adjncy, f, u, 5)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))  # every bit, signs of zeros included


def test_csr_sweeps_are_the_row_sums_bit_for_bit_on_a_mesh():
    mesh = grid(40, 30)
    f = source_term(mesh.coords)
    u0 = np.zeros(mesh.n_cells)
    got = jacobi_sweeps(mesh.xadj, mesh.adjncy, f, u0, 60)
    want = _reference(mesh.xadj, mesh.adjncy, f, u0, 60)
    assert np.array_equal(got, want) and np.any(got != 0)


def test_the_matrix_keeps_the_stored_order_and_repeats():
    xadj, adjncy = np.array([0, 3, 3, 5]), np.array([2, 0, 2, 1, 1])
    a = neighbour_sum_matrix(xadj, adjncy)
    assert a.indices.tolist() == [2, 0, 2, 1, 1] and a.indptr.tolist() == [0, 3, 3, 5]
    assert (a @ np.array([1.0, 10.0, 100.0])).tolist() == [201.0, 0.0, 20.0]


def test_zero_sweeps_return_the_start():
    xadj, adjncy = np.array([0, 1, 2]), np.array([1, 0])
    u = np.array([1.0, 2.0])
    assert jacobi_sweeps(xadj, adjncy, np.zeros(2), u, 0) is u
