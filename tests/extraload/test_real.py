"""Wall-clock external tasks (hermes.extraload.real): they run, and nothing outlives the run.

These tests start real processes that burn a little CPU and send a little data over loopback; each
takes ~1-3 s. "Gone" means the process no longer exists or is a zombie waiting for init to reap it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes.extraload.real import RealLoad, RealLoadError
from hermes.extraload.tasks import parse_tasks

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("real_parent.py")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_gone(pids, timeout=10.0) -> list[int]:
    end = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def read_log(d: Path, name: str) -> list[str]:
    p = d / f"{name}.log"
    return p.read_text().splitlines() if p.exists() else []


def wait_log(d: Path, name: str, prefix: str, timeout=15.0) -> bool:
    """Wait until the task's log has a line starting with ``prefix`` (interpreter start-up is slow here)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(line.startswith(prefix) for line in read_log(d, name)):
            return True
        time.sleep(0.05)
    return False


def test_tasks_run_send_data_and_stop_with_the_block(tmp_path):
    tasks = parse_tasks([
        {"name": "w", "processor": 0, "repeat": 3, "script": [{"work": 1000, "wait": 0.01}]},
        {"name": "d", "processor": 1, "script": [{"data": [[0, 200000], [0, 1000]]}]},
        {"name": "later", "processor": 0, "start": {"phase": 2}, "stop": {"phase": 2}, "repeat": "forever",
         "script": [{"work": 1000, "wait": 0.05}]},
    ])
    with RealLoad(tasks, [0, 1], log_dir=tmp_path) as load:
        pids = load.pids()
        assert len(pids) == 3  # w, d and the sink of processor 0 ('later' waits for phase 2)
        load.begin_phase(1)
        assert "later" not in load.running()
        load.begin_phase(2)
        assert "later" in load.running()
        later = [p for p in load.pids() if p not in pids]
        assert wait_log(tmp_path, "later", "work")
        load.begin_phase(3)  # 'later' stops after phase 2
        assert wait_gone(later, 5) == []
        assert wait_log(tmp_path, "w", "end") and wait_log(tmp_path, "sink-0", "received")
        pids = load.pids() + later
    assert wait_gone(pids, 5) == []
    assert read_log(tmp_path, "w").count("work 1000.0") == 3 and read_log(tmp_path, "w")[-1] == "end w"
    assert sorted(read_log(tmp_path, "d")[1:3]) == ["data 0 1000", "data 0 200000"]
    assert sorted(read_log(tmp_path, "sink-0")) == ["received 1000", "received 200000"]


def test_an_exception_in_the_block_stops_everything(tmp_path):
    tasks = parse_tasks([{"processor": 0, "repeat": "forever", "script": [{"work": 1000, "wait": 0.05}]}])
    with pytest.raises(RuntimeError):
        with RealLoad(tasks, [0]) as load:
            pids = load.pids()
            raise RuntimeError("boom")
    assert wait_gone(pids, 5) == []


@pytest.mark.slow
def test_time_driven_tasks_stop_on_their_own(tmp_path):
    # start-up of an interpreter takes up to ~1 s on a loaded machine: the task's window is [1.5 s, 3 s]
    tasks = parse_tasks([{"name": "brief", "processor": 0, "start": {"time": 1.5}, "stop": {"time": 3.0},
                          "repeat": "forever", "script": [{"work": 500, "wait": 0.02}]}])
    t0 = time.monotonic()
    with RealLoad(tasks, [0], log_dir=tmp_path) as load:
        pids = load.pids()
        assert wait_gone(pids, 15) == []  # exits by itself at 3 s
        assert time.monotonic() - t0 >= 3.0
    lines = read_log(tmp_path, "brief")
    assert lines[0] == "start brief" and lines[-1] == "end brief" and "work 500.0" in lines


def test_missing_sink_is_a_clear_error():
    tasks = parse_tasks([{"processor": 0, "script": [{"data": [[1, 10]]}]}])
    with pytest.raises(RealLoadError, match=r"no sink address for processor\(s\) \[1\]"):
        RealLoad(tasks, [0])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "exit", "raise"])
def test_nothing_outlives_the_parent(tmp_path, how):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    mode = how if how in ("exit", "raise") else "sleep"
    parent = subprocess.Popen([sys.executable, str(HELPER), str(tmp_path), mode], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        pids = json.loads(parent.stdout.readline())
        assert len(pids) == 3 and all(alive(p) for p in pids)  # burn, stream, the sink of processor 1
        if mode == "sleep":
            assert wait_log(tmp_path, "burn", "work") and wait_log(tmp_path, "stream", "data")  # they do run
        if how == "SIGKILL":
            parent.kill()  # no handler, no atexit: the children must notice on their own
        elif how == "SIGTERM":
            parent.send_signal(signal.SIGTERM)
        rc = parent.wait(timeout=20)
        assert rc == {"SIGKILL": -9, "SIGTERM": -15, "exit": 0, "raise": 1}[how]
        assert wait_gone(pids, 10) == []
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.slow
@pytest.mark.mpi
def test_open_under_mpiexec_exchanges_sinks(tmp_path):
    from tests.conftest import run_mpi

    res = run_mpi(2, [str(tmp_path)], script=Path(__file__).with_name("real_mpi_script.py"), timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[-1] == "OK"
    pids = [p for ln in lines if ln.startswith("{") for p in json.loads(ln)["pids"]]
    assert len(pids) == 2  # rank 0's task, rank 1's sink
    assert wait_gone(pids, 5) == []
