"""Several vertex weights at once (``mesh.constraint: all``) on the shared two-weight hammond2 graph: the table of
docs/DATA.md "Several weights at once".

hammond2 (Zoltan's test data, ``../shared/meshes/hammond2.graph``: 4,362 vertices, a load of 1 each and a second
weight of 1 on the 211 surface vertices, 0 elsewhere) on 8 homogeneous processors, the adaptation multiplying the
load by 3 in a front crossing the domain (the second weight is carried, never changed), 4 phases; for each
balancer one real run (``hermes run``, 8 processors on the MPI processes hermes chooses) and, per phase, the
load's and the second weight's imbalance at the phase's end (``imbalance_per_constraint``), the repair's passes and
the cells it moved::

    .venv/bin/python -m benchmarks.constraints [--meshes ../shared/meshes] [--out results/constraints.md]

The same runs with ``--set mesh.constraint=1`` (the load alone, the second weight ignored) are printed beside, to
show what balancing one weight leaves of the other.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BALANCERS = ["metis", "pcg", "chebyshev", "fos", "grapevine"]
SCENARIO = """name: hammond2-two-weights
processors: 8
seed: 1
mesh: {{file: {graph}, constraint: {constraint}}}
adaptation:
  phases: 4
  factor: 3.0
  region: {{kind: front, start: 0.1, speed: 0.25, width: 0.2}}
balancer: {{algorithm: {algorithm}}}
"""


def run(graph: Path, algorithm: str, constraint: str, work: Path) -> dict:
    sc = work / f"{algorithm}-{constraint}.yaml"
    sc.write_text(SCENARIO.format(graph=graph, algorithm=algorithm, constraint=constraint))
    out = work / f"{algorithm}-{constraint}"
    from hermes.interpreter import child_env, python_command

    res = subprocess.run(python_command("-m", "hermes", "run", str(sc), "--out", str(out), "--quiet", "--no-pictures"),
                         capture_output=True, text=True, cwd=ROOT, timeout=1800, env=child_env(path=[ROOT]))
    if res.returncode != 0:
        raise SystemExit(f"constraints: {algorithm} ({constraint}) failed: {res.stderr.strip()}")
    return json.loads((out / "summary.json").read_text())


def second_weight(out_summary: dict, graph: Path, work: Path, algorithm: str) -> list[float]:
    """The second weight's imbalance per phase of a run that balanced the load alone (from its partitions)."""
    import numpy as np

    from hermes.data.io import read_mesh

    extra = np.asarray(read_mesh(graph).meta["vertex_weights_extra"])[:, 0]
    parts = np.load(work / f"{algorithm}-1" / "partitions.npz")
    p = int(out_summary["processors"])
    out = []
    for ph in out_summary["phases"]:
        own = parts[f"owner_{int(ph['phase']):03d}"]
        sums = np.bincount(own, extra, minlength=p)
        out.append(float(sums.max() / sums.mean()))
    return out


def cuts(summary: dict) -> str:
    return " ".join(str(ph["edge_cut"]) for ph in summary["phases"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meshes", default=str(ROOT.parent / "shared" / "meshes"), help="the shared meshes directory")
    ap.add_argument("--out", help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    graph = Path(args.meshes).resolve() / "hammond2.graph"
    if not graph.is_file():
        print(f"constraints: no hammond2.graph under {args.meshes!r}", file=sys.stderr)
        return 2
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    lines = [f"hermes commit {commit}, {platform.node()}, Python {platform.python_version()}; "
             f"`python -m benchmarks.constraints`; hammond2, 8 homogeneous processors, 4 phases, front ×3", "",
             "| balancer | mesh.constraint | load's imbalance per phase | second weight's per phase | second weight's "
             "before the repair | repair passes | cells the repair moved | edge cut per phase |",
             "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for algorithm in BALANCERS:
            s = run(graph, algorithm, "all", work)
            per = [ph["imbalance_per_constraint"] for ph in s["phases"]]
            rep = [ph.get("constraint_repair", {}) for ph in s["phases"]]
            before = " ".join(f"{r['imbalance_before'][1]:.4f}" for r in rep)
            lines.append(f"| {algorithm} | all | {' '.join(f'{v[0]:.4f}' for v in per)} | "
                         f"{' '.join(f'{v[1]:.4f}' for v in per)} | "
                         f"{before} | "
                         f"{' '.join(str(r.get('passes', 0)) for r in rep)} "
                         f"| {sum(int(r.get('cells', 0)) for r in rep)} | {cuts(s)} |")
            print(lines[-1], flush=True)
            one = run(graph, algorithm, "1", work)
            loads = " ".join(f"{ph['imbalance_after']:.4f}" for ph in one["phases"])
            lines.append(f"| {algorithm} | 1 | {loads} | "
                         f"{' '.join(f'{v:.4f}' for v in second_weight(one, graph, work, algorithm))} | – | – | – "
                         f"| {cuts(one)} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        from hermes.files import write_atomic

        write_atomic(Path(args.out), "# Several weights at once on hammond2 (benchmarks/constraints.py)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
