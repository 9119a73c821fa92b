"""Grapevine gossip balancing of objects (inform + transfer): serial reference and distributed form.

Grapevine (Menon & Kalé, SC'13) as analysed by Pébaÿ & Lifflander, *Some Results About Distributed
Load Balancing*, Sandia report 2019 (seed 004, ch. 2–4). Objects with loads ℓ live on ranks; rank i
carries ``L_i = Σ ℓ`` and has relative speed ``s_i`` (1 by default); its relative load is
``x_i = L_i / s_i`` and the fair value ``x̄ = Σ L / Σ s`` (``L_ave`` of the report when ``s ≡ 1``).
Each of at most ``iterations`` outer iterations has two stages.

**Inform** (the report leaves the protocol implicit; this is its NodeGossiper/LBAF runtime, see
ALGORITHMS.md). Round 1: every underloaded rank (``x_i < x̄``) sends (itself, its load, its speed)
to ``fanout`` distinct ranks drawn uniformly among the others. Rounds 2..k: every rank that received
a message in the previous round forwards all it knows to ``fanout`` distinct ranks drawn uniformly
among those it does not know yet (neither itself nor a known underloaded rank). Knowledge merges by
union; a round's messages are snapshots. ``rounds = k`` counts the first push.

**Transfer** (report Alg. 2 lines 4–6, §2.1). Every overloaded rank (``x_i > T x̄``) that knows an
underloaded rank proposes its objects in ascending id order, one proposal each, while it is still
overloaded. The destination X is drawn among the known underloaded ranks with probability
∝ ``1 − x_X / x̄`` (cumulative distribution fixed for the stage, Grapevine's Alg. 2); it accepts if

    criterion 6 (``original``):  (L̂_X + ℓ) / s_X < x̄
    criterion 6' (``modified``): (L̂_X + ℓ) / s_X < L_i / s_i

with L̂_X what the source knows of X (gossiped load plus its own accepted transfers to X) and L_i
the source's current load. With ``s ≡ 1`` these are the report's lines 6 and 6' literally. For
heterogeneous processors hermes compares L/s (relative loads): Lemma 1 carries over, since
``max((L_i − ℓ)/s_i, (L_X + ℓ)/s_X) < L_i/s_i ⟺ (L_X + ℓ)/s_X < L_i/s_i``.

**Stopping**: before each iteration, stop when ``F(D) = max_i x_i / x̄ − T ≤ 0``. Imbalance
``I = max x / x̄ − 1``; at the iso-load optimum ``I* = (|P| − r)/|O|`` with ``r = |O| mod |P| ≠ 0``
(report §3.2.1; 0 when r = 0).

Randomness: rank r draws from ``default_rng(SeedSequence(seed).spawn(p)[r])``, at the start of every
iteration one block of ``rounds·fanout + n_r`` uniforms (n_r: its objects then) — ``fanout`` per
gossip round, then one per transfer proposal. :func:`grapevine` draws the same blocks rank by rank,
so the serial and distributed forms give the same assignment bit for bit.

Seed text fixed / deviations
----------------------------
* §2.1.1 prints the stopping criterion as "F(D) ≥ 0" and "L_max ≤ T L_ave ⟺ I_D < T − 1"; the loop
  ``while L_i > T L_ave`` ends when ``F(D) = L_max / L_ave − T ≤ 0``, i.e. ``I_D ≤ T − 1``.
* Lemma 2 says "transferred from p_X to p_i": the object moves from p_i to p_X.
* The NodeGossiper rescans a rank's objects after every accepted transfer and lets ranks act one
  after the other on live loads (an object may move twice per stage: the report counts more
  transfers than objects). hermes proposes each object at most once per stage and uses what a
  distributed rank can know (stage-start loads plus its own transfers), so its transfer and
  rejection counts are not those of the report's tables; the imbalance trends are.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.balance.flow import ordered_total
from hermes.balance.registry import BalanceContext, BalancerInfo, Decision
from hermes.comm import Counters, gather_error
from hermes.errors import BalancerError

__all__ = ["CRITERIA", "GossipState", "GossipResult", "LocalGossipResult", "grapevine_iter",
           "grapevine", "grapevine_distributed", "REGISTRY"]

CRITERIA = ("original", "modified")
#: bytes of one entry of a gossip message (rank id, load, speed) or of a moved object (id, load, home)
ENTRY_BYTES = 24
#: floats every rank contributes to the per-iteration allgather (L_i, s_i, transfers, rejected, ignored, error)
GATHER_WORDS = 6
_TAG = 311
_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)
_ONE = np.uint64(1)
#: _SELECT[v, k]: position of the k-th set bit of the byte v (−1 if v has fewer)
_SELECT = np.array([[([b for b in range(8) if v >> b & 1] + [-1] * 8)[k] for k in range(8)] for v in range(256)],
                   dtype=np.int64)


# -- bitsets of known ranks (one row of ⌈p/64⌉ uint64 words per rank) --------------------------
def _popcount(words: NDArray[np.uint64]) -> NDArray[np.int64]:
    w = np.ascontiguousarray(words, dtype=np.uint64)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(w).astype(np.int64)
    return _POP8[w.view(np.uint8)].reshape(w.shape + (8,)).sum(axis=-1)


def _bitrows(ids: NDArray[np.int64], nwords: int) -> NDArray[np.uint64]:
    """One row per id with only that id's bit set."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((ids.size, nwords), dtype=np.uint64)
    out[np.arange(ids.size), ids >> 6] = _ONE << (ids & 63).astype(np.uint64)
    return out


def _pad_row(p: int, nwords: int) -> NDArray[np.uint64]:
    """Bits p .. 64·nwords − 1 set (never a peer)."""
    bits = np.zeros(64 * nwords, dtype=np.uint8)
    bits[p:] = 1
    return np.packbits(bits, bitorder="little").view("<u8").astype(np.uint64)


def _members(rows: NDArray[np.uint64], p: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(row, id) of every set bit, row-major with ascending ids."""
    raw = np.ascontiguousarray(rows, dtype="<u8").view(np.uint8).reshape(len(rows), -1)
    flat = np.flatnonzero(np.unpackbits(raw, axis=1, count=p, bitorder="little"))
    return flat // p, flat % p


def _pick_targets(excl: NDArray[np.uint64], u: NDArray[np.float64], p: int) -> NDArray[np.int64]:
    """Per row, ``min(f, m)`` distinct ids among the m clear bits of ``excl``, from f uniforms (−1: none).

    Pick j takes index ``⌊u_j (m − j)⌋`` among the ids not picked yet (sequential sampling without
    replacement), mapped to the clear bits in ascending order.
    """
    n, f = u.shape
    out = np.full((n, f), -1, dtype=np.int64)
    if n == 0:
        return out
    zeros = 64 - _popcount(excl)
    m = zeros.sum(axis=1)
    idx = np.zeros((n, f), dtype=np.int64)
    for j in range(f):
        span = np.maximum(m - j, 1)
        a = np.minimum((u[:, j] * span).astype(np.int64), span - 1)
        prev = np.sort(idx[:, :j], axis=1)
        for c in range(j):  # skip the earlier picks, in ascending order
            a += a >= prev[:, c]
        idx[:, j] = a
    r, j = np.nonzero(np.arange(f)[None, :] < m[:, None])
    a = idx[r, j]
    cz = np.cumsum(zeros, axis=1)
    nwords = excl.shape[1]
    key = (cz + (np.arange(n, dtype=np.int64) * (p + 1))[:, None]).ravel()
    w = np.searchsorted(key, r * (p + 1) + a, side="right") - r * nwords
    k = a - (cz[r, w] - zeros[r, w])  # rank of the wanted clear bit inside word w
    octets = np.ascontiguousarray(~excl[r, w], dtype="<u8").view(np.uint8).reshape(-1, 8)
    pc = _POP8[octets]
    cpc = np.cumsum(pc, axis=1)
    byte = np.argmax(cpc > k[:, None], axis=1)
    rows = np.arange(byte.size)
    kb = k - (cpc[rows, byte] - pc[rows, byte])
    out[r, j] = 64 * w + 8 * byte + _SELECT[octets[rows, byte], kb]
    return out


def _merge(known: NDArray[np.uint64], src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.uint64]:
    """Synchronous round: ``known'[t] = known[t] | OR of known[s] over the messages s → t``."""
    new = known.copy()
    o = np.argsort(dst, kind="stable")
    src, dst = src[o], dst[o]
    nth = np.arange(dst.size) - np.searchsorted(dst, dst)  # position of each message among its receiver's
    for k in range(int(nth.max()) + 1 if dst.size else 0):  # receivers are distinct within a layer
        sel = nth == k
        new[dst[sel]] |= known[src[sel]]
    return new


# -- the transfer stage (shared by both forms) --------------------------------------------------
def _sample_slots(weights: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.int64]:
    """Inverse-CDF draws: index k with probability ∝ ``weights[k]`` for each uniform."""
    c = np.cumsum(weights)
    return np.minimum(np.searchsorted(c, u * c[-1], side="right"), weights.size - 1).astype(np.int64)


def _scan(load, slot, starts, counts, l_src, s_src, l_hat, s_known, x_ave, threshold, modified):
    """Sources propose in lockstep (proposal t of every still-overloaded source at step t).

    ``l_hat`` (the sources' views of their known ranks, indexed by ``slot``) is updated in place.
    Returns the accepted mask over the proposals, and the numbers of transfers and rejections.
    """
    lsrc = np.array(l_src, dtype=np.float64)
    limit = threshold * x_ave
    acc = np.zeros(load.size, dtype=bool)
    active = np.flatnonzero((counts > 0) & (lsrc / s_src > limit))
    t = transfers = rejected = 0
    while active.size:
        k = starts[active] + t
        ell, sl = load[k], slot[k]
        ok = (l_hat[sl] + ell) / s_known[sl] < (lsrc[active] / s_src[active] if modified else x_ave)
        acc[k[ok]] = True
        l_hat[sl[ok]] += ell[ok]
        lsrc[active[ok]] -= ell[ok]
        n_ok = int(np.count_nonzero(ok))
        transfers, rejected = transfers + n_ok, rejected + ok.size - n_ok
        t += 1
        active = active[(t < counts[active]) & (lsrc[active] / s_src[active] > limit)]
    return acc, transfers, rejected


def _stats(loads: NDArray[np.float64], speeds: NDArray[np.float64], x_ave: float) -> dict[str, float]:
    x = loads / speeds
    return {"imbalance": float(x.max() / x_ave - 1.0) if x_ave > 0 else 0.0, "min": float(x.min()),
            "max": float(x.max()), "sigma": float(x.std())}


def _record(it: int, transfers: int, rejected: int, ignored: int, stats: dict[str, float]) -> dict[str, Any]:
    proposed = transfers + rejected
    return {"iteration": it, "transfers": int(transfers), "rejected": int(rejected),
            "rejection_rate": rejected / proposed if proposed else 0.0, "ignored": int(ignored), **stats}


def _settled(loads, speeds, x_ave: float, threshold: float) -> bool:
    """``F(D) ≤ 0``: no rank above ``T x̄``."""
    return bool(np.max(loads / speeds) <= threshold * x_ave)


def _check_params(iterations, rounds, fanout, threshold, criterion, seed, prefix: str = "") -> None:
    def positive_int(name, v, low):
        if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= low):
            raise BalancerError(f"{prefix}{name}: must be an integer ≥ {low}, got {v!r}")

    positive_int("iterations", iterations, 0)
    positive_int("rounds", rounds, 1)
    positive_int("fanout", fanout, 1)
    if not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and math.isfinite(threshold)
            and threshold >= 1.0):
        raise BalancerError(f"{prefix}threshold: must be a number ≥ 1, got {threshold!r}")
    if criterion not in CRITERIA:
        raise BalancerError(f"{prefix}criterion: must be 'original' (6) or 'modified' (6'), got {criterion!r}")
    words = seed if isinstance(seed, (list, tuple)) else [seed]
    if not words or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in words):
        raise BalancerError(f"{prefix}seed: must be a non-negative integer, got {seed!r}")


def _check_objects(loads, owner, p: int, speeds) -> tuple[NDArray, NDArray, NDArray]:
    if not (isinstance(p, (int, np.integer)) and p >= 1):
        raise BalancerError(f"n_ranks must be a positive integer, got {p!r}")
    ell = np.asarray(loads, dtype=np.float64).ravel()
    own = np.asarray(owner).ravel()
    if own.shape != ell.shape:
        raise BalancerError(f"{own.size} object ranks for {ell.size} object loads")
    if np.any(~np.isfinite(ell)) or np.any(ell < 0):
        raise BalancerError("object loads must be finite and non-negative")
    if own.size and (not np.issubdtype(own.dtype, np.integer) or own.min() < 0 or own.max() >= p):
        raise BalancerError(f"object ranks must be integers in 0..{p - 1}")
    s = np.ones(p) if speeds is None else np.asarray(speeds, dtype=np.float64).ravel()
    if s.shape != (p,) or np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise BalancerError(f"speeds must be {p} positive numbers")
    return ell, own.astype(np.int64), s


# -- serial reference ---------------------------------------------------------------------------
@dataclass
class GossipState:
    """One iteration of :func:`grapevine_iter` (iteration 0: the initial state).

    ``counters`` is cumulative: what the distributed form has counted so far, before its final
    return exchange.
    """

    iteration: int
    object_rank: NDArray[np.int64]
    loads: NDArray[np.float64]
    average: float
    record: dict[str, Any]
    settled: bool
    counters: Counters


@dataclass
class GossipResult:
    """Outcome of :func:`grapevine`: final ``object_rank``, per-iteration ``history`` (dicts with
    iteration, transfers, rejected, rejection_rate, ignored, imbalance, min, max, sigma of L/s)."""

    object_rank: NDArray[np.int64]
    history: list[dict[str, Any]]
    iterations: int
    converged: bool
    counters: Counters
    average: float
    extra: dict[str, Any] = field(default_factory=dict)


def grapevine_iter(object_loads: ArrayLike, object_rank: ArrayLike, n_ranks: int, *, iterations: int = 4,
                   rounds: int = 4, fanout: int = 4, threshold: float = 1.0, criterion: str = "modified",
                   seed: int | Sequence[int] = 0, speeds: ArrayLike | None = None) -> Iterator[GossipState]:
    """Grapevine on the whole system, one state per iteration (see the module docstring).

    Parameters
    ----------
    object_loads : array of float, shape (n,)
        ℓ ≥ 0 of objects 0..n−1 (the index is the object id: proposals go in index order).
    object_rank : array of int, shape (n,)
        Initial rank of every object (its home).
    n_ranks : int
    iterations, rounds, fanout : int
        i (outer iterations, ≥ 0), k (gossip rounds, ≥ 1), f (fanout, ≥ 1).
    threshold : float
        T ≥ 1: a rank is overloaded when ``x_i > T x̄``.
    criterion : {"original", "modified"}
        Report criterion 6 or 6' (§2.1).
    seed : int or sequence of int
        Entropy of ``SeedSequence``; rank r uses child r of ``spawn(n_ranks)``.
    speeds : array of float, shape (n_ranks,), optional
        Relative processor speeds s (capacities up to a factor); default 1.

    Yields
    ------
    GossipState

    Raises
    ------
    BalancerError
        On bad parameters or inputs.

    Notes
    -----
    Counters are the distributed form's: per iteration one allgather (48 bytes per rank; plus one
    at the start) and ``rounds + 1`` sparse exchanges, each an alltoall of counts (8p bytes per rank)
    plus one message per (sender, receiver) pair: gossip ``24·|known|`` bytes, transfers ``24`` bytes
    per object. Messages and bytes are summed over ranks; rounds and collectives are per rank.
    """
    _check_params(iterations, rounds, fanout, threshold, criterion, seed)
    ell, owner, s = _check_objects(object_loads, object_rank, n_ranks, speeds)
    p, n, f, modified = int(n_ranks), ell.size, int(fanout), criterion == "modified"
    rngs = [np.random.default_rng(c) for c in np.random.SeedSequence(seed).spawn(p)]
    nwords = (p + 63) // 64
    pad = _pad_row(p, nwords)
    cnt = Counters()

    def exchange_phase(pairs: int, payload: int) -> None:
        cnt.exchange_rounds += 1
        cnt.count_collective("alltoall")
        cnt.messages += pairs
        cnt.bytes += 8 * p * p + payload

    def gather_phase() -> None:
        cnt.count_collective("allgather")
        cnt.bytes += 8 * GATHER_WORDS * p

    loads = np.bincount(owner, weights=ell, minlength=p)
    x_ave = ordered_total(loads) / ordered_total(s)
    gather_phase()
    settled = _settled(loads, s, x_ave, threshold)
    yield GossipState(0, owner.copy(), loads, x_ave, _record(0, 0, 0, 0, _stats(loads, s, x_ave)), settled, cnt)
    for it in range(1, iterations + 1):
        if settled:
            return
        cnt.iterations += 1
        order = np.argsort(owner, kind="stable")
        nper = np.bincount(owner, minlength=p)
        starts = np.concatenate(([0], np.cumsum(nper)[:-1]))
        gossip_u, prop_u = np.empty((p, rounds * f)), np.empty(n)
        for r in range(p):  # each rank's own stream, as in the distributed form
            block = rngs[r].random(rounds * f + nper[r])
            gossip_u[r] = block[: rounds * f]
            prop_u[starts[r]: starts[r] + nper[r]] = block[rounds * f:]
        # inform stage
        x = loads / s
        under = np.flatnonzero(x < x_ave)
        known = np.zeros((p, nwords), dtype=np.uint64)
        known[under] = _bitrows(under, nwords)
        senders = under
        for rd in range(rounds):
            excl = known[senders] | _bitrows(senders, nwords) | pad
            targets = _pick_targets(excl, gossip_u[senders, rd * f: (rd + 1) * f], p)
            row, col = np.nonzero(targets >= 0)
            src, dst = senders[row], targets[row, col]
            sizes = _popcount(known[senders]).sum(axis=1)
            exchange_phase(dst.size, ENTRY_BYTES * int(sizes[row].sum()))
            known = _merge(known, src, dst)
            senders = np.unique(dst)
        # transfer stage
        over = np.flatnonzero(x > threshold * x_ave)
        krow, kid = _members(known[over], p)
        kptr = np.concatenate(([0], np.cumsum(np.bincount(krow, minlength=over.size))))
        weights = 1.0 - (loads[kid] / s[kid]) / x_ave
        has = np.flatnonzero(kptr[1:] > kptr[:-1])
        srcs = over[has]
        objs = [order[starts[r]: starts[r] + nper[r]] for r in srcs]
        slots = [kptr[j] + _sample_slots(weights[kptr[j]: kptr[j + 1]], prop_u[starts[r]: starts[r] + nper[r]])
                 for j, r in zip(has, srcs)]
        prop = np.concatenate(objs) if objs else np.zeros(0, np.int64)
        slot = np.concatenate(slots) if slots else np.zeros(0, np.int64)
        counts = nper[srcs]
        acc, ntr, nrej = _scan(ell[prop], slot, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64),
                               counts, loads[srcs], s[srcs], loads[kid], s[kid], x_ave, threshold, modified)
        dest = kid[slot[acc]]
        pairs = np.unique(np.repeat(srcs, counts)[acc] * p + dest).size
        owner[prop[acc]] = dest
        exchange_phase(pairs, ENTRY_BYTES * ntr)
        loads = np.bincount(owner, weights=ell, minlength=p)
        gather_phase()
        settled = _settled(loads, s, x_ave, threshold)
        rec = _record(it, ntr, nrej, over.size - has.size, _stats(loads, s, x_ave))
        yield GossipState(it, owner.copy(), loads, x_ave, rec, settled, cnt)


def grapevine(object_loads: ArrayLike, object_rank: ArrayLike, n_ranks: int, **kwargs) -> GossipResult:
    """Run :func:`grapevine_iter` to the end; add the final return exchange to the counters.

    The distributed form ends by telling every object's home rank where the object went: one
    sparse exchange with a message per (holder, home) pair and 8 bytes per moved object.
    """
    home = np.asarray(object_rank).ravel()
    states = list(grapevine_iter(object_loads, object_rank, n_ranks, **kwargs))
    last = states[-1]
    cnt = last.counters
    away = last.object_rank != home
    cnt.exchange_rounds += 1
    cnt.count_collective("alltoall")
    cnt.messages += np.unique(last.object_rank[away] * n_ranks + home[away]).size
    cnt.bytes += 8 * n_ranks * n_ranks + 8 * int(away.sum())
    return GossipResult(last.object_rank, [st.record for st in states], cnt.iterations, last.settled, cnt,
                        last.average)


# -- distributed form ---------------------------------------------------------------------------
@dataclass
class LocalGossipResult:
    """One rank's outcome of :func:`grapevine_distributed`.

    ``dest[k]`` is the final rank of the k-th input object; ``history`` (global, identical on every
    rank) is :attr:`GossipResult.history`; ``counters`` are this rank's.
    """

    dest: NDArray[np.int64]
    history: list[dict[str, Any]]
    iterations: int
    converged: bool
    counters: Counters


def _sparse_exchange(comm, clock, cnt: Counters, out: dict[int, NDArray[np.float64]]) -> dict[int, NDArray]:
    """Send ``out[d]`` to rank d, receive from whoever sends (collective): alltoall of counts, then
    point-to-point messages carrying the virtual send time. Charges ``clock`` and counts."""
    from mpi4py import MPI

    me, p = comm.Get_rank(), comm.Get_size()
    out = {int(d): np.asarray(a, dtype=np.float64).ravel() for d, a in out.items() if np.size(a)}
    head = np.zeros((p, 2))
    head[:, 0] = clock.stamp() if clock is not None else 0.0
    for d, a in out.items():
        head[d, 1] = a.size
    rhead = np.empty_like(head)
    t0 = clock.now if clock is not None else 0.0
    if clock is not None:
        with clock.measure("sync"):
            comm.Alltoall(head, rhead)
        clock.synchronised(rhead[:, 0], clock.links.collective_cost(p, 8.0 * p))
    else:
        comm.Alltoall(head, rhead)
    cnt.count_collective("alltoall")
    stamp = clock.stamp() if clock is not None else 0.0
    bufs = {int(r): np.empty(int(rhead[r, 1]) + 1) for r in np.flatnonzero(rhead[:, 1] > 0)}
    sends = {d: np.concatenate(([stamp], a)) for d, a in out.items()}
    reqs = [comm.Irecv(b, source=r, tag=_TAG) for r, b in bufs.items()]
    reqs += [comm.Isend(b, dest=d, tag=_TAG) for d, b in sends.items()]
    if clock is not None:
        with clock.measure("comm"):
            MPI.Request.Waitall(reqs)
        links = clock.links
        clock.exchanged(np.array([links.cost(me, d, 8.0 * a.size) for d, a in out.items()]),
                        np.array([b[0] + links.cost(r, me, 8.0 * (b.size - 1)) for r, b in bufs.items()]))
        cnt.time += clock.now - t0 if clock.kind == "virtual" else 0.0
    else:
        MPI.Request.Waitall(reqs)
    cnt.exchange_rounds += 1
    cnt.messages += len(out)
    cnt.bytes += 8 * p + sum(8 * a.size for a in out.values())
    return {r: b[1:] for r, b in bufs.items()}


def _allgather(comm, clock, cnt: Counters, values: list[float]) -> NDArray[np.float64]:
    p = comm.Get_size()
    send = np.array([clock.stamp() if clock is not None else 0.0, *values], dtype=np.float64)
    recv = np.empty((p, send.size))
    if clock is not None:
        t0 = clock.now
        with clock.measure("sync"):
            comm.Allgather(send, recv)
        clock.synchronised(recv[:, 0], clock.links.collective_cost(p, 8.0 * len(values)))
        cnt.time += clock.now - t0 if clock.kind == "virtual" else 0.0
    else:
        comm.Allgather(send, recv)
    cnt.count_collective("allgather")
    cnt.bytes += 8 * len(values)
    return recv[:, 1:]


def _local_load(ell: NDArray[np.float64]) -> float:
    """Σ ℓ in id order, accumulated as ``np.bincount`` does in the serial form (bit for bit)."""
    return float(np.bincount(np.zeros(ell.size, dtype=np.intp), weights=ell, minlength=1)[0])


def grapevine_distributed(comm, gid: ArrayLike, loads: ArrayLike, *, speed: float = 1.0, clock=None,
                          counters: Counters | None = None, iterations: int = 4, rounds: int = 4, fanout: int = 4,
                          threshold: float = 1.0, criterion: str = "modified",
                          seed: int | Sequence[int] = 0) -> LocalGossipResult:
    """Grapevine with real MPI messages between random peers (SPMD; every rank of ``comm`` calls it).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    gid : array of int
        Global ids of this rank's objects (unique over all ranks; proposals go in id order).
    loads : array of float
        Their loads ℓ ≥ 0.
    speed : float
        This rank's relative speed s_i > 0 (hermes run: ``p · c_i``).
    clock : VirtualClock or WallClock, optional
        Charged for every collective and message.
    counters : Counters, optional
        Updated in place (a fresh one by default).
    iterations, rounds, fanout, threshold, criterion, seed
        As in :func:`grapevine_iter`.

    Returns
    -------
    LocalGossipResult

    Raises
    ------
    BalancerError
        On every rank, if the parameters or any rank's objects are invalid.

    Notes
    -----
    Gossip goes to random peers anywhere in ``comm`` (not to subdomain neighbours), as sparse
    exchanges: an ``Alltoall`` of message sizes, then ``Isend``/``Irecv`` to the peers. Messages carry
    (rank, load, speed) per known rank; transfers carry (id, load, home) per object; a final exchange
    tells each home rank where its objects went. One ``Allgather`` per iteration (and one at the start)
    gives every rank L, s and the transfer counts: the ``F(D) ≤ 0`` test and the history. Same seed
    ⇒ same final assignment as :func:`grapevine` with objects numbered by ``gid``.
    """
    _check_params(iterations, rounds, fanout, threshold, criterion, seed)
    me, p = comm.Get_rank(), comm.Get_size()
    cnt = counters if counters is not None else Counters()
    f, modified = int(fanout), criterion == "modified"
    gid_in = np.asarray(gid).ravel()
    error = None
    try:
        ell_in = np.asarray(loads, dtype=np.float64).ravel()
        if gid_in.shape != ell_in.shape or (gid_in.size and not np.issubdtype(gid_in.dtype, np.integer)):
            raise BalancerError(f"rank {me}: {gid_in.size} object ids for {ell_in.size} loads")
        if np.any(~np.isfinite(ell_in)) or np.any(ell_in < 0):
            raise BalancerError(f"rank {me}: object loads must be finite and non-negative")
        if not (math.isfinite(speed) and speed > 0):
            raise BalancerError(f"rank {me}: speed must be positive, got {speed}")
    except (BalancerError, TypeError, ValueError) as err:
        error, ell_in = str(err), np.zeros(gid_in.size)
    order = np.argsort(gid_in, kind="stable")
    gid0 = gid_in[order].astype(np.int64)
    gid, ell, home = gid0.copy(), ell_in[order], np.full(gid0.size, me, dtype=np.int64)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[me])
    nwords = (p + 63) // 64
    pad, selfrow = _pad_row(p, nwords), _bitrows(np.array([me]), nwords)
    load = _local_load(ell)
    rows = _allgather(comm, clock, cnt, [load, float(speed), 0.0, 0.0, 0.0, float(error is not None)])
    if rows[:, 5].any():
        raise BalancerError(gather_error(comm, error) or "invalid gossip input on another rank")
    s = rows[:, 1].copy()
    x_ave = ordered_total(rows[:, 0]) / ordered_total(s)
    history = [_record(0, 0, 0, 0, _stats(rows[:, 0], s, x_ave))]
    settled = _settled(rows[:, 0], s, x_ave, threshold)
    done = 0
    for it in range(1, iterations + 1):
        if settled:
            break
        done = it
        block = rng.random(rounds * f + ell.size)
        known = np.zeros((1, nwords), dtype=np.uint64)
        lk, sk = np.zeros(p), np.ones(p)
        sending = load / speed < x_ave
        if sending:
            known |= selfrow
            lk[me], sk[me] = load, speed
        for rd in range(rounds):  # inform stage
            out = {}
            if sending:
                targets = _pick_targets(known | selfrow | pad, block[None, rd * f: (rd + 1) * f], p)[0]
                ids = _members(known, p)[1]
                msg = np.column_stack([ids, lk[ids], sk[ids]]).ravel()
                out = {int(t): msg for t in targets[targets >= 0]}
            got = _sparse_exchange(comm, clock, cnt, out)
            sending = bool(got)
            for tri in got.values():
                tri = tri.reshape(-1, 3)
                ids = tri[:, 0].astype(np.int64)
                np.bitwise_or.at(known[0], ids >> 6, _ONE << (ids & 63).astype(np.uint64))
                lk[ids], sk[ids] = tri[:, 1], tri[:, 2]
        out, ntr, nrej, ignored = {}, 0, 0, 0  # transfer stage
        if load / speed > threshold * x_ave:
            ids = _members(known, p)[1]
            if ids.size == 0:
                ignored = 1
            else:
                weights = 1.0 - (lk[ids] / sk[ids]) / x_ave
                slot = _sample_slots(weights, block[rounds * f:])
                acc, ntr, nrej = _scan(ell, slot, np.zeros(1, np.int64), np.array([ell.size]), [load],
                                       np.array([speed]), lk[ids], sk[ids], x_ave, threshold, modified)
                dest = ids[slot[acc]]
                moved = np.flatnonzero(acc)
                out = {int(d): np.column_stack([gid[moved[dest == d]], ell[moved[dest == d]],
                                                home[moved[dest == d]]]) for d in np.unique(dest)}
                gid, ell, home = gid[~acc], ell[~acc], home[~acc]
        got = _sparse_exchange(comm, clock, cnt, out)
        if got:
            tri = np.concatenate([gid[:, None] * 1.0, ell[:, None], home[:, None] * 1.0], axis=1)
            tri = np.concatenate([tri] + [g.reshape(-1, 3) for g in got.values()])
            tri = tri[np.argsort(tri[:, 0], kind="stable")]
            gid, ell, home = tri[:, 0].astype(np.int64), tri[:, 1].copy(), tri[:, 2].astype(np.int64)
        load = _local_load(ell)
        cnt.iterations += 1
        rows = _allgather(comm, clock, cnt, [load, float(speed), float(ntr), float(nrej), float(ignored), 0.0])
        settled = _settled(rows[:, 0], s, x_ave, threshold)
        history.append(_record(it, int(rows[:, 2].sum()), int(rows[:, 3].sum()), int(rows[:, 4].sum()),
                               _stats(rows[:, 0], s, x_ave)))
    # tell every home rank where its objects are
    away = home != me
    got = _sparse_exchange(comm, clock, cnt, {int(h): gid[away & (home == h)] for h in np.unique(home[away])})
    dest0 = np.full(gid0.size, me, dtype=np.int64)
    for holder, ids in got.items():
        dest0[np.searchsorted(gid0, ids.astype(np.int64))] = holder
    dest = np.empty_like(dest0)
    dest[order] = dest0
    return LocalGossipResult(dest, history, done, settled, cnt)


# -- offline lab (``hermes gossip``) ------------------------------------------------------------
_DEFAULTS = {"iterations": 4, "rounds": 4, "fanout": 4, "threshold": 1.0, "criterion": "modified", "seed": None}


def _check_registry(params: dict[str, Any]) -> None:
    seed = 0 if params["seed"] is None else params["seed"]
    _check_params(params["iterations"], params["rounds"], params["fanout"], params["threshold"], params["criterion"],
                  seed, prefix="balancer.")


def _run(ctx: BalanceContext) -> Decision:
    """Grapevine on the rank's cells (objects = cells, loads = weights, speed = p · c_i).

    The seed is the parameter (default: the scenario seed) mixed with the number of earlier calls in
    this run, so every phase draws fresh streams.
    """
    prm = ctx.params
    calls = ctx.state.get("grapevine_calls", 0)
    ctx.state["grapevine_calls"] = calls + 1
    seed = [int(ctx.seed if prm["seed"] is None else prm["seed"]), calls]
    speed = ctx.model.p * float(ctx.model.capacities[ctx.comm.Get_rank()])
    res = grapevine_distributed(ctx.comm, ctx.dom.gid, ctx.dom.weight, speed=speed, clock=ctx.clock,
                                counters=ctx.nb.counters, iterations=prm["iterations"], rounds=prm["rounds"],
                                fanout=prm["fanout"], threshold=prm["threshold"], criterion=prm["criterion"],
                                seed=seed)
    last = res.history[-1]
    return Decision(dest=res.dest, iterations=res.iterations, converged=res.converged, counters=res.counters,
                    info={"criterion": prm["criterion"], "imbalance": last["imbalance"],
                          "transfers": sum(h["transfers"] for h in res.history)})


REGISTRY: dict[str, BalancerInfo] = {
    "grapevine": BalancerInfo(
        "grapevine", _run, dict(_DEFAULTS),
        "Grapevine gossip (inform + transfer, criterion 6 or 6'; Pébaÿ & Lifflander 2019) on cells, L/c compared",
        serial=None, check=_check_registry),
}
