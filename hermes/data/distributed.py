"""The distributed view: each rank holds only its own cells and knows the owners of its ghosts.

A :class:`LocalDomain` keeps, for the cells a rank owns (sorted by global id): weights, coordinates,
their adjacency as *global* ids (CSR), the owner rank of every neighbour (the ghost layer's map) and
every per-cell field (solution values, ...). It is immutable: migration returns a new domain.

Ghost owners are found through a *distributed directory* (as Zoltan's DDirectory): the directory
entry of cell ``g`` lives on rank ``g mod p``. Owners register their cells there, and ranks look up
the owners of their ghosts, with two all-to-all exchanges — nobody holds the whole ownership map.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.comm import NeighbourComm
from hermes.errors import HermesError

__all__ = ["LocalDomain", "scatter_domain", "refresh_owners", "gather_to_root", "halo_plan", "HaloPlan", "dense_view"]


@dataclass(frozen=True, eq=False)
class LocalDomain:
    """The cells owned by one rank (see module docstring)."""

    rank: int
    size: int
    gid: NDArray[np.int64]
    weight: NDArray[np.float64]
    coords: NDArray[np.float64]
    xadj: NDArray[np.int64]
    adjncy: NDArray[np.int64]
    nbr_owner: NDArray[np.int64]
    fields: dict[str, NDArray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.gid.size)

    @property
    def load(self) -> float:
        return float(self.weight.sum())

    @cached_property
    def rows(self) -> NDArray[np.int64]:
        """Local row index of every adjacency entry."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.xadj))

    @cached_property
    def local_index(self) -> NDArray[np.int64]:
        """Local index of each adjacency entry's cell if owned here, else −1."""
        pos = np.searchsorted(self.gid, self.adjncy)
        pos = np.minimum(pos, max(self.n - 1, 0))
        hit = (self.n > 0) & (self.gid[pos] == self.adjncy) if self.n else np.zeros(self.adjncy.size, bool)
        return np.where(hit, pos, -1)

    @cached_property
    def owns_its_entries(self) -> bool:
        """Every adjacency entry of a cell owned here names this rank as its owner (what a migration keeps)."""
        return bool(np.all(self.nbr_owner[self.local_index >= 0] == self.rank))

    @cached_property
    def cut_mask(self) -> NDArray[np.bool_]:
        """Adjacency entries whose neighbour lives on another rank."""
        return self.nbr_owner != self.rank

    @cached_property
    def ghost_gid(self) -> NDArray[np.int64]:
        return np.unique(self.adjncy[self.cut_mask])

    @cached_property
    def neighbour_ranks(self) -> NDArray[np.int64]:
        """Ranks sharing a boundary with this one (the subdomain graph), sorted."""
        return np.unique(self.nbr_owner[self.cut_mask])

    @cached_property
    def boundary_lengths(self) -> NDArray[np.int64]:
        """Number of cut edges shared with each of :attr:`neighbour_ranks` (symmetric)."""
        nb = self.neighbour_ranks
        if nb.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.bincount(np.searchsorted(nb, self.nbr_owner[self.cut_mask]), minlength=nb.size)

    @cached_property
    def boundary_cells(self) -> int:
        """Owned cells with at least one off-rank neighbour."""
        return int(np.unique(self.rows[self.cut_mask]).size)

    def take(self, mask: NDArray[np.bool_]) -> dict[str, NDArray]:
        """Pack the cells selected by ``mask`` (everything a cell carries) for migration."""
        idx = np.flatnonzero(mask)
        deg = np.diff(self.xadj)[idx]
        starts = self.xadj[idx]
        ent = csr_ranges(starts, deg)
        return {
            "gid": self.gid[idx], "weight": self.weight[idx], "coords": self.coords[idx], "deg": deg,
            "adjncy": self.adjncy[ent], "nbr_owner": self.nbr_owner[ent],
            **{f"f:{k}": v[idx] for k, v in self.fields.items()},
        }


def csr_ranges(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """Concatenation of ``arange(s, s+l)`` for each (s, l), vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + offs


def assemble(rank: int, size: int, packs: list[dict[str, NDArray]], field_names: list[str]) -> LocalDomain:
    """Build a domain from cell packs (own kept cells + received ones), sorted by global id."""
    packs = [p for p in packs if p is not None and p["gid"].size]
    if not packs:
        raise HermesError(f"rank {rank} would be left without cells")
    gid = np.concatenate([p["gid"] for p in packs])
    order = np.argsort(gid, kind="stable")
    deg = np.concatenate([p["deg"] for p in packs])
    adj = np.concatenate([p["adjncy"] for p in packs])
    own = np.concatenate([p["nbr_owner"] for p in packs])
    old_xadj = np.concatenate(([0], np.cumsum(deg)))
    ent = csr_ranges(old_xadj[:-1][order], deg[order])
    xadj = np.concatenate(([0], np.cumsum(deg[order]))).astype(np.int64)
    fields = {k: np.concatenate([p[f"f:{k}"] for p in packs])[order] for k in field_names}
    return LocalDomain(
        rank=rank, size=size, gid=gid[order], weight=np.concatenate([p["weight"] for p in packs])[order],
        coords=np.concatenate([p["coords"] for p in packs])[order], xadj=xadj, adjncy=adj[ent],
        nbr_owner=own[ent], fields=fields,
    )


def scatter_domain(comm, mesh=None, owner=None, fields: dict[str, NDArray] | None = None) -> LocalDomain:
    """Distribute a mesh partitioned on rank 0: every rank receives its cells and ghost owners.

    Collective. ``mesh``, ``owner`` and ``fields`` are only read on rank 0.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    packs = None
    names = None
    if rank == 0:
        owner = np.asarray(owner, dtype=np.int64)
        n = mesh.n_cells
        deg = np.diff(mesh.xadj)
        full = {
            "gid": np.arange(n, dtype=np.int64), "weight": mesh.weights, "coords": mesh.coords, "deg": deg,
            "adjncy": mesh.adjncy, "nbr_owner": owner[mesh.adjncy],
        }
        fields = fields or {}
        names = sorted(fields)
        packs = []
        for r in range(size):
            idx = np.flatnonzero(owner == r)
            ent = csr_ranges(mesh.xadj[idx], deg[idx])
            pk = {k: (v[idx] if k not in ("adjncy", "nbr_owner") else v[ent]) for k, v in full.items()}
            pk.update({f"f:{k}": fields[k][idx] for k in names})
            packs.append(pk)
    names = comm.bcast(names, root=0)
    mine = comm.scatter(packs, root=0)
    return assemble(rank, size, [mine], names)


def refresh_owners(comm, dom: LocalDomain) -> LocalDomain:
    """Recompute the owner of every neighbour through the distributed directory (collective): the
    communicator's :meth:`~hermes.runtime.communicator.Communicator.directory` (cell g registered at rank g mod p in a
    plain run; computed once per run for hosted processors).

    Also checks the partition: a cell registered by two ranks is a bug and raises.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    nonlocal_mask = dom.local_index < 0
    q = np.unique(dom.adjncy[nonlocal_mask])
    q_owner, bad = comm.directory(dom.gid, q)
    if bad:
        raise RuntimeError("partition invariant broken: a cell is owned twice or by nobody")
    nbr_owner = np.full(dom.adjncy.size, rank, dtype=np.int64)
    nbr_owner[nonlocal_mask] = q_owner[np.searchsorted(q, dom.adjncy[nonlocal_mask])]
    return replace(dom, nbr_owner=nbr_owner)


def gather_to_root(comm, dom: LocalDomain, n_total: int | None = None, *, extra: dict[str, NDArray] | None = None):
    """Rank 0 receives (owner, weight[, extra fields]) for every cell, indexed by global id; None elsewhere."""
    parts = comm.gather((dom.gid, dom.weight, {k: v for k, v in (extra or {}).items()}), root=0)
    if comm.Get_rank() != 0:
        return None
    n = n_total if n_total is not None else int(sum(p[0].size for p in parts))
    owner = np.full(n, -1, dtype=np.int64)
    weight = np.zeros(n)
    out_extra: dict[str, NDArray] = {}
    for r, (g, w, ex) in enumerate(parts):
        owner[g] = r
        weight[g] = w
        for k, v in ex.items():
            if k not in out_extra:
                out_extra[k] = np.zeros((n,) + v.shape[1:], dtype=v.dtype)
            out_extra[k][g] = v
    return owner, weight, out_extra


@dataclass(frozen=True)
class HaloPlan:
    """Who sends which owned cells to whom for a one-layer ghost exchange.

    ``send_idx[k]``: local indices of owned cells adjacent to rank ``ranks[k]`` (sorted by global id);
    ``recv_gid[k]``: the ghost cells owned by ``ranks[k]``, sorted by global id — the same order as
    that rank's ``send_idx`` for us, so no index lists need to be exchanged.
    """

    ranks: NDArray[np.int64]
    send_idx: list[NDArray[np.int64]]
    recv_gid: list[NDArray[np.int64]]
    cut_edges: NDArray[np.int64]


def halo_plan(dom: LocalDomain) -> HaloPlan:
    """Send and receive lists of the ghost exchange, derived from the domain alone."""
    cut = dom.cut_mask
    rows, owners, gids = dom.rows[cut], dom.nbr_owner[cut], dom.adjncy[cut]
    send_idx, recv_gid = [], []
    for r in dom.neighbour_ranks:
        m = owners == r
        send_idx.append(np.unique(rows[m]))  # gid-sorted because local cells are gid-sorted
        recv_gid.append(np.unique(gids[m]))
    return HaloPlan(dom.neighbour_ranks, send_idx, recv_gid, dom.boundary_lengths)


def dense_view(comm, dom: LocalDomain, clock, counters=None) -> LocalDomain:
    """The domain with ids ``0..N−1``, contiguous by rank (ParMETIS' ``vtxdist`` numbering), for balancers
    that index arrays by id (collective: an exclusive scan and one ghost exchange)."""
    off = comm.exscan(dom.n) or 0
    new = off + np.arange(dom.n, dtype=np.int64)
    plan = halo_plan(dom)
    nb = NeighbourComm(comm, plan.ranks, clock, counters)
    got = nb.exchange([new[i].astype(np.float64) for i in plan.send_idx],
                      recv_sizes=np.array([g.size for g in plan.recv_gid], dtype=np.int64))
    old_g = np.concatenate(plan.recv_gid) if plan.recv_gid else np.zeros(0, np.int64)
    new_g = np.concatenate(got).astype(np.int64) if got else np.zeros(0, np.int64)
    o = np.argsort(old_g)
    li = dom.local_index
    loc = li >= 0
    adj = np.empty_like(dom.adjncy)
    adj[loc] = new[li[loc]]
    adj[~loc] = new_g[o][np.searchsorted(old_g[o], dom.adjncy[~loc])]
    return replace(dom, gid=new, adjncy=adj)
