"""What every command shares: the one-line error, ``--param`` and ``--timeout`` parsing, and the MPI job's end.

The job's communicator is :func:`hermes.runtime.world.world`, the one place hermes names ``MPI.COMM_WORLD``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["EXIT_BAD_INPUT", "AGREE_WAIT", "error", "world_rank", "parse_params", "check_timeout",
           "exit_together", "naming_rank", "abort_on_uncaught"]

EXIT_BAD_INPUT = 2


def world_rank() -> int:
    """This process's rank in a job started by a launcher (0 outside MPI), without initialising MPI."""
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        try:
            return int(os.environ[key])
        except (KeyError, ValueError):
            continue
    return 0


def error(msg: str, rank: int = 0) -> int:
    """One line ``hermes: error: ...`` on rank 0 (a newline in a path or a value shown as ``\\n``)."""
    if rank == 0:
        from hermes.errors import one_line

        print(f"hermes: error: {one_line(msg)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def parse_params(items: list[str]) -> dict:
    from hermes.errors import BalancerError
    from hermes.scenario import yaml_value

    out = {}
    for item in items:
        if "=" not in item:
            raise BalancerError(f"--param {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = yaml_value(v)
        except ValueError as err:
            raise BalancerError(f"--param {k.strip()}: {err}") from None
    return out


def check_timeout(args) -> float | None:
    """``--timeout`` checked as ``run.timeout`` is (one line)."""
    if args.timeout is None:
        return None
    from pydantic import ValidationError

    from hermes.errors import ScenarioError, validation_message
    from hermes.sections import RunSpec

    try:
        return RunSpec(timeout=args.timeout).timeout
    except ValidationError as err:
        raise ScenarioError("--timeout: " + validation_message(err).split(": ", 1)[1]) from None


#: how long a rank that met an error waits for every other rank to meet it too (:func:`exit_together`)
AGREE_WAIT = 10.0


def exit_together(comm, code: int, timeout: float = AGREE_WAIT, *, message: str | None = None) -> None:
    """Every rank exits with ``code`` after rank 0's message is out — without MPI_Abort when every rank is here.

    ``python -m mpi4py`` turns a non-zero exit into MPI_Abort, which may kill rank 0 before its error line is
    flushed. Bad input is agreed on by all ranks, so they meet at a barrier, finalise MPI and leave with the same
    status (rank 0 printed the line, :func:`error`). An error that only some ranks met (a rank-local failure that
    was not agreed, e.g. a solver's iteration limit on one processor) leaves them waiting for ranks that are
    elsewhere: after ``timeout`` seconds a rank other than 0 prints its own line — ``message``, naming the rank —
    and the job is aborted with ``code``. Under the self-launching ``hermes run`` the user sees the first
    ``hermes: error:`` line only (:class:`hermes.runtime.launch.StderrRelay`), under every launch one line
    names the failing rank.
    """
    import time

    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout
    while not req.Test():
        if time.monotonic() > deadline:
            rank = comm.Get_rank()
            if rank != 0 and message is not None:
                error(naming_rank(message, rank))
                sys.stderr.flush()
            time.sleep(0.5)  # let the MPI runtime forward the line before it kills the job
            comm.Abort(code)
            os._exit(code)  # MPICH's MPI_Abort returns (5.0.2; Hydra ends the job later): never print twice
        time.sleep(0.001)
    MPI.Finalize()
    os._exit(code)


def naming_rank(message: str, rank: int) -> str:
    """``message`` prefixed with ``rank R: `` unless it already starts by naming a rank or processor."""
    import re

    return message if re.match(r"(rank|processor|process) \d+", message) else f"rank {rank}: {message}"


def abort_on_uncaught(comm) -> None:
    """An unexpected exception on any rank aborts the whole job (python -m mpi4py semantics)."""
    old = sys.excepthook

    def hook(etype, value, tb):
        old(etype, value, tb)
        sys.stderr.flush()
        comm.Abort(1)
        os._exit(1)  # MPICH's MPI_Abort returns: the rank must not go on to MPI_Finalize and exit 0

    sys.excepthook = hook
