"""Sync vs async mesh application × balancers × platforms on the virtual clock (issue 14, docs/ASYNC.md).

    .venv/bin/python benchmarks/async_mesh.py [--ranks 8] [--balancers none,pcg,metis] [--platforms homo,hetero,slow]
                                              [--out runs/async-mesh-bench] [--csv FILE]

Each case is ``hermes run scenarios/async-mesh.yaml`` (self-launching under mpiexec, virtual clock, so the figures do
not depend on this machine's load) with ``processors`` set, the platform's capacities and links, the balancer and
``application.mode``. Platforms: ``homo`` (equal capacities, 10⁻⁴ s / 10⁸ B/s links), ``hetero`` (capacities
3:3:2:2:1:1:1:1, same links), ``slow`` (hetero capacities, links of 2·10⁻³ s / 10⁶ B/s). Printed per case, as a
Markdown table: the total virtual time, the balancing time (Σ over the phases of the ranks' mean), the final
imbalance, the global residual of the last sweep (async: ``final_residual`` of the summary; sync: the same sum
recomputed from serial Jacobi, which the sync run equals bit for bit), the max-norm distance of the final u to the
serial *sync* Jacobi of as many sweeps (``jacobi_max_rel_error``) and to the converged solution u* (relative).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "async-mesh.yaml"
HETERO = [3, 3, 2, 2, 1, 1, 1, 1]


def platform(name: str, p: int) -> list[str]:
    caps = "homo" if name == "homo" else "[" + ", ".join(str(HETERO[i % len(HETERO)]) for i in range(p)) + "]"
    out = [f"platform.capacities={caps}", "platform.links=[]"]
    if name == "slow":
        out += ["platform.latency=2.0e-3", "platform.bandwidth=1.0e6"]
    elif name not in ("homo", "hetero"):
        raise SystemExit(f"unknown platform {name!r}: expected homo, hetero or slow")
    return out


def run_case(out: Path, p: int, plat: str, balancer: str, mode: str) -> dict:
    sets = [f"processors={p}", *platform(plat, p), f"balancer.algorithm={balancer}", f"application.mode={mode}",
            "output.vtu=true"]
    cmd = [sys.executable, "-m", "hermes", "run", str(SCENARIO), "--out", str(out), "--quiet", "--no-pictures",
           *(a for s in sets for a in ("--set", s))]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if res.returncode != 0:
        raise SystemExit(f"{out.name}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())


def reference(run_dir: Path):
    """Serial sync Jacobi of the run's sweeps, of one sweep fewer, and u* (3000 sweeps: the iteration contracts
    by ≤ 4/4.5 per sweep in the max norm)."""
    from hermes.app.kernels import jacobi_serial
    from hermes.data.generators import grid
    from hermes.scenario import load_scenario

    sc = load_scenario(run_dir / "scenario.yaml")
    mesh = grid(*(int(v) for v in sc.mesh.grid.lower().split("x")))
    sweeps = sc.adaptation.phases * sc.application.iterations
    args = (mesh.xadj, mesh.adjncy, mesh.coords)
    return jacobi_serial(*args, sweeps), jacobi_serial(*args, sweeps - 1), jacobi_serial(*args, 3000)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--balancers", default="none,pcg,metis")
    ap.add_argument("--platforms", default="homo,hetero,slow")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "async-mesh-bench")
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args(argv)
    rows, refs = [], {}
    for plat in args.platforms.split(","):
        for bal in args.balancers.split(","):
            for mode in ("sync", "async"):
                name = f"{plat}-{bal}-{mode}"
                s = run_case(args.out / name, args.ranks, plat, bal, mode)
                if s["mesh"] not in refs:
                    refs[s["mesh"]] = reference(args.out / name)
                u_k, u_prev, star = refs[s["mesh"]]
                last = len(s["phases"])
                u = np.load(args.out / name / "partitions.npz")[f"u_{last:03d}"]
                residual = s["final_residual"] if mode == "async" else float(np.sum((u_k - u_prev) ** 2))
                rows.append({"platform": plat, "balancer": bal, "mode": mode, "total_time": s["total_time"],
                             "balance_time": sum(ph["balance_time"] for ph in s["phases"]),
                             "final_imbalance": s["final_imbalance"], "final_residual": residual,
                             "dist_sync": s["jacobi_max_rel_error"],
                             "dist_solution": float(np.max(np.abs(u - star)) / np.max(np.abs(star))),
                             "migrated_cells": s["migrated_cells"]})
                print(f"{name}: {rows[-1]['total_time']:.4f} s", file=sys.stderr, flush=True)
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"| platform ({args.ranks} ranks) | balancer | mode | total time (s) | balance (s) | final imbalance | "
          "final residual | dist. to serial sync | dist. to u* | migrated cells |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['platform']} | {r['balancer']} | {r['mode']} | {r['total_time']:.4f} | {r['balance_time']:.4f} | "
              f"{r['final_imbalance']:.3f} | {r['final_residual']:.2e} | {r['dist_sync']:.2e} | "
              f"{r['dist_solution']:.2e} | {r['migrated_cells']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
