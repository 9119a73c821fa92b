"""How few cells a balancing flow on the subdomain graph can move (issue 10, BENCHMARKS.md "Migration").

Reads a finished run of the scale experiment (its ``partitions.npz``: the owners before phase K and the weights of
phase K) and, on the subdomain graph the phase starts from, computes

- the excess ``E = Σ_i max(0, l_i − l̄_i)`` (capacities from the run's scenario, fair loads ``l̄ = c Σ l``);
- the load-hops ``Σ_k |f_k|`` of three balancing flows: the fewest possible (``mincost_flow`` with uniform costs,
  a linear program: no balancing flow carries less), the least-cost flow of ``mincost`` (edge costs ``w_max / w``,
  ``w`` the common boundary lengths) and the minimal 2-norm flow of the diffusion and potential schemes;
- the bound on the cells any realisation moves when every cell crosses one subdomain boundary:
  ``ceil(fewest load-hops / heaviest cell weight)``;

and, given a METIS scratch-remap run of the same scenario (``--metis``), the cells and weight it moved in the phase.

    .venv/bin/hermes run scenarios/quickstart.yaml --set mesh.grid=160x120 --set processors=64 \\
        --set platform.capacities=homo --set adaptation.phases=3 --set application.iterations=200 \\
        --set output.pictures=false --set balancer.algorithm=metis --out runs/metis64
    .venv/bin/python -m benchmarks.migration_bound runs/metis64 --metis runs/metis64 [--phase 1]

Prints one line per figure. Serial; the linear program takes well under a second at p = 64.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from hermes.api import scenario
from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.potential.mincost import mincost_flow
from hermes.errors import HermesError
from hermes.extraload import CapacitySchedule
from hermes.lifecycle.setup import load_mesh
from hermes.metrics import subdomain_graph


def bound(run: Path, phase: int, metis: Path | None) -> dict[str, float]:
    sc = scenario(run / "scenario.yaml")
    if sc.adaptation.kind != "weights":
        raise ValueError("only weights adaptation: a refined mesh's adjacency is not the scenario's mesh")
    mesh = load_mesh(sc.mesh, sc.resolve)
    parts = np.load(run / "partitions.npz")
    if phase < 1 or f"weight_{phase:03d}" not in parts:
        raise ValueError(f"no phase {phase} in partitions.npz")
    owner = parts[f"owner_{phase - 1:03d}"].astype(np.int64)
    w = parts[f"weight_{phase:03d}"].astype(np.float64)
    p = int(sc.processors)
    caps = CapacitySchedule.from_platform(sc.platform, sc.resolve, p).at(phase)
    loads = np.bincount(owner, weights=w, minlength=p)
    edges, lengths = subdomain_graph(mesh.xadj, mesh.adjncy, owner)
    model = Model.create(p, edges, loads, caps, lengths.astype(np.float64))
    out = {"p": p, "cells": int(w.size), "subdomain edges": int(model.q),
           "imbalance": float(model.imbalance),
           "excess": float(np.maximum(model.loads - model.fair_loads, 0.0).sum()),
           "fewest load-hops (uniform costs)": float(np.abs(mincost_flow(model, cost="hops")).sum()),
           "load-hops of the least-cost flow (boundary costs)": float(np.abs(mincost_flow(model)).sum()),
           "load-hops of the minimal flow": float(np.abs(minimal_flow(model)).sum()),
           "heaviest cell weight": float(w.max())}
    if out["excess"] == 0:
        raise ValueError(f"phase {phase} starts balanced: nothing to move")
    out["hops per unit of excess"] = out["fewest load-hops (uniform costs)"] / out["excess"]
    out["cells moved, at least (one boundary each)"] = math.ceil(out["fewest load-hops (uniform costs)"] / w.max()
                                                                 - 1e-9)
    if metis is not None:
        m = np.load(metis / "partitions.npz")
        moved = m[f"owner_{phase:03d}"] != m[f"owner_{phase - 1:03d}"]
        out["METIS cells moved"] = int(moved.sum())
        out["METIS weight moved"] = float(m[f"weight_{phase:03d}"][moved].sum())
        out["half of METIS's cells"] = out["METIS cells moved"] / 2
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run directory of the experiment (with partitions.npz)")
    ap.add_argument("--phase", type=int, default=1)
    ap.add_argument("--metis", type=Path, help="a METIS scratch-remap run of the same scenario")
    args = ap.parse_args(argv)
    for path in (args.run, args.metis):
        if path is not None and not (path / "partitions.npz").is_file():
            print(f"migration_bound: {path}: no partitions.npz (run with output.partitions: true)", file=sys.stderr)
            return 2
    try:
        figures = bound(args.run, args.phase, args.metis)
    except (ValueError, KeyError, HermesError) as err:
        print(f"migration_bound: {args.run}: {err}", file=sys.stderr)
        return 2
    for key, value in figures.items():
        print(f"{key}: {value:,.0f}" if isinstance(value, int) or float(value).is_integer() else f"{key}: {value:,.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
