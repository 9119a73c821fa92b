"""The constants of the price list's central work (hermes.balance.central, docs/COSTS.md), measured.

For each central solve a balancer runs on rank 0 — METIS' k-way partitioning, Scotch's remapping, the least-cost
flow's linear program (HiGHS), the minimal flow's sparse solve — the solve is timed on this machine on the study's
kind of input (an nx × nx grid, the quickstart front's weights: cells with 0.1 ≤ x < 0.3 weigh 2; METIS parts of it
for the processor graphs), best of ``--repeat``; this machine's rate of work units (the wall clock's kernel:
:meth:`hermes.runtime.clock.WallClock.compute`, 256 flops of ``np.dot`` per unit) is measured the same way. A
solve's work is its seconds times that rate; each law's coefficients (:data:`hermes.balance.central.LAWS`) are
fitted to the works by non-negative least squares on relative errors, and printed with the law over the measured
work at every size (how well the law follows the solve). ::

    .venv/bin/python -m benchmarks.central_costs [--repeat 3] [--out results/central_costs.json]

Run on a quiet machine; a few minutes.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from benchmarks.realisation_depth import subdomain_model
from hermes.balance.central import LAWS, law_terms
from hermes.balance.flow import minimal_flow
from hermes.balance.potential.mincost import mincost_flow
from hermes.balance.repartition.scotch import scotch_remap
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.runtime.clock import Links, WallClock


def best(fn, repeat: int) -> float:
    """The least wall time of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def unit_rate(repeat: int) -> float:
    """Work units per second of this machine's wall-clock kernel (one processor of capacity 1)."""
    clock = WallClock(0, 1, Links(), 1.0, 1.0)
    units = 2.0e6
    return units / best(lambda: clock.compute(units), repeat)


def front(mesh) -> np.ndarray:
    """The quickstart front's weights at its first phase: 2 on 0.1 ≤ x < 0.3 (x scaled to [0, 1]), else 1."""
    x = mesh.coords[:, 0]
    x = (x - x.min()) / max(float(np.ptp(x)), 1e-300)
    return np.where((x >= 0.1) & (x < 0.3), 2.0, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="results/central_costs.json")
    args = ap.parse_args()
    rate = unit_rate(max(10, args.repeat))  # the kernel is short: the best of more calls
    print(f"this machine: {rate:.4g} work units/s ({rate * WallClock.FLOPS_PER_UNIT / 1e9:.3g} Gflop/s of np.dot)")
    rows = []
    for nx, k in ((250, 64), (500, 256), (1000, 1024), (1000, 4096)):
        mesh = grid(nx, nx)
        w = front(mesh)
        n, nnz = mesh.n_cells, int(mesh.adjncy.size)
        old = np.asarray(metis_partition(mesh.xadj, mesh.adjncy, None, k, seed=0), dtype=np.int64)
        t_metis = best(lambda: metis_partition(mesh.xadj, mesh.adjncy, w, k, seed=0), args.repeat)
        t_scotch = best(lambda: scotch_remap(mesh.xadj, mesh.adjncy, w, old, k, None, seed=0), args.repeat)
        model = subdomain_model(mesh.xadj, mesh.adjncy, old, w, k)
        t_lp = best(lambda: mincost_flow(model), args.repeat)
        t_sparse = best(lambda: minimal_flow(model), args.repeat)
        for name, secs in (("metis", t_metis), ("scotch", t_scotch), ("lp", t_lp), ("sparse", t_sparse)):
            rows.append({"solve": name, "cells": n, "nnz": nnz, "parts": k, "p": model.p, "q": model.q,
                         "seconds": secs, "units": secs * rate})
            print(f"{name:7s} n={n:8d} k={k:5d} q={model.q:6d}  {secs * 1e3:9.2f} ms  {secs * rate:11.4g} units")
    laws = {}
    for name in ("metis", "scotch", "lp", "sparse"):
        mine = [r for r in rows if r["solve"] == name]
        terms = np.array([law_terms(name, n=r["cells"], nnz=r["nnz"], k=r["parts"], p=r["p"], q=r["q"])
                          for r in mine])
        units = np.array([r["units"] for r in mine])
        coef, _ = nnls(terms / units[:, None], np.ones(units.size))  # relative errors
        laws[name] = [float(c) for c in coef]
        fit = terms @ coef
        for r, f in zip(mine, fit):
            r["law_units"] = float(f)
        print(f"law {name}: {LAWS[name][1]}; coefficients {', '.join(f'{c:.4g}' for c in coef)}; law / measured "
              f"{' '.join(f'{f / u:.2f}' for f, u in zip(fit, units))}")
    out = {"machine": platform.node(), "processor": platform.processor() or platform.machine(),
           "unit_rate": rate, "repeat": args.repeat, "rows": rows, "laws": laws,
           "command": "python -m benchmarks.central_costs"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
