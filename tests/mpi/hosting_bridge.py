"""Run under mpiexec: 11 processors hosted by the job's processes, every collective and message bridged."""

import sys
from pathlib import Path

from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from hermes.runtime.hosting import host_run  # noqa: E402
from tests.test_hosting import _collectives, _point_to_point  # noqa: E402

world = MPI.COMM_WORLD
for fn in (_collectives, _point_to_point):
    got = host_run(11, fn, world)
    mine = sorted(got)
    assert all(got[r] == r for r in mine) and mine, got
    everyone = sorted(r for part in world.allgather(mine) for r in part)
    assert everyone == list(range(11)), everyone
print(f"ok{world.Get_rank()}", flush=True)
