"""One MPI process per processor: :class:`PlainComm`, mpi4py's communicator behind the runtime interface.

Point-to-point messages and collectives are mpi4py's own, on a duplicate of the communicator it is given (a
library that borrows a communicator duplicates it before it listens on it: hermes' tags never meet the caller's
messages). Reductions of Python objects are an ``allgather`` and the rank-order fold of :mod:`hermes.runtime.ops`,
as a hosted run computes them, so the results are the same bits; the methods of hermes' own
(:class:`hermes.runtime.communicator.Communicator`) are computed by every processor itself. Nothing here imports
the hosting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hermes.runtime.ops import _fold, _prefix, _reduce_rows

__all__ = ["PlainComm", "plain"]


def plain(comm) -> PlainComm:
    """``comm`` (an mpi4py communicator) behind the runtime interface; a :class:`PlainComm` is returned as it is
    (collective: duplicates ``comm``)."""
    return comm if isinstance(comm, PlainComm) else PlainComm(comm)


class PlainComm:
    """Processor ``rank``'s communicator in a run of one MPI process per processor.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The processors' communicator; duplicated (collective), the duplicate freed by :meth:`Free`.
    """

    process_leader = True

    def __init__(self, comm) -> None:
        self.comm = comm.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.processes = self.size
        c = self.comm
        # mpi4py's own, bound once
        self.send, self.isend, self.recv, self.irecv = c.send, c.isend, c.recv, c.irecv
        self.Send, self.Isend, self.Recv, self.Irecv = c.Send, c.Isend, c.Recv, c.Irecv
        self.Iprobe, self.iprobe, self.Probe, self.probe = c.Iprobe, c.iprobe, c.Probe, c.probe
        self.allgather, self.gather, self.bcast, self.scatter, self.alltoall = (c.allgather, c.gather, c.bcast,
                                                                                c.scatter, c.alltoall)
        self.barrier, self.Barrier = c.barrier, c.Barrier
        self.Allgather, self.Bcast, self.Alltoall = c.Allgather, c.Bcast, c.Alltoall

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"PlainComm(rank={self.rank}, size={self.size})"

    def Free(self) -> None:
        """Free the duplicate (collective)."""
        self.comm.Free()

    def Abort(self, errorcode: int = 1):
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(errorcode)

    # -- reductions of objects: rank order, as a hosted run folds them ------------------------------------
    def allreduce(self, sendobj, op=None):
        return _fold(self.comm.allgather(sendobj), op)

    def scan(self, sendobj, op=None):
        return _prefix(self.comm.allgather(sendobj), op, exclusive=False)[self.rank]

    def exscan(self, sendobj, op=None):
        return _prefix(self.comm.allgather(sendobj), op, exclusive=True)[self.rank]

    def Allreduce(self, sendbuf, recvbuf, op=None) -> None:
        send = sendbuf[0] if isinstance(sendbuf, (list, tuple)) else sendbuf
        recv = recvbuf[0] if isinstance(recvbuf, (list, tuple)) else recvbuf
        out = np.asarray(self.allreduce(np.array(send, copy=True), op)).reshape(-1)
        recv.reshape(-1)[: out.size] = out.astype(recv.dtype, copy=False)

    # -- hermes' own -------------------------------------------------------------------------------------
    def reduce_stamped(self, stamp: float, vector: np.ndarray, op: str) -> tuple[float, np.ndarray]:
        """One ``Allgather`` of ``[stamp, vector]``; the latest stamp and ``op`` over the vectors in rank order."""
        v = np.asarray(vector, dtype=np.float64).ravel()
        send = np.concatenate(([float(stamp)], v))
        rows = np.empty((self.size, send.size), dtype=np.float64)
        self.comm.Allgather(send, rows)
        return float(np.max(rows[:, 0])), _reduce_rows(list(rows[:, 1:]), op)

    def sources(self, dests: Sequence[int]) -> list[int]:
        """An all-to-all of flags: the processors that name this one in their ``dests``, in increasing order."""
        flags = [0] * self.size
        for r in dests:
            flags[int(r)] = 1
        return [r for r, f in enumerate(self.comm.alltoall(flags)) if f]

    def directory(self, owned, asked) -> tuple[np.ndarray, bool]:
        """The owners of the cells ``asked`` through a distributed directory (cell g registered at processor
        g mod p: three all-to-alls), and whether the partition is broken anywhere."""
        size, comm = self.size, self.comm
        owned = np.asarray(owned, dtype=np.int64)
        q = np.asarray(asked, dtype=np.int64)
        home = owned % size
        order = np.argsort(home, kind="stable")
        cuts = np.searchsorted(home[order], np.arange(size + 1))
        reg = [owned[order][cuts[r]:cuts[r + 1]] for r in range(size)]
        got = comm.alltoall(reg)
        table_gid = np.concatenate(got) if got else np.zeros(0, np.int64)
        table_own = np.concatenate([np.full(g.size, r, dtype=np.int64) for r, g in enumerate(got)])
        srt = np.argsort(table_gid, kind="stable")
        table_gid, table_own = table_gid[srt], table_own[srt]
        dup = bool(table_gid.size > 1 and np.any(table_gid[1:] == table_gid[:-1]))
        qhome = q % size
        qo = np.argsort(qhome, kind="stable")
        qcuts = np.searchsorted(qhome[qo], np.arange(size + 1))
        queries = [q[qo][qcuts[r]:qcuts[r + 1]] for r in range(size)]
        answers, missing = [], False
        for a in comm.alltoall(queries):
            pos = np.minimum(np.searchsorted(table_gid, a), max(table_gid.size - 1, 0))
            ok = (table_gid[pos] == a) if table_gid.size else np.zeros(a.size, bool)
            missing |= bool(np.any(~ok))
            answers.append(np.where(ok, table_own[pos] if table_gid.size else -1, -1))
        back = comm.alltoall(answers)
        bad = self.allreduce(int(dup) + 2 * int(missing))
        q_owner = np.empty(q.size, dtype=np.int64)
        q_owner[qo] = np.concatenate(back) if back else np.zeros(0, np.int64)
        return q_owner, bool(bad)

    def shared_rows(self, x) -> np.ndarray:
        """One ``Allgather`` of ``x`` into a new read-only array."""
        v = np.ascontiguousarray(x, dtype=np.float64).ravel()
        rows = np.empty((self.size, v.size), dtype=np.float64)
        self.comm.Allgather(v, rows)
        rows.flags.writeable = False
        return rows

    def bulk(self, name: str, part: Any, kernel: Callable[[Any, list], list]) -> Any:
        """``kernel`` over this processor's ``part`` alone, its group one processor (:mod:`hermes.runtime.bulk`)."""
        from hermes.runtime.bulk import PlainGroup

        group = self.__dict__.get("_group")
        if group is None:
            group = self._group = PlainGroup(self)
        return kernel(group, [part])[0]

    def shared(self, name: str, inputs: Any, build: Callable[[], np.ndarray]) -> np.ndarray:
        """``build()``: a processor alone in its process shares with nobody."""
        return build()

    def shared_value(self, name: str, items: list, array: np.ndarray, build: Callable[[], Any],
                     freeze: Callable[[Any], None] | None = None) -> Any:
        """``build()``: a processor alone in its process shares with nobody."""
        return build()
