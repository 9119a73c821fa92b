"""One price list (docs/COSTS.md): what a balancer reads beyond its own rank, and what it computes centrally, charged
to the virtual clock by one rule for every balancer, built-in or plug-in.

- **Information another rank holds arrives by a charged collective.** The model H = (G, l, c, w) — every rank's load
  and capacity, every edge and its weight, :func:`model_words` words — is charged as one gather
  (:func:`charge_gather`) in every balancing round in which the balancer reads ``ctx.model``
  (:class:`hermes.balance.interface.BalanceContext` notes the read; hermes.lifecycle.phase charges it). A flow is
  realised on the whole flow graph: its assembly, one value per edge, is charged the same way.
- **Central computation is charged at the computing processor's rate**, from a work count: :func:`charge_central`
  advances the root's clock by the work (``clock.compute``: ``units / (speed · p · c_root)`` seconds) and the
  others wait for the root's stamp in the broadcast or scatter of the answer, which the balancer pays as before.
  The work counts are in the clock's work units (:attr:`hermes.runtime.clock.WallClock.FLOPS_PER_UNIT` = 256
  flops of the wall clock's kernel): a dense eigensolve's ``4/3 p³`` flops
  (:func:`hermes.balance.polynomial.precompute.solve_units`); METIS, Scotch, the least-cost linear program and the
  minimal flow's sparse solve from their size by the laws below, whose constants were measured on one machine
  (``python -m benchmarks.central_costs``: the solve's seconds times that machine's rate of work units, fitted by
  the law's terms; results/central_costs.json) — a measured time scaled to the platform, stated as a law so that
  identical input gives identical clocks.
"""

from __future__ import annotations

import math

import numpy as np

from hermes.balance.model import Model
from hermes.runtime.clock import WallClock
from hermes.runtime.comm import Counters

#: flops in one work unit of the clocks (:attr:`hermes.runtime.clock.WallClock.FLOPS_PER_UNIT`)
WORK_UNIT_FLOPS = WallClock.FLOPS_PER_UNIT

__all__ = ["model_words", "flow_words", "metis_units", "scotch_units", "lp_units", "sparse_solve_units", "LAWS",
           "law_terms", "connectivity_units", "centre_units", "eigen_units", "charpoly_units", "central_value",
           "charge_gather", "charge_central"]

#: each law: its coefficients and its terms (benchmarks/central_costs.py fitted the coefficients, non-negative least
#: squares on relative errors, to solves timed on one machine: results/central_costs.json)
LAWS: dict[str, tuple[tuple[float, ...], str]] = {
    "metis": ((0.5079, 4.008), "c0 (n + nnz) log2 k + c1 k^2: n vertices, nnz adjacency entries, k parts"),
    "scotch": ((1.574, 0.5616), "c0 (n + nnz) log2 k + c1 k^2"),
    "lp": ((318.9, 0.07664), "c0 s + c1 s^2, s = p + q: the least-cost flow's linear program (HiGHS), p rows, "
           "2q columns"),
    "sparse": ((63.35, 0), "c0 p + c1 p^1.5: the minimal flow's sparse LU on the processor graph's Laplacian"),
}


def model_words(model: Model) -> int:
    """Words of the model H: every rank's load and capacity, every edge's other end and weight (``2p + 2q``)."""
    return int(2 * model.p + 2 * model.q)


def flow_words(model: Model) -> int:
    """Words of a flow's assembly: one value per edge (``q``)."""
    return int(model.q)


def law_terms(name: str, *, n: int = 0, nnz: int = 0, k: int = 1, p: int = 0, q: int = 0) -> tuple[float, ...]:
    """The terms of law ``name`` (see :data:`LAWS`) for a solve of that size."""
    if name in ("metis", "scotch"):
        return float(n + nnz) * math.log2(max(k, 2)), float(k) ** 2
    if name == "lp":
        s = float(p + q)
        return s, s * s
    if name == "sparse":
        return float(p), float(p) ** 1.5
    raise KeyError(name)


def _law(name: str, **size: int) -> float:
    return float(sum(c * t for c, t in zip(LAWS[name][0], law_terms(name, **size))))


def metis_units(n: int, nnz: int, k: int) -> float:
    """METIS' k-way partitioning of a graph of ``n`` vertices and ``nnz`` adjacency entries, in work units."""
    return _law("metis", n=n, nnz=nnz, k=k)


def scotch_units(n: int, nnz: int, k: int) -> float:
    """Scotch's remapping of a graph of ``n`` vertices and ``nnz`` adjacency entries into ``k`` parts."""
    return _law("scotch", n=n, nnz=nnz, k=k)


def lp_units(p: int, q: int) -> float:
    """The least-cost flow's linear program on ``p`` processors and ``q`` edges."""
    return _law("lp", p=p, q=q)


def sparse_solve_units(p: int) -> float:
    """The minimal flow's sparse solve on ``p`` processors."""
    return _law("sparse", p=p)


def charge_gather(comm, clock, counters: Counters | None, words: int, kind: str = "gather") -> float:
    """Charge a gather of ``words`` words in all to every rank (collective): every rank waits for the latest stamp
    (a real ``Allgather`` of the stamps), then pays ``⌈log2 p⌉ (α + β · 8 words)`` on the default link — the
    charge of every collective of hermes (:meth:`hermes.runtime.clock.Links.collective_cost`). Counted as ``kind``
    with this rank's share of the bytes. Returns the seconds this rank's clock advanced (0 on the wall clock or a
    single rank)."""
    p = comm.Get_size()
    if p < 2 or clock is None:
        return 0.0
    t0 = clock.now
    stamps = np.empty(p)
    with clock.measure("sync"):
        comm.Allgather(np.array([clock.stamp()]), stamps)
    clock.synchronised(stamps, clock.links.collective_cost(p, 8.0 * words))
    dt = clock.now - t0 if clock.kind == "virtual" else 0.0
    if counters is not None:
        counters.count_collective(kind)
        counters.bytes += int(8 * words) // p
        counters.time += dt
    return dt


def charge_central(comm, clock, counters: Counters | None, units: float, root: int = 0) -> float:
    """Charge ``units`` of central computation to the ``root`` rank's clock (not collective: the others wait for
    the root's stamp in the collective that carries the answer). Returns the seconds charged."""
    if clock is None or units <= 0 or comm.Get_rank() != root:
        return 0.0
    t0 = clock.now
    clock.compute(units)
    dt = clock.now - t0 if clock.kind == "virtual" else 0.0
    if counters is not None:
        counters.time += dt
    return dt


def connectivity_units(model: Model) -> float:
    """The edge connectivity e(G) (networkx: augmenting-path maximum flows from a dominating set), stated as
    ``p · q`` operations of one flop: what ε₀ and ω* need."""
    return float(model.p) * float(model.q) / WORK_UNIT_FLOPS


def centre_units(model: Model) -> float:
    """The graph centre (a breadth-first search from every vertex): ``p (p + 2q)`` operations of one flop."""
    return float(model.p) * float(model.p + 2 * model.q) / WORK_UNIT_FLOPS


def eigen_units(p: int) -> float:
    """A dense symmetric eigensolve, eigenvalues only: ``4/3 p³`` flops (Golub & Van Loan §8.3), the spectral plan's
    own count (:func:`hermes.balance.polynomial.precompute.solve_units`)."""
    from hermes.balance.polynomial.precompute import solve_units

    return solve_units(p)


def charpoly_units(p: int) -> float:
    """The characteristic polynomial of a p × p matrix by Faddeev–LeVerrier (or its kin): p products of dense
    p × p matrices, ``2 p⁴`` flops."""
    return 2.0 * float(p) ** 4 / WORK_UNIT_FLOPS


def central_value(ctx, value: float, units: float) -> float:
    """A quantity of the model (ε₀, ω*, α, the graph centre, ...) as rank 0 would compute it and broadcast it
    (collective): ``units`` of work charged to rank 0's clock, then one broadcast of one word, charged, in which the
    others wait for rank 0. Every rank computes ``value`` itself here (the same bits everywhere), the clock charges
    it once."""
    from hermes.runtime.comm import bcast

    if ctx.comm.Get_size() < 2 or ctx.clock is None:
        return value
    charge_central(ctx.comm, ctx.clock, ctx.nb.counters, units)
    bcast(ctx.comm, np.zeros(1), 0, ctx.clock, counters=ctx.nb.counters)
    return value


def add_central(result, model: Model, charges, links=None, speed: float | None = None):
    """A serial reference's ``result`` (:class:`hermes.balance.flow.FlowResult`) with the central work its distributed
    form charges before it iterates: for each ``(units, words)`` of ``charges``, rank 0's ``units`` at its rate
    (``speed · p · c_0``; ``speed`` the serial references' default, 10⁶ work units/s) and, if ``words``, a
    broadcast of that many words (one ``bcast`` counted, ``8 words`` bytes); the counters' time and every rank's
    time (``extra["rank_times"]``) shifted by the sum under ``links`` (nothing to shift without)."""
    from hermes.balance.polynomial.precompute import DEFAULT_SPEED

    p = model.p
    if p < 2:
        return result
    speed = DEFAULT_SPEED if speed is None else float(speed)
    dt = 0.0
    for units, words in charges:
        if words:
            result.counters.collectives["bcast"] = result.counters.collectives.get("bcast", 0) + 1
            result.counters.bytes += 8 * int(words)
        if links is not None:
            dt += float(units) / (speed * p * float(model.capacities[0])) if units > 0 else 0.0
            dt += links.collective_cost(p, 8.0 * words) if words else 0.0
    if links is not None and dt:
        result.counters.time += dt
        times = result.extra.get("rank_times")
        if times is not None:
            result.extra["rank_times"] = np.asarray(times, dtype=np.float64) + dt
    return result


def with_central(serial, charges):
    """``serial`` (a registry's serial reference) with :func:`add_central` of ``charges(model, params)`` — the same
    central work as the distributed form's, so that a serial reference prices a balancer as a run does. The
    signature is the reference's own (what :func:`hermes.balance.interface.serial_kwargs` reads)."""
    import functools

    @functools.wraps(serial)
    def priced(model: Model, **params):
        res = serial(model, **params)
        return add_central(res, model, charges(model, params), params.get("links"))

    return priced
