"""Hosted processors (hermes.runtime.hosting): wall time and memory of one ``hermes run`` against the processes
hosting it.

Each case is the at-scale experiment of ``benchmarks/scale.py`` (the quickstart on a ``gridNxM`` mesh, a
front of doubled weights crossing it, jacobi kernel, virtual clock) with ``P`` processors run through
``hermes run --processes N`` for each ``N`` asked. Printed per run: the wall seconds of the whole job
(launcher included), its set-up line, the peak of the summed resident memory of every process of the job
(sampled from /proc every 0.2 s), the memory per processor, and whether summary.json (wall-clock fields
left out), phases.csv and partitions.npz are bit-identical to the first run of the same P::

    .venv/bin/python -m benchmarks.hosting --grid 160x120 --ranks 64 --processes 64,2,1 --iterations 200
    .venv/bin/python -m benchmarks.hosting --grid 1000x1000 --ranks 1024 --processes 2 --phases 3 \\
        --iterations 200 --methods pcg

The runs go one after another (never two at once), so the wall seconds compare on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from benchmarks.partition_compare import PeakRSS, finish_job
from benchmarks.scale import scenario
from hermes.interpreter import child_env, python_command

ROOT = Path(__file__).resolve().parents[1]


def run(sc: dict, processes: int, out: Path, timeout: float) -> dict:
    """One ``hermes run`` of ``sc`` on ``processes`` processes: wall seconds, peak RSS, set-up line."""
    spec = out.with_suffix(".yaml")
    spec.write_text(yaml.safe_dump(sc, sort_keys=False))
    cmd = python_command("-m", "hermes", "run", str(spec), "--processes", str(processes), "--no-pictures",
                         "--out", str(out))
    env = child_env({**os.environ, "SCOTCH_PTHREAD_NUMBER": "1"})
    t0 = time.perf_counter()
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True, cwd=ROOT)
    with PeakRSS(job.pid) as peak:
        stdout, stderr = finish_job(job, cmd, timeout)
    wall = time.perf_counter() - t0
    if job.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stderr[-2000:]}")
    setup = next((ln for ln in stdout.splitlines() if ln.startswith("set-up:")), "")
    return {"wall": wall, "rss": peak.bytes, "setup": setup, "out": out}


def results(d: Path) -> tuple:
    summary = json.loads((d / "summary.json").read_text())
    for k in ("wall_seconds", "adapt_wall_seconds", "versions", "complete"):
        summary.pop(k, None)
    parts = np.load(d / "partitions.npz")
    return (json.dumps(summary, sort_keys=True), (d / "phases.csv").read_text(),
            tuple((k, parts[k].tobytes()) for k in sorted(parts.files)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="160x120")
    ap.add_argument("--ranks", default="64", help="processors P, comma-separated")
    ap.add_argument("--processes", default="64,2,1", help="processes N for each P (those ≤ P), comma-separated")
    ap.add_argument("--methods", default="pcg")
    ap.add_argument("--capacities", default="homo", help="homo | table")
    ap.add_argument("--phases", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--keep", help="keep the run directories here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hermes-hosting-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        print("| P | method | N | wall s | peak RSS GiB | MiB per processor | set-up | identical |")
        print("|---|---|---|---|---|---|---|---|")
        for p in (int(x) for x in args.ranks.split(",")):
            for method in args.methods.split(","):
                sc = scenario(f"grid{args.grid}", method, ranks=p, capacities=args.capacities, kind="weights",
                              iterations=args.iterations, phases=args.phases)
                first = None
                for n in (int(x) for x in args.processes.split(",")):
                    if n > p:
                        continue
                    r = run(sc, n, base / f"p{p}-{method}-n{n}", args.timeout)
                    got = results(r["out"])
                    first = first or got
                    same = "—" if got is first else ("yes" if got == first else "NO")
                    print(f"| {p} | {method} | {n} | {r['wall']:.1f} | {r['rss'] / 2**30:.2f} | "
                          f"{r['rss'] / 2**20 / p:.1f} | {r['setup'].removeprefix('set-up: ')} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
