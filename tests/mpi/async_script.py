"""The Brusselator runs of 003 under mpiexec against the serial simulation (run by tests/mpi/test_async_mpi.py).

Usage (from the repository root, which must be on PYTHONPATH: the ranks run with ``-P``, as hermes starts
them): ``PYTHONPATH=$PWD mpiexec -n P .venv/bin/python -P -m mpi4py -m tests.mpi.async_script``

Virtual clock: SISC and AIAC (with balancing and with delayed messages) must equal
:func:`hermes.app.brusselator.study.simulate` — all processors in one process — in every summary entry, bit for bit,
also when every process sleeps a random real time at each iteration (different real timing, same virtual run). Wall
clock: SISC and AIAC with real non-blocking MPI must match the serial solution to the accuracy, every accepted window
having a residual below it. Rank 0 prints one ``FAIL ...`` line per disagreement or ``OK async P``.
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.app.brusselator import aiac
from hermes.app.brusselator.study import parse_spec, run_brusselator, simulate, summarise
from tests.mpi.harness import finish

BASE = {"name": "mpi", "problem": {"points": 160, "t_end": 0.75}, "solver": {"window": 5}}


def case(p: int, mode: str, **over) -> dict:
    data = {**BASE, "processors": p, "application": {"kernel": "brusselator", "mode": mode},
            "platform": {"capacities": [1 + (i % 3) for i in range(p)], "speed": 1.0e4}}
    for key, val in over.items():
        data[key] = {**data.get(key, {}), **val} if isinstance(val, dict) else val
    return data


def jitter(on: bool) -> None:
    """Make every process sleep a random real time (0-3 ms) at each iteration boundary."""
    orig = getattr(aiac.AiacRank, "_orig_boundary", aiac.AiacRank.on_boundary)
    aiac.AiacRank._orig_boundary = orig
    if not on:
        aiac.AiacRank.on_boundary = orig
        return
    rng = np.random.default_rng([os.getpid(), time.time_ns() % 2**32])

    def slow(self, t=None):
        time.sleep(rng.uniform(0.0, 3e-3))
        return orig(self, t)

    aiac.AiacRank.on_boundary = slow


def main() -> int:
    comm = plain(MPI.COMM_WORLD)
    p, rank = comm.Get_size(), comm.Get_rank()
    failures: list[str] = []
    virtual = {
        "sync": case(p, mode="sync"),
        "sync-balanced": case(p, mode="sync", balancing={"enabled": True, "every": 2, "threshold": 1.2,
                                                         "estimator": "time"}),
        "async": case(p, mode="async"),
        "async-balanced": case(p, mode="async", balancing={"enabled": True, "every": 2, "threshold": 1.2}),
        "async-delayed": case(p, mode="async", platform={"capacities": [1 + (i % 3) for i in range(p)],
                                                         "speed": 1.0e4, "delay": {"max": 1.0, "seed": 5}},
                              balancing={"enabled": True, "every": 3, "threshold": 1.5, "estimator": "time"}),
        # 003 Alg. 2's sweep (solver.form: paper): whole interval, no overlap, left border sent during the sweep,
        # with 003's residual rule as printed (the windowed case above has hermes' default, `mean`)
        "async-paper": case(p, mode="async", solver={"window": "all", "overlap": 0, "residual": 1e-3, "form": "paper"},
                            balancing={"enabled": True, "every": 20, "threshold": 1.5, "residual": "last"}),
        "async-paper-delayed": case(p, mode="async", solver={"window": "all", "overlap": 0, "residual": 1e-3,
                                                             "form": "paper"},
                                    platform={"capacities": [1 + (i % 3) for i in range(p)], "speed": 1.0e4,
                                              "delay": {"max": 1.0, "seed": 5}}),
        "sync-paper": case(p, mode="sync", solver={"window": "all", "overlap": 0, "residual": 1e-3, "form": "paper"},
                           balancing={"enabled": True, "every": 20, "threshold": 1.5}),
    }
    specs = {name: parse_spec(data) for name, data in virtual.items()}
    # the serial references, once per case (with and without jitter alike), shared out over the ranks
    mine = {name: summarise(spec, *simulate(spec)) for k, (name, spec) in enumerate(specs.items()) if k % p == rank}
    parts = comm.gather(mine, root=0)
    refs = {name: ref for part in parts for name, ref in part.items()} if rank == 0 else {}
    for name, spec in specs.items():
        for jit in (False, True) if name.startswith("async") else (False,):
            jitter(jit)
            got = run_brusselator(comm, spec)
            if rank == 0:
                ref = refs[name]
                diff = sorted(k for k in ref if ref[k] != got.get(k))
                if diff:
                    failures.append(f"{name}{' jittered' if jit else ''}: differs from the serial simulation in "
                                    f"{diff}: {[(ref[k], got.get(k)) for k in diff[:3]]}")
    jitter(False)
    for mode in ("sync", "async"):
        spec = parse_spec(case(p, mode=mode, clock="wall"))
        got = run_brusselator(comm, spec)
        if rank == 0 and not got["error_vs_serial"] <= spec.solver.accuracy:
            failures.append(f"wall {mode}: error {got['error_vs_serial']:.3e} > accuracy {spec.solver.accuracy}")
    return finish(comm, "async", failures)


if __name__ == "__main__":
    raise SystemExit(main())
