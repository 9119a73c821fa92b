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
from hermes.viz.partition import save_figure

__all__ = ["plot_monitor", "monitor_arrays"]


def monitor_arrays(rows: Iterable[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """``phases`` (K,) and ``true``, ``forecast``, ``measured`` (K, p) from ``phases.csv`` rows (NaN if absent)."""
    rows = list(rows)
    if not rows:
        raise HermesError("no rows to plot")
    try:
        phases = sorted({int(r["phase"]) for r in rows})
        p = max(int(r["rank"]) for r in rows) + 1
    except (KeyError, ValueError) as err:
        raise HermesError(f"phases.csv rows need 'phase' and 'rank' columns ({err.__class__.__name__})") from None
    index = {k: i for i, k in enumerate(phases)}
    out = {"phases": np.array(phases)}
    for key in ("true", "forecast", "measured"):
        a = np.full((len(phases), p), np.nan)
        for r in rows:
            v = r.get(f"capacity_{key}")
            if v not in (None, ""):
                a[index[int(r["phase"])], int(r["rank"])] = float(v)
        out[key] = a
    return out


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
        If the arrays' shapes disagree.
    """
    from matplotlib.figure import Figure

    x = np.asarray(phases, dtype=np.float64).reshape(-1)
    T = np.atleast_2d(np.asarray(true, dtype=np.float64))
    F = np.atleast_2d(np.asarray(forecast, dtype=np.float64))
    M = None if measured is None else np.atleast_2d(np.asarray(measured, dtype=np.float64))
    shapes = {T.shape, F.shape} | ({M.shape} if M is not None else set())
    if len(shapes) != 1 or T.shape[0] != x.size:
        raise HermesError(f"monitor plot: {x.size} phases but arrays of shapes {sorted(shapes)}")
    K, p = T.shape
    cols = min(p, 5)
    rows = math.ceil(p / cols)
    fig = Figure(figsize=(2.6 * cols + 0.5, 1.9 * rows + 0.9), dpi=dpi, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel()
    ok = ~np.isnan(T) & ~np.isnan(F) & (T != 0)
    err = float(np.mean(np.abs(F[ok] - T[ok]) / np.abs(T[ok]))) if ok.any() else float("nan")
    fig.suptitle(f"{title + ' — ' if title else ''}capacity per rank: true vs forecast "
                 f"(mean |F − T| / T = {err:.3f})", fontsize="medium")
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
