"""Balancing under a memory limit: a repair and a block-aware refinement of any assignment of a trace's phase.

A rank's memory (:mod:`hermes.trace.workmodel`) counts each shared block its tasks use once, so whether a task
fits on a rank depends on what is there already: a task whose block the rank holds costs its footprint, one whose
block it lacks costs the whole block. A balancer that chooses objects one at a time (a flow's realisation,
Grapevine's transfers) or parts (METIS, Scotch) without that knowledge either stops early (every rank's memory
taken by single tasks of many blocks) or ends above the limit. :func:`bound_assignment` finishes any assignment
under the limit in two deterministic steps (ranks, blocks and tasks in id order; no randomness):

1. **Repair** (:func:`repair`): the blocks of the ranks above the limit get keepers — (block, rank) pairs by the
   load the rank holds of the block, heaviest first, each block kept by the first rank with room for it (a rank
   within the limit keeps what it has), then second copies where room remains; every other *cluster* (a rank's
   tasks of one block, all migratable) of a rank above the limit leaves it whole, to the keeper of its block
   holding most of it (there only its tasks' footprints join), else to a rank with room for the block (the one
   left least loaded relative to its share); then tasks without a block, one at a time, where they fit. What
   cannot be placed stays and is reported (``unplaced``: the ranks still above the limit).
2. **Refinement** (:func:`refine`): a descent on the loads relative to capacity, u_r = L_r / T_r (T_r the rank's
   fair share of the load). The most loaded rank h (above its share) that can improve gives, to a less loaded
   rank j, the part of one of its clusters closest to the amount x* = (L_h T_j − L_j T_h) / (T_h + T_j) that would
   equalise the pair (the whole cluster, freeing its block on h, or a subset: heaviest tasks first, the rest
   filled with the lightest), or swaps such a part for a lighter part of a cluster of j (when j has no room for
   another block). A move is taken only if the memory of both ranks stays within the limit (or, on a rank
   already above it, does not grow); of the moves that lower the pair's larger u below u_h, the one leaving it
   least (then one that makes no new copy of a block, fewer tasks, lower rank and block ids); the partners are
   the :data:`PARTNERS` (64) least loaded ranks. Each step lowers the sorted vector of the u lexicographically,
   so the descent ends; it stops when no rank has such a move or the largest u is within :data:`TOLERANCE`
   (10⁻³) of 1.

Load is conserved (tasks only change ranks); tasks that are not migratable never move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["BlockState", "Bounded", "bound_assignment", "repair", "refine"]

#: a move must lower the pair's larger u by at least this relative amount (rounding noise is not progress)
RELATIVE_GAIN = 1e-12
#: the refinement stops once the largest u is within this of 1 (a fair share): below it each step gains little
#: while its search, over more and more ranks with no move, grows
TOLERANCE = 1e-3
#: the refinement looks for a rank's move among the least loaded ranks (relative to their shares) only: all of them
#: up to this many ranks; beyond, a step costs this many ranks' clusters, not p's
PARTNERS = 64


@dataclass
class _Cluster:
    """A rank's migratable tasks of one block (−1: tasks without a block), heaviest first (then id)."""

    block: int
    ids: NDArray[np.int64]
    #: cumulative loads of ``ids`` (heaviest first) and of ``ids[::-1]`` (lightest first)
    down: NDArray[np.float64]
    up: NDArray[np.float64]
    #: every task of the block on the rank is in ``ids`` (its departure frees the block)
    whole: bool
    load: float = field(init=False)

    def __post_init__(self) -> None:
        self.load = float(self.down[-1])

    def part(self, x: float) -> NDArray[np.int64]:
        """The tasks whose load comes closest to ``x`` from below: the longest heaviest-first prefix within x, the
        rest of x filled with the lightest remaining tasks; the lightest task alone if none fits."""
        k = int(np.searchsorted(self.down, x * (1 + 1e-12), side="right"))
        rest = x - (float(self.down[k - 1]) if k else 0.0)
        m = int(np.searchsorted(self.up[: self.ids.size - k], rest * (1 + 1e-12), side="right"))
        if k + m == 0:
            return self.ids[-1:]
        return np.concatenate([self.ids[:k], self.ids[self.ids.size - m:]]) if m else self.ids[:k]


class BlockState:
    """Ranks, loads and memory of one assignment of a phase's tasks, kept up to date as tasks move."""

    def __init__(self, ph, ranks: ArrayLike, caps: ArrayLike | None, limit: float) -> None:
        from hermes.trace.workmodel import shared_blocks

        self.p = p = ph.n_ranks
        self.r = np.asarray(ranks, dtype=np.int64).copy()
        self.loads = np.asarray(ph.loads, dtype=np.float64)
        self.mig = np.asarray(ph.migratable, dtype=bool)
        self.limit = float(limit)
        self.block, self.sizes, _ = shared_blocks(ph)
        nan0 = lambda k: np.nan_to_num(ph.user[k], nan=0.0) if k in ph.user else np.zeros(ph.n_tasks)  # noqa: E731
        self.foot, self.work = nan0("task_footprint_bytes"), nan0("task_working_bytes")
        self.base = np.zeros(p) if ph.rank_working is None else np.nan_to_num(ph.rank_working, nan=0.0)
        c = np.ones(p) if caps is None else np.asarray(caps, dtype=np.float64)
        total = float(self.loads.sum())
        # each rank's fair share of the load (of 1 where there is no load: every u is 0 then, nothing to balance)
        self.target = c / c.sum() * (total if total > 0 else 1.0)
        self.load = np.bincount(self.r, weights=self.loads, minlength=p).astype(np.float64)
        self.foot_sum = np.bincount(self.r, weights=self.foot, minlength=p).astype(np.float64)
        #: per rank: block (−1: tasks without one) -> its tasks there (migratable or not); working bytes -> count
        self.members: list[dict[int, set[int]]] = [{} for _ in range(p)]
        self.works: list[dict[float, int]] = [{} for _ in range(p)]
        self.shared = np.zeros(p)
        for v, (rv, b) in enumerate(zip(self.r.tolist(), self.block.tolist())):
            self._add(v, rv, b)
        self._clusters: dict[int, list[_Cluster]] = {}

    def _add(self, v: int, r: int, b: int) -> None:
        tasks = self.members[r].setdefault(b, set())
        if not tasks and b >= 0:
            self.shared[r] += self.sizes[b]
        tasks.add(v)
        w = float(self.work[v])
        self.works[r][w] = self.works[r].get(w, 0) + 1

    def _remove(self, v: int, r: int, b: int) -> None:
        tasks = self.members[r][b]
        tasks.discard(v)
        if not tasks:
            del self.members[r][b]
            if b >= 0:
                self.shared[r] -= self.sizes[b]
        w = float(self.work[v])
        self.works[r][w] -= 1
        if not self.works[r][w]:
            del self.works[r][w]

    # -- memory ----------------------------------------------------------------------------------------------
    def memory(self, r: int, add: NDArray[np.int64] | None = None, remove: NDArray[np.int64] | None = None) -> float:
        """Rank ``r``'s memory with the tasks ``add`` joining it and ``remove`` (tasks on r) leaving it."""
        shared, foot = float(self.shared[r]), float(self.foot_sum[r])
        gone: dict[int, int] = {}
        gone_work: dict[float, int] = {}
        if remove is not None and remove.size:
            foot -= float(self.foot[remove].sum())
            for b, n in zip(*np.unique(self.block[remove], return_counts=True)):
                if b >= 0 and n == len(self.members[r].get(int(b), ())):
                    gone[int(b)] = 1
                    shared -= float(self.sizes[b])
            for w, n in zip(*np.unique(self.work[remove], return_counts=True)):
                gone_work[float(w)] = int(n)
        top = max((w for w, n in self.works[r].items() if n > gone_work.get(w, 0)), default=0.0)
        if add is not None and add.size:
            foot += float(self.foot[add].sum())
            top = max(top, float(self.work[add].max()))
            for b in np.unique(self.block[add]).tolist():
                if b >= 0 and (b not in self.members[r] or b in gone):
                    shared += float(self.sizes[b])
        return float(self.base[r] + shared + foot + top)

    def memories(self) -> NDArray[np.float64]:
        return np.array([self.memory(r) for r in range(self.p)])

    def fits_each(self, vs: NDArray[np.int64], r: int) -> NDArray[np.bool_]:
        """Whether rank ``r``'s memory stays within the limit with each task of ``vs`` joining it alone (vectorised:
        what a realisation choosing one object at a time asks)."""
        b = self.block[vs]
        held = np.fromiter((k for k in self.members[r] if k >= 0), dtype=np.int64)
        new_block = (b >= 0) & ~np.isin(b, held)
        extra = np.where(new_block, self.sizes[np.maximum(b, 0)] if self.sizes.size else 0.0, 0.0)
        top = max(self.works[r], default=0.0)
        after = (self.base[r] + self.shared[r] + extra + self.foot_sum[r] + self.foot[vs]
                 + np.maximum(top, self.work[vs]))
        return after <= self.limit

    def allowed(self, r: int, add: NDArray[np.int64] | None = None, remove: NDArray[np.int64] | None = None) -> bool:
        """Whether rank ``r``'s memory after the change is within the limit, or (a rank above it) does not grow."""
        after = self.memory(r, add, remove)
        return after <= self.limit or after <= self.memory(r)

    # -- moves -----------------------------------------------------------------------------------------------
    def move(self, vs: NDArray[np.int64], dst: int) -> None:
        for v in np.asarray(vs, dtype=np.int64).tolist():
            src, b = int(self.r[v]), int(self.block[v])
            self._remove(v, src, b)
            self._add(v, dst, b)
            self.r[v] = dst
            self.load[src] -= self.loads[v]
            self.load[dst] += self.loads[v]
            self.foot_sum[src] -= self.foot[v]
            self.foot_sum[dst] += self.foot[v]
            self._clusters.pop(src, None)
        self._clusters.pop(dst, None)

    def u(self) -> NDArray[np.float64]:
        return self.load / self.target

    def clusters(self, r: int) -> list[_Cluster]:
        """Rank ``r``'s clusters of migratable tasks, by block id (−1, tasks without a block, first)."""
        got = self._clusters.get(r)
        if got is None:
            got = []
            for b in sorted(self.members[r]):
                vs = np.array(sorted(self.members[r][b]), dtype=np.int64)
                vs = vs[self.mig[vs]]
                if vs.size:
                    vs = vs[np.lexsort((vs, -self.loads[vs]))]
                    ld = self.loads[vs]
                    whole = b >= 0 and vs.size == len(self.members[r][b])
                    got.append(_Cluster(b, vs, np.cumsum(ld), np.cumsum(ld[::-1]), whole))
            self._clusters[r] = got
        return got


def repair(st: BlockState) -> dict[str, int]:
    """Bring every rank above the limit within it by whole clusters (module docstring, step 1).

    The blocks of the ranks above the limit are given keepers first: (block, rank) pairs by the load the rank
    holds of the block, heaviest first, each block kept by the first such rank with room for it (a rank within the
    limit keeps what it has), a block none of its holders has room for by the rank with the most room, then
    second copies where room remains. Each cluster of a rank above the limit whose
    block it does not keep goes whole to the rank keeping its block that holds most of it, else to a rank with
    room for the block (the one left least loaded relative to its share); a cluster with neither stays, and its
    rank is reported."""
    mem = st.memories()
    over = np.flatnonzero(mem > st.limit).tolist()
    if not over:
        return {"repair_moved": 0, "unplaced": 0}
    is_over = mem > st.limit
    kept: list[set[int]] = [set(b for b in st.members[r] if b >= 0) if not is_over[r] else set() for r in range(st.p)]
    room = st.limit - mem
    cost: dict[tuple[int, int], float] = {}  # (rank, block): the block's bytes and its cluster's footprints
    for r in over:  # what a rank above the limit needs whatever it keeps: the tasks that cannot leave with a block
        whole = {c.block: c for c in st.clusters(r) if c.whole}
        stuck = [b for b in st.members[r] if b not in whole]
        stay = sum(float(st.foot[list(st.members[r][b])].sum()) for b in stuck)
        room[r] = st.limit - (st.base[r] + stay + max(st.works[r], default=0.0)
                              + sum(float(st.sizes[b]) for b in stuck if b >= 0))
        kept[r] |= {b for b in stuck if b >= 0}
        for b, c in whole.items():
            cost[r, b] = float(st.sizes[b]) + float(st.foot[c.ids].sum())
    keepers: dict[int, set[int]] = {}
    for r in range(st.p):
        for b in kept[r]:
            keepers.setdefault(b, set()).add(r)
    pairs = sorted(((-c.load, c.block, r, c) for r in over for c in st.clusters(r) if c.whole),
                   key=lambda t: t[:3])
    for first in (True, False):
        for _, b, r, c in pairs:
            if b in kept[r] or (first and b in keepers) or cost[r, b] > room[r]:
                continue
            kept[r].add(b)
            keepers.setdefault(b, set()).add(r)
            room[r] -= cost[r, b]
        if first:  # a block none of its holders has room for: kept by the rank with the most room for it
            for _, b, r, c in pairs:
                if b in keepers:
                    continue
                j = int(np.argmax(room))
                if room[j] >= cost[r, b]:
                    kept[j].add(b)
                    keepers[b] = {j}
                    room[j] -= float(st.sizes[b])
    tops = np.array([max(st.works[j], default=0.0) for j in range(st.p)])
    moved = 0
    for _, b, r, c in sorted(pairs, key=lambda t: (-t[0], t[1], t[2])):  # lightest first
        if b in kept[r]:
            continue
        # what the cluster adds to a receiver: its footprints, its largest working set beyond the receiver's
        foot, top = float(st.foot[c.ids].sum()), float(st.work[c.ids].max())
        need = lambda j: foot + max(0.0, top - tops[j])  # noqa: E731
        held = [(-float(st.loads[list(st.members[j].get(b, ()))].sum()), j) for j in sorted(keepers.get(b, ()))
                if j != r and room[j] >= need(j)]  # the block's bytes are reserved on its keepers
        if held:
            j = min(held)[1]
        else:
            ok = room >= foot + np.maximum(0.0, top - tops) + float(st.sizes[b])
            ok[r] = False
            if not ok.any():
                continue
            cand = np.flatnonzero(ok)
            j = int(cand[np.argmin((st.load[cand] + c.load) / st.target[cand])])
            kept[j].add(b)
            keepers.setdefault(b, set()).add(j)
            room[j] -= float(st.sizes[b])
        room[j] -= need(j)
        st.move(c.ids, j)
        tops[j] = max(tops[j], top)
        moved += int(c.ids.size)
    moved += _repair_loose(st)
    return {"repair_moved": moved, "unplaced": int(np.sum(st.memories() > st.limit))}


def _repair_loose(st: BlockState) -> int:
    """Tasks without a block off the ranks still above the limit, one at a time (each frees its footprint): the
    largest footprint first, to the rank with room for it left least loaded relative to its share."""
    moved = 0
    mem = st.memories()
    tops = np.array([max(st.works[j], default=0.0) for j in range(st.p)])
    for r in np.flatnonzero(mem > st.limit).tolist():
        loose = [c for c in st.clusters(r) if c.block < 0]
        if not loose:
            continue
        ids = loose[0].ids[np.lexsort((loose[0].ids, -st.foot[loose[0].ids]))]
        for v in ids.tolist():
            if mem[r] <= st.limit:
                break
            ok = mem + st.foot[v] + np.maximum(0.0, st.work[v] - tops) <= st.limit
            ok[r] = False
            if not ok.any():
                continue
            cand = np.flatnonzero(ok)
            j = int(cand[np.argmin((st.load[cand] + st.loads[v]) / st.target[cand])])
            st.move(np.array([v], dtype=np.int64), j)
            mem[r], mem[j] = st.memory(r), st.memory(j)
            tops[r], tops[j] = max(st.works[r], default=0.0), max(tops[j], float(st.work[v]))
            moved += 1
    return moved


def _best_move(st: BlockState, h: int, u: NDArray[np.float64]):
    """The move of :func:`refine` from rank ``h`` to a less loaded rank (module docstring, step 2):
    (key, tasks sent, target, tasks taken back or None), None if h has none."""
    uh = float(u[h])
    th = st.target[h]
    best = None
    mine = st.clusters(h)
    if not mine:
        return None
    for j in np.argsort(u, kind="stable")[:PARTNERS + 1].tolist():
        if j == h or u[j] >= uh:
            continue
        tj = st.target[j]
        if best is not None and (st.load[h] + st.load[j]) / (th + tj) >= best[0][0]:
            continue  # even an exact equalisation with j would not beat the best move found
        x = (st.load[h] * tj - st.load[j] * th) / (th + tj)
        if x <= 0:
            continue
        plain = False
        for c in mine:
            for s in ((c.ids, c.part(x)) if c.load <= 2.0 * x else (c.part(x),)):
                ls = float(st.loads[s].sum())
                pair = max((st.load[h] - ls) / th, (st.load[j] + ls) / tj)
                if pair >= uh * (1 - RELATIVE_GAIN):
                    continue
                split = c.block >= 0 and c.block not in st.members[j] and not (c.whole and s.size == c.ids.size)
                key = (pair, split, int(s.size), j, c.block)
                if best is not None and key >= best[0]:
                    plain = True
                    continue
                if st.allowed(j, s) and st.allowed(h, None, s):
                    best, plain = (key, s, j, None), True
        if plain:
            continue
        # j takes no part of h's clusters: swaps, a part of a cluster of h for a lighter part of one of j's
        for d in st.clusters(j):
            if d.block < 0:
                continue
            for c in mine:
                if c.block == d.block:
                    continue
                for s in (c.ids, c.part(x + d.load)):
                    ls = float(st.loads[s].sum())
                    for back in ((d.ids, d.part(ls - x)) if ls > x else (d.ids,)):
                        delta = ls - float(st.loads[back].sum())
                        if delta <= 0:
                            continue
                        pair = max((st.load[h] - delta) / th, (st.load[j] + delta) / tj)
                        if pair >= uh * (1 - RELATIVE_GAIN):
                            continue
                        split = (c.block >= 0 and c.block not in st.members[j]
                                 and not (c.whole and s.size == c.ids.size)) or \
                                (d.block not in st.members[h] and not (d.whole and back.size == d.ids.size))
                        key = (pair, split, int(s.size + back.size), j, c.block)
                        if best is not None and key >= best[0]:
                            continue
                        if st.allowed(j, s, back) and st.allowed(h, back, s):
                            best = (key, s, j, back)
    return best


def refine(st: BlockState, max_steps: int | None = None, tolerance: float = TOLERANCE) -> dict[str, int]:
    """The descent on the loads relative to capacity (module docstring, step 2), until the largest u is within
    ``tolerance`` of 1 or no rank has a move (or ``max_steps``, default 20 per task)."""
    steps = moved = splits = swaps = 0
    limit_steps = max_steps if max_steps is not None else 20 * max(1, st.r.size)
    while steps < limit_steps:
        u = st.u()
        if float(u.max()) <= 1.0 + tolerance:
            break
        best = None
        for h in np.argsort(-u, kind="stable").tolist():
            if u[h] <= 1.0 + tolerance:
                break  # the givers are the ranks above their share
            best = _best_move(st, h, u)
            if best is not None:
                break
        if best is None:
            break
        key, s, j, back = best
        st.move(s, j)
        if back is not None:
            st.move(back, h)
            swaps += 1
        splits += int(key[1])
        moved += int(s.size) + (int(back.size) if back is not None else 0)
        steps += 1
    return {"refine_steps": steps, "refine_moved": moved, "refine_splits": splits, "refine_swaps": swaps}


@dataclass
class Bounded:
    """:func:`bound_assignment`'s answer: the new ranks and what the two steps did."""

    ranks: NDArray[np.int64]
    info: dict[str, Any]


def bound_assignment(ph, ranks: ArrayLike, caps: ArrayLike, limit: float, *, refinement: bool = True) -> Bounded:
    """``ranks`` (any balancer's assignment of ``ph``'s tasks) repaired to fit ``limit`` bytes per rank, then
    refined under it (module docstring); ``refinement=False``: the repair only."""
    st = BlockState(ph, ranks, caps, limit)
    info: dict[str, Any] = {"imbalance_balancer": float(st.u().max()),
                            "memory_over_balancer": int(np.sum(st.memories() > limit))}
    info.update(repair(st))
    if refinement:
        info.update(refine(st))
        info["unplaced"] = int(np.sum(st.memories() > limit))
    return Bounded(st.r, info)
