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
from hermes.errors import HermesError

__all__ = ["MigrationStats", "migrate", "migrate_group", "announce_moves", "announce_group", "plan_of", "deliver",
           "PLAN_ORIGIN"]

_TAG_MIGRATE = 211
_TAG_RECEIPT = 212

#: the field a plan's identity records carry: the rank that holds each cell's data (:func:`plan_of`)
PLAN_ORIGIN = "_origin"


@dataclass
class MigrationStats:
    """What this rank sent during one balancing step."""

    cells_sent: int = 0
    weight_sent: float = 0.0
    bytes_sent: int = 0
    cells_received: int = 0
    weight_received: float = 0.0
    rounds: int = 0
    #: identity records a plan carried (:func:`deliver`: cells planned hop by hop, shipped once); not cells
    records_sent: int = 0

    def add(self, other: MigrationStats) -> None:
        for k in ("cells_sent", "weight_sent", "bytes_sent", "cells_received", "weight_received", "rounds",
                  "records_sent"):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def as_records(self) -> MigrationStats:
        """These stats of a migration of identity records (:func:`plan_of`): what moved were records, not cells
        (their bytes and rounds kept)."""
        return MigrationStats(bytes_sent=self.bytes_sent, rounds=self.rounds,
                              records_sent=self.records_sent + self.cells_sent)


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
    (inside a kernel run in bulk, :meth:`hermes.runtime.communicator.Communicator.bulk`; collective over the
    processes): processor ``lo + i`` sends its cells to ``dests[i]`` (the processors absent from ``dests`` send
    nothing). Packets between co-hosted processors are handed over; those to another process travel in one message
    per pair of processes. Each processor that sends or receives is charged and settled as :func:`migrate` charges
    and settles it (the same :func:`packs`, :func:`receive`, :func:`settle`), its packets received in increasing
    source order; ``doms[i]`` is replaced and ``stats[i]`` counts what it did. A processor that neither sends nor
    receives is left alone (its own call would charge it 0.0 and keep its domain if :func:`unchanged`): the caller
    settles those. Returns the local indices of the processors that sent or received."""
    lo = group.lo
    st = {i: MigrationStats() for i in dests}
    costs: dict[int, list[float]] = {}
    out: dict[int, dict] = {}
    for i, dest in sorted(dests.items()):
        out[i], costs[i] = packs(doms[i], dest, clocks[i], st[i])
    inbox = route(group, out)
    involved = set(dests) | set(inbox)
    for i in sorted(involved):
        s_i = st.setdefault(i, MigrationStats())
        got = inbox.get(i, [])  # by source, as sparse_exchange returns them
        arrivals = [receive(s_i, lo + i, src, t_sent, nbytes, pack, clocks[i]) for src, (t_sent, nbytes, pack) in got]
        clocks[i].exchanged(np.array(costs.get(i, [])), np.array(arrivals))
        dest = dests[i] if i in dests else np.full(doms[i].n, lo + i, dtype=np.int64)
        doms[i] = settle(doms[i], dest, [m[1][2] for m in got])
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
    :meth:`hermes.runtime.communicator.Communicator.bulk`): each processor's announcements computed as its own, their
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


def plan_of(dom: LocalDomain) -> LocalDomain:
    """A rank's cells as identity records for a plan: id, weight, centroid, adjacency and neighbour owners (what a
    selection reads), with the field :data:`PLAN_ORIGIN` (this rank: where each cell's data is) in place of the
    cells' fields. Migrating a plan moves records, not cells; :func:`deliver` ships the cells once."""
    return replace(dom, fields={PLAN_ORIGIN: np.full(dom.n, dom.rank, dtype=np.int64)})


def _receipts(plan: LocalDomain) -> dict[int, NDArray[np.int64]]:
    """What a plan's holder tells each origin: the ids of that origin's cells it ends up holding."""
    origin = plan.fields[PLAN_ORIGIN]
    away = origin != plan.rank
    if not away.any():
        return {}
    return {int(o): plan.gid[away & (origin == o)] for o in np.unique(origin[away])}


def _destinations(full: LocalDomain, receipts: list[tuple[int, NDArray[np.int64]]]) -> NDArray[np.int64]:
    """An origin's destinations from the receipts ``(holder, gids)`` it received (its other cells stay)."""
    dest = np.full(full.n, full.rank, dtype=np.int64)
    for src, gids in receipts:
        dest[np.searchsorted(full.gid, gids)] = src
    return dest


def _delivered(plan: LocalDomain, got: LocalDomain) -> LocalDomain:
    """The plan's cells with the fields the delivery brought (``got``: the same cells, assembled from the shipped
    packs); the adjacency and ghost owners are the plan's, as a hop-by-hop migration would have left them."""
    if not np.array_equal(plan.gid, got.gid):
        raise HermesError(f"rank {plan.rank}: direct delivery brought {got.n} cells for a plan of {plan.n}")
    return replace(plan, fields={k: got.fields[k] for k in sorted(got.fields)})


def _charge_receipts(clock, rank: int, out: dict[int, NDArray[np.int64]], got) -> int:
    """Charge one rank's receipts on its clock (each on its pair's link: what it sent ``out``, what arrived ``got``,
    ``(source, (stamp, ids))`` pairs) and return the bytes it sent — the one rule of :func:`deliver` and its bulk
    kernel."""
    clock.exchanged(np.array([clock.links.cost(rank, o, g.nbytes) for o, g in out.items()]),
                    np.array([t + clock.links.cost(int(src), rank, g.nbytes) for src, (t, g) in got]))
    return sum(int(g.nbytes) for g in out.values())


def deliver(comm, full: LocalDomain, plan: LocalDomain, clock=None, *,
            bulk: bool = False) -> tuple[LocalDomain, MigrationStats]:
    """Ship every cell once, from the rank that holds it (``full``) to the rank a plan left its record at
    (``plan``, made by :func:`plan_of` and migrated hop by hop); collective.

    Each holder tells each origin which of its cells it holds (a receipt: their ids, one message per pair, charged
    α + β · bytes on the pair's link); each origin then migrates those cells, whole, to their holders in one message
    per pair (:func:`migrate`, charged on the pair's link: the route between the two ranks, not the plan's hops).
    The result is the plan's domain (its adjacency and ghost owners) with the cells' fields. The stats: the
    delivery's cells (``cells_sent``: each moved cell once) and the receipts' bytes (the plan's own migrations are
    counted by their caller, :meth:`MigrationStats.as_records`). With ``bulk`` (virtual clock, no extra load) once per MPI process for the
    processors it hosts, the same bits."""
    if bulk and clock is not None and ClockBank.bankable([clock]):
        new, stats = comm.bulk("deliver", (full, plan, clock), _deliver_kernel)
    else:
        rank = comm.Get_rank()
        stats = MigrationStats()
        out = _receipts(plan)
        stamp = clock.stamp() if clock is not None else 0.0
        got = sparse_exchange(comm, {o: (stamp, g) for o, g in out.items()}, _TAG_RECEIPT)
        stats.bytes_sent += (_charge_receipts(clock, rank, out, got.items()) if clock is not None
                             else sum(int(g.nbytes) for g in out.values()))
        moved, st = migrate(comm, full, _destinations(full, [(int(s), g) for s, (_, g) in got.items()]), clock,
                            refresh=False)
        st.rounds = 0  # the plan's levels are the rounds
        stats.add(st)
        new = _delivered(plan, moved)
    return new, stats


def _deliver_kernel(group, parts: list) -> list:
    """:func:`deliver` for the processors ``group.lo`` to ``group.hi`` of an MPI process (``parts``: each one's
    ``(full, plan, clock)``): the receipts routed as :func:`migrate_group` routes packets, each processor charged
    as its own call charges it, then one :func:`migrate_group`."""
    lo = group.lo
    fulls = [f for f, _, _ in parts]
    clocks = [c for _, _, c in parts]
    stats = [MigrationStats() for _ in parts]
    out, recs = {}, {}
    for i, (_, plan, clock) in enumerate(parts):
        rec = _receipts(plan)
        if rec:
            stamp = clock.stamp()
            out[i] = {o: (stamp, g) for o, g in rec.items()}
            recs[i] = rec
    inbox = route(group, out)
    dests = {}
    for i in sorted(set(out) | set(inbox)):
        got = inbox.get(i, [])
        stats[i].bytes_sent += _charge_receipts(clocks[i], lo + i, recs.get(i, {}), got)
        if got:
            dests[i] = _destinations(fulls[i], [(src, g) for src, (_, g) in got])
    moved = list(fulls)
    migrate_group(group, moved, clocks, dests, stats)
    # a processor that neither sent nor received a receipt holds its own cells: moved[i] is its full domain
    return [(_delivered(plan, moved[i]), stats[i]) for i, (_, plan, _) in enumerate(parts)]


def route(group, out: dict[int, dict[int, object]]) -> dict[int, list[tuple[int, object]]]:
    """Route the items ``out[i][r]`` (from processor ``lo + i`` to processor r) among the processors of a
    process group: items between co-hosted processors are handed over, the others travel in one message per pair
    of processes (collective over the processes). Returns, by local index of the receiver, its ``(source, item)``
    pairs in increasing source order (as :func:`~hermes.runtime.comm.sparse_exchange` returns them)."""
    lo, hi = group.lo, group.hi
    others = [q for q in range(group.processes) if q != group.pid]
    inbox: dict[int, list] = {}
    out_by: dict[int, list] = {q: [] for q in others}
    for i, items in sorted(out.items()):
        for r, item in items.items():
            if lo <= r < hi:
                inbox.setdefault(r - lo, []).append((lo + i, item))
            else:
                out_by[int(group.process_of([r])[0])].append((r, lo + i, item))
    if others:
        for lst in group.exchange_objects(out_by).values():
            for r, src, item in lst:
                inbox.setdefault(r - lo, []).append((src, item))
    return {i: sorted(lst, key=lambda m: m[0]) for i, lst in inbox.items()}


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
