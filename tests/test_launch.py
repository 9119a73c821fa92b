"""The launcher's job control without MPI: signals forwarded, nothing of the job left running, one error
line relayed (the same under mpiexec: tests/mpi/test_lifecycle.py)."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time

import pytest

from hermes.launch import _relay_stderr, run_job

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


def test_stderr_keeps_one_error_line_and_drops_the_job_end_banners():
    frame = b"-" * 74 + b"\n"
    warning = frame + b"WARNING: a warning of Open MPI stays\n" + frame
    abort = frame + b"MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n  Errorcode: 124\n\n" + frame
    exited = frame + b"prterun has exited due to process rank 1\n" + frame
    error = b"hermes: error: no progress for 5 s since phase 1 ended\n"
    # the banners may come before the line or after it; the line may come from several ranks
    for job in (b"phase 1\n" + warning + error + abort + error + exited + b"\0\n",
                b"phase 1\n" + warning + abort + exited + error + error):
        sink = io.BytesIO()
        _relay_stderr(io.BytesIO(job), sink)
        assert sink.getvalue().decode().splitlines() == [
            "phase 1", "-" * 74, "WARNING: a warning of Open MPI stays", "-" * 74, error.decode().strip()]
    # without a hermes error line (a rank killed), Open MPI's explanation is shown
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + exited), sink)
    assert sink.getvalue() == b"phase 1\n" + exited
