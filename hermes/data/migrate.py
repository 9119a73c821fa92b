"""Cell migration over MPI.

:func:`migrate` moves every cell whose destination is another rank, with everything it carries
(id, weight, coordinates, adjacency, neighbour owners, all fields), then refreshes the ghost owners
through the directory. It conserves cells and weight exactly; a rank is never left empty. How a
balancing flow becomes destinations is :mod:`hermes.balance.realisation.realise`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.clock import ClockBank
from hermes.runtime.comm import allreduce, sparse_exchange
from hermes.data.distributed import LocalDomain, assemble, refresh_owners

__all__ = ["MigrationStats", "migrate", "migrate_group", "announce_moves", "announce_group"]

_TAG_MIGRATE = 211


@dataclass
class MigrationStats:
    """What this rank sent during one balancing step."""

    cells_sent: int = 0
    weight_sent: float = 0.0
    bytes_sent: int = 0
    cells_received: int = 0
    weight_received: float = 0.0
    rounds: int = 0

    def add(self, other: MigrationStats) -> None:
        for k in ("cells_sent", "weight_sent", "bytes_sent", "cells_received", "weight_received", "rounds"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _nbytes(pack: dict[str, NDArray]) -> int:
    return int(sum(v.nbytes for v in pack.values()))


def migrate(comm, dom: LocalDomain, dest: NDArray[np.int64], clock=None, *,
            refresh: bool = True, bulk: bool = False) -> tuple[LocalDomain, MigrationStats]:
    """Send each cell to ``dest[i]`` (collective); returns the new domain and this rank's stats.

    With ``refresh=False`` the ghost owners are only patched with what this rank knows (cells it
    sent and received); call :func:`~hermes.data.distributed.refresh_owners` before relying on them.

    Under the virtual clock each packet costs ``α + β · bytes`` of its link and arrives at the
    sender's time plus that cost; the receiver waits for its last packet. The directory refresh
    that follows is charged as one collective.

    With ``bulk`` (the scenario's ``run.bulk: auto``) and a virtual clock without an extra load, the packets are
    made and settled once per MPI process for the processors it hosts (:func:`migrate_group`): the same domains,
    stats and clocks.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    dest = np.asarray(dest, dtype=np.int64)
    if dest.shape != (dom.n,) or (dest.size and (dest.min() < 0 or dest.max() >= size)):
        raise ValueError("migration destinations must be one rank per local cell")
    if bulk and clock is not None and ClockBank.bankable([clock]):
        new, stats = comm.bulk("migrate", (dom, dest, clock), _migrate_kernel)
        if refresh:
            new = refresh_owners(comm, new)
            allreduce(comm, 0.0, clock)
        return new, stats
    stats = MigrationStats()
    ctx = clock.measure("migrate") if clock is not None else _null()
    with ctx:
        sends, send_costs = packs(dom, dest, clock, stats)
        received, arrivals = [], []
        for r, (t_sent, nbytes, pack) in sparse_exchange(comm, sends, _TAG_MIGRATE).items():
            received.append(pack)
            arrivals.append(receive(stats, rank, int(r), t_sent, nbytes, pack, clock))
    if clock is not None:
        clock.exchanged(np.array(send_costs), np.array(arrivals))
    new = settle(dom, dest, received)
    if refresh:
        new = refresh_owners(comm, new)
        allreduce(comm, 0.0, clock)  # the directory's all-to-alls, charged as one synchronising collective
    stats.rounds = 1
    return new, stats


def _migrate_kernel(group, parts: list) -> list:
    doms = [d for d, _, _ in parts]
    clocks = [c for _, _, c in parts]
    dests = {i: dest for i, (d, dest, _) in enumerate(parts) if np.any(dest != d.rank)}
    stats = [MigrationStats() for _ in parts]
    done = migrate_group(group, doms, clocks, dests, stats)
    for i in range(len(parts)):
        if i not in done:
            doms[i] = settle(doms[i], parts[i][1], [])
        stats[i].rounds = 1
    return list(zip(doms, stats))


def migrate_group(group, doms: list[LocalDomain], clocks: list, dests: dict[int, NDArray[np.int64]],
                  stats: list[MigrationStats]) -> set[int]:
    """One migration of the processors ``group.lo`` to ``group.hi`` of an MPI process, run once for all of them
    (inside a kernel run in bulk, :meth:`hermes.runtime.interface.Communicator.bulk`; collective over the
    processes): processor ``lo + i`` sends its cells to ``dests[i]`` (the processors absent from ``dests`` send
    nothing). Packets between co-hosted processors are handed over; those to another process travel in one message
    per pair of processes. Each processor that sends or receives is charged and settled as :func:`migrate` charges
    and settles it (the same :func:`packs`, :func:`receive`, :func:`settle`), its packets received in increasing
    source order; ``doms[i]`` is replaced and ``stats[i]`` counts what it did. A processor that neither sends nor
    receives is left alone (its own call would charge it 0.0 and keep its domain if :func:`unchanged`): the caller
    settles those. Returns the local indices of the processors that sent or received."""
    lo, hi = group.lo, group.hi
    others = [q for q in range(group.processes) if q != group.pid]
    st = {i: MigrationStats() for i in dests}
    costs: dict[int, list[float]] = {}
    inbox: dict[int, list] = {}
    out_by: dict[int, list] = {q: [] for q in others}
    for i, dest in sorted(dests.items()):
        packets, costs[i] = packs(doms[i], dest, clocks[i], st[i])
        for r, (t_sent, nbytes, pack) in packets.items():
            if lo <= r < hi:
                inbox.setdefault(r - lo, []).append((lo + i, t_sent, nbytes, pack))
            else:
                out_by[int(group.process_of([r])[0])].append((r, lo + i, t_sent, nbytes, pack))
    if others:
        for lst in group.exchange_objects(out_by).values():
            for r, src, t_sent, nbytes, pack in lst:
                inbox.setdefault(r - lo, []).append((src, t_sent, nbytes, pack))
    involved = set(dests) | set(inbox)
    for i in sorted(involved):
        s_i = st.setdefault(i, MigrationStats())
        got = sorted(inbox.get(i, []), key=lambda m: m[0])  # by source, as sparse_exchange returns them
        arrivals = [receive(s_i, lo + i, src, t_sent, nbytes, pack, clocks[i]) for src, t_sent, nbytes, pack in got]
        clocks[i].exchanged(np.array(costs.get(i, [])), np.array(arrivals))
        dest = dests[i] if i in dests else np.full(doms[i].n, lo + i, dtype=np.int64)
        doms[i] = settle(doms[i], dest, [m[3] for m in got])
        stats[i].add(s_i)
    return involved


def packs(dom: LocalDomain, dest: NDArray[np.int64], clock, stats: MigrationStats) -> tuple[dict, list[float]]:
    """What a rank sends in a migration to ``dest``: ``{r: (stamp, bytes, pack)}`` by destination in increasing
    order, and each packet's cost on its link (under a clock); counted in ``stats``."""
    rank = dom.rank
    moving = dest != rank
    stamp = clock.stamp() if clock is not None else 0.0
    sends, send_costs = {}, []
    for r in np.unique(dest[moving]):
        pack = dom.take(dest == r)
        nbytes = _nbytes(pack)
        stats.cells_sent += int(pack["gid"].size)
        stats.weight_sent += float(pack["weight"].sum())
        stats.bytes_sent += nbytes
        if clock is not None:
            send_costs.append(clock.links.cost(rank, int(r), nbytes))
        sends[int(r)] = (stamp, nbytes, pack)
    return sends, send_costs


def receive(stats: MigrationStats, rank: int, src: int, t_sent: float, nbytes: int, pack: dict, clock) -> float:
    """Count a packet ``pack`` from ``src`` received by ``rank`` in ``stats``; its arrival time under a clock."""
    stats.cells_received += int(pack["gid"].size)
    stats.weight_received += float(pack["weight"].sum())
    return t_sent + clock.links.cost(src, rank, nbytes) if clock is not None else 0.0


def unchanged(dom: LocalDomain) -> bool:
    """Whether a migration in which a rank sends and receives nothing leaves its domain as it is (the same
    object): its entries name it as the owner of its own cells and its fields are in order (what a rebuild
    would make of it)."""
    return dom.owns_its_entries and list(dom.fields) == sorted(dom.fields)


def settle(dom: LocalDomain, dest: NDArray[np.int64], received: list[dict]) -> LocalDomain:
    """A rank's domain after its cells left for ``dest`` and the packets ``received`` (from increasing source
    ranks) arrived, its ghost owners patched with what it knows: cells it sent now live at their destination,
    cells it received live here."""
    rank, size = dom.rank, dom.size
    moving = dest != rank
    if not received and not moving.any() and unchanged(dom):
        # nothing left, nothing came, nothing learnt: the domain as it was (the same arrays assemble would rebuild,
        # with its derived arrays kept) — a rank outside a realisation level pays no rebuild
        return dom
    owner = dom.nbr_owner.copy()
    li = dom.local_index
    loc = li >= 0
    owner[loc] = dest[li[loc]]
    dom = replace(dom, nbr_owner=owner)
    keep = dom.take(~moving)
    new = assemble(rank, size, [keep, *received], sorted(dom.fields))
    if received:
        got = np.concatenate([p["gid"] for p in received])
        got.sort()
        pos = np.minimum(np.searchsorted(got, new.adjncy), got.size - 1)
        mine = got[pos] == new.adjncy
        if mine.any():
            own = new.nbr_owner.copy()
            own[mine] = rank
            new = replace(new, nbr_owner=own)
    return new


def _announcements(nc, dom: LocalDomain, dest: NDArray[np.int64]) -> list[NDArray[np.float64]]:
    """What a rank tells each neighbour of ``nc`` before a migration: its moving cells adjacent to that neighbour's
    cells, as (gid, new owner) pairs."""
    me = dom.rank
    moving = np.flatnonzero(dest != me)
    ghost = dom.local_index < 0
    out = []
    for q in nc.neighbours:
        if moving.size:
            cells = np.intersect1d(np.unique(dom.rows[ghost & (dom.nbr_owner == q)]), moving, assume_unique=True)
            out.append(np.column_stack((dom.gid[cells], dest[cells])).astype(np.float64).ravel())
        else:
            out.append(np.zeros(0))
    return out


def _announced(dom: LocalDomain, dest: NDArray[np.int64], got: list[NDArray[np.float64]]) -> LocalDomain:
    """The domain with the owners ``dest`` gives its cells and the neighbours' announcements ``got`` its ghosts."""
    me = dom.rank
    ghost = dom.local_index < 0
    if not np.any(dest != me) and not any(g.size for g in got) and dom.owns_its_entries:
        return dom  # nothing moves here nor next door: every owner stays (and the domain's derived arrays)
    owner = dom.nbr_owner.copy()
    owner[~ghost] = dest[dom.local_index[~ghost]]
    pairs = np.concatenate([g.reshape(-1, 2) for g in got]).astype(np.int64) if got else np.zeros((0, 2), np.int64)
    if pairs.size:
        order = np.argsort(pairs[:, 0])
        gids, owners = pairs[order, 0], pairs[order, 1]
        pos = np.minimum(np.searchsorted(gids, dom.adjncy), gids.size - 1)
        hit = ghost & (gids[pos] == dom.adjncy)
        owner[hit] = owners[pos[hit]]
    return replace(dom, nbr_owner=owner)


def announce_moves_bulk(nc, dom: LocalDomain, dest: NDArray[np.int64]) -> LocalDomain:
    """:func:`announce_moves` once per MPI process for all the processors it hosts (``run.bulk: auto``;
    :meth:`hermes.runtime.interface.Communicator.bulk`): each processor's announcements computed as its own, their
    exchange through :func:`hermes.runtime.bulk.exchange_arrays` (charged as the processor's own exchange), the
    same domains and clocks bit for bit. Collective; the clocks virtual without an extra load."""
    return nc.comm.bulk("announce_moves", (nc, dom, np.asarray(dest, dtype=np.int64)), announce_group)


def announce_group(group, parts: list, settled=None) -> list[LocalDomain]:
    """The announcements of the processors of ``parts`` (``(nc, dom, dest)`` each; ``dest`` None: none of its cells
    moves), exchanged in bulk. ``settled(i, dom)``, if given, says that processor i's domain owns its entries (what
    :func:`_announced` would check): such a processor with no move and nothing announced to it keeps its domain
    without a look at it."""
    from hermes.runtime.bulk import BankedNeighbours, exchange_arrays

    nbs = [nc for nc, _, _ in parts]
    bn = BankedNeighbours(group, nbs)
    payloads = []
    for nc, dom, dest in parts:
        payloads.extend(_announcements(nc, dom, dest) if dest is not None else [_NOTHING] * len(nc.neighbours))
    incoming, ptr = exchange_arrays(bn, payloads)
    bn.store()
    out = []
    for i, (nc, dom, dest) in enumerate(parts):
        a, b = bn.ptr[i], bn.ptr[i + 1]
        if dest is None and ptr[b] == ptr[a] and settled is not None and settled(i, dom):
            out.append(dom)
            continue
        got = [incoming[ptr[k]:ptr[k + 1]] for k in range(a, b)]
        out.append(_announced(dom, dest if dest is not None else np.full(dom.n, dom.rank, dtype=np.int64), got))
    return out


#: an empty announcement (shared: never written)
_NOTHING = np.zeros(0)
_NOTHING.flags.writeable = False


def announce_moves(nc, dom: LocalDomain, dest: NDArray[np.int64]) -> LocalDomain:
    """Give every adjacency entry the owner its cell will have once ``dest`` is applied (collective over the
    neighbours of ``nc``: one neighbour exchange, charged to its clock).

    Each rank tells each neighbouring rank the new owner of that rank's ghosts that move, and patches its own
    entries with what the neighbours say and with ``dest`` for its own cells. The packs :func:`migrate` then
    sends carry exact owners, so — when every rank's ghost owners were exact before — they are exact after the
    migration without the directory (:func:`~hermes.data.distributed.refresh_owners`), a cell moving along
    with its neighbour to another rank included. ``nc`` must list this rank's current neighbours
    (``dom.neighbour_ranks``)."""
    return _announced(dom, dest, nc.exchange(_announcements(nc, dom, dest)))


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
