"""``informandtransfer``: LBAF's InformAndTransfer balancer (gossip, then Clustering or Recursive transfers under
the Tempered or StrictLocalizing criterion, the memory limit through the work model), replayed on a trace's phase.

A port of LB-analysis-framework 1.6.0 (commit 9615e7ab), written from the description in
docs/design/informandtransfer.md (§1–2; the file:line references there point into LBAF's source). No LBAF code is
copied. One **iteration** is

1. the *inform* stage (§1.2): every rank sends its own id to ``fanout`` distinct random other ranks, then in each
   of ``n_rounds − 1`` forwarding rounds every rank sends the set of ranks it knows (the live set, not a copy) to
   ``fanout`` random ranks among them; a rank's transfer targets are the ranks it knows;
2. the *transfer* stage (§1.3), source rank after source rank (in the phase's order, shuffled unless
   ``deterministic_transfer``), with one of two strategies:

   * ``clustering`` (§1.5): whole *clusters* (a rank's migratable tasks of one ``shared_id``; the empty cluster
     stands for "nothing", so a swap with it is a one-way push or pull) are swapped with the clusters of one target
     after another until one target has taken a swap; then, unless ``separate_subclustering`` (a second pass over
     the ranks), a *subcluster* (a subset of one cluster: every subset up to ``max_objects_per_transfer`` objects
     when deterministic, else ``min(n, max_subclusters)`` random ones of binomial sizes) that leaves the source at
     least ``(1 − cluster_swap_rtol)`` times the average load may move to one target. Tasks without a
     ``shared_id`` never move;
   * ``recursive`` (§1.5, "Recursive strategy"): the source's migratable tasks are listed by ``order_strategy``
     and popped from the list's end one at a time; each goes to the target of the best criterion (deterministic) or
     to a target drawn with the criterion's weights, and where that criterion is negative the batch grows by
     ``random.choice`` picks among the rest of the list (in every mode) up to ``max_objects_per_transfer`` tasks
     until it is not (a batch that never gets there stays). The orders (LBAF's schema's list): ``arbitrary`` (the
     set's order), ``element_id``, ``decreasing_loads``, ``increasing_loads`` (stable sorts of the set's order),
     ``fewest_migrations`` (the tasks of at most the excess ``E`` = Σ the source's migratable loads − the initial
     average load, largest first, then the others smallest first) and ``small_objects`` (sorted by load, the
     longest prefix whose cumulated load is at most ``E`` and one task more, largest first, then the rest smallest
     first).

The **Tempered** criterion ``max(W_src, W_dst) before − max(W_src, W_dst) after`` must be positive for a move
(above ``cluster_swap_rtol`` times the source cluster's load for a swap; non-negative for a Recursive batch),
where the work ``W`` of a rank (LBAF's ``AffineCombination`` with β = γ = δ = 0) is α_r · load, infinite when the
rank's memory (rank baseline + each shared block once + the tasks' footprints + the largest working bytes:
:mod:`hermes.trace.workmodel`) exceeds the limit. The **StrictLocalizing** criterion is −1 when a task of the moved
set sends to or receives from a task now on the source (a SendRecv between two tasks of the phase; another task
of the set counts, as it has not moved yet), else +1: it ignores the target, the tasks coming back in a swap, the
loads and the memory limit. Tasks that are not migratable never move.

Reproducing LBAF
----------------
LBAF draws from Python's ``random`` (and ``numpy.random`` for the subcluster sizes) seeded with 146, and iterates
Python sets of ranks, tasks and blocks. Under ``benchmarks/lbaf_deterministic.py`` (their hashes are their ids)
those sets iterate in CPython's hash-table order of the integer ids, which depends on the ids *and* on the
history of additions and removals. The port therefore keeps the same sets of integer ids built and mutated by the
same operations: a rank's migratable tasks added in the order its file lists them (``TracePhase.listing``) and
copied, each Tempered evaluation moving the tasks there and back as LBAF's does (StrictLocalizing moves none),
the gossip's known-peer sets updated from the live sets; and it makes the same draws (``random.Random(seed)``,
``numpy.random.RandomState(seed)``) in the same order on candidates in the same order. The loads and memories
are kept incrementally; they equal LBAF's sums over the sets when every partial sum is exact (integer or dyadic
times, as in LBAF's three data sets), otherwise a last-bit difference may break a tie the other way. With the
default seed 146 the port replays the harness's runs (results/lbaf_memory.md; the Recursive strategy and the
StrictLocalizing criterion: docs/design/informandtransfer.md, "Built").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from itertools import accumulate, chain, combinations
from bisect import bisect
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from hermes.balance.interface import BalanceContext, Decision, Flag, NonNegative, Params, Seed, integer_type
from hermes.balance.registry import register
from hermes.errors import BalancerError

__all__ = ["InformAndTransferParams", "InformAndTransferResult", "inform_and_transfer", "MAX_SUBSETS",
           "LBAF_SEED"]

#: LBAF's hard-coded seed of ``random`` and ``numpy.random`` (``lbsStatistics.initialize``)
LBAF_SEED = 146
#: the most subclusters a deterministic transfer enumerates on one rank (every subset of a cluster of k objects up to
#: max_objects_per_transfer of them: 2^k − 1 at most); beyond it the port refuses instead of running for hours
MAX_SUBSETS = 2**20
#: the largest iteration, round, fanout and object counts a run may ask for
MAX_COUNT = 10**6
#: the object orders of LBAF's Recursive strategy (its schema's ``ALLOWED_ORDER_STRATEGIES``)
ORDER_STRATEGIES = ("arbitrary", "element_id", "decreasing_loads", "increasing_loads", "fewest_migrations",
                    "small_objects")


class InformAndTransferParams(Params):
    """Parameters of ``informandtransfer`` (LBAF's names; docs/design/informandtransfer.md §1.1)."""

    n_iterations: integer_type(ge=0, le=10_000) = Field(8, description="inform + transfer iterations")
    n_rounds: integer_type(ge=0, le=10_000) = Field(
        4, description="gossip rounds per iteration (round 0 always runs; 0 and 1 are the same)")
    fanout: integer_type(ge=0, le=MAX_COUNT) = Field(4, description="ranks informed per rank and round")
    deterministic_transfer: Flag = Field(
        False, description="sources, targets and clusters in set order, every subcluster enumerated, best-fit "
        "subcluster target (else shuffled, sampled subclusters, criterion-weighted random target)")
    max_objects_per_transfer: integer_type(ge=1, le=MAX_COUNT) | None = Field(
        None, description="largest subcluster (null: unbounded, LBAF's default)")
    cluster_swap_rtol: NonNegative = Field(
        0.05, description="a swap must gain more than this times the source cluster's load; a subcluster must "
        "leave the source at least (1 − this) times the average load")
    max_subclusters: integer_type(ge=0, le=MAX_COUNT) | None = Field(
        None, description="sampled subclusters per cluster when not deterministic; 0: no subclustering (null: "
        "unbounded)")
    subclustering_threshold: NonNegative = Field(
        0.0, description="deterministic subclustering only from a source above this times the maximum load")
    subclustering_minimum_improvement: NonNegative = Field(
        0.0, description="deterministic subclustering only to a target whose gain exceeds this times the source load")
    separate_subclustering: Flag = Field(False, description="subclustering in a second pass after every swap")
    target_imbalance: NonNegative = Field(
        0.0, description="stop once max/mean − 1 of the loads is at most this (LBAF's imbalance)")
    criterion: Literal["tempered", "strictlocalizing"] = Field(
        "tempered", description="transfer criterion: tempered (max(W_src, W_dst) must drop) or strictlocalizing "
        "(no moved task may talk to a task left on the source; ignores the target and the work model)")
    transfer_strategy: Literal["clustering", "recursive"] = Field(
        "clustering", description="transfer strategy: clustering (shared-block clusters swapped, subclusters "
        "moved) or recursive (one task at a time, grown by random picks until the criterion accepts)")
    order_strategy: Literal[ORDER_STRATEGIES] = Field(
        "arbitrary", description="order of a source's tasks for recursive, which pops them from the end of LBAF's "
        "list (arbitrary: the set's order; fewest_migrations, small_objects: around the source's excess load); "
        "clustering ignores it")
    seed: Seed = Field(LBAF_SEED, description="seed of the random and numpy streams (LBAF's fixed 146)")


@dataclass
class InformAndTransferResult:
    """The new rank of every task and what the iterations did."""

    ranks: NDArray[np.int64]
    #: the largest work (α_r · load, inf above the memory limit) after each iteration
    max_work: list[float] = field(default_factory=list)
    #: LBAF's imbalance (max / mean − 1 of the loads) after each iteration
    imbalance: list[float] = field(default_factory=list)
    transfers: int = 0
    swaps: int = 0
    subcluster_transfers: int = 0
    #: mean fraction of the other ranks a rank knew after each gossip
    knowledge: list[float] = field(default_factory=list)


def _streamed_mean(values: list[float]) -> float:
    """The mean as LBAF streams it (``compute_function_statistics``: ``m += (y − m) / n``), bit for bit."""
    m = 0.0
    for n, y in enumerate(values, 1):
        m += (y - m) / n
    return m


def _stats(values: list[float]) -> tuple[float, float]:
    """(maximum, streamed mean) of ``values`` as LBAF takes them (an infinite value makes the mean infinite)."""
    top = -math.inf
    for y in values:
        top = max(top, y)
    if any(math.isinf(y) for y in values):
        return top, math.inf
    return top, _streamed_mean(values)


class _Ranks:
    """The phase as LBAF's model holds it: per rank a set of migratable task ids (LBAF's order) and the figures of
    the work model kept up to date as tasks move (one task at a time, as LBAF's ``transfer_object``)."""

    def __init__(self, ph, limit: float | None) -> None:
        from hermes.trace.memorybound import BlockState

        self.p = p = ph.n_ranks
        ids = ph.ids.tolist()
        self.pos = {oid: v for v, oid in enumerate(ids)}
        self.load_of = dict(zip(ids, ph.loads.tolist()))
        sid = ph.user.get("shared_id")
        shared = [None] * len(ids) if sid is None else [int(s) if np.isfinite(s) and s > -1 else None
                                                         for s in sid.tolist()]
        self.shared_of = dict(zip(ids, shared))
        alpha = ph.rank_user.get("rank_alpha")
        self.alpha = [1.0] * p if alpha is None else np.nan_to_num(alpha, nan=1.0).tolist()
        self.limit = limit
        self.state = BlockState(ph, ph.ranks, None, math.inf if limit is None else float(limit))
        listing = ph.listing if ph.listing is not None else np.zeros(len(ids), dtype=np.int64)
        # each rank's migratable ids added in the order its file lists them (ties: by id), then copied: LBAF's
        # reader adds them to the initial phase's rank, and the rebalanced phase copies that set
        order = np.lexsort((ph.ids, listing, ph.ranks))
        built: list[set[int]] = [set() for _ in range(p)]
        mig = ph.migratable.tolist()
        r_of = ph.ranks.tolist()
        for v in order.tolist():
            if mig[v]:
                built[r_of[v]].add(ids[v])
        self.objects = [s.copy() for s in built]
        # each task's communication partners among the phase's tasks (positions; LBAF's communicator keeps the
        # SendRecv messages between two objects of the phase, sent and received)
        self.partners: list[list[int]] = [[] for _ in ids]
        a, a_ok, b, b_ok = ph.endpoints()
        for x, y in zip(a[a_ok & b_ok].tolist(), b[a_ok & b_ok].tolist()):
            self.partners[x].append(y)
            self.partners[y].append(x)
        # the rebalanced phase's ranks: a set filled in rank order (LBAF's copy_ranks)
        self.rank_set: set[int] = set()
        for r in range(p):
            self.rank_set.add(r)

    def load(self, r: int) -> float:
        return float(self.state.load[r])

    def work(self, r: int) -> float:
        """LBAF's AffineCombination work with β = γ = δ = 0: α_r · load, inf above the memory limit."""
        if self.limit is not None and self.state.memory(r) > self.limit:
            return math.inf
        return self.alpha[r] * self.load(r)

    def transfer(self, src: int, objs: list[int], dst: int, back: list[int] = ()) -> int:
        """LBAF's ``Phase.transfer_objects``: ``objs`` from src to dst one by one, then ``back`` from dst to src."""
        for moving, a, b in ((objs, src, dst), (back, dst, src)):
            if not moving:
                continue
            sa, sb = self.objects[a], self.objects[b]
            for o in moving:
                sa.remove(o)
                sb.add(o)
            self.state.move(np.array([self.pos[o] for o in moving], dtype=np.int64), b)
        return len(objs) + len(back)

    def tempered(self, src: int, objs: list[int], dst: int, back: list[int] = ()) -> float:
        """The Tempered criterion: the drop of max(W_src, W_dst) when ``objs`` go to dst and ``back`` to src,
        evaluated by moving them and moving them back (which LBAF's sets remember)."""
        before = max(self.work(src), self.work(dst))
        self.transfer(src, objs, dst, back)
        after = max(self.work(src), self.work(dst))
        self.transfer(dst, objs, src, back)
        return before - after

    def strict(self, src: int, objs: list[int], dst: int = -1, back: list[int] = ()) -> float:
        """The StrictLocalizing criterion: −1 when a task of ``objs`` sends to or receives from a task now on src
        (one of ``objs`` included: none has moved yet), else +1; dst, ``back`` and the work model are ignored."""
        r, pos, partners = self.state.r, self.pos, self.partners
        for o in objs:
            for q in partners[pos[o]]:
                if r[q] == src:
                    return -1.0
        return 1.0

    def ranks(self) -> NDArray[np.int64]:
        return self.state.r.copy()


class _InformAndTransfer:
    """One run: the gossip and the Clustering or Recursive transfer stage, LBAF's draws in LBAF's order."""

    def __init__(self, ph, prm: dict[str, Any], limit: float | None) -> None:
        self.m = _Ranks(ph, limit)
        self.prm = prm
        self.crit = self.m.tempered if prm["criterion"] == "tempered" else self.m.strict
        self.rng = random.Random(prm["seed"])
        self.nprng = np.random.RandomState(prm["seed"])
        self.det = bool(prm["deterministic_transfer"])
        mo = prm["max_objects_per_transfer"]
        self.max_objects = math.inf if mo is None else mo
        ms = prm["max_subclusters"]
        self.max_subclusters = math.inf if ms is None else ms
        self.rtol = float(prm["cluster_swap_rtol"])
        self.n_swaps = 0  # over every iteration (LBAF's counter decides separate subclustering)
        self.n_sub = 0
        self.transfers = 0
        # the initial phase's ranks are a list in rank order: the average LBAF keeps is streamed in that order
        self.ave_load = _streamed_mean([self.m.load(r) for r in range(self.m.p)])

    # -- inform ------------------------------------------------------------------------------------------------
    def inform(self) -> dict[int, set[int]]:
        """The known peers of every rank after the gossip (§1.2)."""
        rng, fanout = self.rng, self.prm["fanout"]
        rank_set = set(self.m.rank_set)
        n = len(rank_set)
        known: dict[int, set[int]] = {}
        messages: dict[int, list[set[int]]] = {}
        for snd in rank_set:
            known[snd] = {snd}
            support = {snd}
            for rcv in rng.sample(list(rank_set.difference({snd})), min(fanout, n - 1)):
                messages.setdefault(rcv, []).append(support)
        self._deliver(known, messages)
        for _ in range(1, self.prm["n_rounds"]):
            messages.clear()
            for snd in rank_set:
                mine = known.setdefault(snd, {snd})
                others = mine.difference({snd})
                for rcv in rng.sample(list(others), min(fanout, len(others))):
                    messages.setdefault(rcv, []).append(mine)  # the live set: later updates reach later receivers
            self._deliver(known, messages)
        return known

    @staticmethod
    def _deliver(known: dict[int, set[int]], messages: dict[int, list[set[int]]]) -> None:
        for rcv, sets in messages.items():
            for support in sets:
                known.setdefault(rcv, {rcv}).update(support)

    # -- clusters ----------------------------------------------------------------------------------------------
    def clusters(self, r: int, with_null: bool) -> dict[int | None, list[int]]:
        """Rank r's migratable tasks by shared id, in set order (the empty cluster ``None`` first when asked);
        shuffled unless deterministic."""
        out: dict[int | None, list[int]] = {None: []} if with_null else {}
        shared_of = self.m.shared_of
        for o in self.m.objects[r]:
            k = shared_of[o]
            if k is not None:
                out.setdefault(k, []).append(o)
        if self.det:
            return out
        return {k: out[k] for k in self.rng.sample(list(out), len(out))}

    def swap_clusters(self, src: int, clusters_src: dict[int | None, list[int]], targets: set[int]) -> int:
        """Cluster swaps of src with the first target that takes one (§1.5 step 2); the number done."""
        m, done = self.m, 0
        order = targets if self.det else self.rng.sample(list(targets), len(targets))
        for dst in order:
            if done:
                break
            clusters_dst = self.clusters(dst, True)
            for o_src in clusters_src.values():
                for k_dst, o_dst in clusters_dst.items():
                    c = self.crit(src, o_src, dst, o_dst)
                    if c > 0.0 and c > self.rtol * sum(m.load_of[o] for o in o_src):
                        self.transfers += m.transfer(src, o_src, dst, o_dst)
                        del clusters_dst[k_dst]
                        done += 1
                        break
        return done

    def subclusters(self, src: int) -> list[tuple[int, ...]]:
        """The subclusters of src that leave it at least (1 − rtol) times the average load, the largest removal
        first (§1.5 step 4; ties in the order found)."""
        clusters = list(self.clusters(src, False).values())
        if not clusters:
            return []
        m = self.m
        src_load = m.load(src)
        floor = (1.0 - self.rtol) * self.ave_load
        if self.det:
            total = 0
            for v in clusters:
                k = min(self.max_objects, len(v))
                total += sum(math.comb(len(v), j) for j in range(1, k + 1))
                if total > MAX_SUBSETS:
                    raise BalancerError(
                        f"informandtransfer: deterministic subclustering of rank {src} would enumerate more than "
                        f"{MAX_SUBSETS:,} subsets (a cluster of {len(v)} objects, max_objects_per_transfer "
                        f"{self.prm['max_objects_per_transfer']}): lower max_objects_per_transfer, set max_subclusters "
                        f"0 or deterministic_transfer false")
        found: dict[tuple[int, ...], float] = {}
        for v in clusters:
            k = min(self.max_objects, len(v))
            if self.det:
                subsets = chain.from_iterable(combinations(v, j) for j in range(1, k + 1))
            else:
                sizes = self.nprng.binomial(k, 0.5, min(k, self.max_subclusters))
                subsets = (tuple(self.rng.sample(v, int(j))) for j in sizes)
            for c in subsets:
                reach = src_load - sum(m.load_of[o] for o in c)
                if reach >= floor:
                    found[c] = reach
        return sorted(found, key=found.get)

    def ecmf_target(self, src: int, objs: list[int], targets: set[int]) -> tuple[int | None, float]:
        """A target drawn with weights (c − c_min) / (c_max − c_min) of the criterion c (uniform when all equal;
        LBAF's ``_randomly_select_target``: NaN weights fall back on the first target)."""
        values: dict[int, float] = {}
        lo, hi = math.inf, -math.inf
        for dst in targets:
            c = self.crit(src, list(objs), dst)
            values[dst] = c
            lo, hi = min(lo, c), max(hi, c)
        if not values:
            return None, -math.inf
        if lo == hi:
            cmf = {k: 1.0 / len(values) for k in values}
        else:
            span = hi - lo
            cmf = {k: (c - lo) / span for k, c in values.items()}
        total = 0.0
        for k, w in cmf.items():
            total += w
            cmf[k] = total
        for k in cmf:
            cmf[k] /= total
        u = self.rng.random()
        for k, w in cmf.items():
            if not w < u:
                return k, values[k]
        return None, -math.inf

    def transfer_subclusters(self, src: int, targets: set[int], max_load: float) -> None:
        """At most one subcluster transfer from src (§1.5 step 4)."""
        m, prm = self.m, self.prm
        for sub in self.subclusters(src):
            objs = list(sub)
            dst, c_dst = None, -math.inf
            if self.det:
                sub_load = sum(m.load_of[o] for o in sub)
                l_dst = math.inf
                for r in targets:
                    c = self.crit(src, objs, r)
                    if (c <= prm["subclustering_minimum_improvement"] * m.load(src)
                            or m.load(src) < prm["subclustering_threshold"] * max_load):
                        continue
                    dist = abs(m.load(r) + sub_load - self.ave_load)
                    if dist < l_dst:
                        c_dst, dst, l_dst = c, r, dist
                    elif dist == l_dst and c > c_dst:
                        c_dst, dst = c, r
            else:
                dst, c_dst = self.ecmf_target(src, objs, targets)
            if dst is not None and c_dst > 0.0:
                self.transfers += m.transfer(src, objs, dst)
                self.n_sub += 1
                return

    # -- transfer ----------------------------------------------------------------------------------------------
    def sources(self, known: dict[int, set[int]]) -> dict[int, set[int]]:
        """The source ranks (with migratable tasks and targets) and their targets, in LBAF's traversal order: the
        rank set's, shuffled unless deterministic (§1.3)."""
        m = self.m
        sources: dict[int, set[int]] = {}
        for r in m.rank_set:
            if not m.objects[r]:
                continue
            targets = known.get(r, set()).difference({r})
            if targets:
                sources[r] = targets
        if not self.det:
            sources = {k: sources[k] for k in self.rng.sample(list(sources), len(sources))}
        return sources

    def ordered(self, src: int) -> list[int]:
        """src's migratable tasks in the order of ``order_strategy``, as LBAF's Recursive strategy lists them
        (the last one is popped first). The sorts are stable over the set's order; ``fewest_migrations`` and
        ``small_objects`` measure the excess ``Σ loads of src's migratable tasks − the initial average load``."""
        load = self.m.load_of
        objs = list(self.m.objects[src])
        how = self.prm["order_strategy"]
        if how == "arbitrary":
            return objs
        if how == "element_id":
            return sorted(objs)
        if how == "decreasing_loads":
            return sorted(objs, key=lambda o: -load[o])
        if how == "increasing_loads":
            return sorted(objs, key=lambda o: load[o])
        excess = sum(load[o] for o in objs) - self.ave_load
        if how == "fewest_migrations":
            small = [o for o in objs if load[o] <= excess]
            large = [o for o in objs if load[o] > excess]
            return sorted(small, key=lambda o: -load[o]) + sorted(large, key=lambda o: load[o])
        # small_objects: the longest prefix (by load) whose cumulated load is at most the excess and one task more,
        # largest first, then the others smallest first
        up = sorted(objs, key=lambda o: load[o])
        cut = bisect(list(accumulate(load[o] for o in up)), excess) + 1
        return sorted(up[:cut], key=lambda o: -load[o]) + sorted(up[cut:], key=lambda o: load[o])

    def recursive_stage(self, known: dict[int, set[int]]) -> None:
        """LBAF's Recursive strategy: every source's tasks popped one at a time from the ordered list, sent to the
        best target (deterministic) or an ECMF draw, and, where the criterion is negative, grown by
        ``random.choice`` picks among the rest of the list (up to ``max_objects_per_transfer`` tasks) until it
        is not."""
        m = self.m
        for src, targets in self.sources(known).items():
            order = self.ordered(src)
            while order:
                objs = [order.pop()]
                dst, c_dst = None, -math.inf
                if self.det:
                    for r in targets:
                        c = self.crit(src, objs, r)
                        if c > c_dst:
                            c_dst, dst = c, r
                else:
                    dst, c_dst = self.ecmf_target(src, objs, targets)
                    if dst is None:
                        continue
                if c_dst < 0.0:
                    if not order or dst is None:
                        continue
                    rest = order[:]
                    if not self.grow(src, objs, dst, rest):
                        continue
                    order = rest
                self.transfers += m.transfer(src, objs, dst)

    def grow(self, src: int, objs: list[int], dst: int, rest: list[int]) -> bool:
        """Add ``random.choice`` picks of ``rest`` (removed from it) to ``objs`` until the criterion is not
        negative (True) or ``rest`` is empty or ``objs`` has ``max_objects_per_transfer`` tasks (False)."""
        while rest and len(objs) < self.max_objects:
            o = self.rng.choice(rest)
            rest.remove(o)
            objs.append(o)
            if not self.crit(src, objs, dst) < 0.0:
                return True
        return False

    def transfer_stage(self, known: dict[int, set[int]], max_load: float) -> None:
        """Every source rank's swaps and subcluster (§1.3, §1.5)."""
        sources = self.sources(known)
        sub_on = self.max_subclusters > 0
        separate = self.prm["separate_subclustering"]
        for src, targets in sources.items():
            clusters_src = self.clusters(src, True)
            swaps = self.swap_clusters(src, clusters_src, targets)
            if swaps:
                self.n_swaps += swaps
                if not self.det:
                    continue
            if not separate and sub_on:
                self.transfer_subclusters(src, targets, max_load)
        if separate and sub_on and not (self.n_swaps and not self.det):
            for src, targets in sources.items():
                self.transfer_subclusters(src, targets, max_load)

    def run(self) -> InformAndTransferResult:
        m = self.m
        out = InformAndTransferResult(m.ranks())
        max_load = max(m.load(r) for r in range(m.p))
        for _ in range(self.prm["n_iterations"]):
            known = self.inform()
            if m.p > 1:
                out.knowledge.append(sum((len(v) - 1) / (m.p - 1) for v in known.values()) / m.p)
            if self.prm["transfer_strategy"] == "recursive":
                self.recursive_stage(known)
            else:
                self.transfer_stage(known, max_load)
            loads = [m.load(r) for r in m.rank_set]
            top, mean = _stats(loads)
            imb = top / mean - 1.0 if mean > 0.0 else math.nan
            out.imbalance.append(imb)
            out.max_work.append(max(m.work(r) for r in m.rank_set))
            max_load = top
            if imb <= self.prm["target_imbalance"]:
                break
        out.ranks = m.ranks()
        out.transfers, out.swaps, out.subcluster_transfers = self.transfers, self.n_swaps, self.n_sub
        return out


def inform_and_transfer(ph, params: dict[str, Any] | None = None, *,
                        memory_limit: float | None = None) -> InformAndTransferResult:
    """LBAF's InformAndTransfer on one phase (module docstring): the new rank of every task of ``ph``.

    Parameters
    ----------
    ph : TracePhase
        The phase; ``ph.listing`` (the order of the tasks in their rank's file) makes the sets iterate as LBAF's.
    params : dict, optional
        :class:`InformAndTransferParams` fields (checked here; defaults otherwise).
    memory_limit : float, optional
        Bytes: a rank whose memory exceeds it has infinite work (no limit when None).

    Returns
    -------
    InformAndTransferResult

    Raises
    ------
    BalancerError
        Bad parameters, or a deterministic subclustering that would enumerate more than :data:`MAX_SUBSETS`
        subsets (one line).

    Examples
    --------
    >>> import numpy as np
    >>> from hermes.trace.trace_phase import TracePhase
    >>> ph = TracePhase(2, np.arange(4), np.array([3.0, 3.0, 1.0, 1.0]), np.array([0, 0, 0, 1]), np.zeros(4, int),
    ...                 np.ones(4, bool), user={"shared_id": np.array([0.0, 1.0, 2.0, 3.0])})
    >>> res = inform_and_transfer(ph, {"n_iterations": 2, "fanout": 1, "deterministic_transfer": True})
    >>> np.bincount(res.ranks, weights=ph.loads, minlength=2).tolist()
    [4.0, 4.0]
    """
    from hermes.balance.registry import get_balancer

    prm = get_balancer("informandtransfer").check(params or {}, prefix="informandtransfer.")
    if ph.n_tasks == 0 or ph.n_ranks < 2:
        return InformAndTransferResult(ph.ranks.copy())
    return _InformAndTransfer(ph, prm, memory_limit).run()


@register("informandtransfer", params=InformAndTransferParams,
          doc="LBAF's InformAndTransfer: gossip, then Clustering swaps/subclusters or Recursive transfers "
              "under the Tempered or StrictLocalizing criterion (hermes trace replay only; LBAF's parameters, "
              "seed 146)",
          replay_only=True)
def informandtransfer_run(ctx: BalanceContext) -> Decision:
    """Not a balancer of a running mesh: LBAF's algorithm moves a trace's tasks (``hermes trace replay``)."""
    raise BalancerError("informandtransfer balances a trace's tasks: run it with hermes trace replay --algorithms "
                        "informandtransfer, not in a mesh scenario")
