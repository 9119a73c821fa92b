"""Kernels run in bulk: once per MPI process over the processors it hosts (:meth:`Communicator.bulk
<hermes.runtime.interface.Communicator.bulk>`).

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

__all__ = ["ProcessGroup", "PlainGroup", "BULK_TAG"]

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
        from hermes.runtime.ops import waitall

        sends = [self.comm.isend(np.ascontiguousarray(a, dtype=np.float64), dest=int(q), tag=BULK_TAG)
                 for q, a in sorted(out.items())]
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
