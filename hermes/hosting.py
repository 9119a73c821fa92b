"""Many emulated processors per MPI process: :class:`HostedComm`, the communicator every run's code sees.

A run of ``P`` processors on ``N ≤ P`` MPI processes gives each process a contiguous block of processors
(:func:`blocks`); each processor runs the unchanged SPMD code of hermes in its own *greenlet* (a user-level
thread, as Adaptive MPI's virtual ranks and SimGrid's SMPI actors are), on a :class:`HostedComm` that offers
the part of mpi4py's communicator API hermes uses. A processor that waits — for a message, a request or a
collective — switches to its process' scheduler (:class:`Host`), which runs the next processor that can go
on. Switching is cooperative, so a processor's code runs undisturbed between two communications, and the
order in which a process runs its processors never changes a result: every message is matched as MPI
matches it (per source and tag, in send order; posted receives in post order) and every collective is
computed once per process from all ``P`` contributions in rank order.

Between processes the scheduler bridges over MPI with pickled envelopes: point-to-point messages go straight
to the process hosting the destination (MPI keeps their order per pair of processes), and the ``k``-th
collective of a process' processors is sent to process 0, which assembles the ``P`` contributions and sends
each process what its processors need. Nothing waits inside MPI: the scheduler probes for envelopes while
its processors wait, so a process never blocks the progress of another.

What a processor's code gets is what MPI gives: a received object is a copy (unpickled; immutable values
are shared), a buffer is copied into, reductions of Python objects fold in rank order (so results do not
depend on ``N``; mpi4py's own order for floats may differ), ``Abort`` ends the whole job. The clock, the
counters and the costs are hermes' own (:mod:`hermes.comm`): a message between two processors hosted
together is counted and charged as any other.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ANY_SOURCE", "ANY_TAG", "Host", "HostedComm", "HostedError", "Status", "blocks", "host_run",
           "processes_for", "shared", "usable_cores", "waitall"]

ANY_SOURCE = -1
ANY_TAG = -1

_TAG_P2P, _TAG_COLL, _TAG_RESULT = 30001, 30002, 30003
_FROZEN = (type(None), bool, int, float, complex, str, bytes, np.generic)


class HostedError(RuntimeError):
    """A processor's code misused the hosted communicator (a hermes defect, never bad input)."""


def blocks(p: int, n: int) -> np.ndarray:
    """First processor of each of ``n`` processes hosting ``p`` processors (length n+1), as even as can be:
    the first ``p mod n`` processes host one more."""
    q, r = divmod(p, n)
    sizes = np.full(n, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def _frozen(x: Any, depth: int = 0) -> bool:
    """True for values nobody can change in place (shared by all receivers instead of copied)."""
    if isinstance(x, _FROZEN):
        return True
    if isinstance(x, tuple) and depth < 3:
        return all(_frozen(v, depth + 1) for v in x)
    return False


def _copy(x: Any) -> Any:
    """What a receiver gets of ``x``: ``x`` itself if nobody can change it, else a copy (as MPI's)."""
    if _frozen(x):
        return x
    if type(x) is np.ndarray and x.dtype != object:
        return x.copy()
    return pickle.loads(pickle.dumps(x, pickle.HIGHEST_PROTOCOL))


def _copies(values: list) -> list:
    """A receiver's copy of a list of received values (one pickle for all when some are containers)."""
    if all(_frozen(v) or (type(v) is np.ndarray and v.dtype != object) for v in values):
        return [_copy(v) for v in values]
    return pickle.loads(pickle.dumps(values, pickle.HIGHEST_PROTOCOL))


def _reduce_rows(rows: list, op: str) -> np.ndarray:
    """``op`` over the rows in rank order, as :func:`hermes.comm.allreduce` folds them: a sum left to right
    starting from 0.0 (bit for bit), else numpy's max/min."""
    if op == "sum":
        out = np.zeros(rows[0].size) if rows else np.zeros(0)
        for v in rows:
            out += v
        return out
    stacked = np.vstack(rows)
    return stacked.max(axis=0) if op == "max" else stacked.min(axis=0)


def _fold(values: list, op) -> Any:
    """``op`` folded left to right (rank order); ``op`` None or mpi4py's SUM: ``+``."""
    acc = values[0]
    for v in values[1:]:
        acc = _apply(op, acc, v)
    return acc


def _apply(op, a, b):
    if op is None:
        return a + b
    name = _op_name(op)
    if name == "sum":
        return a + b
    if name == "max":
        return b if b > a else a
    if name == "min":
        return b if b < a else a
    if name == "prod":
        return a * b
    return op(a, b)


def _op_name(op) -> str | None:
    if isinstance(op, str):
        return op
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - mpi4py is a dependency
        return None
    return {id(MPI.SUM): "sum", id(MPI.MAX): "max", id(MPI.MIN): "min", id(MPI.PROD): "prod"}.get(id(op))


def _into(buf, data: np.ndarray) -> None:
    """Copy ``data`` into the receive buffer ``buf`` (a numpy array; fewer elements allowed, as in MPI)."""
    flat = np.asarray(data).reshape(-1)
    if flat.dtype != buf.dtype:
        flat = np.frombuffer(flat.tobytes(), dtype=buf.dtype)
    if flat.size > buf.size:
        raise HostedError(f"message of {flat.size} elements into a buffer of {buf.size}")
    if buf.flags.c_contiguous:
        buf.reshape(-1)[: flat.size] = flat
    else:
        buf.flat[: flat.size] = flat


def _buffer(b) -> np.ndarray:
    """The numpy array of an mpi4py buffer argument (an array, or ``[array, datatype]``)."""
    if isinstance(b, (list, tuple)):
        b = b[0]
    if not isinstance(b, np.ndarray):
        raise HostedError(f"hosted buffers must be numpy arrays, not {type(b).__name__}")
    return b


class Status:
    """The source and tag of a matched message (``MPI.Status``'s part hermes uses)."""

    def __init__(self) -> None:
        self.source, self.tag, self.count = ANY_SOURCE, ANY_TAG, 0

    def Get_source(self) -> int:
        return self.source

    def Get_tag(self) -> int:
        return self.tag

    def Get_count(self, datatype=None) -> int:
        return self.count

    source_ = property(Get_source)


class Request:
    """A hosted request: a send is complete at once (its data is copied); a receive when it is matched."""

    __slots__ = ("host", "rank", "done", "value", "buf", "source", "tag", "status_source", "status_tag")

    def __init__(self, host: Host, rank: int, *, done=False, value=None, buf=None, source=ANY_SOURCE,
                 tag=ANY_TAG) -> None:
        self.host, self.rank, self.done, self.value, self.buf = host, rank, done, value, buf
        self.source, self.tag = source, tag
        self.status_source, self.status_tag = source, tag

    def _status(self, status) -> None:
        if status is not None:
            status.source, status.tag = self.status_source, self.status_tag

    def Wait(self, status=None) -> bool:
        if not self.done:
            self.host.wait(self.rank, lambda: self.done)
        self._status(status)
        return True

    def wait(self, status=None):
        self.Wait(status)
        return self.value

    def Test(self, status=None) -> bool:
        if not self.done:
            self.host.pause(self.rank)
        if self.done:
            self._status(status)
        return self.done

    def test(self, status=None):
        done = self.Test(status)
        return done, (self.value if done else None)

    def Free(self) -> None:
        pass

    Cancel = Free


def waitall(requests) -> None:
    """Wait for every request (hosted or mpi4py's): ``MPI.Request.Waitall`` for either kind."""
    for q in requests:
        q.Wait()


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
        self.gathering: dict[int, dict[int, Any]] = {}  # process 0: collective k's parts by process
        self.finished: dict[int, tuple[bool, Any]] = {}
        self.shared: dict[str, tuple[bytes, Any]] = {}  # hermes.hosting.shared: one array for all processors
        self.idle = 0

    def process_of(self, rank: int) -> int:
        return int(np.searchsorted(self.starts, rank, side="right") - 1)

    # -- running --------------------------------------------------------------------------------------
    def run(self, fn: Callable[[HostedComm], Any]) -> dict[int, Any]:
        """Run ``fn(comm)`` on every processor of this process; their return values by rank.

        Raises the first error of a processor (in rank order) once every processor has ended; a processor's
        error other than a :class:`~hermes.errors.HermesError` is raised at once (the caller aborts the job).
        """
        from greenlet import greenlet, getcurrent

        from hermes.errors import HermesError

        self.sched = getcurrent()
        for r in self.local:
            comm = HostedComm(self, r)
            self.greenlets[r] = greenlet(lambda c=comm: fn(c), parent=self.sched)
        self.runnable.extend(self.local)
        live = set(self.local)
        while live:
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
            if live:
                self._progress(block=True, live=live)
        self._flush()
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

    def _progress(self, *, block: bool, live: set) -> None:
        """Receive envelopes from the other processes; with nothing runnable and nothing received, wait a
        little (or, alone, report a deadlock: a defect, never a hang)."""
        got = self._poll()
        if self.runnable or got:
            self.idle = 0
            return
        if self.world is None or self.n == 1:
            errors = [v for _, (ok, v) in sorted(self.finished.items()) if not ok]
            if errors:  # a processor's error the others did not agree on: they wait for it in vain
                raise errors[0]
            stuck = sorted(live)
            raise HostedError(f"hosted processors {stuck[:8]}{'…' if len(stuck) > 8 else ''} wait for each other "
                              f"(a message never sent or a collective not called by all)")
        self.idle += 1
        if self.idle > 100:
            time.sleep(min(1e-3, 1e-6 * self.idle))

    def _poll(self) -> bool:
        if self.world is None or self.n == 1:
            return False
        from mpi4py import MPI

        world, st, got = self.world, MPI.Status(), False
        while world.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st):
            tag, src = st.Get_tag(), st.Get_source()
            msg = world.recv(source=src, tag=tag)
            got = True
            if tag == _TAG_P2P:
                s, d, t, payload = msg
                self._deliver(d, s, t, payload)
            elif tag == _TAG_COLL:
                k, parts = msg
                self._gather(k, src, parts)
            elif tag == _TAG_RESULT:
                k, payload = msg
                self._results(k, payload)
        if self.sends:
            self.sends = [q for q in self.sends if not q.Test()]
        return got

    def _send(self, process: int, tag: int, msg) -> None:
        self.sends.append(self.world.isend(msg, dest=process, tag=tag))

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
            self._send(self.process_of(dest), _TAG_P2P, (src, dest, tag, payload))

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
            q.value = pickle.loads(data) if kind == "pickle" else data
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
                    self._gather(k, 0, parts)
                else:
                    self._send(0, _TAG_COLL, (k, parts))
            slot.parts = {}
        self.wait(rank, lambda: slot.results is not None)
        out = slot.results.pop(rank)
        slot.count += 1
        if slot.count == len(self.local):
            del self.slots[k]
        return out

    def _gather(self, k: int, process: int, parts: list) -> None:
        """Process 0: process ``process``'s contributions to collective ``k``; when all are in, the results."""
        got = self.gathering.setdefault(k, {})
        got[process] = parts
        if len(got) < self.n:
            return
        del self.gathering[k]
        full = [v for i in range(self.n) for v in got[i]]
        slot = self.slots[k]
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
        if kind in ("alltoall", "Alltoall"):
            return [[row[r] for row in full] for r in range(lo, hi)]
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
            res = {r: _copies(data) if not all(map(_frozen, data)) else list(data) for r in self.local}
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
        elif kind in ("Allgather", "Bcast"):
            res = {r: data for r in self.local}  # the processors copy into their own buffers
        elif kind == "Alltoall":
            res = {r: data[r - self.lo] for r in self.local}
        else:
            raise HostedError(f"unknown collective {kind}")
        slot.results = res
        for r in self.local:
            self._wake(r)


_TABLE: list = []  # (the contributions, their directory table): built once for all processes' answers


def _directory(full: list, lo: int, hi: int) -> list:
    """The owner of every cell processors ``lo..hi-1`` ask for, from every processor's (owned, asked) cell
    ids; each answer is (owners, -1 where nobody owns the cell; True if a cell is owned twice or an asked one
    by nobody, anywhere)."""
    if not _TABLE or _TABLE[0] is not full:
        gids = np.concatenate([np.asarray(g, dtype=np.int64) for g, _ in full]) if full else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(full), dtype=np.int64), [len(g) for g, _ in full])
        srt = np.argsort(gids, kind="stable")
        gids, owner = gids[srt], owner[srt]
        dup = bool(gids.size > 1 and np.any(gids[1:] == gids[:-1]))
        answers = []
        for _, q in full:
            q = np.asarray(q, dtype=np.int64)
            pos = np.minimum(np.searchsorted(gids, q), max(gids.size - 1, 0))
            ok = (gids[pos] == q) if gids.size else np.zeros(q.size, bool)
            answers.append((np.where(ok, owner[pos] if gids.size else -1, -1), bool(np.any(~ok))))
        bad = dup or any(m for _, m in answers)
        _TABLE[:] = [full, [(a, bad) for a, _ in answers]]
    return _TABLE[1][lo:hi]


class HostedComm:
    """Processor ``rank``'s communicator in a hosted run: the part of ``mpi4py.MPI.Comm`` hermes uses.

    Point to point: ``send isend recv irecv Isend Irecv Send Recv Iprobe iprobe Probe probe``; collectives:
    ``allgather gather bcast scatter alltoall allreduce scan exscan barrier Barrier Allgather Bcast Alltoall
    Allreduce``; ``Abort``. Sends are buffered (complete at once).
    """

    def __init__(self, host: Host, rank: int) -> None:
        self.host, self.rank_, self.size_ = host, rank, host.p
        #: this processor's process runs the process-wide services (the watchdog) for all it hosts
        self.process_leader = rank == host.lo

    # -- identity ---------------------------------------------------------------------------------------
    def Get_rank(self) -> int:
        return self.rank_

    def Get_size(self) -> int:
        return self.size_

    @property
    def rank(self) -> int:
        return self.rank_

    @property
    def size(self) -> int:
        return self.size_

    def __repr__(self) -> str:
        return f"HostedComm(rank={self.rank_}, size={self.size_}, process={self.host.pid}/{self.host.n})"

    # -- point to point -------------------------------------------------------------------------------
    def _out(self, obj) -> tuple[str, Any]:
        return ("value", obj) if _frozen(obj) else ("pickle", pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        self.host.send(self.rank_, int(dest), int(tag), self._out(obj))
        return Request(self.host, self.rank_, done=True)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self.isend(obj, dest, tag)

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        self.host.send(self.rank_, int(dest), int(tag), ("buffer", np.array(_buffer(buf), copy=True)))
        return Request(self.host, self.rank_, done=True)

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self.Isend(buf, dest, tag)

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        return self.host.post(self.rank_, Request(self.host, self.rank_, source=_src(source), tag=_tag(tag)))

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None):
        return self.irecv(None, source, tag).wait(status)

    def Irecv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        q = Request(self.host, self.rank_, buf=_buffer(buf), source=_src(source), tag=_tag(tag))
        return self.host.post(self.rank_, q)

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None) -> None:
        self.Irecv(buf, source, tag).Wait(status)

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None) -> bool:
        if self.host.probe(self.rank_, _src(source), _tag(tag), status):
            return True
        self.host.pause(self.rank_)
        return self.host.probe(self.rank_, _src(source), _tag(tag), status)

    iprobe = Iprobe

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status=None) -> bool:
        src, t = _src(source), _tag(tag)
        self.host.wait(self.rank_, lambda: self.host.probe(self.rank_, src, t, None))
        return self.host.probe(self.rank_, src, t, status)

    probe = Probe

    # -- collectives ----------------------------------------------------------------------------------
    def _root(self, root: int) -> int:
        root = int(root)
        if not 0 <= root < self.size_:
            raise HostedError(f"root {root} of {self.size_} processors")
        return root

    def allgather(self, obj) -> list:
        return self.host.collective(self.rank_, "allgather", obj)

    def gather(self, obj, root: int = 0):
        return self.host.collective(self.rank_, "gather", obj, self._root(root))

    def bcast(self, obj=None, root: int = 0):
        root = self._root(root)
        return self.host.collective(self.rank_, "bcast", obj if self.rank_ == root else None, root)

    def scatter(self, sendobj=None, root: int = 0):
        root = self._root(root)
        if self.rank_ == root and (sendobj is None or len(sendobj) != self.size_):
            raise HostedError(f"scatter needs {self.size_} items at the root")
        return self.host.collective(self.rank_, "scatter", list(sendobj) if self.rank_ == root else None,
                                    root)

    def alltoall(self, sendobj) -> list:
        if len(sendobj) != self.size_:
            raise HostedError(f"alltoall needs {self.size_} items")
        return self.host.collective(self.rank_, "alltoall", list(sendobj))

    def allreduce(self, sendobj, op=None):
        return self.host.collective(self.rank_, "allreduce", sendobj, 0, op)

    def scan(self, sendobj, op=None):
        return self.host.collective(self.rank_, "scan", sendobj, 0, op)

    def exscan(self, sendobj, op=None):
        return self.host.collective(self.rank_, "exscan", sendobj, 0, op)

    def reduce_stamped(self, stamp: float, vector: np.ndarray, op: str) -> tuple[float, np.ndarray]:
        """hermes' own allreduce (:func:`hermes.comm.allreduce`) computed once per process: the latest of
        every processor's ``stamp`` and ``op`` (sum, max, min) over their ``vector`` in rank order."""
        return self.host.collective(self.rank_, "rows", (float(stamp), np.array(vector, dtype=np.float64)), 0, op)

    def sources(self, dests) -> list[int]:
        """The processors that name this one in their ``dests`` (collective), in increasing order: what an
        all-to-all of flags tells, without the p × p flags."""
        return self.host.collective(self.rank_, "sources", sorted({int(d) for d in dests}))

    def directory(self, owned, asked) -> tuple[np.ndarray, bool]:
        """The owners of the cell ids ``asked`` (-1: nobody), given every processor's ``owned`` ids, and
        whether the partition is broken anywhere (a cell owned twice, an asked one by nobody): what
        :func:`hermes.data.distributed.refresh_owners` learns from its distributed directory, computed once
        per run instead of through three p × p all-to-alls (collective)."""
        return self.host.collective(self.rank_, "directory", (np.asarray(owned, dtype=np.int64),
                                                              np.asarray(asked, dtype=np.int64)))

    def barrier(self) -> None:
        self.host.collective(self.rank_, "barrier", None)

    Barrier = barrier

    def Allgather(self, sendbuf, recvbuf) -> None:
        send, recv = _buffer(sendbuf), _buffer(recvbuf)
        rows = self.host.collective(self.rank_, "Allgather", np.array(send, copy=True).reshape(-1))
        _into(recv, np.concatenate(rows) if rows else np.empty(0, dtype=recv.dtype))

    def Bcast(self, buf, root: int = 0) -> None:
        root = self._root(root)
        b = _buffer(buf)
        data = self.host.collective(self.rank_, "Bcast", np.array(b, copy=True).reshape(-1)
                                    if self.rank_ == root else None, root)
        if self.rank_ != root:
            _into(b, data)

    def Alltoall(self, sendbuf, recvbuf) -> None:
        send, recv = _buffer(sendbuf), _buffer(recvbuf)
        if send.size % self.size_:
            raise HostedError(f"Alltoall: {send.size} elements for {self.size_} processors")
        rows = np.array(send, copy=True).reshape(self.size_, -1)
        got = self.host.collective(self.rank_, "Alltoall", list(rows))
        _into(recv, np.concatenate(got))

    def Allreduce(self, sendbuf, recvbuf, op=None) -> None:
        send, recv = _buffer(sendbuf), _buffer(recvbuf)
        _into(recv, np.asarray(self.allreduce(np.array(send, copy=True), op)))

    # -- the job ----------------------------------------------------------------------------------------
    def Abort(self, errorcode: int = 1):
        sys.stdout.flush()
        sys.stderr.flush()
        if self.host.world is not None:
            self.host.world.Abort(errorcode)
        import os

        os._exit(errorcode)  # pragma: no cover - MPI_Abort does not return


_ANY: dict[str, int] = {}


def _any(name: str) -> int:
    if not _ANY:
        from mpi4py import MPI

        _ANY.update(ANY_SOURCE=int(MPI.ANY_SOURCE), ANY_TAG=int(MPI.ANY_TAG))
    return _ANY[name]


def _src(source) -> int:
    source = int(source)
    return ANY_SOURCE if source in (ANY_SOURCE, _any("ANY_SOURCE")) else source


def _tag(tag) -> int:
    tag = int(tag)
    return ANY_TAG if tag in (ANY_TAG, _any("ANY_TAG")) else tag


def shared(comm, name: str, inputs: Any, build: Callable[[], np.ndarray]) -> np.ndarray:
    """``build()`` — an array every processor computes alike from the same ``inputs`` (a global matrix) — once
    per process for the processors it hosts: the processors whose ``inputs`` are equal (compared by their
    pickled SHA-256) get the same read-only array; without hosting, ``build()`` itself."""
    host = getattr(comm, "host", None)
    if host is None:
        return build()
    import hashlib

    key = hashlib.sha256(pickle.dumps(inputs, pickle.HIGHEST_PROTOCOL)).digest()
    hit = host.shared.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    value.flags.writeable = False
    host.shared[name] = (key, value)
    return value


def host_run(p: int, fn: Callable[[HostedComm], Any], world=None) -> dict[int, Any]:
    """Run ``fn(comm)`` for each of the ``p`` processors this process hosts (``world``: the MPI processes
    that share them, None: all here); the processors' return values by rank (collective over ``world``)."""
    return Host(p, world).run(fn)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity; else the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def processes_for(sc, p: int, requested: int | None = None, *, cores: int | None = None,
                  what: str = "--processes") -> int:
    """The MPI processes that host a run of ``p`` processors: ``requested`` (``--processes``), else the
    scenario's ``run.processes``, else one per processor up to the usable cores (the processors shared
    evenly among them). ``clock: wall`` measures each processor's own process: one per processor.

    Raises
    ------
    ScenarioError
        One line: more processes than processors, or fewer than processors on the wall clock.
    """
    from hermes.errors import ScenarioError

    n = requested if requested is not None else sc.run.processes
    key = what if requested is not None else "run.processes"
    if n is None:
        return p if sc.clock == "wall" else min(p, cores or usable_cores())
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError(f"{key}: {n!r} is not a number of processes (an integer ≥ 1)")
    if n > p:
        raise ScenarioError(f"{key}: {n} processes for {p} processors (at most one process per processor)")
    if sc.clock == "wall" and n != p:
        raise ScenarioError(f"{key}: clock: wall measures each processor's own process, so it needs one process "
                            f"per processor ({p}), not {n}")
    return n
