"""Synchronous iterations, synchronous communications (SISC, 003 §II-B) for the Brusselator block iteration.

Every iteration each processor sweeps its block (:meth:`~hermes.app.brusselator.brusselator.BlockState.sweep`), sends
its border trajectory to both neighbours and waits for theirs, then all processors agree on the global residual by
an allreduce; a window ends when it is below the accuracy ε (003 Fig. 1: the iterations of all processors begin
together). Optionally, every ``every`` iterations each processor runs the line balancer with its neighbours'
current estimates (:func:`hermes.app.brusselator.line_balance.decide_transfer`), the border points move in one extra
exchange and the ghosts are exchanged again, so the iteration stays exactly block-Jacobi on the new partition.

Virtual clock
    Rank i computes for ``work / rate_i`` (rate ``speed · p · c_i``); a message sent at e arrives at
    ``e + α_ij + β_ij · bytes``; a rank continues when its last message has arrived; the allreduce follows
    :func:`~hermes.app.brusselator.iteration.tree_allreduce_times`. :func:`sisc_serial` runs all ranks in one process
    and is the oracle of :func:`sisc_mpi` (same arithmetic, same times, bit for bit).
Wall clock
    Real blocking exchanges (``sendrecv``) and ``allreduce``; a processor of relative speed ``r_i = rate_i /
    max rate`` sleeps ``(1/r_i − 1)`` times its real compute time after each sweep, to emulate a slower machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hermes.app.brusselator.blocks import BlockState
from hermes.app.brusselator.brusselator import SolverError
from hermes.app.brusselator.iteration import CONTROL_BYTES, IterConfig, Platform, BlockRecord, tree_allreduce_times
from hermes.app.brusselator.line_balance import decide_transfer

__all__ = ["SiscRank", "sisc_serial", "sisc_mpi"]

_TAG = 7301


@dataclass(frozen=True)
class Border:
    """What a rank sends its neighbour each iteration: the ghost it needs, the border zone, the load estimate."""

    pos: int
    traj: np.ndarray
    zone: object  # EdgeZone at the last level
    load: float
    count: int
    sent_at: float

    @property
    def nbytes(self) -> int:
        return int(self.traj.nbytes + self.zone.values.nbytes + CONTROL_BYTES)


class SiscRank:
    """One processor of the synchronous iteration (state and the steps both drivers call)."""

    def __init__(self, rank: int, size: int, cfg: IterConfig, bounds, rate: float):
        self.rank, self.size, self.cfg, self.rate = rank, size, cfg, float(rate)
        first = cfg.windows[0][1] + 1
        self.block = BlockState.start(cfg.problem, cfg.overlap, int(bounds[rank]), int(bounds[rank + 1]), first)
        self.block.paper = cfg.form == "paper"
        self.sides = [s for s in (-1, 1) if 0 <= rank + s < size]
        self.got: dict[int, Border] = {}
        self.record = BlockRecord(rank)
        self.residual = np.inf
        self.load = 0.0

    def sweep(self) -> float:
        """One sweep; returns the work done. Sets the residual and the load estimate of the iteration."""
        res, work = self.block.sweep()
        self.residual = res
        self.record.iterations += 1
        if self.record.iterations > self.cfg.max_iterations:
            raise SolverError(f"rank {self.rank}: more than {self.cfg.max_iterations} iterations")
        est = self.cfg.balance.estimator if self.cfg.balance is not None else "residual"
        self.load = res if est == "residual" else work / self.rate
        return work

    def border(self, side: int, sent_at: float) -> Border:
        b = self.block
        pos = b.send_pos(side)
        return Border(pos, b.trajectory(pos).copy(), b.edge_zone(side), self.load, b.n_points, sent_at)

    def receive(self, side: int, msg: Border) -> None:
        self.got[side] = msg
        if not self.block.set_ghost(side, msg.pos, msg.traj):
            raise SolverError(f"rank {self.rank}: neighbour sent point {msg.pos}, "
                              f"ghost is {self.block.ghost_pos(side)}")

    def decide(self):
        """003 Alg. 4 with the neighbours' estimates of this iteration: (side, count) or None."""
        nb = {s: (self.got[s].load, self.got[s].count) for s in self.sides}
        d = decide_transfer(self.load, self.block.n_points, nb.get(-1), nb.get(1), self.cfg.balance)
        if d is not None:
            d = (d[0], min(d[1], self.block.n_points - self.cfg.min_points))
            if d[1] < 1:
                return None
        return d

    def end_window(self, wi: int) -> None:
        b = self.block
        self.record.windows.append((wi, b.a, b.b, b.y.copy()))
        nxt = self.cfg.windows[wi + 1][1] + 1 if wi + 1 < len(self.cfg.windows) else None
        if nxt is not None:
            b.next_window(b.y[-1].copy(), nxt, self.got[-1].zone if -1 in self.sides else None,
                          self.got[1].zone if 1 in self.sides else None)

    def lb_due(self) -> bool:
        bal = self.cfg.balance
        return bal is not None and self.record.iterations % bal.every == 0


def _emulate(rate: float, top: float, seconds: float) -> None:
    if rate < top:
        time.sleep(seconds * (top / rate - 1.0))


def sisc_serial(cfg: IterConfig, platform: Platform, bounds) -> list[BlockRecord]:
    """All ranks of a virtual-clock SISC run in one process (the oracle of :func:`sisc_mpi`)."""
    p, links = platform.size, platform.links
    ranks = [SiscRank(r, p, cfg, bounds, platform.rates[r]) for r in range(p)]
    now = np.zeros(p)
    for wi in range(len(cfg.windows)):
        while True:
            ends = np.empty(p)
            for rk in ranks:
                d = rk.sweep() / rk.rate
                rk.record.compute_time += d
                rk.record.timeline.append((now[rk.rank], d, rk.block.a, rk.block.b, rk.residual))
                ends[rk.rank] = now[rk.rank] + d
                if cfg.reference is not None:
                    rk.record.errors.append((ends[rk.rank], cfg.block_error(rk.block.a, rk.block.y)))
            now = _exchange_serial(ranks, ends, links)
            res = max(rk.residual for rk in ranks)
            done = res < cfg.accuracy
            now = _allreduce(ranks, now, links)
            if done:
                for rk in ranks:
                    rk.end_window(wi)
                break
            if ranks[0].lb_due():
                moves = {rk.rank: rk.decide() for rk in ranks}
                arrive = now.copy()
                outgoing = {}
                for r, d in moves.items():
                    if d is not None:
                        outgoing[r] = (r + d[0], ranks[r].block.give(d[0], d[1]))
                for r, (dest, tr) in outgoing.items():
                    _count_transfer(ranks[r].record, ranks[dest].record, tr)
                    ranks[dest].block.take(r - dest, tr)
                    arrive[dest] = max(arrive[dest], now[r] + links.cost(r, dest, tr.nbytes, now[r]))
                for rk in ranks:  # the empty LB messages of the others
                    for s in rk.sides:
                        arrive[rk.rank] = max(arrive[rk.rank], now[rk.rank + s] + links.cost(
                            rk.rank + s, rk.rank, CONTROL_BYTES, now[rk.rank + s]))
                _wait(ranks, now, arrive)
                now = _exchange_serial(ranks, arrive, links)
    for rk in ranks:
        rk.record.time = now[rk.rank]
        rk.record.solves = rk.block.solves
    return [rk.record for rk in ranks]


def _count_transfer(src: BlockRecord, dst: BlockRecord, tr) -> None:
    src.sent_points += tr.count
    src.transfers += 1
    dst.received_points += tr.count


def _wait(ranks, now, arrive) -> None:
    for rk in ranks:
        rk.record.wait_time += arrive[rk.rank] - now[rk.rank]


def _exchange_serial(ranks: list[SiscRank], ends: np.ndarray, links) -> np.ndarray:
    msgs = {(rk.rank, s): rk.border(s, ends[rk.rank]) for rk in ranks for s in rk.sides}
    out = ends.copy()
    for rk in ranks:
        for s in rk.sides:
            m = msgs[(rk.rank + s, -s)]
            rk.receive(s, m)
            out[rk.rank] = max(out[rk.rank], m.sent_at + links.cost(rk.rank + s, rk.rank, m.nbytes, m.sent_at))
            rk.record.messages += 1
            rk.record.bytes += m.nbytes
    _wait(ranks, ends, out)
    return out


def _allreduce(ranks, now, links) -> np.ndarray:
    out = tree_allreduce_times(now, links, CONTROL_BYTES)
    _wait(ranks, now, out)
    return out


def sisc_mpi(comm, cfg: IterConfig, platform: Platform, bounds, clock: str = "virtual") -> BlockRecord:
    """One rank of a SISC run over ``comm`` (size = processors); returns this rank's record.

    ``clock='virtual'`` reproduces :func:`sisc_serial` exactly; ``'wall'`` measures real time.
    """
    r, p, links = comm.Get_rank(), comm.Get_size(), platform.links
    rk = SiscRank(r, p, cfg, bounds, platform.rates[r])
    wall = clock == "wall"
    top = float(np.max(platform.rates))
    t0 = time.perf_counter()
    now = 0.0

    def exchange(end: float) -> float:
        t = time.perf_counter()
        msgs = {s: rk.border(s, end) for s in rk.sides}
        reqs = [comm.isend(msgs[s], dest=r + s, tag=_TAG) for s in rk.sides]
        arrive = end
        for s in rk.sides:
            m = comm.recv(source=r + s, tag=_TAG)
            rk.receive(s, m)
            arrive = max(arrive, m.sent_at + links.cost(r + s, r, m.nbytes, m.sent_at))
            rk.record.messages += 1
            rk.record.bytes += m.nbytes
        for q in reqs:
            q.wait()
        if wall:
            rk.record.wait_time += time.perf_counter() - t
            return time.perf_counter() - t0
        rk.record.wait_time += arrive - end
        return arrive

    for wi in range(len(cfg.windows)):
        while True:
            t = time.perf_counter()
            work = rk.sweep()
            d = time.perf_counter() - t
            if wall:
                _emulate(rk.rate, top, d)
                d = time.perf_counter() - t
            else:
                d = work / rk.rate
            rk.record.compute_time += d
            rk.record.timeline.append((now, d, rk.block.a, rk.block.b, rk.residual))
            now = exchange(now + d)
            t = time.perf_counter()
            stamps = comm.allgather((now, rk.residual))
            if wall:
                rk.record.wait_time += time.perf_counter() - t
                now = time.perf_counter() - t0
            else:
                after = tree_allreduce_times(np.array([s[0] for s in stamps]), links, CONTROL_BYTES)[r]
                rk.record.wait_time += after - now
                now = after
            if max(s[1] for s in stamps) < cfg.accuracy:
                rk.end_window(wi)
                break
            if rk.lb_due():
                now = _lb_mpi(comm, rk, now, links, wall, t0)
                now = exchange(now)
    rk.record.time = now
    rk.record.solves = rk.block.solves
    return rk.record


def _lb_mpi(comm, rk: SiscRank, now: float, links, wall: bool, t0: float) -> float:
    """One synchronous balancing step: every rank sends each neighbour a Transfer or None."""
    r = rk.rank
    t = time.perf_counter()
    d = rk.decide()
    out = {s: None for s in rk.sides}
    if d is not None:
        out[d[0]] = rk.block.give(d[0], d[1])
        rk.record.sent_points += out[d[0]].count
        rk.record.transfers += 1
    reqs = [comm.isend((now, out[s]), dest=r + s, tag=_TAG + 1) for s in rk.sides]
    arrive = now
    for s in rk.sides:
        sent, tr = comm.recv(source=r + s, tag=_TAG + 1)
        nbytes = CONTROL_BYTES if tr is None else tr.nbytes
        arrive = max(arrive, sent + links.cost(r + s, r, nbytes, sent))
        if tr is not None:
            rk.block.take(s, tr)
            rk.record.received_points += tr.count
    for q in reqs:
        q.wait()
    if wall:
        rk.record.wait_time += time.perf_counter() - t
        return time.perf_counter() - t0
    rk.record.wait_time += arrive - now
    return arrive
