"""The plots of an experiment (``hermes compare``): rows of the table (scenarios, meshes, ...) by columns
(balancers), each cell the summaries of its runs (several when an axis such as ``seed`` is averaged).

- :func:`plot_totals` — total time, bars grouped by row, one colour per column;
- :func:`plot_imbalance` — imbalance after balancing per phase, one panel per row, one line per column;
- :func:`plot_breakdown` — where the time goes (compute, halo exchange, synchronisation, balancing,
  migration, adaptation), stacked bars per column, one panel per row;
- :func:`plot_pareto` — total time against the cells moved, one panel per row, the Pareto front (no other
  balancer is faster *and* moves less) among the balancers that balance drawn and filled; those that do not
  (``none``) marked apart.

matplotlib is imported inside the functions; figures use the Agg canvas, never pyplot. A summary's values
that are not numbers count as missing (a damaged run's summary draws gaps, never a traceback); names are
drawn as text (their dollars escaped, never TeX).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.errors import HermesError
from hermes.metrics import cell_sends, cells_moved
from hermes.viz.partition_picture import check_dpi, plain, rank_colors, save_figure
from hermes.viz.timeline import TIME_PARTS

__all__ = ["plot_totals", "plot_imbalance", "plot_breakdown", "plot_pareto", "pareto_front", "migration_volume",
           "imbalance_reduction", "BALANCE_TOL"]

Cells = Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]

#: panels of a figure (rows of the experiment's table): 3 columns of 3.4-inch rows, within Agg's 65 536 pixels
MAX_PANELS = 300


def _num(x: Any) -> float:
    """A recorded number as a finite float, else NaN (None, booleans, text, infinities, huge integers)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return math.nan
    try:
        f = float(x)
    except OverflowError:
        return math.nan
    return f if math.isfinite(f) else math.nan


def _mean(vals: Sequence[Any]) -> float:
    v = [f for f in map(_num, vals) if math.isfinite(f)]
    return sum(v) / len(v) if v else math.nan


def _phases(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The summary's phase entries that are mappings (a damaged summary may hold anything)."""
    phases = summary.get("phases") if isinstance(summary, Mapping) else None
    return [p for p in phases if isinstance(p, Mapping)] if isinstance(phases, list) else []


def _text(label: Any) -> str:
    """A row or column name as drawn: one line of at most 80 characters, never TeX."""
    return plain(label, 80, tex=True)


def _check(rows: Sequence[str], dpi: object) -> int:
    if len(rows) > MAX_PANELS:
        raise HermesError(f"{len(rows)} rows to draw, more than the {MAX_PANELS} panels of one figure")
    return check_dpi(dpi)


def _colors(cols: Sequence[str]) -> dict[str, tuple]:
    return {c: tuple(rank_colors(len(cols))[i]) for i, c in enumerate(cols)}


def _unit(cells: Cells) -> str:
    clocks = {str(s.get("clock")) for runs in cells.values() for s in runs}
    return "virtual s" if clocks <= {"virtual"} else "s"


def _grid(n: int, width: float = 4.6, height: float = 3.4, ncols: int = 3) -> tuple[int, int, tuple[float, float]]:
    nc = max(1, min(ncols, n))
    nr = max(1, math.ceil(n / nc))
    return nr, nc, (width * nc + 1.5, height * nr + 0.9)


def plot_totals(path: str | os.PathLike[str], rows: Sequence[str], cols: Sequence[str], cells: Cells, *,
                dpi: int = 120) -> Path:
    """Total time per cell as grouped bars (groups: rows; bars: columns), the final imbalance written on each
    bar; a logarithmic axis when the totals span more than a factor 20 (meshes of different sizes)."""
    from matplotlib.figure import Figure

    dpi = _check(rows, dpi)

    colors = _colors(cols)
    fig = Figure(figsize=(max(7.0, 1.1 + 0.35 * len(rows) * (len(cols) + 1)), 4.8), dpi=dpi, layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(len(cols), 1)
    x = np.arange(len(rows))
    totals = []
    for j, c in enumerate(cols):
        t = np.array([_mean([s.get("total_time") for s in cells.get((r, c), [])]) for r in rows])
        imb = [_mean([s.get("final_imbalance") for s in cells.get((r, c), [])]) for r in rows]
        pos = x - 0.4 + width * (j + 0.5)
        bars = ax.bar(pos, np.nan_to_num(t, nan=0.0), width, color=colors[c], label=_text(c),
                      edgecolor="0.3", linewidth=0.4)
        totals.extend(t[np.isfinite(t)])
        if len(rows) * len(cols) <= 60:
            for b, i in zip(bars, imb):
                if math.isfinite(i) and b.get_height() > 0:
                    ax.annotate(f"{i:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 1),
                                textcoords="offset points", ha="center", va="bottom", fontsize=6, rotation=90)
    if totals and max(totals) > 20 * max(min(totals), 1e-300):
        ax.set_yscale("log")
    ax.margins(y=0.12)  # room above the tallest bar for its imbalance label, under the title
    ax.set_xticks(x, [_text(r) for r in rows], rotation=20 if len(rows) > 4 else 0,
                  ha="right" if len(rows) > 4 else "center")
    ax.set_ylabel(f"total time [{_unit(cells)}]")
    ax.set_title("total time (label: final imbalance)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    _legend(fig, cols, colors, line=False, marker="s")
    return save_figure(fig, path)


def _phase_means(runs: Sequence[Mapping[str, Any]], key: str) -> tuple[NDArray, NDArray]:
    by: dict[float, list[float]] = {}
    for s in runs:
        for p in _phases(s):
            k, v = _num(p.get("phase", 0)), _num(p.get(key))
            if math.isfinite(k) and math.isfinite(v):
                by.setdefault(k, []).append(v)
    ks = sorted(by)
    return np.array(ks, dtype=float), np.array([_mean(by[k]) for k in ks])


def plot_imbalance(path: str | os.PathLike[str], rows: Sequence[str], cols: Sequence[str], cells: Cells, *,
                   dpi: int = 120) -> Path:
    """Imbalance after balancing per phase: one panel per row, one line per column (dashed: 1.0, fair)."""
    from matplotlib.figure import Figure

    dpi = _check(rows, dpi)

    colors = _colors(cols)
    nr, nc, size = _grid(len(rows))
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nr, nc, squeeze=False).ravel())
    for ax, r in zip(axes, rows):
        top = 1.0
        for c in cols:
            x, y = _phase_means(cells.get((r, c), []), "imbalance_after")
            if x.size:
                ax.plot(x, y, marker="o", markersize=3, color=colors[c])
                top = max(top, float(np.nanmax(y)))
        ax.axhline(1.0, color="k", linestyle="--", linewidth=0.8)
        if top > 5:
            ax.set_yscale("log")
        ax.set_title(_text(r), fontsize="small")
        ax.set_xlabel("phase", fontsize="small")
        ax.set_ylabel("imbalance after balancing", fontsize="small")
        ax.grid(True, alpha=0.3)
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[len(rows):]:
        ax.set_visible(False)
    _legend(fig, cols, colors)
    fig.suptitle("imbalance max $l_i/\\bar l_i$ per phase (1.0 is fair)", fontsize="medium")
    return save_figure(fig, path)


def plot_breakdown(path: str | os.PathLike[str], rows: Sequence[str], cols: Sequence[str], cells: Cells, *,
                   dpi: int = 120) -> Path:
    """Where the time goes: per row a panel, per column a horizontal bar stacked by category (summed over
    the phases; the categories add up to the total time)."""
    from matplotlib.figure import Figure

    dpi = _check(rows, dpi)

    nr, nc, size = _grid(len(rows), width=5.2, height=0.6 + 0.32 * len(cols))
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nr, nc, squeeze=False).ravel())
    for ax, r in zip(axes, rows):
        left = np.zeros(len(cols))
        y = np.arange(len(cols))
        for key, label, color in TIME_PARTS:
            v = np.array([_mean([math.fsum(np.nan_to_num(_num(p.get(key)), nan=0.0) for p in _phases(s))
                                 for s in cells.get((r, c), [])]) for c in cols])
            v = np.nan_to_num(v, nan=0.0)
            ax.barh(y, v, left=left, color=color, label=label, height=0.7)
            left += v
        ax.set_yticks(y, [_text(c) for c in cols], fontsize="small")
        ax.invert_yaxis()
        ax.set_title(_text(r), fontsize="small")
        ax.set_xlabel(f"time [{_unit(cells)}]", fontsize="small")
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes[len(rows):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small", frameon=False)
    fig.suptitle("time breakdown (summed over the phases)", fontsize="medium")
    return save_figure(fig, path)


def migration_volume(summary: Mapping[str, Any]) -> float:
    """The cells moved (distinct cells that changed owner), summed over the phases: each phase's ``cells_moved``
    (:func:`hermes.metrics.cells_moved`: else ``quality.migration_cells``), else its ``cell_sends`` (else
    ``migrated_cells``: a summary without either of the first two)."""
    total = 0.0
    for p in _phases(summary):
        v = cells_moved(p)
        if v is None:
            v = cell_sends(p)
        total += np.nan_to_num(_num(v), nan=0.0)
    return float(total)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (both coordinates ≤, one <), minimising both."""
    front = []
    for i, (x, y) in enumerate(points):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        dominated = any((a <= x and b <= y) and (a < x or b < y) for j, (a, b) in enumerate(points)
                        if j != i and math.isfinite(a) and math.isfinite(b))
        if not dominated:
            front.append(i)
    return front


#: a balancer balances when it takes away at least this share of the imbalance above 1 it was handed (mean
#: over the phases of ``imbalance_before − imbalance_after`` against ``imbalance_before − 1``); ``none`` takes
#: away nothing
BALANCE_TOL = 0.05


def imbalance_reduction(summary: Mapping[str, Any]) -> float:
    """The share of the excess imbalance a run's balancer took away: ``Σ (before − after) / Σ (before − 1)``
    over its phases (``imbalance_before``, ``imbalance_after``); 1 when nothing was imbalanced, NaN when not
    recorded. 0 for ``none`` (it changes nothing), about 1 for a balancer that reaches the fair share."""
    num = den = 0.0
    seen = False
    for p in _phases(summary):
        b, a = _num(p.get("imbalance_before")), _num(p.get("imbalance_after"))
        if math.isfinite(b) and math.isfinite(a):
            num += b - a
            den += max(b - 1.0, 0.0)
            seen = True
    if not seen:
        return math.nan
    return num / den if den > 1e-12 else 1.0


def plot_pareto(path: str | os.PathLike[str], rows: Sequence[str], cols: Sequence[str], cells: Cells, *,
                dpi: int = 120) -> Path:
    """The trade-off of balancing: total time against the cells moved (summed over the phases), one panel
    per row, one point per column labelled with its name and final imbalance.

    The Pareto front (no other balancer has both a lower total time and fewer cells moved) is taken among the
    balancers that balance — those that take away at least :data:`BALANCE_TOL` of the excess imbalance
    (:func:`imbalance_reduction`) — filled and joined by its staircase; the other balancers of the front's
    set are hollow. Those that do not balance (``none``: it moves nothing, so it would always be on the front)
    are grey crosses, out of the front."""
    from matplotlib.figure import Figure

    dpi = _check(rows, dpi)

    colors = _colors(cols)
    nr, nc, size = _grid(len(rows))
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nr, nc, squeeze=False).ravel())
    for ax, r in zip(axes, rows):
        runs = [cells.get((r, c), []) for c in cols]
        pts = [(_mean([migration_volume(s) for s in rs]), _mean([s.get("total_time") for s in rs])) for rs in runs]
        imb = [_mean([s.get("final_imbalance") for s in rs]) for rs in runs]
        red = [_mean([imbalance_reduction(s) for s in rs]) for rs in runs]
        balances = [math.isfinite(v) and v >= BALANCE_TOL for v in red]
        cand = [i for i in range(len(cols)) if balances[i]]
        front = {cand[j] for j in pareto_front([pts[i] for i in cand])}
        for i, (c, (x, y)) in enumerate(zip(cols, pts)):
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            label = _text(c) + (f" ({imb[i]:.3g})" if math.isfinite(imb[i]) else "")
            if not balances[i]:
                ax.scatter([x], [y], s=40, marker="x", color="0.5", linewidths=1.5, zorder=3)
                ax.annotate(label + ": does not balance", (x, y), xytext=(4, 3), textcoords="offset points",
                            fontsize=7, color="0.4")
                continue
            on = i in front
            ax.scatter([x], [y], s=60 if on else 40, color=colors[c] if on else "none", edgecolors=colors[c],
                       linewidths=1.5, zorder=3)
            ax.annotate(label, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7,
                        fontweight="bold" if on else "normal")
        fp = sorted((pts[i] for i in front), key=lambda p: p[0])
        if len(fp) > 1:
            ax.step([p[0] for p in fp], [p[1] for p in fp], where="post", color="0.4", linewidth=1, linestyle=":",
                    zorder=1)
        ax.set_title(_text(r), fontsize="small")
        ax.set_xlabel("cells moved, all phases", fontsize="small")
        ax.set_ylabel(f"total time [{_unit(cells)}]", fontsize="small")
        ax.grid(True, alpha=0.3)
        ax.margins(0.15)
    for ax in axes[len(rows):]:
        ax.set_visible(False)
    _legend(fig, cols, colors, line=False)
    fig.suptitle("total time against cells moved (label: final imbalance)\nfilled, dotted: the Pareto front "
                 "among the balancers that balance\n"
                 f"(take away ≥ {BALANCE_TOL:.0%} of the imbalance); ×: does not balance", fontsize="medium")
    return save_figure(fig, path)


#: legend entries a row under the panels
LEGEND_COLUMNS = 6


def _legend(fig, cols: Sequence[str], colors: Mapping[str, tuple], line: bool = True, marker: str = "o") -> None:
    """One legend for all panels: a column's colour (a panel may lack some columns), under the panels in rows
    of :data:`LEGEND_COLUMNS` (the constrained layout keeps it inside the figure, clear of the title and the
    axes: beside the panels it took half a narrow figure's width and clipped its labels)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[c], marker=marker, markersize=7, linestyle="-" if line else "none")
               for c in cols]
    labels = [_text(c) for c in cols]
    # as many columns as fit the figure's width: an entry is its handle (2 em), the longest label (0.6 em a
    # character at 8.3 pt, "small") and the spacing (2 em)
    em = 8.33 / 72.0
    entry = (4.0 + 0.6 * max((len(t) for t in labels), default=1)) * em
    fit = int((fig.get_figwidth() - 0.3) // entry)
    fig.legend(handles, labels, loc="outside lower center", fontsize="small", frameon=False,
               ncols=max(1, min(len(cols), LEGEND_COLUMNS, fit)))
