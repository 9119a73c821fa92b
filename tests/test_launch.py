"""The launcher's job control without MPI: signals forwarded, nothing of the job left running, one error
line relayed (the same under mpiexec: tests/mpi/test_lifecycle.py)."""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes.runtime.launch import _relay_stderr, run_job

#: a "job": a child that starts a grandchild in its session; both ignore SIGTERM if asked to
JOB = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
kid = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "time.sleep(600)"])
print(kid.pid, flush=True)
open(sys.argv[2], "w").write(str(kid.pid))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("mode, sig", [("polite", signal.SIGTERM), ("stubborn", signal.SIGTERM),
                                       ("polite", signal.SIGHUP), ("stubborn", signal.SIGINT)])
@pytest.mark.slow
def test_a_signal_is_forwarded_and_nothing_of_the_job_survives(tmp_path, mode, sig):
    pidfile = tmp_path / "kid"

    def send():
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        os.kill(os.getpid(), sig)

    threading.Thread(target=send, daemon=True).start()
    before = signal.getsignal(sig)
    t0 = time.monotonic()
    end = run_job([sys.executable, "-c", JOB, mode, str(pidfile)], grace=1.0)
    assert end.signal == sig and end.status == 128 + sig
    kid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(kid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(kid)  # the grandchild ignored SIGTERM: the session sweep killed it
    assert time.monotonic() - t0 < 20
    assert signal.getsignal(sig) is before  # the launcher's handlers are gone with the job


def test_a_job_that_ends_normally_reports_its_status():
    assert run_job([sys.executable, "-c", "raise SystemExit(3)"]).status == 3
    end = run_job([sys.executable, "-c", "pass"])
    assert (end.status, end.signal) == (0, None)


def _streams(monkeypatch) -> tuple[io.BytesIO, io.BytesIO]:
    out, err = io.BytesIO(), io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(err))
    return out, err


@pytest.mark.parametrize("first", ["stdout", "stderr"])
def test_the_launcher_s_status_ends_before_the_job_s_first_output(monkeypatch, first):
    """hermes run's launcher shows "starting 2 MPI processes ..." until the job's first output: first_output is
    called once, before any byte of the job reaches either stream; the job's output passes whole (a partial line
    too), its status stays the job's."""
    from hermes.interpreter import python_command

    out, err = _streams(monkeypatch)
    seen: list[tuple[int, int]] = []
    first_line = {"stdout": "print('hermes: r on 2 processors', flush=True)",
                  "stderr": "sys.stderr.write('hermes: error: a full disk\\n'); sys.stderr.flush()"}[first]
    script = (f"import sys, time; time.sleep(0.3); {first_line}; time.sleep(0.2); "
              f"sys.stdout.write('partial'); sys.stdout.flush(); time.sleep(0.1); print(' line'); "
              f"raise SystemExit(3)")
    end = run_job(python_command("-c", script),
                  first_output=lambda: seen.append((len(out.getvalue()), len(err.getvalue()))))
    assert seen == [(0, 0)]  # once, before anything was written
    assert end.status == 3
    text = out.getvalue().decode()
    assert text.endswith("partial line\n") and ("hermes: r on 2 processors\n" in text) == (first == "stdout")
    assert ("hermes: error: a full disk" in err.getvalue().decode()) == (first == "stderr")


def test_the_launcher_s_status_ends_before_its_own_last_line(monkeypatch):
    """A job that says nothing and ends without its rank saying it finished: the status ends before the
    launcher's line naming the rank."""
    from hermes.interpreter import python_command

    out, err = _streams(monkeypatch)
    seen: list[int] = []
    end = run_job(python_command("-c", "pass"), ranks=1, first_output=lambda: seen.append(len(err.getvalue())))
    assert seen == [0] and end.status == 1 and out.getvalue() == b""
    assert "rank 0 ended before the job finished" in err.getvalue().decode()


def test_without_a_status_the_job_s_output_is_not_relayed(monkeypatch):
    from hermes.interpreter import python_command

    out, _ = _streams(monkeypatch)
    assert run_job(python_command("-c", "print('direct')")).status == 0
    assert out.getvalue() == b""  # the job wrote to the launcher's file descriptor 1, not through sys.stdout


@pytest.mark.parametrize("status, told, expected", [
    (9, b"Abort(124) on node 0 (rank 0 in comm 0): application called MPI_Abort(comm=0x84000002, 124) - process 0\n",
     124),
    (137, b"Abort(2) on node 1 (rank 1 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 2) - process 1\n", 2),
    (9, b"", 9),  # a rank killed without an abort (the OOM killer): the signal stays the status
    (3, b"Abort(124) on node 0 (rank 0 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 124) - process 0\n",
     3),
], ids=["watchdog", "error", "no-abort", "other-status"])
def test_a_job_killed_by_hydra_after_an_abort_reports_the_abort_s_code(status, told, expected):
    """MPICH's Hydra SIGKILLs the remaining ranks once one leaves after MPI_Abort(code) and may end with 9: the
    watchdog's job then ended with 9 instead of 124 (make check-mpich, test_a_stopped_rank_ends_the_job_through_the
    _watchdog). The launcher reports the code the aborting rank gave when the job's status is SIGKILL's."""
    script = f"import sys; sys.stderr.buffer.write({told!r}); sys.stderr.flush(); raise SystemExit({status})"
    assert run_job([sys.executable, "-c", script]).status == expected


def test_stderr_keeps_one_error_line_and_drops_the_job_end_banners():
    frame = b"-" * 74 + b"\n"
    warning = frame + b"WARNING: a warning of Open MPI stays\n" + frame
    abort = frame + b"MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n  Errorcode: 124\n\n" + frame
    exited = frame + b"prterun has exited due to process rank 1\n" + frame
    error = b"hermes: error: no progress for 5 s since phase 1 ended\n"
    # the PMIx server's teardown line (CI saw it after a plug-in's error on 2 ranks)
    pmix = b"[vm:30253] PMIX ERROR: PMIX_ERR_UNREACH in file /openmpi-5.0.11/3rd-party/openpmix/src/server/" \
           b"pmix_server.c at line 3146\n"
    # the banners may come before the line or after it; the line may come from several ranks
    for job in (b"phase 1\n" + warning + error + abort + error + exited + b"\0\n",
                b"phase 1\n" + warning + abort + exited + error + error,
                b"phase 1\n" + warning + error + pmix + abort, b"phase 1\n" + warning + pmix + error):
        sink = io.BytesIO()
        _relay_stderr(io.BytesIO(job), sink)
        assert sink.getvalue().decode().splitlines() == [
            "phase 1", "-" * 74, "WARNING: a warning of Open MPI stays", "-" * 74, error.decode().strip()]
    # without a hermes error line (a rank killed), hermes says in one line what Open MPI's explanation says
    for job in (b"phase 1\n" + exited, b"phase 1\n" + pmix + exited):
        sink = io.BytesIO()
        _relay_stderr(io.BytesIO(job), sink)
        assert sink.getvalue() == b"phase 1\nhermes: error: rank 1 ended the job (mpiexec exit status 1)\n"
    # a message the relay does not recognise is shown as it came
    odd = frame + b"prterun was killed by something new\n" + frame
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + odd), sink)
    assert sink.getvalue() == b"phase 1\n" + odd


def _script(path, text: str, status: int = 0) -> str:
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}'\nexit {status}\n")  # builtins only: PATH is empty
    path.chmod(0o755)
    return str(path)


#: what `--version` prints for the launchers of the two MPI wheels
OPEN_MPI = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/"
HYDRA = "HYDRA build details:\n    Version:                                 5.0.2"


@pytest.fixture
def venv_bin(tmp_path, monkeypatch):
    """A venv's bin holding both MPI wheels' launchers as the last-installed Open MPI leaves them (its
    ``mpiexec`` and ``mpirun``, MPICH's ``mpiexec.hydra``), and an empty PATH."""
    import hermes.runtime.launch as launch

    launch.mpi_library.cache_clear()
    launch.mpi_flavour.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("mpiexec", OPEN_MPI), ("mpirun", OPEN_MPI), ("mpiexec.hydra", HYDRA)):
        _script(bin_ / name, text)
    yield bin_
    launch.mpi_library.cache_clear()
    launch.mpi_flavour.cache_clear()


def _probed(venv_bin, version: str, path: str) -> str:
    """A python whose mpi4py loads the library ``version`` from ``path`` (what hermes.runtime.launch's probe
    prints)."""
    return _script(venv_bin / "python", json.dumps({"version": version, "path": path}))


@pytest.mark.parametrize("library, launcher", [("MPICH Version:      5.0.2\nMPICH Release date: ...", "mpiexec.hydra"),
                                               ("Open MPI v5.0.11, package: Open MPI", "mpiexec")])
def test_the_launcher_is_the_one_of_the_library_mpi4py_loads(venv_bin, library, launcher):
    from hermes.runtime.launch import find_mpiexec, mpiexec_command

    python = _probed(venv_bin, library, str(venv_bin.parent / "lib" / "libmpi.so.12"))
    assert find_mpiexec(python) == str(venv_bin / launcher)
    cmd = mpiexec_command(2, ["run"], python=python)
    assert cmd[0] == str(venv_bin / launcher)
    assert cmd[-9:] == ["-n", "2", python, "-P", "-m", "mpi4py", "-m", "hermes", "run"]  # safe-path mode
    assert ("--allow-run-as-root" in cmd) == (launcher == "mpiexec" and os.geteuid() == 0)  # Open MPI's flags only


def test_without_an_mpi_library_the_error_names_the_install(venv_bin):
    from hermes.errors import HermesError
    from hermes.runtime.launch import mpiexec_command

    python = _script(venv_bin / "python", "RuntimeError: cannot load MPI library", status=1)
    with pytest.raises(HermesError, match=rf"^no MPI library: .* `{python} -m pip install openmpi`"):
        mpiexec_command(4, ["run"], python=python)


def test_without_a_launcher_of_the_library_the_error_names_the_reinstall(venv_bin):
    from hermes.errors import HermesError
    from hermes.runtime.launch import find_mpiexec

    (venv_bin / "mpiexec.hydra").unlink()
    python = _probed(venv_bin, "MPICH Version:      5.0.2", str(venv_bin.parent / "lib" / "libmpi.so.12"))
    with pytest.raises(HermesError, match=r"^no mpiexec of MPICH found .*pip install --force-reinstall mpich`"):
        find_mpiexec(python)


def test_a_system_library_gets_the_launcher_on_path_before_the_wheel_s(venv_bin, tmp_path, monkeypatch):
    """mpi4py built against a system Open MPI in a venv that also holds the Open MPI wheel (a dependency): the
    system's mpiexec, not the wheel's (another Open MPI)."""
    import hermes.runtime.launch as launch
    from hermes.runtime.launch import find_mpiexec

    system = tmp_path / "usr-bin"
    system.mkdir()
    _script(system / "mpiexec", "mpiexec (Open MPI) 4.1.4")
    monkeypatch.setenv("PATH", str(system))
    inside = _probed(venv_bin, "Open MPI v5.0.11", str(venv_bin.parent / "lib" / "libmpi.so.40"))
    assert find_mpiexec(inside) == str(venv_bin / "mpiexec")
    launch.mpi_library.cache_clear()  # the same python, now probed as mpi4py built against the system's
    outside = _probed(venv_bin, "Open MPI v4.1.4", "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40")
    assert find_mpiexec(outside) == str(system / "mpiexec")


# -- issue 38: launch failures, a rank's end, an error on one rank: one line of hermes ----------------------------
#: what Open MPI 5.0.11 printed on this machine (only the pid and path details shortened)
_F = b"-" * 74 + b"\n"
PMIX_START = (  # `ulimit -f 64; hermes run`: PMIx cannot size its shared-memory file
    b"[vm:7772] PMIX ERROR: PMIX_ERROR in file /openmpi-5.0.11/3rd-party/openpmix/src/util/pmix_shmem.c at line 161\n"
    b"[vm:7772] PMIX ERROR: PMIX_ERROR in file /openmpi-5.0.11/3rd-party/openpmix/src/server/pmix_server.c at line "
    b"4660\n"
    b"[vm:7777] PMIX ERROR: PMIX_ERR_OUT_OF_RESOURCE in file /openmpi-5.0.11/3rd-party/openpmix/src/client/"
    b"pmix_client.c at line 278\n"
    + _F + b"PMIx_Init failed for the following reason:\n\n  PMIX_ERROR\n\nOpen MPI requires access to a local PMIx "
    b"server to execute. Please ensure\nthat either you are operating in a PMIx-enabled environment, or use "
    b"\"mpirun\"\nto execute the job.\n" + _F +
    b"*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n*** MPI_ERRORS_ARE_FATAL (processes in "
    b"this communicator will now abort,\n***    and MPI will try to terminate your MPI job as well)\n"
    b"[vm:7777] Local abort before MPI_INIT completed completed successfully, but am not able to aggregate error "
    b"messages, and not able to guarantee that all other processes were killed!\n"
    b"prterun: tpp.c:83: __pthread_tpp_change_priority: Assertion `new_prio == -1' failed.\n"
    + _F + b"prterun detected that one or more processes exited with non-zero status,\nthus causing the job to be "
    b"terminated. The first process to do so was:\n\n   Process name: [prterun-vm-7970@1,1]\n   Exit code:    14\n"
    + _F + b"[vm:7772] PMIX ERROR: PMIX_ERR_UNREACH in file /openmpi-5.0.11/3rd-party/openpmix/src/mca/ptl/base/"
    b"ptl_base_connection_hdlr.c at line 121\n")
SEGV = (b"[vm:14663] *** Process received signal ***\n[vm:14663] Signal: Segmentation fault (11)\n"
        b"[vm:14663] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7fa10445a050]\n"
        b"[vm:14663] *** End of error message ***\n"
        + _F + b"prterun noticed that process rank 1 with PID 14663 on node vm exited on\nsignal 11 (Segmentation "
        b"fault).\n" + _F)
IMPROPER = (_F + b"prterun has exited due to process rank 0 with PID 9656 on node vm exiting\nimproperly. There are "
            b"three reasons this could occur:\n\n1. this process did not call \"init\" before exiting, but others in "
            b"the\njob did.\n" + _F)
STATUS = (_F + b"prterun detected that one or more processes exited with non-zero status,\nthus causing the job to "
          b"be terminated. The first process to do so was:\n\n   Process name: [prterun-vm-14511@1,1]\n   Exit code:    "
          b"7\n" + _F)
UNCAUGHT = (b"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nZeroDivisionError: division by "
            b"zero\n" + _F + b"MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n  Proc: [[19609,1],1]\n"
            b"  Errorcode: 1\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n" + _F)


@pytest.mark.parametrize("noise, line, kept", [
    (PMIX_START, "the MPI job could not start: PMIx_Init failed (PMIX_ERROR)", b""),
    (SEGV, "rank 1 was killed by signal 11 (Segmentation fault)", b""),
    (IMPROPER, "rank 0 ended before the job finished, without MPI_Finalize", b""),
    (STATUS, "rank 1 exited with status 7", b""),
    (UNCAUGHT, "rank 1 aborted the job (MPI_Abort, error code 1) after an unexpected error",
     UNCAUGHT[:UNCAUGHT.index(_F)]),
], ids=["pmix-start", "signal", "no-finalize", "status", "uncaught"])
def test_the_mpi_runtime_s_account_of_a_failure_becomes_one_hermes_line(noise, line, kept):
    """Without a hermes line, Open MPI's and PMIx's messages (MPI_Init failing, a rank killed, ended without
    MPI_Finalize, exiting non-zero, aborting after a traceback) are held back and said in one line of hermes;
    what the job printed itself (a traceback) stays; --verbose shows the runtime's messages before the line.
    (The old relay showed them all and no hermes line.)"""
    from hermes.runtime.launch import StderrRelay

    sink = io.BytesIO()
    relay = _relay_stderr(io.BytesIO(b"phase 1\n" + noise), sink, status=14)
    out = sink.getvalue()
    assert out.startswith(b"phase 1\n" + kept)
    lines = out.decode().splitlines()
    errors = [ln for ln in lines if ln.startswith("hermes: error:")]
    assert len(errors) == 1 and line in errors[0] and lines[-1] == errors[0], out.decode()
    rest = "\n".join(lines[:-1])
    assert "PMIX" not in rest and "prterun" not in rest and "---" not in rest and "***" not in rest
    assert relay.fatal_at is not None  # run_job bounds the wait from here
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + noise), sink, StderrRelay(verbose=True), status=14)
    assert _F in sink.getvalue() and sink.getvalue().decode().splitlines()[-1] == errors[0]


#: the C library's words before it aborts a process (glibc's malloc_printerr, __fortify_fail)
LIBC_LINES = (b"corrupted double-linked list\n", b"free(): invalid pointer\n", b"double free or corruption (out)\n",
              b"malloc(): unaligned tcache chunk detected\n", b"corrupted size vs. prev_size\n",
              b"Fatal glibc error: malloc assertion failure in sysmalloc\n")


@pytest.mark.parametrize("libc", LIBC_LINES, ids=lambda b: b.decode().split("(")[0].split(":")[0].strip())
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_the_c_library_s_last_words_are_held_with_the_runtime_s(libc, where):
    """prterun crashing in malloc under ``ulimit -f 64`` printed ``corrupted double-linked list`` beside PMIx's
    start failure (once in a few runs of make ci): the user read it above hermes' line. Wherever it comes, it is held
    back with the runtime's messages; --verbose shows it; a rank killed by SIGABRT is told with it."""
    from hermes.runtime.launch import StderrRelay

    at = {"first": 0, "middle": PMIX_START.index(_F), "last": len(PMIX_START)}[where]
    noise = PMIX_START[:at] + libc + PMIX_START[at:]
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + noise), sink, status=14)
    lines = sink.getvalue().decode().splitlines()
    assert lines == ["phase 1", lines[-1]] and lines[-1].startswith(
        "hermes: error: the MPI job could not start: PMIx_Init failed"), lines
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(noise), sink, StderrRelay(verbose=True), status=14)
    assert libc in sink.getvalue()
    abrt = SEGV.replace(b"11 (Segmentation fault)", b"6 (Aborted)")
    assert abrt != SEGV
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(libc + abrt), sink, status=14)
    said = libc.strip().decode()
    assert sink.getvalue().decode().splitlines() == [
        f"hermes: error: rank 1 was killed by signal 6 (Aborted) (the C library said: {said})"]


def test_a_line_of_the_job_like_the_c_library_s_is_not_held():
    """Only the C library's own forms are held: the job's lines that merely mention them pass."""
    sink = io.BytesIO()
    text = b"phase 1: corrupted cells 0\nfree(x) called\nthe double free or corruption test\n"
    _relay_stderr(io.BytesIO(text), sink, status=0)
    assert sink.getvalue() == text


#: what MPICH 5.0.2 (the `mpich` wheel, Hydra) printed on this machine on standard error: `ulimit -f 64` (UCX
#: cannot write its shared memory, MPI_Init fails), an MPI_Abort after an uncaught exception (python -m mpi4py)
MPICH_START = (b"Abort(740443535): Fatal error in internal_Init_thread: Other MPI error, error stack:\n"
               b"internal_Init_thread(71).: MPI_Init_thread(argc=(nil), argv=(nil), required=3, provided=0x7ffda523d810)"
               b" failed\nMPII_Init_thread(289)....: \nMPID_Init(549)...........: \nMPIDI_UCX_init_local(245): \n"
               b"MPIDI_UCX_init_worker(86):  ucx function returned with failed status(ucx_init.c 86 MPIDI_UCX_init_worker"
               b" No resources are available to initiate the operation)\n")
MPICH_UNCAUGHT = (b"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n"
                  b"Abort(1) on node 1 (rank 1 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - process 1\n")
MPICH_FATAL = (b"Abort(604686598) on node 2 (rank 2 in comm 0): Fatal error in internal_Send_c: Invalid rank, error "
               b"stack:\ninternal_Send_c(316): MPI_Send_c(buf=0x7fe1dcb51f70, count=1, MPI_UNSIGNED_CHAR, 7, 0, "
               b"MPI_COMM_WORLD) failed\ninternal_Send_c(234): Invalid rank has value 7 but must be nonnegative and "
               b"less than 3\n")  # comm.Send(b"x", dest=7) on rank 2 of 3 under MPI.ERRORS_ARE_FATAL


@pytest.mark.parametrize("noise, line, kept, status", [
    (MPICH_START, "the MPI job could not start: MPI_Init failed: ucx function returned with failed status(No "
     "resources are available to initiate the operation)", b"", 2),
    (MPICH_UNCAUGHT, "rank 1 aborted the job (MPI_Abort, error code 1) after an unexpected error (its traceback is "
     "above)",
     MPICH_UNCAUGHT[:MPICH_UNCAUGHT.index(b"Abort(")], 1),
    (MPICH_FATAL, "rank 2: a call of MPI failed in internal_Send_c: Invalid rank has value 7 but must be "
     "nonnegative and less than 3", b"", 6),
], ids=["init", "uncaught", "fatal"])
def test_mpich_s_account_of_a_failure_becomes_one_hermes_line(noise, line, kept, status):
    """MPICH's ``Abort(...)`` lines and error stacks are held back and said in one line of hermes; before, they
    passed as they were and no hermes line came (MPICH's `ulimit -f 64` start: six lines, exit 143)."""
    sink = io.BytesIO()
    relay = _relay_stderr(io.BytesIO(b"phase 1\n" + noise), sink, status=status)
    out = sink.getvalue()
    assert out.startswith(b"phase 1\n" + kept), out.decode()
    lines = out.decode().splitlines()
    assert lines[-1] == f"hermes: error: {line}" and sum(ln.startswith("hermes: error:") for ln in lines) == 1, lines
    assert "Abort(" not in "\n".join(lines[:-1]) and relay.fatal_at is not None
    assert bool(relay.start_failed) == (noise is MPICH_START)


def test_mpich_s_abort_line_after_hermes_line_is_dropped():
    """A rank's hermes line, then MPICH's account of the MPI_Abort that ended the job: the user reads one line.
    (Measured under MPICH before: the Abort line followed hermes' line.)"""
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"hermes: error: rank 2: more than 30 iterations\nAbort(2) on node 2 (rank 2 in comm 0)"
                             b": application called MPI_Abort(MPI_COMM_WORLD, 2) - process 2\n"), sink, status=2)
    assert sink.getvalue() == b"hermes: error: rank 2: more than 30 iterations\n"


def test_a_rank_that_left_without_a_word_under_status_0_is_one_line():
    """MPICH ends a job whose rank left with os._exit(0) with status 0 and no word (measured: 3 ranks, rank 1
    leaving, mpiexec exit 0 in 0.9 s): the ranks that did not say they finished are named; the "done" lines
    themselves never show."""
    from hermes.runtime.launch import StderrRelay

    for done, line in [((0, 2), "rank 1 ended before the job finished"),
                       ((2,), "ranks 0, 1 ended before the job finished"), ((0, 1, 2), None)]:
        relay = StderrRelay()
        shown = [ln for r in done for ln in relay.feed(f"hermes-job: rank {r} done\n".encode())]
        assert shown == [] and relay.missing(3) == [r for r in range(3) if r not in done]
        end = relay.finish(0, ranks=3)
        assert (line is None and end == []) or (len(end) == 1 and line in end[0].decode()), end
        assert relay.finish(0) == [] and relay.finish(2, ranks=3) == []  # not asked, or a status said it already


def test_a_file_size_limit_is_named_when_mpi_cannot_start(monkeypatch):
    import hermes.runtime.launch as launch

    monkeypatch.setattr(launch, "file_size_limit", lambda: 64 * 1024)
    for noise in (PMIX_START, MPICH_START):
        relay = launch.StderrRelay()
        for ln in io.BytesIO(noise):
            relay.feed(ln)
        (line,) = relay.finish(14)
        assert line.decode().endswith("the file-size limit (ulimit -f) is 64 kB: raise it\n")


def test_only_the_first_hermes_error_line_passes():
    """Two ranks failing each with its own line: the user reads one."""
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"hermes: error: rank 2: more than 30 iterations\n"
                             b"hermes: error: rank 1: more than 30 iterations\n"), sink)
    assert sink.getvalue() == b"hermes: error: rank 2: more than 30 iterations\n"


#: a "job" whose rank died (Open MPI's report on stderr) while mpiexec stays, deaf to SIGTERM
LINGERING = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
bar = "-" * 74
sys.stderr.write(bar + "\\nprterun noticed that process rank 1 with PID 7 on node vm exited on\\nsignal 9 (Killed).\\n"
                 + bar + "\\n")
sys.stderr.flush()
time.sleep(600)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_job_that_lingers_after_a_rank_died_is_ended_within_the_bound(monkeypatch):
    """The launcher waits at most END_BOUND after the first sign that a rank is gone, then SIGTERM, then SIGKILL
    ``grace`` later (the old launcher waited for ever: here the test's own timer would stop it after 60 s)."""
    import hermes.runtime.launch as launch

    monkeypatch.setattr(launch, "END_BOUND", 1.0, raising=False)
    timer = threading.Timer(60, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    t0 = time.monotonic()
    try:
        end = run_job([sys.executable, "-c", LINGERING], grace=1.0)
    finally:
        timer.cancel()
    assert end.signal is None and end.status != 0
    assert time.monotonic() - t0 < 30


def test_a_launcher_that_cannot_start_says_why(venv_bin):
    """Open MPI's launcher without HOME fails ``--version`` ("Unable to get the user home directory"): that is what
    the error says, not that no launcher was found."""
    from hermes.errors import HermesError
    from hermes.runtime.launch import find_mpiexec

    for name in ("mpiexec", "mpirun"):
        (venv_bin / name).write_text("#!/bin/sh\nprintf '%s\\n' '[vm:07565] Error: Unable to get the user home "
                                     "directory' >&2\nexit 1\n")
    python = _probed(venv_bin, "Open MPI v5.0.11, package: Open MPI", str(venv_bin.parent / "lib" / "libmpi.so.40"))
    with pytest.raises(HermesError, match=r"^the launcher of Open MPI cannot start \(.*/mpiexec --version failed: "
                                          r"Error: Unable to get the user home directory"):
        find_mpiexec(python)


def _hermes_cli(*args, env=None, cwd=None, timeout=300, preexec=None) -> subprocess.CompletedProcess:
    from hermes.runtime.launch import _LAUNCHER_ENV

    base = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    base.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([str(Path(sys.executable).with_name("hermes")), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**base, **(env or {})}, cwd=cwd, preexec_fn=preexec)


def _one_error_line(res: subprocess.CompletedProcess) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermes: error: "), res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return lines[0]


@pytest.mark.mpi
@pytest.mark.slow
def test_mpi_that_cannot_start_under_a_file_size_limit_is_one_line_within_seconds(tmp_path):
    """``ulimit -f 64``: PMIx cannot create its shared memory and MPI_Init fails. Measured before: ~20 PMIx lines
    and no hermes line (exit 14), once a hang of 130 s."""

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    t0 = time.monotonic()
    res = _hermes_cli("run", "--set", "output.lbdatafile=true", "--set", "mesh.grid=8x8", "--set",
                      "adaptation.phases=1", "--out", tmp_path / "run", "--quiet", preexec=limit, timeout=200)
    line = _one_error_line(res)
    assert res.returncode == 2 and "the MPI job could not start" in line and "ulimit -f" in line, res.stderr
    assert time.monotonic() - t0 < 60


#: a Brusselator run whose processors hit an iteration limit, one at a time (rank-local errors, never agreed)
BAHI_LIMIT = ["run", Path(__file__).resolve().parents[1] / "scenarios" / "bahi-homogeneous.yaml", "--set",
              "processors=3", "--set", "problem.points=60", "--set", "solver.max_iterations=30"]


@pytest.mark.mpi
@pytest.mark.slow
def test_an_error_on_one_rank_is_one_hermes_line_under_mpiexec(tmp_path):
    """A rank-local error (rank N: more than 30 iterations) under the default launch: one line naming the rank,
    exit 2, no Open MPI banner. Before: MPI_ABORT's banner from rank N and no hermes line at all."""
    import re

    ref = _hermes_cli(*BAHI_LIMIT, "--no-launch")
    assert ref.returncode == 2 and re.fullmatch(r"hermes: error: rank \d+: more than 30 iterations",
                                                _one_error_line(ref))
    res = _hermes_cli(*BAHI_LIMIT)
    line = _one_error_line(res)
    assert res.returncode == 2 and re.fullmatch(r"hermes: error: rank \d+: more than 30 iterations", line)
    assert "MPI_ABORT" not in res.stdout


@pytest.mark.mpi
@pytest.mark.slow
def test_a_run_without_home_runs(tmp_path):
    """HOME unset: Open MPI needs it; the launcher and its job get the account's home. Before: refused with "no
    mpiexec of Open MPI found"."""
    from hermes.interpreter import account_home

    if account_home() is None:
        pytest.skip("this user has no home directory in the password database")
    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    res = subprocess.run([str(Path(sys.executable).with_name("hermes")), "run", "--set", "mesh.grid=8x8", "--set",
                          "adaptation.phases=1", "--no-pictures", "--quiet", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=300, env={**env, "MPLBACKEND": "Agg"})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "run" / "summary.json").is_file()


@pytest.mark.parametrize("module, args", [("hermes.cli.run_brusselator", BAHI_LIMIT[1:]),
                                          ("hermes", [*BAHI_LIMIT, "--no-launch"])])
@pytest.mark.mpi
@pytest.mark.slow
def test_an_error_on_one_rank_names_it_in_a_job_started_by_hand(mpirun, module, args):
    """``mpiexec -n 3 python -m mpi4py -m hermes[.cli.run_bahi] ...`` without hermes' launcher: the rank that met
    the error says so in one hermes line before Open MPI's banner. Before: only the banner (the line was rank 0's
    to print, and rank 0 had no error)."""
    import re

    res = mpirun(3, [str(a) for a in args], module=module, timeout=240)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("hermes: error:")]
    assert res.returncode != 0 and len(errors) == 1, res.stderr
    assert re.fullmatch(r"hermes: error: rank \d+: more than 30 iterations", errors[0])


def test_no_launcher_is_taken_from_the_current_directory(venv_bin, tmp_path, monkeypatch):
    """PATH with '.' or an empty entry: a planted ``./mpiexec`` is neither chosen nor run for its --version (the
    system-MPI case, where PATH comes first)."""
    from hermes.errors import HermesError
    from hermes.runtime.launch import find_mpiexec

    here = tmp_path / "downloaded"
    here.mkdir()
    for name in ("mpiexec", "mpirun", "mpiexec.hydra"):
        (here / name).write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\nprintf '%s\\n' 'mpiexec (Open MPI) 4.1.4'\n")
        (here / name).chmod(0o755)
    monkeypatch.chdir(here)
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", str(tmp_path / "nothing")]))
    system = _probed(venv_bin, "Open MPI v4.1.4", "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40")
    assert find_mpiexec(system) == str(venv_bin / "mpiexec")  # the venv's, not ./mpiexec
    for name in ("mpiexec", "mpirun"):
        (venv_bin / name).unlink()
    with pytest.raises(HermesError, match="no mpiexec of Open MPI found"):
        find_mpiexec(system)
    assert not (tmp_path / "ran").exists()
