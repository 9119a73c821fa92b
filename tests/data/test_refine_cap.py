"""adaptation.max_level is a cap: the conforming closure of newest-vertex bisection never takes a cell beyond it,
serially (refine) and distributed (refine_domain, adapt_mesh on MPI.COMM_SELF), phase after phase."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.adaptation import adapt_mesh
from hermes.data.generators import grid, lshape_triangles
from hermes.data.refine import conformity_problems, from_mesh, nvb_mesh, refine
from hermes.data.refine_dist import gather_trimesh, scatter_trimesh

COMM = plain(MPI.COMM_SELF)
CAP = 3


def mesh(kind: str):
    """A mesh scaled into the unit square."""
    tm = nvb_mesh(*lshape_triangles(4)) if kind == "lshape" else from_mesh(grid(6, 5))[0]
    return replace(tm, points=tm.points / tm.points.max(axis=0))


def front(c: np.ndarray, phase: int) -> np.ndarray:
    """A disc that moves: cells inside it are marked, phase after phase (graded refinement around it)."""
    return np.hypot(c[:, 0] - 0.2 - 0.15 * phase, c[:, 1] - 0.3) < 0.2


@pytest.mark.parametrize("kind, edges", [("lshape", "all"), ("grid", "all"), ("lshape", "refinement"),
                                         ("grid", "refinement")])
def test_serial_refinement_never_exceeds_the_cap(kind, edges):
    tm = free = mesh(kind)
    for phase in range(6):
        new = refine(tm, front(tm.centroids, phase), edges=edges, max_level=CAP).mesh
        assert new.n_cells > tm.n_cells  # refinement still happens
        tm = new
        free = refine(free, front(free.centroids, phase), edges=edges).mesh
        assert conformity_problems(tm.points, tm.tris) == []
        assert int(tm.level.max()) <= CAP
    assert int(tm.level.max()) == CAP
    assert int(free.level.max()) > CAP  # the uncapped closure goes beyond: the marking tests the cap


@pytest.mark.parametrize("kind", ["lshape", "grid"])
def test_adapt_mesh_keeps_max_level_over_phases_and_equals_serial(kind):
    """The marking of this test took the old adapt_mesh (marked cells below max_level, then the closure) to
    level max_level + 1."""
    edges = "all"
    tm0 = mesh(kind)
    dom = scatter_trimesh(COMM, tm0, np.zeros(tm0.n_cells, dtype=np.int64))
    serial = tm0
    for phase in range(6):
        mark = front(dom.coords, phase)
        res = adapt_mesh(COMM, dom, mark, ~mark, max_level=CAP, edges=edges, coarsen=False)
        assert res.bisections > 0 and not res.bad
        dom = res.dom
        assert int(dom.fields["level"].max()) <= CAP
        serial = refine(serial, front(serial.centroids, phase), edges=edges, max_level=CAP).mesh
        g = gather_trimesh(COMM, dom)
        assert g.n_cells == serial.n_cells and np.array_equal(np.sort(g.level), np.sort(serial.level))
    assert int(dom.fields["level"].max()) == CAP
