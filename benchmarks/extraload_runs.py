"""The extra-load scenarios with each monitor source: what the balancer sees, and what it costs (issue 11).

Runs ``scenarios/extra-load.yaml`` (with the Table 10.6 tasks and with configs/extraload-bursty.csv) and
``scenarios/extra-load-congestion.yaml`` (15 ranks, virtual clock, so
any machine prints the same numbers) with ``monitor.source`` = nominal, measured, forecast and oracle, and
without balancing (``balancer.algorithm=none``), and prints a Markdown table: total time, and the mean
forecast error of the normalised capacities over the phases. "probe" is the default without a ``monitor``
section: the balancer sees the capacities a timed probe measures as the phase starts (after the phase's tasks
have started), as hermes did before issue 11.

    python -m benchmarks.extraload_runs [--balancer pcg] [--cache results/extraload.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hermes.interpreter import child_env, python_command


ROOT = Path(__file__).resolve().parents[1]
#: (label, scenario, extra --set): Table 10.6 by tasks, users that come and go, congested links (a path given by
#: --set is relative to the current directory: every run starts in the repository's top)
ROWS = (("extra-load (Table 10.6 by tasks)", "extra-load", []),
        ("extra-load, bursty users", "extra-load", ["extraload.tasks=configs/extraload-bursty.csv"]),
        ("extra-load-congestion", "extra-load-congestion", []))
SOURCES = ("nominal", "measured", "forecast", "oracle")


def run_one(scenario: str, sets: list[str], processes: int | None = None) -> dict:
    """``hermes run`` of a shipped scenario (launching itself; its 15 processors hosted on ``processes`` MPI
    processes, hermes' default when None: the results do not depend on it)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = python_command("-m", "hermes", "run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--quiet",
                              "--no-pictures", "--out", f"{tmp}/r")
        if processes:
            args += ["--processes", str(processes)]
        for s in sets:
            args += ["--set", s]
        res = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=child_env())
        if res.returncode != 0:
            raise SystemExit(f"{scenario} {sets}: {res.stderr.strip().splitlines()[-1:]}")
        return json.loads(Path(f"{tmp}/r/summary.json").read_text())


def mean_error(summary: dict) -> float | None:
    errs = [ph["monitor"]["capacity_forecast_error"] for ph in summary["phases"]
            if ph.get("monitor", {}).get("capacity_forecast_error") is not None]
    return sum(errs) / len(errs) if errs else None


#: the table's columns: (key of a row, heading)
COLUMNS = (("probe", "probe (no monitor section)"), *((s, s) for s in SOURCES), ("none", "none (no balancing)"))


def markdown(rows: list[dict]) -> str:
    """The Markdown table of ``rows`` (as :func:`main` measures them): total time per source, forecast error."""
    lines = ["| scenario | " + " | ".join(h for _, h in COLUMNS) + " | forecast error |",
             "|---" * (len(COLUMNS) + 2) + "|"]
    for r in rows:
        err = "–" if r["forecast_error"] is None else f"{r['forecast_error']:.3f}"
        lines.append(f"| {r['scenario']} | " + " | ".join(f"{r[k]:.1f} s" for k, _ in COLUMNS) + f" | {err} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--balancer", default="pcg")
    ap.add_argument("--processes", type=int, help="MPI processes hosting each run (default: hermes' own)")
    ap.add_argument("--cache", type=Path, help="also write the figures to this JSON cache (results/)")
    a = ap.parse_args(argv)
    rows = []
    for label, scen, sets in ROWS:
        row = {"scenario": label, "balancer": a.balancer}
        row["probe"] = run_one(scen, [*sets, f"balancer.algorithm={a.balancer}", "monitor=null"],
                               a.processes)["total_time"]
        for src in SOURCES:
            s = run_one(scen, [*sets, f"balancer.algorithm={a.balancer}", f"monitor.source={src}"], a.processes)
            row[src] = s["total_time"]
            if src == "forecast":
                row["forecast_error"] = mean_error(s)
        row["none"] = run_one(scen, [*sets, "balancer.algorithm=none"], a.processes)["total_time"]
        rows.append(row)
        print(f"# {label} done", file=sys.stderr, flush=True)
    print(markdown(rows))
    if a.cache:
        from benchmarks import cache

        cache.write(a.cache, "extraload_runs", cache.command_line("benchmarks.extraload_runs", argv), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
