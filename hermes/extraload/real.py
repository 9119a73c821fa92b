"""Extra load under the wall clock: external tasks as real processes that burn CPU and send real data.

:class:`RealLoad` starts, for the processors it hosts, one process per external task
(:mod:`hermes.extraload.task_worker`: Work = real arithmetic, Wait = sleep, Data = bytes over TCP to the
destination processor's sink process) and the sinks themselves; tasks tied to phases start and stop in
:meth:`RealLoad.begin_phase`, tasks tied to times start and stop on their own (times are seconds from
the moment the controller opened). Under MPI each rank hosts its own processor and the ranks exchange
their sinks' addresses (:meth:`RealLoad.open`, collective); a serial study may host all processors.

Nothing is left behind
    - every child leads its own process group (``start_new_session``) and is ended with SIGTERM, then
      SIGKILL, to the whole group: on :meth:`close`, on leaving the ``with`` block (also by an exception),
      at interpreter exit (``atexit``) and on SIGTERM / SIGINT / SIGHUP to the parent (the previous handler
      runs afterwards);
    - if the parent dies without running any of that (SIGKILL, a crash), the children die with it: each
      asks the kernel for SIGKILL on its parent's death (Linux ``PR_SET_PDEATHSIG``) and also watches a
      pipe whose other end only the parent holds (end of file = the parent is gone; any OS).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hermes.errors import HermesError
from hermes.interpreter import child_env, python_command
from hermes.extraload.tasks import Task

__all__ = ["RealLoad", "RealLoadError", "kill_all"]

log = logging.getLogger(__name__)

RUNNER = str(Path(__file__).with_name("task_worker.py"))
_LIVE: dict[int, subprocess.Popen] = {}  # pid -> process, every child of every controller of this process
_LOCK = threading.RLock()  # re-entrant: a signal handler may run while the main thread holds it
_HANDLERS_INSTALLED = False
_PREVIOUS: dict[int, object] = {}


class RealLoadError(HermesError):
    """A wall-clock external task or sink could not be started."""


def _terminate(procs: list[subprocess.Popen], grace: float = 2.0) -> None:
    """SIGTERM to each process group, then SIGKILL to what is left after ``grace`` seconds; reap all."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()
    for p in procs:
        for f in (p.stdin, p.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
    with _LOCK:
        for p in procs:
            _LIVE.pop(p.pid, None)


def kill_all() -> None:
    """End every external process started by this Python process (atexit and signal handlers call it)."""
    with _LOCK:
        procs = list(_LIVE.values())
    if procs:
        _terminate(procs, grace=0.5)


def _on_signal(signum, frame) -> None:
    kill_all()
    prev = _PREVIOUS.get(signum)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:  # default action: die by the same signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    atexit.register(kill_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            _PREVIOUS[sig] = signal.getsignal(sig)
            signal.signal(sig, _on_signal)
    _HANDLERS_INSTALLED = True


def _spawn(spec: dict, *, stdout=subprocess.DEVNULL) -> subprocess.Popen:
    _install_handlers()
    spec = {**spec, "parent": os.getpid()}
    try:
        p = subprocess.Popen(python_command(RUNNER), stdin=subprocess.PIPE, stdout=stdout, env=child_env(),
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError as err:
        raise RealLoadError(f"extraload: cannot start an external task ({err})") from None
    with _LOCK:
        _LIVE[p.pid] = p
    p.stdin.write((json.dumps(spec) + "\n").encode())
    p.stdin.flush()  # the pipe stays open: its end of file tells the child that we are gone
    return p


@dataclass
class _Running:
    task: Task
    proc: subprocess.Popen


class RealLoad:
    """Real external tasks for the processors this process hosts (see the module docstring).

    Parameters
    ----------
    tasks : list of Task
        All tasks of the run (those of processors not hosted here are ignored).
    processors : iterable of int
        The processors hosted by this process (under MPI: its rank).
    sinks : dict, optional
        ``{processor: (host, port)}`` of every sink (:meth:`open` fills it under MPI); by default this
        controller starts the sinks of the processors it hosts that receive data.
    scale : dict or float
        Work scale per processor (``1 / (p c_q)``: the emulated slowness, as the wall clock's compute).
    log_dir : path, optional
        Each child appends what it did to ``<log_dir>/<name>.log`` (tests, diagnosis).
    """

    def __init__(self, tasks: list[Task], processors, *, sinks: dict | None = None, scale=1.0,
                 log_dir: str | Path | None = None, start_sinks: bool = True):
        self.processors = sorted({int(q) for q in processors})
        self.tasks = [t for t in tasks if t.processor in self.processors]
        self.scale = scale
        self.log_dir = None if log_dir is None else Path(log_dir)
        self._t0 = time.monotonic()
        self._sinks: list[subprocess.Popen] = []
        self._running: list[_Running] = []
        self._started: set[int] = set()
        self._closed = False
        self.addresses: dict[int, tuple[str, int]] = dict(sinks or {})
        if start_sinks:
            receivers = {d for t in tasks for s in t.steps for d, _ in s.flows}
            for q in self.processors:
                if q in receivers and q not in self.addresses:
                    self.addresses[q] = self._start_sink(q)
        need = {d for t in self.tasks for s in t.steps for d, _ in s.flows}
        missing = sorted(need - set(self.addresses))
        if missing:
            self.close()
            raise RealLoadError(f"extraload: no sink address for processor(s) {missing}")
        for i, t in enumerate(self.tasks):  # time-driven tasks start now (they wait for their time themselves)
            if t.start_phase is None:
                self._launch(i)

    @classmethod
    def open(cls, comm, tasks: list[Task], *, scale=1.0, log_dir=None) -> RealLoad:
        """Collective: each rank hosts its processor; sink addresses are exchanged with an allgather."""
        rank = comm.Get_rank()
        receivers = {d for t in tasks for s in t.steps for d, _ in s.flows}
        owner, addr, err = None, None, None
        try:
            owner = cls([], [rank], scale=scale, log_dir=log_dir, start_sinks=False)
            if rank in receivers:
                addr = owner._start_sink(rank)
        except RealLoadError as e:
            err = str(e)
        everyone = comm.allgather((addr, err))
        errors = [e for _, e in everyone if e]
        if errors:
            if owner is not None:
                owner.close()
            raise RealLoadError(errors[0])
        sinks = {q: a for q, (a, _) in enumerate(everyone) if a is not None}
        load = cls(tasks, [rank], sinks=sinks, scale=scale, log_dir=log_dir, start_sinks=False)
        load._sinks, owner._sinks = owner._sinks, []  # the sink started above belongs to the new controller
        owner.close()
        return load

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> RealLoad:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every task and sink of this controller (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _terminate([r.proc for r in self._running] + self._sinks)
        self._running.clear()
        self._sinks.clear()

    # -- phases --------------------------------------------------------------------------------
    def begin_phase(self, phase: int) -> None:
        """Stop the tasks whose last phase has passed and start those of ``phase``."""
        stop = [r for r in self._running if r.task.stop_phase is not None and r.task.stop_phase < phase]
        if stop:
            _terminate([r.proc for r in stop])
            self._running = [r for r in self._running if r not in stop]
        for i, t in enumerate(self.tasks):
            if i not in self._started and t.start_phase is not None and t.start_phase <= phase and \
                    (t.stop_phase is None or t.stop_phase >= phase):
                self._launch(i)

    def pids(self) -> list[int]:
        """Process ids of the running tasks and sinks."""
        return [r.proc.pid for r in self._running if r.proc.poll() is None] + \
            [p.pid for p in self._sinks if p.poll() is None]

    def running(self) -> list[str]:
        return [r.task.name for r in self._running if r.proc.poll() is None]

    # -- internals -----------------------------------------------------------------------------
    def _logfile(self, name: str) -> str | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return str(self.log_dir / f"{name}.log")

    def _start_sink(self, q: int) -> tuple[str, int]:
        p = _spawn({"mode": "sink", "host": "127.0.0.1", "log": self._logfile(f"sink-{q}")}, stdout=subprocess.PIPE)
        self._sinks.append(p)
        line = p.stdout.readline()
        try:
            return ("127.0.0.1", int(line))
        except ValueError:
            raise RealLoadError(f"extraload: the data sink of processor {q} did not start") from None

    def _launch(self, i: int) -> None:
        t = self.tasks[i]
        now = time.monotonic()
        start_at = self._t0 + t.start_time if t.start_time is not None else now
        stop_at = None if t.stop_time is None else self._t0 + t.stop_time
        if stop_at is not None and stop_at <= max(start_at, now):
            self._started.add(i)
            return
        scale = self.scale.get(t.processor, 1.0) if isinstance(self.scale, dict) else float(self.scale)
        spec = {"mode": "task", "name": t.name, "repeat": t.repeat, "start_at": start_at, "stop_at": stop_at,
                "steps": [[s.kind, s.amount, [list(f) for f in s.flows]] for s in t.steps], "scale": scale,
                "sinks": {str(d): list(self.addresses[d]) for s in t.steps for d, _ in s.flows},
                "log": self._logfile(t.name)}
        self._running.append(_Running(t, _spawn(spec)))
        self._started.add(i)
        log.debug("external task %s started (pid %d)", t.name, self._running[-1].proc.pid)
