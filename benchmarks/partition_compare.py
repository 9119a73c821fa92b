"""Diffusion + selection against METIS scratch-remap and Scotch repartitioning on the shipped meshes.

One command produces the comparison table of issue 4 ("Baselines"): for every mesh in ``meshes/*.vtu``
and every method, ``hermes run`` is started under ``mpiexec`` on a heterogeneous platform (capacities
r mod 4 + 1) while a band of doubled cell weights moves across the domain (weights adaptation,
:data:`DEFAULT_REGION`), and the run's
``summary.json`` gives, per method,

- the final imbalance ``max_i l_i / l̄_i`` (1.0 is fair),
- the edge cut (number of cut dual edges) after the last phase,
- the migration volume summed over the phases: cells and weight that changed owner in a phase
  (``cells_moved`` / ``quality.migration_weight``: a cell counted once per phase, by its new owner), and the
  cell sends (``cell_sends``: a cell passed on through an intermediate rank counts once per hop),
- the simulated balancing time (``balance_time`` summed over the phases) and the total simulated
  time (virtual clock: deterministic, independent of the machine and of the load on it).

Methods (``--methods``, labels of :data:`METHODS`): flow balancers (``pcg``, ``gda0``) realised by the
thesis' gain function, by boundary peeling or by a wavefront; ``metis`` (partition from scratch with
target fractions = capacities, remapped to keep cells home); ``scotch`` adaptive repartitioning with
``migration_cost`` 0.1 … 100 — the trade-off ParMETIS' ``itr`` sweep explores; ``none`` (the
initial METIS partition, unchanged) as reference.

Prints a Markdown table on stdout (progress on stderr) and writes every figure as CSV::

    .venv/bin/python -m benchmarks.partition_compare --out runs/partition_compare.csv
    .venv/bin/python -m benchmarks.partition_compare --meshes grid20x19,stufe --ranks 4 --phases 2 \\
        --methods pcg+gain,metis --out /tmp/c.csv

The helpers :func:`run_hermes`, :func:`run_row` and :func:`markdown_table` are reused by
``benchmarks/shared_meshes.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from hermes.runtime.start import processes_for
from hermes.interpreter import child_env
from hermes.metrics import cell_sends, cells_moved
from hermes.runtime.launch import _LAUNCHER_ENV, mpiexec_command
from hermes.scenario import parse_scenario

__all__ = ["METHODS", "DEFAULT_METHODS", "MESHES", "capacities", "scenario", "run_hermes", "run_row",
           "markdown_table", "write_csv", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: the shipped meshes, smallest first
MESHES = ["grid20x19", "lshape", "stufe", "airfoil", "3elt", "cylinder"]
#: method label -> the scenario's ``balancer`` section
METHODS: dict[str, dict[str, Any]] = {
    "none": {"algorithm": "none"},
    "pcg+gain": {"algorithm": "pcg", "selection": "gain"},
    "pcg+peel": {"algorithm": "pcg", "selection": "peel"},
    "pcg+wavefront": {"algorithm": "pcg", "selection": "wavefront"},
    "gda0+gain": {"algorithm": "gda0", "selection": "gain"},
    "gda0+peel": {"algorithm": "gda0", "selection": "peel"},
    "metis": {"algorithm": "metis", "targets": "fair"},
    **{f"scotch mc={mc:g}": {"algorithm": "scotch", "targets": "fair", "migration_cost": mc}
       for mc in (0.01, 0.1, 1.0, 10.0, 100.0)},
}
#: the methods run by default (gda0+peel and scotch mc=0.01 on request)
DEFAULT_METHODS = ["none", "pcg+gain", "pcg+peel", "pcg+wavefront", "gda0+gain", "metis", "scotch mc=0.1",
                   "scotch mc=1", "scotch mc=10", "scotch mc=100"]
#: the CSV columns (in order); the Markdown table shows a subset
COLUMNS = ["mesh", "cells", "cells_final", "method", "algorithm", "selection", "params", "final_imbalance",
           "edge_cut", "edge_cut_max", "boundary_cells", "neighbours_max", "cells_moved", "migration_weight",
           "migration_bytes", "cell_sends", "total_time", "balance_time", "migrate_time", "wall_seconds",
           "run_seconds"]
TABLE = [("mesh", "mesh", "{}"), ("cells", "cells", "{:,}"), ("method", "method", "{}"),
         ("final_imbalance", "imbalance", "{:.3f}"), ("edge_cut", "edge cut", "{:,}"),
         ("cells_moved", "cells moved", "{:,}"), ("migration_weight", "migrated weight", "{:,.0f}"),
         ("balance_time", "balance (s)", "{:.4f}"), ("total_time", "sim. time (s)", "{:.4f}")]
#: a band of width 0.3 whose centre moves 0.15 → 0.55 over 5 phases (fractions of the bounding box): cells
#: behind the front keep their refined weight (up to 8×), cells ahead still have weight 1
DEFAULT_REGION = {"kind": "front", "start": 0.15, "speed": 0.1, "width": 0.3}


def capacities(spec: str, p: int) -> list[float] | str:
    """``homo``, ``hcuw`` (speed ∝ r mod 4 + 1, as the offline lab) or a comma list of ``p`` numbers."""
    if spec == "homo":
        return "homo"
    if spec == "hcuw":
        return [float(r % 4 + 1) for r in range(p)]
    vals = [float(v) for v in spec.split(",")]
    if len(vals) != p:
        raise SystemExit(f"--capacities: {len(vals)} values for {p} ranks")
    return vals


def scenario(mesh_file: str | Path, balancer: dict[str, Any], *, ranks: int, phases: int, iterations: int,
             caps: list[float] | str, region: dict[str, Any], factor: float = 2.0, seed: int = 1,
             kind: str = "weights") -> dict[str, Any]:
    """The scenario dict of one run: synthetic kernel, virtual clock, adaptation ``kind`` on ``region``.

    ``kind`` ``weights`` multiplies the region's weights by ``factor`` each phase; ``refine`` bisects
    its cells instead (omitted from the dict when ``weights``, so older scenario schemas accept it).
    """
    adaptation = {"phases": phases, "factor": factor, "region": region}
    if kind != "weights":
        adaptation["kind"] = kind
    return {
        "name": "compare", "processors": ranks, "seed": seed, "clock": "virtual",
        "mesh": {"file": str(Path(mesh_file).resolve()), "units": "cells"},
        "platform": {"capacities": caps, "speed": 1.0e5, "latency": 1.0e-4, "bandwidth": 1.25e7},
        "application": {"kernel": "synthetic", "iterations": iterations, "work_per_weight": 1.0,
                        "bytes_per_edge": 64},
        "adaptation": adaptation,
        "balancer": dict(balancer),
        "output": {"pictures": False},
    }


def tree_rss(root: int) -> int:
    """Summed resident bytes of ``root`` and its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
        rss[int(name)] = pages * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


class PeakRSS:
    """The peak of :func:`tree_rss` of a running job, sampled every ``every`` seconds on a thread::

        with PeakRSS(job.pid) as peak:
            job.communicate()
        peak.bytes
    """

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every, self.bytes = pid, every, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(self.every):
            self.bytes = max(self.bytes, tree_rss(self.pid))

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def run_hermes(sc: dict[str, Any], *, timeout: float = 600.0, processes: int | None = None,
               measured: dict[str, Any] | None = None) -> tuple[dict[str, Any], float]:
    """Run ``hermes run`` of ``sc['processors']`` processors under mpiexec on ``processes`` MPI processes
    (default: hermes' own, one per processor up to the cores, :func:`hermes.runtime.start.processes_for`; the results
    are the same whatever the number); return (summary.json, seconds).

    The job runs in its own process group, killed as a whole if it outlives ``timeout``. Scotch runs
    single-threaded (``SCOTCH_PTHREAD_NUMBER=1`` unless set): its threaded remapping returned different
    partitions for identical input from call to call (2 of 4 cylinder runs differed), one thread
    reproduces them.

    Raises
    ------
    RuntimeError
        If the job fails or times out (with the tail of its stderr).

    ``measured``, if given, receives ``peak_rss`` (bytes: the peak summed resident memory of every process
    of the job, launcher included, sampled every 0.2 s).
    """
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env = child_env({**env, "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")})
    env.setdefault("SCOTCH_PTHREAD_NUMBER", "1")
    with tempfile.TemporaryDirectory(prefix="hermes-compare-") as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(sc, sort_keys=False))
        out = Path(tmp) / "run"
        if not processes:
            parsed = parse_scenario(sc)
            processes = processes_for(parsed.run, parsed.clock, int(sc["processors"]))
        n = processes
        cmd = mpiexec_command(n, ["run", str(path), "--no-launch", "--quiet", "--no-pictures", "--out", str(out)])
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        with PeakRSS(proc.pid) as peak:
            _, err = finish_job(proc, cmd, timeout)
        seconds = time.perf_counter() - t0
        if measured is not None:
            measured["peak_rss"] = peak.bytes
        if proc.returncode != 0:
            tail = "\n".join(err.strip().splitlines()[-5:])
            raise RuntimeError(f"exit status {proc.returncode}: {' '.join(cmd)}\n{tail}")
        return json.loads((out / "summary.json").read_text()), seconds


def finish_job(proc: subprocess.Popen, cmd: list[str], timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of a job started in its own session; its whole process group is killed if it outlives
    ``timeout`` (RuntimeError) or if the caller is interrupted."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}") from None
    except BaseException:  # interrupted: take the job down with us
        os.killpg(proc.pid, signal.SIGKILL)
        raise


def _quality(ph: dict[str, Any], key: str, fallback: str) -> float:
    q = ph.get("quality") or {}
    v = q.get(key)
    return float(ph.get(fallback, 0) if v is None else v)


def _moved(ph: dict[str, Any]) -> float:
    """A phase's cells moved (:func:`hermes.metrics.cells_moved`), else its cell sends."""
    v = cells_moved(ph)
    if v is None:
        v = cell_sends(ph)
    return float(v or 0)


def run_row(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run: final imbalance, last edge cut, migration summed over the phases, times."""
    phases = summary["phases"]
    last = phases[-1]
    q = last.get("quality") or {}
    mig_bytes = [(ph.get("quality") or {}).get("migration_bytes") for ph in phases]
    return {
        "final_imbalance": summary["final_imbalance"],
        "edge_cut": int(_quality(last, "edge_cut", "edge_cut")),
        "edge_cut_max": int(max(_quality(ph, "edge_cut", "edge_cut") for ph in phases)),
        "boundary_cells": q.get("boundary_cells"),
        "neighbours_max": q.get("neighbours_max"),
        # the distinct cells that changed owner (a summary without them: its sends), and the cell sends
        "cells_moved": int(sum(_moved(ph) for ph in phases)),
        "migration_weight": sum(_quality(ph, "migration_weight", "migrated_weight") for ph in phases),
        "migration_bytes": None if None in mig_bytes else int(sum(mig_bytes)),
        "cell_sends": int(cell_sends(summary) or 0),
        "total_time": summary["total_time"],
        "balance_time": sum(ph["balance_time"] for ph in phases),
        "migrate_time": sum(ph["migrate_time"] for ph in phases),
        "wall_seconds": summary.get("wall_seconds"),
    }


def _fmt(v: Any, spec: str) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return spec.format(v) if isinstance(v, (int, float)) else str(v)


def markdown_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """A Markdown table of ``rows``; ``columns`` = [(key, header, format spec such as ``"{:.3f}"``), ...].

    Columns whose first value is a number are right-aligned.
    """
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    align = "|" + "|".join("---:" if rows and isinstance(rows[0].get(k), (int, float)) else "---"
                           for k, _, _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(k), f) for k, _, f in columns) + " |" for r in rows]
    return "\n".join([head, align, *body])


def write_csv(rows: list[dict[str, Any]], path: str | Path, columns: list[str]) -> Path:
    """Write ``rows`` as CSV (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)
    return path


def _mesh_path(name: str) -> Path:
    p = Path(name)
    if p.suffix:
        return p
    return ROOT / "meshes" / f"{name}.vtu"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meshes", default=",".join(MESHES), help="comma list: names in meshes/ or file paths")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"comma list of {', '.join(METHODS)}")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--phases", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--capacities", default="hcuw", help="homo | hcuw (r mod 4 + 1) | comma list")
    ap.add_argument("--region", default=yaml.safe_dump(DEFAULT_REGION, default_flow_style=True).strip(),
                    help="the adaptation region as YAML (default: a band moving across the domain)")
    ap.add_argument("--factor", type=float, default=2.0, help="weight factor per phase inside the region")
    ap.add_argument("--kind", choices=["weights", "refine"], default="weights",
                    help="adaptation: multiply the region's weights, or refine its cells (the mesh changes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--out", help="CSV file to write")
    args = ap.parse_args(argv)

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"--methods: unknown {', '.join(unknown)}; valid: {', '.join(METHODS)}")
    meshes = [m.strip() for m in args.meshes.split(",") if m.strip()]
    missing = [m for m in meshes if not _mesh_path(m).is_file()]
    if missing:
        raise SystemExit(f"--meshes: no such mesh: {', '.join(str(_mesh_path(m)) for m in missing)}")
    caps = capacities(args.capacities, args.ranks)
    region = yaml.safe_load(args.region)

    print(f"# {args.ranks} ranks, capacities {args.capacities}, {args.phases} phases x {args.iterations} "
          f"iterations, adaptation {args.kind}, region {json.dumps(region)}, factor {args.factor}, seed {args.seed}",
          file=sys.stderr)
    rows: list[dict[str, Any]] = []
    total = len(meshes) * len(methods)
    t_all = time.perf_counter()
    for mesh in meshes:
        for method in methods:
            bal = METHODS[method]
            sc = scenario(_mesh_path(mesh), bal, ranks=args.ranks, phases=args.phases, iterations=args.iterations,
                          caps=caps, region=region, factor=args.factor, seed=args.seed, kind=args.kind)
            summary, secs = run_hermes(sc, timeout=args.timeout)
            extra = {k: v for k, v in bal.items() if k not in ("algorithm", "selection")}
            row = {"mesh": Path(mesh).stem, "cells": summary["cells_initial"],
                   "cells_final": summary.get("cells_final"), "method": method,
                   "algorithm": bal["algorithm"], "selection": bal.get("selection", ""),
                   "params": ";".join(f"{k}={v}" for k, v in extra.items()), **run_row(summary),
                   "run_seconds": round(secs, 2)}
            rows.append(row)
            print(f"[{len(rows)}/{total}] {row['mesh']:10s} {method:14s} imbalance {row['final_imbalance']:.3f} "
                  f"cut {row['edge_cut']:6d} moved {row['cells_moved']:6d}  ({secs:.1f} s)",
                  file=sys.stderr, flush=True)
    table = TABLE if args.kind == "weights" else [*TABLE[:2], ("cells_final", "cells final", "{:,}"), *TABLE[2:]]
    print(markdown_table(rows, table))
    if args.out:
        print(f"# wrote {write_csv(rows, args.out, COLUMNS)} ({len(rows)} rows, "
              f"{time.perf_counter() - t_all:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
