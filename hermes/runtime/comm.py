"""Neighbour exchanges and collectives with cost accounting — the only MPI the algorithms see.

:class:`NeighbourComm` wraps a communicator, the rank's neighbours in the processor graph and a clock.
Every call performs the real MPI operation, charges the clock (virtual: α-β model with message
time stamps; wall: measured) and updates :class:`Counters`, so each algorithm reports the same
counters (rounds, collectives by kind, messages, bytes, modelled time) whatever it is.

Reductions are done as an ``Allgather`` followed by a sum in rank order: one collective, and the
result is bitwise identical on every rank and between runs (MPI's own reduction order may vary).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.clock import Clock
from hermes.runtime.ops import waitall

__all__ = ["Counters", "NeighbourComm", "allreduce", "agree", "gather_error", "ordered_sum", "Bookkeeping",
           "exchange_objects", "sparse_exchange", "allgather", "bcast", "exchange_arrays"]

_TAG_EXCHANGE = 101


@dataclass
class Counters:
    """Cost counters every balancer reports (issue: cost accounting)."""

    iterations: int = 0
    exchange_rounds: int = 0
    collectives: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    bytes: int = 0
    time: float = 0.0

    def count_collective(self, kind: str) -> None:
        self.collectives[kind] = self.collectives.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class NeighbourComm:
    """Exchange with the neighbours of this rank in the processor graph.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The communicator (passed explicitly).
    neighbours : array of int
        Neighbour ranks, sorted; every rank must list the same edges from both ends.
    clock : VirtualClock or WallClock
    counters : Counters, optional
    """

    def __init__(self, comm, neighbours, clock: Clock, counters: Counters | None = None):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.neighbours = np.asarray(neighbours, dtype=np.int64)
        self.clock = clock
        self.counters = counters if counters is not None else Counters()
        self.last_transit = np.zeros(len(self.neighbours))

    def exchange(self, send: list[NDArray] | NDArray, model_bytes=None, recv_sizes=None) -> list[NDArray[np.float64]]:
        """Send ``send[k]`` to ``neighbours[k]`` and receive one array from each neighbour.

        Parameters
        ----------
        send : list of float arrays, or a float array with one scalar per neighbour
        model_bytes : array of float, optional
            Message sizes to charge in the α-β model (default: the real payload size). They must be
            symmetric — what this rank sends to neighbour k is what k sends here — as for halo
            exchanges, whose size is proportional to the shared boundary.
        recv_sizes : array of int, optional
            Lengths of the arrays to receive, when known (saves a round of size messages).

        Returns
        -------
        list of float64 arrays, aligned with ``neighbours``.
        """
        nb = self.neighbours
        if isinstance(send, np.ndarray) and send.ndim == 1 and len(send) == len(nb) and send.dtype != object:
            payloads = [np.asarray(send[k : k + 1], dtype=np.float64) for k in range(len(nb))]
        else:
            payloads = [np.asarray(s, dtype=np.float64).ravel() for s in send]
        if len(payloads) != len(nb):
            raise ValueError(f"{len(payloads)} payloads for {len(nb)} neighbours")
        clock = self.clock
        stamp = clock.stamp()
        t_start = clock.now
        real_bytes = np.array([8.0 * p.size for p in payloads])
        sent_bytes = real_bytes if model_bytes is None else np.asarray(model_bytes, dtype=np.float64)
        # with an extra load (virtual clock) a message's duration depends on the sender's link congestion:
        # the sender computes it and sends it after the stamp (the header grows by one number)
        congested = clock.kind == "virtual" and getattr(clock, "load", None) is not None
        head = 2 if congested else 1
        if congested:
            send_costs = clock.message_costs(nb, sent_bytes)
        with clock.measure("comm"):
            if recv_sizes is None:
                # sizes first (so receivers can allocate), then data with the send time stamp prepended
                sizes = np.array([p.size for p in payloads], dtype=np.int64)
                rsizes = np.zeros(len(nb), dtype=np.int64)
                reqs = []
                for k, j in enumerate(nb):
                    reqs.append(self.comm.Irecv(rsizes[k : k + 1], source=int(j), tag=_TAG_EXCHANGE))
                for k, j in enumerate(nb):
                    reqs.append(self.comm.Isend(sizes[k : k + 1], dest=int(j), tag=_TAG_EXCHANGE))
                waitall(reqs)
            else:
                rsizes = np.asarray(recv_sizes, dtype=np.int64)
            bufs = [np.empty(int(n) + head, dtype=np.float64) for n in rsizes]
            outs = [np.concatenate(([stamp, send_costs[k]] if congested else [stamp], p))
                    for k, p in enumerate(payloads)]
            reqs = []
            for k, j in enumerate(nb):
                reqs.append(self.comm.Irecv(bufs[k], source=int(j), tag=_TAG_EXCHANGE + 1))
            for k, j in enumerate(nb):
                reqs.append(self.comm.Isend(outs[k], dest=int(j), tag=_TAG_EXCHANGE + 1))
            waitall(reqs)
        if congested:
            arrivals = np.array([b[0] + b[1] for b in bufs])
        else:
            # what each neighbour charged for its message to us: same rule on its side
            recv_bytes = np.array([8.0 * (b.size - 1) for b in bufs]) if model_bytes is None else sent_bytes
            links = clock.links
            send_costs = np.array([links.cost(self.rank, int(j), b) for j, b in zip(nb, sent_bytes)])
            arrivals = np.array([b[0] + links.cost(int(j), self.rank, rb) for j, b, rb in zip(nb, bufs, recv_bytes)])
        #: one-way time of each received message (virtual: arrival − send stamp; wall: the round's time)
        self.last_transit = arrivals - np.array([b[0] for b in bufs]) if clock.kind == "virtual" else \
            np.full(len(nb), clock.now - t_start)
        t0 = clock.now
        clock.exchanged(send_costs, arrivals)
        c = self.counters
        c.exchange_rounds += 1
        c.messages += len(nb)
        c.bytes += int(sent_bytes.sum())
        c.time += clock.now - t0 if clock.kind == "virtual" else 0.0
        return [b[head:] for b in bufs]

    def exchange_scalar(self, value: float) -> NDArray[np.float64]:
        """Send the same scalar to every neighbour; returns the neighbours' scalars."""
        out = self.exchange(np.full(len(self.neighbours), float(value)), recv_sizes=np.ones(len(self.neighbours)))
        return np.array([o[0] for o in out], dtype=np.float64)

    def allgather_rows(self, value) -> NDArray[np.float64]:
        """Every rank's ``value`` (a scalar or a fixed-size vector) as rows in rank order, as the polynomial
        methods gather: the deterministic allreduce of the values placed at each rank's slot of a p × n
        matrix (exact: x + 0 = x), charged and counted as one "allgather" of p·n words."""
        v = np.atleast_1d(np.asarray(value, dtype=np.float64))
        buf = np.zeros((self.size, v.size))
        buf[self.rank] = v
        return self.allreduce(buf.ravel(), kind="allgather").reshape(self.size, v.size)

    def allreduce(self, x, op: str = "sum", kind: str = "allreduce"):
        """Deterministic allreduce (sum, max, min) of a scalar or a float array; one collective."""
        return allreduce(self.comm, x, self.clock, op=op, counters=self.counters, kind=kind)


def allgather(comm, x, clock: Clock | None = None, *, counters: Counters | None = None,
              kind: str = "allgather") -> NDArray[np.float64]:
    """Every rank's ``x`` (a scalar or a fixed-size float vector) as rows in rank order: one ``Allgather``,
    charged to ``clock`` as a tree collective of ``8·len(x)`` bytes and counted as ``kind``.

    The time stamp of every rank travels in the same message, so the virtual clock synchronises all ranks
    to the slowest one.
    """
    v = np.atleast_1d(np.asarray(x, dtype=np.float64)).ravel()
    size = comm.Get_size()
    send = np.concatenate(([clock.stamp() if clock is not None else 0.0], v))
    recv = np.empty((size, send.size), dtype=np.float64)
    if clock is not None:
        with clock.measure("sync"):
            comm.Allgather(send, recv)
        t0 = clock.now
        clock.synchronised(recv[:, 0], clock.links.collective_cost(size, 8.0 * v.size))
        if counters is not None and clock.kind == "virtual":
            counters.time += clock.now - t0
    else:
        comm.Allgather(send, recv)
    if counters is not None:
        counters.count_collective(kind)
        counters.bytes += 8 * v.size
    return recv[:, 1:]


def allreduce(comm, x, clock: Clock | None = None, *, op: str = "sum", counters: Counters | None = None,
              kind: str = "allreduce"):
    """Allreduce (sum, max, min) of a scalar or a float vector: the communicator's
    :meth:`~hermes.runtime.communicator.Communicator.reduce_stamped` (one ``Allgather`` of every rank's stamp and
    vector, reduced in rank order); charges ``clock`` as :func:`allgather` does and counts ``kind``.

    The reduction runs in rank order, so the result is bitwise identical on every rank and between runs (MPI's
    own reduction order may vary), whichever runtime communicator computes it.
    """
    if op not in ("sum", "max", "min"):
        raise ValueError(f"unknown reduction {op!r}")
    scalar = np.ndim(x) == 0
    v = np.atleast_1d(np.asarray(x, dtype=np.float64)).ravel()
    stamp = clock.stamp() if clock is not None else 0.0
    if clock is not None:
        with clock.measure("sync"):
            latest, out = comm.reduce_stamped(stamp, v, op)
        t0 = clock.now
        clock.synchronised(np.array([latest]), clock.links.collective_cost(comm.Get_size(), 8.0 * v.size))
        if counters is not None and clock.kind == "virtual":
            counters.time += clock.now - t0
    else:
        latest, out = comm.reduce_stamped(stamp, v, op)
    if counters is not None:
        counters.count_collective(kind)
        counters.bytes += 8 * v.size
    return float(out[0]) if scalar else out


def bcast(comm, buf, root: int, clock: Clock | None = None, *, counters: Counters | None = None) -> NDArray[np.float64]:
    """Broadcast the float array ``buf`` from ``root`` (every rank passes an array of the same size); charged
    as a tree collective (the receivers wait for the root's stamp), counted once, its bytes at the root."""
    me, p = comm.Get_rank(), comm.Get_size()
    buf = np.asarray(buf, dtype=np.float64).ravel()
    send = np.empty(buf.size + 1)
    if me == root:
        send[0] = clock.stamp() if clock is not None else 0.0
        send[1:] = buf
    if clock is not None:
        t0 = clock.now
        with clock.measure("sync"):
            comm.Bcast(send, root=root)
        clock.synchronised(send[:1], clock.links.collective_cost(p, 8.0 * buf.size))
        if counters is not None and clock.kind == "virtual":
            counters.time += clock.now - t0
    else:
        comm.Bcast(send, root=root)
    if counters is not None:
        counters.count_collective("bcast")
        if me == root:
            counters.bytes += 8 * buf.size
    return send[1:]


def exchange_arrays(comm, out: dict[int, NDArray], clock: Clock | None = None, *, counters: Counters | None = None,
                    tag: int = _TAG_EXCHANGE + 2) -> dict[int, NDArray[np.float64]]:
    """Send the float array ``out[d]`` to rank d, receive from whoever sends (collective): an ``Alltoall`` of
    (stamp, size) headers, charged as a collective, then point-to-point messages carrying the virtual send
    time, charged α + β·bytes each. Empty arrays are not sent. Returns the received arrays by source rank."""
    me, p = comm.Get_rank(), comm.Get_size()
    out = {int(d): np.asarray(a, dtype=np.float64).ravel() for d, a in out.items() if np.size(a)}
    head = np.zeros((p, 2))
    head[:, 0] = clock.stamp() if clock is not None else 0.0
    for d, a in out.items():
        head[d, 1] = a.size
    rhead = np.empty_like(head)
    t0 = clock.now if clock is not None else 0.0
    if clock is not None:
        with clock.measure("sync"):
            comm.Alltoall(head, rhead)
        clock.synchronised(rhead[:, 0], clock.links.collective_cost(p, 8.0 * p))
    else:
        comm.Alltoall(head, rhead)
    stamp = clock.stamp() if clock is not None else 0.0
    bufs = {int(r): np.empty(int(rhead[r, 1]) + 1) for r in np.flatnonzero(rhead[:, 1] > 0)}
    sends = {d: np.concatenate(([stamp], a)) for d, a in out.items()}
    reqs = [comm.Irecv(b, source=r, tag=tag) for r, b in bufs.items()]
    reqs += [comm.Isend(b, dest=d, tag=tag) for d, b in sends.items()]
    if clock is not None:
        with clock.measure("comm"):
            waitall(reqs)
        links = clock.links
        clock.exchanged(np.array([links.cost(me, d, 8.0 * a.size) for d, a in out.items()]),
                        np.array([b[0] + links.cost(r, me, 8.0 * (b.size - 1)) for r, b in bufs.items()]))
    else:
        waitall(reqs)
    if counters is not None:
        counters.count_collective("alltoall")
        counters.time += clock.now - t0 if clock is not None and clock.kind == "virtual" else 0.0
        counters.exchange_rounds += 1
        counters.messages += len(out)
        counters.bytes += 8 * p + sum(8 * a.size for a in out.values())
    return {r: b[1:] for r, b in bufs.items()}


def exchange_objects(comm, ranks, payloads: list, tag: int) -> list:
    """Send ``payloads[k]`` (any picklable object) to ``ranks[k]`` and receive one object from each, in the
    order of ``ranks`` (collective over symmetric neighbours: every rank in ``ranks`` lists this one). The
    caller charges the clock, if the exchange is part of the model."""
    reqs = [comm.isend(pl, dest=int(r), tag=tag) for r, pl in zip(ranks, payloads)]
    got = [comm.recv(source=int(r), tag=tag) for r in ranks]
    waitall(reqs)
    return got


def sparse_exchange(comm, sends: dict[int, Any], tag: int) -> dict[int, Any]:
    """Send ``sends[r]`` to each rank r it lists; receive from every rank that sends here (collective).

    Who sends to whom is found by the communicator's ``sources`` (an all-to-all of flags in a plain run;
    bookkeeping, not charged); the messages
    themselves are point to point. Returns the received objects by source rank, in increasing rank order.
    """
    senders = comm.sources(list(sends))
    reqs = [comm.isend(obj, dest=int(r), tag=tag) for r, obj in sorted(sends.items())]
    got = {r: comm.recv(source=r, tag=tag) for r in senders}
    waitall(reqs)
    return got


def gather_error(comm, message: str | None) -> str | None:
    """Collective agreement on rank-local failures: the first message of any rank, or None on all.

    A count of the failures first (a reduction: computed once per hosting process), the messages only if one
    failed — so agreeing costs O(1) per processor, not a list of P messages read by each."""
    if not comm.allreduce(0 if message is None else 1):
        return None
    for m in comm.allgather(message):
        if m is not None:
            return m
    return None


def agree(comm, fn, *args, **kwargs):
    """Run ``fn`` on every rank; if it raises a HermesError anywhere, raise the same error on all ranks.

    Collective: every rank must call it. Other exceptions are not caught (they abort the job).
    """
    from hermes.errors import HermesError

    result, msg, etype = None, None, None
    try:
        result = fn(*args, **kwargs)
    except HermesError as err:
        msg, etype = str(err), type(err)
    if not comm.allreduce(0 if msg is None else 1):  # a count first, the messages only if one failed
        return result
    for m in comm.allgather(None if msg is None else (etype.__name__, msg)):
        if m is not None:
            import hermes.errors as he

            raise getattr(he, m[0], HermesError)(m[1])
    return result


def ordered_sum(values) -> float:
    """``Σ values`` accumulated left to right (rank order): bit for bit what :func:`allreduce` returns."""
    acc = 0.0
    for v in values:
        acc = acc + float(v)
    return acc


class Bookkeeping:
    """The testbed's own collectives: what hermes needs to *observe and record* a run, not what the simulated
    application or balancer would pay — never charged to the clock.

    Every collective of the driver is either modelled (charged through :func:`allreduce`,
    :class:`NeighbourComm` or the monitor) or bookkeeping through this class, so the split is visible where
    it happens. Bookkeeping covers the per-phase records (loads for the imbalance, timings, quality
    figures, per-cell arrays for the pictures), consistency checks (cells and weight conserved), and the
    global view of the processor graph ``H = (G, l, c, w)`` that the thesis' methods assume known (ε₀, α,
    the cost matrix of the gain function). Reductions of Python numbers use MPI's own order, as mpi4py
    does.
    """

    def __init__(self, comm) -> None:
        self.comm = comm

    def sum(self, x):
        return self.comm.allreduce(x)

    def max(self, x):
        from mpi4py import MPI

        return self.comm.allreduce(x, op=MPI.MAX)

    def allgather(self, x) -> list:
        return self.comm.allgather(x)

    def gather(self, x, root: int = 0):
        return self.comm.gather(x, root=root)

    def bcast(self, x, root: int = 0):
        return self.comm.bcast(x, root=root)
