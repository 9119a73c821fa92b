"""Many emulated processors per MPI process: :class:`HostedComm`, the runtime communicator of a job with fewer MPI
processes than processors (:func:`hermes.runtime.start.start`; with one process per processor the job runs on
:class:`hermes.runtime.plain.PlainComm` and nothing here is imported).

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

What hosting guarantees (:mod:`hermes.runtime.hosting.host` tells how; tests/test_hosting.py checks each):

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
counters and the costs are hermes' own (:mod:`hermes.runtime.comm`): a message between two processors hosted
together is counted and charged as any other.
"""

from __future__ import annotations

from hermes.runtime.hosting.hosted_comm import HostedComm
from hermes.runtime.hosting.host import Host, host_run
from hermes.runtime.hosting.values import ANY_SOURCE, ANY_TAG, HostedError, Request, Status, blocks, waitall

__all__ = ["ANY_SOURCE", "ANY_TAG", "Host", "HostedComm", "HostedError", "Request", "Status", "blocks", "host_run",
           "waitall"]
