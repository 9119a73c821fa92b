"""``hermes replay``'s outputs: a directory with the tidy rows, a summary, a table, a plot and, if asked, the
balanced traces.

The directory (``--out``, default ``runs/replay-<stem>-<timestamp>``) holds ``replay.csv`` (one row per phase and
algorithm: every figure before and after, the balancer's iterations, objects and load moved, seconds),
``replay.json`` (the trace, the options, the rows), ``table.md`` (the rows as Markdown), ``replay.png``
(imbalance, off-rank communication and objects moved per phase, one line per algorithm) and, with
``write_traces``, ``traces/<algorithm>/<stem>.<r>.json``: the phases with the balanced assignment, as an
LBDatafile LBAF and vt-tv read.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from hermes.trace.lbdatafile import write_trace
from hermes.trace.phase import Trace
from hermes.trace.replay import ReplayTable, replay_trace
from hermes.trace.workmodel import WorkModel

__all__ = ["replay_to_dir", "format_table", "COLUMNS"]

#: the columns of replay.csv, in order
COLUMNS = ["phase", "algorithm", "tasks", "imbalance_before", "imbalance_after", "lbaf_imbalance_before",
           "lbaf_imbalance_after", "imbalance_floor", "load_max_before", "load_max_after", "load_mean_before",
           "offrank_bytes_before", "offrank_bytes_after", "local_bytes_before", "local_bytes_after",
           "pair_volume_max_before", "pair_volume_max_after", "comm_max_before", "comm_max_after",
           "memory_max_before", "memory_max_after", "memory_over_before", "memory_over_after", "homing_before",
           "homing_after", "work_max_before", "work_max_after", "work_mean_before", "work_mean_after",
           "work_lbaf_imbalance_before", "work_lbaf_imbalance_after", "objects_moved", "load_moved", "iterations",
           "graph_used", "realisation_used", "rounds_done", "seconds"]

_TABLE = [("phase", "phase", "{}"), ("algorithm", "algorithm", "{}"), ("imbalance_before", "imbalance before", "{:.4f}"),
          ("imbalance_after", "after", "{:.4f}"), ("imbalance_floor", "floor", "{:.4f}"),
          ("offrank_bytes_before", "off-rank bytes before", "{:.6g}"), ("offrank_bytes_after", "after", "{:.6g}"),
          ("objects_moved", "objects moved", "{}"), ("work_max_after", "max work after", "{:.6g}"),
          ("memory_max_after", "max memory after", "{:.6g}"), ("iterations", "iterations", "{}"),
          ("graph_used", "graph", "{}")]


def _fmt(v: Any, spec: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "" if v is None else str(v)
    try:
        return spec.format(v)
    except (ValueError, TypeError):
        return str(v)


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the columns of ``table.md``)."""
    head = "| " + " | ".join(h for _, h, _ in _TABLE) + " |"
    sep = "|" + "|".join("---" for _ in _TABLE) + "|"
    body = ["| " + " | ".join(_fmt(r.get(k), f) for k, _, f in _TABLE) + " |" for r in rows]
    return "\n".join([head, sep, *body]) + "\n"


def _plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hermes.files import write_through

    algos = list(dict.fromkeys(r["algorithm"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    first = [r for r in rows if r["algorithm"] == algos[0]]
    x = [r["phase"] for r in first]
    axes[0].plot(x, [r["imbalance_before"] for r in first], "k--", marker="o", label="trace")
    axes[0].plot(x, [r["imbalance_floor"] for r in first], ":", color="grey", label="floor (heaviest object)")
    axes[1].plot(x, [r["offrank_bytes_before"] for r in first], "k--", marker="o", label="trace")
    for a in algos:
        mine = [r for r in rows if r["algorithm"] == a]
        xs = [r["phase"] for r in mine]
        axes[0].plot(xs, [r["imbalance_after"] for r in mine], marker=".", label=a)
        axes[1].plot(xs, [r["offrank_bytes_after"] for r in mine], marker=".", label=a)
        axes[2].plot(xs, [r["objects_moved"] for r in mine], marker=".", label=a)
    for ax, label in zip(axes, ("imbalance (max / mean load)", "off-rank bytes", "objects moved")):
        ax.set_xlabel("phase")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    write_through(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def _json_rows(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """``meta`` with its ``rows`` as strict JSON (non-finite numbers as null), one row a line: the rows go
    through json's C encoder (an indented document of 10⁵ rows takes it ten times as long)."""
    head = json.dumps(meta, indent=2, allow_nan=False)
    body = ",\n".join(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                  for k, v in r.items()}, allow_nan=False) for r in rows)
    return head[:-2] + ',\n  "rows": [\n' + body + "\n  ]\n}\n"


def replay_to_dir(trace: Trace, algorithms: list[str], out: Path, *, params: dict[str, dict[str, Any]] | None = None,
                  graph: str = "auto", capacities: Any = None, work_model: WorkModel | None = None, seed: int = 0,
                  rounds: int = 3, trigger: float = 1.0, realisation: str = "auto", write_traces: bool = False,
                  compress: bool = False, plot: bool = True, say=lambda s: None) -> tuple[list[dict[str, Any]],
                                                                                           ReplayTable]:
    """Replay ``algorithms`` on ``trace`` (:func:`~hermes.trace.replay.replay_trace`) and write the directory of
    the module docstring into ``out`` (an existing, claimed directory); the rows and the table."""
    import platform

    import scipy

    from hermes.claims import subdir
    from hermes.files import slug, write_atomic, write_csv
    from hermes.version import __version__

    wm = work_model or WorkModel()
    table = replay_trace(trace, algorithms, params, graph=graph, capacities=capacities, work_model=wm, seed=seed,
                         rounds=rounds, trigger=trigger, realisation=realisation)
    rows = table.rows()
    for row in rows:
        say(f"phase {row['phase']} {row['algorithm']}: imbalance {row['imbalance_before']:.4f} → "
            f"{row['imbalance_after']:.4f} (floor {row['imbalance_floor']:.4f}), {row['objects_moved']} objects "
            f"moved, off-rank bytes {row['offrank_bytes_before']:.6g} → {row['offrank_bytes_after']:.6g}")
    extra = sorted({k for r in rows for k in r} - set(COLUMNS))
    write_csv(out / "replay.csv", rows, COLUMNS + extra)
    meta = {"trace": trace.stem, "ranks": trace.n_ranks, "phases": trace.phase_ids, "compressed": trace.compressed,
            "algorithms": algorithms, "params": params or {}, "graph": graph, "seed": seed, "rounds": rounds,
            "trigger": trigger, "realisation": realisation,
            "capacities": None if capacities is None else [float(c) for c in capacities],
            "work_model": {"alpha": wm.alpha, "beta": wm.beta, "gamma": wm.gamma, "delta": wm.delta,
                           "memory_limit": wm.memory_limit},
            "non_finite": "work is infinite on a rank above the memory limit: written as null here, inf in the CSV",
            "versions": {"hermes": __version__, "python": platform.python_version(), "numpy": np.__version__,
                         "scipy": scipy.__version__}}
    write_atomic(out / "replay.json", _json_rows(meta, rows))
    write_atomic(out / "table.md", format_table(rows))
    if plot and rows:
        _plot(rows, out / "replay.png", f"{Path(trace.stem).name}: {trace.n_ranks} ranks, "
                                        f"{len(trace.phases):,} phase(s)")
    if write_traces:
        name = Path(trace.stem).name
        flat = trace.flat
        for a in algorithms:
            phases = [flat.phase(k).with_ranks(table.ranks[a][flat.tasks_of(int(b))])
                      for k, b in enumerate(flat.block.tolist())]
            write_trace(subdir(out, "traces", slug(a)) / name, phases, compress=compress)
    return rows, table
