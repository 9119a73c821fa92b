"""The wall cost of one point-to-point message between hosted processors: halo exchanges only.

``p`` processors hosted in this process (``hermes.runtime.start.start``: hosted), each exchanging a 64-byte payload with
``d`` neighbours (the ranks r ± 1, …, r ± d/2 mod p) through hermes' own ``NeighbourComm.exchange`` — the
call the application's halo exchange makes — ``--rounds`` times under the virtual clock. Prints the wall
seconds per message (all processors' messages of all rounds), the figure that bounds how long a run with a
given processor graph takes on one machine (results/scale.md, "Grapevine at 1,024 processors").

    .venv/bin/python -m benchmarks.hosted_messages --ranks 1024 --degrees 6,64,256,768 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hermes.runtime.clock import Links, VirtualClock
from hermes.runtime.comm import NeighbourComm
from hermes.runtime.start import start


def measure(p: int, d: int, rounds: int) -> float:
    """Wall seconds per message of ``rounds`` halo exchanges of ``p`` hosted processors of degree ``d``."""
    half = d // 2

    def fn(comm) -> None:
        me = comm.Get_rank()
        nbrs = sorted({(me + k) % p for k in range(-half, half + 1) if k} - {me})
        nb = NeighbourComm(comm, nbrs, VirtualClock(me, p, Links(), 1.0, 1.0 / p))
        payload = [np.full(8, float(me))] * len(nbrs)
        sizes = np.full(len(nbrs), 8)
        for _ in range(rounds):
            nb.exchange(payload, recv_sizes=sizes)

    t0 = time.perf_counter()
    start(p, fn)  # p > 1 processors in this one process: hosted
    seconds = time.perf_counter() - t0
    return seconds / (p * 2 * half * rounds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--degrees", default="6,64,256,768")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    measure(min(args.ranks, 8), 2, 1)  # warm-up: imports and first calls
    print("| p | degree | messages | µs per message |")
    print("|---:|---:|---:|---:|")
    for d in (int(x) for x in args.degrees.split(",")):
        per = measure(args.ranks, d, args.rounds)
        n = args.ranks * 2 * (d // 2) * args.rounds
        print(f"| {args.ranks} | {2 * (d // 2)} | {n:,} | {per * 1e6:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
