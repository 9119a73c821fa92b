"""Grapevine end to end: the Sandia report's gossip balancer (seed 004, §2.1.3: i = k = 10, f = 6, criterion
6′) inside a ``hermes run`` of thousands of processors, its measured iterations beside the report's.

The run is the at-scale experiment (the quickstart's front of doubled weights on an N × M grid,
homogeneous capacities) on ``--ranks`` processors hosted on ``--processes`` MPI processes, one phase:
the application, the adaptation, the monitor, Grapevine on the cells (objects = cells, loads = weights),
the migration and ``--iterations`` jacobi iterations on the balanced mesh. hermes' mesh Grapevine is the
report's algorithm with one constraint of a mesh: a processor keeps one cell (``transfer_turn``'s
``keep=1``). Its per-iteration figures (``balance_info``: I, transfers, rejections of every iteration)
are printed beside the report's Table of §2.1.3 (4,096 ranks, 10⁴ objects on 16 ranks: a different
start, I₀ = 280, the report's own set-up which ``benchmarks/grapevine_report.py`` reproduces offline).

    python -m benchmarks.grapevine_mesh --ranks 4096 --grid 1000x1000 --iterations 10 \\
        --processes 2 --out runs/grapevine-mesh
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from benchmarks.grapevine_report import REPORT_6P
from benchmarks.partition_compare import run_hermes
from hermes.metrics import cell_sends, cells_moved

ROOT = Path(__file__).resolve().parents[1]


def scenario(ranks: int, grid: str, iterations: int, gossip: int, rounds: int, fanout: int) -> dict:
    sc = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    sc["mesh"] = {"grid": grid}
    sc["processors"] = ranks
    sc["platform"]["capacities"] = "homo"
    sc["application"]["iterations"] = iterations
    sc["adaptation"]["phases"] = 1
    sc["balancer"] = {"algorithm": "grapevine", "rounds": 1,
                      "grapevine": {"iterations": gossip, "rounds": rounds, "fanout": fanout,
                                    "criterion": "modified", "transfer": "token"}}
    sc["output"] = {"pictures": False}
    return sc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--grid", default="1000x1000")
    ap.add_argument("--iterations", type=int, default=10, help="jacobi iterations after the balancing")
    ap.add_argument("--gossip", type=int, default=10, help="Grapevine iterations i (the report's 10)")
    ap.add_argument("--rounds", type=int, default=10, help="gossip rounds k (the report's 10)")
    ap.add_argument("--fanout", type=int, default=6, help="fanout f (the report's 6)")
    ap.add_argument("--processes", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=7200.0)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "grapevine-mesh")
    args = ap.parse_args(argv)
    sc = scenario(args.ranks, args.grid, args.iterations, args.gossip, args.rounds, args.fanout)
    name = f"grid{args.grid}_p{args.ranks}_it{args.iterations}_i{args.gossip}k{args.rounds}f{args.fanout}"
    cache = args.out / f"{name}.json"
    if cache.exists():
        rec = json.loads(cache.read_text())
    else:
        measured: dict = {}
        t0 = time.perf_counter()
        summary, seconds = run_hermes(sc, timeout=args.timeout, processes=args.processes, measured=measured)
        rec = {"scenario": sc, "processes": args.processes, "seconds": seconds,
               "peak_rss_gib": measured["peak_rss"] / 2**30, "summary": summary,
               "benchmark_seconds": time.perf_counter() - t0}
        args.out.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1))
        tmp.replace(cache)
    s = rec["summary"]
    print(f"hermes run: {args.ranks} processors, grid {args.grid} ({s['cells_initial']:,} cells), Grapevine i = "
          f"{args.gossip}, k = {args.rounds}, f = {args.fanout}, criterion 6′, then {args.iterations} jacobi "
          f"iterations; wall {s['wall_seconds']:.0f} s (job), peak RSS {rec['peak_rss_gib']:.2f} GiB")
    print(phase_line(rec))
    print()
    print(table(rec))
    return 0


def phase_line(rec: dict) -> str:
    """The balanced phase of a cached run in one line: imbalance, cells moved (distinct cells that changed owner)
    and cell sends, cut, virtual times (a cache written before ``cells_moved``: the quality's alias)."""
    s = rec["summary"]
    ph = s["phases"][0]
    return (f"phase 1: I (L_max/L̄ − 1) {ph['imbalance_before'] - 1:.4g} -> {ph['imbalance_after'] - 1:.4g}, "
            f"moved {cells_moved(ph):,} cells ({cell_sends(ph):,} sends), edge cut {ph['edge_cut']:,}; virtual time: "
            f"total {s['total_time']:.6g} s, balance {ph['balance_time']:.6g} s, migrate {ph['migrate_time']:.6g} s")


def table(rec: dict) -> str:
    """Grapevine's iterations of a cached run beside the report's (§2.1.3), as a Markdown table."""
    info = rec["summary"]["phases"][0]["balance_info"][0]
    imb = [float(v) for v in info["imbalance_by_iteration"].split()]
    tr = [int(v) for v in info["transfers_by_iteration"].split()]
    rj = [int(v) for v in info["rejected_by_iteration"].split()]
    lines = ["| iteration | report: transfers | report: rejections | report: I | hermes: transfers "
             "| hermes: rejections | hermes: I |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for it in range(max(len(REPORT_6P), len(imb))):
        r = REPORT_6P[it] if it < len(REPORT_6P) else (None, None, None)
        h = (tr[it - 1] if 0 < it <= len(tr) else None, rj[it - 1] if 0 < it <= len(rj) else None,
             imb[it] if it < len(imb) else None)
        cells = [str(it)] + ["" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.4g}" for v in (*r, *h)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
