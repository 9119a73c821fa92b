"""``hermes trace replay``'s outputs: a directory with the tidy rows, a summary, a table, a plot and, if asked, the
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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hermes.progress import Progress, quiet
from hermes.trace.lbdatafile import write_trace
from hermes.trace.trace_phase import Trace
from hermes.trace.replay import ReplayTable, replay_trace
from hermes.trace.workmodel import WorkModel

__all__ = ["replay_to_dir", "replay_json", "format_table", "COLUMNS"]

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


def _table_line(r: dict[str, Any]) -> str:
    return "| " + " | ".join(_fmt(r.get(k), f) for k, _, f in _TABLE) + " |"


def _table_head() -> str:
    return "| " + " | ".join(h for _, h, _ in _TABLE) + " |\n|" + "|".join("---" for _ in _TABLE) + "|"


def format_table(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the columns of ``table.md``)."""
    return "\n".join([_table_head(), *map(_table_line, rows)]) + "\n"


def _plot(table: ReplayTable, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hermes.files import write_through

    x = table.trace.flat.phase_ids
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    style = {"marker": "o"} if x.size <= 1000 else {}
    axes[0].plot(x, table.before["imbalance"], "k--", label="trace", **style)
    axes[0].plot(x, table.before["imbalance_floor"], ":", color="grey", label="floor (heaviest object)")
    axes[1].plot(x, table.before["offrank_bytes"], "k--", label="trace", **style)
    style = {"marker": "."} if x.size <= 1000 else {}
    for a in table.algorithms:
        axes[0].plot(x, table.after[a]["imbalance"], label=a, **style)
        axes[1].plot(x, table.after[a]["offrank_bytes"], label=a, **style)
        axes[2].plot(x, table.moved(a)[0], label=a, **style)
    for ax, label in zip(axes, ("imbalance (max / mean load)", "off-rank bytes", "objects moved")):
        ax.set_xlabel("phase")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    write_through(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def _json_row(r: dict[str, Any]) -> str:
    return json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()},
                      allow_nan=False)


def replay_json(meta: dict[str, Any], rows: Iterable[dict[str, Any]]) -> str:
    """replay.json's text: ``meta`` with its ``rows`` as strict JSON (non-finite numbers as null), one row a
    line — the rows go through json's C encoder (an indented document of 10⁵ rows takes ten times as long)."""
    return json.dumps(meta, indent=2, allow_nan=False)[:-2] + ',\n  "rows": [\n' + ",\n".join(
        map(_json_row, rows)) + "\n  ]\n}\n"


def _stream(files: list[tuple[Path, str, str, str]], lines: Iterator[tuple[str, ...]]) -> None:
    """Write each file of ``files`` — (path, head, separator, tail) — atomically, with the lines of each tuple
    of ``lines`` in turn: one pass over the rows for every file, a row at a time."""
    from hermes.files import write_through

    def fill(tmps: list[str]) -> None:
        handles = [open(t, "w", encoding="utf-8", newline="") for t in tmps]
        try:
            for f, (_, head, _, _) in zip(handles, files):
                f.write(head)
            for k, row in enumerate(lines):
                for f, (_, _, sep, _), line in zip(handles, files, row):
                    f.write(line if k == 0 else sep + line)
            for f, (_, _, _, tail) in zip(handles, files):
                f.write(tail)
        finally:
            for f in handles:
                f.close()

    def nest(i: int, tmps: list[str]) -> None:  # each file through its own private directory, then renamed
        if i == len(files):
            fill(tmps)
        else:
            write_through(files[i][0], lambda tmp: nest(i + 1, tmps + [tmp]))

    nest(0, [])


def replay_to_dir(trace: Trace, algorithms: list[str], out: Path, *, params: dict[str, dict[str, Any]] | None = None,
                  graph: str = "auto", capacities: Any = None, work_model: WorkModel | None = None, seed: int = 0,
                  rounds: int = 3, trigger: float = 1.0, realisation: str = "auto", memory_step: str = "refine",
                  write_traces: bool = False, compress: bool = False, plot: bool = True,
                  say=lambda s: None, progress: Progress | None = None) -> ReplayTable:
    """Replay ``algorithms`` on ``trace`` (:func:`~hermes.trace.replay.replay_trace`) and write the directory of
    the module docstring into ``out`` (an existing, claimed directory), each file a row at a time; the table
    (:meth:`~hermes.trace.replay.ReplayTable.rows` gives the rows). ``say`` gets a line per row; ``progress``
    (a :class:`~hermes.progress.Progress`) the step in progress: the replay's, then the files written and the
    picture drawn."""
    import csv
    import io
    import platform

    import scipy

    from hermes.claims import subdir
    from hermes.files import slug
    from hermes.version import __version__

    wm = work_model or WorkModel()
    shown = progress if progress is not None else quiet()
    table = replay_trace(trace, algorithms, params, graph=graph, capacities=capacities, work_model=wm, seed=seed,
                         rounds=rounds, trigger=trigger, realisation=realisation, memory_step=memory_step,
                         progress=shown)
    columns = COLUMNS + sorted(table.keys() - set(COLUMNS))

    def lines() -> Iterator[tuple[str, str, str]]:  # (csv, json, table) of each row
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="")
        for row in table.iter_rows():
            say(f"phase {row['phase']} {row['algorithm']}: imbalance {row['imbalance_before']:.4f} → "
                f"{row['imbalance_after']:.4f} (floor {row['imbalance_floor']:.4f}), {row['objects_moved']} objects "
                f"moved, off-rank bytes {row['offrank_bytes_before']:.6g} → {row['offrank_bytes_after']:.6g}")
            w.writerow([f"{v:.12g}" if isinstance(v, float) else v for v in map(row.get, columns)])
            yield buf.getvalue(), _json_row(row), _table_line(row)
            buf.seek(0)
            buf.truncate()

    meta = {"trace": trace.stem, "ranks": trace.n_ranks, "phases": trace.phase_ids, "compressed": trace.compressed,
            "algorithms": algorithms, "params": params or {}, "graph": graph, "seed": seed, "rounds": rounds,
            "trigger": trigger, "realisation": realisation, "memory_step": memory_step,
            "capacities": None if capacities is None else [float(c) for c in capacities],
            "work_model": {"alpha": wm.alpha, "beta": wm.beta, "gamma": wm.gamma, "delta": wm.delta,
                           "memory_limit": wm.memory_limit},
            "non_finite": "work is infinite on a rank above the memory limit: written as null here, inf in the CSV",
            "versions": {"hermes": __version__, "python": platform.python_version(), "numpy": np.__version__,
                         "scipy": scipy.__version__}}
    shown.status(f"writing replay.csv, replay.json and table.md in {out}")
    _stream([(out / "replay.csv", ",".join(columns) + "\n", "\n", "\n"),
             (out / "replay.json", json.dumps(meta, indent=2, allow_nan=False)[:-2] + ',\n  "rows": [\n', ",\n",
              "\n  ]\n}\n"),
             (out / "table.md", _table_head() + "\n", "\n", "\n")], lines())
    if plot and trace.flat.n_phases:
        shown.status(f"drawing {out / 'replay.png'}")
        _plot(table, out / "replay.png", f"{Path(trace.stem).name}: {trace.n_ranks} ranks, "
                                         f"{len(trace.phases):,} phase(s)")
    if write_traces:
        name = Path(trace.stem).name
        flat = trace.flat
        for i, a in enumerate(algorithms, 1):
            shown.status(f"writing the trace balanced by {a} in {out / 'traces' / slug(a)}", i, len(algorithms))
            phases = [flat.phase(k).with_ranks(table.ranks[a][flat.tasks_of(int(b))])
                      for k, b in enumerate(flat.block.tolist())]
            write_trace(subdir(out, "traces", slug(a)) / name, phases, compress=compress)
    shown.status(None)
    return table
