"""Many emulated processors per MPI process: :class:`HostedComm`, the communicator every run's code sees.

A run of ``P`` processors on ``N ≤ P`` MPI processes gives each process a contiguous block of processors
(:func:`blocks`); each processor runs the unchanged SPMD code of hermes in its own *greenlet* (a user-level
thread, as Adaptive MPI's virtual ranks and SimGrid's SMPI actors are), on a :class:`HostedComm` that offers
the part of mpi4py's communicator API hermes uses. A processor that waits — for a message, a request or a
collective — switches to its process' scheduler (:class:`Host`), which runs the next processor that can go
on. Switching is cooperative, so a processor's code runs undisturbed between two communications, and the
order in which a process runs its processors never changes a result: every message is matched as MPI
matches it (per source and tag, in send order; posted receives in post order) and every collective is
computed once per process from all ``P`` contributions in rank order.

Between processes the scheduler bridges over MPI with envelopes (mpi4py's own object messages, as hermes'
other messages between its processes): point-to-point messages go straight
to the process hosting the destination (MPI keeps their order per pair of processes), and the ``k``-th
collective of a process' processors is sent to process 0, which assembles the ``P`` contributions and sends
each process what its processors need. Nothing waits inside MPI: the scheduler probes for envelopes while
its processors wait, so a process never blocks the progress of another.

What hosting guarantees (:mod:`hermes.hosting.host` tells how; tests/test_hosting.py checks each):

- *The caller's communicator is left alone*: the bridge listens on its own ``world.Dup()`` (made when the run
  starts, freed when it ends normally), so a message of the caller's own code on ``world`` stays there for it.
- *A poll makes progress*: a processor's ``Iprobe`` or ``Test`` that finds nothing reads the envelopes that have
  reached its process before it answers, so a processor that keeps polling sees a message from another process
  as soon as MPI has delivered it (the first poll after, as plain MPI's own ``Iprobe``).
- *A deadlock or a mismatched collective ends in one line*: when every processor of every process waits for
  something that never comes (found by a four-counter termination detection, never by a timeout: a slow run is
  never ended), or processes call different collectives (or roots) as their ``k``-th, every process raises one
  :class:`HostedError` naming the processors; within one process the same is found at once.
- *Cancel*: cancelling a posted receive that no message has matched withdraws it (its status says cancelled);
  cancelling a send or a completed receive is refused in one line.
- *Sends are buffered*: a send completes as soon as it is made (its data is copied), whether or not a receive
  is posted. An ordering that is unsafe under MPI — two processors that both send a large message before they
  receive, which MPI may deadlock on once the messages exceed its eager limit — runs here; hosting cannot reveal
  it (run with one process per processor and plain MPI to do so).

What a processor's code gets is what MPI gives: a received object is a copy (a deep copy; immutable values
are shared), a buffer is copied into, reductions of Python objects fold in rank order (so results do not
depend on ``N``; mpi4py's own order for floats may differ), ``Abort`` ends the whole job. The clock, the
counters and the costs are hermes' own (:mod:`hermes.comm`): a message between two processors hosted
together is counted and charged as any other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from hermes.hosting.comm import HostedComm
from hermes.hosting.host import Host, host_run
from hermes.hosting.values import (ANY_SOURCE, ANY_TAG, HostedError, Request, Status, blocks,
                                   waitall)

__all__ = ["ANY_SOURCE", "ANY_TAG", "Host", "HostedComm", "HostedError", "Request", "Status", "blocks", "host_run",
           "processes_for", "shared", "shared_value", "usable_cores", "waitall"]


def shared(comm, name: str, inputs: Any, build: Callable[[], np.ndarray]) -> np.ndarray:
    """``build()`` — an array every processor computes alike from the same ``inputs`` (a global matrix) — once
    per process for the processors it hosts: the processors whose ``inputs`` are equal (compared by their
    SHA-256 of their ``repr``: plain lists and numbers, whose repr is exact) get the same read-only array;
    without hosting, ``build()`` itself."""
    host = getattr(comm, "host", None)
    if host is None:
        return build()
    import hashlib

    from hermes.hosting.values import _frozen

    hit = host.shared.get(name)
    if hit is not None and hit[2] is not None and _same_items(hit[2], inputs):
        return hit[1]  # the very immutable objects a hosted gather shared: no hashing
    key = hashlib.sha256(repr(inputs).encode()).digest()
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    value.flags.writeable = False
    immutable = isinstance(inputs, (list, tuple)) and all(map(_frozen, inputs))
    host.shared[name] = (key, value, inputs if immutable else None)
    return value


def shared_value(comm, name: str, items: list, array: np.ndarray, build: Callable[[], Any],
                 freeze: Callable[[Any], None] | None = None) -> Any:
    """``build()`` once per process for the hosted processors whose inputs are the same: ``items`` the very
    same immutable objects (a hosted gather shares them) and ``array`` equal; ``freeze(value)`` makes the
    shared value read-only (a processor changing it in place would change it for all). Without hosting, or
    with mutable items, ``build()`` itself."""
    host = getattr(comm, "host", None)
    if host is None:
        return build()
    from hermes.hosting.values import _frozen

    hit = host.shared.get(name)
    if hit is not None and _same_items(hit[0], items) and np.array_equal(hit[1], array):
        return hit[2]
    value = build()
    if all(map(_frozen, items)):
        if freeze is not None:
            freeze(value)
        host.shared[name] = (items, np.array(array, copy=True), value)
    return value


def _same_items(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are sequences of the same objects (identity)."""
    return isinstance(b, (list, tuple)) and len(a) == len(b) and all(x is y for x, y in zip(a, b))


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
