"""The launcher's job control without MPI: signals forwarded, nothing of the job left running, one error
line relayed (the same under mpiexec: tests/mpi/test_lifecycle.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time

import pytest

from hermes.lifecycle.launch import _relay_stderr, run_job

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
    # without a hermes error line (a rank killed), Open MPI's explanation is shown
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + exited), sink)
    assert sink.getvalue() == b"phase 1\n" + exited
    sink = io.BytesIO()
    _relay_stderr(io.BytesIO(b"phase 1\n" + pmix + exited), sink)
    assert sink.getvalue() == b"phase 1\n" + pmix + exited


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
    import hermes.lifecycle.launch as launch

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
    """A python whose mpi4py loads the library ``version`` from ``path`` (what hermes.lifecycle.launch's probe
    prints)."""
    return _script(venv_bin / "python", json.dumps({"version": version, "path": path}))


@pytest.mark.parametrize("library, launcher", [("MPICH Version:      5.0.2\nMPICH Release date: ...", "mpiexec.hydra"),
                                               ("Open MPI v5.0.11, package: Open MPI", "mpiexec")])
def test_the_launcher_is_the_one_of_the_library_mpi4py_loads(venv_bin, library, launcher):
    from hermes.lifecycle.launch import find_mpiexec, mpiexec_command

    python = _probed(venv_bin, library, str(venv_bin.parent / "lib" / "libmpi.so.12"))
    assert find_mpiexec(python) == str(venv_bin / launcher)
    cmd = mpiexec_command(2, ["run"], python=python)
    assert cmd[0] == str(venv_bin / launcher) and cmd[-8:] == ["-n", "2", python, "-m", "mpi4py", "-m", "hermes", "run"]
    assert ("--allow-run-as-root" in cmd) == (launcher == "mpiexec" and os.geteuid() == 0)  # Open MPI's flags only


def test_without_an_mpi_library_the_error_names_the_install(venv_bin):
    from hermes.errors import HermesError
    from hermes.lifecycle.launch import mpiexec_command

    python = _script(venv_bin / "python", "RuntimeError: cannot load MPI library", status=1)
    with pytest.raises(HermesError, match=rf"^no MPI library: .* `{python} -m pip install openmpi`"):
        mpiexec_command(4, ["run"], python=python)


def test_without_a_launcher_of_the_library_the_error_names_the_reinstall(venv_bin):
    from hermes.errors import HermesError
    from hermes.lifecycle.launch import find_mpiexec

    (venv_bin / "mpiexec.hydra").unlink()
    python = _probed(venv_bin, "MPICH Version:      5.0.2", str(venv_bin.parent / "lib" / "libmpi.so.12"))
    with pytest.raises(HermesError, match=r"^no mpiexec of MPICH found .*pip install --force-reinstall mpich`"):
        find_mpiexec(python)


def test_a_system_library_gets_the_launcher_on_path_before_the_wheel_s(venv_bin, tmp_path, monkeypatch):
    """mpi4py built against a system Open MPI in a venv that also holds the Open MPI wheel (a dependency): the
    system's mpiexec, not the wheel's (another Open MPI)."""
    import hermes.lifecycle.launch as launch
    from hermes.lifecycle.launch import find_mpiexec

    system = tmp_path / "usr-bin"
    system.mkdir()
    _script(system / "mpiexec", "mpiexec (Open MPI) 4.1.4")
    monkeypatch.setenv("PATH", str(system))
    inside = _probed(venv_bin, "Open MPI v5.0.11", str(venv_bin.parent / "lib" / "libmpi.so.40"))
    assert find_mpiexec(inside) == str(venv_bin / "mpiexec")
    launch.mpi_library.cache_clear()  # the same python, now probed as mpi4py built against the system's
    outside = _probed(venv_bin, "Open MPI v4.1.4", "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40")
    assert find_mpiexec(outside) == str(system / "mpiexec")
