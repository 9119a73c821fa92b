"""hermes' balancers under LBAF's memory limit on LBAF's own challenging toy data: the table of docs/TRACES.md.

For each data set (LBAF's ``challenging_toy_fewer_tasks``, ``challenging_toy_hundreds_tasks`` and
``user-defined-memory-toy-problem``, under the 8·10⁹ bytes its configurations use), every balancer is replayed on
phase 0 on the full processor graph (``hermes replay STEM --graph full --memory-limit 8e9``) with the memory step
off (the balancer's own assignment) and on (``--memory-step refine``: repaired and refined under the limit,
:mod:`hermes.trace.memorybound`), and the figures are printed as a markdown table: max/mean load, the largest
rank memory, the ranks above the limit, the objects moved and the seconds of the step::

    .venv/bin/python -m benchmarks.lbaf_memory <LBAF checkout> [--out results/lbaf_memory.md]

LBAF's own figures are not computed here (LBAF runs in its own environment: docs/design/informandtransfer.md §4);
docs/TRACES.md sets them beside this table with the commands that printed them.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

DATA = {"challenging_toy_fewer_tasks": "challenging_toy_fewer_tasks/toy",
        "challenging_toy_hundreds_tasks": "challenging_toy_hundreds_tasks/toy",
        "user-defined-memory-toy-problem": "user-defined-memory-toy-problem/toy_mem"}
ALGORITHMS = ["pcg", "chebyshev", "mincost", "grapevine", "metis", "scotch"]
LIMIT = 8e9


def rows(stem: str, step: str) -> list[dict]:
    from hermes.trace import read_trace
    from hermes.trace.replay import replay_trace
    from hermes.trace.workmodel import WorkModel

    trace = read_trace(stem, phases="0")
    table = replay_trace(trace, ALGORITHMS, graph="full", work_model=WorkModel(memory_limit=LIMIT), memory_step=step)
    return table.rows()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lbaf", help="a checkout of DARMA-tasking/LB-analysis-framework (its data/ is read)")
    ap.add_argument("--out", help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    data = Path(args.lbaf) / "data"
    if not data.is_dir():
        print(f"lbaf_memory: no data/ under {args.lbaf!r} (give an LBAF checkout)", file=sys.stderr)
        return 2
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    lines = [f"hermes commit {commit}, {platform.node()}, Python {platform.python_version()}; "
             f"`python -m benchmarks.lbaf_memory <LBAF>`; memory limit {LIMIT:g} bytes, phase 0, graph full", "",
             "| data | balancer | memory step | max/mean load | largest rank memory | ranks above | objects moved "
             "| seconds |", "|---|---|---|---|---|---|---|---|"]
    for name, rel in DATA.items():
        for step in ("off", "refine"):
            t0 = time.perf_counter()
            got = rows(str(data / rel), step)
            for r in got:
                lines.append(f"| {name} | {r['algorithm']} | {step} | {r['imbalance_after']:.5f} | "
                             f"{r['memory_max_after']:.5g} | {r['memory_over_after']} | {r['objects_moved']} | "
                             f"{r['seconds']:.1f} |")
            print(f"{name}, memory step {step}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        lines.append(f"| {name} | (trace) | | {got[0]['imbalance_before']:.5f} | {got[0]['memory_max_before']:.5g} | "
                     f"{got[0]['memory_over_before']} | | |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from hermes.files import write_atomic

        write_atomic(Path(args.out), "# hermes under LBAF's memory limit (benchmarks/lbaf_memory.py)\n\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
