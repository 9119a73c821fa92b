"""Asynchronous iterations, asynchronous communications (AIAC, 003 §II-B, Alg. 1–3) with line balancing.

:class:`AiacRank` is one processor, modelled as 003 implements it with PM2 (§VI-A): a *main thread* that iterates
without ever waiting for data, and a *communication thread* that handles each incoming message when it arrives.

* Main thread, at each iteration boundary: install the iterate just computed, apply what the communication thread
  stored (new ghost values, border components received, a window accepted), move components to a neighbour if an
  offer was accepted, send its border values to both neighbours — unless the previous message to that neighbour
  is still in transit (003 Alg. 2, Fig. 5: no second communication of one kind while one is in progress) — and
  start the next sweep of its block with whatever ghost values have arrived (003 Alg. 1: ``X_j^{s_j^i(t)}``).
* Communication thread, at each arrival: store data (003 Alg. 6: only if its global position is the one expected),
  answer balancing offers, relay and combine the detection messages.

Every message is an :class:`Event` stamped with its send time and arrival time ``send + α_ij + β_ij · bytes``.
The drivers: :func:`aiac_serial` (a discrete-event simulation in one process) and, in
:mod:`hermes.app.brusselator.aiac_mpi`, the same ranks one per MPI process, in virtual time (bit-identical to
:func:`aiac_serial`) or in real time.

Balancing (003 §VI-B, Alg. 3–4)
    After ``every`` iterations a processor tries at each iteration, with the estimates its neighbours last sent
    (residual or iteration time, :mod:`hermes.app.brusselator.line_balance`), until it moves components. 003 sends the
    components at once; two neighbours deciding at about the same time would then send each other their border
    components and break the line. hermes adds a one-message handshake: OFFER(count) → ACCEPT or DECLINE →
    TRANSFER (or CANCEL). A processor with an offer out, or waiting for accepted components, declines offers,
    except that when two neighbours offer each other the left one's offer wins. The sender drops the components
    when it sends them (its arrays are resized at the end of that iteration, 003 Alg. 3); the receiver adds them
    when they arrive; in between nobody iterates on them (003 Fig. 8: "their error stays the same").

    The residual estimator is read by one of two rules (``LineBalance.residual``,
    :mod:`hermes.app.brusselator.line_balance`). ``last`` is 003's: the residual of the last iteration, neighbours'
    estimates as last received. ``mean`` is hermes' variant for unequal machines (measured on
    ``scenarios/bahi-grid.yaml``, docs/ASYNC.md): the residual averaged over the last ``every`` iterations of the
    current block (:func:`hermes.app.brusselator.line_balance.residual_estimate`), a decision only after ``every``
    iterations of the current block, as receiver as well as sender, and a neighbour's estimate counted only if it was
    made after the last transfer on the link between them (every estimate carries the number of transfers its sender has
    made on that link). Under ``last`` a fast processor's residual — zero between its neighbours' messages, a spike
    after each — decides by when it was read, points flow to the slowest machine and the Table I run does not end;
    without the freshness rule a processor could send again on the estimate its slow neighbour made before
    receiving the last components. The time estimator is 003's under both rules.

Global convergence detection (the rule, and why it never stops early)
    The detection is the snapshot-and-verify scheme of the global-residual detection of Magoulès &
    Gbikpi-Benissan (*Distributed convergence detection based on global residual error under asynchronous
    iterations*, IEEE TPDS 29(4), 2018), on the line's spanning tree rooted at the middle processor; 003 itself
    leaves detection out ("not directly involved", §VI-A). Local convergence only triggers it:

    1. A processor is *locally converged* when its last ``persistence`` residuals are below ε. Each sends its
       parent UP(round, ok) = own ∧ children's, whenever that changes.
    2. When the root sees ok for the current round it starts a snapshot: SNAP(round) goes down the tree. Each
       processor records its current block X_i (deferred while components it accepted are in transit, and with no
       balancing from then until the verdict, so the recorded blocks partition the domain exactly) and sends
       each neighbour the recorded ghost trajectory that neighbour needs.
    3. With its neighbours' recorded ghosts, each processor evaluates ``r_i = ‖F_i(X) − X_i‖∞`` on the recorded
       X (one extra block solve) and the maxima go up the tree.
    4. The root decides: ``max r_i < ε`` ends the window with X as its solution (VERDICT ok, down the tree);
       otherwise the processors keep iterating and a new round needs new local convergence.

    The accepted X satisfies ``‖F(X) − X‖∞ < ε`` *by evaluation*, whatever messages are in flight: messages
    in transit can only change later iterates, not the recorded X or its evaluation. So detection cannot stop
    early; the rule that stops as soon as every processor has reported local convergence (without step 3)
    can, and the rounds that fail verification (``rounds_failed``) are the times it would have.

Determinism
    An :class:`AiacRank` is a deterministic function of the sequence of its events: arrivals and its own iteration
    boundaries, in the order (time, arrivals before the boundary, sender, sequence number). Every virtual-time driver
    hands each rank exactly that sequence, so runs are identical bit for bit whatever the processes' real speeds.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hermes.app.brusselator.blocks import BlockState, EdgeZone, SweepRun, Transfer
from hermes.app.brusselator.brusselator import SolverError
from hermes.app.brusselator.iteration import (CONTROL_BYTES, Event, IterConfig, LinkModel, Platform, BlockRecord,
                                              VirtualTimer, WallTimer, line_tree)
from hermes.app.brusselator.line_balance import decide_transfer, residual_estimate

__all__ = ["AiacRank", "aiac_serial", "CONTROL_KINDS"]

#: events the communication thread may answer by sending (the others only store data)
CONTROL_KINDS = frozenset({"up", "snap", "snapdata", "result", "verdict", "fzone", "offer", "accept", "decline", "transfer",
                           "cancel"})


@dataclass
class _Snap:
    round: int
    y: np.ndarray | None = None
    inputs: tuple | None = None
    fy: np.ndarray | None = None  # F_i(X), the window's solution if the round succeeds
    nbr: dict = field(default_factory=dict)
    residual: float | None = None
    verify: bool = False  # F_i(X) is due: the next sweep uses the recorded ghosts
    verifying: bool = False  # the current sweep is that evaluation
    children: dict = field(default_factory=dict)
    reported: bool = False


class AiacRank:
    """One processor of the asynchronous iteration (module docstring).

    The drivers call :meth:`begin` once at time 0, :meth:`on_arrival` for every event at its arrival time and
    :meth:`on_boundary` at :attr:`next_end`; each returns the events sent. :attr:`finished` ends the rank.
    """

    def __init__(self, rank: int, size: int, cfg: IterConfig, bounds, rate: float, links: LinkModel,
                 timer: VirtualTimer | WallTimer | None = None):
        self.rank, self.size, self.cfg, self.links = rank, size, cfg, links
        self.timer = timer or VirtualTimer(rate)
        first = cfg.windows[0][1] + 1
        self.block = BlockState.start(cfg.problem, cfg.overlap, int(bounds[rank]), int(bounds[rank + 1]), first)
        self.block.paper = cfg.form == "paper"
        self.wi = 0
        self.sides = [s for s in (-1, 1) if 0 <= rank + s < size]
        self.parent, self.children = line_tree(rank, size)
        # detection
        self.round = 0
        self.quiet = 0
        self.child_ok: dict[int, tuple[int, bool]] = {}
        self.sent_ok: tuple[int, bool] | None = None
        self.snap_req = -1
        self.snap: _Snap | None = None
        self.early: dict[int, dict] = {}
        self.switch: tuple | None = None  # accepted window: (final values, left zone, right zone)
        self.abandon = False  # the current sweep is dropped for a verification
        self.accepting: tuple[int, np.ndarray] | None = None  # (round, F_i(X)) until the neighbours' zones arrive
        self.fzones: dict[int, dict[int, Any]] = {}  # round -> side -> neighbour's border zone of F(X)
        self.rounds: list[tuple[int, float, float, bool]] = []  # root: (round, time, max residual, ok)
        # balancing
        self.countdown = cfg.balance.every if cfg.balance is not None else 0
        self.offer: tuple[int, int, int] | None = None  # (id, side, count)
        self.accepted: tuple[int, int] | None = None  # (offer id, round) to serve at the next boundary
        self.expect: int | None = None
        self.incoming: dict[int, Transfer] = {}
        self.nb_load: dict[int, tuple[float | None, int, int]] = {}  # side -> (estimate, points, link moves)
        self.load: float | None = None
        self.residuals: list[float] = []  # residuals of the current block's iterations (the `mean` rule)
        self.moves = {s: 0 for s in self.sides}  # transfers on the link to each side, sent or received
        # data
        self.pending: dict[int, tuple] = {}  # side -> (window, sent, pos, traj): latest border data received
        self.busy_until = {s: -math.inf for s in self.sides}
        self.last_data: dict[int, tuple] = {}
        self.last_load: dict[int, tuple] = {}
        self.link_free_hook = None  # wall driver: side -> bool
        # time line
        self.seq = 0
        self.t = 0.0
        self.next_end = math.inf
        self.run: SweepRun | None = None
        self.sweep_start = 0.0
        self.out: list[Event] = []
        self.finished = False
        self.record = BlockRecord(rank)

    # -- driver interface ---------------------------------------------------------------------------------
    def begin(self, t: float = 0.0) -> list[Event]:
        """Start the first sweep at time ``t``."""
        self.t, self.out = float(t), []
        self._start_sweep()
        return self.out

    def on_arrival(self, ev: Event, t: float | None = None) -> list[Event]:
        """The communication thread handles ``ev`` at its arrival (or at ``t``, wall clock)."""
        self.t, self.out = float(ev.arrival if t is None else t), []
        if not self.finished:
            self._handle(ev)
        return self.out

    def on_boundary(self, t: float | None = None) -> list[Event]:
        """End of the current time step of the sweep (at :attr:`next_end`, or ``t``).

        Within a sweep the next step starts, with the ghost values that have arrived by now (the data of 003
        Alg. 1 "available at time t", read per time step); at the end of the sweep the main thread does its work
        (module docstring) and starts the next sweep.
        """
        self.t, self.out = float(self.next_end if t is None else t), []
        if self.finished:
            return self.out
        if self.run.k < self.block.levels - 1 and not (self.abandon or self.switch is not None):
            self._step()
            return self.out
        self._commit()
        if self.switch is not None:
            self._switch_window()
        for s in sorted(self.incoming):
            tr = self.incoming.pop(s)
            self.block.take(s, tr)
            self._moved(s)
            self.record.received_points += tr.count
            self.expect = None
            self.quiet = 0
        self._try_snapshot()
        if self.accepted is not None:
            self._serve_accept()
        self._send_borders()
        self._send_up()
        self._maybe_initiate()
        self._try_balance()
        self._start_sweep()
        return self.out

    # -- messages -----------------------------------------------------------------------------------------
    def _send(self, dest: int, kind: str, payload: Any = None, nbytes: int = CONTROL_BYTES) -> Event:
        ev = Event(self.t + self.links.cost(self.rank, dest, nbytes, self.t), self.rank, self.seq, dest, kind,
                   payload, self.t, int(nbytes))
        self.seq += 1
        self.out.append(ev)
        self.record.messages += 1
        self.record.bytes += nbytes
        return ev

    def _link_free(self, side: int) -> bool:
        if self.link_free_hook is not None:
            return self.link_free_hook(side)
        return self.t >= self.busy_until[side]

    def _handle(self, ev: Event) -> None:
        side, kind, pl = ev.sender - self.rank, ev.kind, ev.payload
        if kind == "data":
            window, pos, traj, stamp = pl
            self.nb_load[side] = stamp
            old = self.pending.get(side)
            if window >= self.wi and (old is None or (old[0], old[1]) <= (window, ev.sent)):
                self.pending[side] = (window, ev.sent, pos, traj)
        elif kind == "load":
            self.nb_load[side] = pl
        elif kind == "up":
            self.child_ok[ev.sender] = pl
            self._send_up()
            self._maybe_initiate()
        elif kind == "snap":
            if pl == self.round and self.snap_req < pl:
                self.snap_req = pl
                for c in self.children:
                    self._send(c, "snap", pl)
                self._try_snapshot()
        elif kind in ("snapdata", "result"):
            rnd, value = pl
            if rnd == self.round:
                self.early.setdefault(rnd, {}).setdefault(kind, {})[side] = value
                self._progress()
        elif kind == "fzone":
            rnd, zone = pl
            self.fzones.setdefault(rnd, {})[side] = zone
            self._maybe_switch()
        elif kind == "verdict":
            rnd, ok = pl
            if rnd == self.round:
                for c in self.children:
                    self._send(c, "verdict", pl)
                self._apply_verdict(ok)
        elif kind in ("offer", "accept", "decline", "transfer", "cancel"):
            self._handle_balance(side, kind, pl)
        else:
            raise SolverError(f"unknown event kind {kind!r}")

    # -- the main thread ----------------------------------------------------------------------------------
    def _start_sweep(self) -> None:
        sn = self.snap
        frozen = None
        if sn is not None and sn.verify:
            # evaluate F_i at the recorded state: F_i depends on X only through the ghosts, so this sweep with the
            # neighbours' recorded ghosts gives F_i(X); newer data waits in `pending` for the next sweep
            frozen = tuple(sn.nbr[s][1] if s in self.sides else None for s in (-1, 1))
            sn.verify, sn.verifying = False, True
        self.run = self.block.begin_sweep(frozen)
        self.sweep_start = self.t
        self._step()
        if self.block.paper and frozen is None and -1 in self.sides and isinstance(self.timer, VirtualTimer):
            self._send_left_early()

    def _send_left_early(self) -> None:
        """003 Alg. 2: the first local components go to the left neighbour once computed (after component
        StartC+2, i.e. after 3 of the block's 2n components), unless a left communication is in progress.

        The paper's form computes the sweep at its start (its ghosts are read then), so the values are known; they
        leave at the share of the sweep's duration that the paper's component loop needs to reach them.
        """
        b, run = self.block, self.run
        comps = 2 * run.ext.shape[1]
        now = self.t
        self.t = now + (self.next_end - now) * min(3, comps) / comps
        try:
            pos = b.send_pos(-1)
            self._send_data(-1, pos, run.ext[:, pos - b.lo])
        finally:
            self.t = now

    def _send_data(self, side: int, pos: int, traj: np.ndarray) -> bool:
        """Send the border trajectory of point ``pos`` to the neighbour on ``side`` if it changed since the last one
        sent and no data message to it is in transit (003 Alg. 2); True if it was sent (with the load estimate)."""
        last = self.last_data.get(side)
        changed = last is None or last[0] != (self.wi, pos) or not np.array_equal(last[1], traj)
        if not (changed and self._link_free(side)):
            return False
        traj = traj.copy()
        n = self.block.n_points
        stamp = (self.load, n, self.moves[side])
        ev = self._send(self.rank + side, "data", (self.wi, pos, traj, stamp), traj.nbytes + CONTROL_BYTES)
        self.busy_until[side] = ev.arrival
        self.last_data[side] = ((self.wi, pos), traj)
        self.last_load[side] = stamp
        return True

    def _step(self) -> None:
        """Compute the next time step of the sweep (its duration decides when it ends)."""
        if self.run.frozen is None:
            for s in list(self.pending):
                window, _, pos, traj = self.pending[s]
                if window == self.wi:
                    self.block.set_ghost(s, pos, traj)
                if window <= self.wi:
                    del self.pending[s]
        t0 = time.perf_counter()
        work, computed = self.block.sweep_step(self.run)
        self.next_end = self.t + self.timer.step(self.run.k, work, computed, time.perf_counter() - t0)

    def _commit(self) -> None:
        rec = self.record
        dur = self.t - self.sweep_start
        rec.iterations += 1
        rec.compute_time += dur
        if rec.iterations > self.cfg.max_iterations:
            raise SolverError(f"rank {self.rank}: more than {self.cfg.max_iterations} iterations")
        if self.switch is not None or self.abandon:  # abandoned: window accepted, or a verification first
            self.abandon = False
            rec.timeline.append((self.sweep_start, dur, self.block.a, self.block.b, math.nan))
            return
        sw = self.block.end_sweep(self.run)
        rec.timeline.append((self.sweep_start, dur, self.block.a, self.block.b, sw.residual))
        bal = self.cfg.balance
        if bal is not None and bal.averaged:  # hermes' `mean` rule
            self.residuals.append(sw.residual)
            del self.residuals[:-bal.every]
            self.load = residual_estimate(self.residuals, bal.every)
        elif bal is None or bal.estimator == "residual":  # 003's `last` rule
            self.load = sw.residual
        else:
            self.load = dur
        self.block.commit(sw)
        if self.cfg.reference is not None:
            rec.errors.append((self.t, self.cfg.block_error(self.block.a, self.block.y)))
        self.quiet = self.quiet + 1 if sw.residual < self.cfg.accuracy else 0
        sn = self.snap
        if sn is not None and sn.verifying:
            sn.verifying = False
            rec.verifications += 1
            self._evaluated(sn, sw.y)

    def _send_borders(self) -> None:
        b = self.block
        early = b.paper and isinstance(self.timer, VirtualTimer)  # the left border left during the sweep
        for s in self.sides:
            stamp = (self.load, b.n_points, self.moves[s])
            if not (early and s < 0) and self._send_data(s, b.send_pos(s), b.trajectory(b.send_pos(s))):
                continue
            if self.last_load.get(s) != stamp:
                self._send(self.rank + s, "load", stamp)
                self.last_load[s] = stamp

    def _switch_window(self) -> None:
        final, left, right = self.switch
        self.switch = None
        self.quiet = 0
        levels = self.cfg.windows[self.wi + 1][1] + 1
        self.block.next_window(final, levels, left, right)
        self.wi += 1

    # -- balancing (003 Alg. 3–5 with a handshake) ----------------------------------------------------------
    def _frozen(self) -> bool:
        """No balancing from a snapshot request until the verdict (the snapshot must partition the domain)."""
        return self.snap is not None or self.snap_req == self.round or self.accepting is not None

    def _handle_balance(self, side: int, kind: str, pl) -> None:
        nb = self.rank + side
        if kind == "offer":
            oid, _ = pl
            busy = self.expect is not None or self.accepted is not None or self._frozen() or self.switch is not None
            if self.offer is not None and self.offer[1] == side and side < 0 and not busy:
                self.offer = None  # offers crossing on one link: the left neighbour's wins
            if self.offer is not None or busy:
                self._send(nb, "decline", oid)
            else:
                self.expect = side
                self._send(nb, "accept", oid)
        elif kind == "accept":
            if self.offer is not None and self.offer[0] == pl:
                self.accepted = (pl, self.round)
            else:
                self._send(nb, "cancel", pl)
        elif kind == "decline":
            if self.offer is not None and self.offer[0] == pl:
                self.offer = None
        elif kind == "transfer":
            self.incoming[side] = pl
        elif kind == "cancel":
            self.expect = None
            self._try_snapshot()

    def _serve_accept(self) -> None:
        """Send the accepted components (main thread: the arrays are resized here, 003 Alg. 3) or cancel."""
        oid, rnd = self.accepted
        _, side, count = self.offer
        self.accepted, self.offer = None, None
        count = min(count, self.block.n_points - self.cfg.min_points)
        if self.snap is not None or rnd != self.round or count < 1:
            self._send(self.rank + side, "cancel", oid)
            return
        tr = self.block.give(side, count)
        self._moved(side)
        self._send(self.rank + side, "transfer", tr, tr.nbytes)
        self.record.sent_points += tr.count
        self.record.transfers += 1
        self.quiet = 0

    def _moved(self, side: int) -> None:
        """The block changed by a transfer on the link to ``side``: under the ``mean`` rule, estimates made before
        no longer count (003's ``last`` keeps them)."""
        self.moves[side] += 1
        if self.cfg.balance is not None and self.cfg.balance.averaged:
            self.residuals.clear()
            self.load = None  # unknown until an iteration of the new block

    def _try_balance(self) -> None:
        bal = self.cfg.balance
        if bal is None:
            return
        if self.countdown > 0:
            self.countdown -= 1
            return
        if (self.offer is not None or self.expect is not None or self._frozen() or self.load is None
                or self.incoming or bal.averaged and len(self.residuals) < bal.every):
            return
        known = {}  # a neighbour's estimate last received (003's `last`); under `mean`, only if made on the blocks
        for s in self.sides:  # as they are since the last transfer between them. None: its first iteration has not
            nb = self.nb_load.get(s)  # ended (003's form sends the left border during it), no estimate yet
            if nb is not None and nb[0] is not None and (not bal.averaged or nb[2] == self.moves[s]):
                known[s] = nb[:2]
        d = decide_transfer(self.load, self.block.n_points, known.get(-1), known.get(1), bal)
        if d is None:
            return
        count = min(d[1], self.block.n_points - self.cfg.min_points)
        if count >= 1:
            self.offer = (self.seq, d[0], count)
            self._send(self.rank + d[0], "offer", (self.seq, count))
            self.countdown = bal.every

    # -- detection ----------------------------------------------------------------------------------------
    def _subtree_ok(self) -> bool:
        return (self.quiet >= self.cfg.persistence and self.snap is None and self.switch is None
                and self.accepting is None
                and all(self.child_ok.get(c) == (self.round, True) for c in self.children))

    def _send_up(self) -> None:
        if self.parent is None:
            return
        state = (self.round, self._subtree_ok())
        if state != self.sent_ok:
            self._send(self.parent, "up", state)
            self.sent_ok = state

    def _maybe_initiate(self) -> None:
        if self.parent is None and self.snap_req < self.round and self._subtree_ok():
            self.snap_req = self.round
            for c in self.children:
                self._send(c, "snap", self.round)
            self._try_snapshot()

    def _try_snapshot(self) -> None:
        """Record the last completed iterate (not while accepted components are on their way)."""
        if self.snap_req != self.round or self.snap is not None or self.expect is not None or self.finished:
            return
        b = self.block
        self.snap = _Snap(self.round, b.y.copy(), b.inputs)
        for s in self.sides:
            pos = b.send_pos(s)
            traj = b.trajectory(pos).copy()
            self._send(self.rank + s, "snapdata", (self.round, (pos, traj)), traj.nbytes + CONTROL_BYTES)
        self._progress()

    def _progress(self) -> None:
        sn = self.snap
        if sn is None:
            return
        early = self.early.get(self.round, {})
        sn.nbr.update(early.get("snapdata", {}))
        sn.children.update(early.get("result", {}))
        if sn.residual is None and not (sn.verify or sn.verifying) and all(s in sn.nbr for s in self.sides):
            for s in self.sides:
                if sn.nbr[s][0] != self.block.ghost_pos(s):
                    raise SolverError(f"rank {self.rank}: snapshot ghost {sn.nbr[s][0]}, "
                                      f"expected {self.block.ghost_pos(s)}")
            left, right = (sn.nbr[s][1] if s in sn.nbr else None for s in (-1, 1))
            if self.block.is_fixed(sn.inputs, left, right):
                self._evaluated(sn, sn.y)
                return
            sn.verify = True  # evaluated by the next sweep (see _start_sweep) ...
            if 2 * self.run.k <= self.block.levels - 1:
                self.abandon = True  # ... started now if the current sweep is at most half done
                self.next_end = self.t
        self._report()

    def _evaluated(self, sn: _Snap, fy: np.ndarray) -> None:
        """``F_i(X)`` is known: the residual of the round, and F's border zones for the neighbours' next window."""
        sn.fy = fy
        sn.residual = float(np.max(np.abs(fy - sn.y))) if fy.size else 0.0
        if self.wi + 1 < len(self.cfg.windows):
            b = self.block
            for s in self.sides:
                zone = b.edge_zone(s)
                zone = EdgeZone(zone.start, fy[-1, zone.start - b.a:zone.start - b.a + len(zone.values)].copy())
                self._send(self.rank + s, "fzone", (sn.round, zone), zone.values.nbytes + CONTROL_BYTES)
        self._report()

    def _maybe_switch(self) -> None:
        """Start the next window once it is accepted and both neighbours' zones of F(X) are here."""
        if self.accepting is None:
            return
        rnd, fy = self.accepting
        zones = self.fzones.get(rnd, {})
        if not all(s in zones for s in self.sides):
            return
        self.accepting = None
        self.fzones.pop(rnd, None)
        self.switch = (fy[-1].copy(), zones.get(-1), zones.get(1))
        self.next_end = min(self.next_end, self.t)  # abandon the sweep (useless now)

    def _report(self) -> None:
        sn = self.snap
        if sn is None or sn.residual is None or sn.reported:
            return
        kids = [c - self.rank for c in self.children]
        if not all(k in sn.children for k in kids):
            return
        value = max([sn.residual, *(sn.children[k] for k in kids)])
        sn.reported = True
        if self.parent is not None:
            self._send(self.parent, "result", (self.round, value))
            return
        ok = value < self.cfg.accuracy
        self.rounds.append((self.round, self.t, value, ok))
        for c in self.children:
            self._send(c, "verdict", (self.round, ok))
        self._apply_verdict(ok)

    def _apply_verdict(self, ok: bool) -> None:
        sn = self.snap
        if ok:
            if sn is None or sn.fy is None:
                raise SolverError(f"rank {self.rank}: window accepted without an evaluated snapshot")
            b = self.block
            self.record.windows.append((self.wi, b.a, b.b, sn.fy))
            if self.wi + 1 == len(self.cfg.windows):
                self.finished = True
                self.next_end = math.inf
                self.record.time = self.t
                self.record.solves = self.block.solves
            else:
                self.accepting = (self.round, sn.fy)
                self._maybe_switch()
        self.early.pop(self.round, None)
        self.round += 1
        self.snap = None
        self.quiet = 0


def aiac_serial(cfg: IterConfig, platform: Platform, bounds) -> tuple[list[BlockRecord], list]:
    """All processors of a virtual-time AIAC run in one process: a discrete-event simulation.

    Events (arrivals and iteration boundaries) are processed in global time order; per rank that is the order
    (time, arrivals before the boundary, sender, sequence) the MPI driver reproduces. Returns the records and the
    root's detection rounds (round, time, max residual, accepted).
    """
    p = platform.size
    ranks = [AiacRank(r, p, cfg, bounds, platform.rates[r], platform.links) for r in range(p)]
    heap: list = []
    scheduled = [math.inf] * p

    def push(r: int, events: list[Event]) -> None:
        for ev in events:
            heapq.heappush(heap, (ev.arrival, ev.dest, 0, ev.sender, ev.seq, ev))
        rk = ranks[r]
        if not rk.finished and rk.next_end != scheduled[r]:
            scheduled[r] = rk.next_end
            heapq.heappush(heap, (rk.next_end, r, 1, r, -1, None))

    for r in range(p):
        push(r, ranks[r].begin(0.0))
    while heap:
        t, r, kind, _, _, ev = heapq.heappop(heap)
        rk = ranks[r]
        if rk.finished:
            continue
        if kind == 0:
            out = rk.on_arrival(ev)
        elif t == rk.next_end:
            scheduled[r] = math.inf
            out = rk.on_boundary()
        else:
            continue
        push(r, out)
    if not all(rk.finished for rk in ranks):
        raise SolverError("the asynchronous simulation ran out of events before convergence")
    return [rk.record for rk in ranks], ranks[(p - 1) // 2].rounds
