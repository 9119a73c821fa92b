"""The patch test of unite_families on one rank (MPI.COMM_SELF): a cell's merge patch is found mergeable exactly
when the serial coarsening pass merges the cell; nothing moves on one rank; bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from hermes.data.distributed import halo_plan
from hermes.data.generators import grid, lshape_triangles
from hermes.data.refine import coarsen, from_mesh, nvb_mesh
from hermes.data.refine_dist import _patches, gather_trimesh, refine_domain, scatter_trimesh, unite_families
from hermes.errors import MeshError

COMM = MPI.COMM_SELF


def refined(kind: str, seed: int):
    """A refined domain on one rank and the same mesh as a TriMesh (cells in the same order)."""
    tm = nvb_mesh(*lshape_triangles(4)) if kind == "lshape" else from_mesh(grid(6, 5))[0]
    dom = scatter_trimesh(COMM, tm, np.zeros(tm.n_cells, dtype=np.int64))
    rng = np.random.default_rng(seed)
    for step in range(4):
        dom, _ = refine_domain(COMM, dom, rng.random(dom.n) < 0.3, edges="all" if step % 2 else "refinement")
    return dom, gather_trimesh(COMM, dom)


@pytest.mark.parametrize("kind, seed", [("lshape", 0), ("grid", 1), ("lshape", 2)])
def test_patch_is_mergeable_exactly_when_the_serial_pass_merges(kind, seed):
    dom, tm = refined(kind, seed)
    mask = np.random.default_rng(seed + 10).random(tm.n_cells) < 0.8
    ok, lo, hi, rounds = _patches(COMM, dom, halo_plan(dom), mask & (tm.level > 0))
    merged = ~np.isin(tm.gid, coarsen(tm, mask, passes=1).mesh.gid)
    assert merged.sum() > 10 and (~merged & mask & (tm.level > 0)).sum() > 10  # both outcomes occur
    assert np.array_equal(ok, merged)
    assert np.all(lo == 0) and np.all(hi == 0) and 1 <= rounds <= 3
    out, st = unite_families(COMM, dom, mask)  # one rank: nothing is split, nothing moves
    assert st.cells_sent == 0 and np.array_equal(out.gid, dom.gid)


def test_unite_refuses_a_bad_mask():
    dom, tm = refined("grid", 3)
    with pytest.raises(MeshError, match="^unite: the domain needs fields"):
        unite_families(COMM, dom, np.ones(tm.n_cells - 1, dtype=bool))
