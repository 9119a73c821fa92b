"""hermes' figures of a trace in the form LBAF prints them, to set side by side with LBAF's own output.

For every phase of the trace (``--phase`` as ``hermes trace replay``'s) and the trace's own assignment, prints the
descriptive statistics LBAF prints for its "initial" state — rank load, inter-rank sent volumes (per pair of
ranks, the larger direction), rank work under the affine model, rank maximum memory usage, rank shared memory
— as cardinality, sum, imbalance (max/mean − 1), minimum, average, maximum, formatted ``.6g`` as LBAF does, and
LBAF's two edge lines (inter-rank communication edges; rank-local volume of the total). docs/TRACES.md records
them beside LBAF's for the same files::

    .venv/bin/python -m benchmarks.lbaf_figures <LBAF>/data/nolb-8color-16nodes-data/data --phase 1 --beta 1
    .venv/bin/python -m benchmarks.lbaf_figures <LBAF>/data/synthetic-blocks/synthetic-dataset-blocks \\
        --ranks-per-node 2
"""

from __future__ import annotations

import argparse

import numpy as np

from hermes.trace import read_trace
from hermes.trace.workmodel import WorkModel, rank_figures


def stats(name: str, x: np.ndarray) -> str:
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return f"{name}: cardinality 0"
    mean = x.mean()
    imb = x.max() / mean - 1 if mean > 0 else float("nan")
    return (f"{name}: cardinality {x.size} sum {x.sum():.6g} imbalance {imb:.6g} minimum {x.min():.6g} "
            f"average {mean:.6g} maximum {x.max():.6g}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stem")
    ap.add_argument("--phase", default="all")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--gamma", type=float, default=0.0)
    ap.add_argument("--delta", type=float, default=0.0)
    ap.add_argument("--ranks-per-node", type=int, default=1, help="LBAF's ranks_per_node: node memory sums")
    args = ap.parse_args(argv)
    trace = read_trace(args.stem, phases=args.phase)
    wm = WorkModel(args.alpha, args.beta, args.gamma, args.delta)
    print(f"{args.stem}: {trace.n_ranks} ranks, phases {trace.phase_ids}, work model α {wm.alpha} β {wm.beta} "
          f"γ {wm.gamma} δ {wm.delta}")
    for ph in trace.phases:
        f = rank_figures(ph, ph.ranks, wm)
        p = ph.n_ranks
        print(f"phase {ph.phase} ({ph.n_tasks} tasks, {ph.comm_from.size} object communications)")
        print("  " + stats("rank load", f.load))
        total = f.local_volume + f.offrank_volume
        print(f"  inter-rank communication edges: {f.pair_volumes.size} amongst {p * (p - 1) // 2} possible ones")
        print(f"  rank-local communication volume: {f.local_volume:.6g} amongst {total:.6g} total volume")
        print("  " + stats("inter-rank sent volumes", f.pair_volumes))
        print("  " + stats("rank work", f.work))
        print("  " + stats("rank maximum memory usage", f.memory))
        print("  " + stats("rank shared memory", f.shared))
        if args.ranks_per_node > 1:
            nodes = np.bincount(np.arange(p) // args.ranks_per_node, weights=f.memory)
            print("  " + stats("node maximum memory usage", nodes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
