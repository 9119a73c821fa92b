"""Run under mpiexec -n 2: 4 processors hosted, 2 per process (0, 1 on process 0; 2, 3 on process 1); one case of
the bridge's guarantees (hermes/runtime/hosting/host.py) per run, named by the first argument.

- ``poll``: processor 3 sends to processor 0, then both meet in a plain MPI barrier of the two processes; processor
  0 then spins on ``Iprobe`` (it waits for nothing else) and counts its polls until it sees the message; plain MPI
  then does the same between the two processes. Prints ``polls hosted H plain M`` on process 0.
- ``test``: the same with ``irecv(...).test()`` as the poll. Prints ``polls hosted H plain M`` on process 0.
- ``foreign``: process 1 sends a plain MPI message with a tag of its own to process 0 on the world communicator before
  the hosted run, and processor 3 another while it runs; after the run process 0 receives both. Prints ``foreign
  before during`` or ``foreign missing ...``.
- ``deadlock``: processor 1 waits for a message never sent while the others end.
- ``mismatch``: processors 0 and 1 call bcast where processors 2 and 3 call allgather.
- ``live``: a slow but live exchange (a processor busy for 1.5 s before it sends, a ping-pong polled with
  ``Iprobe`` and by waits): must end normally. Prints ``live ok WAVES`` on process 0 (the waves of the termination
  detection process 0 started during the run).
- ``bulk``: three kernels run in bulk (Communicator.bulk), each process' group exchanging with the other and
  gathering a row per process: every processor gets its part plus the sum of all. Prints ``bulk ok 0``.
- ``bulkmismatch``: process 0's processors run a bulk kernel whose group waits for process 1, whose processors call
  an allgather: a deadlock across the processes.
- ``shipped``: processors 0 and 1 send a read-only array (alone and in a tuple) to processors 2 and 3, then
  ``KEEP + 2`` others, then the first again (hermes/runtime/hosting/shipping.py): the values arrive; an array sent
  to both 2 and 3 reaches their process once and they share it, read-only. Prints ``shipped ok 0``.
- ``crossing``: one wave of the termination detection whose totals agree while a processor runs (process 0 reports
  idle, then receives m1 and sends m2, which process 1 receives before it reports): must end normally. Prints
  ``crossing ok WAVES``.

A :class:`~hermes.runtime.hosting.HostedError` is printed as one line ``hermes: error: ...`` by each process, which then
exits 2 once both have printed (a barrier of the two processes: a process that never raises hangs the test, and the
test's timeout fails it).
"""

import sys
import time
from pathlib import Path

from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from hermes.runtime.hosting import HostedError, host_run  # noqa: E402

world = MPI.COMM_WORLD
case = sys.argv[1]
LIMIT = 200_000  # polls before giving up (the message was sent before the first)


def spin(poll) -> int:
    n = 0
    while n < LIMIT:
        n += 1
        if poll():
            return n
    return n


def polled(comm):
    r = comm.Get_rank()
    if r == 3:
        comm.send("hello", dest=0, tag=7)
        world.Barrier()  # plain MPI, the two processes: the message has been handed to MPI before it
    elif r == 0:
        q = comm.irecv(source=3, tag=7) if case == "test" else None
        world.Barrier()
        n = spin((lambda: q.test()[0]) if q is not None else (lambda: comm.Iprobe(source=3, tag=7)))
        if q is None and n < LIMIT:
            assert comm.recv(source=3, tag=7) == "hello"
        return n
    return None


def foreign(comm):
    r = comm.Get_rank()
    if r == 3:
        world.send("during", dest=0, tag=78)  # the caller's own message, while the hosted run goes on
    for k in range(20):  # hosted traffic: the bridge reads envelopes while the foreign messages wait
        comm.send(k, dest=(r + 1) % 4, tag=1)
        assert comm.recv(source=(r - 1) % 4, tag=1) == k
        comm.allgather(r)
    return r


def deadlock(comm):
    if comm.Get_rank() == 1:
        comm.recv(source=0, tag=1)  # never sent
    return comm.Get_rank()


def mismatch(comm):
    return comm.bcast(1, root=0) if comm.Get_rank() < 2 else comm.allgather(comm.Get_rank())


def _gather_kernel(group, parts):
    """Each processor's part plus the sum of every processor's parts (process-level exchange and allgather)."""
    import numpy as np

    mine = np.array(parts, dtype=float)
    others = group.exchange({q: mine for q in range(group.processes) if q != group.pid})
    total = sum(float(v.sum()) for v in others.values()) + float(mine.sum())
    rows = group.allgather(np.array([mine.sum()]))
    assert rows.shape == (group.processes, 1) and float(rows.sum()) == total
    return [p + total for p in parts]


def bulk(comm):
    r = comm.Get_rank()
    got = [comm.bulk("sum", float(r + 1), _gather_kernel) for _ in range(3)]
    assert got == [r + 1 + 10.0] * 3, got
    return r


SEEN: dict = {}  # what processors 2 and 3 received (the same process: one may look at the other's)


def shipped(comm):
    import numpy as np

    from hermes.runtime.hosting.shipping import KEEP

    r = comm.Get_rank()
    if r < 2:
        a = np.arange(1000.0) + r
        a.flags.writeable = False
        others = [np.full(1000, 10.0 * r + k) for k in range(KEEP + 2)]
        for o in others:
            o.flags.writeable = False
        for d in (2, 3):
            comm.send(a, dest=d, tag=1)
            comm.send((0.5, r, a), dest=d, tag=1)
        for o in others:
            for d in (2, 3):
                comm.send(o, dest=d, tag=2)
        for d in (2, 3):
            comm.send(a, dest=d, tag=3)
    else:
        got = {s: [comm.recv(source=s, tag=1) for _ in range(2)] for s in (0, 1)}
        rest = {s: [comm.recv(source=s, tag=2) for _ in range(KEEP + 2)] for s in (0, 1)}
        again = {s: comm.recv(source=s, tag=3) for s in (0, 1)}
        for s in (0, 1):
            assert np.array_equal(got[s][0], np.arange(1000.0) + s) and got[s][1][:2] == (0.5, s)
            assert got[s][1][2] is got[s][0] and not got[s][0].flags.writeable
            assert [float(o[0]) for o in rest[s]] == [10.0 * s + k for k in range(KEEP + 2)]
            assert np.array_equal(again[s], np.arange(1000.0) + s)
        SEEN[r] = got
    comm.barrier()
    if r == 2:
        assert all(SEEN[2][s][0] is SEEN[3][s][0] for s in (0, 1))  # shipped once, shared by both receivers
    return r


def bulkmismatch(comm):
    """Process 0's processors call a bulk kernel, process 1's an allgather: the kernel waits for process 1."""
    if comm.Get_rank() < 2:
        return comm.bulk("sum", 1.0, _gather_kernel)
    return comm.allgather(comm.Get_rank())


def live(comm):
    r = comm.Get_rank()
    if r == 3:
        t = time.monotonic()
        while time.monotonic() - t < 1.5:  # busy: its process answers no wave meanwhile
            pass
        comm.send("late", dest=1, tag=2)
    elif r == 1:
        assert comm.recv(source=3, tag=2) == "late"
    elif r == 0:
        for k in range(100):  # a ping-pong, received in turn by a poll and by a wait
            comm.send(k, dest=2, tag=3)
            while k % 2 and not comm.Iprobe(source=2, tag=4):
                pass
            assert comm.recv(source=2, tag=4) == k
    elif r == 2:
        for k in range(100):
            got = comm.recv(source=0, tag=3)
            time.sleep(0.002)  # slow: process 1 busy, process 0 idle (it starts waves)
            comm.send(got, dest=0, tag=4)
    return comm.host.wave


def crossing(comm):
    r = comm.Get_rank()
    if r == 3:
        busy(0.3)  # process 0 goes idle and asks process 1 for its counts: process 1 answers once idle
        comm.send("m1", dest=0, tag=1)
        while not comm.Iprobe(source=0, tag=2):  # busy until m2 comes: still no answer
            pass
        assert comm.recv(source=0, tag=2) == "m2"
        assert comm.recv(source=0, tag=3) == "m3"  # idle: answers, with m1 sent and m2 received
    elif r == 0:
        assert comm.recv(source=3, tag=1) == "m1"  # process 0 answered the wave before it came
        comm.send("m2", dest=3, tag=2)
        busy(0.3)  # the wave's totals agree (m1 sent, m2 received) while this processor runs
        comm.send("m3", dest=3, tag=3)
    return comm.host.wave


def busy(seconds: float) -> None:
    t = time.monotonic()
    while time.monotonic() - t < seconds:
        pass


def plain_polls() -> int:
    if world.Get_rank() == 1:
        world.send("hello", dest=0, tag=9)
        world.Barrier()
        return 0
    world.Barrier()
    n = spin(lambda: world.Iprobe(source=1, tag=9))
    world.recv(source=1, tag=9)
    return n


try:
    if case in ("poll", "test"):
        got = host_run(4, polled, world)
        plain = plain_polls()
        if world.Get_rank() == 0:
            print(f"polls hosted {got[0]} plain {plain}", flush=True)
    elif case == "foreign":
        if world.Get_rank() == 1:
            world.send("before", dest=0, tag=77)
        host_run(4, foreign, world)
        if world.Get_rank() == 0:
            seen = []
            for tag in (77, 78):
                t = time.monotonic()
                while not world.Iprobe(source=1, tag=tag) and time.monotonic() - t < 5:
                    time.sleep(0.001)
                seen.append(world.recv(source=1, tag=tag) if world.Iprobe(source=1, tag=tag) else f"missing {tag}")
            print("foreign", *seen, flush=True)
    else:
        got = host_run(4, {"deadlock": deadlock, "mismatch": mismatch, "live": live, "crossing": crossing,
                           "bulk": bulk, "bulkmismatch": bulkmismatch, "shipped": shipped}[case], world)
        if world.Get_rank() == 0:
            print(f"{case} ok {got.get(0)}", flush=True)
except HostedError as err:
    print(f"hermes: error: {err}", file=sys.stderr, flush=True)
    world.Barrier()
    sys.exit(2)
