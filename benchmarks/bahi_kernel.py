"""The Brusselator block sweep: LAPACK step by step (hermes.app.brusselator.brusselator.solve_block) against the
compiled whole-interval sweep (hermes.app.brusselator.kernel), side by side in one process.

    .venv/bin/python -m benchmarks.bahi_kernel [--repeats 5]

For blocks of 50 ... 7,500 points over 003's 200 implicit-Euler steps it prints the best wall time of each (the
compiled one after its first, compiling, call), their ratio, the Newton iterations (equal: the same Newton from the
previous time level) and the compiled kernel's nanoseconds per point and Newton iteration; then the cost of one
sweep of all 60,000 points of 003 by each, and of a second sweep from the first one's result with Newton from
the previous iterate (003 Alg. 2's form), which needs one iteration per level.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hermes.app.brusselator.brusselator import Brusselator, solve_block
from hermes.app.brusselator.kernel import solve_sweep, sweep


def best(fn, repeats: int) -> tuple[float, object]:
    out, t = None, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    pb = Brusselator(60000)
    bc = pb.boundary(pb.n_steps + 1)
    print("| points | LAPACK step by step (s) | compiled sweep (s) | ratio | Newton iterations | ns per point-iteration |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (50, 500, 4000, 7500):
        init = pb.initial(0, n)
        solve_sweep(init, bc, bc, pb)  # compile (or load the cache)
        t_lap, (_, it_lap) = best(lambda: solve_block(init, bc, bc, pb), max(1, args.repeats // (1 + n // 2000)))
        t_jit, (y, it_jit) = best(lambda: solve_sweep(init, bc, bc, pb), args.repeats)
        assert np.array_equal(it_lap, it_jit)
        print(f"| {n:,} | {t_lap:.4f} | {t_jit:.5f} | {t_lap / t_jit:.1f} | {int(it_jit.sum())} | "
              f"{t_jit / (n * it_jit.sum()) * 1e9:.1f} |")
    init = pb.initial()
    t_all, (y, its) = best(lambda: solve_sweep(init, bc, bc, pb), 1)
    t_again, (_, its2) = best(lambda: sweep(y, bc, bc, pb, from_iterate=True), 1)
    print(f"\nall 60,000 points, one sweep from the previous level: {t_all:.2f} s ({int(its.sum())} Newton iterations "
          f"per point); again from the previous iterate: {t_again:.2f} s ({int(its2.sum())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
