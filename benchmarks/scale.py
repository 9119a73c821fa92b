"""Fair balancing at scale (issue 10): the flow balancers against METIS scratch-remap and Scotch, 8 → 64 ranks.

Every run is the quickstart experiment (``scenarios/quickstart.yaml``: a front of doubled weights crossing the
domain, jacobi kernel, virtual clock, α = 100 µs, 100 MB/s) with ``--iterations`` solver iterations per phase,
on a mesh (``gridNxM`` generated, or a shipped CFD mesh of ``meshes/``), ``p`` ranks, homogeneous capacities
(``homo``) or Table 10.6 scaled up (``table``: rank r takes the row of processor r mod 15, phase k the column
of adaptation k + 1, so every phase is heterogeneous and the capacities change between phases), and weights or
refinement adaptation. Per run it records the total simulated time, the balancing and migration time (summed
over the phases), the imbalance after every phase, the edge cut after every phase, the distinct cells that
changed owner per phase (``cells_moved``) and the cell sends (``cell_sends``, cell-hops: a cell passed on through
an intermediate rank counts once per hop), and the wall seconds of the whole job (separately: 64 ranks on a
2-core machine are slow in wall time, the virtual clock is exact).

Two commands. ``run`` starts every (mesh, capacities, kind, ranks, method) combination not yet in the cache
directory (``--out``, one ``<case>.json`` each, so an interrupted sweep resumes)::

    nice -n 10 .venv/bin/python -m benchmarks.scale run --out runs/scale \\
        --meshes grid160x120 --ranks 8,16,32,64 --capacities homo,table
    nice -n 10 .venv/bin/python -m benchmarks.scale run --out runs/scale --meshes cylinder,airfoil --ranks 16,64
    nice -n 10 .venv/bin/python -m benchmarks.scale run --out runs/scale --kinds refine --ranks 16,64 \\
        --meshes grid160x120 --methods pcg,auto,auto+refine,metis

``report`` prints one Markdown table per (mesh, capacities, kind, iterations) from the cache, writes
``scale.csv`` next to it and, with ``--plot FILE``, the plot of results/scale.md (total time and edge cut relative
to METIS against p)::

    .venv/bin/python -m benchmarks.scale report --out runs/scale --plot docs/scale.png

The yardstick (docs/design/bulk-emulation.md §5): before the runs start, ``run`` times the numpy lower bound of each
(mesh, sweeps = phases × iterations) it is about to run, :func:`numpy_bound` — the run's Jacobi sweeps on the whole
mesh in this one process, best of 3 — and caches it in ``--out`` as ``bound-<mesh>-<sweeps>.json``, so a sweep of
runs pays for it once and no run shares the cores with it. Each run's line prints ``numpy bound B s (W/B x)``, W
the benchmark's clock around ``mpiexec`` (launcher included); its JSON keeps ``bound_seconds`` and the table its
``numpy bound (s)`` and ``wall / bound`` (blank for runs cached before the bound was).

``--quick`` runs a CI-sized smoke (a 40×30 grid on 4 ranks, two methods, one phase of two iterations) into a
temporary directory and prints its table.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from benchmarks.partition_compare import markdown_table, run_hermes
from hermes.errors import HermesError
from hermes.metrics import cell_sends, cells_moved

__all__ = ["METHODS", "DEFAULT_METHODS", "scenario", "mesh_section", "numpy_bound", "bound_problem", "bound_sweeps",
           "table_schedule", "case_name", "row", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: the compact realisation (BENCHMARKS.md): exact ghosts, boundary conductances, boundary refinement
COMPACT = {"ghosts": "exact", "conductance": "boundary",
           "refinement": {"passes": 12, "tolerance": 0.03, "geometric": 0.25}}
#: ``+compacta``: :data:`COMPACT` with the cost model deciding the refinement (``refinement.decide: auto``)
COMPACTA = {**COMPACT, "refinement": {**COMPACT["refinement"], "decide": "auto"}}
#: method label -> the scenario's ``balancer`` section (``+compact``: with :data:`COMPACT`; ``+trigger``: with
#: ``trigger: auto``)
METHODS: dict[str, dict[str, Any]] = {
    "none": {"algorithm": "none"},
    "pcg": {"algorithm": "pcg"},
    # Chronopoulos–Gear's recurrence: one allreduce of two words per iteration instead of two of one
    "pcg-single": {"algorithm": "pcg", "pcg": {"form": "single-reduction"}},
    "gda0": {"algorithm": "gda0"},
    "lps": {"algorithm": "lps"},
    "chebyshev": {"algorithm": "chebyshev"},
    "auto": {"algorithm": "auto"},
    "auto+trigger": {"algorithm": "auto", "trigger": "auto"},
    "pcg+compact": {"algorithm": "pcg", **COMPACT},
    "chebyshev+compact": {"algorithm": "chebyshev", **COMPACT},
    "lps+compact": {"algorithm": "lps", **COMPACT},
    # the fully distributed flow with the cost model deciding rounds and refinement (docs/COSTS.md: no central solve)
    "chebyshev+compacta+trigger": {"algorithm": "chebyshev", **COMPACTA, "trigger": "auto"},
    # the same with 24 boundary-refinement passes a round instead of 12 (the edge cut at depth), and with pcg's and
    # lps' flows
    "chebyshev+compacta24+trigger": {"algorithm": "chebyshev", **COMPACTA, "trigger": "auto",
                                     "refinement": {**COMPACTA["refinement"], "passes": 24}},
    "pcg+compacta24+trigger": {"algorithm": "pcg", **COMPACTA, "trigger": "auto",
                               "refinement": {**COMPACTA["refinement"], "passes": 24}},
    "lps+compacta24+trigger": {"algorithm": "lps", **COMPACTA, "trigger": "auto",
                               "refinement": {**COMPACTA["refinement"], "passes": 24}},
    "gda0+compact": {"algorithm": "gda0", **COMPACT},
    "auto+compact": {"algorithm": "auto", **COMPACT},
    "auto+compact+trigger": {"algorithm": "auto", **COMPACT, "trigger": "auto"},
    # the trade-off of the boundary refinement (BENCHMARKS.md): twice the passes, a tighter balance tolerance, a
    # stronger geometric weight
    "auto+compact24+trigger": {"algorithm": "auto", **COMPACT, "refinement": {**COMPACT["refinement"], "passes": 24},
                               "trigger": "auto"},
    "auto+compact2+trigger": {"algorithm": "auto", **COMPACT,
                              "refinement": {**COMPACT["refinement"], "tolerance": 0.02}, "trigger": "auto"},
    "auto+compactg+trigger": {"algorithm": "auto", **COMPACT,
                              "refinement": {**COMPACT["refinement"], "geometric": 0.5}, "trigger": "auto"},
    # the least-cost (l1) flow (hermes.balance.potential.mincost): plain, compact, compact with balance tolerance 0.01
    # (compact1), compact with slack 0.02 (mincost2: loads may end 2 % above their share before the refinement)
    "mincost": {"algorithm": "mincost"},
    "mincost+compact+trigger": {"algorithm": "mincost", **COMPACT, "trigger": "auto"},
    "mincost+trigger": {"algorithm": "mincost", "trigger": "auto"},
    "mincost+compact1+trigger": {"algorithm": "mincost", **COMPACT,
                                 "refinement": {**COMPACT["refinement"], "tolerance": 0.01}, "trigger": "auto"},
    "mincost2+compact+trigger": {"algorithm": "mincost", "mincost": {"slack": 0.02}, **COMPACT, "trigger": "auto"},
    # a lopsided balance tolerance (refinement.below): loads stay within [(1 - b) l̄, (1 + t) l̄], compact<t><b>
    "mincost+compact13+trigger": {"algorithm": "mincost", **COMPACT,
                                  "refinement": {**COMPACT["refinement"], "tolerance": 0.01, "below": 0.03},
                                  "trigger": "auto"},
    "mincost+compact15+trigger": {"algorithm": "mincost", **COMPACT,
                                  "refinement": {**COMPACT["refinement"], "tolerance": 0.01, "below": 0.05},
                                  "trigger": "auto"},
    "mincost+compact25+trigger": {"algorithm": "mincost", **COMPACT,
                                  "refinement": {**COMPACT["refinement"], "tolerance": 0.02, "below": 0.05},
                                  "trigger": "auto"},
    # the cost model decides the refinement too (refinement.decide: auto): the default recommendation
    "mincost+compacta+trigger": {"algorithm": "mincost", **COMPACTA, "trigger": "auto"},
    # ... with twice the passes (at 128 ranks every phase used all 12)
    "mincost+compacta24+trigger": {"algorithm": "mincost", **COMPACTA, "trigger": "auto",
                                   "refinement": {**COMPACTA["refinement"], "passes": 24}},
    # the migration frontier: slack 0.03 / 0.05 (loads may end 3 % / 5 % above their share, the imbalance
    # bound) with the recommended setting — fewer cells move, at the price of compute
    "mincost3+compacta+trigger": {"algorithm": "mincost", "mincost": {"slack": 0.03}, **COMPACTA, "trigger": "auto"},
    "mincost5+compacta+trigger": {"algorithm": "mincost", "mincost": {"slack": 0.05}, **COMPACTA, "trigger": "auto"},
    # ... and with one round per phase, so that no later round balances the slack away
    "mincost5+compacta+trigger+r1": {"algorithm": "mincost", "mincost": {"slack": 0.05}, **COMPACTA, "rounds": 1,
                                     "trigger": "auto"},
    "mincost3+compacta+trigger+r1": {"algorithm": "mincost", "mincost": {"slack": 0.03}, **COMPACTA, "rounds": 1,
                                     "trigger": "auto"},
    "grapevine": {"algorithm": "grapevine"},
    # the same moves with the token transfer stage (p times fewer collectives: the form that runs at 1,024+)
    "grapevine-token": {"algorithm": "grapevine", "grapevine": {"transfer": "token"}},
    # ... with the Sandia report's settings (seed 004, §2.1.3: i = k = 10, f = 6, criterion 6′)
    "grapevine-report": {"algorithm": "grapevine", "grapevine": {"transfer": "token", "iterations": 10, "rounds": 10,
                                                                 "fanout": 6, "criterion": "modified"}},
    "metis": {"algorithm": "metis"},
    # one scratch-remap per phase (the rounds rule runs a second while the first changed the imbalance)
    "metis-once": {"algorithm": "metis", "rounds": 1},
    "scotch": {"algorithm": "scotch"},
    # Scotch's trade of cut against migration (its migration_cost; 1 above): how far a repartitioner goes
    "scotch-m0.1": {"algorithm": "scotch", "scotch": {"migration_cost": 0.1}},
    "scotch-m10": {"algorithm": "scotch", "scotch": {"migration_cost": 10.0}},
    "scotch-m100": {"algorithm": "scotch", "scotch": {"migration_cost": 100.0}},
}
DEFAULT_METHODS = ["pcg", "gda0", "chebyshev", "auto", "auto+compact", "auto+compact+trigger",
                   "mincost+compact+trigger", "mincost+compacta+trigger", "metis", "scotch"]
#: the set-ups: the quickstart scaled (default), the DATA.md comparison (8 ranks, hcuw, 5 phases of 10
#: iterations: benchmarks/partition_compare.py's scenario) and the thesis' 15-rank scenarios
SETUPS = ("quickstart", "data", "thesis-homogeneous", "thesis-heterogeneous")
COLUMNS = ["setup", "mesh", "capacities", "kind", "iterations", "phases", "ranks", "method", "cells", "total_time",
           "balance_time", "migrate_time", "compute_time", "final_imbalance", "imbalance_max", "edge_cut",
           "edge_cut_phases", "distinct_cells", "distinct_phases", "cell_sends", "refined_cells", "skipped",
           "wall_seconds", "peak_rss_gib", "collectives", "messages", "bound_seconds", "wall_vs_bound"]
TABLE = [("ranks", "p", "{}"), ("method", "method", "{}"), ("total_time", "total (s)", "{:.4f}"),
         ("balance_time", "balance (s)", "{:.4f}"), ("migrate_time", "migrate (s)", "{:.4f}"),
         ("imbalance_max", "imbalance (worst phase)", "{:.3f}"), ("edge_cut_phases", "edge cut per phase", "{}"),
         ("cut_vs_metis", "cut / METIS (worst)", "{:.3f}"), ("distinct_phases", "distinct cells moved per phase",
                                                                 "{}"),
         ("distinct_vs_metis", "moved / METIS", "{:.2f}"), ("cell_sends", "cell sends", "{:,}"),
         ("collectives", "balancing collectives (rank 0)", "{:,}"), ("messages", "balancing messages (rank 0)", "{:,}"),
         ("wall_seconds", "wall (s)", "{:.0f}"), ("peak_rss_gib", "peak RSS (GiB)", "{:.2f}"),
         ("bound_seconds", "numpy bound (s)", "{:.3g}"), ("wall_vs_bound", "wall / bound", "{:,.1f}")]


def table_schedule(p: int, phases: int) -> list[list[float]]:
    """Table 10.6 scaled up to ``p`` ranks: rank r takes processor (r mod 15)'s row, phase k the column of
    adaptation min(k + 1, 7) (every phase heterogeneous); each phase normalised to sum 1."""
    rows = [ln.split(",")[1:] for ln in (ROOT / "configs" / "thesis-table-10.6.csv").read_text().splitlines()
            if ln.startswith("P")]
    table = np.array(rows, dtype=np.float64)  # (15, 7)
    out = []
    for k in range(1, phases + 1):
        col = table[np.arange(p) % 15, min(k + 1, 7) - 1]
        out.append((col / col.sum()).round(12).tolist())
    return out


def scenario(mesh: str, method: str, *, ranks: int, capacities: str, kind: str, iterations: int,
             phases: int, setup: str = "quickstart") -> dict[str, Any]:
    """The scenario of one run: the set-up's, with the benchmark's mesh, ranks, capacities, adaptation and
    balancer (the thesis set-ups keep their own mesh, ranks, capacities and phases)."""
    try:
        balancer = dict(METHODS[method])
    except KeyError:
        raise SystemExit(f"--methods: unknown {method} (valid: {', '.join(METHODS)})") from None
    if setup.startswith("thesis"):
        sc = yaml.safe_load((ROOT / "scenarios" / f"{setup}.yaml").read_text())
        sc["platform"]["schedule"] = str((ROOT / "configs" / "thesis-table-10.6.csv").resolve()) \
            if "schedule" in sc["platform"] else None
        sc["balancer"], sc["output"] = balancer, {"pictures": False}
        return sc
    if setup == "data":
        from partition_compare import DEFAULT_REGION
        from partition_compare import capacities as data_capacities
        from partition_compare import scenario as data_scenario

        path = ROOT / "meshes" / f"{mesh}.vtu"
        return data_scenario(path, balancer, ranks=ranks, phases=phases, iterations=iterations,
                             caps=data_capacities(capacities, ranks), region=DEFAULT_REGION, kind=kind)
    sc = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    sc["mesh"] = mesh_section(mesh)
    sc["processors"] = ranks
    sc["platform"]["capacities"] = "homo"
    if capacities == "table":
        sc["platform"]["schedule"] = table_schedule(ranks, phases)
    elif capacities != "homo":
        raise SystemExit(f"--capacities: unknown {capacities!r} (homo | table)")
    sc["application"]["iterations"] = iterations
    sc["adaptation"]["phases"] = phases
    if kind != "weights":
        sc["adaptation"]["kind"] = kind
    sc["balancer"] = balancer
    sc["output"] = {"pictures": False}
    return sc


def mesh_section(mesh: str) -> dict[str, Any]:
    """The scenario's ``mesh`` section of a benchmark mesh name: ``gridNxM`` generated, else ``meshes/<mesh>.vtu``
    (its cells the work units)."""
    if mesh.startswith("grid"):
        return {"grid": mesh[4:]}
    return {"file": str((ROOT / "meshes" / f"{mesh}.vtu").resolve()), "units": "cells"}


def bound_problem(mesh: str) -> tuple[Any, NDArray[np.float64], NDArray[np.float64]]:
    """The whole-mesh Jacobi problem of a run on ``mesh``: (A, f, σ + deg), A the CSR neighbour-sum matrix.

    The mesh is built as the run builds it (:func:`hermes.lifecycle.setup.load_mesh` of :func:`mesh_section`:
    :func:`hermes.data.generators.grid` for ``gridNxM``, the mesh reader for a file); A is
    :func:`hermes.app.mesh.kernels.neighbour_sum_matrix` and f :func:`hermes.app.mesh.kernels.source_term` of the cell
    centroids, as in :func:`hermes.app.mesh.kernels.jacobi_serial`. A ``refine`` run's work units are this mesh's
    triangles, more of them with every phase: the bound of the initial mesh stays below it.
    """
    from hermes.app.mesh.kernels import SIGMA, neighbour_sum_matrix, source_term
    from hermes.lifecycle.setup import load_mesh
    from hermes.sections import MeshSpec

    m = load_mesh(MeshSpec(**mesh_section(mesh)), Path)
    return neighbour_sum_matrix(m.xadj, m.adjncy), source_term(m.coords), SIGMA + np.diff(m.xadj)


def bound_sweeps(a: Any, f: NDArray[np.float64], denominator: NDArray[np.float64], sweeps: int) -> NDArray[np.float64]:
    """``sweeps`` Jacobi sweeps from u = 0, ``u ← (f + A u) / (σ + deg)``: the arithmetic of
    :func:`hermes.app.mesh.kernels.jacobi_sweeps` value for value (the loop-invariant σ + deg computed once, by
    :func:`bound_problem`); returns the final u (tests/test_benchmarks_smoke.py compares it bit for bit)."""
    u = np.zeros(f.size)
    for _ in range(sweeps):
        u = (f + a @ u) / denominator
    return u


def numpy_bound(mesh: str, sweeps: int, repeats: int = 3, *, out: Path | None = None) -> float:
    """The numpy lower bound of a run: the seconds of its ``sweeps`` Jacobi sweeps on the whole mesh, serially in
    this process (:func:`bound_sweeps`), the best of ``repeats``; the matrix is built outside the clock.

    Parameters
    ----------
    mesh : str
        ``gridNxM`` or a name in ``meshes/`` (:func:`mesh_section`).
    sweeps : int
        The run's sweeps: phases × iterations per phase.
    repeats : int
        Timed repetitions; the least is kept.
    out : Path, optional
        The benchmark's cache directory: the bound is read from ``out/bound-<mesh>-<sweeps>.json`` if there, else
        measured and written there (through a temporary file).

    Returns
    -------
    float
        Seconds (``time.perf_counter`` around the sweeps).

    Notes
    -----
    One core: scipy's CSR mat-vec (``_sparsetools.csr_matvec``) is a plain C++ loop, linked to neither OpenMP nor
    BLAS, and numpy's element-wise ``+`` and ``/`` run on one thread, so no thread variable is needed (setting
    ``OMP_NUM_THREADS`` here would reach the runs' processes through the environment; the sweeps call no BLAS).
    The cache also keeps the process CPU time of the best repeat as the check: on one thread it is the wall time
    (grid400x400, 300 sweeps: 0.227 s of each). The bound runs before the job starts, never beside it
    (docs/design/bulk-emulation.md §5).
    """
    path = None if out is None else Path(out) / f"bound-{mesh}-{sweeps}.json"
    if path is not None and path.is_file():
        return float(json.loads(path.read_text())["seconds"])
    a, f, denominator = bound_problem(mesh)
    times = []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        bound_sweeps(a, f, denominator, sweeps)
        times.append((time.perf_counter() - t, time.process_time() - c))
    seconds, cpu = min(times)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"mesh": mesh, "sweeps": sweeps, "cells": int(f.size), "repeats": repeats,
                                   "seconds": seconds, "cpu_seconds": cpu, "times": [w for w, _ in times],
                                   "method": "scipy CSR mat-vec, 1 core"}, indent=1))
        tmp.replace(path)
    return seconds


def case_name(mesh: str, capacities: str, kind: str, iterations: int, phases: int, ranks: int, method: str,
              setup: str = "quickstart") -> str:
    head = "" if setup == "quickstart" else f"{setup}_"
    return f"{head}{mesh}_{capacities}_{kind}_it{iterations}_ph{phases}_p{ranks}_{method}"


def row(summary: dict[str, Any], **case: Any) -> dict[str, Any]:
    """The figures of one run (module docstring)."""
    ph = summary["phases"]
    cuts = [int(x["edge_cut"]) for x in ph]
    distinct = [int(cells_moved(x) or 0) for x in ph]  # a cached summary before cells_moved: the quality's alias
    skipped = sum(1 for x in ph for d in x.get("balance_decision", []) if d["choice"] == "skip")
    return {
        **case, "cells": summary["cells_initial"], "total_time": summary["total_time"],
        "balance_time": sum(x["balance_time"] for x in ph), "migrate_time": sum(x["migrate_time"] for x in ph),
        "compute_time": sum(x["compute_time"] for x in ph), "final_imbalance": summary["final_imbalance"],
        "imbalance_max": max(x["imbalance_after"] for x in ph), "edge_cut": cuts[-1],
        "edge_cut_phases": " / ".join(f"{c:,}" for c in cuts), "cuts": cuts,
        "distinct_cells": sum(distinct), "distinct_phases": " / ".join(f"{d:,}" for d in distinct),
        "distinct": distinct, "cell_sends": int(cell_sends(summary) or 0),
        "refined_cells": sum((x.get("refinement") or {}).get("cells", 0) for x in ph), "skipped": skipped,
        "wall_seconds": summary.get("wall_seconds"),
        # rank 0's balancing communication over the phases (every round): collectives and point-to-point messages
        "collectives": sum(sum((x.get("balance_counters") or {}).get("collectives", {}).values()) for x in ph),
        "messages": sum(int((x.get("balance_counters") or {}).get("messages", 0)) for x in ph),
    }


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pending = []
    for mesh in args.meshes.split(","):
        for caps in args.capacities.split(","):
            for kind in args.kinds.split(","):
                for p in (int(x) for x in args.ranks.split(",")):
                    for method in args.methods.split(","):
                        case = dict(mesh=mesh, capacities=caps, kind=kind, iterations=args.iterations,
                                    phases=args.phases, ranks=p, method=method, setup=args.setup)
                        sc = scenario(mesh, method, ranks=p, capacities=caps, kind=kind,
                                      iterations=args.iterations, phases=args.phases, setup=args.setup)
                        if args.setup.startswith("thesis"):  # the scenario's own figures
                            case.update(mesh="grid" + sc["mesh"]["grid"], capacities="table" if sc["platform"].get(
                                "schedule") else "homo", iterations=sc["application"]["iterations"],
                                phases=sc["adaptation"]["phases"], ranks=sc["processors"])
                        path = out / f"{case_name(**case)}.json"
                        if not path.is_file():
                            pending.append((path, case, sc))
    # the yardstick, before any run starts (never beside one)
    bounds: dict[tuple[str, int], float | None] = {}
    for _, case, _ in pending:
        key = (case["mesh"], case["phases"] * case["iterations"])
        if key in bounds:
            continue
        cached = (out / f"bound-{key[0]}-{key[1]}.json").is_file()
        try:
            bounds[key] = numpy_bound(*key, out=out)
        except (OSError, ValueError, HermesError) as err:  # the run will say it too
            print(f"numpy bound of {key[0]}, {key[1]} sweeps: failed: {err}", file=sys.stderr, flush=True)
            bounds[key] = None
            continue
        print(f"numpy bound of {key[0]}, {key[1]} sweeps: {bounds[key]:.3g} s (scipy CSR mat-vec, 1 core, best of 3"
              f"{'; cached' if cached else ''})", file=sys.stderr, flush=True)
    for path, case, sc in pending:
        print(f"run {path.stem}", file=sys.stderr, flush=True)
        try:
            measured: dict[str, Any] = {}
            summary, seconds = run_hermes(sc, timeout=args.timeout, processes=args.processes, measured=measured)
        except RuntimeError as err:
            print(f"  failed: {err}", file=sys.stderr)
            continue
        bound = bounds[(case["mesh"], case["phases"] * case["iterations"])]
        r = row(summary, **case)
        print(f"  total {r['total_time']:.4f} s, imbalance {r['imbalance_max']:.3f}, cut "
              f"{r['edge_cut_phases']}, moved {r['distinct_phases']}, {seconds:.0f} s wall, peak RSS "
              f"{measured['peak_rss'] / 2**30:.2f} GiB"
              + (f", numpy bound {bound:.3g} s ({seconds / bound:,.1f} x)" if bound else ""),
              file=sys.stderr, flush=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"case": case, "summary": summary, "seconds": seconds,
                                   "peak_rss": measured["peak_rss"], "bound_seconds": bound}))
        tmp.replace(path)
    return 0


def load(out: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(out.glob("*.json")):
        if path.name.startswith("bound-"):  # numpy_bound's cache
            continue
        data = json.loads(path.read_text())
        r = row(data["summary"], **data["case"])
        # the peak summed resident memory of the job (recorded since the hosted study; absent before)
        r["peak_rss_gib"] = data["peak_rss"] / 2**30 if data.get("peak_rss") else None
        # the numpy lower bound (numpy_bound; absent before the yardstick) and the benchmark's wall against it
        r["bound_seconds"] = data.get("bound_seconds")
        r["wall_vs_bound"] = data["seconds"] / r["bound_seconds"] if r["bound_seconds"] and data.get("seconds") \
            else None
        rows.append(r)
    return rows


def report(args) -> int:
    out = Path(args.out)
    rows = load(out)
    if not rows:
        print(f"no runs in {out}")
        return 1
    order = {m: i for i, m in enumerate(METHODS)}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r.get("setup", "quickstart"), r["mesh"], r["capacities"], r["kind"], r["iterations"],
                           r["phases"]), []).append(r)
    for key in sorted(groups):
        rs = sorted(groups[key], key=lambda r: (r["ranks"], order.get(r["method"], 99)))
        metis = {r["ranks"]: r for r in rs if r["method"] == "metis"}
        for r in rs:
            m = metis.get(r["ranks"])
            r["cut_vs_metis"] = max(a / b for a, b in zip(r["cuts"], m["cuts"])) if m else None
            r["distinct_vs_metis"] = r["distinct_cells"] / m["distinct_cells"] if m and m["distinct_cells"] else None
        setup, mesh, caps, kind, it, phases = key
        print(f"\n### {setup}: {mesh}, {caps} capacities, {kind} adaptation, {it} iterations per phase, {phases} "
              f"phases ({rs[0]['cells']:,} cells)\n")
        print(markdown_table(rs, TABLE))
    with (out / "scale.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    if args.plot:
        plot(rows, Path(args.plot))
    if args.frontier:
        try:
            frontier(rows, Path(args.frontier))
        except ValueError as err:
            print(f"scale.py: {err}", file=sys.stderr)
            return 2
    return 0


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Total time, worst edge cut and distinct cells moved, each relative to METIS, against p, per method (not
    ``none``, which moves nothing), for the two (mesh, capacities, iterations) sets of the weights adaptation with
    the most rank counts (ties: more iterations, then by name: homogeneous before table)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("setup", "quickstart") == "quickstart" and r["kind"] == "weights"]
    keys = {(r["mesh"], r["capacities"], r["iterations"]) for r in rows}
    sets = sorted(keys, key=lambda k: (-len({r["ranks"] for r in rows if (r["mesh"], r["capacities"],
                                                                          r["iterations"]) == k}), -k[2], k))[:2]
    fig, axes = plt.subplots(3, len(sets), figsize=(6 * len(sets), 10), squeeze=False)
    cmap = plt.get_cmap("tab20")
    colours = {m: cmap(i % 20) for i, m in enumerate(METHODS)}
    colours["mincost+compacta+trigger"] = "tab:red"  # the best fair diffusion, drawn to stand out
    for c, key in enumerate(sets):
        rs = [r for r in rows if (r["mesh"], r["capacities"], r["iterations"]) == key]
        metis = {(r["ranks"]): r for r in rs if r["method"] == "metis"}
        for method in [m for m in METHODS if m not in ("none", "metis") and any(r["method"] == m for r in rs)]:
            mine = sorted((r for r in rs if r["method"] == method and r["ranks"] in metis), key=lambda r: r["ranks"])
            if len(mine) < 2:  # a variant measured at one p only is in the tables, not in the plot
                continue
            ps = [r["ranks"] for r in mine]
            style = "-o" if method in ("auto+compact+trigger", "mincost+compacta+trigger") else "--."
            kw = {"label": method, "color": colours[method]}  # one colour per method in every panel
            m = [metis[r["ranks"]] for r in mine]
            axes[0, c].plot(ps, [r["total_time"] / b["total_time"] for r, b in zip(mine, m)], style, **kw)
            axes[1, c].plot(ps, [max(x / y for x, y in zip(r["cuts"], b["cuts"])) for r, b in zip(mine, m)],
                            style, **kw)
            axes[2, c].plot(ps, [r["distinct_cells"] / max(b["distinct_cells"], 1) for r, b in zip(mine, m)],
                            style, **kw)
        for ax in axes[:, c]:
            ax.set_xscale("log", base=2)
            ax.axhline(1.0, color="k", lw=0.8, label="METIS")
            ax.set_xlabel("ranks p")
        axes[0, c].set_title(f"{key[0]}, {key[1]} capacities, {key[2]} iterations/phase")
        axes[0, c].set_ylabel("total time / METIS's")
        lo, hi = axes[0, c].get_ylim()
        if hi > 10.0 * max(lo, 0.1):  # one method far off (chebyshev's eigensolve at 1,024): log scale keeps the rest
            axes[0, c].set_yscale("log")
        axes[1, c].set_ylabel("edge cut / METIS's (worst phase)")
        axes[1, c].axhline(1.1, color="r", lw=0.5, ls=":")
        axes[2, c].set_ylabel("distinct cells moved / METIS's")
        axes[2, c].axhline(0.5, color="r", lw=0.5, ls=":")
    for ax in axes[0, :]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=80)
    tmp.replace(path)


def frontier(rows: list[dict[str, Any]], path: Path, ranks: int = 64) -> None:
    """The trade of migration against cut at ``ranks`` (grid, homogeneous, 200 iterations): every method's
    distinct cells moved and worst-phase edge cut, both relative to METIS, one point each (red: the least-cost
    flow, blue: the other flows, purple: Scotch; the star: the recommended setting); filled where its total time
    is at most METIS's, hollow where slower; the issue's target is the box x ≤ 0.5, y ≤ 1.1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [r for r in rows if r.get("setup", "quickstart") == "quickstart" and r["kind"] == "weights"
          and r["capacities"] == "homo" and r["iterations"] == 200 and r["phases"] == 3 and r["ranks"] == ranks
          and r["mesh"].startswith("grid")]
    metis = next((r for r in rs if r["method"] == "metis"), None)
    if metis is None:
        raise ValueError(f"frontier: no METIS run at {ranks} ranks in the cache")
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    best = "mincost+compacta+trigger"
    labelled: list[tuple[float, float]] = []  # a point near a labelled one stays unlabelled (the tables name it)
    for r in sorted(rs, key=lambda r: (r["method"] != best, r["method"])):
        if r["method"] in ("none", "metis"):
            continue
        x = r["distinct_cells"] / max(metis["distinct_cells"], 1)
        y = max(a / b for a, b in zip(r["cuts"], metis["cuts"]))
        family = "tab:purple" if r["method"].startswith("scotch") else (
            "tab:red" if r["method"].startswith("mincost") else "tab:blue")
        faster = r["total_time"] <= metis["total_time"]
        ax.plot(x, y, "*" if r["method"] == best else "o", ms=12 if r["method"] == best else 6, color=family,
                mfc=family if faster else "none")
        if all(abs(x - a) > 0.04 or abs(y - b) > 0.03 for a, b in labelled):
            labelled.append((x, y))
            ax.annotate(r["method"], (x, y), fontsize=6, xytext=(4, 2), textcoords="offset points")
    ax.plot(1.0, 1.0, "ks")
    ax.annotate("METIS", (1.0, 1.0), fontsize=7, xytext=(3, -8), textcoords="offset points")
    ax.fill_between([0.0, 0.5], 0.0, 1.1, color="g", alpha=0.12, label="the target: cells ≤ 0.5×, cut ≤ 1.1×")
    ax.set_xlim(0.0, 1.05)
    ax.set_ylim(0.9, None)
    ax.set_xlabel("distinct cells moved / METIS's (all phases)")
    ax.set_ylabel("edge cut / METIS's (worst phase)")
    ax.set_title(f"{metis['mesh']}, {ranks} ranks, homogeneous, 200 iterations/phase: filled = total time ≤ METIS's",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=90)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["run", "report"], nargs="?", default="run")
    ap.add_argument("--out", default="runs/scale", help="cache directory (one JSON per run) and scale.csv")
    ap.add_argument("--setup", default="quickstart", choices=SETUPS)
    ap.add_argument("--meshes", default="grid160x120", help="comma list: gridNxM or names in meshes/")
    ap.add_argument("--ranks", default="8,16,32,64")
    ap.add_argument("--capacities", default="homo", help="comma list: homo, table")
    ap.add_argument("--kinds", default="weights", help="comma list: weights, refine")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"comma list of {', '.join(METHODS)}")
    ap.add_argument("--iterations", type=int, default=200, help="solver iterations per phase")
    ap.add_argument("--phases", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--processes", type=int, default=None,
                    help="MPI processes hosting each run's processors (default: hermes' own, one per processor up to "
                    "the cores; the results do not depend on it)")
    ap.add_argument("--plot", default=None, help="report: write the plot here")
    ap.add_argument("--frontier", default=None, help="report: write the migration / cut plot at 64 ranks here")
    ap.add_argument("--quick", action="store_true", help="CI smoke: 40x30 grid, 4 ranks, pcg and auto+refine")
    args = ap.parse_args(argv)
    if args.quick:
        with tempfile.TemporaryDirectory(prefix="hermes-scale-") as tmp:
            args.out, args.meshes, args.ranks, args.capacities = tmp, "grid40x30", "4", "homo"
            args.methods, args.iterations, args.phases, args.timeout = "pcg,auto+compact+trigger", 2, 1, 300.0
            run(args)
            return report(args)
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    raise SystemExit(main())
