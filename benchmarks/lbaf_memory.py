"""hermes' balancers under LBAF's memory limit on LBAF's own challenging toy data: the table of docs/TRACES.md.

For each data set (LBAF's ``challenging_toy_fewer_tasks``, ``challenging_toy_hundreds_tasks`` and
``user-defined-memory-toy-problem``, under the 8·10⁹ bytes its configurations use), every balancer is replayed on
phase 0 on the full processor graph (``hermes trace replay STEM --graph full --memory-limit 8e9``) with the memory step
off (the balancer's own assignment) and on (``--memory-step refine``: repaired and refined under the limit,
:mod:`hermes.trace.memorybound`), and the figures are printed as a markdown table: max/mean load, the largest
rank memory, the ranks above the limit, the objects moved and the seconds of the step. A second table replays
hermes' port of LBAF's InformAndTransfer (``informandtransfer``, :mod:`hermes.trace.informandtransfer`) with LBAF's
own configuration of each data set (its shipped ``config/*.yaml``; seed 146, LBAF's) and the memory step off,
beside the figures ``benchmarks/lbaf_deterministic.py`` (LBAF with its sets hashed by id) printed on them::

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
#: LBAF's configuration of each data set (config/challenging-toy-fewer-tasks.yaml,
#: config/challenging-toy-hundreds-tasks.yaml, config/user-defined-memory-toy-problem.yaml: Clustering, Tempered)
LBAF_CONFIG = {
    "challenging_toy_fewer_tasks": {"n_iterations": 8, "n_rounds": 4, "fanout": 4, "deterministic_transfer": True,
                                    "max_objects_per_transfer": 100},
    "challenging_toy_hundreds_tasks": {"n_iterations": 4, "n_rounds": 3, "fanout": 4,
                                       "deterministic_transfer": False, "max_objects_per_transfer": 500,
                                       "max_subclusters": 0, "cluster_swap_rtol": 0.05},
    "user-defined-memory-toy-problem": {"n_iterations": 4, "n_rounds": 2, "fanout": 2, "deterministic_transfer": True,
                                        "max_objects_per_transfer": 32},
}
#: what ``LBAF=<LBAF> python -m benchmarks.lbaf_deterministic -c <config>`` printed (LBAF 1.6.0, commit 9615e7ab;
#: toy_mem's config without its visualization block): max work after each iteration, the final imbalance
#: (max/mean − 1) and largest rank memory
HARNESS = {"challenging_toy_fewer_tasks": ("1628 1251 1158 1115 1093 1084 1065 1062", "0.0598141", "7.59003e+09"),
           "challenging_toy_hundreds_tasks": ("202362 172966 168412 168408", "0.68408", "7.59092e+09"),
           "user-defined-memory-toy-problem": ("90 90 90 90", "0.0285714", "7.49001e+09")}


def rows(stem: str, step: str, algorithms: list[str] | None = None,
         params: dict[str, dict] | None = None) -> list[dict]:
    from hermes.trace import read_trace
    from hermes.trace.replay import replay_trace
    from hermes.trace.workmodel import WorkModel

    trace = read_trace(stem, phases="0")
    table = replay_trace(trace, algorithms or ALGORITHMS, params, graph="full",
                         work_model=WorkModel(memory_limit=LIMIT), memory_step=step)
    return table.rows()


def port_lines(data: Path) -> list[str]:
    """The table of ``informandtransfer`` with LBAF's configurations beside the harness's figures."""
    lines = ["", "hermes' port of LBAF's InformAndTransfer (`informandtransfer`, memory step off, seed 146) with "
             "LBAF's configuration of each data set, beside LBAF under `benchmarks/lbaf_deterministic.py` (sets "
             "hashed by id); imbalance is LBAF's max/mean − 1:", "",
             "| data | configuration | max work per iteration: port | LBAF (harness) | imbalance: port | LBAF | "
             "largest rank memory: port | LBAF | ranks above | seconds |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rel in DATA.items():
        cfg = LBAF_CONFIG[name]
        t0 = time.perf_counter()
        r = rows(str(data / rel), "off", ["informandtransfer"], {"informandtransfer": cfg})[0]
        print(f"{name}, informandtransfer: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        text = ", ".join(f"{k} {v}" for k, v in cfg.items())
        works, imb, mem = HARNESS[name]
        lines.append(f"| {name} | {text} | {r['max_work_per_iteration']} | {works} | {r['lbaf_imbalance_after']:.6g} "
                     f"| {imb} | {r['memory_max_after']:.6g} | {mem} | {r['memory_over_after']} | {r['seconds']:.1f} |")
    return lines


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
    lines += port_lines(data)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from hermes.files import write_atomic

        write_atomic(Path(args.out), "# hermes under LBAF's memory limit (benchmarks/lbaf_memory.py)\n\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
