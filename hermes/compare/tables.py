"""The results of an experiment as a researcher wants them: tidy rows, per-phase rows and the thesis-style table.

``results.csv`` has one row per run: a column per axis (its label; numbers stay numbers), the run's status and
error line, every scalar figure of its ``summary.json`` and the per-phase figures summed over the phases
(times per category, migration volume: ``cells_moved``, the distinct cells that changed owner, and
``cell_sends``, the cells migration messages carried; ``migration_cells`` and ``migrated_cells`` are their
deprecated aliases) with the final edge cut. ``phases.csv`` has one row per run and phase.
``table.md`` is laid out like thesis Tables 10.5 and 10.7: rows are the combinations of the other axes
(scenarios, meshes, ...), columns the balancers, a cell the total time with the final imbalance in
parentheses; then the ratio of each total to the ``none`` column and to the best of its row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes.metrics import cell_sends, cells_moved

__all__ = ["run_row", "phase_rows", "Grid", "make_grid", "markdown_tables", "SUMS", "format_time"]

#: per-phase figures summed over the phases into results.csv (the time categories add up to total_time)
SUMS = ("compute_time", "comm_time", "sync_time", "balance_time", "migrate_time", "adapt_time", "migrated_weight",
        "balance_iterations", "balance_rounds", "refined", "coarsened")
#: the partition's quality figures summed over the phases (migration volume: cells that changed owner;
#: ``migration_cells`` is ``cells_moved``'s deprecated alias)
QUALITY_SUMS = ("migration_cells", "migration_weight", "migration_bytes")
#: the movement of cells summed over the phases (docs/RUNNING.md), each read by its reader in hermes.metrics,
#: so summaries written before these keys give them too
MOVEMENT = {"cells_moved": cells_moved, "cell_sends": cell_sends}
#: summary keys an axis of the same name replaces in the tidy rows (the axis' value is the same thing)
_AXIS_WINS = ("scenario", "mesh", "processors", "seed", "clock", "kernel")


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def run_row(run_id: str, values: Mapping[str, Any], status: str, error: str | None,
            summary: Mapping[str, Any] | None, run_dir: str) -> dict[str, Any]:
    """One row of results.csv (see the module docstring)."""
    row: dict[str, Any] = {"run": run_id, **values, "status": status, "error": error or "", "run_dir": run_dir}
    if summary is None:
        return row
    for k, v in summary.items():
        if k == "balancer":
            row["algorithm"] = v
        elif k in values and k in _AXIS_WINS:
            continue
        elif _scalar(v) and k not in row:
            row[k] = v
    for k, v in (summary.get("balancer_params") or {}).items():
        if _scalar(v):
            row[f"param.{k}"] = v
    phases = [p for p in summary.get("phases") or [] if isinstance(p, dict)]
    row["phases"] = len(phases)
    for k in SUMS:
        vals = [p[k] for p in phases if isinstance(p.get(k), (int, float))]
        if vals:
            row[k] = sum(vals)
    for k in QUALITY_SUMS:
        vals = [(p.get("quality") or {}).get(k) for p in phases]
        if vals and all(isinstance(v, (int, float)) for v in vals):
            row[k] = sum(vals)
    for k, read in MOVEMENT.items():
        vals = [read(p) for p in phases]
        if vals and all(_number(v) for v in vals):
            row[k] = sum(vals)
    if phases:
        last = phases[-1]
        row["edge_cut_final"] = last.get("edge_cut")
        cuts = [p.get("edge_cut") for p in phases if isinstance(p.get("edge_cut"), (int, float))]
        row["edge_cut_max"] = max(cuts) if cuts else None
        before = [p.get("imbalance_before") for p in phases if isinstance(p.get("imbalance_before"), (int, float))]
        row["imbalance_before_max"] = max(before) if before else None
    return row


def phase_rows(run_id: str, values: Mapping[str, Any], summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of phases.csv for one run: every scalar per-phase figure, ``quality.*`` and ``counters.*``."""
    out = []
    for p in summary.get("phases") or []:
        if not isinstance(p, dict):
            continue
        row: dict[str, Any] = {"run": run_id, **values}
        for k, v in p.items():
            if _scalar(v) and k not in row:
                row[k] = v
        for k, read in MOVEMENT.items():  # a summary written before these keys
            if k not in row and _number(read(p)):
                row[k] = read(p)
        for prefix, key in (("quality", "quality"), ("counters", "balance_counters")):
            for k, v in (p.get(key) or {}).items():
                if _scalar(v):
                    row[f"{prefix}.{k}"] = v
        out.append(row)
    return out


def columns_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of the rows, in order of first appearance."""
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r))
    return list(seen)


# -- the thesis-style table ---------------------------------------------------------------------------------
@dataclass
class Grid:
    """The results arranged as the table: ``cells[(row, col)]`` lists the runs of that cell (several when
    an axis is averaged, e.g. ``seed``), each a results row."""

    row_axes: list[str]
    col_axis: str | None
    rows: list[str]
    cols: list[str]
    cells: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    averaged: list[str] = field(default_factory=list)
    #: the column of the ``none`` balancer (the reference of the ratio table), if any
    reference: str | None = None

    def ok(self, r: str, c: str) -> list[dict[str, Any]]:
        return [x for x in self.cells.get((r, c), []) if x.get("status") in ("done", "skipped")]

    def mean(self, r: str, c: str, key: str) -> float:
        vals = [float(x[key]) for x in self.ok(r, c) if isinstance(x.get(key), (int, float))]
        return sum(vals) / len(vals) if vals else math.nan

    def summaries(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """The complete runs' summaries per cell (what the plots draw)."""
        return {k: [x["_summary"] for x in self.ok(*k) if x.get("_summary")] for k in self.cells}


def make_grid(rows: Sequence[dict[str, Any]], axes: Sequence[str], col_axis: str | None,
              average: Sequence[str] = ("seed",)) -> Grid:
    """Arrange results rows (with their axis labels under ``_labels``) as the table: ``col_axis`` across,
    the other axes down (their labels joined by `` · ``), the axes in ``average`` (when swept) averaged."""
    averaged = [a for a in axes if a in average and a != col_axis]
    row_axes = [a for a in axes if a != col_axis and a not in averaged]
    g = Grid(row_axes, col_axis, [], [], averaged=averaged)
    for row in rows:
        labels = row["_labels"]
        r = " · ".join(str(labels[a]) for a in row_axes) or "all runs"
        c = str(labels[col_axis]) if col_axis else "result"
        if r not in g.rows:
            g.rows.append(r)
        if c not in g.cols:
            g.cols.append(c)
        g.cells.setdefault((r, c), []).append(row)
        if g.reference is None and row.get("algorithm") == "none" and col_axis == "balancer":
            g.reference = c
    return g


def format_time(v: float) -> str:
    """465.2, 42.13, 0.5475: one decimal from 100 s on, four significant digits below."""
    if not math.isfinite(v):
        return "—"
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.4g}"


def _cell(g: Grid, r: str, c: str) -> str:
    runs = g.cells.get((r, c), [])
    if not runs:
        return "—"
    if not g.ok(r, c):
        return "failed" if any(x.get("status") == "failed" for x in runs) else "not run"
    t, imb = g.mean(r, c, "total_time"), g.mean(r, c, "final_imbalance")
    text = f"{format_time(t)} s ({imb:.2f})"
    if len(g.ok(r, c)) < len(runs):
        text += f" [{len(runs) - len(g.ok(r, c))} failed]"
    return text


def _ratio_rows(g: Grid, ref: Mapping[str, float]) -> list[list[str]]:
    out = []
    for r in g.rows:
        line = [r]
        for c in g.cols:
            t = g.mean(r, c, "total_time")
            base = ref.get(r, math.nan)
            line.append(f"{t / base:.2f}" if math.isfinite(t) and math.isfinite(base) and base > 0 else "—")
        out.append(line)
    return out


def _md(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def table_blocks(g: Grid) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables as (caption, header, body): total time (imbalance), ratio to ``none``, ratio to the best."""
    head = [" × ".join(g.row_axes) or "runs", *g.cols]
    out = [("", head, [[r, *(_cell(g, r, c) for c in g.cols)] for r in g.rows])]
    if g.reference is not None:
        ref = {r: g.mean(r, g.reference, "total_time") for r in g.rows}
        out.append((f"Total time relative to `{g.reference}` (below 1: faster than not balancing):", head,
                    _ratio_rows(g, ref)))
    if len(g.cols) > 1:
        best = {}
        for r in g.rows:
            ts = [g.mean(r, c, "total_time") for c in g.cols]
            ts = [t for t in ts if math.isfinite(t)]
            best[r] = min(ts) if ts else math.nan
        out.append(("Total time relative to the best of the row (1.00 = the fastest):", head, _ratio_rows(g, best)))
    return out


def markdown_tables(g: Grid, *, title: str, description: str = "", clock: str = "virtual",
                    failures: Sequence[tuple[str, str]] = ()) -> str:
    """table.md: the title, what the numbers are, the tables of :func:`table_blocks` and the failed runs."""
    cols = g.col_axis or "result"
    lines = [f"# {title}", ""]
    if description:
        lines += [description, ""]
    lines += [f"Total simulated time ({clock} clock) with the final imbalance max l_i / l̄_i in parentheses "
              f"(1.00 is fair); rows: {' × '.join(g.row_axes) or 'all runs'}, columns: {cols}"
              + (f"; mean over the {', '.join(g.averaged)} axis" if g.averaged else "") + ".", ""]
    for caption, head, body in table_blocks(g):
        if caption:
            lines += [caption, ""]
        lines += [_md(head, body), ""]
    if failures:
        lines += ["Failed runs:", ""] + [f"- `{run}`: {err}" for run, err in failures] + [""]
    return "\n".join(lines)
