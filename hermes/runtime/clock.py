"""Clocks: the deterministic virtual clock (α-β model) and the wall clock.

Both clocks fill the same time categories — ``compute``, ``comm``, ``sync``, ``balance``,
``migrate`` — so reports do not care which one ran.

Virtual clock (default)
    Every rank keeps its own virtual time ``now``. Computing ``W`` work units advances it by
    ``W / rate`` with ``rate = speed · p · c_i`` (thesis §10.2: work is a function of the weights and of
    the processor's capacity). A message of ``b`` bytes on link (i, j) costs ``α_ij + β_ij · b``
    (thesis §4.2, the α-β model) and carries its send time, so a receiver cannot finish before the
    message arrives; waiting beyond the rank's own sending cost is ``sync`` time. A collective
    synchronises every rank to the slowest one and costs ``⌈log2 p⌉ (α + β b)`` on the default
    link. The result depends only on the input, not on how many ranks share the machine's cores.

Wall clock
    Real elapsed time (``time.perf_counter``). Computing ``W`` work units performs real
    arithmetic scaled by the rank's relative capacity ``1 / (p c_i)``, to emulate slower processors on
    a homogeneous cluster; exchanges and collectives are timed around the real MPI calls.

Inside ``with clock.activity("balance")`` (or ``"migrate"``, ``"adapt"``) every charge goes to that category.

Extra load (virtual clock)
    Given a :class:`SharedProcessor` (``load=``: hermes' is :class:`hermes.extraload.sharing.ProcessorLoad`,
    opened by :func:`hermes.lifecycle.feed.open_load`; the clock never imports the extra load), the virtual
    clock charges compute and this rank's outgoing messages through it: the external tasks running on the
    processor take their share of the CPU and of the outgoing links, so the same work takes longer while they run
    (processor sharing, exact and deterministic). :meth:`VirtualClock.message_costs` gives the duration
    of each message sent now; the sender's durations travel with the messages, since only the sender's
    model knows its links' traffic. Without a load the clock performs exactly the floating-point
    operations it always did.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["CATEGORIES", "Links", "BalancePrices", "SharedProcessor", "VirtualClock", "WallClock", "Clock",
           "make_clock", "ClockBank"]

CATEGORIES = ("compute", "comm", "sync", "balance", "migrate", "adapt")


@dataclass(frozen=True)
class Links:
    """Latency α (s) and bandwidth 1/β (bytes/s) for every pair of ranks: a default plus overrides.

    ``collective_latency`` (s), when given, is the latency of a whole collective in place of ``⌈log2 p⌉ α``
    (a platform profile's cost of one allreduce, e.g. ``platform.profile: thesis2003``).
    """

    latency: float = 1.0e-4
    bandwidth: float = 1.0e8
    overrides: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    collective_latency: float | None = None

    def params(self, i: int, j: int) -> tuple[float, float]:
        """(α, bandwidth) of the link between ranks i and j (symmetric)."""
        key = (i, j) if i < j else (j, i)
        return self.overrides.get(key, (self.latency, self.bandwidth))

    def cost(self, i: int, j: int, nbytes: float) -> float:
        """α_ij + β_ij · nbytes."""
        a, bw = self.params(i, j)
        return a + nbytes / bw

    def collective_cost(self, p: int, nbytes: float) -> float:
        """Cost of a tree collective on the default link: ⌈log2 p⌉ (α + β b), or with ``collective_latency``
        ``collective_latency + ⌈log2 p⌉ β b``."""
        if p <= 1:
            return 0.0
        if self.collective_latency is not None:
            return self.collective_latency + math.ceil(math.log2(p)) * nbytes / self.bandwidth
        return math.ceil(math.log2(p)) * (self.latency + nbytes / self.bandwidth)


@dataclass(frozen=True)
class BalancePrices:
    """A platform profile's prices of a balancing call beyond its rounds and collectives (thesis §8.6's estimate
    of a balancer's time: a set-up per method and call, a price per message, global sums that travel the
    processor graph).

    ``setup`` (s per balancing call: one number for every balancer, or by balancer name; 0 for a name it lacks),
    ``message`` (s per message the busiest rank sends in a neighbour-exchange round), ``allreduce_hop`` (s per
    allreduce and hop of the diameter of the balancer's processor graph). All zero charges exactly what the
    profile's :class:`Links` alone charge (:meth:`links` returns them unchanged).

    Examples
    --------
    >>> pr = BalancePrices(setup={"pcg": 0.1}, message=0.01, allreduce_hop=0.002)
    >>> base = Links(0.0, 1e8, collective_latency=0.05)
    >>> pr.setup_of("pcg"), pr.setup_of("gda1")
    (0.1, 0.0)
    >>> ln = pr.links(base, max_degree=3, diameter=4)
    >>> round(ln.cost(0, 1, 0.0), 12), round(ln.collective_cost(16, 0.0), 12)
    (0.03, 0.058)
    """

    setup: float | Mapping[str, float] = 0.0
    message: float = 0.0
    allreduce_hop: float = 0.0

    def setup_of(self, balancer: str) -> float:
        """The set-up price of one call of ``balancer``."""
        if isinstance(self.setup, Mapping):
            return float(self.setup.get(balancer, 0.0))
        return float(self.setup)

    def links(self, base: Links, max_degree: int, diameter: int) -> Links:
        """``base`` priced for one call on a processor graph of ``max_degree`` and ``diameter``.

        Notes
        -----
        A neighbour-exchange round ends when its busiest rank has sent its ``max_degree`` messages, so the
        round's latency becomes ``α + max_degree · message`` (the clock's exchange is ``max_j (α_ij + β b)`` for
        a rank's own sends, overlapped: in lockstep every round costs the busiest rank's, as thesis §8.6
        counts ``(N+1) Σ_j α_ij`` per processor); a collective's becomes ``collective_latency + diameter ·
        allreduce_hop``. ``base`` must have a ``collective_latency`` (a profile's links have one).
        """
        if not self.message and not self.allreduce_hop:
            return base
        if base.collective_latency is None:
            raise ValueError("BalancePrices.links: the base links have no collective_latency")
        return Links(base.latency + max_degree * self.message, base.bandwidth, base.overrides,
                     collective_latency=base.collective_latency + diameter * self.allreduce_hop)


class _Base:
    def __init__(self, rank: int, size: int, links: Links, speed: float, capacity: float):
        self.rank = rank
        self.size = size
        self.links = links
        self.speed = float(speed)
        self.capacity = float(capacity)
        self.totals: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
        #: work units computed, per category (the monitor's measured rate: work / compute seconds)
        self.work: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
        self._override: str | None = None
        #: the links a balancer's own messages are charged with (``platform.profile``), None: ``links``
        self.balance_links: Links | None = None
        #: a profile's prices per call, message and allreduce hop (with ``balance_links`` only), None: none
        self.balance_prices: BalancePrices | None = None

    # -- categories ---------------------------------------------------------------------------
    @contextmanager
    def activity(self, name: str) -> Iterator[None]:
        """Charge everything inside the block to ``name`` (``balance`` or ``migrate``)."""
        if name not in CATEGORIES:
            raise ValueError(f"unknown time category {name!r}")
        old, self._override = self._override, name
        try:
            yield
        finally:
            self._override = old

    @contextmanager
    def balancing(self, call: str | None = None, *, max_degree: int = 0,
                  diameter: Callable[[], int] | None = None) -> Iterator[None]:
        """The balancer's step: everything charged to ``balance``, its messages with ``balance_links`` if set.

        Every rank enters it together (the step is collective), so sender and receiver charge a message alike.
        ``call`` names the balancer when the step is one of its calls: with ``balance_prices`` the call's set-up is
        charged on entry and its messages priced for the processor graph (``max_degree``; ``diameter()``,
        evaluated only if the profile prices allreduce hops) by :meth:`BalancePrices.links`. Without a profile, or
        with a profile without prices, nothing else is charged.
        """
        with self.activity("balance"):
            if self.balance_links is None:
                yield
                return
            links, prices = self.balance_links, self.balance_prices
            if prices is not None and call is not None:
                links = prices.links(links, max_degree, diameter() if prices.allreduce_hop and diameter else 0)
                setup = prices.setup_of(call)
                if setup:
                    self.charge(setup, "balance")
            old, self.links = self.links, links
            try:
                yield
            finally:
                self.links = old

    def _cat(self, cat: str) -> str:
        return self._override or cat

    def snapshot(self) -> dict[str, float]:
        return dict(self.totals)

    @property
    def rate(self) -> float:
        """Work units per second of this rank: ``speed · p · c_i``."""
        return self.speed * self.size * self.capacity

    def set_capacity(self, capacity: float) -> None:
        self.capacity = float(capacity)

    def begin_phase(self, phase: int) -> None:
        """Phase ``phase`` starts now (external tasks tied to phases start or stop)."""
        return None


class SharedProcessor(Protocol):
    """What the virtual clock asks of an extra load that shares this rank's processor and outgoing links (times
    ``t`` are the clock's ``now``)."""

    def set_rate(self, t: float, rate: float) -> None:
        """The processor's base rate changes at ``t``."""

    def begin_phase(self, phase: int, t: float) -> None:
        """Phase ``phase`` begins at ``t``."""

    def compute(self, t: float, work: float, *, counted: bool = True) -> float:
        """The duration of ``work`` units computed from ``t`` on the shared processor."""

    def send(self, t: float, dests, nbytes) -> NDArray[np.float64]:
        """The durations of messages of ``nbytes[k]`` bytes to ``dests[k]`` sent together at ``t``."""


class VirtualClock(_Base):
    """Deterministic α-β clock (see module docstring); ``load`` adds the external tasks' competition."""

    kind = "virtual"

    def __init__(self, rank: int, size: int, links: Links, speed: float, capacity: float,
                 load: SharedProcessor | None = None):
        super().__init__(rank, size, links, speed, capacity)
        self.now = 0.0
        self.load = load
        if load is not None:
            load.set_rate(self.now, self.rate)

    def charge(self, dt: float, cat: str) -> None:
        dt = float(dt)
        self.now += dt
        self.totals[self._cat(cat)] += dt

    def set_capacity(self, capacity: float) -> None:
        super().set_capacity(capacity)
        if self.load is not None:
            self.load.set_rate(self.now, self.rate)

    def begin_phase(self, phase: int) -> None:
        if self.load is not None:
            self.load.begin_phase(phase, self.now)

    def compute(self, work: float) -> float:
        """Advance by ``work / rate`` (with a load: by the time the shared CPU needs); returns the time charged."""
        if self.load is None:
            dt = float(work) / self.rate if work > 0 else 0.0
        else:
            # the load model's integrals of the application's computation leave out what is charged elsewhere
            # (the monitor's probe is balancing), as the measured rate (work / compute seconds) does
            dt = self.load.compute(self.now, float(work), counted=self._cat("compute") == "compute") \
                if work > 0 else 0.0
        self.work[self._cat("compute")] += max(float(work), 0.0)
        self.charge(dt, "compute")
        return dt

    def message_costs(self, dests, nbytes) -> NDArray[np.float64]:
        """Duration (send to delivery) of a message of ``nbytes[k]`` to each ``dests[k]``, all sent now.

        Without a load: ``α + β b`` of each link. With one: the messages share this rank's outgoing
        links with the external tasks' data (advances the load model; call once per exchange).
        """
        if self.load is None:
            return np.array([self.links.cost(self.rank, int(j), float(b)) for j, b in zip(dests, nbytes)],
                            dtype=np.float64)
        return self.load.send(self.now, dests, nbytes)

    @contextmanager
    def measure(self, cat: str) -> Iterator[None]:
        """Real time is ignored by the virtual clock."""
        yield

    def stamp(self) -> float:
        return self.now

    def exchanged(self, send_costs: NDArray[np.float64], arrivals: NDArray[np.float64]) -> None:
        """After a neighbour exchange: own sends overlap (max), then wait for the last arrival."""
        own = float(np.max(send_costs)) if len(send_costs) else 0.0
        self.charge(own, "comm")
        last = float(np.max(arrivals)) if len(arrivals) else self.now
        if last > self.now:
            self.charge(last - self.now, "sync")

    def synchronised(self, stamps: NDArray[np.float64], cost: float) -> None:
        """After a collective whose participants stamped ``stamps``: wait for the slowest, pay the cost."""
        latest = float(np.max(stamps))
        if latest > self.now:
            self.charge(latest - self.now, "sync")
        self.charge(cost, "comm")

    def elapsed(self) -> float:
        return self.now


class WallClock(_Base):
    """Real elapsed time; compute performs real arithmetic scaled by 1/(p c_i).

    ``load`` (a :class:`hermes.extraload.real.RealLoad`, optional) is told when phases begin, so the
    real external tasks tied to phases start and stop; they compete for the real CPU and network.
    """

    kind = "wall"
    #: floating-point operations in one work unit
    FLOPS_PER_UNIT = 256

    def __init__(self, rank: int, size: int, links: Links, speed: float, capacity: float, load=None):
        super().__init__(rank, size, links, speed, capacity)
        self._t0 = time.perf_counter()
        self._buf = np.linspace(0.0, 1.0, 4096)
        self.load = load

    def begin_phase(self, phase: int) -> None:
        if self.load is not None:
            self.load.begin_phase(phase)

    @property
    def now(self) -> float:
        return time.perf_counter() - self._t0

    def charge(self, dt: float, cat: str) -> None:
        self.totals[self._cat(cat)] += float(dt)

    @contextmanager
    def measure(self, cat: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.charge(time.perf_counter() - t, cat)

    def compute(self, work: float) -> float:
        """Real arithmetic: ``work / (p c_i)`` units of FLOPS_PER_UNIT flops each."""
        units = float(work) / (self.size * self.capacity) if work > 0 else 0.0
        t = time.perf_counter()
        # one pass over the 4096-element buffer does 2 flops per element = 32 units
        passes = int(math.ceil(units / 32.0))
        x = self._buf
        acc = 0.0
        for _ in range(passes):
            acc += float(np.dot(x, x))
        dt = time.perf_counter() - t
        self.work[self._cat("compute")] += max(float(work), 0.0)
        self.charge(dt, "compute")
        return dt

    def message_costs(self, dests, nbytes) -> NDArray[np.float64]:
        """Modelled durations (α + β b); the wall clock measures real ones around the MPI calls."""
        return np.array([self.links.cost(self.rank, int(j), float(b)) for j, b in zip(dests, nbytes)],
                        dtype=np.float64)

    def stamp(self) -> float:
        return 0.0

    def exchanged(self, send_costs, arrivals) -> None:  # timed by measure() around the MPI calls
        return None

    def synchronised(self, stamps, cost) -> None:  # timed by measure() around the MPI call
        return None

    def elapsed(self) -> float:
        return self.now


Clock = VirtualClock | WallClock


class ClockBank:
    """The virtual clocks of the processors one process hosts, as arrays: what a kernel run in bulk
    (:meth:`hermes.runtime.communicator.Communicator.bulk`) charges them, element by element the very IEEE operations
    their own :class:`VirtualClock` methods perform, in the same order — so the clocks it writes back are the same
    bits as if every processor had charged itself (numpy's elementwise ``+ - * /`` on float64 are Python's float
    operations, and numpy never fuses them into an FMA).

    :meth:`load` reads the clocks (``now``, the categories' totals and work), :meth:`store` writes them back: O(number
    of clocks) of Python per kernel call, never per step. Only clocks without an extra load and in the same activity
    can be banked (a load's model is per processor; :meth:`bankable` says whether a group's clocks can).
    """

    def __init__(self, clocks: list[VirtualClock]):
        if not self.bankable(clocks):
            raise ValueError("ClockBank: only virtual clocks without an extra load, in one activity, can be banked")
        self.n = len(clocks)
        self.override = clocks[0]._override if clocks else None
        self.now = np.array([c.now for c in clocks], dtype=np.float64)
        self.totals = {k: np.array([c.totals[k] for c in clocks], dtype=np.float64) for k in CATEGORIES}
        self.work = {k: np.array([c.work[k] for c in clocks], dtype=np.float64) for k in CATEGORIES}

    @staticmethod
    def bankable(clocks: list) -> bool:
        """Whether ``clocks`` can be banked: virtual, no extra load, one activity."""
        return all(c.kind == "virtual" and c.load is None for c in clocks) and \
            len({c._override for c in clocks}) <= 1

    def _cat(self, cat: str) -> str:
        return self.override or cat

    def compute(self, dt: NDArray[np.float64], work: NDArray[np.float64]) -> None:
        """:meth:`VirtualClock.compute` of every clock: ``dt[i]`` its duration (``work / rate``, or 0.0 for work
        ≤ 0, as the clock computes it), ``work[i]`` the work (``max(work, 0)``, as the clock counts it)."""
        cat = self._cat("compute")
        self.work[cat] += work
        self.charge(dt, "compute")

    def charge(self, dt: NDArray[np.float64] | float, cat: str, mask: NDArray[np.bool_] | None = None) -> None:
        """:meth:`VirtualClock.charge` of every clock (``mask``: of those where it is True)."""
        tot = self.totals[self._cat(cat)]
        if mask is None:
            self.now += dt
            tot += dt
            return
        d = dt[mask] if np.ndim(dt) else dt
        self.now[mask] += d
        tot[mask] += d

    def wait_until(self, latest: NDArray[np.float64], cat: str = "sync") -> None:
        """``if latest > now: charge(latest - now)`` of every clock, as :meth:`VirtualClock.exchanged` and
        :meth:`VirtualClock.synchronised` wait."""
        m = latest > self.now
        if m.any():
            self.charge(latest - self.now, cat, m)

    def store(self, clocks: list[VirtualClock]) -> None:
        """Write the bank back into ``clocks`` (those it was loaded from, in that order)."""
        now = self.now.tolist()
        totals = {k: v.tolist() for k, v in self.totals.items()}
        work = {k: v.tolist() for k, v in self.work.items()}
        for i, c in enumerate(clocks):
            c.now = now[i]
            for k in CATEGORIES:
                c.totals[k] = totals[k][i]
                c.work[k] = work[k][i]


def make_clock(kind: str, rank: int, size: int, links: Links, speed: float, capacity: float, load=None) -> Clock:
    """Build the clock named in the scenario (``virtual`` or ``wall``).

    ``load``: the extra load — a :class:`~hermes.extraload.sharing.ProcessorLoad` for the virtual clock,
    a :class:`~hermes.extraload.real.RealLoad` for the wall clock (optional).
    """
    if kind == "virtual":
        return VirtualClock(rank, size, links, speed, capacity, load)
    if kind == "wall":
        return WallClock(rank, size, links, speed, capacity, load)
    raise ValueError(f"unknown clock {kind!r}: expected 'virtual' or 'wall'")
