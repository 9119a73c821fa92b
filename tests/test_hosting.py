"""Many emulated processors per MPI process (hermes.runtime.hosting): the communicator's semantics, serially and over
real MPI processes, and the identity of a run's results whatever the number of processes hosting it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hermes.errors import HermesError, ScenarioError
from hermes.runtime.hosting import HostedError, Status, blocks, host_run
from hermes.runtime.start import processes_for
from hermes.sections import RunSpec
from tests.conftest import run_mpi

ROOT = Path(__file__).resolve().parents[1]


def _collectives(comm):
    r, p = comm.Get_rank(), comm.Get_size()
    assert comm.allgather(r) == list(range(p))
    assert comm.allreduce(r) == p * (p - 1) // 2
    assert comm.scan(1) == r + 1 and comm.exscan(1) == (r or None)
    got = comm.bcast({"a": [1, 2]} if r == 0 else None)
    got["a"].append(r)  # a received object is this processor's own copy
    assert comm.allgather(len(got["a"])) == [3] * p
    g = comm.gather(2 * r, root=p - 1)
    assert g == ([2 * i for i in range(p)] if r == p - 1 else None)
    assert comm.scatter([10 * i for i in range(p)] if r == 1 % p else None, root=1 % p) == 10 * r
    assert comm.alltoall([100 * r + d for d in range(p)]) == [100 * s + r for s in range(p)]
    send = np.array([[100 * r + d, 1.0] for d in range(p)])
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    assert recv[:, 0].tolist() == [100 * s + r for s in range(p)]
    rows = np.empty((p, 2))
    comm.Allgather(np.array([r, 1.0]), rows)
    assert rows[:, 0].tolist() == list(range(p))
    b = np.arange(4.0) if r == 2 % p else np.zeros(4)
    comm.Bcast(b, root=2 % p)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0]
    return r


def _point_to_point(comm):
    r, p = comm.Get_rank(), comm.Get_size()
    right, left = (r + 1) % p, (r - 1) % p
    for k in range(3):  # messages of one source and tag arrive in send order
        comm.isend((r, k), dest=right, tag=5)
    assert [comm.recv(source=left, tag=5) for _ in range(3)] == [(left, k) for k in range(3)]
    buf = np.empty(3)
    q = comm.Irecv(buf, source=right, tag=7)  # posted before the message is sent
    comm.Isend(np.arange(3.0) + r, dest=left, tag=7).Wait()
    q.Wait()
    assert buf.tolist() == [right, right + 1.0, right + 2.0]
    comm.isend(r, dest=right, tag=9)
    from mpi4py import MPI

    st = MPI.Status()
    comm.Probe(source=MPI.ANY_SOURCE, tag=9, status=st)
    assert st.Get_source() == left and comm.recv(source=MPI.ANY_SOURCE, tag=9) == left
    return r


@pytest.mark.parametrize("p", [1, 2, 7, 64])
def test_serial_semantics(p):
    assert host_run(p, _collectives) == {r: r for r in range(p)}
    assert host_run(p, _point_to_point) == {r: r for r in range(p)}


def test_blocks_are_even_and_contiguous():
    assert blocks(10, 3).tolist() == [0, 4, 7, 10]
    assert blocks(4, 4).tolist() == [0, 1, 2, 3, 4]


def test_a_processor_that_waits_for_nothing_is_reported_not_hung():
    def never(comm):
        if comm.Get_rank() == 1:
            comm.recv(source=0, tag=1)  # rank 0 never sends
        return 0

    with pytest.raises(HostedError, match="wait for each other"):
        host_run(3, never)


def test_an_error_of_one_processor_alone_ends_the_others():
    def alone(comm):
        if comm.Get_rank() == 1:
            raise ScenarioError("only processor 1 saw this")
        comm.barrier()  # the others wait for processor 1, which has ended

    with pytest.raises(ScenarioError, match="only processor 1"):
        host_run(3, alone)


def test_an_error_of_one_processor_alone_ends_a_job_of_several_processes():
    """Hosted on 2 processes, processor 0 raises alone while the others wait in a barrier: its process ends with
    the error (as a process of its own would), mpiexec ends the job — before, every process waited for ever."""
    script = ROOT / "tests" / "mpi" / "hosting_alone.py"
    res = run_mpi(2, [], script=script, timeout=60)
    assert res.returncode != 0
    assert "only processor 0 saw this" in res.stderr
    assert "all ended" not in res.stdout


def test_mismatched_collectives_are_a_defect():
    def odd(comm):
        return comm.allgather(0) if comm.Get_rank() else comm.bcast(0)

    with pytest.raises(HostedError, match="calls"):
        host_run(2, odd)


def test_errors_end_every_processor():
    def bad_input(comm):
        from hermes.runtime.comm import agree

        def check():
            if comm.Get_rank() == 2:
                raise ScenarioError("mesh.file: no such file")

        agree(comm, check)

    with pytest.raises(ScenarioError, match="no such file"):  # every processor raised it; reported once
        host_run(4, bad_input)

    def defect(comm):
        if comm.Get_rank() == 1:
            raise ZeroDivisionError("a defect")
        comm.barrier()

    with pytest.raises(ZeroDivisionError):  # at once: the caller aborts the job
        host_run(3, defect)


def test_mpi_bridges_processes():
    script = ROOT / "tests" / "mpi" / "hosting_bridge.py"
    res = run_mpi(3, [], script=script, timeout=120)
    assert res.returncode == 0, res.stderr
    # each rank prints its line with a flush, but MPICH's Hydra may forward two ranks' lines joined ("ok0ok1"):
    # the words, not the lines, are what the ranks said
    assert sorted(re.findall(r"ok\d+", res.stdout)) == ["ok0", "ok1", "ok2"], res.stdout


def test_processes_for():
    run = RunSpec()  # the run section of a scenario that does not set run.processes
    assert processes_for(run, "virtual", 16, cores=2) == 2
    assert processes_for(run, "virtual", 1, cores=8) == 1
    assert processes_for(run, "virtual", 16, 5) == 5
    assert processes_for(RunSpec(processes=3), "virtual", 16) == 3
    with pytest.raises(HermesError, match="at most one process per processor"):
        processes_for(run, "virtual", 4, 8)
    with pytest.raises(HermesError, match="clock: wall"):
        processes_for(run, "wall", 8, 2)
    assert processes_for(run, "wall", 8, cores=2) == 8
    # a refined run that draws its pictures while the phases run leaves its drawing worker a core
    assert processes_for(run, "virtual", 16, cores=2, drawing=True) == 1
    assert processes_for(run, "virtual", 16, cores=1, drawing=True) == 1
    assert processes_for(run, "virtual", 3, cores=8, drawing=True) == 3
    assert processes_for(run, "virtual", 16, 2, cores=2, drawing=True) == 2  # asked for: as asked
    assert processes_for(run, "wall", 8, cores=2, drawing=True) == 8


def _hermes(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def _results(d: Path) -> tuple:
    summary = json.loads((d / "summary.json").read_text())
    for k in ("wall_seconds", "adapt_wall_seconds", "versions"):
        summary.pop(k, None)
    parts = np.load(d / "partitions.npz")
    return (json.dumps(summary, sort_keys=True), (d / "phases.csv").read_text(),
            {k: parts[k].tobytes() for k in sorted(parts.files)})


@pytest.mark.mpi
@pytest.mark.parametrize("balancer, shared", [("pcg", 2), ("chebyshev", 3), ("grapevine", 2), ("mincost", 3),
                                              ("metis", 2), ("mincost+compact", 3)])
def test_results_identical_whatever_the_processes(tmp_path, balancer, shared):
    """P = 5 processors as 5 processes (one each), as ``shared`` processes hosting several each, unevenly (3 + 2 or
    2 + 2 + 1; every balancer on one of the two) and as 1 (in this process), the solver's iterations in bulk
    (run.bulk: auto, the default: one loop per process) — and, the reference, each processor's own loop on 5
    processes (run.bulk: off): summary.json, phases.csv and partitions.npz bit for bit the same."""
    base = ["run", "--no-pictures", "--quiet", "--set", "processors=5", "--set", "platform.capacities=homo",
            "--set", f"balancer.algorithm={balancer.partition('+')[0]}", "--set", "adaptation.phases=2"]
    if balancer.endswith("+compact"):  # exact ghosts: the realisation's announcements (in bulk) at every level
        base += ["--set", "balancer.ghosts=exact", "--set", "balancer.conductance=boundary"]
    got = {}
    for n in ("off", 5, shared, 1):
        out = tmp_path / f"n{n}"
        extra = ["--no-launch"] if n == 1 else ["--processes", str(5 if n == "off" else n)]
        extra += ["--set", "run.bulk=off"] if n == "off" else []
        res = _hermes([*base, *extra, "--out", str(out)])
        assert res.returncode == 0, res.stderr
        got[n] = _results(out)
    for n in (5, shared, 1):
        assert got[n] == got["off"], f"{balancer}: {n} processes in bulk differ from each processor's own loop"


@pytest.mark.mpi
def test_bad_processes_is_one_line(tmp_path):
    res = _hermes(["run", "--set", "processors=4", "--processes", "8", "--out", str(tmp_path / "x")])
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "at most one process per processor" in lines[0], res.stderr
    res = _hermes(["run", "--set", "processors=4", "--set", "clock=wall", "--processes", "2",
                   "--out", str(tmp_path / "y")])
    assert res.returncode != 0 and "clock: wall" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("balancer, trigger, expensive", [("chebyshev", 1.0, "numpy.linalg.eigvalsh"),
                                                          ("mincost", "auto", "hermes.balance.potential.mincost.mincost_flow")])
def test_hosted_processors_compute_what_is_global_once(monkeypatch, tmp_path, balancer, trigger, expensive):
    """What every processor computes alike from the shared model (the spectrum of chebyshev's exact bounds in every
    round; with ``trigger: auto`` the payoff's first estimate, a serial least-cost flow) is computed once per
    round by the processors hosted together, not once per processor: 16 processors, one phase."""
    import importlib

    from mpi4py import MPI

    from hermes.api import scenario
    from hermes.lifecycle.driver import run as run_here

    module, _, name = expensive.rpartition(".")
    mod = importlib.import_module(module)
    real, calls = getattr(mod, name), []
    monkeypatch.setattr(mod, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    sc = scenario(None, **{"processors": 16, "platform.capacities": "homo", "adaptation.phases": 1,
                           "application.iterations": 2, "balancer.algorithm": balancer, "balancer.trigger": trigger,
                           "balancer.chebyshev.bounds": "exact", "output.pictures": False})
    res = host_run(16, lambda c: run_here(sc, c, out_dir=tmp_path / "run", quiet=True), MPI.COMM_SELF).get(0)
    rounds = res.summary["phases"][0]["balance_rounds"]
    assert rounds >= 1 or trigger == "auto"
    assert 1 <= len(calls) <= rounds + 1, (len(calls), rounds)  # 16 per round without the sharing


def _cancelled(comm):
    from mpi4py import MPI

    r = comm.Get_rank()
    if r == 0:
        q = comm.irecv(source=1, tag=5)
        q.Cancel()  # before any message: withdrawn, complete, its status cancelled
        st = MPI.Status()
        q.Wait(st)
        mine = Status()
        q.Wait(mine)
        comm.send("go", dest=1, tag=4)
        got = comm.recv(source=1, tag=5)  # the message sent after the cancel goes to the next receive
        refused = []
        for what in (lambda: q.Cancel(), lambda: comm.isend(1, dest=1, tag=6).Cancel()):
            try:
                what()
            except HostedError as err:
                refused.append(str(err))
        done = comm.irecv(source=1, tag=7)
        done.wait()
        try:
            done.Cancel()
        except HostedError as err:
            refused.append(str(err))
        return st.Is_cancelled(), mine.Is_cancelled(), got, refused
    comm.recv(source=0, tag=4)
    comm.send("after", dest=0, tag=5)
    comm.recv(source=0, tag=6)
    comm.send(None, dest=0, tag=7)
    return None


def test_cancel_withdraws_a_posted_receive_and_refuses_the_rest():
    """Cancelling a receive no message has matched withdraws it (the next message goes to the next receive) and
    completes it cancelled; cancelling a send (buffered: complete at once) or a completed receive is refused in one
    line. Before, Cancel did nothing: the cancelled receive took the message and the next one waited for ever."""
    cancelled, mine, got, refused = host_run(2, _cancelled)[0]
    assert cancelled and mine and got == "after"
    assert len(refused) == 3 and all("\n" not in e for e in refused), refused
    assert "completed (cancelled already)" in refused[0]
    assert "cancels a send" in refused[1]
    assert "completed (matched already)" in refused[2]


def _case(case: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """tests/mpi/hosting_cases.py CASE on 2 processes hosting 4 processors (2 each)."""
    return run_mpi(2, [case], script=ROOT / "tests" / "mpi" / "hosting_cases.py", timeout=timeout)


def _error_lines(res: subprocess.CompletedProcess) -> list[str]:
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    # one line per process, but MPICH's Hydra may forward two processes' lines joined: read the records
    return re.findall(r"hermes: error: .*?(?=hermes: error: |\n|$)", res.stderr)


@pytest.mark.parametrize("case", ["poll", "test"])
def test_a_hosted_poll_sees_a_remote_message_within_a_bounded_number_of_polls(case):
    """Processor 3 (process 1) sends to processor 0 (process 0), both pass a plain MPI barrier, then processor 0 spins
    on Iprobe (or on a receive's test) and waits for nothing else. The bound: no more polls than plain MPI needs
    between the same processes (measured by the script right after), and at least 2 allowed — a hosted poll that
    finds nothing reads the bridge once before and once after letting its process' other processors run, each a
    non-blocking MPI probe as plain MPI's own Iprobe (Open MPI 5: 1 poll either way). Before, the polls never read
    the bridge (only a process with nothing runnable did): 200,000 polls did not see it."""
    res = _case(case)
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    hosted, plain = int(words[words.index("hosted") + 1]), int(words[words.index("plain") + 1])
    assert 1 <= hosted <= max(2, plain), res.stdout


def test_the_bridge_leaves_the_callers_messages_alone():
    """The hosted run listens on its own duplicate of the world communicator: the caller's plain MPI messages with
    a tag of its own, sent before and during the run, are still there for the caller after it. Before, the bridge
    probed any tag on the world communicator and dropped both."""
    res = _case("foreign")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["foreign", "before", "during"], res.stdout


def test_a_deadlock_across_processes_ends_in_one_line():
    """Processor 1 waits for a message never sent while the others end: the termination detection finds every
    process idle with no envelope in flight, and each process raises one HostedError naming processor 1 (one line
    each, non-zero exit) in seconds. Before, both processes spun for ever (the test's timeout failed it)."""
    import time

    t = time.monotonic()
    res = _case("deadlock", timeout=60)
    lines = _error_lines(res)
    assert time.monotonic() - t < 30
    assert len(lines) == 2 and len(set(lines)) == 1, res.stderr
    assert "hosted processors [1] wait for each other across 2 processes" in lines[0]


@pytest.mark.parametrize("case", ["live", "crossing"])
def test_a_slow_but_live_exchange_is_not_a_deadlock(case):
    """live: a processor busy for 1.5 s before it sends, and a ping-pong with a slow partner received in turn by
    polls and by waits, while process 0 keeps starting waves of the termination detection. crossing: a wave whose
    totals of sent and received envelopes agree while a processor runs (process 0 answered idle, then received m1
    and sent m2, which process 1 received before it answered) — a detection that trusted one wave declares a
    deadlock there (checked). Both runs end normally. (Guards for the detection added with the test above: the code
    before had none to be wrong, and fails here only for want of the wave counter the scripts read.)"""
    res = _case(case)
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    assert words[:2] == [case, "ok"] and int(words[2]) >= 1, res.stdout  # waves were started while it ran


def test_a_collective_mismatch_across_processes_ends_in_one_line():
    """Processors 0 and 1 (process 0) call bcast where processors 2 and 3 (process 1) call allgather: process 0
    compares every process' collective and root, and every process raises the same one-line HostedError. Before,
    process 0 computed a bcast for all (it printed a result) and process 1 failed with a TypeError traceback."""
    lines = _error_lines(_case("mismatch"))
    assert len(lines) == 2 and len(set(lines)) == 1, lines
    assert "collective 0: processor 2 (process 1) calls allgather (root 0) where processor 0 (process 0) calls " \
           "bcast (root 0)" in lines[0]


def test_a_kernel_in_bulk_exchanges_between_processes():
    """Communicator.bulk on 2 processes hosting 2 processors each: the kernel runs once per process, its group's
    exchange and allgather reach the other process (envelopes on the bridge counted by the termination detection),
    three calls in a row, and every processor gets its own item."""
    res = _case("bulk")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["bulk", "ok", "0"], res.stdout


def test_a_read_only_array_crosses_processes_once_and_its_receivers_share_it():
    """A read-only array that two processors of another process receive travels to their process once: they share
    it, read-only, alone or inside a tuple; after KEEP others it is shipped again, and every value arrives."""
    res = _case("shipped")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["shipped", "ok", "0"], res.stdout


def test_shipping_tables_mirror_each_other():
    """hosting.shipping alone, envelopes pickled as the bridge does: references only to arrays the receiver still
    keeps (a reused id, an evicted key, a writeable array, a small one are shipped or sent as they are)."""
    import pickle

    from hermes.runtime.hosting.shipping import KEEP, Shipping, _Ref, _Ship

    out, into = Shipping(), Shipping()

    def sealed(v, n=1000):
        a = np.full(n, float(v))
        a.flags.writeable = False
        return a

    def travel(value):
        packed = out.pack(1, ("value", value))
        return packed[1], into.unpack(0, pickle.loads(pickle.dumps(packed)))[1]

    a = sealed(1)
    sent, got = travel(a)
    assert type(sent) is _Ship and np.array_equal(got, a) and not got.flags.writeable
    sent, again = travel((3.0, a))
    assert type(sent[1]) is _Ref and again[1] is got
    small, writeable = sealed(2, n=8), np.ones(1000)
    assert travel(small)[0] is small and travel(writeable)[0] is writeable  # as they are
    others = [sealed(10 + k) for k in range(KEEP)]
    for o in others:
        assert type(travel(o)[0]) is _Ship
    sent, got = travel(a)  # evicted by KEEP others: shipped again
    assert type(sent) is _Ship and np.array_equal(got, a)
    assert list(out.held[1]) == list(into.kept[0]) and len(into.kept[0]) == KEEP
    del others
    b = sealed(99)  # may take a freed array's id: never mistaken for it
    sent, got = travel(b)
    assert np.array_equal(got, b)


def test_a_bulk_kernel_waiting_for_a_process_that_calls_something_else_ends_in_one_line():
    """Process 0's kernel waits for process 1's envelope while process 1's processors wait in an allgather: the
    termination detection finds both idle and every process raises one HostedError naming the waiting
    processors."""
    lines = _error_lines(_case("bulkmismatch"))
    assert len(lines) == 2 and len(set(lines)) == 1, lines
    assert "wait for each other across 2 processes" in lines[0]


def test_processors_of_one_process_calling_different_bulk_kernels_is_a_defect():
    def fn(comm):
        return comm.bulk("a" if comm.Get_rank() else "b", 1.0, lambda group, parts: parts)

    with pytest.raises(HostedError, match="calls bulk"):
        host_run(2, fn)
