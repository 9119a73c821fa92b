"""Under mpiexec (2 ranks): RealLoad.open exchanges sink addresses; rank 0's task sends to rank 1's sink.

argv[1]: a log directory. Prints the pids of each rank's children (one JSON line per rank) and OK.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from mpi4py import MPI

from hermes.runtime.plain import plain

from hermes.extraload.real import RealLoad
from hermes.extraload.tasks import parse_tasks

comm = plain(MPI.COMM_WORLD)
rank = comm.Get_rank()
log = Path(sys.argv[1])
tasks = parse_tasks([{"name": "send", "processor": 0, "start": {"phase": 1}, "stop": {"phase": 1},
                      "script": [{"data": [[1, 300000]]}]}])
with RealLoad.open(comm, tasks, log_dir=log) as load:
    load.begin_phase(1)
    pids = load.pids()
    print(json.dumps({"rank": rank, "pids": pids}), flush=True)
    if rank == 1:  # wait until the sink has logged what it received
        end = time.monotonic() + 20
        sink_log = log / "sink-1.log"  # created empty when the sink starts
        while time.monotonic() < end and not (sink_log.exists() and sink_log.read_text().strip()):
            time.sleep(0.05)
    comm.Barrier()
    load.begin_phase(2)
if rank == 1:
    assert (log / "sink-1.log").read_text().split() == ["received", "300000"], (log / "sink-1.log").read_text()
comm.Barrier()
if rank == 0:
    print("OK", flush=True)
