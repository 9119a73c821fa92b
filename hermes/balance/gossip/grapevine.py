"""Grapevine gossip balancing of objects (inform + transfer): serial reference and distributed form.

Grapevine (Menon & Kalé, SC'13) as analysed by Pébaÿ & Lifflander, *Some Results About Distributed
Load Balancing*, Sandia report 2019 (seed 004, ch. 2–4), whose tables were computed with their
NodeGossiper simulator (the ancestor of LBAF); hermes follows that simulator's conventions, read from
its source (ANCHORS.md, LBAF). Objects with loads ℓ live on ranks; rank i carries ``L_i = Σ ℓ`` and
has relative speed ``s_i`` (1 by default); its relative load is ``x_i = L_i / s_i`` and the fair value
``x̄ = Σ L / Σ s`` (``L_ave`` of the report when ``s ≡ 1``). Each of at most ``iterations`` outer
iterations has two stages.

**Inform** (the report leaves the protocol implicit; this is the simulator's). Round 1: every
underloaded rank (``x_i < x̄``) sends (itself, its load, its speed) to ``fanout`` distinct ranks drawn
uniformly among the others. Rounds 2..k: every rank that received a message in the previous round
forwards all it knows to ``fanout`` distinct ranks drawn uniformly among those it does not know yet
(neither itself nor a known underloaded rank). Knowledge merges by union; a round's messages are
snapshots. ``rounds = k`` counts the first push.

**Transfer** (report Alg. 2 lines 4–6, §2.1). The ranks take turns, one after the other, in a random
order drawn once per run (the simulator iterates one Python set of ranks, in the same order every
iteration: with an order drawn afresh each iteration the report's transfer counts are not
matched, with the rank-id order the loaded ranks act first and their receivers pass a third more
objects on within the first iteration). At its turn a rank above ``T x̄`` that knows an underloaded rank
offloads (:func:`~hermes.balance.gossip.grapevine_serial.transfer_turn`): it scans its objects (those it holds now,
received ones included) in ascending id order; each proposal draws a destination X among the known
underloaded ranks with probability ∝ ``1 − x_X / x̄`` (the CMF, from the gossiped loads, fixed for
the stage) and is accepted if

    criterion 6 (``original``):  (L_X + ℓ) / s_X < x̄
    criterion 6' (``modified``): (L_X + ℓ) / s_X < L_i / s_i

with L_X the destination's **current** load (earlier turns' and this turn's transfers included) and
L_i the source's load when its turn started (``source_load="turn"``, the simulator's test; variant
``"current"``: its load after its earlier transfers of the turn). After an acceptance the scan
restarts at the first remaining object, after a rejection it goes on with the next; the turn ends
when ``x_i ≤ T x̄`` or a full scan finds nothing to move. With ``s ≡ 1`` the tests are the report's
lines 6 and 6' literally. For heterogeneous processors hermes compares L/s (relative loads).

**Lemma 1** (§2.1.2): a transfer with ``ℓ < L_i − L_X`` gives ``max(L_i − ℓ, L_X + ℓ) < L_i``, so
the maximum load (F(D) = L_max/L_ave − T) never rises. With ``source_load="current"`` every transfer
meets the lemma's hypothesis, and L_max never rises from one transfer to the next. With the
simulator's test (``"turn"``, L_i frozen at the turn's start) the lemma applies to a whole turn:
every destination ends below the source's load at the start of its turn, which is at most the
maximum then, and the source only sheds load; so L_max never rises from one turn to the next (nor
between iterations), though inside a turn a destination may end above the source's reduced load.
Relative loads: ``(L_X + ℓ)/s_X < L_i/s_i`` and ``(L_i − ℓ)/s_i < L_i/s_i``.

**Stopping**: before each iteration, stop when ``F(D) = max_i x_i / x̄ − T ≤ 0``. Imbalance
``I = max x / x̄ − 1``; at the iso-load optimum ``I* = (|P| − r)/|O|`` with ``r = |O| mod |P| ≠ 0``
(report §3.2.1; 0 when r = 0).

Randomness: rank r draws from ``default_rng(SeedSequence(seed).spawn(p)[r])``: in every gossip round
``fanout`` uniforms (of which only the first ``min(fanout, p − 1)`` can pick a peer: those are drawn and
the stream advanced past the others, :func:`~hermes.balance.gossip.grapevine_serial.gossip_uniforms`, so a fanout
beyond p − 1 informs every other rank, as p − 1 does, at no cost), then in its turn ``max(16, n)``
uniforms at a time (n: objects it still holds), one per proposal. The turn order is
``permutation(p)`` of child p of the same ``SeedSequence`` (a stream all ranks share), drawn once.
:func:`grapevine` draws the same numbers rank by rank, so the serial and distributed forms give the
same assignment, history and counters bit for bit.

The serial reference :func:`grapevine` and the kernels both forms share (bitsets of known ranks, the
turn, parameter checks) are in :mod:`hermes.balance.gossip.grapevine_serial`, re-exported here.

Seed text fixed / deviations
----------------------------
* §2.1.1 prints the stopping criterion as "F(D) ≥ 0" and "L_max ≤ T L_ave ⟺ I_D < T − 1"; the loop
  ``while L_i > T L_ave`` ends when ``F(D) = L_max / L_ave − T ≤ 0``, i.e. ``I_D ≤ T − 1``.
* Lemma 2 says "transferred from p_X to p_i": the object moves from p_i to p_X.
* The simulator iterates Python sets (ranks, objects) in hash order; hermes uses a seeded random
  turn order (fixed for the run, like a set's) and ascending object ids. Its gossip messages are references to the senders' live sets
  (a receiver may pass on, within a round, what it learnt in that round) and its first push may
  pick the sender itself; hermes' rounds are synchronous snapshots and never pick the sender. A
  rank that became overloaded by receiving may draw itself from its CMF in the simulator (a no-op
  move counted as a transfer); hermes leaves the source out of its CMF.
* The distributed form realises the sequential stage with one broadcast (two when objects move) per
  turn of a rank above ``T x̄``: every rank learns every move, as the simulator's shared state does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.balance.flow import child_stream, ordered_total
from hermes.balance.gossip.grapevine_serial import (
    HEADER_WORDS,
    MOVE_BYTES,
    ONE_BIT,
    _popcount,
    bit_members,
    GrapevineParams,
    bitrows,
    check_gossip_params,
    gossip_uniforms,
    history_entry,
    is_settled,
    load_stats,
    pad_row,
    pick_targets,
    row_bits,
    TurnRule,
    transfer_cmf,
    transfer_turn,
    turn_coordinator,
)
from hermes.balance.interface import BalanceContext, Decision
from hermes.balance.registry import register
from hermes.runtime.bulk import link_costs
from hermes.runtime.clock import ClockBank
from hermes.runtime.comm import Counters, allgather, bcast, exchange_arrays, gather_error
from hermes.errors import BalancerError

__all__ = ["RankObjects", "LocalGossipResult", "grapevine_distributed"]

_TAG = 311


# -- distributed form ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RankObjects:
    """One rank's objects in :func:`grapevine_distributed`: their global ids (unique over all ranks; a source
    scans its objects in id order) and loads ℓ ≥ 0, the rank's relative speed s_i > 0 (hermes run: ``p · c_i``),
    and how many objects it keeps whatever its load (:func:`transfer_turn`; a mesh processor keeps one cell)."""

    gid: ArrayLike
    loads: ArrayLike
    speed: float = 1.0
    keep: int = 0


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


def _local_load(ell: NDArray[np.float64]) -> float:
    """Σ ℓ in id order, accumulated as ``np.bincount`` does in the serial form (bit for bit)."""
    return float(np.bincount(np.zeros(ell.size, dtype=np.intp), weights=ell, minlength=1)[0])


def _apply_moves(mv: NDArray[np.float64], me: int, gid0, dest0, gid, ell, home):
    """Rank ``me``'s view after the moves ``mv`` (rows: id, load, home, destination; in the order they were made):
    the destinations of the objects it homes are noted in ``dest0`` (in place; the last move of an object wins),
    the objects that arrive join (gid, ell, home), kept sorted by id. Returns the new (gid, ell, home)."""
    ids, dst = mv[:, 0].astype(np.int64), mv[:, 3].astype(np.int64)
    mine = mv[:, 2].astype(np.int64) == me
    for i, d in zip(np.searchsorted(gid0, ids[mine]).tolist(), dst[mine].tolist()):
        dest0[i] = d
    arrive = dst == me
    if arrive.any():
        gid = np.concatenate([gid, ids[arrive]])
        ell = np.concatenate([ell, mv[arrive, 1]])
        home = np.concatenate([home, mv[arrive, 2].astype(np.int64)])
        o = np.argsort(gid, kind="stable")
        gid, ell, home = gid[o], ell[o], home[o]
    return gid, ell, home


_TAG_TOKEN = _TAG + 1
#: kinds of the token stage's messages
_TOKEN, _END = 0.0, 1.0


@dataclass
class _Stage:
    """One transfer stage as every rank sees it (:func:`_broadcast_stage`, :func:`_token_stage`): the turn order,
    the loads at the stage's start, the speeds (arrays every rank has the same of: a rank turns them into the
    lists :func:`transfer_turn` updates only when it takes a turn), the overload limit T x̄, this rank's transfer
    CMF and random stream, and the turn rule."""

    turns: NDArray[np.int64]
    loads: NDArray[np.float64]
    speeds: NDArray[np.float64]
    limit: float
    cum: NDArray[np.float64]
    rng: np.random.Generator
    rule: TurnRule


def _token_stage(comm, clock, cnt: Counters, stage: _Stage, held, homes):
    """The transfer stage with a token (``transfer="token"`` of :func:`grapevine_distributed`; collective).

    Every rank finds the first rank of ``turns`` above ``limit`` on the stage's starting loads (the same on
    every rank). That rank takes its turn, then scans on in ``turns`` for the next rank above the limit on
    the updated loads and sends it the token — (sender, kind, −1, ntr, nrej, ignored, k, loads, k moves) —
    and so on; the rank that finds no next one sends the end — (sender, kind, root, the counts, k, k moves) — down a
    binomial tree rooted at itself. Every other rank waits for the token or the end. A rank applies the
    moves it has not seen yet, in order, before its turn and at the end (the objects that arrive; the
    destinations of the objects it homes). Messages are charged α + β·bytes, their receivers wait for them.

    Returns (gid, ell, home, ntr, nrej, ignored) of this rank after the stage.
    """
    from mpi4py import MPI

    me, p = comm.Get_rank(), comm.Get_size()
    turns, speeds, limit, cum, rng = stage.turns, stage.speeds, stage.limit, stage.cum, stage.rng
    gid, ell, home = held
    gid0, dest0 = homes

    def after(i: int, loads) -> int:
        """The first rank of ``turns[i:]`` above the limit on ``loads`` (-1: none); the same IEEE divisions as
        a scan of the lists, all at once."""
        rest = turns[i:]
        over = np.flatnonzero(np.asarray(loads, dtype=np.float64)[rest] / speeds[rest] > limit)
        return int(rest[over[0]]) if over.size else -1

    def post(dest: int, body: NDArray[np.float64]) -> None:
        """Send (the send time, this rank, ``body``): a message of the sender's rank and ``body``, charged as
        ``8 · (1 + len(body))`` bytes. ``body`` is read-only, so hosted receivers share it: the end travels down
        the tree as one array, not one copy per rank."""
        t = clock.stamp() if clock is not None else 0.0
        if clock is not None:
            clock.exchanged(clock.message_costs([dest], [8.0 * (body.size + 1)]), np.zeros(0))
        comm.send((t, me, body), dest=dest, tag=_TAG_TOKEN)
        cnt.messages += 1
        cnt.bytes += 8 * (body.size + 1)

    def take():
        """The next message: (kind, root, counts, moves, loads or None, its body)."""
        t, src, body = comm.recv(source=MPI.ANY_SOURCE, tag=_TAG_TOKEN)
        if clock is not None:
            clock.exchanged(np.zeros(0), np.array([t + clock.links.cost(int(src), me, 8.0 * (body.size + 1))]))
        kind, root, counts, k = float(body[0]), int(body[1]), body[2:5].copy(), int(body[5])
        if kind == _TOKEN:
            return kind, root, counts, body[6 + p:].reshape(k, 4), body[6:6 + p].tolist(), body
        return kind, root, counts, body[6:].reshape(k, 4), None, body

    seen = 0

    def apply(moves: NDArray[np.float64]) -> None:
        nonlocal gid, ell, home, seen
        mv = moves[seen:]
        seen = moves.shape[0]
        if mv.size == 0:
            return
        gid, ell, home = _apply_moves(mv, me, gid0, dest0, gid, ell, home)

    holder = after(0, stage.loads)
    if holder < 0:
        return gid, ell, home, 0, 0, 0
    counts, moves, turn = np.zeros(3), np.zeros((0, 4)), me == holder  # counts: transfers, rejections, ignored
    end = None  # the end's body as received (passed on as it is)
    live = stage.loads.tolist() if turn else None
    if not turn:
        kind, root, counts, moves, live, body = take()
        turn = kind == _TOKEN
        if not turn:
            end = body
        del body  # a token is not kept while its holder waits for the end (p tokens of every move so far)
    if turn:
        apply(moves)
        if cum[-1] > 0:
            at, dest, rej = transfer_turn(ell, cum, live, speeds.tolist(), me, rng, stage.rule)
            counts += (at.size, rej, 0)
            if at.size:
                sent = np.column_stack([gid[at], ell[at], home[at], dest]).astype(np.float64)
                stay = np.ones(gid.size, dtype=bool)
                stay[at] = False
                gid, ell, home = gid[stay], ell[stay], home[stay]
                moves = np.concatenate([moves, sent])
                apply(moves)  # the destinations of the objects this rank homes
        else:
            counts[2] += 1
        nxt = after(int(np.flatnonzero(turns == me)[0]) + 1, live)
        if nxt >= 0:
            post(nxt, _read_only(np.concatenate(([_TOKEN, -1.0], counts, [moves.shape[0]], live, moves.ravel()))))
            moves = live = None  # what the token carried is in the end too
            _, root, counts, moves, _, end = take()  # the end
        else:
            root = me  # the last turn: the end's tree is rooted here
    if end is None:
        end = _read_only(np.concatenate(([_END, root], counts, [moves.shape[0]], moves.ravel())))
    for child in _tree_children((me - root) % p, p):
        post((child + root) % p, end)
    apply(moves)
    return gid, ell, home, int(counts[0]), int(counts[1]), int(counts[2])


def _read_only(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``a`` made read-only (a message body nobody changes: hosted receivers share it)."""
    a.flags.writeable = False
    return a


def _rank_objects(objects: RankObjects, me: int) -> tuple[NDArray, NDArray[np.float64], str | None]:
    """This rank's object ids and loads as flat arrays, and what is wrong with them or with its speed (None if
    nothing: every rank learns it from the first allgather before raising, so no rank is left waiting)."""
    gid_in = np.asarray(objects.gid).ravel()
    error = None
    try:
        ell_in = np.asarray(objects.loads, dtype=np.float64).ravel()
        if gid_in.shape != ell_in.shape or (gid_in.size and not np.issubdtype(gid_in.dtype, np.integer)):
            raise BalancerError(f"rank {me}: {gid_in.size} object ids for {ell_in.size} loads")
        if np.any(~np.isfinite(ell_in)) or np.any(ell_in < 0):
            raise BalancerError(f"rank {me}: object loads must be finite and non-negative")
        if not (math.isfinite(objects.speed) and objects.speed > 0):
            raise BalancerError(f"rank {me}: speed must be positive, got {objects.speed}")
    except (BalancerError, TypeError, ValueError) as err:
        error, ell_in = str(err), np.zeros(gid_in.size)
    return gid_in, ell_in, error


def _inform_stage(comm, clock, cnt: Counters, rng: np.random.Generator, prm: GrapevineParams, load: float,
                  speed: float, x_ave: float) -> NDArray[np.float64]:
    """The inform stage of one iteration (collective): ``prm.rounds`` sparse exchanges of what each rank knows
    (module docstring); returns this rank's transfer CMF (:func:`transfer_cmf`) over the underloaded ranks it
    learnt of, from their gossiped loads and speeds.

    Every rank draws its ``fanout`` uniforms every round (:func:`gossip_uniforms`), whether it sends or not.
    """
    me, p = comm.Get_rank(), comm.Get_size()
    f = int(prm.fanout)
    used = min(f, p - 1)  # the uniforms that can pick a peer (gossip_uniforms)
    nwords = (p + 63) // 64
    pad, selfrow = pad_row(p, nwords), bitrows(np.array([me]), nwords)
    known = np.zeros((1, nwords), dtype=np.uint64)
    lk, sk = np.zeros(p), np.ones(p)
    sending = load / speed < x_ave
    if sending:
        known |= selfrow
        lk[me], sk[me] = load, speed
    for _ in range(prm.rounds):
        out = {}
        u = gossip_uniforms(rng, f, used)
        if sending:
            targets = pick_targets(known | selfrow | pad, u[None, :], p)[0]
            ids = bit_members(known, p)[1]
            tri = np.column_stack([ids, lk[ids], sk[ids]])
            tri.flags.writeable = False  # hosted peers share the message instead of a copy each
            msg = tri.ravel()
            out = {int(t): msg for t in targets[targets >= 0]}
        got = exchange_arrays(comm, out, clock, counters=cnt, tag=_TAG)
        sending = bool(got)
        for tri in got.values():
            tri = tri.reshape(-1, 3)
            ids = tri[:, 0].astype(np.int64)
            np.bitwise_or.at(known[0], ids >> 6, ONE_BIT << (ids & 63).astype(np.uint64))
            lk[ids], sk[ids] = tri[:, 1], tri[:, 2]
    return transfer_cmf(1.0 - (lk / sk) / x_ave, row_bits(known[0], p), me)


@dataclass
class _InformPart:
    """One rank's part in :func:`_inform_kernel`: what :func:`_inform_stage` takes, and the stage-start loads and
    speeds of all ranks (every gossiped triple is an originator's (id, load, speed), so a rank's view of a known
    rank's load is that rank's entry here)."""

    clock: Any
    counters: Counters
    rng: np.random.Generator
    prm: GrapevineParams
    load: float
    speed: float
    x_ave: float
    loads: NDArray[np.float64]
    speeds: NDArray[np.float64]


def _inform_bulk(comm, clock, cnt: Counters, rng: np.random.Generator, prm: GrapevineParams, load: float,
                 speed: float, x_ave: float, loads: NDArray[np.float64],
                 speeds: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`_inform_stage` run once per MPI process for all the ranks it hosts (``run.bulk: auto``; collective;
    virtual clocks without an extra load): the same transfer CMF, random draws, clocks and counters, bit for bit."""
    part = _InformPart(clock, cnt, rng, prm, load, speed, x_ave, loads, speeds)
    return comm.bulk("grapevine_inform", part, _inform_kernel)


def _inform_kernel(group, parts: list[_InformPart]) -> list[NDArray[np.float64]]:
    """The inform stage of a process' ranks (:func:`_inform_stage`, the exchange of
    :func:`~hermes.runtime.comm.exchange_arrays` included): their known sets as one bit matrix; a round's messages
    between co-hosted ranks are rows ORed into rows, those to another process one message per pair of processes
    (receiver, sender, its stamp, its message's length, its known row). Every rank's clock is charged as its own
    exchange would: the Alltoall of headers (wait for the latest stamp of all, the collective's cost), its longest
    send, the wait for its last arrival; its counters as well."""

    L, lo, p = len(parts), group.lo, group.size
    if L == 0:
        return []
    first = parts[0]
    prm, x_ave, loads, speeds = first.prm, first.x_ave, first.loads, first.speeds
    f = int(prm.fanout)
    used = min(f, p - 1)
    nwords = (p + 63) // 64
    pad = pad_row(p, nwords)
    me = np.arange(lo, lo + L, dtype=np.int64)
    selfrows = bitrows(me, nwords)
    clocks = [pt.clock for pt in parts]
    bank = ClockBank(clocks)
    ctime = np.array([pt.counters.time for pt in parts], dtype=np.float64)
    messages = np.zeros(L, dtype=np.int64)
    nbytes = np.zeros(L, dtype=np.int64)
    coll = np.array([c.links.collective_cost(p, 8.0 * p) for c in clocks])
    known = np.zeros((L, nwords), dtype=np.uint64)
    sending = np.array([pt.load / pt.speed < x_ave for pt in parts], dtype=bool)
    known[sending] |= selfrows[sending]
    others = [q for q in range(group.processes) if q != group.pid]
    for _ in range(prm.rounds):
        u = np.stack([gossip_uniforms(pt.rng, f, used) for pt in parts])
        # the Alltoall of (stamp, size) headers: every rank waits for the latest stamp of all p, pays the cost
        t0 = bank.now.copy()
        latest = float(group.allgather(np.array([np.max(t0)])).max())
        bank.wait_until(np.full(L, latest))
        bank.charge(coll, "comm")
        stamp = bank.now.copy()
        # this round's messages: every sending rank's known set to its targets (a snapshot of the round's start)
        snd = np.flatnonzero(sending)
        targets = pick_targets(known[snd] | selfrows[snd] | pad, u[snd], p)
        r, c = np.nonzero(targets >= 0)
        src, dst = snd[r], targets[r, c]
        size = 3 * _popcount(known[src]).sum(axis=1)  # (id, load, speed) per known rank
        sbytes = 8.0 * size
        send = link_costs(clocks, src, dst, sbytes, True)
        own = np.zeros(L)
        np.maximum.at(own, src, send)
        messages += np.bincount(src, minlength=L)
        nbytes += 8 * p + np.bincount(src, weights=8 * size, minlength=L).astype(np.int64)
        # what crosses processes: (receiver, sender, stamp, length) and the sender's row, per message
        qd = group.process_of(dst)
        out = {}
        for q in others:
            k = np.flatnonzero(qd == q)
            out[q] = (np.column_stack([dst[k], lo + src[k], stamp[src[k]], size[k]]), known[src[k]])
        got = group.exchange_objects(out) if others else {}
        here = qd == group.pid
        r_dst, r_src = [dst[here] - lo], [lo + src[here]]
        r_t, r_size, r_rows = [stamp[src[here]]], [size[here].astype(np.float64)], [known[src[here]]]
        for q in others:
            head, rows = got[q]
            r_dst.append(head[:, 0].astype(np.int64) - lo)
            r_src.append(head[:, 1].astype(np.int64))
            r_t.append(head[:, 2])
            r_size.append(head[:, 3])
            r_rows.append(rows)
        r_dst, r_src = np.concatenate(r_dst), np.concatenate(r_src)
        r_t, r_size, r_rows = np.concatenate(r_t), np.concatenate(r_size), np.concatenate(r_rows)
        arrive = r_t + link_costs(clocks, r_dst, r_src, 8.0 * r_size, False)
        bank.charge(own, "comm")
        last = bank.now.copy()
        np.maximum.at(last, r_dst, arrive)
        bank.wait_until(last)
        ctime += bank.now - t0
        np.bitwise_or.at(known, r_dst, r_rows)
        sending = np.bincount(r_dst, minlength=L) > 0
    bank.store(clocks)
    cums = []
    for i in range(L):  # a rank's view of the ranks it knows: their stage-start loads and speeds (0 and 1 elsewhere)
        bits = row_bits(known[i], p)
        lk, sk = np.where(bits, loads, 0.0), np.where(bits, speeds, 1.0)
        cums.append(transfer_cmf(1.0 - (lk / sk) / x_ave, bits, lo + i))
    ct = ctime.tolist()
    for i, pt in enumerate(parts):
        c = pt.counters
        c.collectives["alltoall"] = c.collectives.get("alltoall", 0) + prm.rounds
        c.time = ct[i]
        c.exchange_rounds += prm.rounds
        c.messages += int(messages[i])
        c.bytes += int(nbytes[i])
    return cums


def _broadcast_stage(comm, clock, cnt: Counters, stage: _Stage, held, homes):
    """The transfer stage with broadcasts (``transfer="broadcast"`` of :func:`grapevine_distributed`; collective).

    In the turn order, every rank above ``limit`` on the current loads takes its turn: it broadcasts a header
    (transfers, rejections, ignored) and, if it moved objects, the moves (id, load, home, destination); every
    other rank replays the source's updates of the loads in its order, and every rank applies the moves (the
    objects that arrive; the destinations of the objects it homes).

    Returns (gid, ell, home, ntr, nrej, ignored) of this rank after the stage.
    """
    me = comm.Get_rank()
    live, s_list, limit, cum, rng = stage.loads.tolist(), stage.speeds.tolist(), stage.limit, stage.cum, stage.rng
    gid, ell, home = held
    gid0, dest0 = homes
    ntr = nrej = ignored = 0
    for r in stage.turns.tolist():
        if live[r] / s_list[r] <= limit:
            continue
        header = np.zeros(HEADER_WORDS)
        if r == me:
            if cum[-1] > 0:
                pos, dest, rej = transfer_turn(ell, cum, live, s_list, me, rng, stage.rule)
                header[:2] = pos.size, rej
            else:
                header[2] = 1
        header = bcast(comm, header, r, clock, counters=cnt)
        n = int(header[0])
        ntr, nrej, ignored = ntr + n, nrej + int(header[1]), ignored + int(header[2])
        if n == 0:
            continue
        if r == me:
            moves = np.column_stack([gid[pos], ell[pos], home[pos], dest]).ravel()
            mv = bcast(comm, moves, r, clock, counters=cnt)
            stay = np.ones(gid.size, dtype=bool)
            stay[pos] = False
            gid, ell, home = gid[stay], ell[stay], home[stay]
        else:
            mv = bcast(comm, np.empty(n * MOVE_BYTES // 8), r, clock, counters=cnt)
            for _, e, _, d in mv.reshape(n, 4).tolist():  # the source's live updates, in its order
                live[int(d)] += e
                live[r] -= e
        gid, ell, home = _apply_moves(mv.reshape(n, 4), me, gid0, dest0, gid, ell, home)
    return gid, ell, home, ntr, nrej, ignored


def _tree_children(rel: int, p: int) -> list[int]:
    """Children of relative rank ``rel`` in the binomial tree over ``p`` ranks rooted at 0: ``rel + 2^j`` for
    every ``2^j > rel`` below ``p`` (the parent of ``rel > 0`` is ``rel`` less its highest bit)."""
    out, step = [], 1 << rel.bit_length() if rel else 1
    while rel + step < p:
        out.append(rel + step)
        step <<= 1
    return out


def grapevine_distributed(comm, objects: RankObjects, params: GrapevineParams | None = None, *, clock=None,
                          counters: Counters | None = None,
                          seed: int | Sequence[int] | None = None, bulk: bool = False) -> LocalGossipResult:
    """Grapevine with real MPI messages between random peers (SPMD; every rank of ``comm`` calls it).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    objects : RankObjects
        This rank's objects (global ids, loads), its speed and the objects it keeps.
    clock : VirtualClock or WallClock, optional
        Charged for every collective and message.
    counters : Counters, optional
        Updated in place (a fresh one by default).
    params : GrapevineParams, optional
        ``iterations``, ``rounds``, ``fanout``, ``threshold``, ``criterion``, ``source_load`` as in
        :func:`grapevine_iter`, and ``transfer`` (``"broadcast"`` or ``"token"``): how the sequential transfer
        stage is carried out (Notes; the moves are the same). Default ``GrapevineParams()``; checked again
        here, on every rank.
    seed : int or sequence of int, optional
        The random streams (default: ``params.seed``, 0 if that is None); ``hermes run`` mixes in the phase.
    bulk : bool
        Run the inform stage once per MPI process for all the ranks it hosts (:func:`_inform_kernel`; ``comm`` a
        hermes :class:`~hermes.runtime.communicator.Communicator`, ``clock`` virtual without an extra load): the same
        results, clocks and counters, bit for bit.

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
    exchanges: an ``Alltoall`` of message sizes, then ``Isend``/``Irecv`` to the peers; messages carry
    (rank, load, speed) per known rank. The transfer stage is sequential, as in the report: every
    rank keeps the current load of every rank; in the turn order (drawn from a stream all ranks
    share) each rank above ``T x̄`` runs its turn locally on those loads and broadcasts a header
    (transfers, rejections, ignored) and, if it moved objects, the moves (id, load, home,
    destination); every rank replays them (destinations take the objects, homes note where their
    objects went). One ``Allgather`` per iteration (and one at the start) gives every rank L and s:
    the ``F(D) ≤ 0`` test and the history. Same seed ⇒ same final assignment, history and counters
    as :func:`grapevine` with objects numbered by ``objects.gid``.

    ``transfer="token"`` carries out the same stage with point-to-point messages only (:func:`_token_stage`):
    the current loads travel with a token from one rank that takes a turn to the next (in the turn order,
    each deciding on the token's loads who is next), with the moves made so far; the last one sends every
    move of the stage down a binomial tree to all ranks. A stage then costs one message per turn and
    ⌈log₂ p⌉ hops instead of one or two broadcasts per turn, and every rank handles the moves once per
    stage instead of once per turn: hosted on one machine, 4,096 ranks need p times fewer collective calls.
    The moves, loads, history and assignment are those of ``"broadcast"`` bit for bit (each rank applies
    the moves in the same order); the clock's charges and the message counters differ.
    """
    prm = GrapevineParams() if params is None else params
    iterations, rounds, fanout, threshold = prm.iterations, prm.rounds, prm.fanout, prm.threshold
    criterion, source_load, transfer = prm.criterion, prm.source_load, prm.transfer
    seed = (0 if prm.seed is None else prm.seed) if seed is None else seed
    check_gossip_params(iterations, rounds, fanout, threshold, criterion, seed, source_load=source_load)
    if transfer not in ("broadcast", "token"):
        raise BalancerError(f"transfer: must be broadcast or token, got {transfer!r}")
    me, p = comm.Get_rank(), comm.Get_size()
    speed = objects.speed
    cnt = counters if counters is not None else Counters()
    gid_in, ell_in, error = _rank_objects(objects, me)
    order = np.argsort(gid_in, kind="stable")
    gid0 = gid_in[order].astype(np.int64)
    gid, ell, home = gid0.copy(), ell_in[order], np.full(gid0.size, me, dtype=np.int64)
    dest0 = np.full(gid0.size, me, dtype=np.int64)  # where this rank's own objects are
    rng = child_stream(seed, me)  # child me of p (not all p made on each of p ranks)
    coord = turn_coordinator(seed, p)
    load = _local_load(ell)
    rows = allgather(comm, [load, float(speed), 0.0, 0.0, 0.0, float(error is not None)], clock, counters=cnt)
    if rows[:, 5].any():
        raise BalancerError(gather_error(comm, error) or "invalid gossip input on another rank")
    s, loads = rows[:, 1].copy(), rows[:, 0].copy()  # (the p × 6 rows are not kept: p of them per process)
    del rows
    x_ave = ordered_total(loads) / ordered_total(s)
    limit = threshold * x_ave
    rule = TurnRule(x_ave, threshold, criterion == "modified", source_load == "turn", objects.keep)
    history = [history_entry(0, 0, 0, 0, load_stats(loads, s, x_ave))]
    settled = is_settled(loads, s, x_ave, threshold)
    turns = coord.permutation(p)  # the same order in every iteration
    run_stage = _token_stage if transfer == "token" else _broadcast_stage
    done = 0
    for it in range(1, iterations + 1):
        if settled:
            break
        done = it
        if bulk:
            cum = _inform_bulk(comm, clock, cnt, rng, prm, load, speed, x_ave, loads, s)
        else:
            cum = _inform_stage(comm, clock, cnt, rng, prm, load, speed, x_ave)
        # transfer stage: turns in the shared order, on current loads
        stage = _Stage(turns, loads, s, limit, cum, rng, rule)
        gid, ell, home, ntr, nrej, ignored = run_stage(comm, clock, cnt, stage, (gid, ell, home), (gid0, dest0))
        load = _local_load(ell)
        cnt.iterations += 1
        loads = allgather(comm, [load, float(speed), 0.0, 0.0, 0.0, 0.0], clock, counters=cnt)[:, 0].copy()
        settled = is_settled(loads, s, x_ave, threshold)
        history.append(history_entry(it, ntr, nrej, ignored, load_stats(loads, s, x_ave)))
    dest = np.empty_like(dest0)
    dest[order] = dest0
    return LocalGossipResult(dest, history, done, settled, cnt)


# -- registry -----------------------------------------------------------------------------------
@register("grapevine", params=GrapevineParams,
          doc="Grapevine gossip (inform + transfer, criterion 6 or 6'; Pébaÿ & Lifflander 2019) on cells, L/c compared")
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
    bulk = ctx.bulk == "auto" and ClockBank.bankable([ctx.clock])
    res = grapevine_distributed(ctx.comm, RankObjects(ctx.dom.gid, ctx.dom.weight, speed=speed, keep=1),
                                GrapevineParams.of(prm), clock=ctx.clock, counters=ctx.nb.counters, seed=seed,
                                bulk=bulk)
    last = res.history[-1]
    # the report's per-iteration columns (its Tables 2.x: transfers, rejections, I), as summary.json strings
    by_it = {"imbalance_by_iteration": " ".join(f"{h['imbalance']:.6g}" for h in res.history),
             "transfers_by_iteration": " ".join(str(h["transfers"]) for h in res.history[1:]),
             "rejected_by_iteration": " ".join(str(h["rejected"]) for h in res.history[1:])}
    return Decision(dest=res.dest, iterations=res.iterations, converged=res.converged, counters=res.counters,
                    info={"criterion": prm["criterion"], "imbalance": last["imbalance"],
                          "transfers": sum(h["transfers"] for h in res.history), **by_it})
