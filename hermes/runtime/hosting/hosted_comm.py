"""A hosted processor's communicator: the part of ``mpi4py.MPI.Comm`` hermes uses (:mod:`hermes.runtime.hosting`)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from hermes.runtime.hosting.values import (ANY_SOURCE, ANY_TAG, HostedError, Request, _buffer, _copy, _frozen, _into,
                                           _shareable, _src, _tag)

__all__ = ["HostedComm"]


class HostedComm:
    """Processor ``rank``'s communicator in a hosted run: the part of ``mpi4py.MPI.Comm`` hermes uses.

    Point to point: ``send isend recv irecv Isend Irecv Send Recv Iprobe iprobe Probe probe``; collectives:
    ``allgather gather bcast scatter alltoall allreduce scan exscan barrier Barrier Allgather Bcast Alltoall
    Allreduce``; ``Abort``. A poll (``Iprobe``, a request's ``Test``) that finds nothing reads the envelopes that
    have reached this process first (:mod:`hermes.runtime.hosting.host`); a posted receive can be cancelled
    (:meth:`Request.Cancel <hermes.runtime.hosting.values.Request.Cancel>`).

    Sends are buffered: ``send``, ``Send``, ``isend`` and ``Isend`` copy the data and complete at once, whatever
    its size and whether or not the receiver has posted a receive (MPI's ``MPI_Bsend`` with an unbounded buffer).
    This hides unsafe orderings: code whose processors all send before they receive runs here, where MPI may
    block it in ``Send`` once the messages are larger than its eager limit. Check such code with one process per
    processor on plain MPI.
    """

    def __init__(self, host, rank: int) -> None:
        self.host, self.rank_, self.size_ = host, rank, host.p
        #: this processor's process runs the process-wide services (the watchdog) for all it hosts
        self.process_leader = rank == host.lo
        #: the MPI processes of the job
        self.processes = host.n

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
        # a read-only array that owns its data is shared by its receivers, as an immutable value is (nobody can
        # change it in place: the gossip's known sets, sent alike to f peers, are not copied f times)
        return ("value", obj if _shareable(obj) else _copy(obj))

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        self.host.send(self.rank_, int(dest), int(tag), self._out(obj))
        return Request(self.host, self.rank_, done=True, send=True)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self.isend(obj, dest, tag)

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        self.host.send(self.rank_, int(dest), int(tag), ("buffer", np.array(_buffer(buf), copy=True)))
        return Request(self.host, self.rank_, done=True, send=True)

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
        """True if a matching message is here; one that finds nothing reads the envelopes that have reached
        this process, lets the processors hosted with this one run once, reads them again and looks once more:
        a message another process has sent is seen by the first poll after it reached this process."""
        host, src, t = self.host, _src(source), _tag(tag)
        if host.probe(self.rank_, src, t, status):
            return True
        host.poll()
        if host.probe(self.rank_, src, t, status):
            return True
        host.pause(self.rank_)
        host.poll()
        return host.probe(self.rank_, src, t, status)

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
        """hermes' own allreduce (:func:`hermes.runtime.comm.allreduce`) computed once per process: the latest of
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

    def shared_rows(self, x) -> np.ndarray:
        """Every processor's float vector ``x`` as rows of one read-only array per process (collective)."""
        return self.host.collective(self.rank_, "shared_rows", np.array(x, dtype=np.float64).ravel())

    def bulk(self, name: str, part: Any, kernel) -> Any:
        """``kernel(group, parts)`` once for the processors of this process (:mod:`hermes.runtime.bulk`); this
        processor's item of its result (collective)."""
        return self.host.bulk(self.rank_, name, part, kernel)

    def barrier(self) -> None:
        self.host.collective(self.rank_, "barrier", None)

    Barrier = barrier

    def Allgather(self, sendbuf, recvbuf) -> None:
        send, recv = _buffer(sendbuf), _buffer(recvbuf)
        _into(recv, self.host.collective(self.rank_, "Allgather", np.array(send, copy=True).reshape(-1)))

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
        got = self.host.collective(self.rank_, "Alltoall", rows)  # row j of every sender's buffer, for j
        _into(recv, got.reshape(-1))

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

    # -- what a process builds once for the processors it hosts ---------------------------------------------
    def shared(self, name: str, inputs: Any, build) -> np.ndarray:
        """``build()`` — an array every processor computes alike from the same ``inputs`` (a global matrix) — once
        per process for the processors it hosts: the processors whose ``inputs`` are equal (compared by their
        SHA-256 of their ``repr``: plain lists and numbers, whose repr is exact) get the same read-only array."""
        import hashlib

        host = self.host
        hit = host.shared.get(name)
        if hit is not None and hit[2] is not None and _same_items(hit[2], inputs):
            return hit[1]  # the very immutable objects a hosted gather shared: no hashing
        key = hashlib.sha256(repr(inputs).encode()).digest()
        if hit is not None and hit[0] == key:
            return hit[1]
        value = build()
        value.flags.writeable = False
        immutable = isinstance(inputs, (list, tuple)) and all(map(_frozen, inputs))
        host.shared[name] = (key, value, inputs if immutable else None)
        return value

    def shared_value(self, name: str, items: list, array: np.ndarray, build, freeze=None) -> Any:
        """``build()`` once per process for the hosted processors whose inputs are the same: ``items`` the very
        same immutable objects (a hosted gather shares them) and ``array`` equal; ``freeze(value)`` makes the
        shared value read-only (a processor changing it in place would change it for all). With mutable items,
        ``build()`` itself."""
        host = self.host
        hit = host.shared.get(name)
        if hit is not None and _same_items(hit[0], items) and (
                (hit[3] is array and not array.flags.writeable) or np.array_equal(hit[1], array)):
            return hit[2]  # the very read-only array of the last call (a matrix the processors share): not compared
        value = build()
        if all(map(_frozen, items)):
            if freeze is not None:
                freeze(value)
            host.shared[name] = (items, np.array(array, copy=True), value, array)
        return value


def _same_items(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are sequences of the same objects (identity)."""
    return isinstance(b, (list, tuple)) and len(a) == len(b) and all(x is y for x, y in zip(a, b))
