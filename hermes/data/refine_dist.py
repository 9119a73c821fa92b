"""Distributed newest-vertex bisection: each rank refines and coarsens its own cells of a LocalDomain.

The domain carries its geometry as per-cell fields (they migrate with the cells like any field):

``nodes`` (n, 3) int64
    Global vertex ids in NVB order ``(a, b, c)``: refinement edge ``a–b``, newest vertex ``c``.
``xy`` (n, 3, 2) float64
    The coordinates of those vertices (each rank's vertex table is ``unique(nodes)`` with them).
``level`` (n,) int64 and ``lineage`` (n, D) int64
    The refinement history of :mod:`hermes.data.refine`; D is the global maximum level.

:func:`refine_domain` (collective)
    1. Edges shared with another rank are found by sending, to each neighbouring rank, the keys of
       the local boundary edges of the cells that touch it (an edge has at most one partner rank).
    2. Closure: the local NVB closure runs to its fixpoint, newly marked shared edges go to the
       partner, and this repeats until an allreduce sees no rank receive a new mark; both sides of
       every shared edge then agree on its marking. With ``max_level`` the marking is first capped:
       the edges whose closure would bisect a cell beyond the cap are found the same way (the
       backward closure, exchanged until no rank receives a new one) and marked cells touching them
       are dropped (:func:`hermes.data.refine.capped_marks`).
    3. New vertices: a marked edge belongs to the lower of its ranks; owners number their marked
       edges in key order from ``max vertex id + 1`` plus an exclusive scan of the counts, and send
       the ids of shared edges to the partner. Both sides compute the midpoint as
       ``0.5 (x_lo + x_hi)``, bit for bit what the serial code computes.
    4. Bisection as in the serial code, ids included: in each round the children of the ``k``-th
       parent in the global id order get ``next + 2k`` and ``next + 2k + 1`` (:func:`id_ranks`: each
       parent id goes to the rank owning its block of ids, which sorts its block; an exclusive scan of
       the blocks' counts gives the offsets — two all-to-alls per round, at most two rounds). A cell's
       id, hence the order of every adjacency row (sorted by id) and of the kernel's sums over it, never
       depends on the partition. Fields move with :func:`hermes.data.refine.transfer_values`.
    5. The dual graph is rebuilt from the edges: local pairs directly, cut pairs by sending each
       neighbour the (edge key, cell id) of the boundary edges of cells that touched it. The whole
       local graph is rebuilt in one vectorised pass (as cheap as finding the affected cells);
       the set of neighbouring ranks does not change.
:func:`coarsen_domain` (collective)
    The serial pass, except that a sibling pair split over two ranks is left alone and a vertex on an
    edge shared with another rank is removed only when its whole merge patch is mergeable and made
    of pairs each whole on one rank (found as in steps 1–2 below): every rank holding a pair of it
    then merges that pair, and the parents meet conforming along the patch's old edges.
:func:`unite_families` (collective, a migration: call it before :func:`coarsen_domain`)
    Brings split sibling pairs together, as p4est partitions a family onto one rank before coarsening.
    The *merge patch* of a newest vertex ``m`` is the set of cells around ``m`` — two sibling pairs
    inside the domain, one on its boundary; the serial pass removes ``m`` exactly when every cell
    of the patch may be coarsened (in the mask, level > 0) and has ``m`` as newest vertex.

    1. One ghost exchange gives every rank the ``nodes`` and candidacy of the cells across its cut.
       A local candidate is *good* when every edge neighbour containing its newest vertex ``m`` is a
       candidate with newest vertex ``m`` as well.
    2. Min/max propagation over the patches (ghost exchanges of ``(ok, lowest owner, highest
       owner)`` between cells sharing ``m``, until an allreduce sees no change; a patch has at most
       4 cells, so this takes 2 rounds plus the one that sees the fixpoint) gives every cell
       whether its whole patch is good and the lowest and highest rank holding part of it.
    3. A sibling pair of a good patch split over two ranks (each child knows its sibling's rank: one
       ghost exchange of the parents' ids) goes to the lower of the two; nothing else moves.
    4. No rank may be left empty (:func:`hermes.data.distributed.assemble` refuses it), and no merge
       may be given up for it: a rank whose every cell would leave — it holds only halves of split
       pairs, each the higher half — keeps one of its pairs (the other child comes to it) when the
       other holder has a cell or pair to spare; otherwise the rank with the most to spare gives it
       a cell that merges with nothing, or a whole pair (:func:`refill_plan`, the same on every rank
       from one allgather of the counts and the emptied ranks' pairs; only when some rank would be
       emptied). Counted in cells after the merges, there are always enough: the mesh after the pass
       has at least as many cells as the initial mesh, hence as ranks.
       :func:`hermes.data.migrate.migrate` then moves the cells with all their fields.

    Afterwards every mergeable pair lies on one rank, so ``coarsen_domain(passes=1)`` merges the
    same pairs as the serial :func:`hermes.data.refine.coarsen` pass on the whole mesh, whatever the
    partition. (Until issue 38 whole patches moved to their lowest rank, and a rank that would have
    been left empty vetoed its patches: they stayed split and unmerged, and the adaptation depended
    on the partition.) Later passes of one ``coarsen_domain(passes>1)`` call may meet split parent
    pairs again (unite once more between single passes to follow the serial passes exactly).

No rank gathers the mesh: only neighbour messages, scans and allreduces of scalars, the all-to-alls
of the migration's directory refresh and of the id numbering (each rank sees its block of ids).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.runtime.comm import Bookkeeping, agree, exchange_objects
from hermes.data.distributed import HaloPlan, LocalDomain, halo_plan, scatter_domain
from hermes.data.migrate import MigrationStats, migrate
from hermes.data.refine import (
    TriMesh,
    bisect_marked,
    capped_marks,
    edge_ends,
    edge_table,
    forbidden_edges,
    merge_pairs,
    nvb_blocked,
    nvb_closure,
    transfer_values,
)
from hermes.errors import MeshError

__all__ = ["GEOMETRY_FIELDS", "AdaptStats", "geometry_fields", "scatter_trimesh", "refine_domain",
           "coarsen_domain", "unite_families", "UniteStats", "refill_plan", "id_ranks", "gather_trimesh"]

GEOMETRY_FIELDS = ("nodes", "xy", "level", "lineage")
_TAG = 2400


@dataclass
class AdaptStats:
    """What one refinement or coarsening did on this rank."""

    cells_before: int = 0
    cells_after: int = 0
    bisections: int = 0
    merges: int = 0
    new_vertices: int = 0
    rounds: int = 0


def geometry_fields(tm: TriMesh) -> dict[str, NDArray]:
    """The per-cell geometry fields of a :class:`TriMesh` (indexed like its cells)."""
    return {"nodes": tm.tris.copy(), "xy": tm.points[tm.tris], "level": tm.level.copy(), "lineage": tm.lineage.copy()}


def scatter_trimesh(comm, tm: TriMesh | None, owner: NDArray[np.int64] | None,
                    fields: dict[str, NDArray] | None = None,
                    weights: NDArray[np.float64] | None = None) -> LocalDomain:
    """Distribute an initial triangle mesh (ids 0..T−1) from rank 0 with its geometry fields (collective)."""

    def prepare():
        if comm.Get_rank() != 0:
            return None, None
        if not np.array_equal(tm.gid, np.arange(tm.n_cells)):
            raise MeshError("scatter_trimesh: cell ids must be 0..T-1 (an initial or renumbered mesh)")
        return tm.to_mesh(weights=weights), {**geometry_fields(tm), **(fields or {})}

    mesh, allf = agree(comm, prepare)
    return scatter_domain(comm, mesh, owner, allf)


def _touching(dom: LocalDomain) -> NDArray[np.bool_]:
    """(n_neighbours, n) : which cells have a cut neighbour on each neighbouring rank."""
    out = np.zeros((dom.neighbour_ranks.size, dom.n), dtype=bool)
    cut = dom.cut_mask
    k = np.searchsorted(dom.neighbour_ranks, dom.nbr_owner[cut])
    out[k, dom.rows[cut]] = True
    return out


def _match_boundary(comm, ranks, touch, tris, gid, tag):
    """Partner rank and partner cell id of every local edge (−1: none) plus the local edge table."""
    keys, t2e = edge_table(tris)
    flat = t2e.ravel()
    count = np.bincount(flat, minlength=keys.size)
    owner_cell = np.empty(keys.size, dtype=np.int64)
    owner_cell[flat] = np.arange(flat.size) // 3  # the cell of a boundary edge (unique when count == 1)
    bnd = count == 1
    payloads = []
    for k in range(len(ranks)):
        e = np.unique(t2e[touch[k]].ravel())
        e = e[bnd[e]]
        payloads.append((keys[e], gid[owner_cell[e]]))
    partner = np.full(keys.size, -1, dtype=np.int64)
    partner_gid = np.full(keys.size, -1, dtype=np.int64)
    clash = False
    for r, (k, g) in zip(ranks, exchange_objects(comm, ranks, payloads, tag)):
        if k.size == 0 or keys.size == 0:
            continue
        pos = np.minimum(np.searchsorted(keys, k), keys.size - 1)
        hit = (keys[pos] == k) & bnd[pos]
        clash |= bool(np.any(partner[pos[hit]] >= 0))
        partner[pos[hit]] = r
        partner_gid[pos[hit]] = g[hit]
    if comm.allreduce(int(clash)):
        raise RuntimeError("an edge is shared by more than two triangles across ranks")
    return keys, t2e, count, owner_cell, partner, partner_gid


def _adjacency(rank, keys, t2e, count, owner_cell, partner, partner_gid, gid):
    """Local CSR adjacency (neighbour ids sorted) and neighbour owners from the edge table."""
    flat = t2e.ravel()
    order = np.argsort(flat, kind="stable")
    same = np.flatnonzero(flat[order][1:] == flat[order][:-1])
    i, j = order[same] // 3, order[same + 1] // 3
    cross = np.flatnonzero((count == 1) & (partner >= 0))
    rows = np.concatenate([i, j, owner_cell[cross]])
    nbr = np.concatenate([gid[j], gid[i], partner_gid[cross]])
    own = np.concatenate([np.full(2 * i.size, rank, dtype=np.int64), partner[cross]])
    o = np.lexsort((nbr, rows))
    xadj = np.zeros(gid.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=gid.size), out=xadj[1:])
    return xadj, nbr[o], own[o]


def _vertex_table(nodes, xy):
    vid, first = np.unique(nodes.ravel(), return_index=True)
    return vid, xy.reshape(-1, 2)[first]


def _sync_lineage(comm, level, lineage):
    width = int(Bookkeeping(comm).max(int(level.max(initial=0))))
    if lineage.shape[1] >= width:
        return lineage[:, :width]
    return np.concatenate([lineage, np.full((lineage.shape[0], width - lineage.shape[1]), -1, np.int64)], axis=1)


def _check(comm, dom: LocalDomain, mask, what: str) -> NDArray[np.bool_]:
    missing = [k for k in GEOMETRY_FIELDS if k not in dom.fields]
    m = np.asarray(mask)
    bad = bool(missing) or m.dtype != bool or m.shape != (dom.n,)
    if comm.allreduce(int(bad)):
        raise MeshError(f"{what}: the domain needs fields {', '.join(GEOMETRY_FIELDS)} and one boolean per cell")
    return m


def _rebuild(comm, dom: LocalDomain, transfer, tris, gid, level, lineage, xy) -> LocalDomain:
    """The new domain: fields transferred, geometry set, adjacency rebuilt (collective)."""
    ranks = dom.neighbour_ranks
    touch = (transfer @ _touching(dom).T.astype(np.float64)).T > 0 if ranks.size else np.zeros((0, gid.size), bool)
    keys, t2e, count, owner_cell, partner, pgid = _match_boundary(comm, ranks, touch, tris, gid, _TAG + 3)
    xadj, adjncy, nbr_owner = _adjacency(dom.rank, keys, t2e, count, owner_cell, partner, pgid, gid)
    fields = {k: transfer_values(transfer, v) for k, v in dom.fields.items() if k not in GEOMETRY_FIELDS}
    fields.update(nodes=tris, xy=xy, level=level, lineage=_sync_lineage(comm, level, lineage))
    return LocalDomain(rank=dom.rank, size=dom.size, gid=gid, weight=transfer_values(transfer, dom.weight),
                       coords=xy.mean(axis=1), xadj=xadj, adjncy=adjncy, nbr_owner=nbr_owner, fields=fields)


def _spread(comm, ranks, keys, partner, t2e, marks, step, tag) -> tuple[NDArray[np.bool_], int]:
    """``step`` (a local closure) to its fixed point on every rank, newly set shared edges sent to their
    partner, until no rank receives a new one (collective). Returns (marks, rounds)."""
    sent = np.zeros(keys.size, dtype=bool)
    rounds = 0
    while True:
        marks = step(t2e, marks)
        fresh = marks & (partner >= 0) & ~sent
        sent |= fresh
        got = exchange_objects(comm, ranks, [keys[fresh & (partner == r)] for r in ranks], tag)
        new = 0
        for k in got:
            pos = np.searchsorted(keys, k)
            new += int(np.count_nonzero(~marks[pos]))
            marks[pos] = True
            sent[pos] = True  # the partner knows
        rounds += 1
        if comm.allreduce(new) == 0:
            return marks, rounds


def refine_domain(comm, dom: LocalDomain, marked: NDArray[np.bool_], *, edges: str = "all",
                  max_level: int | None = None) -> tuple[LocalDomain, AdaptStats]:
    """Refine the marked local cells by NVB, conforming across ranks (collective; module docstring).

    With ``max_level``, marked cells whose refinement would force a cell (on any rank) beyond that level
    are dropped first (:func:`hermes.data.refine.capped_marks`; the blocked edges spread across ranks
    like the closure). Returns the new domain (cells sorted by id, adjacency and ghost owners exact) and
    this rank's counts. Same cells and fields as :func:`hermes.data.refine.refine` on the whole mesh,
    up to ids.
    """
    rank = comm.Get_rank()
    marked = _check(comm, dom, marked, "refine")
    nodes, xy = dom.fields["nodes"], dom.fields["xy"]
    ranks = dom.neighbour_ranks
    keys, t2e, _, _, partner, _ = _match_boundary(comm, ranks, _touching(dom), nodes, dom.gid, _TAG)
    level = dom.fields["level"]
    blocked = forbidden_edges(t2e, keys.size, level, max_level)
    if max_level is not None:
        blocked, _ = _spread(comm, ranks, keys, partner, t2e, blocked, nvb_blocked, _TAG + 7)
    em = capped_marks(t2e, keys.size, level, marked, edges, max_level, blocked)
    # the distributed closure: the same spreading as the blocked edges', with the closure as the local step
    em, rounds = _spread(comm, ranks, keys, partner, t2e, em, lambda t, m: nvb_closure(t, m)[0], _TAG + 1)
    # vertex ids: the lower rank of an edge numbers it
    owned = em & ((partner < 0) | (partner > rank))
    n_own = int(owned.sum())
    next_vid = Bookkeeping(comm).max(int(nodes.max(initial=-1))) + 1
    vid_e = np.full(keys.size, -1, dtype=np.int64)
    vid_e[owned] = next_vid + comm.scan(n_own) - n_own + np.arange(n_own, dtype=np.int64)
    give = [em & owned & (partner == r) if r > rank else np.zeros(keys.size, bool) for r in ranks]
    for k, v in exchange_objects(comm, ranks, [(keys[g], vid_e[g]) for g in give], _TAG + 2):
        vid_e[np.searchsorted(keys, k)] = v
    if comm.allreduce(int(np.any(vid_e[em] < 0))):
        raise RuntimeError("refinement: a marked shared edge got no vertex id from its owner")
    # bisection, the children numbered as the serial code numbers them (the parents' global order by id)
    n_bis = int(em[t2e].sum())
    next_gid = Bookkeeping(comm).max(int(max(dom.gid.max(initial=-1), dom.fields["lineage"].max(initial=-1)))) + 1
    mid_keys, mid_vid = keys[em], vid_e[em]
    tris, gid, level, lineage, src, done, _ = bisect_marked(nodes, dom.gid, dom.fields["level"],
                                                            dom.fields["lineage"], mid_keys, mid_vid, next_gid,
                                                            number=_SerialNumbering(comm, next_gid))
    if done != n_bis:
        raise RuntimeError(f"refinement: {done} bisections, {n_bis} expected")
    vid, vxy = _vertex_table(nodes, xy)
    lo, hi = edge_ends(mid_keys)
    mxy = 0.5 * (vxy[np.searchsorted(vid, lo)] + vxy[np.searchsorted(vid, hi)])
    allv = np.concatenate([vid, mid_vid])
    allxy = np.concatenate([vxy, mxy])
    o = np.argsort(allv, kind="stable")
    allv, allxy = allv[o], allxy[o]
    new_xy = allxy[np.searchsorted(allv, tris)]
    transfer = sp.csr_array((np.ones(src.size), (np.arange(src.size), src)), shape=(src.size, dom.n))
    out = _rebuild(comm, dom, transfer, tris, gid, level, lineage, new_xy)
    return out, AdaptStats(dom.n, out.n, done, 0, n_own, rounds)


def id_ranks(comm, ids: NDArray[np.int64], bound: int) -> tuple[NDArray[np.int64], int]:
    """For each of this rank's ``ids`` (sorted, distinct over all ranks, in ``[0, bound)``): how many ids of
    all ranks are smaller; and how many there are in all (collective).

    The ids go to the rank owning their block of ``[0, bound)`` (an all-to-all), which sorts what it
    received; an exclusive scan of the blocks' counts gives each block's offset, and the answers go back
    (a second all-to-all) — no rank sees more than its block. One allreduce first: a round without ids
    anywhere costs nothing more.
    """
    total = int(comm.allreduce(int(ids.size)))
    if total == 0:  # (the round after the last bisection: one allreduce)
        return np.zeros(0, dtype=np.int64), 0
    p = comm.Get_size()
    block = max(-(-int(bound) // p), 1)
    cuts = np.searchsorted(ids // block, np.arange(p + 1))
    got = comm.alltoall([ids[cuts[r]:cuts[r + 1]] for r in range(p)])
    mine = np.sort(np.concatenate(got))
    offset = comm.scan(int(mine.size)) - int(mine.size)
    back = comm.alltoall([offset + np.searchsorted(mine, g) for g in got])
    return np.concatenate(back).astype(np.int64), total


class _SerialNumbering:
    """The ``number`` of :func:`hermes.data.refine.bisect_marked` for a distributed mesh: the children of a
    round's ``k``-th parent in the global id order get ``next + 2k`` and ``next + 2k + 1``, as in the serial
    code, so a cell's id never depends on the partition (collective; :func:`id_ranks` once per round)."""

    def __init__(self, comm, next_gid: int) -> None:
        self.comm, self.next = comm, int(next_gid)

    def __call__(self, parents: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
        k, total = id_ranks(self.comm, parents, self.next)
        first = self.next + 2 * k
        self.next += 2 * total
        return first, total


def coarsen_domain(comm, dom: LocalDomain, mask: NDArray[np.bool_], *, passes: int | None = 1,
                   mergeable: NDArray[np.bool_] | None = None) -> tuple[LocalDomain, AdaptStats]:
    """Merge local sibling pairs whose both cells are in ``mask`` (collective; module docstring).

    ``passes`` coarsening passes (``None``: until no rank merges anything). A vertex on an edge shared
    with another rank is removed only where its whole merge patch is mergeable and each of its sibling
    pairs lies whole on one rank (what :func:`unite_families` arranges): every rank holding a pair of it
    merges it in the first pass, so both sides stay conforming. Other such vertices are never removed.
    Those patches are found here (two ghost exchanges and the patch propagation), or handed over as
    ``mergeable`` — :attr:`UniteStats.mergeable` of the :func:`unite_families` just before, same mask.
    """
    mask = _check(comm, dom, mask, "coarsen")
    nodes = dom.fields["nodes"]
    keys, _, _, _, partner, _ = _match_boundary(comm, dom.neighbour_ranks, _touching(dom), nodes, dom.gid, _TAG + 4)
    if mergeable is None:
        plan = halo_plan(dom)
        whole = mask & (dom.fields["level"] > 0) & (_sibling_owner(comm, dom, plan) == dom.rank)
        mergeable = _patches(comm, dom, plan, whole)[0]
    frozen = np.setdiff1d(np.concatenate(edge_ends(keys[partner >= 0])), nodes[mergeable, 2])
    tris, gid, level, lineage = nodes, dom.gid, dom.fields["level"], dom.fields["lineage"]
    transfer = sp.eye_array(dom.n, format="csr")
    merged = rounds = 0
    while passes is None or rounds < passes:
        tris, gid, level, lineage, P, k, _ = merge_pairs(tris, gid, level, lineage, mask, frozen)
        transfer = sp.csr_array(P @ transfer)
        mask = (P @ mask.astype(np.float64)) > 0.75
        merged += k
        rounds += 1
        if comm.allreduce(k) == 0:
            break
    transfer.sort_indices()
    vid, vxy = _vertex_table(nodes, dom.fields["xy"])
    out = _rebuild(comm, dom, transfer, tris, gid, level, lineage, vxy[np.searchsorted(vid, tris)])
    return out, AdaptStats(dom.n, out.n, 0, merged, 0, rounds)


def _halo_values(comm, plan: HaloPlan, arrays: list[NDArray], tag: int) -> list[NDArray]:
    """The values of the ghost cells (concatenated in ``plan.recv_gid`` order) for each local array."""
    got = exchange_objects(comm, plan.ranks, [[a[i] for a in arrays] for i in plan.send_idx], tag)
    return [np.concatenate([g[k] for g in got]) if got else a[:0] for k, a in enumerate(arrays)]


def _entry_pos(dom: LocalDomain, plan: HaloPlan) -> tuple[NDArray[np.int64], bool]:
    """Per adjacency entry the index of the neighbour in the (local cells, ghosts in ``plan.recv_gid`` order)
    table, and whether every neighbour was found there (pure)."""
    tab_gid = np.concatenate([dom.gid, *plan.recv_gid])
    order = np.argsort(tab_gid)
    pos = order[np.minimum(np.searchsorted(tab_gid[order], dom.adjncy), max(tab_gid.size - 1, 0))]
    return pos, bool(tab_gid.size or not dom.adjncy.size) and bool(np.array_equal(tab_gid[pos], dom.adjncy))


def _parents(dom: LocalDomain) -> NDArray[np.int64]:
    """The id of each local cell's parent (−1 for a cell of the initial mesh)."""
    level, lin = dom.fields["level"], dom.fields["lineage"]
    if lin.shape[1] == 0:
        return np.full(dom.n, -1, dtype=np.int64)
    return np.where(level > 0, lin[np.arange(dom.n), np.clip(level - 1, 0, lin.shape[1] - 1)], -1)


def _sibling_owner(comm, dom: LocalDomain, plan: HaloPlan) -> NDArray[np.int64]:
    """Per local cell the rank holding its sibling — the other child of its parent, an edge neighbour — or
    −1 when it has none as a leaf (a cell of the initial mesh, or a sibling refined further). Collective:
    one ghost exchange of the parents' ids."""
    parent = _parents(dom)
    (g_parent,) = _halo_values(comm, plan, [parent], _TAG + 8)
    pos, found = _entry_pos(dom, plan)
    if comm.allreduce(int(not found or g_parent.shape[0] != sum(g.size for g in plan.recv_gid))):
        raise RuntimeError("unite: ghost cells do not match the halo plan (stale ghost owners?)")
    rows = dom.rows
    mine = parent[rows]
    sib = (mine >= 0) & (np.concatenate([parent, g_parent])[pos] == mine)
    out = np.full(dom.n, -1, dtype=np.int64)
    out[rows[sib]] = dom.nbr_owner[sib]
    return out


def _fan(dom: LocalDomain, plan: HaloPlan, nodes_tab: NDArray[np.int64], cand_tab: NDArray[np.bool_]):
    """Local part of step 1 (module docstring), pure: per adjacency entry the index of the neighbour in
    the (local, ghost) table and whether it links the row to its patch; per cell whether it is good;
    whether every neighbour was found in the table."""
    pos, found = _entry_pos(dom, plan)
    rows = dom.rows
    m = nodes_tab[rows, 2]
    shares = np.any(nodes_tab[pos] == m[:, None], axis=1)
    same = cand_tab[pos] & (nodes_tab[pos, 2] == m)
    good = cand_tab[:dom.n] & (np.bincount(rows[shares & ~same], minlength=dom.n) == 0)
    return pos, shares & good[rows], good, found


def _patches(comm, dom: LocalDomain, plan: HaloPlan, cand: NDArray[np.bool_]):
    """Per local cell: whether its whole merge patch is good, the lowest and the highest rank holding a
    cell of it (steps 1–2 of the module docstring; collective). Returns (ok, lo, hi, rounds)."""
    nodes = dom.fields["nodes"]
    g_nodes, g_cand = _halo_values(comm, plan, [nodes, cand], _TAG + 5)
    n_ghost = sum(g.size for g in plan.recv_gid)
    found = g_nodes.shape[0] == n_ghost == g_cand.shape[0]
    if found:
        pos, link, ok, found = _fan(dom, plan, np.concatenate([nodes, g_nodes]), np.concatenate([cand, g_cand]))
    if comm.allreduce(int(not found)):
        raise RuntimeError("unite: ghost cells do not match the halo plan (stale ghost owners?)")
    src, dst = pos[link], dom.rows[link]
    lo = np.full(dom.n, dom.rank, dtype=np.int64)
    hi = lo.copy()
    rounds = 0
    while True:
        g_ok, g_lo, g_hi = _halo_values(comm, plan, [ok, lo, hi], _TAG + 6)
        t_ok, t_lo, t_hi = np.concatenate([ok, g_ok]), np.concatenate([lo, g_lo]), np.concatenate([hi, g_hi])
        n_ok, n_lo, n_hi = ok.copy(), lo.copy(), hi.copy()
        np.logical_and.at(n_ok, dst, t_ok[src])
        np.minimum.at(n_lo, dst, t_lo[src])
        np.maximum.at(n_hi, dst, t_hi[src])
        changed = not (np.array_equal(n_ok, ok) and np.array_equal(n_lo, lo) and np.array_equal(n_hi, hi))
        ok, lo, hi = n_ok, n_lo, n_hi
        rounds += 1
        if comm.allreduce(int(changed)) == 0:
            return ok, lo, hi, rounds
        if rounds > 8:  # a patch has at most 4 cells: 3 rounds reach the fixpoint
            raise RuntimeError("unite: the patch propagation does not settle")


@dataclass
class UniteStats(MigrationStats):
    """What :func:`unite_families` did on this rank: the migration's figures, and per cell of the new domain
    whether its merge patch is mergeable (for :func:`coarsen_domain`; None when a rank had to be refilled,
    and the cells given for it may merge with nothing: the coarsening then finds out itself)."""

    mergeable: NDArray[np.bool_] | None = None


def unite_families(comm, dom: LocalDomain, mask: NDArray[np.bool_],
                   clock=None) -> tuple[LocalDomain, UniteStats]:
    """Bring the two children of every sibling pair the serial pass would merge onto one rank (collective).

    Parameters
    ----------
    dom : LocalDomain with the geometry fields (:data:`GEOMETRY_FIELDS`).
    mask : bool array (dom.n,)
        The cells that may be coarsened — the mask the following :func:`coarsen_domain` gets.
    clock : optional clock charged for the migration (see :func:`hermes.data.migrate.migrate`).

    Returns
    -------
    (domain, stats)
        The migrated domain and this rank's :class:`UniteStats`; cells, weights and fields are only
        moved. ``mask`` is indexed by the *old* cells: recompute it on the new domain (from positions
        or ids, or carry it as a field) before coarsening.

    Raises
    ------
    MeshError
        When the coarsening would leave fewer cells than ranks (on every rank alike).

    Notes
    -----
    A pair moves when its merge patch (the cells around its newest vertex ``m``) is mergeable — every
    cell of it in ``mask``, of level > 0 and with newest vertex ``m``, exactly when the serial pass
    removes ``m`` — and its two children lie on two ranks: the child of the higher rank goes to the
    lower one. Every such pair is then whole on one rank; the pairs of one patch may lie on different
    ranks, and :func:`coarsen_domain` merges them there. No rank is left empty: a rank whose every
    cell would leave keeps one of its pairs, or receives a cell or pair from a rank with more to
    spare (:func:`refill_plan`); which cells merge never depends on it.
    """
    mask = _check(comm, dom, mask, "unite")
    rank = dom.rank
    plan = halo_plan(dom)
    ok, _, _, _ = _patches(comm, dom, plan, mask & (dom.fields["level"] > 0))
    sib = _sibling_owner(comm, dom, plan)
    ok &= sib >= 0  # (a mergeable patch consists of whole sibling pairs)
    split = ok & (sib != rank)
    dest = np.where(split, np.minimum(sib, rank), rank)
    units = _units(ok, sib, dest, rank)
    refill = bool(comm.allreduce(int(units == 0)))
    if refill:
        dest = _refill(comm, dom, ok, sib, dest, units)
    out, stats = migrate(comm, dom, dest, clock)
    # without a refill, the cells that came here are halves of mergeable pairs; the others kept their flag
    pos = np.minimum(np.searchsorted(dom.gid, out.gid), dom.n - 1)
    kept = dom.gid[pos] == out.gid
    return out, UniteStats(**vars(stats), mergeable=None if refill else np.where(kept, ok[pos], True))


def _units(ok, sib, dest, rank: int) -> int:
    """What a rank holds after the unite and before the merges, counted as the cells it will have after them:
    its cells that do not merge, its whole pairs and the split pairs that come to it."""
    return int(np.count_nonzero(~ok) + np.count_nonzero(ok & (sib == rank)) // 2
               + np.count_nonzero(ok & (sib != rank) & (dest == rank)))


def refill_plan(units: NDArray[np.int64], offers: list[list[tuple[int, int]]]) -> tuple[dict[int, int],
                                                                                       list[tuple[int, int]]]:
    """Which ranks feed the ranks a unite would leave empty (pure; the same answer on every rank).

    Parameters
    ----------
    units : int array (p,)
        What each rank would hold after the merges (:func:`_units`); 0 for a rank about to be emptied.
    offers : list of p lists of (rank, parent id)
        For each emptied rank, its split pairs: the rank holding the other child and the parent's id.

    Returns
    -------
    (retarget, gifts)
        ``retarget[parent] = r``: that pair goes to the emptied rank ``r`` instead of the other holder
        (preferred: ``r`` keeps its own cell, nothing extra moves); ``gifts``: (donor, r) pairs where no
        holder can spare the pair, and the donor — the rank with the most to spare, lowest first — gives
        ``r`` one of its cells or pairs. A rank never gives its last unit.

    Raises
    ------
    MeshError
        If the units are fewer than the ranks (the mesh after coarsening has fewer cells than ranks).
    """
    units = np.asarray(units, dtype=np.int64)
    spare = units - 1
    if spare.sum() < 0 or np.any(units < 0):
        raise MeshError(f"coarsening would leave {int(max(units.sum(), 0))} cells for {units.size} ranks")
    retarget: dict[int, int] = {}
    gifts: list[tuple[int, int]] = []
    for r in np.flatnonzero(units == 0):
        for d, g in sorted(offers[r]):
            if spare[d] >= 1 and g not in retarget:
                retarget[g] = int(r)
                spare[d] -= 1
                break
        else:
            d = int(np.argmax(spare))
            spare[d] -= 1
            gifts.append((d, int(r)))
    return retarget, gifts


def _refill(comm, dom: LocalDomain, ok, sib, dest, units: int) -> NDArray[np.int64]:
    """Destinations that leave no rank empty (:func:`refill_plan`; collective, in the rare case some rank
    would be). Two allgathers of small lists: the emptied ranks' split pairs, then the donors' pairs."""
    rank = dom.rank
    parent = _parents(dom)
    split = ok & (sib != rank)
    book = Bookkeeping(comm)
    offers = [(int(s), int(g)) for s, g in zip(sib[split], parent[split])] if units == 0 else []
    rows = book.allgather((units, offers))
    retarget, gifts = refill_plan(np.array([u for u, _ in rows], dtype=np.int64), [o for _, o in rows])
    dest = dest.copy()
    again = split & np.isin(parent, np.fromiter(retarget, dtype=np.int64, count=len(retarget)))
    dest[again] = [retarget[int(g)] for g in parent[again]]
    extra: dict[int, int] = {}
    for _, r in (x for x in gifts if x[0] == rank):
        home = dest == rank
        loose = np.flatnonzero(home & ~ok)  # a cell that merges with nothing: prefer one beside r
        pair = np.flatnonzero(home & ok)
        if loose.size:
            near = np.isin(loose, dom.rows[dom.nbr_owner == r])
            dest[loose[np.argmax(near)]] = r
        else:  # a pair coming here (or whole here): both children go to r
            g = parent[pair[0]]
            dest[home & ok & (parent == g)] = r
            if np.any(split & (parent == g)):
                extra[int(g)] = r
    for part in book.allgather(extra):
        for g, r in part.items():
            dest[split & (parent == g)] = r
    return dest


def gather_trimesh(comm, dom: LocalDomain, root: int = 0) -> TriMesh | None:
    """The whole mesh on ``root`` (vertices renumbered by global vertex id) — for tests and small outputs
    only: this is the one function here that gathers everything."""
    parts = comm.gather((dom.gid, dom.fields["nodes"], dom.fields["xy"], dom.fields["level"],
                         dom.fields["lineage"]), root=root)
    if comm.Get_rank() != root:
        return None
    gid = np.concatenate([p[0] for p in parts])
    o = np.argsort(gid, kind="stable")
    nodes = np.concatenate([p[1] for p in parts])[o]
    xy = np.concatenate([p[2] for p in parts])[o]
    vid, vxy = _vertex_table(nodes, xy)
    return TriMesh(vxy, np.searchsorted(vid, nodes), gid[o], np.concatenate([p[3] for p in parts])[o],
                   np.concatenate([p[4] for p in parts])[o])
