"""Run under mpiexec (2 processes): 6 hosted processors; processor 0 alone raises a HermesError while the others
wait in a barrier. Process 0 must end with the error (exit 2) instead of waiting for ever; mpiexec then ends the
job."""

import sys
from pathlib import Path

from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from hermes.errors import ScenarioError  # noqa: E402
from hermes.runtime.hosting import host_run  # noqa: E402


def alone(comm):
    if comm.Get_rank() == 0:
        raise ScenarioError("only processor 0 saw this")
    comm.barrier()


try:
    host_run(6, alone, MPI.COMM_WORLD)
except ScenarioError as err:
    print(f"hermes: error: {err}", file=sys.stderr, flush=True)
    sys.exit(2)
print("all ended", flush=True)
