"""Load and run the real third-party meshes of ``../shared/meshes`` (validation; never copied into the repo).

For each mesh (whitaker3 as Matrix Market + coordinate matrix, the hammond2 airfoil as Chaco graph +
``.coords``, four DIMACS10 dynamic frames as Chaco graph + ``.graph.xyz``), the script

1. reads it once in this process with :func:`hermes.data.io.read_mesh` (cells = graph vertices,
   edges, seconds to load);
2. runs ``hermes run`` with ``mesh.file`` = the absolute path on ``--ranks`` MPI ranks for each balancer
   (heterogeneous capacities r mod 4 + 1, a front of doubled weights crossing the domain, virtual
   clock), and reads the final imbalance, the edge cut after the last phase, the migration summed over
   the phases and the wall seconds of the driver (rank 0) from summary.json.

Prints a Markdown table (progress on stderr); ``--out`` also writes it as CSV. If the directory is
absent the script says so and exits with status 0::

    .venv/bin/python -m benchmarks.shared_meshes
    .venv/bin/python -m benchmarks.shared_meshes --meshes hammond2 --balancers pcg --ranks 3 --phases 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from hermes.data.io import read_mesh

from benchmarks.partition_compare import (
    DEFAULT_REGION,
    METHODS,
    capacities,
    markdown_table,
    run_hermes,
    run_row,
    scenario,
    write_csv,
)

__all__ = ["SHARED", "MESH_FILES", "load", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: where the third-party meshes live (next to the project, never inside it)
SHARED = ROOT.parent / "shared" / "meshes"
#: mesh name -> the file hermes reads (its coordinates file is found next to it)
MESH_FILES = {
    "whitaker3": "whitaker3.mtx",
    "hammond2": "hammond2.graph",
    "rotation-00000": "rotation-00000.graph",
    "slowrot-00000": "slowrot-00000.graph",
    "bubbles-00010": "bubbles-00010.graph",
    "trace-00008": "trace-00008.graph",
}
#: the vertex weight hermes balances for a multi-constraint graph (``mesh.constraint``): hammond2's first
#: weight (1 everywhere; the second marks the 211 surface vertices), as the table of docs/DATA.md §3 used
CONSTRAINT = {"hammond2": 1}
COLUMNS = ["mesh", "cells", "edges", "load_seconds", "method", "final_imbalance", "edge_cut", "cells_moved",
           "migration_weight", "cell_sends", "total_time", "wall_seconds", "run_seconds"]
TABLE = [("mesh", "mesh", "{}"), ("cells", "cells", "{:,}"), ("edges", "edges", "{:,}"),
         ("load_seconds", "load (s)", "{:.3f}"), ("method", "balancer", "{}"),
         ("final_imbalance", "imbalance", "{:.3f}"), ("edge_cut", "edge cut", "{:,}"),
         ("cells_moved", "cells moved", "{:,}"), ("migration_weight", "migrated weight", "{:,.0f}"),
         ("wall_seconds", "driver wall (s)", "{:.2f}"), ("run_seconds", "job wall (s)", "{:.2f}")]


def load(path: Path) -> dict[str, Any]:
    """Read a mesh as hermes does (rank 0 at set-up): counts and the seconds it took."""
    t0 = time.perf_counter()
    mesh = read_mesh(path)
    secs = time.perf_counter() - t0
    return {"cells": mesh.n_cells, "edges": mesh.n_edges, "load_seconds": round(secs, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(SHARED), help="the shared meshes directory")
    ap.add_argument("--meshes", default=",".join(MESH_FILES), help=f"comma list of {', '.join(MESH_FILES)}")
    ap.add_argument("--balancers", default="none,pcg+gain,metis,scotch mc=1",
                    help=f"comma list of method labels: {', '.join(METHODS)}")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--phases", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--capacities", default="hcuw", help="homo | hcuw (r mod 4 + 1) | comma list")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--out", help="CSV file to write")
    args = ap.parse_args(argv)

    base = Path(args.dir)
    if not base.is_dir():
        print(f"shared meshes not found at {base}: nothing to run (skipped)")
        return 0
    names = [m.strip() for m in args.meshes.split(",") if m.strip()]
    unknown = [m for m in names if m not in MESH_FILES]
    if unknown:
        raise SystemExit(f"--meshes: unknown {', '.join(unknown)}; valid: {', '.join(MESH_FILES)}")
    methods = [m.strip() for m in args.balancers.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"--balancers: unknown {', '.join(bad)}; valid: {', '.join(METHODS)}")
    caps = capacities(args.capacities, args.ranks)

    print(f"# {args.ranks} ranks, capacities {args.capacities}, {args.phases} phases x {args.iterations} "
          f"iterations, region {DEFAULT_REGION}, factor 2", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for name in names:
        path = base / MESH_FILES[name]
        if not path.is_file():
            print(f"# {name}: {path} is missing (skipped)", file=sys.stderr)
            continue
        info = load(path)
        for method in methods:
            sc = scenario(path, METHODS[method], ranks=args.ranks, phases=args.phases, iterations=args.iterations,
                          caps=caps, region=dict(DEFAULT_REGION))
            if name in CONSTRAINT:
                sc["mesh"]["constraint"] = CONSTRAINT[name]
            summary, secs = run_hermes(sc, timeout=args.timeout)
            if summary["cells_initial"] != info["cells"]:
                raise RuntimeError(f"{name}: hermes run saw {summary['cells_initial']} cells, "
                                   f"read_mesh {info['cells']}")
            row = {"mesh": name, **info, "method": method, **run_row(summary), "run_seconds": round(secs, 2)}
            rows.append(row)
            print(f"{name:15s} {method:14s} imbalance {row['final_imbalance']:.3f} cut {row['edge_cut']:6d} "
                  f"moved {row['cells_moved']:6d}  ({secs:.1f} s)", file=sys.stderr, flush=True)
    print(markdown_table(rows, TABLE))
    if args.out:
        print(f"# wrote {write_csv(rows, args.out, COLUMNS)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
