"""One processor's block of the Brusselator block iteration (see :mod:`hermes.app.brusselator.brusselator`).

:class:`BlockState` holds the block ``[a, b)`` of a line partition during a window: its iterate over the window's
time levels, the latest ghost trajectories of the points ``a − δ − 1`` and ``b + δ``, and the starting values of
its overlap zones. A sweep ``X_i ← F_i(X_i, ghosts)`` runs step by step (:meth:`BlockState.begin_sweep`,
:meth:`~BlockState.sweep_step`, :meth:`~BlockState.end_sweep`) so that an asynchronous processor can use ghost
values that arrive during it; a step whose ghost values equal those of the solve that produced the current iterate
is taken from that solve (F is a pure function). :meth:`~BlockState.give` and :meth:`~BlockState.take` move border
points to a neighbour with what it needs for its new border (003 Alg. 3–5: "the first NbToSend + 2 data"), and
:meth:`~BlockState.next_window` starts a window from the accepted values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.app.brusselator.brusselator import Brusselator, SolverError, implicit_step

__all__ = ["BlockState", "SweepRun", "Sweep", "Transfer", "EdgeZone"]


@dataclass(frozen=True)
class _Solve:
    """A block solve: the extended trajectory, the ghost values used at each level and the Newton counts."""

    ext: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    newton: NDArray[np.int64]


@dataclass
class SweepRun:
    """A sweep in progress (:meth:`BlockState.begin_sweep`): levels 0..k computed."""

    ext: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    newton: NDArray[np.int64]
    frozen: tuple | None = None
    k: int = 0
    reuse: bool = True


@dataclass(frozen=True)
class Sweep:
    """A finished sweep of a block, not yet installed (:meth:`BlockState.end_sweep`)."""

    y: NDArray[np.float64]
    residual: float
    work: float
    solve: _Solve
    solved: bool


@dataclass(frozen=True)
class EdgeZone:
    """A block's border values sent to a neighbour: points ``[start, start + len(values))`` at one time level."""

    start: int
    values: NDArray[np.float64]  # (k, 2)


@dataclass(frozen=True)
class Transfer:
    """Border points moved to a neighbour (003 Alg. 4: "the first NbToSend+2 data").

    ``points`` are the moved points ``[start, start + count)`` with their current iterate over the window; the
    receiver's new overlap zone on that side (``zone``: starting values) and new ghost (``ghost_pos``,
    ``ghost``: trajectory) come with them — the "+2 for data dependencies" of the paper.
    """

    window: int
    start: int
    points: NDArray[np.float64]  # (m + 1, count, 2)
    zone: EdgeZone
    ghost_pos: int  # −1: the physical boundary
    ghost: NDArray[np.float64] | None

    @property
    def count(self) -> int:
        return int(self.points.shape[1])

    @property
    def nbytes(self) -> int:
        g = 0 if self.ghost is None else self.ghost.nbytes
        return int(self.points.nbytes + self.zone.values.nbytes + g + 32)


@dataclass
class BlockState:
    """One processor's block in the current window (see the module docstring).

    Attributes
    ----------
    a, b : int
        Owned points ``[a, b)``.
    y : ndarray, shape (m + 1, b − a, 2)
        Current iterate over the window (row 0: the window's starting values, never changed by a sweep).
    zone_left, zone_right : ndarray
        Starting values of the overlap points ``[lo, a)`` and ``[b, hi)``.
    ghost_left, ghost_right : ndarray or None
        Latest known trajectories of the points ``lo − 1`` and ``hi`` (None: physical boundary).
    """

    problem: Brusselator
    overlap: int
    window: int
    a: int
    b: int
    y: NDArray[np.float64]
    zone_left: NDArray[np.float64]
    zone_right: NDArray[np.float64]
    ghost_left: NDArray[np.float64] | None
    ghost_right: NDArray[np.float64] | None
    cache: _Solve | None = None  # the solve that produced y (None once y has changed otherwise)
    sweeps: int = 0
    solves: int = 0
    paper: bool = False  # 003 Alg. 2's sweep (IterConfig.form "paper"): see sweep_step

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def start(cls, problem: Brusselator, overlap: int, a: int, b: int, levels: int) -> BlockState:
        """The first window's block: initial values (003 §V), ghosts and zones from the initial condition."""
        init = problem.initial()
        return cls._fresh(problem, overlap, 0, a, b, levels, init, problem.n)

    @classmethod
    def _fresh(cls, problem, overlap, window, a, b, levels, start_values, n_pts) -> BlockState:
        """A window's block whose iterate starts constant in time (``start_values`` indexed by global point)."""
        lo, hi = max(a - overlap, 0), min(b + overlap, n_pts)
        const = lambda k: np.tile(start_values[k], (levels, 1))  # noqa: E731
        return cls(problem, overlap, window, a, b, np.tile(start_values[a:b], (levels, 1, 1)),
                   start_values[lo:a].copy(), start_values[b:hi].copy(),
                   None if lo == 0 else const(lo - 1), None if hi == n_pts else const(hi))

    # -- geometry -----------------------------------------------------------------------------------------
    @property
    def n_points(self) -> int:
        return self.b - self.a

    @property
    def levels(self) -> int:
        return self.y.shape[0]

    @property
    def lo(self) -> int:
        return max(self.a - self.overlap, 0)

    @property
    def hi(self) -> int:
        return min(self.b + self.overlap, self.problem.n)

    def ghost_pos(self, side: int) -> int:
        """Global index of the ghost on ``side`` (−1 left, +1 right); −1 when it is the physical boundary."""
        if side < 0:
            return self.lo - 1 if self.lo > 0 else -1
        return self.hi if self.hi < self.problem.n else -1

    def send_pos(self, side: int) -> int:
        """The point the neighbour on ``side`` needs as its ghost: ``a + δ`` (left), ``b − 1 − δ`` (right)."""
        return self.a + self.overlap if side < 0 else self.b - 1 - self.overlap

    def trajectory(self, pos: int) -> NDArray[np.float64]:
        """This block's current trajectory of its owned point ``pos``."""
        return self.y[:, pos - self.a]

    def edge_zone(self, side: int, level: int = -1) -> EdgeZone:
        """Values at time ``level`` of the δ + 1 border points the neighbour on ``side`` overlaps or uses as ghost."""
        if side < 0:
            start, stop = self.a, min(self.a + self.overlap + 1, self.b)
        else:
            start, stop = max(self.b - self.overlap - 1, self.a), self.b
        return EdgeZone(start, self.y[level, start - self.a:stop - self.a].copy())

    # -- the iteration ------------------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple | None:
        """Ghost values (left, right), shape (m + 1, 2) each, of the solve that produced :attr:`y` (or None)."""
        return None if self.cache is None else (self.cache.left, self.cache.right)

    def ghost_values(self, side: int) -> NDArray[np.float64]:
        """Current ghost trajectory on ``side``, the boundary values for the physical boundary."""
        g = self.ghost_left if side < 0 else self.ghost_right
        return self.problem.boundary(self.levels) if g is None else g

    def begin_sweep(self, frozen: tuple | None = None) -> SweepRun:
        """Start ``X_i ← F_i(X_i, ghosts)``; the steps (:meth:`sweep_step`) read the ghosts when they are computed.

        ``frozen``: (left, right) trajectories to use instead (None entries: the physical boundary).
        """
        init = np.concatenate([self.zone_left, self.y[0], self.zone_right])
        m = self.levels - 1
        ext = np.empty((m + 1,) + init.shape)
        ext[0] = init
        if frozen is not None:
            frozen = tuple(self.problem.boundary(self.levels) if g is None else g for g in frozen)
        return SweepRun(ext, np.empty((m + 1, 2)), np.empty((m + 1, 2)), np.zeros(m, dtype=np.int64), frozen)

    def sweep_step(self, run: SweepRun) -> tuple[float, bool]:
        """Compute the next level of a sweep with the ghost values known now; returns (work, computed).

        While every level so far used the same ghost values as the solve that produced :attr:`y`, the cached level
        is taken instead of solving (F is a pure function; the work is the same, ``computed`` False).
        """
        if self.paper:
            return self._paper_sweep(run)
        k = run.k + 1
        left = (run.frozen[0] if run.frozen else self.ghost_values(-1))[k]
        right = (run.frozen[1] if run.frozen else self.ghost_values(1))[k]
        run.left[k], run.right[k] = left, right
        c = self.cache
        if run.reuse and c is not None and np.array_equal(c.left[k], left) and np.array_equal(c.right[k], right):
            run.ext[k], run.newton[k - 1] = c.ext[k], c.newton[k - 1]
            computed = False
        else:
            run.reuse = False
            run.ext[k], run.newton[k - 1] = implicit_step(run.ext[k - 1], left, right, self.problem, k)
            computed = True
        run.k = k
        return float(run.newton[k - 1]) * run.ext.shape[1], computed

    def _paper_sweep(self, run: SweepRun) -> tuple[float, bool]:
        """003 Alg. 2's ``Ynew[j,t] = Solve(Yold[j,t])``: the whole sweep at once, with the ghosts known at its start.

        Newton starts at every level from the previous iterate (:meth:`previous_ext`), so a block whose ghosts
        barely moved converges in one iteration; the work is the Newton iterations actually done (no reuse of a
        cached solve: the paper's processor solves again). Compiled kernel: :mod:`hermes.app.brusselator.kernel`.
        """
        from hermes.app.brusselator.kernel import sweep

        left = run.frozen[0] if run.frozen else self.ghost_values(-1)
        right = run.frozen[1] if run.frozen else self.ghost_values(1)
        run.left[:], run.right[:] = left, right
        ext, newton = sweep(self.previous_ext(), left, right, self.problem, from_iterate=True)
        run.ext[1:] = ext[1:]
        run.newton[:] = newton
        run.k, run.reuse = self.levels - 1, False
        return float(newton.sum()) * ext.shape[1], True

    def previous_ext(self) -> NDArray[np.float64]:
        """The previous iterate on ``[lo, hi)`` over the window: the last solve's, or the owned iterate between the
        overlap zones held at their starting values (after a transfer, or before the first sweep)."""
        c = self.cache
        if c is not None and c.ext.shape[1] == self.hi - self.lo:
            return c.ext
        m1 = self.levels
        zl = np.broadcast_to(self.zone_left, (m1,) + self.zone_left.shape)
        zr = np.broadcast_to(self.zone_right, (m1,) + self.zone_right.shape)
        return np.concatenate([zl, self.y, zr], axis=1)

    def end_sweep(self, run: SweepRun) -> Sweep:
        """The finished sweep: new owned iterate, its residual ‖X_i^k − X_i^{k−1}‖∞ and total work."""
        run.left[0], run.right[0] = self.ghost_values(-1)[0], self.ghost_values(1)[0]
        lo = self.lo
        new = run.ext[:, self.a - lo:self.b - lo]
        residual = float(np.max(np.abs(new - self.y))) if new.size else 0.0
        return Sweep(new, residual, float(run.newton.sum()) * run.ext.shape[1],
                     _Solve(run.ext, run.left, run.right, run.newton), not run.reuse)

    def commit(self, sw: Sweep) -> None:
        """Install a finished sweep's iterate (the block must not have changed since it began)."""
        self.sweeps += 1
        self.y, self.cache = sw.y, sw.solve
        self.solves += int(sw.solved)

    def sweep(self) -> tuple[float, float]:
        """One whole iteration with the current ghosts; returns (residual, work)."""
        run = self.begin_sweep()
        while run.k < self.levels - 1:
            self.sweep_step(run)
        sw = self.end_sweep(run)
        self.commit(sw)
        return sw.residual, sw.work

    def is_fixed(self, inputs: tuple | None, left, right) -> bool:
        """Whether ``F_i(X) = X_i`` is known without solving: X_i came from a solve with exactly these ghosts.

        ``inputs`` is :attr:`inputs` when X_i was recorded; F_i depends on X only through the ghost values at the
        levels 1..m (None: the physical boundary).
        """
        if inputs is None:
            return False
        bc = self.problem.boundary(self.levels)
        return all(np.array_equal(used[1:], (bc if g is None else g)[1:]) for used, g in zip(inputs, (left, right)))

    def set_ghost(self, side: int, pos: int, traj: NDArray[np.float64]) -> bool:
        """Take a neighbour's boundary trajectory if it is the ghost this block needs now (003 Alg. 6)."""
        if pos != self.ghost_pos(side) or pos < 0:
            return False
        if side < 0:
            self.ghost_left = traj
        else:
            self.ghost_right = traj
        return True

    # -- moving border points (003 Alg. 3–5) --------------------------------------------------------------
    def _known(self, pos: int) -> NDArray[np.float64]:
        """Best trajectory this block knows of any point near it (owned, overlap solution, ghost or start)."""
        if self.a <= pos < self.b:
            return self.y[:, pos - self.a].copy()
        if self.cache is not None and self.lo <= pos < self.hi:
            return self.cache.ext[:, pos - self.lo].copy()
        if pos == self.ghost_pos(-1) and self.ghost_left is not None:
            return self.ghost_left.copy()
        if pos == self.ghost_pos(+1) and self.ghost_right is not None:
            return self.ghost_right.copy()
        start = self.zone_left[pos - self.lo] if pos < self.a else self.zone_right[pos - self.b]
        return np.tile(start, (self.levels, 1))

    def give(self, side: int, count: int) -> Transfer:
        """Remove ``count`` border points on ``side`` and return them for the neighbour there.

        The block keeps at least δ + 1 points (the neighbour's new ghost and overlap must be this block's).
        Its own new ghost on that side is the best value it knows (003 §VI-B: the moved points continue with
        the values they had when sent until the neighbour's updates arrive).
        """
        if not 1 <= count <= self.n_points - self.overlap - 1:
            raise SolverError(f"cannot move {count} of {self.n_points} points with overlap {self.overlap}")
        n_pts, d = self.problem.n, self.overlap
        if side > 0:
            cut = self.b - count
            moved = self.y[:, cut - self.a:].copy()
            zlo = max(cut - d, 0)
            zone = EdgeZone(zlo, self.y[0, zlo - self.a:cut - self.a].copy())
            gpos = zlo - 1 if zlo > 0 else -1
            ghost = self.y[:, gpos - self.a].copy() if gpos >= 0 else None
            new_hi = min(cut + d, n_pts)
            tail = np.concatenate([moved[0], self.zone_right])  # starting values of [cut, old hi)
            new_zone = tail[:new_hi - cut].copy()
            new_ghost = self._known(new_hi) if new_hi < n_pts else None
            self.y, self.b = self.y[:, :cut - self.a].copy(), cut
            self.zone_right, self.ghost_right = new_zone, new_ghost
            out = Transfer(self.window, cut, moved, zone, gpos, ghost)
        else:
            cut = self.a + count
            moved = self.y[:, :count].copy()
            zhi = min(cut + d, n_pts)
            zone = EdgeZone(cut, self.y[0, cut - self.a:zhi - self.a].copy())
            gpos = zhi if zhi < n_pts else -1
            ghost = self.y[:, gpos - self.a].copy() if gpos >= 0 else None
            new_lo = max(cut - d, 0)
            head = np.concatenate([self.zone_left, moved[0]])  # starting values of [old lo, cut)
            new_zone = head[new_lo - self.lo:].copy()
            new_ghost = self._known(new_lo - 1) if new_lo > 0 else None
            self.y, self.a = self.y[:, count:].copy(), cut
            self.zone_left, self.ghost_left = new_zone, new_ghost
            out = Transfer(self.window, self.a - count, moved, zone, gpos, ghost)
        self.cache = None
        return out

    def take(self, side: int, tr: Transfer) -> None:
        """Append the points of a neighbour's :class:`Transfer` on ``side`` (003 Alg. 3 "resize ... complete")."""
        if tr.window != self.window:
            raise SolverError(f"transfer of window {tr.window} reached a block in window {self.window}")
        if side > 0:
            if tr.start != self.b:
                raise SolverError(f"transfer starts at {tr.start}, block ends at {self.b}")
            self.y = np.concatenate([self.y, tr.points], axis=1)
            self.b += tr.count
            self.zone_right = tr.zone.values.copy()
            self.ghost_right = None if tr.ghost_pos < 0 else tr.ghost.copy()
        else:
            if tr.start + tr.count != self.a:
                raise SolverError(f"transfer ends at {tr.start + tr.count}, block starts at {self.a}")
            self.y = np.concatenate([tr.points, self.y], axis=1)
            self.a = tr.start
            self.zone_left = tr.zone.values.copy()
            self.ghost_left = None if tr.ghost_pos < 0 else tr.ghost.copy()
        self.cache = None

    # -- windows ------------------------------------------------------------------------------------------
    def next_window(self, final: NDArray[np.float64], levels: int, left: EdgeZone | None,
                    right: EdgeZone | None) -> None:
        """Start the next window from the accepted ``final`` values (b − a, 2) and the neighbours' border zones."""
        n_pts, d = self.problem.n, self.overlap
        lo, hi = max(self.a - d, 0), min(self.b + d, n_pts)
        self.window += 1
        self.y = np.tile(final, (levels, 1, 1))
        if left is not None:
            self.zone_left = left.values[lo - left.start:].copy()
            self.ghost_left = np.tile(left.values[lo - 1 - left.start], (levels, 1)) if lo > 0 else None
        if right is not None:
            self.zone_right = right.values[:hi - right.start].copy()
            self.ghost_right = np.tile(right.values[hi - right.start], (levels, 1)) if hi < n_pts else None
        if left is None and lo > 0 or right is None and hi < n_pts:
            raise SolverError("next window: a neighbour's border zone is missing")
        self.cache = None
