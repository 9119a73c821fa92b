"""The patch test of unite_families on one rank (MPI.COMM_SELF): a cell's merge patch is found mergeable exactly
when the serial coarsening pass merges the cell; nothing moves on one rank; bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.data.distributed import halo_plan
from hermes.data.generators import grid, lshape_triangles
from hermes.data.refine import coarsen, from_mesh, nvb_mesh
from hermes.data.refine_dist import _patches, gather_trimesh, refine_domain, scatter_trimesh, unite_families
from hermes.errors import MeshError

COMM = plain(MPI.COMM_SELF)
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


# --- the partition never changes which cells coarsen, and never a cell's id (issue 38) -------------------------------
# p processors hosted in this process (hermes.runtime.hosting): the same collectives as under mpiexec, serially.

def _cell_rows(tm) -> np.ndarray:
    """Cells as (vertex coordinates in NVB order, level, id), sorted: equal meshes with equal ids give equal rows."""
    r = np.column_stack([tm.points[tm.tris].reshape(-1, 6), tm.level, tm.gid])
    return r[np.lexsort(r.T[::-1])]


def _hosted_coarsening(owner, moves, p: int, keep=()):
    """Refine every cell of a 6 x 5 grid once (refinement edges) on the partition ``owner``, send the children
    ``moves`` ((parent, 0 | 1 | 2 for both children, rank)) to their rank, then unite + one coarsening pass of
    everything but the children of ``keep`` on p hosted processors. Returns (mesh before the pass, mesh after
    it, cells per processor)."""
    from hermes.data.migrate import migrate
    from hermes.data.refine_dist import coarsen_domain
    from hermes.runtime.start import start

    tm0 = from_mesh(grid(6, 5))[0]

    def job(comm):
        root = comm.Get_rank() == 0
        dom = scatter_trimesh(comm, tm0 if root else None, owner if root else None)
        dom, _ = refine_domain(comm, dom, np.ones(dom.n, bool), edges="refinement")
        parent = dom.fields["lineage"][:, 0]
        dest = np.full(dom.n, comm.Get_rank())
        for par, which, r in moves:  # the first child (c, a, m) has the even id, the smaller one
            kids = (parent == par) & ((which == 2) | (dom.gid % 2 == which))
            dest[kids] = r
        dom, _ = migrate(comm, dom, dest)
        before = gather_trimesh(comm, dom)
        dom, st = unite_families(comm, dom, ~np.isin(dom.fields["lineage"][:, 0], keep))
        # the patches unite found, handed over (None after a refill: coarsen_domain finds them itself)
        dom, _ = coarsen_domain(comm, dom, ~np.isin(dom.fields["lineage"][:, 0], keep), passes=1,
                                mergeable=st.mergeable)
        return before, gather_trimesh(comm, dom), dom.n, st.mergeable is None

    out = start(p, job)
    assert len({out[r][3] for r in range(p)}) == 1
    return out[0][0], out[0][1], [out[r][2] for r in range(p)], out[0][3]


def _owner(p: int, **cells) -> np.ndarray:
    o = np.zeros(30 * 2, dtype=np.int64)
    for r, c in cells.items():
        o[np.asarray(c)] = int(r[1:])
    return o


@pytest.mark.parametrize("case", ["whole pair", "split pair", "gift", "gift of a loose cell"])
def test_a_rank_about_to_be_emptied_changes_no_merge(case):
    """Rank 1 (and 2) hold only cells of mergeable patches that straddle ranks: the old unite left such a rank's
    patches split (a veto), so the distributed pass merged fewer pairs than the serial one (62 cells for 60).
    Now the pass equals the serial one cell for cell, ids included, and no processor is left empty.

    whole pair: rank 1 holds both children of cell 7, their patch straddles ranks 0 and 1;
    split pair: rank 1 holds one child of cell 7 only (the sibling comes to it: rank 0 can spare it);
    gift: ranks 1 and 2 hold the two children of cell 7 (rank 1 cannot spare the pair: rank 0 gives rank 2 one);
    gift of a loose cell: the same, cells 0-5 not coarsened (rank 0 gives one of them, which merges with nothing).
    (The children of cell k are 60 + 2k and 61 + 2k: the serial numbering, which the ranks now follow.)
    """
    if case == "whole pair":
        p, owner, moves = 2, _owner(2, r1=[7]), []
    elif case == "split pair":
        p, owner, moves = 2, _owner(2, r1=[7]), [(7, 0, 0)]
    else:
        p, owner, moves = 3, _owner(3, r1=[7], r2=[8]), [(7, 1, 2), (8, 2, 0)]
    keep = np.arange(6) if case == "gift of a loose cell" else ()
    before, after, cells, refilled = _hosted_coarsening(owner, moves, p, keep)
    assert refilled == (case != "whole pair")
    serial = coarsen(before, ~np.isin(before.lineage[:, 0], keep), passes=1).mesh
    assert serial.n_cells > 60 if len(keep) else serial.n_cells == 60
    assert np.array_equal(_cell_rows(after), _cell_rows(serial))
    assert min(cells) >= 1 and sum(cells) == serial.n_cells


def test_refill_plan_prefers_the_emptied_ranks_own_pair_then_the_richest_donor():
    from hermes.data.refine_dist import refill_plan

    assert refill_plan(np.array([3, 1, 2]), [[], [], []]) == ({}, [])
    # rank 2 would be emptied; its pair with rank 0 (parent 40) comes to it, rank 0 having 3 units to spare
    assert refill_plan(np.array([3, 1, 0]), [[], [], [(0, 40)]]) == ({40: 2}, [])
    # rank 1 cannot spare its only unit: the richest donor gives one (the lowest rank of the richest)
    assert refill_plan(np.array([1, 1, 0, 3, 3]), [[], [], [(1, 9)], [], []]) == ({}, [(3, 2)])
    # two emptied ranks, one donor with two to spare
    assert refill_plan(np.array([3, 0, 0]), [[], [(0, 5)], [(0, 6)]]) == ({5: 1, 6: 2}, [])
    with pytest.raises(MeshError, match="^coarsening would leave 2 cells for 3 ranks"):
        refill_plan(np.array([2, 0, 0]), [[], [(0, 5)], [(0, 6)]])


@pytest.mark.parametrize("p, seed", [(3, 0), (4, 1), (5, 2)])
def test_distributed_refinement_numbers_cells_as_the_serial_code(p, seed):
    """The children of a bisection get the ids the serial refinement gives them, whatever the partition: the
    old code numbered them by rank (an exclusive scan), so ids — and the order in which the Jacobi kernel sums a
    cell's neighbours — depended on the partition, and the solution and the indicator's marking with them."""
    from hermes.data.refine import refine
    from hermes.runtime.start import start

    tm0 = from_mesh(grid(6, 5))[0]
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, p, tm0.n_cells)
    owner[:p] = np.arange(p)  # nobody empty
    marks = [rng.random(tm0.n_cells * 8) < 0.3 for _ in range(3)]

    def job(comm):
        root = comm.Get_rank() == 0
        dom = scatter_trimesh(comm, tm0 if root else None, owner if root else None)
        for step, m in enumerate(marks):
            dom, _ = refine_domain(comm, dom, m[dom.gid % m.size], edges="all" if step % 2 else "refinement",
                                   max_level=3)
        return gather_trimesh(comm, dom)

    got = start(p, job)[0]
    tm = tm0
    for step, m in enumerate(marks):
        tm = refine(tm, m[tm.gid % m.size], edges="all" if step % 2 else "refinement", max_level=3).mesh
    assert tm.n_cells > 2 * tm0.n_cells
    assert np.array_equal(_cell_rows(got), _cell_rows(tm))
    assert np.array_equal(got.gid, tm.gid) and np.array_equal(got.lineage, tm.lineage)
