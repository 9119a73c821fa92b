"""A hermes run as a vt LBDatafile trace (``output.lbdatafile``, ``hermes trace write RUN_DIR``), and the gossip
lab's assignments as one (``hermes lab gossip --write-trace``).

Phase ``k`` of the trace (ids 1…K, hermes' phase numbers) is the state the balancer of phase ``k`` saw: the
cells on the ranks that held them when the phase's adaptation was done (the assignment after phase ``k − 1``),
with their weights of phase ``k``. Per task:

- ``time``: the task's work in seconds of the platform's average processor, ``weight × work_per_weight ×
  iterations / platform.speed`` — what the phase's solver iterations cost it on an average processor (under
  the virtual clock a rank's compute time is the sum of its tasks' times divided by its relative speed);
- ``home``: the rank that held it in the initial partition; ``node``: its rank in the phase;
- ``user_defined``: ``x``, ``y`` (and ``z``): the centroid of the cells (so a replay can draw and choose
  cells as hermes does);
- communications: every mesh edge between two tasks, both ways, ``messages`` = the solver iterations,
  ``bytes`` = their halo bytes (``bytes_per_edge × iterations``), listed in the sender's file.

Each rank's file carries the phase's capacity of the rank in the phase's ``user_defined``
(``hermes_capacity``: relative speeds summing to 1), which ``hermes trace replay`` takes as the capacities, so a
replay's imbalance is the run's. With ``cells_per_block: K`` the tasks are blocks of about K cells instead
of cells (a fixed partition of the mesh by METIS, a block split between ranks being one task per piece, id
``block × P + rank``), for meshes whose cells would make files of hundreds of megabytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.bounds import MAX_TRACE_TASKS
from hermes.errors import HermesError
from hermes.trace.lbdatafile import check_new_trace, write_trace
from hermes.trace.trace_phase import Trace, TraceError, TracePhase

__all__ = ["trace_from_run", "write_run_trace", "trace_from_assignments", "TRACE_DIR", "TRACE_STEM",
           "MAX_TRACE_TASKS"]

#: where a run's trace goes: ``<run>/lbdatafile/data.<rank>.json`` (vt's default stem)
TRACE_DIR = "lbdatafile"
TRACE_STEM = "data"


def _blocks(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], cells_per_block: int, seed: int) -> NDArray[np.int64]:
    from hermes.data.partition import metis_partition

    n = xadj.size - 1
    nb = max(1, math.ceil(n / cells_per_block))
    if nb == 1:
        return np.zeros(n, dtype=np.int64)
    return metis_partition(xadj, adjncy, None, nb, seed=seed).astype(np.int64)


def _phase(k: int, p: int, owner: NDArray[np.int64], home_owner: NDArray[np.int64], times: NDArray[np.float64],
           xadj: NDArray[np.int64], adjncy: NDArray[np.int64], coords: NDArray[np.float64], caps: NDArray[np.float64],
           msgs: int, edge_bytes: float, block: NDArray[np.int64] | None) -> TracePhase:
    n = owner.size
    u = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
    v = adjncy.astype(np.int64)
    if block is None:  # tasks are cells
        ids = np.arange(n, dtype=np.int64)
        task_of = ids
        loads, ranks, home = times, owner, home_owner
        cent = coords
    else:  # tasks are (block, rank) pieces
        key = block * p + owner
        ids, task_of = np.unique(key, return_inverse=True)
        loads = np.bincount(task_of, weights=times, minlength=ids.size)
        ranks = ids % p
        # home: the rank holding most of the block's cells initially
        bh = np.zeros((int(block.max()) + 1, p))
        np.add.at(bh, (block, home_owner), 1.0)
        home = np.argmax(bh, axis=1)[ids // p]
        cnt = np.bincount(task_of, minlength=ids.size).astype(np.float64)
        cent = np.stack([np.bincount(task_of, weights=coords[:, d], minlength=ids.size) / cnt
                         for d in range(coords.shape[1])], axis=1)
    a, b = task_of[u], task_of[v]
    keep = a != b
    a, b = a[keep], b[keep]
    pairs, count = np.unique(np.stack([a, b], axis=1), axis=0, return_counts=True) if a.size else \
        (np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))
    user = {"x": cent[:, 0].astype(np.float64), "y": cent[:, 1].astype(np.float64)}
    if cent.shape[1] > 2:
        user["z"] = cent[:, 2].astype(np.float64)
    # the sender's rank lists the message; pairs are (from, to) in order
    return TracePhase(p, ids.astype(np.int64), np.asarray(loads, dtype=np.float64), np.asarray(ranks, dtype=np.int64),
                      np.asarray(home, dtype=np.int64), np.ones(ids.size, dtype=bool), int(k),
                      ids[pairs[:, 0]], ids[pairs[:, 1]], count.astype(np.int64) * msgs,
                      count.astype(np.float64) * edge_bytes, np.asarray(ranks)[pairs[:, 0]],
                      np.asarray(ranks)[pairs[:, 1]], np.zeros(ids.size, dtype=np.int64), None, user=user,
                      rank_user={"hermes_capacity": np.asarray(caps, dtype=np.float64)})


def trace_from_run(run_dir: str | Path, *, cells_per_block: int | None = None) -> Trace:
    """The trace of the run in ``run_dir`` (module docstring), from its scenario.yaml, geometry.npz,
    partitions.npz and phases.csv.

    Raises
    ------
    TraceError
        One line: not a run directory with recorded partitions (``output.partitions``), a refining run (its
        cells change from phase to phase: not written yet), too many tasks for a file without
        ``cells_per_block``.
    """
    import csv

    from hermes.files import read_summary
    from hermes.loaders import load_yaml

    d = Path(run_dir)
    summary = read_summary(d)
    if summary is None:
        raise TraceError(f"{d}: not a hermes run directory (no summary.json)")
    if summary.get("adaptation") == "refine":
        raise TraceError(f"{d}: a refining run's cells change from phase to phase; its trace is not written yet "
                         f"(adaptation.kind weights runs are)")
    if not (d / "partitions.npz").is_file() or not (d / "geometry.npz").is_file():
        raise TraceError(f"{d}: no partitions.npz/geometry.npz: the run did not record its partitions "
                         f"(output.partitions: true)")
    doc = load_yaml(d / "scenario.yaml")
    app, plat = doc.get("application") or {}, doc.get("platform") or {}
    its = int(app.get("iterations", 20))
    per_time = float(app.get("work_per_weight", 1.0)) * its / float(plat.get("speed", 1.0e6))
    edge_bytes = float(app.get("bytes_per_edge", 64.0)) * its
    p = int(summary["processors"])
    try:
        geo = np.load(d / "geometry.npz", allow_pickle=False)
        parts = np.load(d / "partitions.npz", allow_pickle=False)
        xadj, adjncy, coords = geo["xadj"].astype(np.int64), geo["adjncy"].astype(np.int64), geo["coords"]
        phases = sorted(int(k.split("_")[1]) for k in parts.files if k.startswith("owner_"))
        owners = {k: parts[f"owner_{k:03d}"].astype(np.int64) for k in phases}
        weights = {k: parts[f"weight_{k:03d}"].astype(np.float64) for k in phases}
    except (OSError, KeyError, ValueError) as err:
        raise TraceError(f"{d}: cannot read the recorded partitions ({err})") from None
    caps: dict[int, NDArray[np.float64]] = {}
    with open(d / "phases.csv", newline="") as f:
        for row in csv.DictReader(f):
            caps.setdefault(int(row["phase"]), np.zeros(p))[int(row["rank"])] = float(row["capacity"])
    n = xadj.size - 1
    if cells_per_block is None and n > MAX_TRACE_TASKS:
        raise TraceError(f"{d}: {n} cells are more tasks than a trace file should hold ({MAX_TRACE_TASKS}): write "
                         f"blocks of cells (output.lbdatafile.cells_per_block, hermes trace write "
                         f"--cells-per-block K)")
    block = None if cells_per_block is None else _blocks(xadj, adjncy, int(cells_per_block),
                                                          int(doc.get("seed", 0)))
    out = []
    for k in phases[1:]:
        c = caps.get(k)
        if c is None or c.sum() <= 0:
            raise TraceError(f"{d}: phases.csv has no capacities for phase {k}")
        out.append(_phase(k, p, owners[k - 1], owners[0], weights[k] * per_time, xadj, adjncy, coords, c / c.sum(),
                          its, edge_bytes, block))
    if not out:
        raise TraceError(f"{d}: the run recorded no phase")
    return Trace(p, out, str(d / TRACE_DIR / TRACE_STEM))


def write_run_trace(run_dir: str | Path, stem: str | Path | None = None, *, cells_per_block: int | None = None,
                    compress: bool = False) -> list[Path]:
    """Write :func:`trace_from_run` as ``<stem>.<r>.json`` (default ``<run>/lbdatafile/data``)."""
    trace = trace_from_run(run_dir, cells_per_block=cells_per_block)
    if stem is None:  # in the run's own directory: a real subdirectory (a symlink planted there is refused)
        from hermes.claims import MARKER, read_marker, subdir

        if read_marker(run_dir) != "run":
            raise TraceError(f"{run_dir}: not a run directory hermes made (no {MARKER} marker): give --out STEM")
        target = subdir(run_dir, TRACE_DIR) / TRACE_STEM
    else:
        target = Path(stem)
        check_new_trace(target, trace.n_ranks)
    return write_trace(target, trace, compress=compress)


def trace_from_assignments(loads: Any, assignments: list[Any], n_ranks: int) -> Trace:
    """A trace whose phase ``k`` (ids 0, 1, …) has the objects ``0..n−1`` with ``loads`` on the ranks
    ``assignments[k]`` (homes: the first), e.g. the gossip lab's initial and final assignments."""
    ell = np.asarray(loads, dtype=np.float64).ravel()
    first = np.asarray(assignments[0], dtype=np.int64).ravel()
    phases = []
    for k, a in enumerate(assignments):
        r = np.asarray(a, dtype=np.int64).ravel()
        if r.shape != ell.shape:
            raise HermesError(f"assignment {k}: {r.size} ranks for {ell.size} objects")
        phases.append(TracePhase(int(n_ranks), np.arange(ell.size, dtype=np.int64), ell, r, first,
                                 np.ones(ell.size, dtype=bool), k))
    return Trace(int(n_ranks), phases)
