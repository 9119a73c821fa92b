"""Estimate what the balancer needs — capacities c and link weights w — from timings.

Like HeRMeS' NWS sensors (thesis §10.1), the monitor *measures* rather than reads the configuration:

- capacity: each rank runs a probe of ``probe_work`` work units through its clock and times it; the
  rate ``work / time`` of every rank is normalised to sum 1. Under the virtual clock the probe time is
  exactly ``work / (speed · p · c_i)``, so the estimate recovers the configured capacities;
- links: each rank exchanges a small and a large message with every neighbour and reads their
  one-way times; two sizes give latency α and bandwidth 1/β of each link (α-β model, thesis §4.2).
  Both ends average their readings, so both hold the same value. Under the wall clock the transit
  time of one exchange round is shared by all neighbours of the rank (a coarse but honest reading).

Weights for the model are conductances ``w = bandwidth / max bandwidth`` and the gain function's
costs are ``bandwidth_max / bandwidth`` (see :mod:`hermes.balance.realisation.selection`).
Forecasting (NWS-style predictors over these series) comes with the monitoring issue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.comm import NeighbourComm, allreduce

__all__ = ["Estimates", "estimate_capacity", "estimate_links", "monitor", "probe_rates"]

SMALL, LARGE = 8, 65536


@dataclass(frozen=True)
class Estimates:
    """What rank i knows after monitoring: its capacity and its links to its neighbours."""

    capacity: float
    neighbours: NDArray[np.int64]
    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64]
    weights: NDArray[np.float64]
    costs: NDArray[np.float64]


def estimate_capacity(comm, clock, probe_work: float) -> float:
    """Normalised capacity of this rank from a timed probe (collective)."""
    t0 = clock.elapsed()
    before = clock.totals["compute"] + clock.totals["balance"]
    clock.compute(probe_work)
    dt = (clock.totals["compute"] + clock.totals["balance"]) - before
    if dt <= 0:
        dt = max(clock.elapsed() - t0, 1e-12)
    rate = probe_work / dt
    total = allreduce(comm, rate, clock)
    return rate / total


def estimate_links(comm, clock, neighbours, *, bulk: bool = False) -> tuple[NDArray, NDArray]:
    """(latency, bandwidth) to each neighbour from two timed exchanges (collective).

    ``bulk`` (the scenario's ``run.bulk: auto``) with a virtual clock without an extra load: the exchanges run once
    per MPI process for the processors it hosts (:func:`_links_kernel`), the same estimates and clocks."""
    from hermes.runtime.clock import ClockBank

    nb = NeighbourComm(comm, neighbours, clock)
    if bulk and ClockBank.bankable([clock]):
        return comm.bulk("estimate_links", nb, _links_kernel)
    times = []
    for size in (SMALL, LARGE):
        if clock.kind == "virtual":  # the model charges the size; no need to allocate and copy it (hosted
            # processors would hold every probe of the process at once): one word sent, size charged
            nb.exchange([np.zeros(1) for _ in neighbours], model_bytes=np.full(len(neighbours), 8.0 * (size // 8)))
        else:
            nb.exchange([np.zeros(size // 8) for _ in neighbours])
        times.append(nb.last_transit.copy())
    alpha, beta = _readings(*times)
    # both ends agree: average the two readings of every link
    theirs = nb.exchange([np.array([a, b]) for a, b in zip(alpha, beta)])
    if len(neighbours):
        alpha, beta = _averaged(alpha, beta, np.array([x[0] for x in theirs]), np.array([x[1] for x in theirs]))
    return alpha, 1.0 / beta


def _readings(t_small: NDArray[np.float64], t_large: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """(α, β) of each link from the transit times of the small and the large probe."""
    beta = np.maximum((t_large - t_small) / float(LARGE - SMALL), 1e-300)
    return np.maximum(t_small - beta * SMALL, 0.0), beta


def _averaged(alpha, beta, their_alpha, their_beta) -> tuple[NDArray, NDArray]:
    """The two ends' readings of every link, averaged."""
    return 0.5 * (alpha + their_alpha), 0.5 * (beta + their_beta)


def _links_kernel(group, nbs: list) -> list[tuple[NDArray, NDArray]]:
    """:func:`estimate_links` of every processor of a process (a kernel run in bulk): the two probes as pair-aligned
    exchanges charged at their model sizes, the readings' arithmetic elementwise over the pairs (the same IEEE
    operations as each processor's), the two ends' readings averaged after one exchange of (α, β)."""
    from hermes.runtime.bulk import BankedNeighbours, exchange_arrays

    bn = BankedNeighbours(group, nbs)
    zero = np.zeros(bn.L)
    times = []
    for size in (SMALL, LARGE):
        bn.exchange_scalar(zero, nbytes=8.0 * (size // 8))
        times.append(bn.transit.copy())
    alpha, beta = _readings(*times)
    theirs, _ = exchange_arrays(bn, list(np.column_stack((alpha, beta))))
    bn.store()
    theirs = theirs.reshape(-1, 2)
    alpha, beta = _averaged(alpha, beta, theirs[:, 0], theirs[:, 1])
    return [(alpha[bn.ptr[i]:bn.ptr[i + 1]], 1.0 / beta[bn.ptr[i]:bn.ptr[i + 1]]) for i in range(bn.L)]


def probe_rates(comm, clock, probe_work: float) -> NDArray[np.float64]:
    """Absolute rate (work units / s) of every rank from a timed probe (collective; balance time).

    The start-up reading of :class:`hermes.monitor.series.Monitor`'s series (the thesis' benchmark
    "used for measuring the absolute computational capacities", §10.1). Every rank gets all ``p`` rates.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    with clock.activity("balance"):
        before = clock.totals["balance"]
        t0 = clock.elapsed()
        clock.compute(probe_work)
        dt = clock.totals["balance"] - before
        if dt <= 0:
            dt = max(clock.elapsed() - t0, 1e-12)
        mine = np.zeros(size)
        mine[rank] = probe_work / dt
        return allreduce(comm, mine, clock)


def monitor(comm, clock, neighbours, probe_work: float, *, bulk: bool = False) -> Estimates:
    """Capacity and link estimates of this rank (collective); charged as balancing time. ``bulk``: the link probes
    in bulk (:func:`estimate_links`)."""
    neighbours = np.asarray(neighbours, dtype=np.int64)
    with clock.activity("balance"):
        cap = estimate_capacity(comm, clock, probe_work)
        lat, bw = estimate_links(comm, clock, neighbours, bulk=bulk)
        bw_max = allreduce(comm, float(bw.max()) if bw.size else 0.0, clock, op="max")
    bw_max = bw_max if bw_max > 0 else 1.0
    return Estimates(capacity=cap, neighbours=neighbours, latency=lat, bandwidth=bw,
                     weights=bw / bw_max, costs=bw_max / bw)
