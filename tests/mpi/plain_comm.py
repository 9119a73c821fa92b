"""Run under mpiexec (3 processes): the plain communicator (hermes.runtime.plain) gives what the hosted one gives —
mpi4py's semantics (tests/test_hosting.py's collectives and messages) and, bit for bit, the rank-order reductions
and hermes' own collectives (reduce_stamped, sources, directory) of 3 processors hosted in one process."""

import pickle
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from hermes.runtime.hosting import host_run  # noqa: E402
from hermes.runtime.plain import PlainComm  # noqa: E402
from hermes.runtime.start import start  # noqa: E402
from tests.test_hosting import _collectives, _point_to_point  # noqa: E402


def own(comm):
    r, p = comm.Get_rank(), comm.Get_size()
    x = np.random.default_rng(r).normal(size=5) * 10.0 ** np.arange(5)  # sums whose order shows in the last bits
    gids = np.arange(r, 30, p)  # cell g owned by g mod p
    out = [comm.allreduce(float(x[4])), comm.allreduce(x), comm.allreduce(float(x[0]), op=MPI.MAX),
           comm.scan(float(x[3])), comm.exscan(float(x[3])), comm.allreduce([r]),
           comm.reduce_stamped(0.5 * r, x, "sum"), comm.reduce_stamped(1.0 - r, x, "max"),
           comm.reduce_stamped(2.0, x, "min"), comm.sources([(r + 1) % p, (r + 2) % p] if r else []),
           comm.directory(gids, np.array([(r + 1) % 30, 29, 0])), comm.directory(gids, np.array([31]))]
    buf = np.empty(5)
    comm.Allreduce(x, buf)
    out.append(buf)
    return pickle.dumps(out)


world = MPI.COMM_WORLD
me = world.Get_rank()
for fn in (_collectives, _point_to_point):
    assert start(3, fn, world) == {me: me}
got = start(3, own, world)
comm = PlainComm(world)
assert comm.comm != world and comm.process_leader and comm.processes == 3  # a duplicate: its own messages
hosted = host_run(3, own)  # the 3 processors in this one process
a, b = pickle.loads(got[me]), pickle.loads(hosted[me])
for k, (u, v) in enumerate(zip(a, b)):
    assert pickle.dumps(u) == pickle.dumps(v), (k, u, v)
assert len(a) == len(b) == 13
print(f"ok{me}", flush=True)
