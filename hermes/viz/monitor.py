"""``monitor.png``: what each processor really offered the application vs what the monitor forecast.

One small panel per rank, phases on the x axis: the true available capacity of the phase (solid), the
forecast made before it (dashed) and, optionally, the last measurement the balancer would have used
(dotted); normalised capacities (summing to 1 over the ranks). The title quotes the mean absolute
relative forecast error. Input: arrays, or the rows of ``phases.csv``
(``capacity_true``, ``capacity_forecast``, ``capacity_measured`` columns).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from hermes.errors import HermesError
from hermes.viz.partition_picture import check_dpi, save_figure
from hermes.viz.rundir import MAX_PHASES, MAX_PROCESSORS

#: panels (ranks) drawn: the first ones of a larger run, named in the title
MAX_PANELS = 64
#: entries of the (phases × ranks) tables :func:`monitor_arrays` builds (8 bytes each)
MAX_TABLE = 10_000_000

__all__ = ["plot_monitor", "monitor_arrays"]


def monitor_arrays(rows: Iterable[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """``phases`` (K,) and ``true``, ``forecast``, ``measured`` (K, p) from ``phases.csv`` rows (NaN if absent,
    not a number or not finite).

    Raises
    ------
    HermesError
        One line: no rows, a row without an integer ``phase`` in ``[0, MAX_PHASES]`` and ``rank`` in
        ``[0, MAX_PROCESSORS)``, or more than :data:`MAX_TABLE` phase × rank entries.
    """
    rows = list(rows)
    if not rows:
        raise HermesError("no rows to plot")
    try:
        keys = [(int(r["phase"]), int(r["rank"])) for r in rows]
    except (KeyError, ValueError, TypeError) as err:
        raise HermesError(f"phases.csv rows need integer 'phase' and 'rank' columns ({err.__class__.__name__})") \
            from None
    bad = [(k, r) for k, r in keys if not (0 <= k <= MAX_PHASES and 0 <= r < MAX_PROCESSORS)]
    if bad:
        raise HermesError(f"phases.csv: phase {bad[0][0]}, rank {bad[0][1]} out of range (phases 0..{MAX_PHASES}, "
                          f"ranks 0..{MAX_PROCESSORS - 1})")
    phases = sorted({k for k, _ in keys})
    p = max(r for _, r in keys) + 1
    if len(phases) * p > MAX_TABLE:
        raise HermesError(f"phases.csv: {len(phases)} phases × {p} ranks, more than the {MAX_TABLE:,} entries "
                          "hermes draws")
    index = {k: i for i, k in enumerate(phases)}
    out = {"phases": np.array(phases)}
    for key in ("true", "forecast", "measured"):
        a = np.full((len(phases), p), np.nan)
        for r, (k, rank) in zip(rows, keys):
            a[index[k], rank] = _value(r.get(f"capacity_{key}"))
        out[key] = a
    return out


def _value(v: Any) -> float:
    """A CSV cell as a finite float, else NaN (empty, text, infinite)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def plot_monitor(path: str | os.PathLike[str], phases: ArrayLike, true: ArrayLike, forecast: ArrayLike,
                 measured: ArrayLike | None = None, *, title: str = "", dpi: int = 120) -> Path:
    """Draw true vs forecast (vs measured) capacity per rank over the phases; write the PNG atomically.

    Parameters
    ----------
    path : path-like
    phases : (K,) phase numbers
    true, forecast : (K, p) normalised capacities per phase and rank (NaN: not known, e.g. phase 1's forecast)
    measured : (K, p), optional
    title, dpi : str, int

    Raises
    ------
    HermesError
        If the arrays' shapes disagree, they are not numbers, the phases are not finite, or ``dpi`` is outside
        10..1200.

    Notes
    -----
    At most :data:`MAX_PANELS` ranks are drawn (the first ones; the title says so).
    """
    from matplotlib.figure import Figure

    dpi = check_dpi(dpi)
    try:
        x = np.asarray(phases, dtype=np.float64).reshape(-1)
        T = np.atleast_2d(np.asarray(true, dtype=np.float64))
        F = np.atleast_2d(np.asarray(forecast, dtype=np.float64))
        M = None if measured is None else np.atleast_2d(np.asarray(measured, dtype=np.float64))
    except (TypeError, ValueError) as err:
        raise HermesError(f"monitor plot: the arrays must be numbers ({type(err).__name__})") from None
    shapes = {T.shape, F.shape} | ({M.shape} if M is not None else set())
    if len(shapes) != 1 or T.ndim != 2 or T.shape[0] != x.size:
        raise HermesError(f"monitor plot: {x.size} phases but arrays of shapes {sorted(shapes)}")
    if not np.isfinite(x).all():
        raise HermesError("monitor plot: the phases must be finite numbers")
    T, F, M = (None if a is None else np.where(np.isfinite(a), a, np.nan) for a in (T, F, M))
    K, total = T.shape
    if total == 0:
        raise HermesError("monitor plot: no ranks to draw")
    p = min(total, MAX_PANELS)
    if total > p:
        title = f"{title + ' — ' if title else ''}ranks 0–{p - 1} of {total}"
    cols = min(p, 5)
    rows = math.ceil(p / cols)
    fig = Figure(figsize=(2.6 * cols + 0.5, 1.9 * rows + 0.9), dpi=dpi, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel()
    ok = ~np.isnan(T) & ~np.isnan(F) & (T != 0)
    err = float(np.mean(np.abs(F[ok] - T[ok]) / np.abs(T[ok]))) if ok.any() else float("nan")
    fig.suptitle(f"{title + ' — ' if title else ''}capacity per rank: true vs forecast "
                 f"(mean |F − T| / T = {err:.3f})", fontsize="medium", parse_math=False)
    for r in range(rows * cols):
        ax = axes[r]
        if r >= p:
            ax.set_visible(False)
            continue
        ax.plot(x, T[:, r], "-o", color="tab:blue", markersize=3, label="true")
        ax.plot(x, F[:, r], "--s", color="tab:orange", markersize=3, label="forecast")
        if M is not None:
            ax.plot(x, M[:, r], ":", color="tab:gray", label="measured")
        ax.set_title(f"rank {r}", fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="x-small")
    for ax in axes[(rows - 1) * cols:]:
        ax.set_xlabel("phase", fontsize="small")
    return save_figure(fig, path)
