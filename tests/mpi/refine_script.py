"""Under mpiexec: distributed NVB refinement equals the serial one; coarsening stays conforming and in the forest.

Usage: refine_script.py SEED KIND (KIND: lshape | delaunay). Prints "OK" on rank 0 when every check
passes; raises (aborting the job) otherwise. Gathering to rank 0 happens here, for checking only.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from scipy.spatial import Delaunay

from hermes.data.adapt import uniform_hash
from hermes.data.generators import lshape_triangles
from hermes.data.migrate import migrate
from hermes.data.partition import metis_partition
from hermes.data.refine import coarsen, conformity_problems, dual_graph, nvb_mesh, refine
from hermes.data.refine_dist import adapt_domain, coarsen_domain, gather_trimesh, refine_domain, scatter_trimesh

comm = MPI.COMM_WORLD
rank, p = comm.Get_rank(), comm.Get_size()
seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
kind = sys.argv[2] if len(sys.argv) > 2 else "lshape"

if kind == "lshape":
    tm0 = nvb_mesh(*lshape_triangles(5))
else:
    rng = np.random.default_rng(seed)
    pts = np.concatenate([rng.random((120, 2)), [[0, 0], [1, 0], [0, 1], [1, 1]]])
    tm0 = nvb_mesh(pts, Delaunay(pts).simplices)
n0 = tm0.n_cells
w0 = np.random.default_rng(seed + 1).uniform(0.5, 2.0, n0)
u0 = np.arange(n0) * 1.5
owner = metis_partition(*tm0.graph, np.ones(n0), p, seed=seed) if rank == 0 else None
fields = {"u": u0, "tag": np.arange(n0) % 7} if rank == 0 else None
dom = scatter_trimesh(comm, tm0 if rank == 0 else None, owner, fields, weights=w0)
local_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[rank])


def geometric_mark(centroids: np.ndarray, step: int, frac: float) -> np.ndarray:
    """A marking that depends on the cell's position only (ids differ between serial and distributed)."""
    q = np.round(centroids * 1e6).astype(np.int64)
    key = q[:, 0] * 1_000_003 + q[:, 1]
    return uniform_hash(seed, step, key) < frac


def rows(tm) -> np.ndarray:
    """Cells as ordered coordinate rows (NVB order included) plus level, sorted lexicographically."""
    r = np.column_stack([tm.points[tm.tris].reshape(-1, 6), tm.level])
    return r[np.lexsort(r.T[::-1])]


def check_domain(dom, step: str) -> None:
    """Gathered mesh conforming; ids unique; adjacency = edge adjacency; ghost owners exact; fields follow roots."""
    assert np.all(np.diff(dom.gid) > 0), step
    g = gather_trimesh(comm, dom)
    adj = comm.gather((dom.gid, dom.xadj, dom.adjncy, dom.nbr_owner), root=0)
    if rank == 0:
        assert np.unique(g.gid).size == g.n_cells, f"{step}: duplicate ids"
        assert conformity_problems(g.points, g.tris) == [], step
        assert abs(g.areas.sum() / tm0.areas.sum() - 1) < 1e-12, f"{step}: area"
        owner_of = np.concatenate([np.full(a[0].size, r) for r, a in enumerate(adj)])
        gids = np.concatenate([a[0] for a in adj])
        order = np.argsort(gids)
        gids, owner_of = gids[order], owner_of[order]
        pairs = []
        for gid, xadj, adjncy, nbr_owner in adj:
            rows_ = np.repeat(gid, np.diff(xadj))
            assert np.array_equal(nbr_owner, owner_of[np.searchsorted(gids, adjncy)]), f"{step}: stale ghost owner"
            pairs.append(np.column_stack([np.searchsorted(g.gid, rows_), np.searchsorted(g.gid, adjncy)]))
        pairs = np.concatenate(pairs)
        xadj, adjncy = dual_graph(g.tris)
        ref = np.column_stack([np.repeat(np.arange(g.n_cells), np.diff(xadj)), adjncy])
        assert np.array_equal(pairs[np.lexsort(pairs.T[::-1])], ref[np.lexsort(ref.T[::-1])]), f"{step}: adjacency"
    # fields and weights follow the root ancestor while nothing is averaged with a different value
    lv, lin = dom.fields["level"], dom.fields["lineage"]
    root = np.where(lv > 0, lin[:, 0] if lin.shape[1] else -1, dom.gid)
    assert np.array_equal(dom.weight, w0[root]) and np.array_equal(dom.fields["u"], u0[root]), step
    assert np.array_equal(dom.fields["tag"], root % 7) and dom.fields["tag"].dtype.kind == "i", step
    assert np.allclose(dom.coords, dom.fields["xy"].mean(axis=1)), step


serial = tm0
for step, (frac, edges) in enumerate([(0.2, "all"), (0.25, "all"), (0.3, "refinement"), (0.15, "all")]):
    dom, st = refine_domain(comm, dom, geometric_mark(dom.coords, step, frac), edges=edges)
    serial = refine(serial, geometric_mark(serial.centroids, step, frac), edges=edges).mesh
    assert comm.allreduce(st.bisections) > 0 and st.rounds >= 1
    assert comm.allreduce(dom.n) == serial.n_cells
    check_domain(dom, f"refine {step}")
    g = gather_trimesh(comm, dom)
    if rank == 0:
        assert np.array_equal(rows(g), rows(serial)), f"refine {step}: distributed != serial"
    # shuffle cells between ranks: the next refinement has many rank boundaries to agree on
    dest = local_rng.integers(0, p, dom.n)
    dest[0] = rank
    dom, _ = migrate(comm, dom, dest)

# coarsening: only complete local families merge, vertices on shared edges stay
before = comm.allreduce(dom.n)
keep = geometric_mark(dom.coords, 99, 0.3)
dom, st = coarsen_domain(comm, dom, ~keep, passes=None)
assert comm.allreduce(st.merges) > 0 and comm.allreduce(dom.n) < before
check_domain(dom, "coarsen")
g = gather_trimesh(comm, dom)
if rank == 0:
    back = coarsen(g, np.ones(g.n_cells, bool), passes=None).mesh  # still in the NVB forest of the input mesh
    assert np.array_equal(rows(back), rows(tm0)) and np.array_equal(back.gid, tm0.gid)

# a moving front: coarsen behind it, refine inside it
for phase in range(3):
    x0 = 0.2 + 0.3 * phase
    dom, cs, rs = adapt_domain(comm, dom, lambda d: np.abs(d.coords[:, 0] - x0) < 0.1, max_level=4)
    check_domain(dom, f"front {phase}")
    assert comm.allreduce(rs.bisections) > 0
if rank == 0:
    print("OK")
