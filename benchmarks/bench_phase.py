"""Benchmark: one adaptation phase with balancing on a 100,000-cell mesh on 8 ranks.

Runs `hermes run` under mpiexec for each balancer on the same scenario, one after the other on this
machine, and prints the wall-clock seconds of the whole run (set-up + 1 phase) and of the
balance + migrate step, measured by hermes itself with the wall clock's categories disabled:
the scenario uses the virtual clock, and the `wall_seconds` field of summary.json is the real
elapsed time of the driver on rank 0. Compare the rows side by side: ratios, not absolute times.

    .venv/bin/python -m benchmarks.bench_phase [--cells-x 400 --cells-y 250 --ranks 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hermes.interpreter import child_env
from hermes.metrics import cell_sends, cells_moved
from hermes.runtime.launch import mpiexec_command


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells-x", type=int, default=400)
    ap.add_argument("--cells-y", type=int, default=250)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--balancers", default="none,pcg,gda0,metis")
    args = ap.parse_args()
    n = args.cells_x * args.cells_y
    print(f"mesh grid {args.cells_x}x{args.cells_y} = {n} cells, {args.ranks} ranks, 1 phase, 5 iterations")
    print(f"{'balancer':10s} {'run wall s':>11s} {'driver s':>9s} {'moved':>9s} {'sends':>9s} {'imb before':>10s} "
          f"{'imb after':>9s}")
    for bal in args.balancers.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            cmd = mpiexec_command(args.ranks, [
                "run", "--no-launch", "--quiet", "--no-pictures", "--out", str(out),
                "--set", f"mesh.grid={args.cells_x}x{args.cells_y}", "--set", f"processors={args.ranks}",
                "--set", "platform.capacities=homo", "--set", "adaptation.phases=1",
                "--set", "application.iterations=5", "--set", "application.kernel=synthetic",
                "--set", "adaptation.region={kind: disc, center: [0.3, 0.3], radius: 0.3}",
                "--set", f"balancer.algorithm={bal}"])
            t = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
            wall = time.perf_counter() - t
            if res.returncode != 0:
                print(res.stderr, file=sys.stderr)
                return 1
            s = json.loads((out / "summary.json").read_text())
            ph = s["phases"][0]
            print(f"{bal:10s} {wall:11.2f} {s['wall_seconds']:9.2f} {cells_moved(ph):9d} {cell_sends(ph):9d} "
                  f"{ph['imbalance_before']:10.3f} {ph['imbalance_after']:9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
