"""The asynchronous Brusselator over MPI: one :class:`~hermes.app.brusselator.aiac.AiacRank` per process.

Virtual clock — :func:`aiac_mpi_virtual`
    A conservative parallel discrete-event simulation. The processors' virtual time lines are independent; the MPI
    processes only make sure that each processor handles its events (arrivals, iteration boundaries) in the
    order of :func:`~hermes.app.brusselator.aiac.aiac_serial`. The simulation proceeds in rounds. In a round every
    process announces (allgather) the time ``E_k`` of its next iteration boundary and the earliest arrival ``C_k``
    of a received control message (the only events after which it sends before its next boundary); then it
    handles all its events earlier than the horizon

        ``H_i = min_{k ≠ i} min(E_k, C_k) + α_min``

    (α_min the least link latency), lowered to ``s + 2 α_min`` as soon as it sends a control message at time s
    (the answer to it cannot come back sooner), sends what it produced to its neighbours and receives theirs. No
    event that i has not received can reach it before its horizon: one caused by the state at the round's start
    is sent at some ``E_k`` or ``C_k`` or later and travels at least α_min; one answering i's own messages of
    this round comes back at least 2 α_min after i sent them. Events of earlier rounds are already in i's inbox. So each processor sees exactly the
    events the serial simulation gives it, in the same order, and the run equals :func:`aiac_serial` bit for bit —
    whatever the processes' real speeds or placement. The allgather is the simulator's, not the modelled
    algorithm's (it costs no virtual time). A round handles at least the globally earliest event.
Wall clock — :func:`aiac_mpi_wall`
    Real non-blocking MPI, no barrier: each process probes for arrived messages (``Iprobe``), hands them to the
    communication-thread handler, runs its iteration boundary and the next sweep; sends are ``isend`` and a
    border message is skipped while the previous one to that neighbour is incomplete (``Test``). Messages are
    handled between sweeps (a polling implementation, not PM2's threads). At the end each process sends ``bye``
    to its neighbours and receives until it has theirs, so no message is left unreceived.
"""

from __future__ import annotations

import heapq
import math
import time

from mpi4py import MPI

from hermes.app.brusselator.aiac import CONTROL_KINDS, AiacRank
from hermes.app.brusselator.iteration import Event, IterConfig, Platform, BlockRecord, WallTimer
from hermes.runtime.ops import waitall

__all__ = ["aiac_mpi_virtual", "aiac_mpi_wall"]

_TAG = 7401


def _min_latency(platform: Platform) -> float:
    p, links = platform.size, platform.links
    return min([links.min_cost(i, i + 1) for i in range(p - 1)] + [links.min_cost(i + 1, i) for i in range(p - 1)],
               default=math.inf)


def aiac_mpi_virtual(comm, cfg: IterConfig, platform: Platform, bounds) -> tuple[BlockRecord, list, int]:
    """This process's processor in a virtual-time AIAC run (module docstring).

    Returns the rank's record, the root's detection rounds (empty elsewhere) and the number of simulation rounds.
    """
    r, p = comm.Get_rank(), comm.Get_size()
    rk = AiacRank(r, p, cfg, bounds, platform.rates[r], platform.links)
    amin = _min_latency(platform)
    nbrs = [r + s for s in rk.sides]
    inbox: list = []
    outgoing = rk.begin(0.0)
    rounds = 0
    while True:
        rounds += 1
        bundles = {j: [] for j in nbrs}
        for ev in outgoing:
            bundles[ev.dest].append(ev)
        reqs = [comm.isend(bundles[j], dest=j, tag=_TAG) for j in nbrs]
        for j in nbrs:
            for ev in comm.recv(source=j, tag=_TAG):
                heapq.heappush(inbox, (ev.arrival, 0, ev.sender, ev.seq, ev))
        waitall(reqs)
        outgoing = []
        if rk.finished:
            inbox.clear()
        own_e = math.inf if rk.finished else rk.next_end
        own_c = min((item[0] for item in inbox if item[4].kind in CONTROL_KINDS), default=math.inf)
        infos = comm.allgather((own_e, own_c))
        if all(math.isinf(e) and math.isinf(c) for e, c in infos):  # every process has finished
            break
        horizon = min((min(e, c) for k, (e, c) in enumerate(infos) if k != r), default=math.inf) + amin
        while not rk.finished:
            t_arr = inbox[0][0] if inbox else math.inf
            t_end = rk.next_end
            if min(t_arr, t_end) >= horizon:
                break
            sent = rk.on_arrival(heapq.heappop(inbox)[4]) if t_arr <= t_end else rk.on_boundary()
            outgoing += sent
            # a neighbour answers a control message of this round at the earliest one latency after it arrives
            horizon = min([horizon] + [ev.sent + 2 * amin for ev in sent if ev.kind in CONTROL_KINDS])
    root = (p - 1) // 2
    return rk.record, rk.rounds if r == root else [], rounds


def aiac_mpi_wall(comm, cfg: IterConfig, platform: Platform, bounds) -> tuple[BlockRecord, list, int]:
    """This process's processor in a real-time AIAC run with non-blocking MPI (module docstring)."""
    r, p = comm.Get_rank(), comm.Get_size()
    top = float(max(platform.rates))
    rk = AiacRank(r, p, cfg, bounds, platform.rates[r], platform.links, WallTimer(platform.rates[r], top))
    nbrs = [r + s for s in rk.sides]
    data_req: dict[int, MPI.Request | None] = {s: None for s in rk.sides}
    pending: list[MPI.Request] = []
    t0 = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - t0

    def link_free(side: int) -> bool:
        q = data_req[side]
        return q is None or q.Test()

    def send(events: list[Event]) -> None:
        for ev in events:
            q = comm.isend(ev, dest=ev.dest, tag=_TAG)
            if ev.kind == "data":
                data_req[ev.dest - r] = q
            pending.append(q)
        pending[:] = [q for q in pending if not q.Test()]

    rk.link_free_hook = link_free
    send(rk.begin(now()))
    status = MPI.Status()
    byes: set[int] = set()
    while not rk.finished:
        while comm.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG, status=status):
            ev = comm.recv(source=status.Get_source(), tag=_TAG)
            if ev.kind == "bye":
                byes.add(ev.sender)
                continue
            send(rk.on_arrival(ev, now()))
            if rk.finished:
                break
        if rk.finished:
            break
        send(rk.on_boundary(now()))
    rk.record.time = now()
    send([Event(math.inf, r, -1, j, "bye", None, now(), 0) for j in nbrs])
    while len(byes) < len(nbrs):
        ev = comm.recv(source=MPI.ANY_SOURCE, tag=_TAG)
        if ev.kind == "bye":
            byes.add(ev.sender)
    waitall(pending)
    root = (p - 1) // 2
    return rk.record, rk.rounds if r == root else [], 0
