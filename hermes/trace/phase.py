"""A trace in memory: :class:`TracePhase` (one phase: the tasks, their loads, ranks and data, the communications)
and :class:`Trace` (the phases of a trace), and :class:`TraceError`. Read and written by
:mod:`hermes.trace.lbdatafile`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import MeshError

__all__ = ["Trace", "TracePhase", "TraceError", "ids_text"]


class TraceError(MeshError):
    """A missing, unreadable or malformed LBDatafile trace (one line naming the file and the key path)."""


def _i64(n: int = 0) -> NDArray[np.int64]:
    return np.zeros(n, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class TracePhase:
    """One phase of a trace: arrays over its tasks (sorted by object id) and over its communications.

    Attributes
    ----------
    n_ranks : int
    ids : int64 array
        Object ids (vt's bit-encoded ``id``, else ``seq_id``), unique within the phase.
    loads : float64 array
        Task times (the load LBAF balances).
    ranks : int64 array
        Rank holding the task (the file that lists it).
    home : int64 array
    migratable : bool array
    phase : int
        The phase id.
    comm_from, comm_to : int64 arrays
        Object ids of the endpoints of each communication (sorted by (from, to, from rank)); an endpoint need
        not be a task of the phase (an objgroup, an object of another collection).
    comm_messages : int64 array
    comm_bytes : float64 array
    comm_from_rank, comm_to_rank : int64 arrays
        The ranks of the endpoints: a task's rank, else the rank whose file lists the communication for the
        sender and the entity's ``home`` (that file's rank if it has none) for the receiver.
    collection : int64 array
        ``collection_id`` (−1: none).
    index : tuple of tuples
        The objects' ``index`` (empty: none).
    subphase_ids : int64 array (S,)
    subphases : float64 array (n, S)
        Subphase times (0 where a task has no such subphase).
    user : dict of str to float64 array
        The numbers of ``user_defined`` per task (NaN where a task has none), by key.
    rank_working : float64 array (n_ranks,) or None
        ``rank_working_bytes`` per rank, as LBAF takes it: from the last task the rank's file lists.
    """

    n_ranks: int
    ids: NDArray[np.int64]
    loads: NDArray[np.float64]
    ranks: NDArray[np.int64]
    home: NDArray[np.int64]
    migratable: NDArray[np.bool_]
    phase: int = 0
    comm_from: NDArray[np.int64] = field(default_factory=_i64)
    comm_to: NDArray[np.int64] = field(default_factory=_i64)
    comm_messages: NDArray[np.int64] = field(default_factory=_i64)
    comm_bytes: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    comm_from_rank: NDArray[np.int64] | None = None
    comm_to_rank: NDArray[np.int64] | None = None
    collection: NDArray[np.int64] | None = None
    index: tuple[tuple[int, ...], ...] | None = None
    subphase_ids: NDArray[np.int64] = field(default_factory=_i64)
    subphases: NDArray[np.float64] | None = None
    user: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    #: ``rank_working_bytes`` of every rank (the value given with the last task its file lists; None: none)
    rank_working: NDArray[np.float64] | None = None
    #: the numbers of each rank's phase-level ``user_defined`` (NaN where a rank has none), by key; hermes writes
    #: ``hermes_capacity`` (the rank's relative speed in the phase)
    rank_user: dict[str, NDArray[np.float64]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.ids.size
        fill = {"collection": np.full(n, -1, dtype=np.int64), "index": ((),) * n,
                "subphases": np.zeros((n, self.subphase_ids.size))}
        for name, value in fill.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        stale = any(a is None or a.size != self.comm_from.size for a in (self.comm_from_rank, self.comm_to_rank))
        if stale:  # not given (or given for other communications): the ranks of the endpoint tasks
            where = dict(zip(self.ids.tolist(), self.ranks.tolist()))
            object.__setattr__(self, "comm_from_rank", np.array([where.get(i, 0) for i in self.comm_from.tolist()],
                                                                dtype=np.int64))
            object.__setattr__(self, "comm_to_rank", np.array([where.get(i, 0) for i in self.comm_to.tolist()],
                                                              dtype=np.int64))

    @property
    def n_tasks(self) -> int:
        return int(self.ids.size)

    def rank_loads(self, ranks: ArrayLike | None = None) -> NDArray[np.float64]:
        """The load of every rank (the sum of its tasks' times) under ``ranks`` (default: the trace's)."""
        r = self.ranks if ranks is None else np.asarray(ranks, dtype=np.int64)
        return np.bincount(r, weights=self.loads, minlength=self.n_ranks)

    def endpoints(self) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64], NDArray[np.bool_]]:
        """(position in ``ids`` of each communication's sender, whether it is a task of the phase, the same for
        the receiver); a position is 0 where its endpoint is not a task."""
        out = []
        n = self.ids.size
        for ends in (self.comm_from, self.comm_to):
            pos = np.minimum(np.searchsorted(self.ids, ends), max(n - 1, 0))
            hit = (self.ids[pos] == ends) if n else np.zeros(ends.size, dtype=bool)
            out += [np.where(hit, pos, 0), hit]
        return out[0], out[1], out[2], out[3]

    def object_ranks(self, ranks: ArrayLike | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The ranks of the communications' endpoints when the tasks are on ``ranks`` (endpoints that are not
        tasks stay where the trace has them)."""
        if ranks is None or self.ids.size == 0:
            return self.comm_from_rank, self.comm_to_rank
        r = np.asarray(ranks, dtype=np.int64)
        a, a_ok, b, b_ok = self.endpoints()
        return np.where(a_ok, r[a], self.comm_from_rank), np.where(b_ok, r[b], self.comm_to_rank)

    def with_ranks(self, ranks: ArrayLike) -> TracePhase:
        """The same tasks on new ranks (homes unchanged; communication endpoints that are tasks follow them)."""
        r = np.asarray(ranks, dtype=np.int64).ravel()
        if r.shape != self.ids.shape or (r.size and (r.min() < 0 or r.max() >= self.n_ranks)):
            raise TraceError(f"new ranks must be {self.ids.size} integers in 0..{self.n_ranks - 1}")
        fr, tr = self.object_ranks(r)
        return replace(self, ranks=r, comm_from_rank=fr, comm_to_rank=tr)

    def with_id(self, phase: int) -> TracePhase:
        return replace(self, phase=int(phase))


@dataclass(frozen=True, eq=False)
class Trace:
    """A whole trace: its phases in file order, the number of ranks, where it came from."""

    n_ranks: int
    phases: list[TracePhase]
    stem: str = ""
    #: whether its files were brotli-compressed
    compressed: bool = False

    @property
    def phase_ids(self) -> list[int]:
        return [ph.phase for ph in self.phases]

    def phase(self, pid: int) -> TracePhase:
        for ph in self.phases:
            if ph.phase == pid:
                return ph
        raise TraceError(f"{self.stem}: no phase {pid} (phases: {ids_text(self.phase_ids)})")


def ids_text(ids: list[int]) -> str:
    """``0-9, 12, 20-25``: runs of consecutive ids."""
    out, ids = [], sorted(set(ids))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out) if out else "none"
