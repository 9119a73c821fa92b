"""A watchdog that ends an MPI job which stopped making progress (``run.timeout`` / ``--timeout``).

A rank stopped (``kill -STOP``), swapped out for ever or stuck in a dead-locked library call leaves every
other rank waiting in its next collective, for ever: MPI has no time-out of its own. Each rank therefore
runs a thread that watches its own progress — the driver calls :meth:`Watchdog.beat` after the set-up and
after every phase — and, when a rank has not progressed for ``timeout`` wall seconds, prints one line and
calls ``MPI_Abort``: the MPI runtime then kills every rank of the job, the stopped ones included (SIGKILL
reaches a stopped process). The ranks that wait are the ones that notice; rank ``r`` waits ``min(r, 3)``
grace periods (2 s, or a fifth of the time-out) longer than rank 0, so usually exactly one rank reports
(and the self-launching ``hermes run`` shows one line in any case, :func:`hermes.runtime.launch.run_job`). The
thread needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default) for the abort from a second thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["Watchdog", "EXIT_TIMEOUT"]

#: the exit status of a job ended by the watchdog (as coreutils' ``timeout``)
EXIT_TIMEOUT = 124


class Watchdog:
    """Watch one rank's progress; abort the job after ``timeout`` seconds without a :meth:`beat`.

    Use as a context manager; with ``timeout=None`` it does nothing.

    Parameters
    ----------
    comm
        The job's communicator (``Abort`` is called on it).
    timeout
        Wall seconds a phase (or the set-up) may take; None: no watchdog.
    what
        How the user set the limit, for the message.
    doing
        What the rank does under the watch, when it is one step (``"importing plug-in 'X'"``): the message then
        says that this did not finish in time.
    leader
        Whether this rank watches for its process (:attr:`hermes.runtime.communicator.Communicator.process_leader`:
        one watchdog per process, however many processors it hosts).
    """

    def __init__(self, comm, timeout: float | None, *, what: str = "run.timeout, --timeout",
                 doing: str | None = None, leader: bool = True):
        self.comm, self.timeout, self.what, self.doing, self.leader = comm, timeout, what, doing, leader
        self.phase: int | None = None
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watchdog:
        # one watchdog per process: the first processor it hosts watches for all (hermes.runtime.hosting)
        if self.timeout is not None and self.leader:
            self._last = time.monotonic()
            self._thread = threading.Thread(target=self._watch, name="hermes-watchdog", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def beat(self, phase: int) -> None:
        """This rank finished ``phase`` (0: the set-up)."""
        self.phase = phase
        self._last = time.monotonic()

    def stop(self) -> None:
        """Stop watching (the run's collective part is over)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _watch(self) -> None:
        rank = self.comm.Get_rank()
        limit = self.timeout + min(rank, 3) * max(2.0, 0.2 * self.timeout)
        while not self._stop.wait(min(1.0, self.timeout / 10)):
            if time.monotonic() - self._last > limit:
                after = {None: "during the set-up", 0: "since the set-up ended"}.get(self.phase,
                                                                                    f"since phase {self.phase} ended")
                sys.stdout.flush()
                if self.doing is not None:
                    sys.stderr.write(f"hermes: error: rank {rank}: {self.doing} did not finish within "
                                     f"{self.timeout:g} s ({self.what}); ending the job\n")
                else:
                    sys.stderr.write(f"hermes: error: no progress for {self.timeout:g} s {after} ({self.what}): a "
                                     f"rank is stopped or hung; ending the job\n")
                sys.stderr.flush()
                time.sleep(0.5)  # let the MPI runtime forward the line before it kills the job
                self.comm.Abort(EXIT_TIMEOUT)
                os._exit(EXIT_TIMEOUT)  # MPICH's MPI_Abort returns (5.0.2), and this rank may be the one stuck
                return
