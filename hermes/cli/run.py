"""``hermes run``: look the application up once, validate serially, start the MPI job, run it there, print the end.

Outside MPI (and without ``--no-launch``) this process is the launcher: the application's
:meth:`~hermes.cli.application.Application.prepare_launch` validates the scenario and claims the run directory,
then ``mpiexec`` runs the same command line with ``--no-launch`` (the lock on the run directory is held until the
job has ended). In the job, every rank runs :meth:`~hermes.cli.application.Application.run` on the job's
communicator (:func:`hermes.runtime.world.world`); bad input is one line on rank 0 and every rank exits 2, and an
error only some ranks met is one line naming the rank that met it (:func:`hermes.cli.common.exit_together`).
"""

from __future__ import annotations

import contextlib
import logging
import sys

from hermes.cli.application import Application
from hermes.cli.common import EXIT_BAD_INPUT, abort_on_uncaught, error, exit_together
from hermes.runtime.world import world
from hermes.cli.run_brusselator import BAHI_STUDY
from hermes.cli.run_mesh import MESH

__all__ = ["APPLICATIONS", "application_for", "cmd_run"]

#: the applications ``hermes run`` runs, asked in this order which one a command line is for (the mesh application
#: takes every scenario, so it comes last)
APPLICATIONS: tuple[Application, ...] = (BAHI_STUDY, MESH)


def application_for(args) -> Application:
    """The application of a ``hermes run`` command line: the first of :data:`APPLICATIONS` that runs it."""
    return next(app for app in APPLICATIONS if app.runs(args))


def cmd_run(args, argv: list[str]) -> int:
    from hermes.runtime.launch import under_mpi_launcher

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("matplotlib", "PIL"):  # --verbose is about hermes, not about font lookups
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.resume is not None and (args.scenario or args.overrides or args.out or args.force):
        return error("resume: the scenario and the directory come from RUN_DIR (no scenario, --set, --out or "
                     "--force with it)")
    app = application_for(args)
    if not under_mpi_launcher() and not args.no_launch:
        return _launch(app, args, argv)
    return _job(app, args)


def _launch(app: Application, args, argv: list[str]) -> int:
    """The launcher: the application's serial checks, then the job under mpiexec; the job's exit status."""
    from hermes.errors import HermesError
    from hermes.progress import Progress
    from hermes.runtime.launch import mpiexec_command, run_job

    try:
        launch = app.prepare_launch(args)
    except HermesError as err:
        return error(str(err))
    try:  # the lock is held until the job has ended (a second run into the directory is refused meanwhile)
        try:
            cmd = mpiexec_command(launch.processes, [*argv, *launch.extra, "--no-launch"])
        except HermesError as err:
            return error(str(err))
        n, p = launch.processes, launch.processors
        if not args.quiet:
            token = launch.lock.token if launch.lock is not None else None
            hosted = f" ({p} processors on {n} process{'es' * (n != 1)})" if p != n else ""
            print("hermes: launching: " + " ".join(c for c in cmd if c != token).replace(" --lock-token", "")
                  + hosted, flush=True)
        # mpiexec's start and each rank's imports take seconds before the job's first line: a status meanwhile,
        # ended (run_job's first_output) before the job's first byte of output is relayed
        with Progress(enabled=not args.quiet) as waiting:
            waiting.status(f"starting {n} MPI process{'es' * (n != 1)} for {p} processor{'s' * (p != 1)}")
            end = run_job(cmd, verbose=args.verbose, ranks=launch.processes,
                          first_output=None if args.quiet else waiting.close)
    finally:
        if launch.lock is not None:
            launch.lock.release(remove_if_unused=True)
    if end.signal is not None:
        import signal

        note = app.stopped(signal.Signals(end.signal).name)
        if note is not None:
            print(note, file=sys.stderr)
    return end.status


def _job(app: Application, args) -> int:
    """A rank of the job (or this process with ``--no-launch``): the application's run, collectively."""
    from hermes.errors import HermesError, RuntimeDefect
    from hermes.runtime.launch import rank_done

    comm = world()
    rank = comm.Get_rank()
    if comm.Get_size() > 1:
        abort_on_uncaught(comm)
    with contextlib.ExitStack() as held:  # released once the error line is out, or before the result is printed
        try:
            outcome = app.run(args, comm, held)
        except (HermesError, RuntimeDefect, SystemExit) as err:
            message, code = str(err), EXIT_BAD_INPUT
            if isinstance(err, RuntimeDefect):  # a defect the runtime found (hosting): one line, exit 1
                message, code = f"{err} (a defect of the code that runs, not of the input)", 1
            if isinstance(err, SystemExit):  # hermes raises none: a plug-in's sys.exit must not end the job as done
                message, code = (f"the run was ended by sys.exit({err.code!r}) before it finished (raised by a "
                                 f"plug-in?)"), 1
            if comm.Get_size() == 1:
                error(message)
                return code
            error(message, rank)  # rank 0 now; another rank's own line only if it fails alone (exit_together)
            exit_together(comm, code, message=message)
            return code
    if rank == 0 and not args.quiet:
        lines = app.result_lines(outcome, args)
        if lines:
            print("\n".join(lines), flush=True)
    rank_done(comm.Get_rank())
    return 0
