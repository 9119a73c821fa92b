"""A trace in memory: :class:`TracePhase` (one phase: the tasks, their loads, ranks and data, the communications),
:class:`FlatTrace` (every phase of a trace in flat arrays with offsets, as it is read) and :class:`Trace` (the
phases of a trace), and :class:`TraceError`. Read and written by :mod:`hermes.trace.lbdatafile`.

A trace is held flat: one array per field over all the tasks of all its phases, the phases' tasks contiguous and
found by offsets, so reading, describing and measuring a trace costs no Python per phase (an empty phase is an
entry in three arrays). :class:`TracePhase` is the view of one phase that a balancer replays; ``Trace.phases``
makes it on demand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import MeshError

__all__ = ["Trace", "TracePhase", "FlatTrace", "PhaseView", "TraceError", "ids_text", "offsets", "match_tasks",
           "unique_sorted"]


class TraceError(MeshError):
    """A missing, unreadable or malformed LBDatafile trace (one line naming the file and the key path)."""


def _i64(n: int = 0) -> NDArray[np.int64]:
    return np.zeros(n, dtype=np.int64)


def unique_sorted(a: ArrayLike) -> NDArray:
    """The sorted distinct values of ``a`` (1-D) by sorting: numpy 2's ``np.unique`` without ``return_*``
    hashes, 30 to 100 times slower on 10⁶ integers."""
    s = np.sort(np.asarray(a).ravel())
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def offsets(counts: ArrayLike) -> NDArray[np.int64]:
    """``[0, c0, c0 + c1, ...]``: where each of consecutive groups of ``counts`` items starts, and the end."""
    c = np.asarray(counts, dtype=np.int64)
    out = np.zeros(c.size + 1, dtype=np.int64)
    np.cumsum(c, out=out[1:])
    return out


def endpoint_positions(ids: NDArray[np.int64], ends: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """(position in the sorted ``ids`` of each of ``ends``, whether it is there); a position is 0 where not."""
    n = ids.size
    if n == 0:
        return np.zeros(ends.size, dtype=np.int64), np.zeros(ends.size, dtype=bool)
    pos = np.minimum(np.searchsorted(ids, ends), n - 1)
    hit = ids[pos] == ends
    return np.where(hit, pos, 0), hit


def match_tasks(task_block: NDArray[np.int64], ids: NDArray[np.int64], blocks: NDArray[np.int64],
                ends: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """(flat position of the task ``(blocks[j], ends[j])`` among tasks sorted by (``task_block``, ``ids``),
    whether there is one); 0 where not. The keys of the tasks and of the endpoints are merged: a task precedes
    the endpoints with its key, and each endpoint takes the last task at or before it."""
    n, m = ids.size, ends.size
    if m == 0 or n == 0:
        return np.zeros(m, dtype=np.int64), np.zeros(m, dtype=bool)
    kind = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(m, dtype=np.int8)])
    blk = np.concatenate([task_block, blocks])
    key = np.concatenate([ids, ends])
    o = np.lexsort((kind, key, blk))
    at = kind[o] == 1
    last = np.maximum.accumulate(np.where(at, -1, np.arange(o.size)))[at]
    cand = o[np.maximum(last, 0)]
    j = o[at]
    found = (last >= 0) & (blk[cand] == blk[j]) & (key[cand] == key[j])
    pos = np.zeros(m, dtype=np.int64)
    ok = np.zeros(m, dtype=bool)
    pos[j - n] = np.where(found, cand, 0)
    ok[j - n] = found
    return pos, ok


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
        Object ids of the endpoints of each communication (sorted by (from, to, from rank)). An endpoint need
        not be a task of the phase (an objgroup, an object of another collection): such a communication is kept
        (and written back) but, as in LBAF's model, counts in no figure and joins no ranks (:meth:`endpoints`).
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
    listing : int64 array or None
        Each task's position in its rank file's list of the phase's tasks (None: not read from files). LBAF adds
        a rank's objects to a set in that order, and the set's iteration order follows from it
        (:mod:`hermes.trace.informandtransfer`).
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
    listing: NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        n = self.ids.size
        fill = {"collection": np.full(n, -1, dtype=np.int64), "index": ((),) * n,
                "subphases": np.zeros((n, self.subphase_ids.size))}
        for name, value in fill.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        stale = any(a is None or a.size != self.comm_from.size for a in (self.comm_from_rank, self.comm_to_rank))
        if stale:  # not given (or given for other communications): the ranks of the endpoint tasks (else 0)
            for name, ends in (("comm_from_rank", self.comm_from), ("comm_to_rank", self.comm_to)):
                pos, hit = endpoint_positions(self.ids, np.asarray(ends, dtype=np.int64))
                object.__setattr__(self, name, np.where(hit, self.ranks[pos] if n else 0, 0).astype(np.int64))

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
        a, a_ok = endpoint_positions(self.ids, self.comm_from)
        b, b_ok = endpoint_positions(self.ids, self.comm_to)
        return a, a_ok, b, b_ok

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


def _sparse(block: list[NDArray], rank: list[NDArray], key: list[NDArray], value: list[NDArray]):
    b, r = np.concatenate(block).astype(np.int64), np.concatenate(rank).astype(np.int64)
    k, v = np.concatenate(key).astype(np.int64), np.concatenate(value).astype(np.float64)
    o = np.lexsort((k, r, b))
    return b[o], r[o], k[o], v[o]


@dataclass(frozen=True, eq=False)
class FlatTrace:
    """Every phase of a trace in flat arrays: the tasks of all its phases in one array per field, phase after
    phase, and the same for the communications.

    Phases marked ``identical_to_previous`` share their predecessor's data: a phase ``k`` is the data *block*
    ``block[k]``, whose tasks are ``task_start[b]:task_start[b + 1]`` (sorted by object id) and communications
    ``comm_start[b]:comm_start[b + 1]`` (sorted by (from, to, from rank)). The arrays over tasks and
    communications are :class:`TracePhase`'s; the rest is sparse, sorted by task or by (block, rank, key):

    - ``index_start``/``index_values``: each task's ``index``;
    - ``sub_task``, ``sub_id``, ``sub_time``: the subphase times of a task (one entry per task and subphase id);
    - ``user_task``, ``user_key``, ``user_value``: the ``user_defined`` numbers of a task (keys as positions in
      ``user_keys``, which is sorted);
    - ``rank_block``, ``rank_rank``, ``rank_key``, ``rank_value``: the numbers of a rank's phase-level
      ``user_defined`` (keys in ``rank_keys``, sorted);
    - ``working_block``, ``working_rank``, ``working_value``: ``rank_working_bytes`` per rank of a block;
    - ``rank_alpha``: LBAF's per-rank α (``metadata.rank_alpha``), None when every rank's is 1;
    - ``listing``: each task's position in its rank file's list of the phase (None: not read from files).
    """

    n_ranks: int
    phase_ids: NDArray[np.int64]
    block: NDArray[np.int64]
    task_start: NDArray[np.int64]
    ids: NDArray[np.int64]
    loads: NDArray[np.float64]
    ranks: NDArray[np.int64]
    home: NDArray[np.int64]
    migratable: NDArray[np.bool_]
    collection: NDArray[np.int64]
    comm_start: NDArray[np.int64]
    comm_from: NDArray[np.int64]
    comm_to: NDArray[np.int64]
    comm_messages: NDArray[np.int64]
    comm_bytes: NDArray[np.float64]
    comm_from_rank: NDArray[np.int64]
    comm_to_rank: NDArray[np.int64]
    index_start: NDArray[np.int64] = None
    index_values: NDArray[np.int64] = field(default_factory=_i64)
    sub_task: NDArray[np.int64] = field(default_factory=_i64)
    sub_id: NDArray[np.int64] = field(default_factory=_i64)
    sub_time: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    user_keys: tuple[str, ...] = ()
    user_task: NDArray[np.int64] = field(default_factory=_i64)
    user_key: NDArray[np.int64] = field(default_factory=_i64)
    user_value: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    rank_keys: tuple[str, ...] = ()
    rank_block: NDArray[np.int64] = field(default_factory=_i64)
    rank_rank: NDArray[np.int64] = field(default_factory=_i64)
    rank_key: NDArray[np.int64] = field(default_factory=_i64)
    rank_value: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    working_block: NDArray[np.int64] = field(default_factory=_i64)
    working_rank: NDArray[np.int64] = field(default_factory=_i64)
    working_value: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    rank_alpha: NDArray[np.float64] | None = None
    listing: NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        if self.index_start is None:
            object.__setattr__(self, "index_start", np.zeros(self.ids.size + 1, dtype=np.int64))

    @property
    def n_phases(self) -> int:
        return int(self.phase_ids.size)

    @property
    def n_blocks(self) -> int:
        return int(self.task_start.size - 1)

    @property
    def phase_tasks(self) -> NDArray[np.int64]:
        """The number of tasks of every phase."""
        return np.diff(self.task_start)[self.block]

    @cached_property
    def task_block(self) -> NDArray[np.int64]:
        """The block of every task."""
        return np.repeat(np.arange(self.n_blocks, dtype=np.int64), np.diff(self.task_start))

    @cached_property
    def comm_block(self) -> NDArray[np.int64]:
        """The block of every communication."""
        return np.repeat(np.arange(self.n_blocks, dtype=np.int64), np.diff(self.comm_start))

    @cached_property
    def comm_tasks(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """(flat position of each communication's sender task, of its receiver task, whether both are tasks of
        its phase): the communications LBAF's model takes (an endpoint that is no task of the phase — an
        objgroup, an object another phase holds — leaves the communication out of every figure and graph)."""
        a, a_ok = match_tasks(self.task_block, self.ids, self.comm_block, self.comm_from)
        b, b_ok = match_tasks(self.task_block, self.ids, self.comm_block, self.comm_to)
        return a, b, a_ok & b_ok

    def tasks_of(self, b: int) -> slice:
        return slice(int(self.task_start[b]), int(self.task_start[b + 1]))

    def phase(self, k: int) -> TracePhase:
        """Phase ``k`` (its position, not its id) as a :class:`TracePhase`."""
        b = int(self.block[k])
        s = self.tasks_of(b)
        t0, n = s.start, s.stop - s.start
        c = slice(int(self.comm_start[b]), int(self.comm_start[b + 1]))
        i0, i1 = int(self.index_start[t0]), int(self.index_start[s.stop])
        if i1 > i0:
            starts = self.index_start[t0:s.stop + 1] - i0
            vals = self.index_values[i0:i1].tolist()
            index = tuple(tuple(vals[a:z]) for a, z in zip(starts[:-1].tolist(), starts[1:].tolist()))
        else:
            index = ((),) * n
        lo, hi = np.searchsorted(self.sub_task, [t0, s.stop])
        sub_ids = unique_sorted(self.sub_id[lo:hi])
        sub = np.zeros((n, sub_ids.size))
        sub[self.sub_task[lo:hi] - t0, np.searchsorted(sub_ids, self.sub_id[lo:hi])] = self.sub_time[lo:hi]
        lo, hi = np.searchsorted(self.user_task, [t0, s.stop])
        user = {}
        keys, tasks, values = self.user_key[lo:hi], self.user_task[lo:hi] - t0, self.user_value[lo:hi]
        for key in unique_sorted(keys).tolist():
            sel = keys == key
            col = np.full(n, np.nan)
            col[tasks[sel]] = values[sel]
            user[self.user_keys[key]] = col
        p = self.n_ranks
        lo, hi = np.searchsorted(self.rank_block, [b, b + 1])
        rank_user = {}
        for key in unique_sorted(self.rank_key[lo:hi]).tolist():
            sel = self.rank_key[lo:hi] == key
            col = np.full(p, np.nan)
            col[self.rank_rank[lo:hi][sel]] = self.rank_value[lo:hi][sel]
            rank_user[self.rank_keys[key]] = col
        if self.rank_alpha is not None and "rank_alpha" not in rank_user:
            rank_user["rank_alpha"] = self.rank_alpha.copy()
        lo, hi = np.searchsorted(self.working_block, [b, b + 1])
        working = None
        if hi > lo:
            working = np.zeros(p)
            working[self.working_rank[lo:hi]] = self.working_value[lo:hi]
        return TracePhase(p, self.ids[s], self.loads[s], self.ranks[s], self.home[s], self.migratable[s],
                          int(self.phase_ids[k]), self.comm_from[c], self.comm_to[c], self.comm_messages[c],
                          self.comm_bytes[c], self.comm_from_rank[c], self.comm_to_rank[c], self.collection[s],
                          index, sub_ids, sub, user, working, rank_user,
                          None if self.listing is None else self.listing[s])

    def select(self, keep: NDArray[np.bool_]) -> FlatTrace:
        """The phases ``keep`` (a mask over the phases) of this trace, sharing its arrays."""
        return replace(self, phase_ids=self.phase_ids[keep], block=self.block[keep])

    @classmethod
    def of(cls, phases: Sequence[TracePhase], n_ranks: int) -> FlatTrace:
        """The phases ``phases`` (each its own block) as one flat trace."""
        phases = list(phases)
        k = len(phases)
        cat = lambda name, dt: (np.concatenate([np.asarray(getattr(ph, name), dtype=dt) for ph in phases])  # noqa: E731
                                if k else np.zeros(0, dtype=dt))
        n = [ph.n_tasks for ph in phases]
        t_start = offsets(n)
        idx_len = [len(x) for ph in phases for x in ph.index]
        idx_vals = [v for ph in phases for x in ph.index for v in x]
        subs_t, subs_i, subs_v = [], [], []
        for ph, t0 in zip(phases, t_start[:-1].tolist()):
            if ph.subphase_ids.size:
                rows, cols = np.nonzero(np.ones(ph.subphases.shape, dtype=bool))
                subs_t.append(rows + t0)
                subs_i.append(ph.subphase_ids[cols])
                subs_v.append(ph.subphases[rows, cols])
        user_keys = tuple(sorted({key for ph in phases for key in ph.user}))
        ucode = {key: j for j, key in enumerate(user_keys)}
        ut, uk, uv = [_i64()], [_i64()], [np.zeros(0)]
        for ph, t0 in zip(phases, t_start[:-1].tolist()):
            for key, col in ph.user.items():
                has = np.flatnonzero(~np.isnan(col))
                ut.append(has + t0)
                uk.append(np.full(has.size, ucode[key], dtype=np.int64))
                uv.append(col[has])
        ut_a, uk_a, uv_a = np.concatenate(ut), np.concatenate(uk), np.concatenate(uv)
        o = np.lexsort((uk_a, ut_a))
        rank_keys = tuple(sorted({key for ph in phases for key in ph.rank_user}))
        rcode = {key: j for j, key in enumerate(rank_keys)}
        rb, rr, rk, rv = [_i64()], [_i64()], [_i64()], [np.zeros(0)]
        wb, wr, wv = [_i64()], [_i64()], [np.zeros(0)]
        for b, ph in enumerate(phases):
            for key, col in ph.rank_user.items():
                has = np.flatnonzero(~np.isnan(col))
                rb.append(np.full(has.size, b))
                rr.append(has)
                rk.append(np.full(has.size, rcode[key]))
                rv.append(col[has])
            if ph.rank_working is not None:
                wb.append(np.full(n_ranks, b))
                wr.append(np.arange(n_ranks))
                wv.append(np.asarray(ph.rank_working, dtype=np.float64))
        rb_a, rr_a, rk_a, rv_a = _sparse(rb, rr, rk, rv)
        st = np.concatenate(subs_t) if subs_t else _i64()
        si = np.concatenate(subs_i) if subs_i else _i64()
        sv = np.concatenate(subs_v) if subs_v else np.zeros(0)
        so = np.lexsort((si, st))
        return cls(int(n_ranks), np.array([ph.phase for ph in phases], dtype=np.int64), np.arange(k, dtype=np.int64),
                   t_start, cat("ids", np.int64), cat("loads", np.float64), cat("ranks", np.int64),
                   cat("home", np.int64), cat("migratable", bool), cat("collection", np.int64),
                   offsets([ph.comm_from.size for ph in phases]), cat("comm_from", np.int64), cat("comm_to", np.int64),
                   cat("comm_messages", np.int64), cat("comm_bytes", np.float64), cat("comm_from_rank", np.int64),
                   cat("comm_to_rank", np.int64), offsets(idx_len), np.array(idx_vals, dtype=np.int64),
                   st[so].astype(np.int64), si[so].astype(np.int64), sv[so].astype(np.float64),
                   user_keys, ut_a[o], uk_a[o], uv_a[o], rank_keys, rb_a, rr_a, rk_a, rv_a,
                   np.concatenate(wb).astype(np.int64), np.concatenate(wr).astype(np.int64),
                   np.concatenate(wv).astype(np.float64))


class PhaseView(Sequence):
    """The phases of a :class:`FlatTrace` as :class:`TracePhase` objects, each made when it is asked for."""

    def __init__(self, flat: FlatTrace) -> None:
        self.flat = flat

    def __len__(self) -> int:
        return self.flat.n_phases

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self.flat.phase(j) for j in range(*k.indices(len(self)))]
        k = int(k)
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        return self.flat.phase(k % len(self))

    def __iter__(self) -> Iterator[TracePhase]:
        return (self.flat.phase(k) for k in range(len(self)))


@dataclass(frozen=True, eq=False)
class Trace:
    """A whole trace: its phases in order, the number of ranks, where it came from.

    ``phases`` is a list of :class:`TracePhase` or, for a trace read from files, a :class:`PhaseView` of its
    :class:`FlatTrace` (``flat``), which makes each phase only when it is used."""

    n_ranks: int
    phases: Sequence[TracePhase]
    stem: str = ""
    #: whether its files were brotli-compressed
    compressed: bool = False

    @classmethod
    def from_flat(cls, flat: FlatTrace, stem: str = "", compressed: bool = False) -> Trace:
        return cls(flat.n_ranks, PhaseView(flat), stem, compressed)

    @cached_property
    def flat(self) -> FlatTrace:
        """The trace's phases in flat arrays (:class:`FlatTrace`)."""
        if isinstance(self.phases, PhaseView):
            return self.phases.flat
        return FlatTrace.of(self.phases, self.n_ranks)

    @property
    def phase_ids(self) -> list[int]:
        return self.flat.phase_ids.tolist() if isinstance(self.phases, PhaseView) else [ph.phase for ph in self.phases]

    def phase(self, pid: int) -> TracePhase:
        ids = np.asarray(self.phase_ids, dtype=np.int64)
        hit = np.flatnonzero(ids == pid)
        if hit.size:
            return self.phases[int(hit[0])]
        raise TraceError(f"{self.stem}: no phase {pid} (phases: {ids_text(self.phase_ids)})")


def ids_text(ids: list[int] | NDArray[np.int64], most: int = 12) -> str:
    """``0-9, 12, 20-25``: runs of consecutive ids (the first ``most`` runs, then how many more)."""
    a = unique_sorted(np.asarray(ids, dtype=np.int64))
    if a.size == 0:
        return "none"
    cut = np.flatnonzero(np.diff(a) != 1) + 1
    starts, ends = a[np.r_[0, cut]], a[np.r_[cut - 1, a.size - 1]]
    out = [str(s) if s == e else f"{s}-{e}" for s, e in zip(starts[:most].tolist(), ends[:most].tolist())]
    if starts.size > most:
        out.append(f"... ({starts.size - most:,} more runs)")
    return ", ".join(out)
