"""Reproduce the shape of thesis Tables 10.5 and 10.7 on the grid20x19 mesh (15 ranks, 7 phases).

Prints a Markdown table of the simulated total time (virtual clock, seconds) and the final imbalance
for each balancer on the homogeneous and heterogeneous (Table 10.6 capacities) scenarios.

    .venv/bin/python -m benchmarks.thesis_tables [--all]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hermes.runtime.launch import mpiexec_command

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = [("No DLB", ["balancer.algorithm=none"]), ("GDA1", ["balancer.algorithm=gda1"]),
           ("GDA0", ["balancer.algorithm=gda0"]), ("PCG", ["balancer.algorithm=pcg"]),
           ("METIS equal", ["balancer.algorithm=metis", "balancer.targets=equal"]),
           ("METIS fair", ["balancer.algorithm=metis", "balancer.targets=fair"])]


def main() -> int:
    import sys as _sys

    if "--all" in _sys.argv:  # every balancer of the registry, one column each
        from hermes.balance.registry import mesh_balancers

        COLUMNS[:] = [(n, [f"balancer.algorithm={n}"]) for n in sorted(mesh_balancers())]
    print("| scenario | " + " | ".join(c for c, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for scen in ("thesis-homogeneous", "thesis-heterogeneous"):
        cells = []
        for _, sets in COLUMNS:
            with tempfile.TemporaryDirectory() as tmp:
                args = ["run", str(ROOT / "scenarios" / f"{scen}.yaml"), "--no-launch", "--quiet", "--no-pictures",
                        "--out", f"{tmp}/r"]
                for s in sets:
                    args += ["--set", s]
                res = subprocess.run(mpiexec_command(15, args), capture_output=True, text=True)
                if res.returncode != 0:
                    print(res.stderr, file=sys.stderr)
                    return 1
                s = json.loads(Path(f"{tmp}/r/summary.json").read_text())
                cells.append(f"{s['total_time']:.1f} s ({s['final_imbalance']:.2f})")
        print(f"| {scen} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
