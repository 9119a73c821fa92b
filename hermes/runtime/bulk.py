"""Kernels run in bulk: once per MPI process over the processors it hosts (:meth:`Communicator.bulk
<hermes.runtime.communicator.Communicator.bulk>`).

A kernel run in bulk receives a :class:`ProcessGroup` — the processors of its process, ``lo`` to ``hi``, and the
other processes — and every processor's part, in rank order. What the co-hosted processors would have sent each
other becomes an index operation on the process' arrays; only what crosses processes travels, as one message per
pair of processes (:meth:`ProcessGroup.exchange`) or one process-level collective (:meth:`ProcessGroup.allgather`).
The kernel charges every emulated processor's clock as the processor would have (a
:class:`~hermes.runtime.clock.ClockBank`), so the Python a run pays grows with the processes, not with the
processors, and its results stay the same bits.

Two groups: :class:`PlainGroup` here (one processor per process: the group of a
:class:`~hermes.runtime.plain.PlainComm`, its messages mpi4py's), and the hosted one
(:class:`hermes.runtime.hosting.group.HostedGroup`, its messages envelopes on the hosting's bridge).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["ProcessGroup", "PlainGroup", "BankedNeighbours", "exchange_arrays", "link_costs", "BULK_TAG"]

#: the tag of a plain group's messages (on the PlainComm's own duplicate of the job's communicator)
BULK_TAG = 105


class ProcessGroup(Protocol):
    """The processors one MPI process runs, ``lo ≤ rank < hi``, among ``size`` processors hosted in contiguous
    blocks by ``processes`` processes (this one is ``pid``; process q hosts ``starts[q]`` to ``starts[q + 1]``).

    Every method is collective over the processes, called in the same order by all of them.
    """

    lo: int
    hi: int
    size: int
    processes: int
    pid: int
    starts: NDArray[np.int64]

    def process_of(self, ranks) -> NDArray[np.int64]:
        """The process hosting each processor of ``ranks``."""
        ...

    def exchange(self, out: dict[int, NDArray[np.float64]]) -> dict[int, NDArray[np.float64]]:
        """Send the float array ``out[q]`` to each process q it names and receive one from each of them (the
        processes must name each other: a symmetric exchange, as a halo's); the arrays received, by process."""
        ...

    def exchange_objects(self, out: dict[int, Any]) -> dict[int, Any]:
        """:meth:`exchange` of any picklable objects (a migration's packets), symmetric as it."""
        ...

    def allgather(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Every process' float array ``x`` (of the same length in all), as rows in process order."""
        ...

    def allgather_var(self, x: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        """Every process' float array ``x`` (of any length), in process order."""
        ...


class _Blocks:
    """What both groups derive from the blocks."""

    starts: NDArray[np.int64]

    def process_of(self, ranks) -> NDArray[np.int64]:
        return np.searchsorted(self.starts, np.asarray(ranks, dtype=np.int64), side="right") - 1


class PlainGroup(_Blocks):
    """The group of a processor alone in its MPI process (``comm``: its :class:`~hermes.runtime.plain.PlainComm`):
    the exchanges are mpi4py's messages on the communicator's duplicate, with the tag :data:`BULK_TAG`."""

    def __init__(self, comm) -> None:
        self.comm = comm.comm
        self.pid = self.lo = comm.rank
        self.hi = comm.rank + 1
        self.size = self.processes = comm.size
        self.starts = np.arange(comm.size + 1, dtype=np.int64)
        self.state: dict[str, Any] = {}

    def exchange(self, out: dict[int, NDArray[np.float64]]) -> dict[int, NDArray[np.float64]]:
        return self.exchange_objects({q: np.ascontiguousarray(a, dtype=np.float64) for q, a in out.items()})

    def exchange_objects(self, out: dict[int, Any]) -> dict[int, Any]:
        from hermes.runtime.ops import waitall

        sends = [self.comm.isend(a, dest=int(q), tag=BULK_TAG) for q, a in sorted(out.items())]
        got = {int(q): self.comm.recv(source=int(q), tag=BULK_TAG) for q in sorted(out)}
        waitall(sends)
        return got

    def allgather(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        x = np.ascontiguousarray(x, dtype=np.float64).ravel()
        rows = np.empty((self.size, x.size), dtype=np.float64)
        self.comm.Allgather(x, rows)
        return rows

    def allgather_var(self, x: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        x = np.ascontiguousarray(x, dtype=np.float64).ravel()
        return [np.asarray(v, dtype=np.float64) for v in self.comm.allgather(x)]


class BankedNeighbours:
    """The :class:`~hermes.runtime.comm.NeighbourComm` of every processor of a process, for a kernel run in bulk:
    what they exchange with their neighbours in the processor graph and reduce over all processors, with their
    clocks in a :class:`~hermes.runtime.clock.ClockBank` and their :class:`~hermes.runtime.comm.Counters` updated
    as each processor's own calls would update them (the same IEEE operations in the same order, so the same bits).

    ``nbs``: the processors' NeighbourComms in rank order (``lo`` to ``hi`` of ``group``), with virtual clocks
    without an extra load (:meth:`ClockBank.bankable`). Call :meth:`store` when the kernel ends.

    The pairs (processor, neighbour) are laid end to end in rank order, each processor's in its neighbours' order:
    a pair-aligned array has one value per message. A processor's neighbour on another process is reached by one
    message per pair of processes per call, carrying per pair (sorted by receiver, then sender, on both sides) the
    sender's time stamp and value.
    """

    def __init__(self, group, nbs: list) -> None:
        from hermes.runtime.clock import ClockBank

        self.group, self.nbs = group, nbs
        self.clocks = [nb.clock for nb in nbs]
        self.bank = ClockBank(self.clocks)
        L, lo = len(nbs), group.lo
        self.L = L
        deg = np.array([len(nb.neighbours) for nb in nbs], dtype=np.int64)
        self.deg = deg
        self.ptr = np.concatenate(([0], np.cumsum(deg)))
        self.nbr = np.concatenate([np.asarray(nb.neighbours, dtype=np.int64) for nb in nbs]) if L else \
            np.zeros(0, np.int64)
        self.owner = np.repeat(np.arange(L, dtype=np.int64), deg)
        self.has_nbrs = deg > 0
        self.nz_starts = self.ptr[:-1][self.has_nbrs]
        pq = group.process_of(self.nbr)
        remote = np.flatnonzero(pq != group.pid)
        order = remote[np.argsort(pq[remote], kind="stable")]
        self.src = np.where(pq == group.pid, self.nbr - lo, -1)
        self.src[order] = L + np.arange(order.size)
        self.procs = [int(q) for q in np.unique(pq[remote])]
        self.recv_pairs = {q: int(np.count_nonzero(pq[remote] == q)) for q in self.procs}
        self.send_order: dict[int, NDArray[np.int64]] = {}
        for q in self.procs:
            idx = np.flatnonzero(pq == q)
            self.send_order[q] = idx[np.lexsort((self.owner[idx], self.nbr[idx]))]
        from scipy.sparse import csr_array

        #: sums over each processor's pairs, left to right from 0.0 (``csr_matvec`` with ones: exact products)
        self._sum = csr_array((np.ones(self.nbr.size), np.arange(self.nbr.size), self.ptr),
                              shape=(L, self.nbr.size))
        self._ones = np.ones(self.nbr.size)
        self.ctime = np.array([nb.counters.time for nb in nbs], dtype=np.float64)
        self.rounds = self.collectives = 0
        self.coll_kinds: dict[str, int] = {}
        self.messages = np.zeros(L, dtype=np.int64)
        self.nbytes = np.zeros(L, dtype=np.int64)
        self.transit: NDArray[np.float64] | None = None
        self._costs: dict[float, tuple] = {}
        # the pair (neighbour, processor) of each pair (processor, neighbour) when both are here
        ranks = lo + self.owner
        keys = ranks * group.size + self.nbr  # sorted: processors in rank order, each one's neighbours sorted
        self.reverse = np.minimum(np.searchsorted(keys, self.nbr * group.size + ranks), max(keys.size - 1, 0))

    # -- what each processor's calls compute --------------------------------------------------------
    def ordered_sums(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each processor's ``ordered_sum`` of its pairs' ``values`` (left to right from 0.0)."""
        s = self._sum
        s.data = np.asarray(values, dtype=np.float64)
        return s @ self._ones

    def _pair_costs(self, nbytes: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(send cost of each pair, its arrival cost, each processor's longest send) for messages of ``nbytes``,
        as ``Links.cost`` computes them one by one with each clock's current links."""
        hit = self._costs.get(nbytes)
        links = [c.links for c in self.clocks]
        if hit is not None and all(a is b for a, b in zip(hit[0], links)):
            return hit[1:]
        send = np.empty(self.nbr.size)
        recv = np.empty(self.nbr.size)
        for i, (lk, nb) in enumerate(zip(links, self.nbs)):
            a, b = self.ptr[i], self.ptr[i + 1]
            if a == b:
                continue
            if not lk.overrides:
                send[a:b] = recv[a:b] = lk.latency + np.full(b - a, nbytes) / lk.bandwidth
            else:
                send[a:b] = [lk.cost(nb.rank, int(j), nbytes) for j in nb.neighbours]
                recv[a:b] = [lk.cost(int(j), nb.rank, nbytes) for j in nb.neighbours]
        own = np.zeros(self.L)
        if self.nz_starts.size:
            own[self.has_nbrs] = np.maximum.reduceat(send, self.nz_starts)
        self._costs[nbytes] = (links, send, recv, own)
        return send, recv, own

    def exchange_scalar(self, values: NDArray[np.float64], nbytes: float = 8.0) -> NDArray[np.float64]:
        """Every processor's ``NeighbourComm.exchange_scalar(values[i])``: the neighbours' values, pair-aligned.
        ``nbytes``: the size each message is charged (``model_bytes``; default its one word)."""
        values = np.asarray(values, dtype=np.float64)
        bank = self.bank
        stamps = bank.now.copy()
        out = {}
        for q in self.procs:
            o = self.owner[self.send_order[q]]
            out[q] = np.concatenate((stamps[o], values[o]))
        got = self.group.exchange(out)
        every_t = np.concatenate((stamps, *[got[q][:self.recv_pairs[q]] for q in self.procs]))
        every_v = np.concatenate((values, *[got[q][self.recv_pairs[q]:] for q in self.procs]))
        nbr_stamp = every_t[self.src]
        nbr_val = every_v[self.src]
        send, recv, own = self._pair_costs(float(nbytes))
        self.charge_exchange(stamps, own, nbr_stamp + recv, nbr_stamp, int(nbytes) * self.deg)  # int(Σ b): exact
        return nbr_val

    def charge_exchange(self, stamps, own, arrivals, nbr_stamp, nbytes) -> None:
        """What ``NeighbourComm.exchange`` charges every processor after its messages: its longest send ``own``,
        the wait for its last arrival (pair-aligned ``arrivals``), its counters (``nbytes`` per processor)."""
        bank = self.bank
        bank.charge(own, "comm")
        if self.nz_starts.size:
            last = bank.now.copy()
            last[self.has_nbrs] = np.maximum.reduceat(arrivals, self.nz_starts)
            bank.wait_until(last)
        self.transit = arrivals - nbr_stamp
        self.ctime += bank.now - stamps
        self.rounds += 1
        self.messages += self.deg
        self.nbytes += nbytes

    def allreduce(self, values: NDArray[np.float64], kind: str = "allreduce") -> NDArray[np.float64]:
        """Every processor's ``NeighbourComm.allreduce`` (sum) of its row of ``values`` ((L,) or (L, m)): the sums
        over all processors in rank order from 0.0, the same for all ((m,) or a scalar's (1,))."""
        v = np.asarray(values, dtype=np.float64).reshape(self.L, -1)
        m = v.shape[1]
        bank = self.bank
        stamps = bank.now.copy()
        head = np.concatenate(([np.max(stamps)], v.ravel()))
        rows = self.group.allgather_var(head)
        latest = float(max(r[0] for r in rows))
        table = np.concatenate([np.zeros((1, m))] + [r[1:].reshape(-1, m) for r in rows])
        total = np.cumsum(table, axis=0)[-1]  # ((0 + v_0) + v_1) + …, the rank-order fold
        cost = self.clocks[0].links.collective_cost(self.group.size, 8.0 * m) if self.L else 0.0
        bank.wait_until(np.full(self.L, latest))
        bank.charge(cost, "comm")
        self.ctime += bank.now - stamps
        self.coll_kinds[kind] = self.coll_kinds.get(kind, 0) + 1
        self.nbytes += 8 * m
        return total

    def store(self) -> None:
        """Write the clocks, counters and last transit times back into every processor's objects."""
        self.bank.store(self.clocks)
        ctime = self.ctime.tolist()
        for i, nb in enumerate(self.nbs):
            c = nb.counters
            c.exchange_rounds += self.rounds
            for kind, n in self.coll_kinds.items():
                c.collectives[kind] = c.collectives.get(kind, 0) + n
            c.messages += int(self.messages[i])
            c.bytes += int(self.nbytes[i])
            c.time = ctime[i]
            if self.transit is not None:
                nb.last_transit = self.transit[self.ptr[i]:self.ptr[i + 1]].copy()


def _ranges(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """The indices ``starts[k] .. starts[k] + lengths[k] - 1`` of every k, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + offs


def link_costs(clocks: list, owner: NDArray[np.int64], peer: NDArray[np.int64], nbytes: NDArray[np.float64],
               sending: bool) -> NDArray[np.float64]:
    """``Links.cost`` of message k between the process' processor ``owner[k]`` (an index into ``clocks``) and rank
    ``peer[k]``, of ``nbytes[k]`` bytes (``sending``: owner → peer, else peer → owner), as each processor's clock
    computes it one by one — ``α + b / bandwidth`` of its links, vectorised for the processors whose links have no
    per-pair override, the others message by message."""
    owner = np.asarray(owner, dtype=np.int64)
    nbytes = np.asarray(nbytes, dtype=np.float64)
    out = np.empty(nbytes.size)
    if not nbytes.size:
        return out
    links = [c.links for c in clocks]
    plain = np.array([not lk.overrides for lk in links], dtype=bool)[owner]
    lat = np.array([lk.latency for lk in links])
    bw = np.array([lk.bandwidth for lk in links])
    out[plain] = lat[owner[plain]] + nbytes[plain] / bw[owner[plain]]
    for k in np.flatnonzero(~plain).tolist():
        i, j, b = int(owner[k]), int(peer[k]), float(nbytes[k])
        me = clocks[i].rank
        out[k] = links[i].cost(me, j, b) if sending else links[i].cost(j, me, b)
    return out


def exchange_arrays(bn: BankedNeighbours, payloads: list[NDArray[np.float64]]) -> tuple[NDArray, NDArray]:
    """Every processor's ``NeighbourComm.exchange(payloads of its pairs)`` with arrays of any length (the sizes
    travel with them, as the size round of an exchange without ``recv_sizes``): what each pair received,
    concatenated in pair order, and the pointer of each pair's block in it. Charged as the exchange charges: each
    message ``α + β · 8 · its length`` on its link, the sender's longest, then the wait for the last arrival."""
    bank, group = bn.bank, bn.group
    npairs = bn.nbr.size
    sizes_out = np.array([p.size for p in payloads], dtype=np.int64)
    data_out = np.concatenate(payloads).astype(np.float64) if npairs else np.zeros(0)
    out_ptr = np.concatenate(([0], np.cumsum(sizes_out)))
    stamps = bank.now.copy()
    out = {}
    for q in bn.procs:
        idx = bn.send_order[q]
        out[q] = np.concatenate((stamps[bn.owner[idx]], sizes_out[idx].astype(np.float64),
                                 data_out[_ranges(out_ptr[idx], sizes_out[idx])]))
    got = group.exchange(out)
    r_stamp, r_size, r_data = [np.zeros(0)], [np.zeros(0, np.int64)], [np.zeros(0)]
    for q in bn.procs:
        n = bn.recv_pairs[q]
        m = got[q]
        r_stamp.append(m[:n])
        r_size.append(m[n:2 * n].astype(np.int64))
        r_data.append(m[2 * n:])
    r_stamp, r_size, r_data = np.concatenate(r_stamp), np.concatenate(r_size), np.concatenate(r_data)
    r_ptr = np.concatenate(([0], np.cumsum(r_size)))
    local = bn.src < bn.L
    rev = bn.reverse
    sizes_in = np.empty(npairs, dtype=np.int64)
    stamp_in = np.empty(npairs)
    start = np.empty(npairs, dtype=np.int64)
    sizes_in[local] = sizes_out[rev[local]]
    stamp_in[local] = stamps[bn.src[local]]
    start[local] = out_ptr[rev[local]]
    pos = bn.src[~local] - bn.L
    sizes_in[~local] = r_size[pos]
    stamp_in[~local] = r_stamp[pos]
    start[~local] = data_out.size + r_ptr[pos]
    incoming = np.concatenate((data_out, r_data))[_ranges(start, sizes_in)]
    send = link_costs(bn.clocks, bn.owner, bn.nbr, 8.0 * sizes_out, True)
    recv = link_costs(bn.clocks, bn.owner, bn.nbr, 8.0 * sizes_in, False)
    own = np.zeros(bn.L)
    if bn.nz_starts.size:
        own[bn.has_nbrs] = np.maximum.reduceat(send, bn.nz_starts)
    cs = np.concatenate(([0], np.cumsum(8 * sizes_out)))  # int(Σ 8.0 · length) of each processor: exact
    bn.charge_exchange(stamps, own, stamp_in + recv, stamp_in, cs[bn.ptr[1:]] - cs[bn.ptr[:-1]])
    return incoming, np.concatenate(([0], np.cumsum(sizes_in)))
