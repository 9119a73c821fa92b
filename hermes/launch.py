"""Start hermes under ``mpiexec``: find the launcher, add the flags this machine needs.

``hermes run`` started without a launcher re-executes itself as
``mpiexec [flags] -n P python -m mpi4py -m hermes run ...``. ``python -m mpi4py`` makes an uncaught
exception on any rank abort the whole job instead of leaving the others waiting.

Flags (see ENVIRONMENT.md): Open MPI refuses to run as root without ``--allow-run-as-root`` and to
start more ranks than cores without ``--oversubscribe``; MPICH's Hydra needs neither.

Open MPI's report of a non-zero exit
------------------------------------
When bad input is found under MPI, every rank exits with status 2 after ``MPI_Finalize``
(``hermes.cli._exit_together``), and Open MPI 5's launcher ``prterun`` follows hermes' one line with
six of its own ("prterun detected that one or more processes exited with non-zero status ...", the
``[prun:non-zero-exit]`` text of its help-prun.txt). PRRTE prints it whenever a process of a job marked
``PRTE_JOB_ERROR_NONZERO_EXIT`` ends with a non-zero status (``print_aborted_job`` in
src/runtime/prte_quit.c, read in openpmix/prrte); the only switch, ``--runtime-options
error-nonzero-status=false`` (MCA ``state_base_error_non_zero_exit``), also drops the status: ``mpiexec``
then exits 0 (checked with Open MPI 5.0.11: ranks exiting 2, with or without ``MPI_Finalize``, give
``mpiexec`` status 0). No other PRRTE option silences the report and keeps the status, and an
``MPI_Abort`` prints a longer one. hermes therefore keeps the status and avoids the report the other way:
``hermes run`` validates everything it can before it starts ``mpiexec`` (:mod:`hermes.preflight`), so bad
input is one line and no MPI job; only a job started by hand with ``mpiexec ... --no-launch`` shows Open
MPI's report after hermes' line (tests/test_bad_input.py checks both).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

__all__ = ["under_mpi_launcher", "find_mpiexec", "mpi_flavour", "mpiexec_command"]

_LAUNCHER_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "PMI_FD", "MPI_LOCALNRANKS",
                 "HYDRA_CONTROL_FD", "MPIEXEC_HOSTNAME", "SLURM_STEP_NUM_TASKS")


def under_mpi_launcher(environ=os.environ) -> bool:
    """True when this process was started by mpiexec/srun (the launcher sets these variables)."""
    return any(k in environ for k in _LAUNCHER_ENV)


def find_mpiexec() -> str | None:
    """The mpiexec next to this Python (the venv's MPI wheel) first, then the one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    return shutil.which("mpiexec") or shutil.which("mpirun")


@lru_cache(maxsize=8)
def mpi_flavour(mpiexec: str) -> str:
    """``openmpi``, ``mpich`` or ``unknown``, from ``mpiexec --version``."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    low = out.lower()
    if "open mpi" in low or "open-mpi" in low or "openrte" in low or "prte" in low:
        return "openmpi"
    if "hydra" in low or "mpich" in low:
        return "mpich"
    return "unknown"


def mpiexec_command(n: int, args: list[str], *, mpiexec: str | None = None, python: str | None = None,
                    module: str = "hermes") -> list[str]:
    """The full command that runs ``python -m mpi4py -m <module> <args>`` on ``n`` ranks.

    Adds ``--allow-run-as-root`` (Open MPI as root) and ``--oversubscribe`` (Open MPI, more ranks
    than cores) where needed.
    """
    exe = mpiexec or find_mpiexec()
    if exe is None:
        from hermes.errors import HermesError

        raise HermesError("no mpiexec found: install the 'mpich' wheel (pip install mpich) or a system MPI")
    flags: list[str] = []
    if mpi_flavour(exe) == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--allow-run-as-root")
        if n > (os.cpu_count() or 1):
            flags.append("--oversubscribe")
    return [exe, *flags, "-n", str(int(n)), python or sys.executable, "-m", "mpi4py", "-m", module, *args]
