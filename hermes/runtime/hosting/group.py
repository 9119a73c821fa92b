"""The group of a hosted process' processors, for a kernel run in bulk (:mod:`hermes.runtime.bulk`).

Its messages are envelopes on the hosting's bridge with a tag of their own (``_TAG_BULK`` of
:mod:`hermes.runtime.hosting.host`), counted by the termination detection as every other envelope; the kernel
runs in the greenlet of the processor that arrived last at the call, so while it waits for another process the
scheduler keeps reading the bridge, and processes that wait for each other end in one line, as any deadlock.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.bulk import _Blocks

__all__ = ["HostedGroup"]


class HostedGroup(_Blocks):
    """Process ``host.pid``'s processors ``host.lo`` to ``host.hi`` (:class:`~hermes.runtime.bulk.ProcessGroup`)."""

    def __init__(self, host) -> None:
        self.host = host
        self.lo, self.hi, self.size = host.lo, host.hi, host.p
        self.processes, self.pid, self.starts = host.n, host.pid, host.starts
        self.state: dict[str, Any] = {}
        self.seq = 0  # the group's calls, the same sequence in every process

    def _swap(self, out: dict[int, Any]) -> dict[int, Any]:
        """Send ``out[q]`` to each process q, then wait for one envelope of this call from each of them."""
        host, k = self.host, self.seq
        self.seq += 1
        for q, a in sorted(out.items()):
            if q == self.pid or not 0 <= q < self.processes:
                raise ValueError(f"a bulk exchange of process {self.pid} names process {q} of {self.processes}")
            host.bulk_send(int(q), k, a)
        return host.bulk_wait(k, sorted(out))

    def exchange(self, out: dict[int, NDArray[np.float64]]) -> dict[int, NDArray[np.float64]]:
        return self._swap({q: np.ascontiguousarray(a, dtype=np.float64) for q, a in out.items()})

    def exchange_objects(self, out: dict[int, Any]) -> dict[int, Any]:
        return self._swap(out)

    def allgather(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        rows = self.allgather_var(x)
        if len({r.size for r in rows}) > 1:
            raise ValueError(f"a bulk allgather of rows of sizes {sorted({r.size for r in rows})}: one size needed")
        return np.vstack(rows)

    def allgather_var(self, x: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        x = np.ascontiguousarray(x, dtype=np.float64).ravel()
        if self.processes == 1:
            self.seq += 1
            return [x]
        got = self._swap({q: x for q in range(self.processes) if q != self.pid})
        return [x if q == self.pid else got[q] for q in range(self.processes)]
