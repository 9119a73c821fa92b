"""The extra-load scenarios with each monitor source: what the balancer sees, and what it costs (issue 11).

Runs ``scenarios/extra-load.yaml`` (with the Table 10.6 tasks and with configs/extraload-bursty.csv) and
``scenarios/extra-load-congestion.yaml`` (15 ranks, virtual clock, so
any machine prints the same numbers) with ``monitor.source`` = nominal, measured, forecast and oracle, and
without balancing (``balancer.algorithm=none``), and prints a Markdown table: total time, and the mean
forecast error of the normalised capacities over the phases. "probe" is the default without a ``monitor``
section: the balancer sees the capacities a timed probe measures as the phase starts (after the phase's tasks
have started), as hermes did before issue 11.

    .venv/bin/python benchmarks/extraload_runs.py [--balancer pcg]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hermes.launch import mpiexec_command

ROOT = Path(__file__).resolve().parents[1]
#: (label, scenario, extra --set): Table 10.6 by tasks, users that come and go, congested links
ROWS = (("extra-load (Table 10.6 by tasks)", "extra-load", []),
        ("extra-load, bursty users", "extra-load", ["extraload.tasks=../configs/extraload-bursty.csv"]),
        ("extra-load-congestion", "extra-load-congestion", []))
SOURCES = ("nominal", "measured", "forecast", "oracle")


def run_one(scenario: str, sets: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--no-launch", "--quiet", "--no-pictures",
                "--out", f"{tmp}/r"]
        for s in sets:
            args += ["--set", s]
        res = subprocess.run(mpiexec_command(15, args), capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"{scenario} {sets}: {res.stderr.strip().splitlines()[-1:]}")
        return json.loads(Path(f"{tmp}/r/summary.json").read_text())


def mean_error(summary: dict) -> str:
    errs = [ph["monitor"]["capacity_forecast_error"] for ph in summary["phases"]
            if ph.get("monitor", {}).get("capacity_forecast_error") is not None]
    return f"{sum(errs) / len(errs):.3f}" if errs else "–"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--balancer", default="pcg")
    a = ap.parse_args()
    cols = ["probe (no monitor section)", *SOURCES, "none (no balancing)"]
    print("| scenario | " + " | ".join(cols) + " | forecast error |")
    print("|---" * (len(cols) + 2) + "|")
    for label, scen, sets in ROWS:
        cells, err = [], "–"
        s = run_one(scen, [*sets, f"balancer.algorithm={a.balancer}", "monitor=null"])
        cells.append(f"{s['total_time']:.1f} s")
        for src in SOURCES:
            s = run_one(scen, [*sets, f"balancer.algorithm={a.balancer}", f"monitor.source={src}"])
            cells.append(f"{s['total_time']:.1f} s")
            if src == "forecast":
                err = mean_error(s)
        s = run_one(scen, [*sets, "balancer.algorithm=none"])
        cells.append(f"{s['total_time']:.1f} s")
        print(f"| {label} | " + " | ".join(cells) + f" | {err} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
