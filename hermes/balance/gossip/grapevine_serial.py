"""Grapevine's serial reference and the kernels it shares with the distributed form.

The algorithm (inform + transfer stages, criteria 6 and 6', stopping rule), its random streams and
the deviations from the seed text are described in :mod:`hermes.balance.gossip.grapevine`, which holds the
distributed form and the registry entry and re-exports every public name here.
:func:`grapevine_iter` runs all ranks at once: the ranks a rank knows are a bitset (one row of
⌈p/64⌉ uint64 words per rank) and a gossip round is a synchronous merge of rows (vectorised); the
transfer stage is the report's — sources take turns in a fixed random order, each offloading against the
*current* loads of its destinations (:func:`transfer_turn`, the one sequential kernel, shared with the
distributed form). It is the oracle of the MPI tests (same seed ⇒ same assignment, history and
counters as :func:`~hermes.balance.gossip.grapevine.grapevine_distributed`) and the engine of the offline lab
``hermes lab gossip`` (:mod:`hermes.lab.gossip`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, ValidationInfo, field_validator

from hermes.balance.flow import child_stream, ordered_total
from hermes.balance.interface import (BIG, MAX_ITERATIONS, MAX_PROCESSORS, MAX_SEED, Params, Seed, integer_type,
                                      number_type)
from hermes.runtime.comm import Counters
from hermes.errors import BalancerError

__all__ = ["CRITERIA", "SOURCE_LOADS", "MAX_GOSSIP_ITERATIONS", "MAX_GOSSIP_ROUNDS", "GrapevineParams", "GossipState",
           "GossipResult", "TurnRule", "transfer_turn", "gossip_uniforms", "grapevine_iter", "grapevine"]

CRITERIA = ("original", "modified")
#: what L_i is in criterion 6': the source's load when its turn starts (the report's simulator), or
#: its load after its earlier transfers of the turn
SOURCE_LOADS = ("turn", "current")
#: bytes of one entry of a gossip message (rank id, load, speed)
ENTRY_BYTES = 24
#: bytes of one broadcast move (object id, load, home, destination)
MOVE_BYTES = 32
#: floats of a turn's header broadcast (transfers, rejections, ignored)
HEADER_WORDS = 3
#: floats every rank contributes to the per-iteration allgather (L_i, s_i, transfers, rejected, ignored, error)
GATHER_WORDS = 6
#: uniforms a source draws at least at a time in its turn (then as many as it holds objects)
CHUNK = 16
#: outer iterations: each is a whole inform + transfer stage (``rounds`` all-to-alls, up to p broadcasts) and
#: leaves a history record; the report's experiments run at most 100
MAX_GOSSIP_ITERATIONS = 10_000
#: gossip rounds in all (iterations × rounds): each is an all-to-all of message counts over every rank
MAX_GOSSIP_ROUNDS = MAX_ITERATIONS
_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)
ONE_BIT = np.uint64(1)
#: _SELECT[v, k]: position of the k-th set bit of the byte v (−1 if v has fewer)
_SELECT = np.array([[([b for b in range(8) if v >> b & 1] + [-1] * 8)[k] for k in range(8)] for v in range(256)],
                   dtype=np.int64)


# -- bitsets of known ranks (one row of ⌈p/64⌉ uint64 words per rank) --------------------------
def _popcount(words: NDArray[np.uint64]) -> NDArray[np.int64]:
    w = np.ascontiguousarray(words, dtype=np.uint64)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(w).astype(np.int64)
    return _POP8[w.view(np.uint8)].reshape(w.shape + (8,)).sum(axis=-1)


def bitrows(ids: NDArray[np.int64], nwords: int) -> NDArray[np.uint64]:
    """One row per id with only that id's bit set."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((ids.size, nwords), dtype=np.uint64)
    out[np.arange(ids.size), ids >> 6] = ONE_BIT << (ids & 63).astype(np.uint64)
    return out


def pad_row(p: int, nwords: int) -> NDArray[np.uint64]:
    """Bits p .. 64·nwords − 1 set (never a peer)."""
    bits = np.zeros(64 * nwords, dtype=np.uint8)
    bits[p:] = 1
    return np.packbits(bits, bitorder="little").view("<u8").astype(np.uint64)


def bit_members(rows: NDArray[np.uint64], p: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(row, id) of every set bit, row-major with ascending ids."""
    raw = np.ascontiguousarray(rows, dtype="<u8").view(np.uint8).reshape(len(rows), -1)
    flat = np.flatnonzero(np.unpackbits(raw, axis=1, count=p, bitorder="little"))
    return flat // p, flat % p


def pick_targets(excl: NDArray[np.uint64], u: NDArray[np.float64], p: int) -> NDArray[np.int64]:
    """Per row, ``min(f, m)`` distinct ids among the m clear bits of ``excl``, from f uniforms (−1: none).

    Pick j takes index ``⌊u_j (m − j)⌋`` among the ids not picked yet (sequential sampling without
    replacement), mapped to the clear bits in ascending order.

    The a-th index not picked yet is ``a + #{c : s_c − c ≤ a}``, with ``s_0 < s_1 < …`` the earlier picks in
    ascending order (``s_c − c``, the unpicked indices below ``s_c``, never decreases, so the earlier picks
    skipped are a prefix); the rows keep ``s_c − c`` sorted, and a pick costs O(n·j), not a loop over j.
    """
    n, f = u.shape
    out = np.full((n, f), -1, dtype=np.int64)
    if n == 0:
        return out
    zeros = 64 - _popcount(excl)
    m = zeros.sum(axis=1)
    idx = np.zeros((n, f), dtype=np.int64)
    below = np.zeros((n, f), dtype=np.int64)  # s_c − c of the picks so far (only picks j < m are kept)
    rows = np.arange(n)
    for j in range(f):
        span = np.maximum(m - j, 1)
        a = np.minimum((u[:, j] * span).astype(np.int64), span - 1)
        k = np.count_nonzero(below[:, :j] <= a[:, None], axis=1)  # the earlier picks skipped, at positions < k
        idx[:, j] = a + k
        # the pick goes in at position k (s − c = a); the later ones move up one place (s − c one less)
        np.copyto(below[:, 1:j + 1], below[:, :j] - 1, where=np.arange(1, j + 1)[None, :] > k[:, None])
        below[rows, k] = a
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


def gossip_uniforms(rng: np.random.Generator, fanout: int, used: int) -> NDArray[np.float64]:
    """The first ``used`` of the ``fanout`` uniforms a rank draws for one gossip round; the generator ends where
    ``rng.random(fanout)`` would leave it.

    Only ``used = min(fanout, p − 1)`` of them can pick a target (a rank has p − 1 peers, :func:`pick_targets`
    stops at the ranks available): those are drawn and the generator is advanced past the others (one 64-bit
    step per double), so a fanout beyond p − 1 costs neither memory nor time and gives the results of the full
    draw.
    """
    u = rng.random(used)
    if fanout > used:
        rng.bit_generator.advance(fanout - used)
    return u


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
def row_bits(row: NDArray[np.uint64], p: int) -> NDArray[np.uint8]:
    """The bits 0..p−1 of one bitset row as 0/1 bytes."""
    return np.unpackbits(np.ascontiguousarray(row, dtype="<u8").view(np.uint8), count=p, bitorder="little")


def transfer_cmf(weights: NDArray[np.float64], bits: NDArray[np.uint8], src: int) -> NDArray[np.float64]:
    """Cumulative CMF weights over ranks 0..p−1: ``weights`` where ``bits`` is set, except ``src``.

    The report's CMF (§2.1; Grapevine Alg. 2) draws a known underloaded rank X with probability
    ∝ ``1 − x_X / x̄`` (its gossiped load); dense over all ranks (zeros elsewhere), which sums the
    same floats as the list of known ranks would.
    """
    w = weights * bits
    w[src] = 0.0
    return np.cumsum(w)


def _draw(cum: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.int64]:
    """Inverse-CDF draws: the rank k with ``cum[k−1] ≤ u·cum[−1] < cum[k]`` for each uniform."""
    top = np.searchsorted(cum, cum[-1], side="left")  # the last rank of positive weight
    return np.minimum(np.searchsorted(cum, u * cum[-1], side="right"), top).astype(np.int64)


@dataclass(frozen=True)
class TurnRule:
    """How a source decides its transfers (:func:`transfer_turn`), the same for every turn of a run: the
    average load per speed x̄, the overload threshold T, criterion 6′ (``modified``) or 6, 6′'s L_i frozen at the
    turn's start (``frozen``, the report's) or current, and the objects a source keeps whatever its load."""

    x_ave: float
    threshold: float
    modified: bool
    frozen: bool
    keep: int = 0


def transfer_turn(obj_loads: NDArray[np.float64], cum: NDArray[np.float64], live: list[float], speeds: list[float],
                  src: int, rng: np.random.Generator,
                  rule: TurnRule) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """One source's informed transfer (report Alg. 2 lines 4–6 with criterion 6 or 6', §2.1).

    The source scans its objects in the given order; each proposal draws a destination X from the
    CMF ``cum`` (:func:`transfer_cmf`) and is accepted when

        criterion 6:   (L_X + ℓ) / s_X < x̄
        criterion 6':  (L_X + ℓ) / s_X < L_i / s_i

    with L_X the destination's *current* load (``live``) and L_i the source's load at the start of
    the turn (``frozen``) or its current one. After an accepted transfer the scan restarts at the
    first remaining object (the report's simulator), after a rejection it goes on with the next;
    the turn ends when ``L_i / s_i ≤ T x̄``, a scan passes every object without an acceptance, or the
    source holds only ``keep`` objects (a mesh processor keeps a cell: ``keep=1``; the report's ranks may
    empty, ``keep=0``).

    ``live`` is updated in place (destination += ℓ, then source −= ℓ, move by move: the operations
    every rank of the distributed form replays). Uniforms are drawn ``max(CHUNK, n)`` at a time
    (n: objects still held), the destinations of a chunk at once. The scan itself is a Python loop
    over proposals: each decision depends on the loads the previous acceptance changed.

    Returns
    -------
    moved : int array
        Positions (in ``obj_loads``) of the transferred objects, in the order of the transfers.
    dest : int array
        Their destinations.
    rejected : int
        Proposals declined.
    """
    x_ave, threshold, modified, frozen, keep = rule.x_ave, rule.threshold, rule.modified, rule.frozen, rule.keep
    ells = np.asarray(obj_loads, dtype=np.float64).tolist()
    remaining = list(range(len(ells)))
    limit = threshold * x_ave
    s_src = speeds[src]
    lsrc = live[src]
    bound = lsrc / s_src if modified else x_ave
    moved: list[int] = []
    dest: list[int] = []
    rejected = pos = 0
    while lsrc / s_src > limit and pos < len(remaining) and len(remaining) > keep:
        for d in _draw(cum, rng.random(max(CHUNK, len(remaining)))).tolist():
            k = remaining[pos]
            ell = ells[k]
            if (live[d] + ell) / speeds[d] < bound:
                live[d] += ell
                lsrc -= ell
                moved.append(k)
                dest.append(d)
                del remaining[pos]
                pos = 0
                if modified and not frozen:
                    bound = lsrc / s_src
                if lsrc / s_src <= limit or len(remaining) <= keep:
                    break
            else:
                rejected += 1
                pos += 1
                if pos >= len(remaining):
                    break
    live[src] = lsrc
    return np.array(moved, dtype=np.int64), np.array(dest, dtype=np.int64), rejected


def load_stats(loads: NDArray[np.float64], speeds: NDArray[np.float64], x_ave: float) -> dict[str, float]:
    x = loads / speeds
    return {"imbalance": float(x.max() / x_ave - 1.0) if x_ave > 0 else 0.0, "min": float(x.min()),
            "max": float(x.max()), "sigma": float(x.std())}


def history_entry(it: int, transfers: int, rejected: int, ignored: int, stats: dict[str, float]) -> dict[str, Any]:
    proposed = transfers + rejected
    return {"iteration": it, "transfers": int(transfers), "rejected": int(rejected),
            "rejection_rate": rejected / proposed if proposed else 0.0, "ignored": int(ignored), **stats}


def is_settled(loads, speeds, x_ave: float, threshold: float) -> bool:
    """``F(D) ≤ 0``: no rank above ``T x̄``."""
    return bool(np.max(loads / speeds) <= threshold * x_ave)


def turn_coordinator(seed: int | Sequence[int], p: int) -> np.random.Generator:
    """The stream every rank draws the turn order from: child p of ``SeedSequence(seed)`` (ranks use 0..p−1)."""
    return child_stream(seed, p)


def check_gossip_params(iterations, rounds, fanout, threshold, criterion, seed, prefix: str = "",
                  source_load: str = "turn") -> None:
    """BalancerError (one line, ``{prefix}{name}: ...``) unless every parameter is within its bounds.

    ``iterations`` 0..MAX_GOSSIP_ITERATIONS, ``rounds`` and ``fanout`` 1..MAX_PROCESSORS (a fanout beyond
    p − 1 informs every other rank, as p − 1 does: :func:`gossip_uniforms`), ``iterations × rounds`` at most
    MAX_GOSSIP_ROUNDS, ``threshold`` in [1, BIG], seed words in 0..MAX_SEED.
    """
    def integer(name, v, low, high):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise BalancerError(f"{prefix}{name}: must be an integer, got {v!r}")
        if not low <= v <= high:
            raise BalancerError(f"{prefix}{name}: must be at {'least' if v < low else 'most'} "
                                f"{low if v < low else high}, got {v!r}")

    integer("iterations", iterations, 0, MAX_GOSSIP_ITERATIONS)
    integer("rounds", rounds, 1, MAX_PROCESSORS)
    integer("fanout", fanout, 1, MAX_PROCESSORS)
    if iterations * rounds > MAX_GOSSIP_ROUNDS:
        raise BalancerError(f"{prefix}rounds: with {prefix}iterations {iterations}, must be at most "
                            f"{MAX_GOSSIP_ROUNDS // iterations} (iterations × rounds ≤ {MAX_GOSSIP_ROUNDS} gossip "
                            f"rounds), got {rounds}")
    if not (isinstance(threshold, (int, float, np.integer, np.floating)) and not isinstance(threshold, bool)
            and math.isfinite(threshold) and 1.0 <= threshold <= BIG):
        raise BalancerError(f"{prefix}threshold: must be a number in [1, {BIG:g}], got {threshold!r}")
    if criterion not in CRITERIA:
        raise BalancerError(f"{prefix}criterion: must be 'original' (6) or 'modified' (6'), got {criterion!r}")
    if source_load not in SOURCE_LOADS:
        raise BalancerError(f"{prefix}source_load: must be 'turn' or 'current', got {source_load!r}")
    words = seed if isinstance(seed, (list, tuple)) else [seed]
    if not words or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 <= s <= MAX_SEED
                            for s in words):
        raise BalancerError(f"{prefix}seed: must be an integer in 0..{MAX_SEED}, got {seed!r}")


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


# -- parameters (both forms) --------------------------------------------------------------------
class GrapevineParams(Params):
    """Parameters of ``grapevine`` (004 ch. 2)."""

    iterations: integer_type(ge=0, le=MAX_GOSSIP_ITERATIONS) = Field(
        4, description="inform + transfer iterations i (each a whole gossip and transfer stage)")
    rounds: integer_type(ge=1, le=MAX_PROCESSORS) = Field(
        4, description=f"gossip rounds k per iteration (iterations × rounds ≤ {MAX_GOSSIP_ROUNDS}: each round "
        "is an all-to-all)")
    fanout: integer_type(ge=1, le=MAX_PROCESSORS) = Field(
        4, description="peers f informed per round (beyond p − 1: every other rank, as p − 1)")
    threshold: number_type(ge=1) = Field(1.0, description="overload threshold T (transfer above T·L_ave)")
    criterion: Literal["original", "modified"] = Field("modified", description="acceptance: 6 (original) or 6′")
    seed: Seed | None = Field(None, description="random streams (null: the scenario seed)")
    transfer: Literal["broadcast", "token"] = Field(
        "broadcast", description="the transfer stage: broadcast (each turn broadcasts its moves to every rank) or "
        "token (the loads travel with a token from turn to turn, the moves reach every rank once per stage down a "
        "tree: p times fewer collectives; the same moves)")
    source_load: Literal["turn", "current"] = Field(
        "turn", description="L_i in criterion 6′: the source's load when its turn starts (the report's) or its "
        "current load (a variant where every single transfer keeps Lemma 1)")

    @field_validator("rounds")
    @classmethod
    def _gossip_rounds(cls, rounds: int, info: ValidationInfo) -> int:
        iterations = info.data.get("iterations")
        if iterations and iterations * rounds > MAX_GOSSIP_ROUNDS:
            raise ValueError(f"with iterations {iterations}, must be at most {MAX_GOSSIP_ROUNDS // iterations} "
                             f"(iterations × rounds ≤ {MAX_GOSSIP_ROUNDS} gossip rounds)")
        return rounds


# -- serial reference ---------------------------------------------------------------------------
def _inform_all(x: NDArray[np.float64], x_ave: float, rngs: list[np.random.Generator], prm: GrapevineParams,
                cnt: Counters) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """The inform stage of one iteration on every rank at once: the underloaded ranks (``x < x̄``) start, then
    ``prm.rounds`` synchronous rounds of pushes to ``fanout`` peers each (module docstring of
    :mod:`hermes.balance.gossip.grapevine`). Every rank draws its round's uniforms from its stream ``rngs[r]``
    (the distributed form's), the senders use them; the exchanges are counted in ``cnt`` as the distributed
    form's alltoall and messages.

    Returns (known, full): the bitset row of the ranks each rank knows, and the row of all underloaded ranks.
    """
    p, f = x.size, int(prm.fanout)
    used = min(f, p - 1)  # the uniforms that can pick a peer (gossip_uniforms)
    nwords = (p + 63) // 64
    pad = pad_row(p, nwords)
    under = np.flatnonzero(x < x_ave)
    known = np.zeros((p, nwords), dtype=np.uint64)
    known[under] = bitrows(under, nwords)
    full = np.bitwise_or.reduce(known[under], axis=0) if under.size else np.zeros(nwords, dtype=np.uint64)
    senders = under
    for _ in range(prm.rounds):
        sending = np.zeros(p, dtype=bool)
        sending[senders] = True
        u = np.array([gossip_uniforms(rngs[r], f, used) for r in senders.tolist()])
        u = u.reshape(senders.size, used)
        for r in np.flatnonzero(~sending).tolist():
            rngs[r].bit_generator.advance(f)
        excl = known[senders] | bitrows(senders, nwords) | pad
        targets = pick_targets(excl, u, p)
        row, col = np.nonzero(targets >= 0)
        src, dst = senders[row], targets[row, col]
        sizes = _popcount(known[senders]).sum(axis=1)
        cnt.exchange_rounds += 1
        cnt.count_collective("alltoall")
        cnt.messages += dst.size
        cnt.bytes += 8 * p * p + ENTRY_BYTES * int(sizes[row].sum())
        news = ~np.all(known == full, axis=1)[dst]  # a rank that knows every underloaded one learns nothing
        known = _merge(known, src[news], dst[news])
        senders = np.unique(dst)
    return known, full


@dataclass
class GossipState:
    """One iteration of :func:`grapevine_iter` (iteration 0: the initial state).

    ``moves`` lists the iteration's transfers in the order they happened, one row (object, source,
    destination) each — replaying them from the previous state's loads gives every intermediate
    distribution. ``counters`` is cumulative: what the distributed form has counted so far.
    """

    iteration: int
    object_rank: NDArray[np.int64]
    loads: NDArray[np.float64]
    average: float
    record: dict[str, Any]
    settled: bool
    counters: Counters
    moves: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))


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


def grapevine_iter(object_loads: ArrayLike, object_rank: ArrayLike, n_ranks: int,
                   params: GrapevineParams | None = None, *, seed: int | Sequence[int] | None = None, speeds: ArrayLike | None = None,
                   migratable: ArrayLike | None = None, keep: int = 0) -> Iterator[GossipState]:
    """Grapevine on the whole system, one state per iteration (see :mod:`hermes.balance.gossip.grapevine`).

    Parameters
    ----------
    object_loads : array of float, shape (n,)
        ℓ ≥ 0 of objects 0..n−1 (the index is the object id: a source scans its objects in id order).
    object_rank : array of int, shape (n,)
        Initial rank of every object (its home).
    n_ranks : int
    params : GrapevineParams, optional
        ``iterations``, ``rounds``, ``fanout``: i (outer iterations, ≥ 0), k (gossip rounds, ≥ 1), f (fanout,
        ≥ 1); ``threshold``: T ≥ 1, a rank is overloaded when ``x_i > T x̄``; ``criterion``: ``"original"`` or
        ``"modified"``, report criterion 6 or 6' (§2.1); ``source_load``: L_i in criterion 6', the source's
        load when its turn starts (``"turn"``, the report's simulator) or its current load (``"current"``);
        ``seed``: the default of ``seed`` below. ``transfer`` is not read (the distributed form's way of
        carrying out the same moves). Default ``GrapevineParams()``; checked again here.
    seed : int or sequence of int, optional
        Entropy of ``SeedSequence``; rank r uses child r of ``spawn(n_ranks + 1)``, the turn order (drawn
        once, kept for every iteration) child ``n_ranks``. Default: ``params.seed``, 0 if that is None.
    speeds : array of float, shape (n_ranks,), optional
        Relative processor speeds s (capacities up to a factor); default 1.
    migratable : array of bool, shape (n,), optional
        Objects that may move (default all): the others count in their rank's load and are never
        offered (a trace's non-migratable objects, :mod:`hermes.trace.replay`).
    keep : int
        Objects (of those it may move) a source keeps whatever its load (:func:`transfer_turn`).

    Yields
    ------
    GossipState

    Raises
    ------
    BalancerError
        On bad parameters or inputs.

    Notes
    -----
    Counters are the distributed form's. Per iteration: ``rounds`` sparse exchanges (an alltoall of
    counts, 8p bytes per rank, plus one message of ``24·|known|`` bytes per (sender, receiver) pair);
    one broadcast of a 24-byte header per turn of a rank above ``T x̄``, and one more of 32 bytes per
    transferred object when it moved any; one allgather (48 bytes per rank; plus one at the start).
    Messages and bytes are summed over ranks (a broadcast counts its bytes once, no message);
    rounds and collectives are per rank.
    """
    prm = GrapevineParams() if params is None else params
    iterations, rounds, fanout, threshold = prm.iterations, prm.rounds, prm.fanout, prm.threshold
    criterion, source_load = prm.criterion, prm.source_load
    seed = (0 if prm.seed is None else prm.seed) if seed is None else seed
    check_gossip_params(iterations, rounds, fanout, threshold, criterion, seed, source_load=source_load)
    ell, owner, s = _check_objects(object_loads, object_rank, n_ranks, speeds)
    p, modified, frozen = int(n_ranks), criterion == "modified", source_load == "turn"
    rngs = [np.random.default_rng(c) for c in np.random.SeedSequence(seed).spawn(p)]
    coord = turn_coordinator(seed, p)
    cnt = Counters()
    s_list = s.tolist()

    def gather_phase() -> None:
        cnt.count_collective("allgather")
        cnt.bytes += 8 * GATHER_WORDS * p

    def bcast(words: int) -> None:
        cnt.count_collective("bcast")
        cnt.bytes += 8 * words

    loads = np.bincount(owner, weights=ell, minlength=p)
    x_ave = ordered_total(loads) / ordered_total(s)
    limit = threshold * x_ave
    rule = TurnRule(x_ave, threshold, modified, frozen, keep)
    gather_phase()
    settled = is_settled(loads, s, x_ave, threshold)
    yield GossipState(0, owner.copy(), loads, x_ave, history_entry(0, 0, 0, 0, load_stats(loads, s, x_ave)), settled, cnt)
    order = np.argsort(owner, kind="stable")
    held = [list(a) for a in np.split(order, np.cumsum(np.bincount(owner, minlength=p))[:-1])]
    if migratable is not None:  # objects that cannot move count in their rank's load and are never offered
        mig = np.asarray(migratable, dtype=bool).ravel()
        if mig.shape != ell.shape:
            raise BalancerError(f"migratable: {mig.size} flags for {ell.size} objects")
        held = [[o for o in h if mig[o]] for h in held]
    turns = coord.permutation(p).tolist()  # the same order in every iteration (the simulator's)
    for it in range(1, iterations + 1):
        if settled:
            return
        cnt.iterations += 1
        x = loads / s
        known, full = _inform_all(x, x_ave, rngs, prm, cnt)
        # transfer stage: turns in the run's order, on current loads
        weight = 1.0 - x / x_ave  # the CMF weight of a known (underloaded) rank, from its gossiped load
        live = loads.tolist()
        full_bits, cum_full = row_bits(full, p), None
        knows_all = (np.all(known == full, axis=1) & (full_bits == 0)).tolist()  # most sources, late in the gossip
        ntr = nrej = ignored = 0
        moves: list[NDArray[np.int64]] = []
        for r in turns:
            if live[r] / s_list[r] <= limit:
                continue
            if knows_all[r]:
                if cum_full is None:
                    cum_full = transfer_cmf(weight, full_bits, r)
                cum = cum_full
            else:
                cum = transfer_cmf(weight, row_bits(known[r], p), r)
            bcast(HEADER_WORDS)
            if not cum[-1] > 0:
                ignored += 1
                continue
            mine = np.sort(np.array(held[r], dtype=np.int64))
            pos, dest, rej = transfer_turn(ell[mine], cum, live, s_list, r, rngs[r], rule)
            nrej += rej
            if pos.size == 0:
                continue
            ntr += pos.size
            bcast(MOVE_BYTES // 8 * pos.size)
            obj = mine[pos]
            owner[obj] = dest
            moves.append(np.column_stack([obj, np.full(obj.size, r), dest]))
            stay = np.ones(mine.size, dtype=bool)
            stay[pos] = False
            held[r] = mine[stay].tolist()
            for o, d in zip(obj.tolist(), dest.tolist()):
                held[d].append(o)
        loads = np.bincount(owner, weights=ell, minlength=p)
        gather_phase()
        settled = is_settled(loads, s, x_ave, threshold)
        rec = history_entry(it, ntr, nrej, ignored, load_stats(loads, s, x_ave))
        mv = np.concatenate(moves) if moves else np.zeros((0, 3), dtype=np.int64)
        yield GossipState(it, owner.copy(), loads, x_ave, rec, settled, cnt, mv)


def grapevine(object_loads: ArrayLike, object_rank: ArrayLike, n_ranks: int, params: GrapevineParams | None = None,
              *, seed: int | Sequence[int] | None = None, speeds: ArrayLike | None = None,
              migratable: ArrayLike | None = None, keep: int = 0) -> GossipResult:
    """Run :func:`grapevine_iter` to the end (the same arguments); the final state as a result."""
    last = None
    history = []
    for last in grapevine_iter(object_loads, object_rank, n_ranks, params, seed=seed, speeds=speeds,
                               migratable=migratable, keep=keep):
        history.append(last.record)
    return GossipResult(last.object_rank, history, last.counters.iterations, last.settled, last.counters,
                        last.average)
