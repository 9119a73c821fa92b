"""What the synchronous and asynchronous Brusselator runs share: configuration, platform, link model, results.

* :class:`IterConfig` — the numerical method (problem, overlap, window, accuracy) and the balancing parameters.
* :class:`Platform` — compute rates ``speed · p · c_i`` (as :class:`hermes.runtime.clock.VirtualClock`) and a
  :class:`LinkModel`: the α-β cost of a message of ``b`` bytes on link (i, j), ``α_ij + β_ij b``
  (:class:`hermes.runtime.clock.Links`), optionally with extra deterministic delays (:class:`DelayedLinks`, used to
  test that convergence detection never stops early while messages are late).
* :func:`tree_allreduce_times` — when each rank gets the result of an allreduce in the virtual model.
* :class:`BlockRecord` / :func:`assemble` — what every rank returns, and the global solution built from them.
* :class:`Event`, :func:`line_tree`, :class:`VirtualTimer`, :class:`WallTimer` — the messages, the detection tree and
  the step clocks of the asynchronous processors (:mod:`hermes.app.brusselator.aiac`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from hermes.app.brusselator.brusselator import Brusselator, SolverError, window_steps
from hermes.app.brusselator.line_balance import LineBalance
from hermes.runtime.clock import Links

__all__ = ["IterConfig", "LinkModel", "StaticLinks", "DelayedLinks", "Platform", "tree_allreduce_times", "Event",
           "line_tree", "VirtualTimer", "WallTimer",
           "even_bounds", "capacity_bounds", "BlockRecord", "error_trace", "assemble", "CONTROL_BYTES"]

#: size charged for a control message (load, offer, accept, detection flags)
CONTROL_BYTES = 32


@dataclass(frozen=True)
class IterConfig:
    """The parallel iteration (see :mod:`hermes.app.brusselator.brusselator`).

    Attributes
    ----------
    problem : Brusselator
    overlap : int
        δ, points each block overlaps on each side.
    window : int
        Implicit-Euler steps per window (one convergence detection each).
    accuracy : float
        Residual threshold ε of 003 (7e-4): a window is done when ``‖F(X) − X‖∞ < ε``.
    balance : LineBalance or None
    max_iterations : int
        Safety bound on a rank's iterations (SolverError beyond it).
    persistence : int
        AIAC: iterations in a row with residual below ε before a rank reports local convergence.
    form : str
        ``stepwise`` (hermes' sweep: ghosts read at each time step, Newton from the previous time level, a sweep
        whose ghosts did not change taken from the cache) or ``paper`` (003 Alg. 2: ghosts read at the sweep's
        start, Newton from the previous iterate, work = the Newton iterations done, the left border sent after
        the first components; :meth:`hermes.app.brusselator.blocks.BlockState._paper_sweep`).
    """

    problem: Brusselator
    overlap: int
    window: int
    accuracy: float = 7e-4
    balance: LineBalance | None = None
    max_iterations: int = 100_000
    persistence: int = 1
    form: str = "stepwise"
    #: the serial solution (n_steps + 1, N, 2), or None: with it each rank records the error of its block after
    #: every sweep (:attr:`BlockRecord.errors`, :func:`error_trace`); serial simulations only, ``window: all``
    reference: NDArray[np.float64] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.form not in ("stepwise", "paper"):
            raise SolverError(f"solver.form must be stepwise or paper, got {self.form!r}")
        if self.overlap < 0:
            raise SolverError(f"solver.overlap must be non-negative, got {self.overlap}")
        if not self.accuracy > 0:
            raise SolverError(f"solver.accuracy must be positive, got {self.accuracy}")
        window_steps(self.problem.n_steps, self.window)
        if self.reference is not None and self.window < self.problem.n_steps:
            raise SolverError("the error trace needs one window over the whole interval (solver.window: all)")

    def block_error(self, a: int, y: NDArray[np.float64]) -> float:
        """Max-norm distance of a block's trajectory ``y`` (points a … a + y.shape[1]) to the reference."""
        if y.shape[1] == 0:
            return 0.0
        return float(np.max(np.abs(y - self.reference[:y.shape[0], a:a + y.shape[1]])))

    @property
    def windows(self) -> list[tuple[int, int]]:
        return window_steps(self.problem.n_steps, self.window)

    @property
    def min_points(self) -> int:
        """Points a block keeps at least: the neighbours' ghosts and overlaps must lie in it."""
        keep = self.balance.min_keep if self.balance is not None else 1
        return max(self.overlap + 1, keep)


class LinkModel(Protocol):
    def cost(self, i: int, j: int, nbytes: float, t: float) -> float:
        """Transit time of a message of ``nbytes`` sent from i to j at virtual time t."""

    def min_cost(self, i: int, j: int) -> float:
        """A positive lower bound of :meth:`cost` (the lookahead of the conservative simulation)."""


@dataclass(frozen=True)
class StaticLinks:
    """The α-β model of :class:`hermes.runtime.clock.Links`: ``α_ij + nbytes / bandwidth_ij``."""

    links: Links

    def cost(self, i: int, j: int, nbytes: float, t: float) -> float:
        return self.links.cost(i, j, nbytes)

    def min_cost(self, i: int, j: int) -> float:
        return self.links.params(i, j)[0]


@dataclass(frozen=True)
class DelayedLinks:
    """A link model plus a deterministic pseudo-random extra delay in ``[0, max_delay]`` per message.

    The delay depends only on (seed, i, j, send time), so a run stays deterministic; it makes messages overtake
    each other in virtual time and arrive long after they were sent.
    """

    base: LinkModel
    max_delay: float
    seed: int = 0

    def cost(self, i: int, j: int, nbytes: float, t: float) -> float:
        key = int(np.float64(t).view(np.int64))
        u = np.random.default_rng([self.seed, i, j, key & 0x7FFFFFFF, key >> 31 & 0x7FFFFFFF]).random()
        return self.base.cost(i, j, nbytes, t) + self.max_delay * u

    def min_cost(self, i: int, j: int) -> float:
        return self.base.min_cost(i, j)


@dataclass(frozen=True)
class Platform:
    """Processors (compute rates, work units per second) and links."""

    rates: NDArray[np.float64]
    links: LinkModel

    @classmethod
    def create(cls, capacities, speed: float, links: LinkModel) -> Platform:
        """Rates ``speed · p · c_i`` with capacities normalised to sum 1 (hermes convention)."""
        c = np.asarray(capacities, dtype=np.float64)
        if c.ndim != 1 or c.size < 1 or np.any(~np.isfinite(c)) or np.any(c <= 0):
            raise SolverError("platform.capacities must be positive numbers")
        p = c.size
        for i in range(p - 1):
            if not links.min_cost(i, i + 1) > 0:
                raise SolverError(f"platform: the link {i}-{i + 1} needs a positive latency "
                                  "(the asynchronous simulation looks ahead by it)")
        return cls(speed * p * c / c.sum(), links)

    @property
    def size(self) -> int:
        return len(self.rates)


def tree_allreduce_times(ready: NDArray[np.float64], links: LinkModel, nbytes: float) -> NDArray[np.float64]:
    """Time at which each rank holds an allreduce's result: binomial-tree reduce to rank 0, then broadcast.

    Rank i enters at ``ready[i]``; each tree edge costs its own link (so slow inter-site links count, unlike the
    single default link of :meth:`hermes.runtime.clock.Links.collective_cost`).
    """
    p = len(ready)
    t = np.asarray(ready, dtype=np.float64).copy()
    steps = []
    step = 1
    while step < p:
        for i in range(step, p, 2 * step):
            t[i - step] = max(t[i - step], t[i] + links.cost(i, i - step, nbytes, t[i]))
        steps.append(step)
        step *= 2
    out = np.empty(p)
    out[0] = t[0]
    for step in reversed(steps):
        for i in range(step, p, 2 * step):
            out[i] = out[i - step] + links.cost(i - step, i, nbytes, out[i - step])
    return out


def capacity_bounds(n: int, capacities, overlap: int, min_points: int = 1) -> NDArray[np.int64]:
    """A static line partition for heterogeneous processors: equal sweep times ``(n_i + o_i) / c_i``.

    ``o_i`` is the overlap work of block i (δ per neighbour); a block keeps at least ``min_points``. This is the
    static balancing of 003's ref. [8], a reference for what dynamic balancing can reach.
    """
    c = np.asarray(capacities, dtype=np.float64)
    p = c.size
    even_bounds(n, p, min_points)  # feasibility
    o = np.full(p, 2.0 * overlap)
    if p > 1:
        o[0] = o[-1] = overlap
    else:
        o[0] = 0.0
    target = c * (n + o.sum()) / c.sum() - o
    target = np.maximum(target, min_points)
    while True:  # give the points taken by the minimum back to the others, proportionally
        excess = target.sum() - n
        free = target > min_points
        if abs(excess) < 1e-9 or not free.any():
            break
        target[free] -= excess * c[free] / c[free].sum()
        target = np.maximum(target, min_points)
    counts = np.floor(target).astype(np.int64)
    counts[np.argsort(target - counts)[::-1][:n - counts.sum()]] += 1
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def even_bounds(n: int, p: int, min_points: int = 1) -> NDArray[np.int64]:
    """The initial line partition: N points spread evenly over p processors (003 §VI-A "homogeneously")."""
    if n < p * min_points:
        raise SolverError(f"{n} points cannot give {p} processors {min_points} points each "
                          "(more points, fewer processors or less overlap)")
    return np.array([(i * n) // p for i in range(p + 1)], dtype=np.int64)


@dataclass
class BlockRecord:
    """What one rank reports at the end of a run."""

    rank: int
    time: float = 0.0
    iterations: int = 0
    solves: int = 0
    verifications: int = 0
    compute_time: float = 0.0
    wait_time: float = 0.0
    sent_points: int = 0
    received_points: int = 0
    transfers: int = 0
    messages: int = 0
    bytes: float = 0.0
    windows: list = field(default_factory=list)  # (window, a, b, y (m+1, b−a, 2))
    timeline: list = field(default_factory=list)  # (start, duration, a, b, residual)
    errors: list = field(default_factory=list)  # (end of sweep, error of the block) with IterConfig.reference


def error_trace(records: list[BlockRecord]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The global error against the serial solution after each sweep of any rank: (times, errors), by time.

    At a sweep's end the global iterate is every rank's block as of its latest sweep, so the global error is the
    maximum of the ranks' latest block errors (a point in transit between two ranks counts with the error its
    sender last measured on it); before every rank has swept once it is unknown (not listed).
    """
    rows = sorted((t, r, e) for r, rec in enumerate(records) for t, e in rec.errors)
    latest = np.full(len(records), np.inf)
    times, errs = [], []
    for t, r, e in rows:
        latest[r] = e
        if np.isfinite(latest).all():
            times.append(t)
            errs.append(float(latest.max()))
    return np.asarray(times), np.asarray(errs)


def assemble(problem: Brusselator, window: int, records: list[BlockRecord]) -> NDArray[np.float64]:
    """The global trajectory (n_steps + 1, N, 2) from the ranks' accepted window blocks."""
    out = np.full((problem.n_steps + 1, problem.n, 2), np.nan)
    out[0] = problem.initial()
    starts = [s for s, _ in window_steps(problem.n_steps, window)]
    for rec in records:
        for w, a, b, y in rec.windows:
            out[starts[w]:starts[w] + y.shape[0], a:b] = y
    if np.isnan(out).any():
        raise SolverError("the ranks' accepted blocks do not cover the domain")
    return out


@dataclass(frozen=True)
class Event:
    """A message between two neighbouring processors."""

    arrival: float
    sender: int
    seq: int
    dest: int
    kind: str
    payload: Any
    sent: float
    nbytes: int

    @property
    def key(self) -> tuple[float, int, int]:
        return (self.arrival, self.sender, self.seq)


def line_tree(rank: int, size: int) -> tuple[int | None, list[int]]:
    """Parent and children of ``rank`` in the line's spanning tree rooted at the middle ``(size − 1) // 2``."""
    root = (size - 1) // 2
    if rank == root:
        return None, [c for c in (rank - 1, rank + 1) if 0 <= c < size]
    if rank < root:
        return rank + 1, [rank - 1] if rank > 0 else []
    return rank - 1, [rank + 1] if rank < size - 1 else []


class VirtualTimer:
    """Duration of a time step in the virtual model: work / rate (rate = speed · p · c_i)."""

    def __init__(self, rate: float):
        self.rate = float(rate)

    def step(self, k: int, work: float, computed: bool, seconds: float) -> float:
        return work / self.rate


class WallTimer:
    """Real duration of a time step, stretched by sleeping to emulate a processor ``top / rate`` times slower.

    A step taken from the cached previous solve (:meth:`BlockState.sweep_step`) is not recomputed; the emulated
    machine would compute it again, so the timer sleeps for that level's last real duration instead.
    """

    def __init__(self, rate: float, top: float):
        self.rate, self.top = float(rate), float(top)
        self.level: dict[int, float] = {}

    def step(self, k: int, work: float, computed: bool, seconds: float) -> float:
        if computed:
            total = seconds * self.top / self.rate
            self.level[k] = total
        else:
            total = max(self.level.get(k, seconds), seconds)
        time.sleep(max(total - seconds, 0.0))
        return total
