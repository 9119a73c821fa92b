"""Start-up: the runtime communicator a job's processors get, chosen once (:func:`start`), and the processes
that host a run (:func:`processes_for`).

A job of as many MPI processes as processors runs each processor on a :class:`~hermes.runtime.plain.PlainComm`
(mpi4py's own communicator: no envelope, nothing relayed through a process, and nothing of
:mod:`hermes.runtime.hosting` imported); a job of fewer processes hosts several processors per process on
:class:`~hermes.runtime.hosting.HostedComm`. Both give the same bits (:mod:`hermes.runtime.communicator`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["start", "processes_for", "usable_cores"]


def start(p: int, fn: Callable[[Any], Any], world=None) -> dict[int, Any]:
    """Run ``fn(comm)`` for each of the ``p`` processors this process runs, on the job's processes ``world`` (an
    mpi4py communicator; None: this process alone); the processors' return values by rank (collective over
    ``world``).

    With as many processes as processors, ``comm`` is a :class:`~hermes.runtime.plain.PlainComm` on a duplicate of
    ``world`` (:data:`MPI.COMM_SELF` when ``world`` is None); with fewer, a
    :class:`~hermes.runtime.hosting.HostedComm` of :func:`hermes.runtime.hosting.host_run`."""
    n = 1 if world is None else world.Get_size()
    if n == p:
        from hermes.runtime.plain import PlainComm

        if world is None:
            from mpi4py import MPI

            world = MPI.COMM_SELF
        comm = PlainComm(world)
        out = {comm.rank: fn(comm)}
        comm.Free()
        return out
    from hermes.runtime.hosting import host_run

    return host_run(p, fn, world)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity; else the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def processes_for(run, clock: str, p: int, requested: int | None = None, *, cores: int | None = None,
                  what: str = "--processes", drawing: bool = False) -> int:
    """The MPI processes that host a run of ``p`` processors on the scenario's ``clock`` (``virtual`` or
    ``wall``): ``requested`` (``--processes``), else the ``processes`` of its ``run`` section
    (:class:`hermes.sections.RunSpec`), else one per processor up to the usable cores (the processors shared
    evenly among them) — one core fewer when ``drawing``: a refined run whose pictures a worker draws while
    the phases run (:mod:`hermes.viz.ahead`) leaves it a core, else the busy ranks starve it and the pictures
    wait for the end (on 2 cores: refine-airfoil's phases as fast on 1 process as on 2, its pictures ready
    ~2 s sooner; results/drawing.md). ``clock: wall`` measures each processor's own process: one per
    processor.

    Raises
    ------
    ScenarioError
        One line: more processes than processors, or fewer than processors on the wall clock.
    """
    from hermes.errors import ScenarioError

    n = requested if requested is not None else run.processes
    key = what if requested is not None else "run.processes"
    if n is None:
        if clock == "wall":
            return p
        return min(p, max(1, (cores or usable_cores()) - (1 if drawing else 0)))
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError(f"{key}: {n!r} is not a number of processes (an integer ≥ 1)")
    if n > p:
        raise ScenarioError(f"{key}: {n} processes for {p} processors (at most one process per processor)")
    if clock == "wall" and n != p:
        raise ScenarioError(f"{key}: clock: wall measures each processor's own process, so it needs one process "
                            f"per processor ({p}), not {n}")
    return n
