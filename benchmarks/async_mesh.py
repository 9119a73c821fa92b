"""Sync vs async mesh application × balancers × platforms on the virtual clock (issue 14, docs/ASYNC.md).

    .venv/bin/python -m benchmarks.async_mesh [--ranks 8] [--balancers none,pcg,metis] [--platforms homo,hetero,slow]
                                              [--work-per-weight 10] [--iterations 20] [--modes sync,async]
                                              [--out runs/async-mesh-bench] [--csv FILE]

Each case is ``hermes run scenarios/async-mesh.yaml`` (self-launching under mpiexec; virtual clock, so the figures
do not depend on this machine's load) with ``processors``, the platform, the balancer, ``application.mode``,
``application.work_per_weight`` and ``application.iterations`` set. Platforms: ``homo`` (equal capacities,
10⁻⁴ s / 10⁸ B/s links), ``hetero`` (capacities 3:3:2:2:1:1:1:1 shifted by two ranks every phase — a
``platform.schedule``, so the fast processors change between phases as in thesis Table 10.6 —, the same links),
``slow`` (``hetero`` on links of 2·10⁻³ s / 10⁶ B/s). Printed per case, as a Markdown table: the total virtual
time, the balancing time (Σ over the phases of the ranks' mean), the final imbalance, the global residual of the
last sweep (async: ``final_residual`` of the summary; sync: the same sum recomputed from serial Jacobi, which the
sync run equals bit for bit), the max-norm distance of the final u to the serial *sync* Jacobi of as many sweeps
(``jacobi_max_rel_error``) and to the converged solution u* (relative), and how many sync sweeps the result is
worth (the fewest serial sweeps from 0 that come as close to u*)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from hermes.interpreter import child_env, python_command
from hermes.metrics import cell_sends

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "async-mesh.yaml"
HETERO = [3, 3, 2, 2, 1, 1, 1, 1]
PHASES = 4  # scenarios/async-mesh.yaml


def platform(name: str, p: int, phases: int) -> list[str]:
    """``--set`` items of a platform: ``homo``, or capacities 3:3:2:2:1:1:1:1 rolled by two ranks each phase
    (``hetero``: the fast processors change between phases, as in thesis Table 10.6), on slow links (``slow``)."""
    if name == "homo":
        return ["platform.capacities=homo", "platform.links=[]"]
    if name not in ("hetero", "slow"):
        raise SystemExit(f"unknown platform {name!r}: expected homo, hetero or slow")
    rows = [[HETERO[(i + 2 * k) % len(HETERO)] for i in range(p)] for k in range(phases)]
    out = ["platform.capacities=homo", "platform.links=[]", "platform.schedule=" + json.dumps(rows)]
    if name == "slow":
        out += ["platform.latency=2.0e-3", "platform.bandwidth=1.0e6"]
    return out


def run_case(out: Path, p: int, plat: str, balancer: str, mode: str, work_per_weight: float,
             iterations: int) -> dict:
    sets = [f"processors={p}", *platform(plat, p, PHASES), f"balancer.algorithm={balancer}",
            f"application.mode={mode}", f"application.work_per_weight={work_per_weight}",
            f"application.iterations={iterations}", "output.vtu=true"]
    cmd = python_command("-m", "hermes", "run", str(SCENARIO), "--out", str(out), "--quiet", "--no-pictures",
                         *(a for s in sets for a in ("--set", s)))
    env = child_env({**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if res.returncode != 0:
        raise SystemExit(f"{out.name}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())


def reference(run_dir: Path):
    """From serial sync Jacobi: the run's sweeps K, its last-sweep residual Σ(u_K − u_{K−1})², u* (3000 sweeps: the
    iteration contracts by ≤ 4/4.5 per sweep in the max norm) and the distance ‖u* − u_n‖∞ after n = 0…K sweeps."""
    from hermes.app.mesh.kernels import jacobi_serial, jacobi_sweeps, source_term
    from hermes.data.generators import grid
    from hermes.scenario import load_scenario

    sc = load_scenario(run_dir / "scenario.yaml")
    mesh = grid(*(int(v) for v in sc.mesh.grid.lower().split("x")))
    sweeps = sc.adaptation.phases * sc.application.iterations
    star = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 3000)
    f, u, dist = source_term(mesh.coords), np.zeros(mesh.n_cells), [float(np.max(np.abs(star)))]
    for _ in range(sweeps):
        prev, u = u, jacobi_sweeps(mesh.xadj, mesh.adjncy, f, u, 1)
        dist.append(float(np.max(np.abs(star - u))))
    return sweeps, float(np.sum((u - prev) ** 2)), star, np.array(dist)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--balancers", default="none,pcg,metis")
    ap.add_argument("--platforms", default="homo,hetero,slow")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "async-mesh-bench")
    ap.add_argument("--csv", type=Path)
    ap.add_argument("--work-per-weight", type=float, default=10.0)
    ap.add_argument("--iterations", type=int, default=20, help="sweeps per phase")
    ap.add_argument("--modes", default="sync,async")
    args = ap.parse_args(argv)
    rows, refs = [], {}
    for plat in args.platforms.split(","):
        for bal in args.balancers.split(","):
            for mode in args.modes.split(","):
                name = f"{plat}-{bal}-{mode}"
                s = run_case(args.out / name, args.ranks, plat, bal, mode, args.work_per_weight, args.iterations)
                if s["mesh"] not in refs:
                    refs[s["mesh"]] = reference(args.out / name)
                sweeps, sync_residual, star, dist = refs[s["mesh"]]
                u = np.load(args.out / name / "partitions.npz")[f"u_{len(s['phases']):03d}"]
                d = float(np.max(np.abs(u - star)))
                rows.append({"platform": plat, "balancer": bal, "mode": mode, "total_time": s["total_time"],
                             "balance_time": sum(ph["balance_time"] for ph in s["phases"]),
                             "final_imbalance": s["final_imbalance"],
                             "final_residual": s["final_residual"] if mode == "async" else sync_residual,
                             "dist_sync": s["jacobi_max_rel_error"], "dist_solution": d / float(np.max(np.abs(star))),
                             # how many sync sweeps the result is worth: the fewest whose distance to u* is ≤ d
                             "sync_sweeps_equal": int(np.flatnonzero(dist <= d)[0]) if np.any(dist <= d) else -1,
                             "sweeps": sweeps, "cell_sends": cell_sends(s)})
                print(f"{name}: {rows[-1]['total_time']:.4f} s", file=sys.stderr, flush=True)
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"| platform ({args.ranks} ranks) | balancer | mode | total time (s) | balance (s) | final imbalance | "
          "final residual | dist. to serial sync | dist. to u* | worth sync sweeps | cell sends |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['platform']} | {r['balancer']} | {r['mode']} | {r['total_time']:.4f} | {r['balance_time']:.4f} | "
              f"{r['final_imbalance']:.3f} | {r['final_residual']:.2e} | {r['dist_sync']:.2e} | "
              f"{r['dist_solution']:.2e} | {r['sync_sweeps_equal']} of {r['sweeps']} | {r['cell_sends']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
