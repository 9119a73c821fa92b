"""What an application offers ``hermes run``: the :class:`Application` interface and what it hands back.

hermes runs two applications: the adaptive mesh application (:mod:`hermes.app.mesh`, its phases sequenced by
:mod:`hermes.lifecycle.driver`; :mod:`hermes.cli.run_mesh`) and the Brusselator study of 003
(:mod:`hermes.app.brusselator`;
:mod:`hermes.cli.run_brusselator`). :mod:`hermes.cli.run` looks the application of a command line up once
(:data:`hermes.cli.run.APPLICATIONS`) and does the rest the same way for both: the launcher's checks, ``mpiexec``,
the job, the lines printed at the end.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Application", "Launch", "Outcome"]


@dataclass(frozen=True)
class Launch:
    """What the launcher starts: ``mpiexec -n processes`` hosting ``processors``, the command line's own
    arguments followed by ``extra`` (for the job: ``--lock-token``, a default ``--out`` ...); ``lock`` is the run
    directory's (:class:`hermes.files.DirLock`, None without a run directory), held until the job has ended."""

    processes: int
    processors: int
    extra: list[str]
    lock: Any = None


@dataclass(frozen=True)
class Outcome:
    """A job's result: ``summary`` on rank 0 (None on the other ranks) and the validated ``scenario`` (the
    scenario or spec the job ran; None for a resumed run, whose scenario the checkpoint holds)."""

    summary: Any
    scenario: Any = None


class Application(Protocol):
    """One application ``hermes run`` runs. ``args`` is the parsed ``hermes run`` command line."""

    #: a short name ("mesh", "bahi")
    name: str

    def runs(self, args) -> bool:
        """Whether this application runs the command line's scenario (cheap: read, not validated)."""

    def prepare_launch(self, args) -> Launch:
        """Serially, before ``mpiexec``: validate the scenario (every check that needs no MPI) and claim the run
        directory. Raises HermesError (one line)."""

    def run(self, args, comm, held: contextlib.ExitStack) -> Outcome:
        """Collective, inside the job: load and validate the scenario on every rank, run it on ``comm``, write its
        results. What must be released when the job ends (a run directory's lock) goes on ``held``. Raises
        HermesError on every rank alike."""

    def result_lines(self, outcome: Outcome, args) -> list[str]:
        """What rank 0 prints at the end (unless ``--quiet``)."""

    def stopped(self, signal_name: str) -> str | None:
        """The line printed when a signal ended the job (None: nothing)."""
