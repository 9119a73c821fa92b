"""A process' share of a hosted run: its processors as greenlets, their mailboxes, the scheduler and the
bridge to the other processes (:mod:`hermes.runtime.hosting`).

The bridge
    The processes exchange envelopes on a communicator of their own, ``world.Dup()`` made collectively when
    :meth:`Host.run` starts and freed when the run ends normally: it never probes the caller's communicator, so a
    message of the caller's own code stays there for the caller, and any tag on the bridge other than the four
    below is a defect (:class:`~hermes.runtime.hosting.values.HostedError`). A processor's poll (``Iprobe``, ``Test``)
    that finds nothing reads the bridge (non-blocking) before it answers, so a message that has reached this
    process is seen by the poll that follows, whether or not the process has other work.

Ending: a four-counter termination detection (Mattern, "Algorithms for distributed termination detection",
Distributed Computing 2(3), 1987, §4)
    Every process counts the envelopes it sent and received (point to point, collective parts, collective results;
    not the control messages). Process 0, when it has nothing to run, starts a *wave*: it asks every process for
    its counts, and a process answers only when it has nothing to run and nothing received (its processors all
    wait, or have all ended), with the processors that still wait. A process that has nothing to run can only
    become busy again by receiving an envelope, so when two consecutive waves give the same totals and the totals
    of sent and received envelopes agree, no envelope was in flight and no process ran in between: the run is
    over. If no processor waits, process 0 tells every process to end; if some do, they wait for one another
    across the processes (a message never sent, a collective not called by all) and every process raises one
    :class:`~hermes.runtime.hosting.values.HostedError` naming them — a deadlock ends the job in one line instead of
    spinning for ever. A busy process (even one that keeps polling) never answers, so a run that is slow but
    live is never declared over.

Collectives across processes
    Process 0 assembles the ``k``-th collective of every process and checks that every process' processors call
    the same collective with the same root as its own; a mismatch raises one
    :class:`~hermes.runtime.hosting.values.HostedError` on every process.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from hermes.runtime.hosting.values import (ANY_SOURCE, ANY_TAG, HostedError, Request, _apply, _copies, _copy,
                                           _directory, _fold, _frozen, _into, _reduce_rows, blocks)
from hermes.runtime.hosting.shipping import Shipping

__all__ = ["Host", "host_run"]

#: the bridge's tags (on its own communicator): an envelope to a processor, a process' parts of a collective (to
#: process 0), a collective's results (from process 0), a control message of the termination detection, a
#: process' message to another in a kernel run in bulk (:mod:`hermes.runtime.hosting.group`)
_TAG_P2P, _TAG_COLL, _TAG_RESULT, _TAG_CTRL, _TAG_BULK = 30001, 30002, 30003, 30004, 30005
#: seconds between two waves of the termination detection while the totals change (process 0 idle)
_WAVE_GAP = 0.01


class _Slot:
    """The k-th collective of a process' processors: their contributions, then their results."""

    __slots__ = ("kind", "root", "op", "parts", "results", "count")

    def __init__(self, kind: str, root: int, op) -> None:
        self.kind, self.root, self.op = kind, root, op
        self.parts: dict[int, Any] = {}
        self.results: dict[int, Any] | None = None
        self.count = 0


class Host:
    """One MPI process' share of a hosted run: its processors, their mailboxes and the scheduler.

    Parameters
    ----------
    p : int
        Processors of the run.
    world : mpi4py communicator, optional
        The MPI processes (``N = world.Get_size() ≤ p``); None: every processor in this process.
    """

    def __init__(self, p: int, world=None) -> None:
        n = world.Get_size() if world is not None else 1
        if not 1 <= n <= p:
            raise HostedError(f"{n} processes cannot host {p} processors")
        self.p, self.n, self.world = p, n, world
        self.pid = world.Get_rank() if world is not None else 0
        self.starts = blocks(p, n)
        self.lo, self.hi = int(self.starts[self.pid]), int(self.starts[self.pid + 1])
        self.local = range(self.lo, self.hi)
        self.posted: dict[int, list[Request]] = {r: [] for r in self.local}
        self.unexpected: dict[int, deque] = {r: deque() for r in self.local}
        self.waiting: dict[int, Callable[[], bool]] = {}
        self.runnable: deque[int] = deque()
        self.slots: dict[int, _Slot] = {}
        self.seq: dict[int, int] = {r: 0 for r in self.local}
        self.greenlets: dict[int, Any] = {}
        self.sched = None
        self.sends: list = []  # MPI requests of envelopes in flight
        self.shipping = Shipping()  # read-only arrays sent to the other processes once (hosting.shipping)
        self.gathering: dict[int, dict[int, Any]] = {}  # process 0: collective k's parts by process
        self.finished: dict[int, tuple[bool, Any]] = {}
        self.shared: dict[str, tuple[bytes, Any]] = {}  # hermes.runtime.hosting.shared: one array for all processors
        self.idle = 0
        self.bridge = None  # the processes' own duplicate of ``world`` (run() makes it when n > 1)
        self.sent = self.received = 0  # envelopes to and from the other processes (termination detection)
        self.asked: int | None = None  # the wave process 0 asked this process about and it has not answered
        self.ended = False  # process 0 said every processor of every process has ended
        # process 0: the current wave, its reports by process, the totals of the last complete wave, when to start
        self.wave, self.reports, self.totals, self.next_wave = 0, None, None, 0.0
        self.bulkbox: dict[tuple[int, int], np.ndarray] = {}  # a bulk kernel's envelopes by (call, process)
        self.runner: int | None = None  # the processor whose greenlet runs a bulk kernel now
        self.group = None  # the process' group (hermes.runtime.hosting.group), made by run()

    def process_of(self, rank: int) -> int:
        return int(np.searchsorted(self.starts, rank, side="right") - 1)

    # -- running --------------------------------------------------------------------------------------
    def run(self, fn: Callable[[HostedComm], Any]) -> dict[int, Any]:
        """Run ``fn(comm)`` on every processor of this process; their return values by rank.

        Raises the first error of a processor (in rank order) once every processor has ended; a processor's
        error other than a :class:`~hermes.errors.HermesError` is raised at once (the caller aborts the job).
        With other processes (``world``), the run ends when the termination detection says every processor of
        every process has ended (module docstring); a :class:`HostedError` on every process if they wait for one
        another instead, or call different collectives.
        """
        from greenlet import greenlet, getcurrent

        from hermes.errors import HermesError
        from hermes.runtime.hosting.hosted_comm import HostedComm
        from hermes.runtime.hosting.group import HostedGroup

        self.sched = getcurrent()
        self.group = HostedGroup(self)
        if self.world is not None and self.n > 1:
            self.bridge = self.world.Dup()  # collective: every process of the run starts its Host
        for r in self.local:
            comm = HostedComm(self, r)
            self.greenlets[r] = greenlet(lambda c=comm: fn(c), parent=self.sched)
        self.runnable.extend(self.local)
        live = set(self.local)
        while live or (self.bridge is not None and not self.ended):
            while self.runnable:
                r = self.runnable.popleft()
                g = self.greenlets[r]
                try:
                    value = g.switch()
                except HermesError as err:
                    self.finished[r] = (False, err)
                except BaseException:
                    raise
                else:
                    if g.dead:
                        self.finished[r] = (True, value)
                if g.dead:
                    live.discard(r)
                    self.greenlets[r] = None
            if live or self.bridge is not None:
                self._progress(live=live)
        self._flush()
        if self.bridge is not None:
            self.bridge.Free()
            self.bridge = None
        errors = [(r, v) for r, (ok, v) in sorted(self.finished.items()) if not ok]
        if errors:
            raise errors[0][1]
        return {r: v for r, (ok, v) in self.finished.items()}

    def wait(self, rank: int, ready: Callable[[], bool]) -> None:
        """Processor ``rank`` waits until ``ready()`` (its greenlet is resumed when it may be)."""
        while not ready():
            self.waiting[rank] = ready
            self.sched.switch()

    def pause(self, rank: int) -> None:
        """Let the others run once (a test or probe that found nothing)."""
        self.runnable.append(rank)
        self.sched.switch()

    def _wake(self, rank: int) -> None:
        ready = self.waiting.get(rank)
        if ready is not None and ready():
            del self.waiting[rank]
            self.runnable.append(rank)

    def poll(self) -> None:
        """Read the envelopes that have reached this process, without waiting: what a processor's poll that found
        nothing does before it answers (``Iprobe``, ``Test``)."""
        if self.bridge is not None:
            self._poll()

    def _progress(self, *, live: set) -> None:
        """Receive envelopes from the other processes; with nothing runnable and nothing received, take part in
        the termination detection (module docstring) and wait a little (alone: report a deadlock at once)."""
        got = self._poll() if self.bridge is not None else False
        if self.runnable or got or self.ended:
            self.idle = 0
            return
        errors = [v for _, (ok, v) in sorted(self.finished.items()) if not ok]
        if errors:
            # a processor's error the others did not agree on (an agreed one ends every processor of this
            # process in the same round): they wait for it in vain, here or in the other processes — end this
            # process with it, as a process of its own would have ended (and mpiexec then ends the job); with
            # all its processors ended, once its envelopes are out (the others may need them to end as well)
            if not live:
                self._flush()
            raise errors[0]
        if self.bridge is None:
            if not live:
                return
            raise HostedError(_stuck(sorted(live), "wait for each other (a message never sent or a collective "
                                                   "not called by all)"))
        # nothing to run, nothing received: this process can only become busy again by receiving an envelope
        report = (self.sent, self.received, tuple(sorted(live)))
        if self.pid == 0:
            if self.reports is None and time.monotonic() >= self.next_wave:
                self.wave += 1
                self.reports = {0: report}
                for i in range(1, self.n):
                    self._control(i, ("probe", self.wave))
                self._judge()
        elif self.asked is not None:
            self._control(0, ("report", self.asked, *report))
            self.asked = None
        self.idle += 1
        if self.idle > 100:
            time.sleep(min(1e-3, 1e-6 * self.idle))

    def _judge(self) -> None:
        """Process 0: the current wave, once every process has reported — over (end or deadlock), or the next
        wave later (module docstring)."""
        if self.reports is None or len(self.reports) < self.n:
            return
        sent = sum(r[0] for r in self.reports.values())
        received = sum(r[1] for r in self.reports.values())
        stuck = sorted(q for r in self.reports.values() for q in r[2])
        over = self.totals == (sent, received) and sent == received
        self.totals, self.reports = (sent, received), None
        if not over:
            self.next_wave = time.monotonic() + _WAVE_GAP
            return
        if not stuck:
            for i in range(1, self.n):
                self._control(i, ("end",))
            self.ended = True
            return
        self._fail(_stuck(stuck, f"wait for each other across {self.n} processes (a message never sent or a "
                                 f"collective not called by all)"))

    def _fail(self, message: str) -> None:
        """Process 0: raise ``message`` as a :class:`HostedError` here and in every other process."""
        for i in range(1, self.n):
            self._control(i, ("error", message))
        self._flush()
        raise HostedError(message)

    def _control(self, process: int, msg) -> None:
        self.sends.append(self.bridge.isend(msg, dest=process, tag=_TAG_CTRL))

    def _poll(self) -> bool:
        """Every envelope that has reached this process; True if one was not a control message."""
        from mpi4py import MPI

        bridge, st, got = self.bridge, MPI.Status(), False
        while bridge.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st):
            tag, src = st.Get_tag(), st.Get_source()
            msg = bridge.recv(source=src, tag=tag)
            if tag == _TAG_CTRL:
                self._on_control(src, msg)
                continue
            self.received += 1
            got = True
            if tag == _TAG_P2P:
                s, d, t, payload = msg
                self._deliver(d, s, t, self.shipping.unpack(src, payload))
            elif tag == _TAG_COLL:
                k, kind, root, parts = msg
                self._gather(k, src, parts, kind, root)
            elif tag == _TAG_RESULT:
                k, payload = msg
                self._results(k, payload)
            elif tag == _TAG_BULK:
                k, process, payload = msg
                self.bulkbox[(k, process)] = payload
                if self.runner is not None:
                    self._wake(self.runner)
            else:
                raise HostedError(f"the hosting bridge received tag {tag} from process {src}: no tag of its own "
                                  f"(a defect)")
        if self.sends:
            self.sends = [q for q in self.sends if not q.Test()]
        return got

    def _on_control(self, src: int, msg) -> None:
        what = msg[0]
        if what == "probe":
            self.asked = msg[1]
        elif what == "report" and self.pid == 0:
            if self.reports is not None and msg[1] == self.wave:
                self.reports[src] = msg[2:]
                self._judge()
        elif what == "end":
            self.ended = True
        elif what == "error":
            raise HostedError(msg[1])
        else:
            raise HostedError(f"the hosting bridge received {what!r} from process {src} (a defect)")

    def _send(self, process: int, tag: int, msg) -> None:
        self.sent += 1
        self.sends.append(self.bridge.isend(msg, dest=process, tag=tag))

    def _flush(self) -> None:
        from mpi4py import MPI

        if self.sends:
            MPI.Request.Waitall(self.sends)
            self.sends = []

    # -- point to point -------------------------------------------------------------------------------
    def send(self, src: int, dest: int, tag: int, payload) -> None:
        if not 0 <= dest < self.p:
            raise HostedError(f"processor {src} sends to processor {dest} of {self.p}")
        if self.lo <= dest < self.hi:
            self._deliver(dest, src, tag, payload)
        else:
            q = self.process_of(dest)
            self._send(q, _TAG_P2P, (src, dest, tag, self.shipping.pack(q, payload)))

    def _deliver(self, dest: int, src: int, tag: int, payload) -> None:
        posted = self.posted[dest]
        for i, q in enumerate(posted):
            if q.source in (ANY_SOURCE, src) and q.tag in (ANY_TAG, tag):
                del posted[i]
                self._complete(q, src, tag, payload)
                self._wake(dest)
                return
        self.unexpected[dest].append((src, tag, payload))
        self._wake(dest)

    @staticmethod
    def _complete(q: Request, src: int, tag: int, payload) -> None:
        kind, data = payload
        if q.buf is not None:
            _into(q.buf, data if kind == "buffer" else np.asarray(data))
        else:
            q.value = data
        q.status_source, q.status_tag, q.done = src, tag, True

    def post(self, rank: int, q: Request) -> Request:
        box = self.unexpected[rank]
        for i, (src, tag, payload) in enumerate(box):
            if q.source in (ANY_SOURCE, src) and q.tag in (ANY_TAG, tag):
                del box[i]
                self._complete(q, src, tag, payload)
                return q
        self.posted[rank].append(q)
        return q

    def withdraw(self, rank: int, q: Request) -> None:
        """Processor ``rank``'s posted receive ``q`` is cancelled: no message will match it."""
        posted = self.posted[rank]
        for i, x in enumerate(posted):
            if x is q:
                del posted[i]
                return

    def probe(self, rank: int, source: int, tag: int, status) -> bool:
        for src, t, payload in self.unexpected[rank]:
            if source in (ANY_SOURCE, src) and tag in (ANY_TAG, t):
                if status is not None:
                    status.source, status.tag = src, t
                    status.count = payload[1].size if payload[0] == "buffer" else 0
                return True
        return False

    # -- collectives ----------------------------------------------------------------------------------
    def collective(self, rank: int, kind: str, value, root: int = 0, op=None):
        """Processor ``rank``'s part in its next collective; returns its result (waits for the others)."""
        k = self.seq[rank]
        self.seq[rank] = k + 1
        slot = self.slots.get(k)
        if slot is None:
            slot = self.slots[k] = _Slot(kind, root, op)
        elif (slot.kind, slot.root) != (kind, root):
            raise HostedError(f"collective {k}: processor {rank} calls {kind} (root {root}) where the others "
                              f"call {slot.kind} (root {slot.root})")
        slot.parts[rank] = value
        if len(slot.parts) == len(self.local):
            if self.n == 1:
                self._finish(k, [slot.parts[r] for r in self.local])
            else:
                parts = [slot.parts[r] for r in self.local]
                if self.pid == 0:
                    self._gather(k, 0, parts, kind, root)
                else:
                    self._send(0, _TAG_COLL, (k, kind, root, parts))
            slot.parts = {}
        self.wait(rank, lambda: slot.results is not None)
        out = slot.results.pop(rank)
        slot.count += 1
        if slot.count == len(self.local):
            del self.slots[k]
        return out

    def bulk(self, rank: int, name: str, part, kernel: Callable[[Any, list], list]):
        """Processor ``rank``'s part in its next collective, a kernel run in bulk
        (:meth:`hermes.runtime.communicator.Communicator.bulk`): the last of this process' processors to arrive runs
        ``kernel(group, parts)`` (``parts`` in rank order) in its own greenlet; every processor gets its item of
        the result. Processors calling different kernels (``name``) at the same call: a :class:`HostedError`."""
        k = self.seq[rank]
        self.seq[rank] = k + 1
        slot = self.slots.get(k)
        if slot is None:
            slot = self.slots[k] = _Slot("bulk", 0, name)
        elif (slot.kind, slot.op) != ("bulk", name):
            what = f"bulk {slot.op}" if slot.kind == "bulk" else f"{slot.kind} (root {slot.root})"
            raise HostedError(f"collective {k}: processor {rank} calls bulk {name} where the others call {what}")
        slot.parts[rank] = part
        if len(slot.parts) == len(self.local):
            parts = [slot.parts[r] for r in self.local]
            slot.parts = {}
            self.runner = rank
            try:
                out = kernel(self.group, parts)
            finally:
                self.runner = None
            if len(out) != len(parts):
                raise HostedError(f"bulk {name}: {len(out)} results for {len(parts)} processors (a defect)")
            slot.results = dict(zip(self.local, out))
            for r in self.local:
                self._wake(r)
        self.wait(rank, lambda: slot.results is not None)
        res = slot.results.pop(rank)
        slot.count += 1
        if slot.count == len(self.local):
            del self.slots[k]
        return res

    def bulk_send(self, process: int, k: int, payload) -> None:
        """The bulk kernel's ``k``-th call sends ``payload`` to process ``process``."""
        self._send(process, _TAG_BULK, (k, self.pid, payload))

    def bulk_wait(self, k: int, processes: list[int]) -> dict[int, np.ndarray]:
        """Wait (the kernel's greenlet) for the envelopes of the bulk kernel's ``k``-th call from ``processes``."""
        box, rank = self.bulkbox, self.runner
        self.wait(rank, lambda: all((k, q) in box for q in processes))
        return {q: box.pop((k, q)) for q in processes}

    def _gather(self, k: int, process: int, parts: list, kind: str, root: int) -> None:
        """Process 0: process ``process``'s contributions to collective ``k`` (its processors' ``kind`` and
        ``root``); when all are in, the results — or, if the processes do not call the same collective, one
        :class:`HostedError` on every process."""
        got = self.gathering.setdefault(k, {})
        got[process] = (kind, root, parts)
        if len(got) < self.n:
            return
        del self.gathering[k]
        slot = self.slots[k]
        for i in range(1, self.n):
            if got[i][:2] != (slot.kind, slot.root):
                self._fail(f"collective {k}: processor {int(self.starts[i])} (process {i}) calls {got[i][0]} "
                           f"(root {got[i][1]}) where processor 0 (process 0) calls {slot.kind} (root {slot.root})")
        full = [v for i in range(self.n) for v in got[i][2]]
        for i in range(self.n):
            payload = self._share(slot.kind, slot.root, full, i)
            if i == 0:
                self._results(k, payload)
            else:
                self._send(i, _TAG_RESULT, (k, payload))

    def _share(self, kind: str, root: int, full: list, process: int):
        """What process ``process`` needs of the ``P`` contributions ``full`` to collective ``kind``."""
        lo, hi = int(self.starts[process]), int(self.starts[process + 1])
        if kind in ("bcast", "Bcast"):
            return full[root]
        if kind in ("gather", "barrier"):
            return full if lo <= root < hi and kind == "gather" else None
        if kind == "scatter":
            return full[root][lo:hi]
        if kind == "alltoall":
            return [[row[r] for row in full] for r in range(lo, hi)]
        if kind == "Alltoall":  # (P, p_send, k) buffers stacked: the columns of this process' processors
            if len({(a.shape, a.dtype) for a in full}) > 1:
                raise HostedError("Alltoall: the processors' buffers differ in size or type")
            return np.stack(full)[:, lo:hi]
        if kind == "directory":
            return _directory(full, lo, hi)
        return full

    def _results(self, k: int, payload) -> None:
        self._finish(k, payload, shared=True)

    def _finish(self, k: int, data, shared: bool = False) -> None:
        """Collective ``k``'s result for each processor of this process, from what this process received
        (``shared``) or from its own processors' contributions (a single process)."""
        slot = self.slots[k]
        kind, root, op = slot.kind, slot.root, slot.op
        if not shared:  # one process: data is the full list of contributions
            data = self._share(kind, root, data, 0)
        res: dict[int, Any] = {}
        if kind == "allgather":
            frozen = all(map(_frozen, data))  # once: immutable values are shared, not copied
            res = {r: list(data) if frozen else _copies(data) for r in self.local}
        elif kind == "gather":
            res = {r: (_copies(data) if r == root else None) for r in self.local}
        elif kind == "rows":  # (stamp, vector) of every processor: the latest stamp and the reduced vector
            latest = float(np.max([v[0] for v in data]))
            total = _reduce_rows([v[1] for v in data], op)
            res = {r: (latest, total.copy()) for r in self.local}
        elif kind == "sources":  # the processors that name each one among their destinations
            into: dict[int, list[int]] = {r: [] for r in self.local}
            for src, dests in enumerate(data):
                for d in dests:
                    if self.lo <= d < self.hi:
                        into[d].append(src)
            res = into
        elif kind == "bcast":
            res = {r: (_copy(data)) for r in self.local}
        elif kind == "scatter":
            res = {r: _copy(data[r - self.lo]) for r in self.local}
        elif kind == "alltoall":
            res = {r: _copies(data[r - self.lo]) for r in self.local}
        elif kind == "allreduce":
            total = _fold(data, op)
            res = {r: _copy(total) for r in self.local}
        elif kind in ("scan", "exscan"):
            acc = None
            for r in range(self.hi):
                if kind == "exscan" and r >= self.lo:
                    res[r] = _copy(acc)
                acc = data[r] if r == 0 else _apply(op, acc, data[r])
                if kind == "scan" and r >= self.lo:
                    res[r] = _copy(acc)
        elif kind == "directory":
            res = {r: data[r - self.lo] for r in self.local}
        elif kind == "barrier":
            res = {r: None for r in self.local}
        elif kind == "shared_rows":  # one read-only table for all the processors of this process
            if len({v.shape for v in data}) > 1:
                raise HostedError("shared_rows: the processors' vectors differ in length")
            table = np.vstack(data) if data else np.zeros((0, 0))
            table.flags.writeable = False
            res = {r: table for r in self.local}
        elif kind == "Allgather":  # concatenated once; the processors copy it into their own buffers
            flat = np.concatenate(data)
            res = {r: flat for r in self.local}
        elif kind == "Bcast":
            res = {r: data for r in self.local}  # the processors copy into their own buffers
        elif kind == "Alltoall":
            res = {r: data[:, r - self.lo] for r in self.local}
        else:
            raise HostedError(f"unknown collective {kind}")
        slot.results = res
        for r in self.local:
            self._wake(r)


def _stuck(ranks: list[int], what: str) -> str:
    return f"hosted processors {ranks[:8]}{'…' if len(ranks) > 8 else ''} {what}"


def host_run(p: int, fn: Callable[[HostedComm], Any], world=None) -> dict[int, Any]:
    """Run ``fn(comm)`` for each of the ``p`` processors this process hosts (``world``: the MPI processes
    that share them, None: all here); the processors' return values by rank (collective over ``world``)."""
    return Host(p, world).run(fn)
