"""Grapevine's serial reference and the kernels it shares with the distributed form.

The algorithm (inform + transfer stages, criteria 6 and 6', stopping rule), its random streams and
the deviations from the seed text are described in :mod:`hermes.balance.gossip`, which holds the
distributed form and the registry entry and re-exports every public name here.
:func:`grapevine_iter` runs all ranks at once on arrays: the ranks a rank knows are a bitset (one row
of ⌈p/64⌉ uint64 words per rank), a gossip round is a synchronous merge of rows, and in the transfer
stage the overloaded ranks propose in lockstep. It is the oracle of the MPI tests (same seed ⇒ same
assignment as :func:`~hermes.balance.gossip.grapevine_distributed`) and the engine of the offline lab
``hermes gossip`` (:mod:`hermes.lab.gossip`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.balance.flow import ordered_total
from hermes.comm import Counters
from hermes.errors import BalancerError

__all__ = ["CRITERIA", "GossipState", "GossipResult", "grapevine_iter", "grapevine"]

CRITERIA = ("original", "modified")
#: bytes of one entry of a gossip message (rank id, load, speed) or of a moved object (id, load, home)
ENTRY_BYTES = 24
#: floats every rank contributes to the per-iteration allgather (L_i, s_i, transfers, rejected, ignored, error)
GATHER_WORDS = 6
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
    """Grapevine on the whole system, one state per iteration (see :mod:`hermes.balance.gossip`).

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
