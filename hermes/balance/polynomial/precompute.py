"""What the spectral precomputation of the eigen forms of LPS, LPA and MPA costs, and its charge to the clock.

The eigen forms (:mod:`hermes.balance.polynomial.leja`) need the distinct eigenvalues of the generalized
Laplacian 𝓛 = D^{-1/2} L D^{-1/2}: a dense symmetric eigensolve on the whole processor graph. hermes models
it as done centrally, on rank 0, in three steps:

1. **gather** of the graph to rank 0: each rank sends its capacity and, for each of its edges (i, j), i < j,
   the neighbour and the weight — ``p + 2q`` words in all — charged as every collective of hermes,
   ``⌈log2 p⌉ (α + β b)`` on the default link with ``b = 8 (p + 2q)`` bytes
   (:meth:`hermes.runtime.clock.Links.collective_cost`);
2. **eigensolve** on rank 0: ``eigvalsh`` (eigenvalues only) costs ``4/3 p³`` flops, its Householder
   tridiagonalisation (the O(p²) tridiagonal eigenvalue solve and the Leja order left out; Golub & Van Loan,
   *Matrix Computations*, 4th ed., §8.3: 4n³/3 without eigenvectors, ≈ 9n³ with them), at rank 0's rate:
   ``WallClock.FLOPS_PER_UNIT`` = 256 flops per work unit (the wall clock's emulation of a work unit),
   ``speed · p · c_0`` work units per second — ``4/3 p³ / (256 · speed · p · c_0)`` seconds; where the discrete
   Leja orders' error bound is ≥ 1, the plan's extra work at the same rate
   (:attr:`hermes.balance.polynomial.leja.SpectralPlan.extra_units`: the interval order, the trial sweeps);
3. **broadcast** of the plan from rank 0: the n nodes in Leja order and the refinement count, ``n + 1`` words,
   ``⌈log2 p⌉ (α + 8 β (n + 1))``.

Every rank ends at ``max stamp + gather + solve + broadcast``. The plan is kept in ``ctx.state`` while the
graph, the capacities and the weights do not change (:func:`hermes.balance.polynomial.leja.cached_plan`):
then nothing is computed and nothing is charged. ``spectrum: free`` (a parameter of lps, lpa, mpa) skips the
charge — the thesis' assumption that H is known globally and the old timing — and the balance record says
so (``balance_info``: ``spectrum``, ``spectrum_computed``, ``spectrum_time``). The serial references (``hermes
lab flow``, ``hermes lab bench``) charge the same at the platform's default speed (:data:`DEFAULT_SPEED`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hermes.balance.model import Model
from hermes.runtime.clock import Links, WallClock
from hermes.runtime.comm import Counters, bcast

__all__ = ["SPECTRUM_CHARGES", "EIGVALSH_FLOPS", "DEFAULT_SPEED", "graph_words", "solve_units", "solve_seconds", "spectrum_seconds",
           "charge_spectrum", "add_spectrum"]

#: ``spectrum``: ``charged`` (default) or ``free`` (the precomputation costs nothing, as before)
SPECTRUM_CHARGES = ("charged", "free")
#: flops of the eigenvalues-only dense symmetric eigensolve, per p³ (Golub & Van Loan §8.3)
EIGVALSH_FLOPS = 4.0 / 3.0
#: work units per second of an average processor in the serial references (``platform.speed``'s default)
DEFAULT_SPEED = 1.0e6


def graph_words(model: Model) -> int:
    """Words gathered: every rank's capacity, and the neighbour and weight of each edge (``p + 2q``)."""
    return int(model.p + 2 * model.q)


def solve_units(p: int) -> float:
    """The eigensolve's work units: ``4/3 p³`` flops, 256 flops each."""
    return EIGVALSH_FLOPS * float(p) ** 3 / WallClock.FLOPS_PER_UNIT


def solve_seconds(p: int, rate: float) -> float:
    """:func:`solve_units` at ``rate`` work units per second."""
    return solve_units(p) / float(rate)


def spectrum_seconds(model: Model, steps: int, links: Links, speed: float = DEFAULT_SPEED, extra_units: float = 0.0
                     ) -> float:
    """Gather, eigensolve (and ``extra_units``: the plan's trial) on rank 0 (rate ``speed · p · c_0``) and
    broadcast of ``steps + 1`` words, in seconds."""
    p = model.p
    if p < 2:
        return 0.0
    gather = links.collective_cost(p, 8.0 * graph_words(model))
    rate = speed * p * float(model.capacities[0])
    solve = solve_seconds(p, rate) + (extra_units / rate if extra_units else 0.0)
    return gather + solve + links.collective_cost(p, 8.0 * (steps + 1))


def add_spectrum(counters: Counters, times, model: Model, steps: int, links: Links | None, extra_units: float = 0.0
                 ) -> tuple[Counters, Any]:
    """The serial references' counters and per-rank times with the precomputation first: one ``gather``
    (``8 (p + 2q)`` bytes over the ranks), one ``bcast`` (``8 (n + 1)`` at the root), every rank's time
    shifted by :func:`spectrum_seconds` (the schedule starts from equal clocks, so it shifts as a whole)."""
    if model.p < 2:
        return counters, times
    for kind in ("gather", "bcast"):
        counters.collectives[kind] = counters.collectives.get(kind, 0) + 1
    counters.bytes += 8 * graph_words(model) + 8 * (steps + 1)
    if links is None:
        return counters, times
    dt = spectrum_seconds(model, steps, links, extra_units=extra_units)
    counters.time += dt
    return counters, None if times is None else np.asarray(times, dtype=np.float64) + dt


def charge_spectrum(comm, clock, counters: Counters, model: Model, plan_words, extra_units: float = 0.0) -> float:
    """Charge the precomputation on this rank (collective): the gather's stamps (real ``Allgather``), rank 0's
    eigensolve and ``extra_units`` (the plan's interval order and trial sweeps, :attr:`SpectralPlan.extra_units`) (``clock.compute``),
    the broadcast of ``plan_words`` (the nodes and the refinement count) from
    rank 0 (:func:`hermes.runtime.comm.bcast`). Returns the seconds this rank's clock advanced (virtual clock; 0 on the
    wall clock)."""
    me, p = comm.Get_rank(), comm.Get_size()
    if p < 2:
        return 0.0
    t0 = clock.now
    stamps = np.empty(p)
    with clock.measure("sync"):
        comm.Allgather(np.array([clock.stamp()]), stamps)
    clock.synchronised(stamps, clock.links.collective_cost(p, 8.0 * graph_words(model)))
    counters.count_collective("gather")
    counters.bytes += 8 * (1 + 2 * int(np.count_nonzero(model.edges[:, 0] == me)))
    if me == 0:
        clock.compute(solve_units(p) + extra_units)
    words = np.asarray(plan_words, dtype=np.float64).ravel()
    bcast(comm, words, 0, clock)
    counters.count_collective("bcast")
    counters.bytes += 8 * words.size if me == 0 else 0
    dt = clock.now - t0 if clock.kind == "virtual" else 0.0
    counters.time += dt
    return dt
