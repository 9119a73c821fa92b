"""Extra load under the virtual clock: processor sharing of the CPU and of the links (deterministic).

External tasks (:mod:`hermes.extraload.tasks`, thesis §10.1 "Extra Load Simulation Module") compete with
the application for its processor and for the links it sends on. This module models that competition
exactly, as a function of the application's own calls, so the virtual clock stays deterministic.

The model (one :class:`ProcessorLoad` per processor ``q``, driven by rank ``q``'s clock)
-----------------------------------------------------------------------------------------
CPU
    Base rate ``r`` work units per second (the clock's ``speed · p · c_q``). The runnable jobs are the
    application while it computes (weight ``π_a``, ``application_priority``) and every task in a Work
    step (weight ``π_t``, its ``priority``). Weighted processor sharing (generalised processor sharing):
    job ``j`` runs at ``r π_j / Σ_runnable π``. A processor with ``n`` equal-weight busy tasks gives the
    application ``r / (n + 1)``.
Network
    ``q``'s outgoing channels ``q → d``, one per destination, full duplex (the channel ``d → q`` belongs to
    ``d``'s model), as in hermes' α-β clock where both directions of an exchange cost ``α + b/B`` at once.
    ``B`` and ``α`` are the link's bandwidth and latency (:class:`hermes.runtime.clock.Links`). The flows on a
    channel — one per Data pair of a task, one per application message — share ``B`` equally while they
    transfer (no priority on the network); a flow is delivered ``α`` after its last byte has left (the
    latency is propagation, it occupies no bandwidth). A message alone costs ``α + b/B``.
Tasks
    A started task enters its script's first step and moves on when a step ends: Data when all its flows
    are delivered, Work when its work is done (at its CPU share), Wait after its idle time. After the last
    step a pass ends; after ``repeat`` passes (never for ``forever``) the task is done. A task starts at
    ``start_time`` or at the beginning of ``start_phase`` (:meth:`ProcessorLoad.begin_phase`) and is killed
    (flows dropped) at ``stop_time`` or at the beginning of phase ``stop_phase + 1``.
Application
    :meth:`~ProcessorLoad.compute` — the application is idle until ``t`` (the tasks run alone), then a CPU
    job of ``W`` units; returns its duration. :meth:`~ProcessorLoad.send` — idle until ``t``, then one flow
    per message, sent together; the application does not compute until the last is delivered (the clock's
    blocking exchange); returns each message's duration (send to delivery).
Coupling
    The tasks' progress depends on the application (it takes CPU and bandwidth from them) and the other
    way round; the state (each task's step and what is left of it, the flows) is carried forward as the
    rank's virtual time advances — it only ever advances. The result is a pure function of the task
    scripts and of the sequence of calls, hence deterministic and independent of the machine.
Integration
    Between two events (a step, a flow, a latency, a start or stop ending) all rates are constant; a
    segment lasts ``dt = min`` over the pending events of the time each needs at its current rate, and
    every amount decreases by ``rate · dt`` (exact piecewise integration; the jobs that end are set to
    zero, not left with a rounding residue). Durations are sums of segment lengths, so with no task
    active ``compute(W)`` returns exactly ``W / r`` and a message ``α + b/B`` — the same floating-point
    numbers as the plain α-β clock.

What the application really got (for records and for the monitor's "true" values) is integrated alongside:
``app_work`` / ``app_busy`` (work units done and seconds spent computing) and, per channel, the bytes
transferred and the seconds spent transferring. :meth:`~ProcessorLoad.available_rate` and
:meth:`~ProcessorLoad.available_bandwidth` answer "what would the application get over ``[t0, t1]`` if it
computed (sent) throughout" on a copy of the state — the oracle of the monitor.

References: thesis §10.1 (Extra Load Simulation Module, Fig. 10.12); processor sharing and GPS: Kleinrock,
*Queueing Systems* vol. 2 (1976) §4.4; Parekh & Gallager, IEEE/ACM ToN 1(3), 1993.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from hermes.errors import HermesError
from hermes.extraload.tasks import Task

__all__ = ["ProcessorLoad", "ExtraLoadError", "make_loads", "MAX_EVENTS"]

PENDING, RUNNING, DONE = 0, 1, 2
APP = -1
#: events one call may process before the model gives up (tasks with steps far too short for the run)
MAX_EVENTS = 1_000_000


class ExtraLoadError(HermesError):
    """The extra-load model cannot proceed (e.g. steps far too short for the simulated times)."""


@dataclass
class _Flow:
    dest: int
    left: float  # bytes still to transfer
    latency: float  # seconds of latency left once transferred
    owner: int  # task index, or APP
    key: int = 0  # application message index


@dataclass
class _State:
    t: float = 0.0
    rate: float = 1.0
    status: list[int] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    work_left: list[float] = field(default_factory=list)
    wait_left: list[float] = field(default_factory=list)
    flows_left: list[int] = field(default_factory=list)
    flows: list[_Flow] = field(default_factory=list)
    app_left: float | None = None  # work units of the current compute call
    phase: int = 0
    # what the application got (integrated)
    app_work: float = 0.0
    app_busy: float = 0.0
    task_work: float = 0.0
    chan_bytes: dict[int, float] = field(default_factory=dict)
    chan_time: dict[int, float] = field(default_factory=dict)

    def clone(self) -> _State:
        c = _State(self.t, self.rate, self.status[:], self.passes[:], self.step[:], self.work_left[:],
                   self.wait_left[:], self.flows_left[:], [_Flow(f.dest, f.left, f.latency, f.owner, f.key)
                                                           for f in self.flows],
                   self.app_left, self.phase, self.app_work, self.app_busy, self.task_work,
                   dict(self.chan_bytes), dict(self.chan_time))
        return c


class ProcessorLoad:
    """The extra load of one processor and its outgoing channels (see the module docstring).

    Parameters
    ----------
    processor : int
        The processor ``q`` (rank) whose CPU and outgoing channels are modelled.
    tasks : list of Task
        External tasks; those of other processors are ignored.
    links : hermes.runtime.clock.Links
        Latency and bandwidth of every pair of processors.
    rate : float
        The processor's base rate (work units per second) until :meth:`set_rate`.
    application_priority : float
        The application's CPU weight ``π_a`` (tasks have theirs).
    max_events : int
        Events one call may process before giving up with :class:`ExtraLoadError`.
    """

    def __init__(self, processor: int, tasks: list[Task], links, *, rate: float = 1.0,
                 application_priority: float = 1.0, max_events: int = MAX_EVENTS):
        if not application_priority > 0 or not math.isfinite(application_priority):
            raise ExtraLoadError(f"extraload.application_priority must be a positive number, "
                                 f"got {application_priority!r}")
        self.processor = int(processor)
        self.tasks = [t for t in tasks if t.processor == self.processor]
        self.links = links
        self.app_priority = float(application_priority)
        self.max_events = int(max_events)
        n = len(self.tasks)
        self._s = _State(rate=float(rate), status=[PENDING] * n, passes=[0] * n, step=[0] * n,
                         work_left=[0.0] * n, wait_left=[0.0] * n, flows_left=[0] * n)
        self._start_due()

    # -- queries -------------------------------------------------------------------------------
    @property
    def t(self) -> float:
        """The model's current virtual time."""
        return self._s.t

    @property
    def rate(self) -> float:
        return self._s.rate

    @property
    def app_work(self) -> float:
        """Work units the application has done so far (integrated at its CPU share)."""
        return self._s.app_work

    @property
    def app_busy(self) -> float:
        """Seconds the application has spent computing."""
        return self._s.app_busy

    @property
    def task_work(self) -> float:
        """Work units the tasks have done so far."""
        return self._s.task_work

    def channel_stats(self) -> dict[int, tuple[float, float]]:
        """Per destination: (bytes the application transferred, seconds spent transferring)."""
        return {d: (self._s.chan_bytes[d], self._s.chan_time[d]) for d in sorted(self._s.chan_bytes)}

    def running(self) -> list[str]:
        """Names of the tasks running now."""
        return [t.name for t, s in zip(self.tasks, self._s.status) if s == RUNNING]

    def share(self) -> float:
        """Fraction of the CPU a computing application would get right now (NWS' "available CPU")."""
        s = self._s
        busy = sum(t.priority for i, t in enumerate(self.tasks) if s.status[i] == RUNNING and self._kind(i) == "work")
        return self.app_priority / (self.app_priority + busy)

    # -- driving -------------------------------------------------------------------------------
    def set_rate(self, t: float, rate: float) -> None:
        """The processor's base rate changes at ``t`` (e.g. a capacity schedule)."""
        self.advance(t)
        self._s.rate = float(rate)

    def begin_phase(self, phase: int, t: float) -> None:
        """Phase ``phase`` begins at ``t``: tasks stopping after phase ``phase − 1`` end, those of ``phase`` start."""
        self.advance(t)
        s = self._s
        s.phase = int(phase)
        for i, task in enumerate(self.tasks):
            if s.status[i] != DONE and task.stop_phase is not None and task.stop_phase < phase:
                self._kill(i)
        for i, task in enumerate(self.tasks):
            if s.status[i] == PENDING and task.start_phase is not None and task.start_phase <= phase:
                self._start(i)

    def advance(self, t: float) -> None:
        """The application is idle until ``t``: the tasks run alone."""
        t = self._check_time(t)
        guard = 0
        while self._s.t < t:
            self._segment(limit=t - self._s.t, until=t)
            guard = self._guard(guard)

    def compute(self, t: float, work: float, *, counted: bool = True) -> float:
        """The application computes ``work`` units from ``t``; returns the duration (``work / r`` alone).

        ``counted`` False: computation that is not the application's own (the monitor's capacity probe, charged
        to balancing): it shares the CPU like any other, but :attr:`app_work` / :attr:`app_busy` leave it out, as
        the application's measured rate (work over compute seconds) does."""
        self.advance(t)
        s = self._s
        if not work > 0:
            return 0.0
        kept = s.app_work, s.app_busy
        s.app_left = float(work)
        t0, elapsed, guard = s.t, 0.0, 0
        while s.app_left > 0:
            elapsed += self._segment(t0=t0, elapsed=elapsed)
            guard = self._guard(guard)
        s.app_left = None
        if not counted:
            s.app_work, s.app_busy = kept
        return elapsed

    def send(self, t: float, dests, nbytes) -> NDArray[np.float64]:
        """Messages of ``nbytes[k]`` bytes to ``dests[k]`` sent together at ``t``; returns their durations.

        A message alone on its channel costs ``α + b/B``; the application is blocked (not computing)
        until the last one is delivered.
        """
        self.advance(t)
        s = self._s
        dests = [int(d) for d in dests]
        nbytes = [float(b) for b in nbytes]
        if len(dests) != len(nbytes):
            raise ValueError(f"{len(dests)} destinations for {len(nbytes)} sizes")
        out = np.zeros(len(dests))
        pending = set()
        for k, (d, b) in enumerate(zip(dests, nbytes)):
            if d == self.processor:
                raise ValueError(f"processor {d} cannot send to itself")
            s.chan_bytes.setdefault(d, 0.0)
            s.chan_time.setdefault(d, 0.0)
            s.flows.append(_Flow(d, max(b, 0.0), self._alpha(d), APP, k))
            pending.add(k)
        t0, elapsed, guard = s.t, 0.0, 0
        while pending:
            delivered = self._deliver_zero()
            if not delivered:
                elapsed += self._segment(t0=t0, elapsed=elapsed, delivered_app=delivered)
            for k in delivered:
                out[k] = elapsed
                pending.discard(k)
            guard = self._guard(guard)
        return out

    def preview_send(self, t: float, dests, nbytes) -> NDArray[np.float64]:
        """Durations of messages sent at ``t`` as :meth:`send` gives them, computed on a copy of the state (this
        model is not changed): the non-blocking sends of the asynchronous mesh application, which overlap its
        computing (:mod:`hermes.app.mesh.async_mesh`). The messages share the channels with the tasks' flows in
        flight, but are not kept in the model, so they do not slow the tasks' later flows down."""
        return self._twin().send(t, dests, nbytes)

    # -- oracle --------------------------------------------------------------------------------
    def available_rate(self, t0: float, t1: float) -> float:
        """Mean rate (work units / s) a continuously computing application would get over ``[t0, t1]``.

        Computed on a copy of the state (this model is not changed): the tasks run alone until ``t0``,
        then share with an application job that never ends.
        """
        if not t1 > t0:
            raise ValueError(f"empty interval [{t0}, {t1}]")
        return self.available_work(t0, t1) / (t1 - t0)

    def available_work(self, t0: float, t1: float) -> float:
        """Work units a continuously computing application would do over ``[t0, t1]`` (0 if empty; copy)."""
        if not t1 > t0:
            return 0.0
        twin = self._twin()
        twin.advance(t0)
        s = twin._s
        w0 = s.app_work
        s.app_left = math.inf
        guard = 0
        while s.t < t1:
            twin._segment(limit=t1 - s.t, until=t1)
            guard = twin._guard(guard)
        return s.app_work - w0

    def available_bandwidth(self, dest: int, t0: float, t1: float) -> float:
        """Mean bandwidth (bytes / s) an application stream to ``dest`` would get over ``[t0, t1]`` (copy)."""
        if not t1 > t0:
            raise ValueError(f"empty interval [{t0}, {t1}]")
        twin = self._twin()
        twin.advance(t0)
        s = twin._s
        s.chan_bytes.setdefault(int(dest), 0.0)
        s.chan_time.setdefault(int(dest), 0.0)
        b0 = s.chan_bytes[int(dest)]
        s.flows.append(_Flow(int(dest), math.inf, 0.0, APP, -1))
        guard = 0
        while s.t < t1:
            twin._segment(limit=t1 - s.t, until=t1)
            guard = twin._guard(guard)
        return (s.chan_bytes[int(dest)] - b0) / (t1 - t0)

    # -- internals -----------------------------------------------------------------------------
    def _twin(self) -> ProcessorLoad:
        twin = object.__new__(ProcessorLoad)
        twin.processor, twin.tasks, twin.links = self.processor, self.tasks, self.links
        twin.app_priority, twin.max_events = self.app_priority, self.max_events
        twin._s = self._s.clone()
        return twin

    def _check_time(self, t: float) -> float:
        t = float(t)
        if t < self._s.t:
            # rounding between the clock's sum and the model's: tolerate a few ulps, never a real step back
            if self._s.t - t > 1e-9 * max(1.0, abs(t)):
                raise ValueError(f"virtual time went back from {self._s.t} to {t}")
            return self._s.t
        return t

    def _guard(self, n: int) -> int:
        n += 1
        if n > self.max_events:
            raise ExtraLoadError(f"extra load on processor {self.processor}: more than {self.max_events} events in one "
                                 f"step of the application at t = {self._s.t:.6g} s; the tasks' work, wait or data "
                                 f"steps are far too short for the simulated times")
        return n

    def _alpha(self, d: int) -> float:
        return float(self.links.params(self.processor, d)[0])

    def _bandwidth(self, d: int) -> float:
        return float(self.links.params(self.processor, d)[1])

    def _kind(self, i: int) -> str:
        return self.tasks[i].steps[self._s.step[i]].kind

    def _start_due(self) -> None:
        s = self._s
        for i, task in enumerate(self.tasks):
            if s.status[i] == PENDING and task.start_time is not None and task.start_time <= s.t:
                self._start(i)
        for i, task in enumerate(self.tasks):
            if s.status[i] == RUNNING and task.stop_time is not None and task.stop_time <= s.t:
                self._kill(i)

    def _start(self, i: int) -> None:
        s = self._s
        s.status[i], s.passes[i], s.step[i] = RUNNING, 0, 0
        self._enter(i)

    def _kill(self, i: int) -> None:
        s = self._s
        s.status[i] = DONE
        s.flows = [f for f in s.flows if f.owner != i]

    def _enter(self, i: int) -> None:
        """Task ``i`` enters its current step."""
        s = self._s
        st = self.tasks[i].steps[s.step[i]]
        if st.kind == "work":
            s.work_left[i] = st.amount
        elif st.kind == "wait":
            s.wait_left[i] = st.amount
        else:
            s.flows_left[i] = len(st.flows)
            for d, c in st.flows:
                s.flows.append(_Flow(d, c, self._alpha(d), i))

    def _finish_step(self, i: int) -> None:
        s = self._s
        task = self.tasks[i]
        s.step[i] += 1
        if s.step[i] == len(task.steps):
            s.step[i] = 0
            s.passes[i] += 1
            if task.repeat is not None and s.passes[i] >= task.repeat:
                s.status[i] = DONE
                return
        self._enter(i)

    def _deliver_zero(self) -> list[int]:
        """Application flows with nothing left (zero bytes and zero latency) are delivered at once."""
        s = self._s
        done = [f.key for f in s.flows if f.owner == APP and f.left <= 0 and f.latency <= 0]
        if done:
            s.flows = [f for f in s.flows if not (f.owner == APP and f.left <= 0 and f.latency <= 0)]
        return done

    def _segment(self, limit: float = math.inf, until: float | None = None, t0: float | None = None,
                 elapsed: float = 0.0, delivered_app: list[int] | None = None) -> float:
        """Advance to the next event (or by ``limit``); returns the segment's length ``dt``.

        The new time is ``until`` when the limit ended the segment, else ``t0 + (elapsed + dt)`` when the
        caller counts a duration from ``t0`` (so that its duration and the model's time agree exactly),
        else ``t + dt``. Application flows delivered in the segment are appended to ``delivered_app``.
        """
        s = self._s
        tasks = self.tasks
        # CPU shares
        cpu = [i for i in range(len(tasks)) if s.status[i] == RUNNING and tasks[i].steps[s.step[i]].kind == "work"]
        weights = sum(tasks[i].priority for i in cpu) + (self.app_priority if s.app_left is not None else 0.0)
        cand: list[float] = [limit]
        rates = {}
        for i in cpu:
            rates[i] = s.rate * (tasks[i].priority / weights)
            cand.append(s.work_left[i] / rates[i])
        app_rate = s.rate * (self.app_priority / weights) if s.app_left is not None else 0.0
        if s.app_left is not None:
            cand.append(s.app_left / app_rate)
        # channel shares: equal among the flows transferring on a channel
        count: dict[int, int] = {}
        for f in s.flows:
            if f.left > 0:
                count[f.dest] = count.get(f.dest, 0) + 1
        frate = []
        for f in s.flows:
            if f.left > 0:
                r = self._bandwidth(f.dest) / count[f.dest]
                frate.append(r)
                cand.append(f.left / r)
            else:
                frate.append(0.0)
                cand.append(f.latency)
        waits = [i for i in range(len(tasks)) if s.status[i] == RUNNING and tasks[i].steps[s.step[i]].kind == "wait"]
        cand.extend(s.wait_left[i] for i in waits)
        starts = [(i, task.start_time - s.t) for i, task in enumerate(tasks)
                  if s.status[i] == PENDING and task.start_time is not None]
        stops = [(i, task.stop_time - s.t) for i, task in enumerate(tasks)
                 if s.status[i] == RUNNING and task.stop_time is not None]
        cand.extend(d for _, d in starts)
        cand.extend(d for _, d in stops)
        dt = max(min(cand), 0.0)
        if dt == math.inf:
            raise ExtraLoadError(f"extra load on processor {self.processor}: nothing can happen (internal error)")

        # integrate over the segment
        ended_work = []
        for i in cpu:
            s.task_work += rates[i] * dt
            if s.work_left[i] / rates[i] <= dt:
                s.work_left[i] = 0.0
                ended_work.append(i)
            else:
                s.work_left[i] -= rates[i] * dt
        if s.app_left is not None:
            s.app_work += app_rate * dt
            s.app_busy += dt
            if s.app_left / app_rate <= dt:
                s.app_left = 0.0
            else:
                s.app_left -= app_rate * dt
        transferred, delivered = [], []
        for f, r in zip(s.flows, frate):
            if f.left > 0:
                if f.owner == APP:
                    s.chan_bytes[f.dest] += r * dt if f.left / r > dt else f.left
                    s.chan_time[f.dest] += dt
                if f.left / r <= dt:
                    f.left = 0.0
                    transferred.append(f)
                else:
                    f.left -= r * dt
            else:
                if f.latency <= dt:
                    f.latency = 0.0
                    delivered.append(f)
                else:
                    f.latency -= dt
        ended_wait = []
        for i in waits:
            if s.wait_left[i] <= dt:
                s.wait_left[i] = 0.0
                ended_wait.append(i)
            else:
                s.wait_left[i] -= dt
        if until is not None and dt >= limit:
            s.t = until
        elif t0 is not None:
            s.t = t0 + (elapsed + dt)
        else:
            s.t = s.t + dt

        # events at the end of the segment
        for f in transferred:  # zero latency: delivered at once
            if f.latency <= 0:
                delivered.append(f)
        gone = {id(f) for f in delivered}
        if gone:
            s.flows = [f for f in s.flows if id(f) not in gone]
        # a scheduled start or stop fires when its segment ends (by index, not by comparing times, so
        # rounding in t cannot leave it pending an ulp away)
        self._events(delivered, ended_work, ended_wait, delivered_app,
                     [i for i, d in starts if d <= dt], [i for i, d in stops if d <= dt])
        return dt

    def _events(self, delivered, ended_work, ended_wait, delivered_app, starting, stopping) -> None:
        """What happens at the end of a segment: stops, deliveries, step ends, then starts."""
        s = self._s
        stopped = set(stopping)
        for i in stopping:
            self._kill(i)
        done_data = []
        for f in delivered:
            if f.owner == APP:
                if delivered_app is not None:
                    delivered_app.append(f.key)
            elif f.owner not in stopped and s.status[f.owner] == RUNNING:
                s.flows_left[f.owner] -= 1
                if s.flows_left[f.owner] == 0:
                    done_data.append(f.owner)
        for i in sorted(set(done_data) | set(ended_work) | set(ended_wait)):
            if s.status[i] == RUNNING:
                self._finish_step(i)
        for i in starting:
            self._start(i)


def make_loads(tasks: list[Task], p: int, links, rates, *, application_priority: float = 1.0) -> list[ProcessorLoad]:
    """One :class:`ProcessorLoad` per processor (serial studies and tests; a rank builds only its own)."""
    return [ProcessorLoad(q, tasks, links, rate=float(rates[q]), application_priority=application_priority)
            for q in range(p)]
