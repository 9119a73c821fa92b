"""The watchdog's decision, with a stand-in communicator (the real abort under mpiexec is in
tests/mpi/test_lifecycle.py)."""

from __future__ import annotations

import pytest

import threading
import time

from hermes.runtime.watchdog import EXIT_TIMEOUT, Watchdog


class FakeComm:
    """MPI_Abort as MPICH 5.0.2 does it: it returns (Hydra ends the job later)."""

    def __init__(self, rank: int = 0):
        self.rank, self.aborted = rank, threading.Event()
        self.code = None

    def Get_rank(self):
        return self.rank

    def Abort(self, code):
        self.code = code
        self.aborted.set()


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    """The codes the watchdog ended its process with (``os._exit``, recorded instead)."""
    import hermes.runtime.watchdog as watchdog

    codes: list[int] = []
    monkeypatch.setattr(watchdog.os, "_exit", codes.append)
    return codes


@pytest.mark.slow
def test_no_progress_for_the_timeout_aborts_with_one_line(capsys, exits):
    comm = FakeComm()
    with Watchdog(comm, 0.5) as dog:
        dog.beat(3)
        t0 = time.monotonic()
        assert comm.aborted.wait(5)
        waited = time.monotonic() - t0
    assert comm.code == EXIT_TIMEOUT and 0.5 <= waited < 2.0
    assert exits == [EXIT_TIMEOUT]  # an MPI_Abort that returns (MPICH) still ends this process
    err = capsys.readouterr().err
    assert err == "hermes: error: no progress for 0.5 s since phase 3 ended (run.timeout, --timeout): a rank is " \
                  "stopped or hung; ending the job\n"


@pytest.mark.slow
def test_beats_keep_it_quiet_and_none_disables_it():
    comm = FakeComm()
    with Watchdog(comm, 0.5) as dog:
        for k in range(12):
            time.sleep(0.1)
            dog.beat(k)
    assert not comm.aborted.is_set()
    with Watchdog(comm, None) as dog:
        assert dog._thread is None
        time.sleep(0.2)
    assert not comm.aborted.is_set()


@pytest.mark.slow
def test_later_ranks_wait_longer_so_one_reports():
    first, later = FakeComm(0), FakeComm(2)
    with Watchdog(first, 0.5), Watchdog(later, 0.5):
        assert first.aborted.wait(5)
        t = time.monotonic()
        assert later.aborted.wait(10)
        assert time.monotonic() - t >= 2 * 2.0 - 0.5  # two grace periods of 2 s, less the check interval
