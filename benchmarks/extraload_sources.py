"""Which monitor source serves a balancer best under extra load? A fluid study without MPI or a mesh.

The application is idealised: each phase has a total work ``W_k`` that a perfect balancer divides in
proportion to the capacities the chosen source gives (``nominal``, ``measured``, ``forecast`` or
``oracle``); every processor computes its share in ``iterations`` chunks with a barrier after each (thesis
Alg. 2 without messages), through the extra-load model of :mod:`hermes.extraload.sharing`. After each
phase the monitor records the rate every processor achieved (work / compute seconds) and forecasts the
next one. Phase 1 starts from a start-up probe. The study isolates what the monitor contributes; the
real runs (driver, mesh, diffusion balancers, migration cost) come with the driver integration.

    python -m benchmarks.extraload_sources [--tasks configs/extraload-bursty.csv] [--phases 7]
    python -m benchmarks.extraload_sources --tasks configs/extraload-bursty.csv \
        --tasks configs/extraload-table-10.6.yaml --cache results/extraload-sources.json

One table per ``--tasks`` file (repeatable; default the bursty users of ``configs/extraload-bursty.csv``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from hermes.runtime.clock import Links
from hermes.extraload.sharing import make_loads
from hermes.extraload.tasks import check_tasks, load_tasks
from hermes.monitor.oracle import equal_finish
from hermes.monitor.series import Monitor

ROOT = Path(__file__).resolve().parents[1]


def run(tasks, source: str, *, p: int, rate: float, works, iterations: int, forecaster: str = "adaptive_mse",
        probe: float = 10.0):
    """Total time and per-phase (time, forecast error) for one source."""
    links = Links()
    loads = make_loads(tasks, p, links, np.full(p, rate))
    mon = Monitor(p, source=source, forecaster=forecaster)
    nominal = np.full(p, rate)
    t = 0.0
    mon.observe([probe / m.compute(t, probe) for m in loads])  # start-up probe: each rank, 10 units
    t = max(m.t for m in loads)
    rows = []
    for k, W in enumerate(works, start=1):
        for m in loads:
            m.begin_phase(k, t)
        oracle = None
        if source == "oracle":
            oracle = equal_finish(lambda h: np.array([m.available_work(t, t + h) for m in loads]), W,
                                  guess=W / nominal.sum())[1] * nominal.sum()
        caps = mon.view(nominal, 1.0, oracle_rates=oracle).capacities
        t0 = t
        busy = np.zeros(p)
        for _ in range(iterations):
            d = np.array([m.compute(t, W * c / iterations) for m, c in zip(loads, caps)])
            busy += d
            t = t + d.max()
        rates = W * caps / busy
        obs = mon.observe(rates)
        rows.append((t - t0, obs.capacity_error))
    return t, rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", action="append", help="a tasks file (repeatable; default configs/extraload-bursty.csv)")
    ap.add_argument("--processors", type=int, default=15)
    ap.add_argument("--phases", type=int, default=7)
    ap.add_argument("--rate", type=float, default=1.0e4, help="work units / s of a processor alone")
    ap.add_argument("--work", type=float, default=1.5e6, help="work of phase 1 (all processors)")
    ap.add_argument("--growth", type=float, default=1.25, help="work factor per phase")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--forecaster", default="adaptive_mse")
    ap.add_argument("--cache", type=Path, help="also write the figures to this JSON cache (results/)")
    a = ap.parse_args(argv)
    works = [a.work * a.growth ** k for k in range(a.phases)]
    studies = []
    for path in a.tasks or [str(ROOT / "configs" / "extraload-bursty.csv")]:
        tasks = load_tasks(path)
        check_tasks(tasks, a.processors)
        print(f"tasks {path}, {a.processors} processors, {a.phases} phases, forecaster {a.forecaster}")
        print("| source | total time | phase times | mean forecast error |")
        print("|---|---|---|---|")
        sources = []
        for source in ("nominal", "measured", "forecast", "oracle"):
            total, rows = run(tasks, source, p=a.processors, rate=a.rate, works=works, iterations=a.iterations,
                              forecaster=a.forecaster)
            errs = [e for _, e in rows if e == e]
            print(f"| {source} | {total:.1f} s | {' '.join(f'{d:.1f}' for d, _ in rows)} | "
                  f"{np.mean(errs):.3f} |")
            sources.append({"source": source, "total_time": total, "phase_times": [d for d, _ in rows],
                            "forecast_error": float(np.mean(errs))})
        studies.append({"tasks": Path(path).name, "sources": sources})
    if a.cache:
        from benchmarks import cache

        settings = {k: getattr(a, k) for k in ("processors", "phases", "rate", "work", "growth", "iterations",
                                               "forecaster")}
        cache.write(a.cache, "extraload_sources", cache.command_line("benchmarks.extraload_sources", argv),
                    {"settings": settings, "studies": studies})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
