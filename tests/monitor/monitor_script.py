"""Under mpiexec: the monitor recovers configured capacities and per-link latency/bandwidth (virtual clock)."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from hermes.clock import Links, VirtualClock
from hermes.extraload import ProcessorLoad, parse_tasks
from hermes.monitor import monitor, probe_rates

comm = MPI.COMM_WORLD
rank, p = comm.Get_rank(), comm.Get_size()
caps = np.arange(1, p + 1, dtype=float)
caps /= caps.sum()
links = Links(latency=1e-4, bandwidth=1e8, overrides={(0, 1): (2e-3, 1e6), (1, 2): (5e-5, 4e8)})
clock = VirtualClock(rank, p, links, speed=1e5, capacity=caps[rank])
nbrs = sorted({(rank - 1) % p, (rank + 1) % p})
est = monitor(comm, clock, nbrs, probe_work=100.0)
assert np.isclose(est.capacity, caps[rank], rtol=1e-12), (est.capacity, caps[rank])
for j, lat, bw in zip(est.neighbours, est.latency, est.bandwidth):
    a, b = links.params(rank, int(j))
    assert np.isclose(lat, a, rtol=1e-6, atol=1e-12), (rank, j, lat, a)
    assert np.isclose(bw, b, rtol=1e-6), (rank, j, bw, b)
assert np.allclose(est.weights, est.bandwidth / 4e8) and np.allclose(est.costs, 4e8 / est.bandwidth)
assert clock.totals["balance"] > 0 and clock.totals["compute"] == 0  # monitoring is charged to balancing
# absolute probe rates: speed * p * c_i on every rank
rates = probe_rates(comm, clock, 100.0)
assert np.allclose(rates, 1e5 * p * caps, rtol=1e-12), rates
# with a CPU-bound external task on rank 1 the probe sees half of that processor
tasks = parse_tasks([{"processor": 1, "repeat": "forever", "script": [{"work": 1e9}]}])
loaded = VirtualClock(rank, p, links, speed=1e5, capacity=caps[rank], load=ProcessorLoad(rank, tasks, links))
rates = probe_rates(comm, loaded, 100.0)
expect = 1e5 * p * caps * np.where(np.arange(p) == 1, 0.5, 1.0)
assert np.allclose(rates, expect, rtol=1e-12), rates
if rank == 0:
    print("OK")
