"""Every shipped mesh through ``hermes run`` with real refinement, with every balancer (issue 4, "Done means").

One MPI job (the script starts itself under the venv's mpiexec with ``--ranks`` ranks) runs the whole
matrix in-process, one :func:`hermes.lifecycle.driver.run` per pair::

    .venv/bin/python -m benchmarks.refine_all --out runs/refine_all.csv
    .venv/bin/python -m benchmarks.refine_all --meshes lshape --balancers pcg,gda0 --ranks 3
    .venv/bin/python -m benchmarks.refine_all --meshes lshape --ranks 2 --processors 3   # 3 hosted on 2

For each (mesh, balancer) a front crosses the domain for ``--phases`` phases (``adaptation.kind:
refine``, newest-vertex bisection up to ``--max-level``, coarsening behind the front) and the Jacobi
kernel runs. The driver itself checks, every phase, that bisections and merges account exactly for the
cells and the weight, and at the end that the distributed solution equals a serial replay on the same
refined mesh, re-marking every phase serially (``replay_mismatches`` must be 0: the ranks refined and
coarsened exactly what the serial code does). On top of that this script checks, on rank 0, every phase's gathered mesh
(``geometry.npz``): conforming and valid (:func:`hermes.data.refine.conformity_problems`), area
unchanged, and owners covering every cell. A failed check raises, which ends the MPI job.

Prints one line per run and a summary; ``--out`` writes the figures as CSV (atomically).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MESHES = ["grid20x19", "lshape", "stufe", "airfoil", "3elt", "cylinder"]
COLUMNS = ["mesh", "balancer", "cells_initial", "cells_final", "bisections", "merges", "united_cells",
           "max_level", "final_imbalance", "cells_moved", "cell_sends", "jacobi_max_rel_error", "total_time",
           "wall_seconds"]


def scenario(mesh: str, balancer: str, p: int, phases: int, max_level: int, region: dict | None = None) -> dict:
    return {
        "name": f"refine-{mesh}-{balancer}", "processors": p, "seed": 3, "clock": "virtual",
        "mesh": {"file": str(ROOT / "meshes" / f"{mesh}.vtu")},
        "platform": {"capacities": [float(r % 3 + 1) for r in range(p)], "speed": 1.0e5},
        "application": {"kernel": "jacobi", "iterations": 5},
        "adaptation": {"kind": "refine", "phases": phases, "max_level": max_level, "coarsen": True,
                       "region": region or {"kind": "front", "start": 0.15, "speed": 0.3, "width": 0.2}},
        "balancer": {"algorithm": balancer},
        "output": {"pictures": False, "partitions": True},
    }


def check_geometry(out: Path, summary: dict, p: int) -> None:
    """Rank 0: every recorded phase's mesh conforming, valid, of unchanged area, every cell owned."""
    from hermes.data.refine import areas, conformity_problems

    geo, parts = np.load(out / "geometry.npz"), np.load(out / "partitions.npz")
    area0 = None
    for k, ph in enumerate(summary["phases"], start=1):
        pts, tris = geo[f"points_{k:03d}"], geo[f"cell_nodes_{k:03d}"].reshape(-1, 3)
        problems = conformity_problems(pts, tris)
        if problems:
            raise AssertionError(f"{summary['mesh']} / {summary['balancer']} phase {k}: {problems[0]}")
        a = areas(pts, tris)
        if np.any(a <= 0):
            raise AssertionError(f"{summary['mesh']} / {summary['balancer']} phase {k}: a degenerate cell")
        area0 = a.sum() if area0 is None else area0
        if abs(a.sum() / area0 - 1) > 1e-12:
            raise AssertionError(f"{summary['mesh']} / {summary['balancer']} phase {k}: area changed")
        owner = parts[f"owner_{k:03d}"]
        if tris.shape[0] != ph["cells"] or owner.size != ph["cells"] or owner.min() < 0 or owner.max() >= p:
            raise AssertionError(f"{summary['mesh']} / {summary['balancer']} phase {k}: cells or owners lost")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default=",".join(MESHES))
    ap.add_argument("--balancers", default="all", help="comma-separated names, or all")
    ap.add_argument("--phases", type=int, default=3)
    ap.add_argument("--max-level", type=int, default=2)
    ap.add_argument("--indicator", action="store_true", help="mark by the kernel's error indicator, not a front")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--processors", type=int, default=None,
                    help="processors of each run, hosted on the --ranks processes (default: one per rank)")
    ap.add_argument("--out", help="CSV file")
    args = ap.parse_args(argv)
    from hermes.runtime.launch import mpiexec_command, under_mpi_launcher

    if not under_mpi_launcher():
        if args.processors is not None and args.processors < args.ranks:
            ap.error(f"--processors {args.processors}: at least one per process (--ranks {args.ranks})")
        cmd = mpiexec_command(args.ranks, [])
        i = cmd.index("-m", cmd.index("mpi4py") + 1)
        return subprocess.call(cmd[:i] + [str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:])])
    from mpi4py import MPI

    from hermes.balance.registry import mesh_balancers
    from hermes.files import write_csv
    from hermes.runtime.start import start
    from hermes.lifecycle.driver import run
    from hermes.scenario import parse_scenario

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    p = args.processors or comm.Get_size()
    if p < comm.Get_size():  # every rank sees it alike: one line from rank 0, exit 2 on all
        if rank == 0:
            print(f"refine_all: error: --processors {p}: at least one per process ({comm.Get_size()})",
                  file=sys.stderr, flush=True)
        return 2
    names = sorted(mesh_balancers()) if args.balancers == "all" else args.balancers.split(",")
    region = {"kind": "indicator", "threshold": 0.5, "coarsen_threshold": 0.1} if args.indicator else None
    rows = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hermes-refine-all-") as tmp:
        tmp = comm.bcast(tmp, root=0)
        for mesh in args.meshes.split(","):
            for name in names:
                sc = parse_scenario(scenario(mesh, name, p, args.phases, args.max_level, region))
                out = Path(tmp) / f"{mesh}-{name}"
                # rank 0 runs processor 0, whose summary it gets
                s = start(p, lambda c, sc=sc, out=out: run(sc, c, out_dir=out, quiet=True), comm).get(0)
                if rank != 0:
                    continue
                check_geometry(out, s, p)
                if s["replay_mismatches"] != {"refine": 0, "coarsen": 0}:
                    raise AssertionError(f"{mesh} / {name}: the ranks' marking or coarsening differs from the "
                                         f"serial one: {s['replay_mismatches']}")
                row = {"mesh": mesh, "balancer": name, "cells_initial": s["cells_initial"],
                       "cells_final": s["cells_final"], "bisections": s["cells_refined"],
                       "merges": s["cells_coarsened"],
                       "united_cells": sum(ph.get("united_cells", 0) for ph in s["phases"]),
                       "max_level": args.max_level, "final_imbalance": s["final_imbalance"],
                       "cells_moved": s["cells_moved"], "cell_sends": s["cell_sends"],
                       "jacobi_max_rel_error": s["jacobi_max_rel_error"],
                       "total_time": s["total_time"], "wall_seconds": s["wall_seconds"]}
                rows.append(row)
                print(f"{mesh:10s} {name:15s} cells {row['cells_initial']:6d} -> {row['cells_final']:6d}  "
                      f"+{row['bisections']} -{row['merges']} (united {row['united_cells']})  "
                      f"imbalance {row['final_imbalance']:.3f}  jacobi err {row['jacobi_max_rel_error']:.1e}  "
                      f"{row['wall_seconds']:.1f} s", flush=True)
    if rank == 0:
        worst = max(r["jacobi_max_rel_error"] for r in rows)
        print(f"OK: {len(rows)} runs ({len(args.meshes.split(','))} meshes x {len(names)} balancers) on {p} "
              f"processors ({comm.Get_size()} processes), "
              f"all conforming and accounted for, worst Jacobi error {worst:.1e}, "
              f"{time.perf_counter() - t_start:.0f} s")
        if args.out:
            write_csv(args.out, rows, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
