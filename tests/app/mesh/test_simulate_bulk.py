"""The solver's iterations in bulk (hermes.app.mesh.simulate_bulk, run.bulk: auto) against each processor's own loop
(off): the same bits for every processor's values, clock (now, totals and work of every category) and loop figures — the
bulk form performs the same IEEE operations in the same order (its module docstring), so equality is exact, not
within a tolerance. Hosted in this process (one process: every exchange between processors is an index); the
same across MPI processes is tests/test_hosting.py's."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.mesh.kernels import initial_fields
from hermes.app.mesh.simulate import solve_phase
from hermes.data.distributed import scatter_domain
from hermes.data.generators import grid
from hermes.data.mesh import Mesh
from hermes.runtime.clock import CATEGORIES, ClockBank, Links, VirtualClock
from hermes.runtime.hosting import host_run


def _two_grids() -> Mesh:
    """Two disconnected 4 x 3 grids side by side: a processor owning a whole component has no neighbour."""
    a = grid(4, 3)
    n = a.n_cells
    xadj = np.concatenate((a.xadj, a.xadj[1:] + a.xadj[-1]))
    adjncy = np.concatenate((a.adjncy, a.adjncy + n))
    coords = np.vstack((a.coords, a.coords + [10.0, 0.0]))
    return Mesh("two-grids", xadj, adjncy, np.concatenate((a.weights, a.weights)), coords)


def _run(p, mesh, owner, bulk, kernel, links, caps, phases=2, iterations=7, activity=None):
    def fn(comm):
        r = comm.Get_rank()
        dom = scatter_domain(comm, mesh if r == 0 else None, owner if r == 0 else None,
                             fields=initial_fields(mesh.coords) if r == 0 else None)
        clock = VirtualClock(r, p, links, 1.5e3, caps[r])
        stats = []
        for ph in range(phases):
            if activity is not None and ph == 1:
                with clock.activity(activity):
                    dom, st = solve_phase(comm, dom, clock, kernel=kernel, iterations=iterations,
                                          work_per_weight=1.0 + 0.25 * ph, bytes_per_edge=64.0, bulk=bulk)
            else:
                dom, st = solve_phase(comm, dom, clock, kernel=kernel, iterations=iterations,
                                      work_per_weight=1.0 + 0.25 * ph, bytes_per_edge=64.0, bulk=bulk)
            stats.append((st.iterations, st.work, st.bytes_sent, st.messages, st.residual))
        return (dom.fields["u"].tobytes(), clock.now, dict(clock.totals), dict(clock.work), stats)

    return host_run(p, fn)


CASES = {
    # processors, mesh, owner, links
    "grid-blocks": (5, grid(13, 11), lambda m, p: np.arange(m.n_cells) * p // m.n_cells, Links()),
    "grid-scattered": (7, grid(12, 9), lambda m, p: np.random.default_rng(4).integers(0, p, m.n_cells),
                       Links(latency=3e-5, bandwidth=2e8, overrides={(0, 3): (5e-4, 1e7), (2, 6): (1e-6, 1e9)})),
    "lonely-processor": (4, _two_grids(), lambda m, p: np.concatenate((np.zeros(m.n_cells // 2, np.int64),
                                                                       1 + np.arange(m.n_cells // 2) % 3)),
                         Links(collective_latency=2e-3)),
    "one": (1, grid(6, 5), lambda m, p: np.zeros(m.n_cells, dtype=np.int64), Links()),
}


@pytest.mark.parametrize("kernel", ["jacobi", "synthetic"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_bulk_loop_is_the_per_processor_loop_bit_for_bit(case, kernel):
    p, mesh, owner_of, links = CASES[case]
    owner = owner_of(mesh, p)
    caps = np.linspace(0.5, 1.5, p) / np.linspace(0.5, 1.5, p).sum()
    off = _run(p, mesh, owner, "off", kernel, links, caps)
    auto = _run(p, mesh, owner, "auto", kernel, links, caps)
    assert off == auto
    assert all(v[1] > 0 for v in off.values())  # the clocks moved (the test compares something)


def test_the_activity_is_charged_alike():
    """A loop run inside an activity (every category charged to it) is banked with that activity."""
    p, mesh, owner_of, links = CASES["grid-blocks"]
    caps = np.full(p, 1.0 / p)
    off = _run(p, mesh, owner_of(mesh, p), "off", "jacobi", links, caps, activity="balance")
    assert off == _run(p, mesh, owner_of(mesh, p), "auto", "jacobi", links, caps, activity="balance")
    assert all(v[2]["balance"] > 0 for v in off.values())


def test_a_clock_bank_charges_as_the_clocks():
    """ClockBank's compute, charge (all, masked) and wait_until against each VirtualClock's own compute, charge and
    synchronised, on random values: the same bits."""
    rng = np.random.default_rng(11)
    n = 9
    clocks = [VirtualClock(i, n, Links(), float(rng.uniform(1, 3)), float(rng.uniform(0.1, 1))) for i in range(n)]
    for c in clocks:
        c.now = float(rng.uniform(0, 1))
    twins = [VirtualClock(i, n, Links(), c.speed, c.capacity) for i, c in enumerate(clocks)]
    for c, t in zip(clocks, twins):
        t.now = c.now
    bank = ClockBank(twins)
    for _ in range(20):
        work = rng.uniform(-1, 5, n)
        for c, w in zip(clocks, work):
            c.compute(float(w))
        bank.compute(np.array([float(w) / c.rate if w > 0 else 0.0 for w, c in zip(work, clocks)]),
                     np.maximum(work, 0.0))
        d = rng.uniform(0, 1e-3, n)
        for c, x in zip(clocks, d):
            c.charge(float(x), "comm")
        bank.charge(d, "comm")
        latest = float(max(c.now for c in clocks)) * rng.uniform(0.9, 1.1)
        for c in clocks:
            c.synchronised(np.array([latest]), 1e-4)
        bank.wait_until(np.full(n, latest))
        bank.charge(1e-4, "comm")
    bank.store(twins)
    for c, t in zip(clocks, twins):
        assert c.now == t.now and c.totals == t.totals and c.work == t.work
    assert all(c.totals[k] >= 0 for c in clocks for k in CATEGORIES)


def test_only_clocks_without_an_extra_load_in_one_activity_are_banked():
    a, b = VirtualClock(0, 2, Links(), 1.0, 0.5), VirtualClock(1, 2, Links(), 1.0, 0.5)
    assert ClockBank.bankable([a, b])
    with a.activity("balance"):
        assert not ClockBank.bankable([a, b])
        with pytest.raises(ValueError):
            ClockBank([a, b])
    a.load = object()
    assert not ClockBank.bankable([a, b])
