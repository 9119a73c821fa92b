"""Under mpiexec: distributed NVB refinement equals the serial one; coarsening stays conforming and in the forest;
uniting split families first makes one distributed coarsening pass equal the serial pass on the whole mesh.

Usage: refine_script.py SEED KIND (KIND: lshape | delaunay). Prints "OK" on rank 0 when every check
passes; raises (aborting the job) otherwise. Gathering to rank 0 happens here, for checking only.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain
from scipy.spatial import Delaunay

from hermes.adaptation import adapt_mesh
from hermes.data.adapt import uniform_hash
from hermes.data.generators import lshape_triangles
from hermes.data.migrate import migrate
from hermes.data.partition import metis_partition
from hermes.data.refine import coarsen, conformity_problems, dual_graph, nvb_mesh, refine
from hermes.data.refine_dist import (
    coarsen_domain,
    gather_trimesh,
    refine_domain,
    scatter_trimesh,
    unite_families,
)
from tests.tolerances import area_tol

comm = plain(MPI.COMM_WORLD)
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
owner0 = owner
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
        assert abs(g.areas.sum() - tm0.areas.sum()) <= area_tol(g.points[g.tris]) + area_tol(
            tm0.points[tm0.tris]), f"{step}: area"
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

# max_level is a cap across ranks: the blocked edges spread like the closure; distributed == serial
capped = scatter_trimesh(comm, tm0 if rank == 0 else None, owner0, fields, weights=w0)
capped_serial = tm0
cap_rng = np.random.default_rng(np.random.SeedSequence(seed + 7).spawn(p)[rank])  # local_rng's draws stay as they were
for step in range(5):
    capped, st = refine_domain(comm, capped, geometric_mark(capped.coords, 50 + step, 0.4), max_level=3)
    capped_serial = refine(capped_serial, geometric_mark(capped_serial.centroids, 50 + step, 0.4), max_level=3).mesh
    assert comm.allreduce(st.bisections) > 0
    check_domain(capped, f"capped {step}")
    g = gather_trimesh(comm, capped)
    if rank == 0:
        assert int(g.level.max()) <= 3, f"capped {step}: a cell beyond max_level"
        assert np.array_equal(rows(g), rows(capped_serial)), f"capped {step}: distributed != serial"
    dest = cap_rng.integers(0, p, capped.n)
    dest[0] = rank
    capped, _ = migrate(comm, capped, dest)
if rank == 0:
    assert int(g.level.max()) == 3


def cell_state(dom) -> dict | None:
    """Everything the cells carry and their owner, gathered on rank 0 and sorted by id."""
    parts = comm.gather((dom.gid, dom.weight, dom.coords, dom.fields, dom.n), root=0)
    if rank != 0:
        return None
    gid = np.concatenate([q[0] for q in parts])
    o = np.argsort(gid)
    out = {"gid": gid[o], "owner": np.repeat(np.arange(p), [q[4] for q in parts])[o],
           "weight": np.concatenate([q[1] for q in parts])[o], "coords": np.concatenate([q[2] for q in parts])[o]}
    out.update({k: np.concatenate([q[3][k] for q in parts])[o] for k in parts[0][3]})
    return out


def unite_then_coarsen(dom, step: int, frac: float, what: str, skip=()):
    """unite_families + one coarsening pass against the serial pass on the gathered mesh (where the cells ``skip``
    may not be coarsened); returns the new domain, (serial merges, distributed merges without unite, cells moved)
    on rank 0 and the local cell count after unite."""
    def may(c):
        return ~geometric_mark(c, step, frac)

    g = gather_trimesh(comm, dom)
    ref = coarsen(g, may(g.centroids) & ~np.isin(g.gid, skip), passes=1) if rank == 0 else None
    _, plain = coarsen_domain(comm, dom, may(dom.coords), passes=1)  # without unite: split families stay
    before = cell_state(dom)
    united, ms = unite_families(comm, dom, may(dom.coords))
    check_domain(united, f"{what}: unite")
    after = cell_state(united)
    again = unite_families(comm, united, may(united.coords))[1]  # nothing mergeable is split any more
    assert comm.allreduce(again.cells_sent) == 0, what
    n_united = united.n
    dom, st = coarsen_domain(comm, united, may(united.coords), passes=1)
    check_domain(dom, f"{what}: coarsen")
    g2 = gather_trimesh(comm, dom)
    sent, merges, plain_m = (comm.allreduce(x) for x in (ms.cells_sent, st.merges, plain.merges))
    out = None
    if rank == 0:
        # a migration: every cell keeps everything it carries; only cells of merged (serial) pairs move
        assert all(np.array_equal(before[k], after[k]) for k in before if k != "owner"), f"{what}: not conserved"
        moved = before["gid"][before["owner"] != after["owner"]]
        assert moved.size == sent and np.all(np.isin(moved, g.gid[~np.isin(g.gid, ref.mesh.gid)])), what
        # the same cells (coordinates in NVB order, level) and ids as the serial pass on the whole mesh
        assert np.array_equal(rows(g2), rows(ref.mesh)) and np.array_equal(g2.gid, ref.mesh.gid), what
        assert merges == ref.changed and conformity_problems(g2.points, g2.tris) == [], what
        out = (ref.changed, plain_m, sent)
    return dom, out, n_united


# unite split families, then one coarsening pass: equal to the serial pass; without unite strictly fewer merges
for trial in range(2):
    dest = local_rng.integers(0, p, dom.n)  # a random partition: families split everywhere
    dest[0] = rank
    dom, _ = migrate(comm, dom, dest)
    dom, res, _ = unite_then_coarsen(dom, 50 + trial, 0.3, f"unite {trial}")
    if rank == 0:
        serial_m, plain_m, sent = res
        print(f"unite {trial}: serial pass {serial_m} merges = unite + coarsen; coarsen alone {plain_m}; "
              f"{sent} cells moved")
        assert 0 < plain_m < serial_m and sent > 0

# a contiguous (METIS) partition: families split only along the rank boundaries
g = gather_trimesh(comm, dom)
plan = None
if rank == 0:
    plan = np.full(int(g.gid.max()) + 1, -1)
    plan[g.gid] = metis_partition(*g.graph, np.ones(g.n_cells), p, seed=seed)
plan = comm.bcast(plan, root=0)
dom, _ = migrate(comm, dom, plan[dom.gid])
dom, res, _ = unite_then_coarsen(dom, 80, 0.3, "metis")
if rank == 0:
    print(f"metis: serial pass {res[0]} merges = unite + coarsen; coarsen alone {res[1]}; {res[2]} cells moved")
    assert 0 < res[1] <= res[0]  # METIS cuts few families: unite may have nothing to do (it still must agree)

# a rank that would be left empty keeps its pair: rank p-1 holds one cell of a mergeable patch, rank 0 the rest;
# the sibling comes to rank p-1 (instead of the cell going to rank 0) and the pass still equals the serial one
g = gather_trimesh(comm, dom)
plan = patch = None
if rank == 0:
    ref = coarsen(g, ~geometric_mark(g.centroids, 70, 0.3), passes=1)
    kids = np.flatnonzero(~np.isin(g.gid, ref.mesh.gid))
    m = g.tris[kids, 2]
    patch = g.gid[kids[m == m[np.argmax(np.bincount(np.searchsorted(np.unique(m), m)))]]]  # a largest patch
    owner = np.random.default_rng(seed).integers(0, p - 1, g.n_cells)
    owner[np.isin(g.gid, patch)] = 0
    owner[g.gid == patch[0]] = p - 1
    plan = np.full(int(g.gid.max()) + 1, -1)
    plan[g.gid] = owner
    lost = patch.size // 2
plan = comm.bcast(plan, root=0)
dom, _ = migrate(comm, dom, plan[dom.gid])
dom, res, n_united = unite_then_coarsen(dom, 70, 0.3, "kept")  # equal to the serial pass, nothing left out
assert (n_united == 2) == (rank == p - 1)  # rank p-1 holds the pair whole
if rank == 0:
    assert res[0] > 0 and res[2] > 0
    print(f"kept: serial {res[0]} merges = unite + coarsen with rank {p - 1} keeping its pair "
          f"(the patch has {lost} pairs)")

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
    front = np.abs(dom.coords[:, 0] - x0) < 0.1
    res = adapt_mesh(comm, dom, front, ~front, max_level=4)
    dom = res.dom
    check_domain(dom, f"front {phase}")
    assert comm.allreduce(res.bisections) > 0 and comm.allreduce(int(res.bad)) == 0
if rank == 0:
    print("OK")
