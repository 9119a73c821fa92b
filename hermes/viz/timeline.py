"""Per-phase plots of a run (imbalance, time split) and comparisons of several runs.

Inputs are the ``summary.json`` dictionaries of run directories (see ``docs/ARCHITECTURE.md``): a
header (``scenario``, ``processors``, ``balancer``, ``clock``, ``total_time``, ``final_imbalance``) and
``phases``, one dict per phase. Missing per-phase values are drawn as gaps (imbalance) or zero (times).
matplotlib is imported inside the functions and figures use the Agg canvas, never pyplot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hermes.viz.partition_picture import check_dpi, plain, save_figure
from hermes.viz.rundir import check_summary

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["plot_phases", "plot_comparison", "TIME_PARTS"]

#: Up to this many phases the time split is drawn as bars; above, as stacked steps (one artist per category:
#: a bar per phase and category costs ~1 ms to lay out).
BAR_LIMIT = 400

#: The stacked time categories of a phase, bottom to top, with their colours.
TIME_PARTS: tuple[tuple[str, str, str], ...] = (
    ("compute_time", "compute", "tab:blue"),
    ("comm_time", "halo exchange", "tab:orange"),
    ("sync_time", "synchronisation", "tab:gray"),
    ("balance_time", "balancing", "tab:green"),
    ("migrate_time", "migration", "tab:red"),
    ("adapt_time", "adaptation", "tab:purple"),
)


def _finite_or_nan(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def plot_phases(path: str | os.PathLike[str], summary: Mapping[str, Any], *, dpi: int = 150) -> Path:
    """Plot imbalance and time split per phase of one run and write the PNG to ``path`` atomically.

    Parameters
    ----------
    path : path-like
        Output PNG file.
    summary : mapping
        The run's ``summary.json`` content.
    dpi : int
        Resolution of the PNG.

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    Top panel: ``imbalance_before`` and ``imbalance_after`` (``max l_i / l̄_i``) per phase with the ideal
    value 1 dashed, and under ``mesh.constraint: all`` every further weight's imbalance after balancing;
    the y axis is logarithmic when the largest imbalance exceeds 5. Bottom panel: the
    phase's compute, halo-exchange, synchronisation, balancing and migration times, stacked as recorded
    (the driver records per-rank means; the phase ``time`` is that of the slowest rank).

    Raises
    ------
    HermesError
        ``dpi`` outside 10..1200, or a summary field of the wrong type (:func:`hermes.viz.rundir.check_summary`).
    """
    from matplotlib.figure import Figure

    dpi = check_dpi(dpi)
    check_summary(summary)
    phases = list(summary.get("phases") or [])
    x = _column(phases, "phase", default=np.arange(1, len(phases) + 1))
    fig = Figure(figsize=(max(7.0, min(14.0, 5.0 + 0.12 * len(phases))), 7.0), dpi=dpi, layout="constrained")
    ax_imb, ax_t = fig.subplots(2, 1, sharex=True, height_ratios=[1, 1.2])
    fig.suptitle(_run_title(summary), fontsize="medium", parse_math=False)

    if not phases:
        for ax in (ax_imb, ax_t):
            ax.text(0.5, 0.5, "no phases recorded", ha="center", va="center", transform=ax.transAxes)
        return save_figure(fig, path)

    marker = dict(markersize=5 if len(phases) <= 60 else 2)
    before = _column(phases, "imbalance_before")
    after = _column(phases, "imbalance_after")
    ax_imb.plot(x, before, "o-", color="tab:red", label="before balancing", **marker)
    ax_imb.plot(x, after, "s-", color="tab:blue", label="after balancing", **marker)
    ax_imb.axhline(1.0, color="k", linestyle="--", linewidth=1, label="balanced")
    shown = [before, after]
    per = [p.get("imbalance_per_constraint") for p in phases]  # mesh.constraint: all: every further weight
    if all(isinstance(v, list) and len(v) == len(per[0]) and len(v) > 1 for v in per):
        for k in range(1, len(per[0])):
            yk = np.array([_finite_or_nan(v[k]) for v in per])
            ax_imb.plot(x, yk, "^--", color=f"C{(k + 1) % 10}", label=f"after, weight {k + 1}", **marker)
            shown.append(yk)
    _imbalance_axis(ax_imb, np.concatenate(shown))
    ax_imb.set_ylabel("imbalance  max $l_i/\\bar l_i$")
    ax_imb.legend(fontsize="small", loc="best")
    ax_imb.grid(True, alpha=0.3)

    bottom = np.zeros(len(phases))
    width = 0.8 * (float(np.min(np.diff(np.unique(x)))) if np.unique(x).size > 1 else 1.0)
    order = np.argsort(x, kind="stable")
    for key, label, color in TIME_PARTS:
        t = np.clip(np.nan_to_num(_column(phases, key), nan=0.0), 0.0, None)  # a time is never negative
        if len(phases) <= BAR_LIMIT:
            ax_t.bar(x, t, width, bottom=bottom, color=color, label=label, linewidth=0)
        else:
            ax_t.fill_between(x[order], bottom[order], (bottom + t)[order], step="mid", color=color, label=label,
                              linewidth=0)
        bottom += t
    # the axis holds every stack whole, all phases and all parts (set, not left to autoscaling: a fill's
    # steps and the shared phase axis are not what the stacks span)
    # (a damaged summary's values may be missing or sum beyond the floats: those are left to autoscaling)
    top = float(bottom.max(initial=0.0))
    if np.isfinite(top):
        ax_t.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    xs = x[np.isfinite(x)]
    lo, hi = (float(xs.min()) - 0.6 * width, float(xs.max()) + 0.6 * width) if xs.size else (0.0, 0.0)
    if xs.size and np.isfinite(lo) and np.isfinite(hi) and hi > lo:
        ax_t.set_xlim(lo, hi)
    ax_t.set_ylabel(f"time per phase [{_unit(summary)}]")
    ax_t.set_xlabel("phase")
    ax_t.legend(ncols=3, fontsize="small", loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax_t.grid(True, axis="y", alpha=0.3)
    _integer_ticks(ax_t)
    return save_figure(fig, path)


def plot_comparison(
    path: str | os.PathLike[str], summaries: Sequence[Mapping[str, Any]], *, dpi: int = 150
) -> Path:
    """Compare several runs (one line per balancer) and write the PNG to ``path`` atomically.

    Parameters
    ----------
    path : path-like
        Output PNG file.
    summaries : sequence of mappings
        The ``summary.json`` contents of the runs, e.g. one scenario with different balancers.
    dpi : int
        Resolution of the PNG.

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    Left: cumulative time ``Σ_{k' ≤ k} time_k'`` over the phases (the per-phase ``time`` values, summed).
    Middle: imbalance after balancing per phase. Right: final imbalance per run, bars annotated with the
    run's total time. Runs are labelled by balancer, with processors/clock/scenario added when they differ.

    Raises
    ------
    HermesError
        ``dpi`` outside 10..1200, or a summary field of the wrong type (:func:`hermes.viz.rundir.check_summary`).
    """
    from matplotlib.figure import Figure

    dpi = check_dpi(dpi)
    runs = list(summaries)
    for i, s in enumerate(runs):
        check_summary(s, f"summary {i}")
    labels = _labels(runs)
    colors = _series_colors(len(runs))
    fig = Figure(figsize=(15.0, 4.8), dpi=dpi, layout="constrained")
    ax_c, ax_i, ax_f = fig.subplots(1, 3, width_ratios=[1.3, 1.3, 1])
    scen = sorted({plain(s.get("scenario") or "?") for s in runs})
    fig.suptitle("comparison: " + (", ".join(scen) if len(scen) <= 3 else f"{len(scen)} scenarios"),
                 parse_math=False)

    for s, label, color in zip(runs, labels, colors):
        phases = list(s.get("phases") or [])
        if not phases:
            continue
        x = _column(phases, "phase", default=np.arange(1, len(phases) + 1))
        t = np.nan_to_num(_column(phases, "time"), nan=0.0)
        style = dict(color=color, marker="o" if len(phases) <= 40 else None, markersize=3, label=label)
        ax_c.plot(x, np.cumsum(t), **style)
        ax_i.plot(x, _column(phases, "imbalance_after"), **style)
    unit = _unit(runs[0]) if runs else "s"
    ax_c.set_xlabel("phase")
    ax_c.set_ylabel(f"cumulative time [{unit}]")
    ax_c.set_title("time", fontsize="medium")
    ax_i.set_xlabel("phase")
    ax_i.set_ylabel("imbalance after balancing")
    ax_i.set_title("imbalance per phase", fontsize="medium")
    ax_i.axhline(1.0, color="k", linestyle="--", linewidth=1)
    allimb = np.concatenate([_column(list(s.get("phases") or []), "imbalance_after") for s in runs] or [np.ones(1)])
    _imbalance_axis(ax_i, allimb)
    for ax in (ax_c, ax_i):
        ax.grid(True, alpha=0.3)
        _integer_ticks(ax)
    if runs:
        ax_c.legend(fontsize="small", loc="upper left")

    final = np.array([_num(s.get("final_imbalance")) for s in runs], dtype=np.float64)
    pos = np.arange(len(runs))
    bars = ax_f.bar(pos, np.nan_to_num(final, nan=0.0), color=colors, width=0.7)
    for bar, s in zip(bars, runs):
        total = _num(s.get("total_time"))
        if np.isfinite(total):
            ax_f.annotate(
                f"{total:.3g} {unit}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize="x-small",
            )
    ax_f.axhline(1.0, color="k", linestyle="--", linewidth=1)
    ax_f.set_xticks(pos, labels, rotation=30 if len(runs) > 3 else 0, ha="right" if len(runs) > 3 else "center")
    ax_f.set_ylabel("final imbalance")
    ax_f.set_title("final imbalance (label: total time)", fontsize="medium")
    top = np.nanmax(final) if np.isfinite(final).any() else 1.0
    ax_f.set_ylim(0, max(1.0, top) * 1.12)
    ax_f.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)


# ----------------------------------------------------------------------------------------- helpers
def _num(v: Any) -> float:
    """A recorded number as a float; NaN for anything else (None, a boolean, text, a value beyond the floats)."""
    if isinstance(v, bool):
        return float("nan")
    try:
        f = float(v) if v is not None else float("nan")
    except (TypeError, ValueError, OverflowError):
        return float("nan")
    return f if np.isfinite(f) else float("nan")


def _column(phases: list[Mapping[str, Any]], key: str, default: NDArray | None = None) -> NDArray[np.float64]:
    """The values of ``key`` over the phases as floats (NaN where missing); ``default`` if none has it."""
    if default is not None and not any(key in p for p in phases):
        return np.asarray(default, dtype=np.float64)
    return np.array([_num(p.get(key)) for p in phases], dtype=np.float64)


def _unit(summary: Mapping[str, Any]) -> str:
    return "virtual s" if str(summary.get("clock", "")).lower().startswith("virt") else "s"


def _run_title(s: Mapping[str, Any]) -> str:
    total = _num(s.get("total_time"))
    parts = [
        plain(s.get("scenario") or "?"),
        f"balancer {plain(s.get('balancer') or '?')}",
        f"{s.get('processors') or '?'} processors",
        f"{plain(s.get('clock') or '?')} clock",
    ]
    if np.isfinite(total):
        parts.append(f"total {total:.4g} {_unit(s)}")
    final = _num(s.get("final_imbalance"))
    if np.isfinite(final):
        parts.append(f"final imbalance {final:.3f}")
    return parts[0] + "\n" + ", ".join(parts[1:])


def _imbalance_axis(ax: Axes, values: NDArray[np.float64]) -> None:
    """Log y axis (with plain tick labels) when the imbalance spans more than a factor 5."""
    v = values[np.isfinite(values) & (values > 0)]
    if v.size and v.max() > 5.0:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(bottom=min(0.9, float(v.min()) * 0.9))
    else:
        lo = min(1.0, float(v.min())) if v.size else 1.0
        ax.set_ylim(bottom=lo - 0.02 * max(1.0, lo))


def _integer_ticks(ax: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _labels(runs: list[Mapping[str, Any]]) -> list[str]:
    """Balancer names, qualified by the header fields that differ between runs, made unique."""
    extra = [k for k in ("processors", "clock", "scenario") if len({str(s.get(k)) for s in runs}) > 1]
    labels = []
    for s in runs:
        label = plain(s.get("balancer") or "?", 40, tex=True)
        if extra:
            label += " (" + ", ".join(f"{s.get(k)} procs" if k == "processors" else plain(s.get(k), 40, tex=True)
                                      for k in extra) + ")"
        labels.append(label)
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return out


def _series_colors(n: int) -> list:
    from hermes.viz.partition_picture import rank_colors

    return [tuple(c) for c in rank_colors(n)]
