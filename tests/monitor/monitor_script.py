"""Under mpiexec: the monitor recovers configured capacities and per-link latency/bandwidth (virtual clock)."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.runtime.clock import Links, VirtualClock
from hermes.extraload import ProcessorLoad, parse_tasks
from hermes.monitor import monitor, probe_rates
from hermes.monitor.estimate import LARGE, SMALL
from tests.tolerances import EPS, flops, gamma

comm = plain(MPI.COMM_WORLD)
rank, p = comm.Get_rank(), comm.Get_size()
caps = np.arange(1, p + 1, dtype=float)
caps /= caps.sum()
links = Links(latency=1e-4, bandwidth=1e8, overrides={(0, 1): (2e-3, 1e6), (1, 2): (5e-5, 4e8)})
clock = VirtualClock(rank, p, links, speed=1e5, capacity=caps[rank])
nbrs = sorted({(rank - 1) % p, (rank + 1) % p})
est = monitor(comm, clock, nbrs, probe_work=100.0)
# Every reading is a difference of two clock values of size ≤ T (the clock when monitoring ended, the same
# bound on every rank after the final allreduce): error ≤ 2 u T, plus γ_3 of the modelled duration itself.
T = comm.allreduce(clock.now, op=MPI.MAX)
u = EPS / 2
# capacity: rate = work / Δt, Δt ≥ work / (speed p c_max); normalised by a sum of p rates
dt_min = 100.0 / (1e5 * p * caps.max())
cap_rtol = 2 * (2 * u * T / dt_min + gamma(3)) + gamma(p + 1)
assert np.isclose(est.capacity, caps[rank], rtol=cap_rtol, atol=0), (est.capacity, caps[rank])
# links: β = (t_L − t_S)/(L − S), α = t_S − β S, each end's reading averaged with the other's (one more rounding)
for j, lat, bw in zip(est.neighbours, est.latency, est.bandwidth):
    a, b = links.params(rank, int(j))
    dt = 2 * u * T + gamma(3) * (a + LARGE / b)
    dbeta = 2 * dt / (LARGE - SMALL) + gamma(2) / b
    assert abs(lat - a) <= dt + SMALL * dbeta + gamma(3) * a, (rank, j, lat, a)
    assert abs(1 / bw - 1 / b) <= dbeta + gamma(2) / b, (rank, j, bw, b)  # (the 1/β of the estimate: one division)
# weights and costs are bw / max bw and its inverse: the fastest link (4e8) known to the bound above
rel_bw = 4e8 * (2 * (2 * u * T + gamma(3) * (5e-5 + LARGE / 4e8)) / (LARGE - SMALL) + 2 * gamma(2) / 4e8) + gamma(2)
assert np.allclose(est.weights, est.bandwidth / 4e8, rtol=rel_bw + flops(2), atol=0)
assert np.allclose(est.costs, 4e8 / est.bandwidth, rtol=rel_bw + flops(2), atol=0)
assert clock.totals["balance"] > 0 and clock.totals["compute"] == 0  # monitoring is charged to balancing
# absolute probe rates: speed * p * c_i on every rank, each a work / Δt reading (the capacity's bound without
# the normalisation)
rates = probe_rates(comm, clock, 100.0)
assert np.allclose(rates, 1e5 * p * caps, rtol=cap_rtol, atol=0), rates
# with a CPU-bound external task on rank 1 the probe sees half of that processor
tasks = parse_tasks([{"processor": 1, "repeat": "forever", "script": [{"work": 1e9}]}])
loaded = VirtualClock(rank, p, links, speed=1e5, capacity=caps[rank], load=ProcessorLoad(rank, tasks, links))
rates = probe_rates(comm, loaded, 100.0)
expect = 1e5 * p * caps * np.where(np.arange(p) == 1, 0.5, 1.0)
assert np.allclose(rates, expect, rtol=cap_rtol, atol=0), rates
if rank == 0:
    print("OK")
