"""An experiment of ``experiments/`` through ``hermes compare``, its figures written to a cache of ``results/``.

    python -m benchmarks.experiment thesis --cache results/thesis.json     # experiments/thesis.yaml
    python -m benchmarks.experiment cfd --cache results/cfd.json           # experiments/cfd.yaml

Runs ``hermes compare experiments/<name>.yaml --out runs/<name> --no-report`` (complete runs found there are
kept, as compare does), then writes one row per run: the axis labels, the run's status, the simulated total
time, the final imbalance, the balancing and migration time summed over the phases and the cells that changed
owner. Virtual clock: any machine gives the same figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from benchmarks import cache

ROOT = cache.ROOT


def figures(out: Path) -> dict:
    """The axes and one row per run of the experiment directory ``out`` (as ``hermes compare`` left it)."""
    from hermes.compare import collect
    from hermes.metrics import cells_moved

    plan, rows, _ = collect(out)
    runs = []
    for r in rows:
        s = r["_summary"] or {}
        ph = s.get("phases", [])
        runs.append({"labels": r["_labels"], "status": r["status"], "total_time": s.get("total_time"),
                     "final_imbalance": s.get("final_imbalance"),
                     "balance_time": sum(x["balance_time"] for x in ph) if ph else None,
                     "migrate_time": sum(x["migrate_time"] for x in ph) if ph else None,
                     "cells_moved": sum(int(cells_moved(x) or 0) for x in ph),
                     "clock": s.get("clock")})
    return {"experiment": plan["name"], "description": plan.get("description", ""), "axes": plan["axes"],
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="an experiment of experiments/ (its file's stem)")
    ap.add_argument("--cache", type=Path, required=True, help="the JSON cache to write")
    ap.add_argument("--jobs", type=int, default=1, help="hermes compare --jobs")
    args = ap.parse_args(argv)
    spec = ROOT / "experiments" / f"{args.name}.yaml"
    if not spec.is_file():
        ap.error(f"no experiment {spec}")
    out = ROOT / "runs" / args.name
    hermes = Path(sys.executable).with_name("hermes")
    res = subprocess.run([str(hermes), "compare", str(spec), "--out", str(out), "--no-report", "--quiet",
                          "--jobs", str(args.jobs)], cwd=ROOT)
    if res.returncode != 0:
        return res.returncode
    fig = figures(out)
    bad = [r["labels"] for r in fig["runs"] if r["status"] != "done"]
    if bad:
        print(f"benchmarks.experiment: runs not done: {bad}", file=sys.stderr)
        return 1
    cache.write(args.cache, "experiment", cache.command_line("benchmarks.experiment", argv), fig)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
