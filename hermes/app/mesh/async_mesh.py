"""The 2-D mesh application in asynchronous mode (``application.mode: async``).

Asynchronous iterations (AIAC, Bahi, Contassot-Vivier & Couturier, seed 003): every rank sweeps its
subdomain ``iterations`` times without a barrier or a reduction between sweeps; after each sweep it sends its
boundary values to every neighbouring subdomain, and each sweep uses, for each neighbour, the newest values
that have *arrived* by the rank's current time. The synchronous form is :func:`hermes.app.mesh.simulate.solve_phase`.

The model, rank i with neighbours j (the halo plan of :func:`hermes.data.distributed.halo_plan`):

* phase start: one synchronous halo exchange of the phase-start values (charged as one exchange of
  :class:`~hermes.runtime.comm.NeighbourComm`); its values are version 0 of every neighbour's ghosts, and the rank's
  time after it is ``s_i^0``;
* sweep k = 1…K starts at ``s_i^{k-1}``; its ghosts from j are version ``v_ij^k = max{m : a_ji^m ≤ s_i^{k-1}}``;
  it costs ``W_i = work_per_weight · Σ weights`` work units: ``s_i^k = s_i^{k-1} + W_i / rate_i`` (the clock's
  compute, with an extra load the processor-sharing time);
* after sweep k the rank sends version k of its boundary values to each j at ``t_ij^k = s_i^k``; it arrives at

      ``a_ij^k = max(t_ij^k + d_ij^k, a_ij^{k-1})``,   ``d_ij^k = α_ij + β_ij · b_ij``

  with ``b_ij = bytes_per_edge × shared cut edges`` (as the synchronous exchange charges); with an extra load
  ``d_ij^k`` is what :meth:`~hermes.extraload.sharing.ProcessorLoad.preview_send` gives: the load's link sharing
  with the tasks' flows in flight, on a copy of the load's state (a blocking send, as the synchronous exchange's
  :meth:`~hermes.runtime.clock.VirtualClock.message_costs`, would hold the processor until delivery; these messages
  overlap the next sweep, and are not fed back into the tasks' model). The max makes every
  link FIFO (a message never overtakes an earlier one on its link, as MPI's and TCP's ordering guarantee);
  without a load the durations are constant and it changes nothing;
* sending costs the sender no time: the message is handed to the network and overlaps the next sweep
  (AIAC, 003 §II-B: no idle time, communications overlapped by computations). Nothing else advances the clock
  during the sweeps: a rank never waits;
* at the end the local residual ``Σ (u^K − u^{K−1})²`` of the last sweep is summed by one charged
  :func:`~hermes.runtime.comm.allreduce` (which synchronises the ranks, as the driver's own end-of-phase reduction).

Virtual clock: a conservative simulation (Chandy–Misra)
    Rank i must know, before sweep k, exactly which versions have arrived by its time ``s = s_i^{k-1}``,
    whatever the processes' real speeds. Every message carries ``(version, t, a)`` and travels with a
    per-phase tag, so j's messages reach i in send order (MPI non-overtaking). Rank i receives j's messages in
    order (blocking) until it holds one with ``a > s`` (kept for later) or j's ``done`` marker; then every
    version with ``a ≤ s`` is known (the links are FIFO) and the newest is used. After the initial exchange
    each rank announces version 0 (the values already exchanged) at ``t = s^0`` with ``a = s^0 + α``, a null
    message that keeps the induction below true before the first sweep. Waiting for these receives is the
    simulator's, not the model's: it costs no virtual time.

    *No deadlock when every latency α > 0.* A rank waits only at the start of a sweep, at its time ``s``, and it
    has just sent a message stamped ``s`` to every neighbour (its last sweep's values or version 0). If i waits
    for j while j waits at ``s_j``, j's last message arrives at ``a ≥ s_j + α`` (every duration ``d ≥ α``: the
    α-β cost, and the extra load only slows messages down) and has not satisfied i, so ``s_j + α ≤ a ≤ s_i``. A
    cycle of waiting ranks i → j → … → i would give ``s_i ≥ s_i + n α``, impossible for α > 0; so a waiting
    chain ends at a running rank, which sends or finishes. A finished rank has sent ``done`` (nobody waits for
    it) and only waits for its neighbours' ``done``. Hence scenarios with ``mode: async`` refuse a zero latency
    on the virtual clock.

    The values, the versions used and every time stamp depend only on the input: bit-identical between runs,
    whatever the scheduling of the processes (the MPI test slows ranks down with random real sleeps).

Wall clock
    Real non-blocking MPI: each version is sent with ``Isend`` (the requests are kept and completed at the end);
    at the start of each sweep the rank receives everything that has arrived (``Iprobe``/``Recv``) and keeps the
    newest version per neighbour; no barrier. After its last sweep it sends ``done`` and receives until it has
    every neighbour's ``done`` (no message crosses into the next phase), then waits for its sends.

    *How old a halo is.* Every version carries the real time (``time.time()``) at which its sender handed it to
    MPI, and each sweep records, per neighbour j, the time of the rank's last poll of j (the ``Iprobe`` that found
    nothing more) and the send time of the version it used (:class:`AsyncSweep` ``polled``, ``halo_sent``,
    ``ages``). The bound: *the version used from j is at least every version j handed to MPI more than δ before
    that poll*, δ the time MPI takes to deliver a message to the rank's process (microseconds within a machine);
    so a halo's age (poll time minus the send time of the version used) is at most δ plus j's time between that
    version and its next one (about one sweep of j), and nothing if j has sent no newer one. Hosted processors
    (:mod:`hermes.runtime.hosting`, also one per process) keep it: a hosted ``Iprobe`` that finds nothing reads the
    envelopes that reached the process before it answers; the rank's other neighbours are polled after j, and a
    hosted poll lets the processors hosted with the rank run once, so under hosting a sweep starts at most that
    many turns of theirs after its poll of j. Checked under mpiexec, hosted 2 per process and 1 per process, with
    δ = 0.1 s (tests/mpi/async_halo_age.py): before hosted polls read the bridge, a hosted rank used version 0
    of every neighbour on another process in every sweep.

Jacobi's result differs from the synchronous one (stale ghosts) but converges: the iteration matrix of
``(σ I + L) u = f`` has max-norm ``max deg/(σ + deg) < 1``, and an asynchronous iteration of a max-norm
contraction converges (El Tarazi's theorem; Bertsekas & Tsitsiklis, *Parallel and Distributed Computation*,
ch. 6 — 003 §II-B, refs. [12], [13]). From u = 0 with f > 0 the map is monotone (non-negative coefficients;
floating-point rounding is monotone too), so every version only grows and stays below the solution ``u*``: the
distance ``‖u* − u‖`` shrinks with every sweep of every rank, and a value whose chain of dependencies holds d
sweeps lies between the synchronous iterates of 1 and d sweeps (d ≤ p·K). Stale ghosts make a sweep gain less
than a synchronous one; a rank reading the newer versions of a faster neighbour can gain more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace

import time

import numpy as np
from numpy.typing import NDArray

from hermes.app.mesh.kernels import jacobi_sweeps
from hermes.app.mesh.simulate import LoopStats, ghost_layout, jacobi_step
from hermes.runtime.comm import NeighbourComm
from hermes.data.distributed import HaloPlan, LocalDomain, halo_plan
from hermes.runtime.ops import waitall

__all__ = ["AsyncSweep", "AsyncReference", "async_sweeps", "solve_phase_async", "async_serial", "ASYNC_TAG"]

#: base of the per-phase tags (``ASYNC_TAG + phase % 1000``): far from the other tags of hermes
ASYNC_TAG = 17000
_HEAD = 3  # version, send time, arrival time
_DONE = -1.0


@dataclass(frozen=True)
class AsyncSweep:
    """One sweep of one rank, as :func:`async_sweeps` yields it.

    ``versions[k]``: the version of neighbour ``ranks[k]``'s values the sweep used (0: the phase start);
    ``time``: the rank's clock after the sweep (the send time of its version ``k``); ``u`` the local values
    after the sweep (None for the synthetic kernel); ``local_residual`` ``Σ (u_new − u_old)²`` (jacobi) or
    the sweep's work (synthetic, as the synchronous loop reports).

    The age of the halos (module docstring): ``sent`` the time version ``k`` was handed to MPI, ``polled[k]`` the
    time of the rank's last poll of neighbour ``ranks[k]`` before the sweep and ``halo_sent[k]`` the send time of
    the version it used — virtual clock: the rank's time ``s^{k-1}`` and the versions' virtual send times; wall
    clock: real times (``time.time()``, comparable between the processes of one machine). Version 0's send time
    is the rank's own time when its initial exchange began.
    """

    k: int
    time: float
    versions: NDArray[np.int64]
    u: NDArray[np.float64] | None
    local_residual: float
    sent: float = 0.0
    polled: NDArray[np.float64] | None = None
    halo_sent: NDArray[np.float64] | None = None

    @property
    def ages(self) -> NDArray[np.float64]:
        """Per neighbour, the time from the send of the version used to the rank's last poll of it."""
        return self.polled - self.halo_sent


class _Stream:
    """The messages of one neighbour, in send order, and the newest version taken so far."""

    def __init__(self, comm, source: int, size: int, tag: int, values: NDArray[np.float64], sent: float = 0.0):
        self.comm, self.source, self.size, self.tag = comm, source, size, tag
        self.queue: deque[NDArray[np.float64]] = deque()
        self.done = False
        self.version = 0
        self.values = values
        self.sent = sent  # the send time of the version held
        self.polled = sent  # wall clock: when the last poll found nothing more

    def _receive(self) -> None:
        msg = np.empty(self.size + _HEAD)
        self.comm.Recv(msg, source=self.source, tag=self.tag)
        if msg[0] == _DONE:
            self.done = True
        else:
            self.queue.append(msg)

    def _take(self, s: float) -> None:
        """Use the queued versions that have arrived by ``s`` (the queue is in arrival order)."""
        while self.queue and self.queue[0][2] <= s:
            msg = self.queue.popleft()
            if msg[0] > self.version:
                self.version, self.values, self.sent = int(msg[0]), msg[_HEAD:], float(msg[1])

    def at(self, s: float) -> None:
        """Virtual clock: receive in order until a message arriving after ``s`` (or ``done``) is known."""
        while True:
            self._take(s)
            if self.queue or self.done:
                return
            self._receive()

    def arrived(self) -> None:
        """Wall clock: everything that has arrived, newest version kept."""
        while not self.done and self.comm.Iprobe(source=self.source, tag=self.tag):
            self._receive()
        self.polled = time.time()
        self._take(np.inf)

    def close(self) -> None:
        """Receive until ``done`` (what is left is dropped: the phase is over)."""
        while not self.done:
            self._receive()
        self.queue.clear()


def _durations(clock, ranks, model_bytes) -> NDArray[np.float64]:
    """``d_ij`` of a message sent now to each neighbour: the load's link sharing (non-blocking), else ``α + β b``."""
    if clock.kind == "virtual" and getattr(clock, "load", None) is not None:
        return np.asarray(clock.load.preview_send(clock.now, ranks, model_bytes), dtype=np.float64)
    return np.array([clock.links.cost(clock.rank, int(j), float(b)) for j, b in zip(ranks, model_bytes)])


def async_sweeps(comm, dom: LocalDomain, clock, *, kernel: str, iterations: int, work_per_weight: float,
                 bytes_per_edge: float, tag: int = ASYNC_TAG,
                 nb: NeighbourComm | None = None, plan: HaloPlan | None = None) -> Iterator[AsyncSweep]:
    """The asynchronous sweeps of this rank, one :class:`AsyncSweep` each (collective over the neighbours).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    dom : LocalDomain
        The rank's subdomain; ``dom.fields["u"]`` is the phase-start solution (jacobi).
    clock : VirtualClock or WallClock
    kernel, iterations, work_per_weight, bytes_per_edge
        As :func:`hermes.app.mesh.simulate.solve_phase`.
    tag : int
        The phase's message tag (every rank passes the same).
    nb : NeighbourComm, optional
        Counts the messages and bytes (one is made if not given).
    plan : HaloPlan, optional
        ``halo_plan(dom)``, if the caller has it already.

    Yields
    ------
    AsyncSweep
        After each sweep and its sends. Once exhausted, the rank has sent ``done``, received every neighbour's
        ``done`` and completed its sends.

    Raises
    ------
    ValueError
        On the virtual clock, a link of this rank to a neighbour with latency ≤ 0 (the conservative simulation
        could deadlock; the scenario refuses it first).
    """
    plan = plan if plan is not None else halo_plan(dom)
    ranks = [int(j) for j in plan.ranks]
    nb = nb if nb is not None else NeighbourComm(comm, plan.ranks, clock)
    virtual = clock.kind == "virtual"
    me = comm.Get_rank()
    if virtual and any(clock.links.params(me, j)[0] <= 0 for j in ranks):
        raise ValueError("application.mode async on the virtual clock needs every link latency > 0")
    model_bytes = bytes_per_edge * plan.cut_edges.astype(np.float64)
    order, ghost_sorted = ghost_layout(plan)
    work = work_per_weight * dom.load
    u = dom.fields.get("u") if kernel == "jacobi" else None
    began = clock.now if virtual else time.time()  # version 0's send time (AsyncSweep)

    def boundary(values) -> list[NDArray[np.float64]]:
        return [values[idx] if values is not None else np.zeros(idx.size) for idx in plan.send_idx]

    first = nb.exchange(boundary(u), model_bytes=model_bytes,
                        recv_sizes=np.array([g.size for g in plan.recv_gid], dtype=np.int64))
    streams = [_Stream(comm, j, g.size, tag, v, began) for j, g, v in zip(ranks, plan.recv_gid, first)]
    sends: list = []  # (request, buffer): the buffer lives until the send completes
    last_arrival = np.full(len(ranks), -np.inf)

    def post(version: int, stamp: float, arrivals, payloads) -> None:
        for k, j in enumerate(ranks):
            msg = np.concatenate(([float(version), stamp, arrivals[k]], payloads[k]))
            sends.append((comm.Isend(msg, dest=j, tag=tag), msg))
        sends[:] = [(q, b) for q, b in sends if not q.Test()]

    if virtual:  # the null message of version 0 (module docstring): not part of the model, not counted
        s0 = clock.now
        last_arrival = np.array([s0 + clock.links.params(me, j)[0] for j in ranks])
        post(0, s0, last_arrival, [np.zeros(g.size) for g in plan.send_idx])
    for k in range(1, iterations + 1):
        with clock.measure("comm"):
            for st in streams:
                if virtual:
                    st.at(clock.now)
                else:
                    st.arrived()
        versions = np.array([st.version for st in streams], dtype=np.int64)
        polled = np.array([clock.now if virtual else st.polled for st in streams], dtype=np.float64)
        halo_sent = np.array([st.sent for st in streams], dtype=np.float64)
        clock.compute(work)
        if u is not None:
            u, local = jacobi_step(dom, u, [st.values for st in streams], order, ghost_sorted, clock)
        else:
            local = work
        stamp = clock.stamp() if virtual else time.time()  # wall: when the version is handed to MPI
        if virtual:
            last_arrival = np.maximum(stamp + _durations(clock, ranks, model_bytes), last_arrival)
        with clock.measure("comm"):
            post(k, stamp, last_arrival if virtual else np.zeros(len(ranks)), boundary(u))
        nb.counters.messages += len(ranks)
        nb.counters.bytes += int(model_bytes.sum())
        yield AsyncSweep(k, clock.now, versions, u, local, stamp, polled, halo_sent)
    with clock.measure("sync"):
        post(-1, clock.stamp(), np.full(len(ranks), np.inf), [np.zeros(g.size) for g in plan.send_idx])
        for st in streams:
            st.close()
        waitall([q for q, _ in sends])


def solve_phase_async(comm, dom: LocalDomain, clock, *, kernel: str, iterations: int, work_per_weight: float,
                      bytes_per_edge: float, tag: int = ASYNC_TAG) -> tuple[LocalDomain, LoopStats]:
    """Run ``iterations`` asynchronous sweeps (module docstring) and sum the last sweep's residual (collective).

    Returns the domain with the new ``u`` (jacobi) and the same :class:`~hermes.app.mesh.simulate.LoopStats` as the
    synchronous loop: ``residual`` is ``Σ_ranks Σ (u^K − u^{K−1})²`` of each rank's last sweep (jacobi) or the
    sum of the ranks' work per sweep (synthetic), reduced once at the end with the clock charged.
    """
    plan = halo_plan(dom)
    nb = NeighbourComm(comm, plan.ranks, clock)
    last = None
    for last in async_sweeps(comm, dom, clock, kernel=kernel, iterations=iterations, work_per_weight=work_per_weight,
                             bytes_per_edge=bytes_per_edge, tag=tag, nb=nb, plan=plan):
        pass
    residual = nb.allreduce(last.local_residual if last is not None else 0.0)
    if kernel == "jacobi" and last is not None:
        dom = replace(dom, fields={**dom.fields, "u": last.u})
    c = nb.counters
    work = work_per_weight * dom.load
    return dom, LoopStats(iterations=iterations, work=work * iterations, bytes_sent=float(c.bytes),
                          messages=c.messages, residual=float(residual))


@dataclass(frozen=True)
class AsyncReference:
    """What :func:`async_serial` computes: the final solution (by global id), each rank's time after its last
    sweep, and ``versions[i][k - 1]`` the versions of its neighbours' values (in ``neighbours[i]`` order) that
    rank i's sweep k used."""

    u: NDArray[np.float64]
    times: NDArray[np.float64]
    neighbours: list[NDArray[np.int64]]
    versions: list[NDArray[np.int64]]


def async_serial(xadj, adjncy, weights, f, u0, owner, clocks, *, iterations: int, work_per_weight: float,
                 bytes_per_edge: float) -> AsyncReference:
    """The serial oracle of the virtual-clock jacobi run of :func:`async_sweeps`: every rank in one process.

    Parameters
    ----------
    xadj, adjncy, weights, f, u0 : arrays
        The whole mesh's dual graph (CSR), cell weights, source term and phase-start solution.
    owner : int array
        The rank of every cell.
    clocks : list of VirtualClock
        One fresh clock per rank (no extra load), at the phase start; they are advanced as the ranks' would be.

    Notes
    -----
    The model of the module docstring, evaluated directly: after the initial exchange (its clock charges
    repeated here with every stamp equal to the clocks' common start), rank i's sweep k starts at
    ``s_i^{k-1}``, uses from each neighbour j the version ``max{m : a_ji^m ≤ s_i^{k-1}}`` and ends at
    ``s_i^k = s_i^{k-1} + W_i / rate_i``. Sweeps are evaluated in the order of their start times: a version
    used at ``s`` was sent at ``t < a ≤ s`` by a sweep that started before ``t``, so it is already known. Each
    cell sums its neighbours in adjacency order as :func:`~hermes.app.mesh.kernels.jacobi_sweep` does, so the
    distributed run must equal this bit for bit.
    """
    p = len(clocks)
    owner = np.asarray(owner, dtype=np.int64)
    rows = np.repeat(np.arange(xadj.size - 1), np.diff(xadj))
    cut = owner[rows] != owner[adjncy]
    pairs = np.stack([owner[rows[cut]], owner[adjncy[cut]]], axis=1)
    nbrs = [np.unique(pairs[pairs[:, 0] == i, 1]) for i in range(p)]
    cut_edges = [np.array([np.count_nonzero((pairs[:, 0] == i) & (pairs[:, 1] == j)) for j in nbrs[i]])
                 for i in range(p)]
    cells = [np.flatnonzero(owner == i) for i in range(p)]
    work = [work_per_weight * float(weights[c].sum()) for c in cells]
    for i, ck in enumerate(clocks):  # the initial synchronous exchange, every stamp at the common start
        b = bytes_per_edge * cut_edges[i].astype(np.float64)
        t0 = ck.now
        ck.exchanged(np.array([ck.links.cost(i, int(j), x) for j, x in zip(nbrs[i], b)]),
                     np.array([t0 + ck.links.cost(int(j), i, x) for j, x in zip(nbrs[i], b)]))
    start = [[ck.now] for ck in clocks]  # start[i][k]: the time s_i^k
    for i, ck in enumerate(clocks):
        for _ in range(iterations):
            ck.compute(work[i])
            start[i].append(ck.now)
    arrival = {}  # (j, i): a_ji^m for m = 0..K (version 0: the null message, one latency after s_j^0)
    for j in range(p):
        for i, x in zip(nbrs[j], cut_edges[j]):
            d = clocks[j].links.cost(j, int(i), bytes_per_edge * float(x))
            a = [start[j][0] + clocks[j].links.params(j, int(i))[0]]
            for m in range(1, iterations + 1):
                a.append(max(start[j][m] + d, a[-1]))
            arrival[j, int(i)] = np.array(a)
    history = [[np.asarray(u0, dtype=np.float64)[c]] for c in cells]  # history[i][m]: rank i's version m
    used = [np.zeros((iterations, nbrs[i].size), dtype=np.int64) for i in range(p)]
    events = sorted((start[i][k - 1], i, k) for i in range(p) for k in range(1, iterations + 1))
    x = np.asarray(u0, dtype=np.float64).copy()
    for s, i, k in events:
        x[cells[i]] = history[i][k - 1]
        for n, j in enumerate(nbrs[i]):
            v = max(int(np.searchsorted(arrival[int(j), i], s, side="right")) - 1, 0)  # 0: the initial exchange
            used[i][k - 1, n] = v
            x[cells[j]] = history[int(j)][v]
        history[i].append(jacobi_sweeps(xadj, adjncy, f, x, 1)[cells[i]])
    u = np.empty(xadj.size - 1)
    for i in range(p):
        u[cells[i]] = history[i][-1]
    return AsyncReference(u, np.array([st[-1] for st in start]), nbrs, used)
