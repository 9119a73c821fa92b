"""Benchmark: the selection strategies realising one balancing flow on a large mesh, side by side.

A structured triangulation (:func:`hermes.data.cfd_meshes.large`, the mesh of ``bench_million.py``)
is partitioned with METIS into ``--parts`` parts on unit weights; then the cells of the disc that
``bench_million.py`` refines (centre (0.3, 0.3), radius 0.25 in coordinates relative to the bounding
box) get weight 4 — one level of refinement there splits each triangle into four —
and the minimal balancing flow of the subdomain graph (:func:`hermes.balance.flow.minimal_flow`,
the PCG balancer's serial oracle, unit link weights, equal capacities) is realised serially by
:func:`hermes.balance.realisation.selection.simulate_realisation` with each strategy: the gain selection before
it was made incremental (``_old_select_gain``, kept here only for this comparison), the current
gain selection, peel and wavefront. All strategies run in the same process one after the other, so
the ratios (to peel) are comparable even on a loaded machine; the absolute seconds are not.

    .venv/bin/python -m benchmarks.bench_selection [--cells 300000] [--parts 8] [--skip-old]

Columns: wall seconds of ``simulate_realisation`` (``select`` s: of the selection calls alone),
ratio to peel, the relative flow deviation ``Σ|realised − f| / Σ|f|`` and the largest deviation of
one edge (``realisation_report``, hop-wise), the edge cut after, the migrated cells and the
imbalance after.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hermes.balance.realisation.selection import gain


def _old_select_gain(dom, outflow, cost, *, max_rounds: int = 10_000):
    """The gain selection as it was before the incremental version (recomputes every gain each round)."""
    me = dom.rank
    dest = np.full(dom.n, me, dtype=np.int64)
    li = dom.local_index
    local_entry = li >= 0
    w = dom.weight
    targets = np.array(sorted(outflow), dtype=np.int64)
    remaining = np.array([float(outflow[q]) for q in targets])
    for _ in range(max_rounds):
        active = remaining > 0
        if not active.any():
            break
        owner = dom.nbr_owner.copy()
        owner[local_entry] = dest[li[local_entry]]
        home = dest == me
        n_home = int(home.sum())
        best_gain = np.full(dom.n, -np.inf)
        best_q = np.full(dom.n, -1, dtype=np.int64)
        for t in np.flatnonzero(active):
            q = int(targets[t])
            touches = np.zeros(dom.n, dtype=bool)
            touches[dom.rows[owner == q]] = True
            cand = np.flatnonzero(touches & home & (0.5 * w <= remaining[t]))
            if cand.size == 0:
                continue
            g = gain(dom, owner, cand, q, cost)
            better = g > best_gain[cand]
            best_gain[cand[better]] = g[better]
            best_q[cand[better]] = t
        moved = 0
        for t in np.flatnonzero(active):  # the old _take_offers
            cand = np.flatnonzero(best_q == t)
            left = n_home - moved
            if cand.size == 0 or left <= 1:
                continue
            cand = cand[np.lexsort((dom.gid[cand], -best_gain[cand]))]
            take = (np.cumsum(w[cand]) - 0.5 * w[cand]) <= remaining[t]
            k = min(int(np.argmin(take)) if not take.all() else take.size, left - 1)
            if k > 0:
                dest[cand[:k]] = targets[t]
                remaining[t] -= float(w[cand[:k]].sum())
                moved += k
        if moved == 0:
            break
    return dest


def _timed(select, clock: list[float]):
    def run(dom, outflow, cost):
        t = time.perf_counter()
        out = select(dom, outflow, cost)
        clock[0] += time.perf_counter() - t
        return out
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=300_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--skip-old", action="store_true", help="leave out the old (slow) gain selection")
    args = ap.parse_args()

    from hermes.balance.flow import minimal_flow
    from hermes.balance.model import Model
    from hermes.balance.realisation.realise import (RealiseOptions, SubdomainFlow, realisation_report,
                                                    simulate_realisation)
    from hermes.balance.realisation.selection import SELECTIONS
    from hermes.data.cfd_meshes import large
    from hermes.data.partition import metis_partition

    t0 = time.perf_counter()
    mesh = large(args.cells)
    xadj, adjncy, coords = mesh.xadj, mesh.adjncy, mesh.coords
    p = args.parts
    owner = metis_partition(xadj, adjncy, np.ones(mesh.n_cells), p, seed=0)
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    rel = (coords[:, :2] - lo[:2]) / (hi[:2] - lo[:2])  # the disc of bench_million.py, relative coordinates
    weights = np.where(((rel - 0.3) ** 2).sum(axis=1) <= 0.25 ** 2, 4.0, 1.0)
    rows = np.repeat(np.arange(mesh.n_cells), np.diff(xadj))
    cut = owner[rows] != owner[adjncy]
    pairs = np.unique(np.sort(np.column_stack([owner[rows][cut], owner[adjncy][cut]]), axis=1), axis=0)
    model = Model.create(p, pairs, np.bincount(owner, weights=weights, minlength=p), np.ones(p))
    flow = minimal_flow(model)
    print(f"{mesh.n_cells:,} cells, {p} parts, {len(model.edges)} subdomain edges, "
          f"Σ|f| = {np.abs(flow).sum():,.0f}; set-up {time.perf_counter() - t0:.1f} s")

    runs = [] if args.skip_old else [("gain (old, per-round recompute)", _old_select_gain)]
    runs += [(name, SELECTIONS[name]) for name in ("gain", "peel", "wavefront")]
    results, dests = {}, {}
    for name, select in runs:
        clock = [0.0]
        t = time.perf_counter()
        after, hop = simulate_realisation(xadj, adjncy, coords, weights, owner, SubdomainFlow(model.edges, flow),
                                          RealiseOptions(_timed(select, clock)))
        results[name] = (time.perf_counter() - t, clock[0],
                         realisation_report(xadj, adjncy, owner, after, weights, SubdomainFlow(model.edges, flow),
                                            realised=hop))
        dests[name] = after
        print(f"  {name}: {results[name][0]:.2f} s", flush=True)

    base = results["peel"][0]
    print("\n| selection | seconds | select s | ratio to peel | flow deviation | max edge deviation "
          "| edge cut | cells moved | imbalance |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (dt, sel, r) in results.items():  # realisation_report's migrated_cells: cells whose owner changed
        print(f"| {name} | {dt:.2f} | {sel:.2f} | {dt / base:.2f} | {r['relative_deviation']:.2e} "
              f"| {r['max_deviation']:.1f} | {r['edge_cut_before']:,} → {r['edge_cut_after']:,} "
              f"| {r['migrated_cells']:,} | {r['imbalance_before']:.3f} → {r['imbalance_after']:.4f} |")
    if not args.skip_old:
        old = dests["gain (old, per-round recompute)"]
        print(f"\ncells whose final owner differs between the old and the new gain selection: "
              f"{int((old != dests['gain']).sum()):,} of {mesh.n_cells:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
