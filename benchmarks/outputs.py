"""Run a fixed set of scenarios and compare their results with another run of the same set.

A refactor proves itself by bit-identical results: every shipped scenario, and the quickstart with every
built-in balancer, must give the same ``summary.json`` and ``phases.csv`` before and after (virtual
clock). Fields that measure real time (``wall_seconds``, ``adapt_wall_seconds``), the library
versions and the run-state flag ``complete`` are left out of the comparison; everything else must match byte for byte once printed.

Usage::

    python -m benchmarks.outputs run OUT_DIR [--only NAME ...]   # every case into OUT_DIR/<case>/
    python -m benchmarks.outputs diff OLD_DIR NEW_DIR             # exit 1 and list the differences

Each case runs through the ``hermes`` command next to this Python (self-launching under mpiexec),
without pictures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from hermes.interpreter import child_env, python_command

ROOT = Path(__file__).resolve().parents[1]
HERMES = python_command("-m", "hermes")
#: the quickstart's balancer matrix: every built-in that runs on 4 heterogeneous ranks
BALANCERS = ("none", "pcg", "gda0", "gda1", "gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit",
             "implicit_watts", "lps", "lpa", "mpa", "ada", "fos", "grapevine", "metis", "scotch", "auto", "chebyshev",
             "mincost")
#: fields that are not results of the simulation (``complete``: the run's state, absent before it was written)
IGNORED = {"wall_seconds", "adapt_wall_seconds", "versions", "complete"}


def cases() -> dict[str, list[str]]:
    out = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        out[path.stem] = [str(path)]
    for b in BALANCERS:
        out[f"quickstart-{b}"] = ["--set", f"balancer.algorithm={b}"]
    for b in ("gda0", "metis", "peel"):
        sel = ["--set", "balancer.selection=peel"] if b == "peel" else ["--set", f"balancer.algorithm={b}"]
        out[f"refine-lshape-{b}"] = [str(ROOT / "scenarios" / "refine-lshape.yaml"), *sel]
    return out


def run(out_dir: Path, only: list[str] | None) -> int:
    failed = 0
    for name, args in cases().items():
        if only and name not in only:
            continue
        dest = out_dir / name
        cmd = [*HERMES, "run", *args, "--out", str(dest), "--quiet", "--no-pictures"]
        t = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        status = "ok" if res.returncode == 0 else f"exit {res.returncode}: {res.stderr.strip().splitlines()[-1:]}"
        failed += res.returncode != 0
        print(f"{name:28s} {time.perf_counter() - t:6.1f} s  {status}", flush=True)
    return 1 if failed else 0


def _clean(obj):
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if k not in IGNORED}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def diff(old: Path, new: Path) -> int:
    bad = 0
    names = sorted({p.name for p in old.iterdir() if p.is_dir()} | {p.name for p in new.iterdir() if p.is_dir()})
    for name in names:
        for f in ("summary.json", "phases.csv"):
            a, b = old / name / f, new / name / f
            if not a.exists() and not b.exists() and f == "phases.csv":
                continue  # a scenario without phases (the Bahi et al. solver) writes none, before and after
            if not a.exists() or not b.exists():
                print(f"{name}/{f}: missing in {'old' if not a.exists() else 'new'}")
                bad += 1
                continue
            if f.endswith(".json"):
                ja, jb = _clean(json.loads(a.read_text())), _clean(json.loads(b.read_text()))
                same = json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
                if not same:
                    keys = sorted(k for k in set(ja) | set(jb) if ja.get(k) != jb.get(k))
                    print(f"{name}/{f}: differs in {keys}")
            else:
                same = a.read_bytes() == b.read_bytes()
                if not same:
                    print(f"{name}/{f}: differs")
            bad += not same
    print(f"{len(names)} cases compared, {bad} files differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--only", nargs="*")
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return run(args.out_dir, args.only)
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
