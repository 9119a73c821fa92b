"""The kernel's error indicator (jump of u across faces) and the maximum-strategy marking."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.app.mesh.indicator import jump_indicator, jump_indicator_serial, mark_max_strategy
from hermes.data.generators import grid
from tests.conftest import ROOT, run_mpi


def test_jump_is_the_largest_difference_to_a_neighbour():
    # path 0-1-2-3 with u = 0, 1, 3, 3.5 and an isolated cell 4
    xadj = np.array([0, 1, 3, 5, 6, 6])
    adjncy = np.array([1, 0, 2, 1, 3, 2])
    u = np.array([0.0, 1.0, 3.0, 3.5, 7.0])
    assert np.array_equal(jump_indicator_serial(xadj, adjncy, u), [1.0, 2.0, 2.0, 0.5, 0.0])


def test_jump_of_a_linear_field_scales_with_the_cell_size():
    """For u = x on a uniform grid the jump is the cell width: halving the cells halves the indicator."""
    for n in (8, 16):
        m = grid(n, n)
        eta = jump_indicator_serial(m.xadj, m.adjncy, m.coords[:, 0])
        width = np.ptp(m.coords[:, 0]) / (n - 1)
        assert np.allclose(eta, width)


def test_jump_indicator_matches_a_loop():
    rng = np.random.default_rng(3)
    m = grid(9, 7)
    u = rng.normal(size=m.n_cells)
    eta = jump_indicator(m.xadj, u, u[m.adjncy])
    ref = [max(abs(u[j] - u[i]) for j in m.adjncy[m.xadj[i]:m.xadj[i + 1]]) for i in range(m.n_cells)]
    assert np.array_equal(eta, ref)


def test_max_strategy_marks_and_leaves_a_band():
    eta = np.array([0.0, 0.05, 0.2, 0.5, 0.7, 1.0])
    ref, coarse, top = mark_max_strategy(plain(MPI.COMM_SELF), eta, 0.5, 0.1)
    assert top == 1.0
    assert ref.tolist() == [False, False, False, True, True, True]
    assert coarse.tolist() == [True, True, False, False, False, False]
    ref, coarse, top = mark_max_strategy(plain(MPI.COMM_SELF), np.zeros(4), 0.5, 0.1)  # flat: nothing at all
    assert top == 0.0 and not ref.any() and not coarse.any()
    with pytest.raises(ValueError, match="coarsen fraction"):
        mark_max_strategy(plain(MPI.COMM_SELF), eta, 0.3, 0.3)


@pytest.mark.slow
def test_distributed_indicator_equals_serial_under_mpiexec():
    res = run_mpi(3, ["5"], script=ROOT / "tests" / "mpi" / "indicator_script.py", timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr
