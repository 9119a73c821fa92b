"""NWS forecasters: predict the next value of a measurement series (Wolski's Network Weather Service).

HeRMeS took the available CPU fraction, latency and bandwidth from NWS forecasts (thesis §10.1,
"Resources Monitoring Module", Fig. 10.7–10.8). NWS runs a family of cheap predictors over every series
and, for each series, reports the forecast of the predictor whose *cumulative* error over the series so
far is lowest (Wolski 1998; Wolski, Spring & Hayes 1999); it keeps both the mean squared and the mean
absolute error, so there are two adaptive forecasters.

The family here (names as accepted by :func:`parse_forecaster`):

``last``
    the last measurement;
``mean``
    the running mean of all measurements;
``window_mean:w``, ``window_median:w``
    the mean / median of the measurements of the last ``w`` steps;
``exp:g``
    exponential smoothing with gain ``g``: ``s ← s + g (x − s)`` (``s`` starts at the first measurement);
``adaptive_mse``, ``adaptive_mae`` (``adaptive`` = ``adaptive_mse``)
    per series and per step, the forecast of the family member with the lowest cumulative squared
    (absolute) error of its past forecasts; ties go to the first member in family order.

Series are the columns of an array ``X`` of shape ``(T, S)``: ``X[t, s]`` is series ``s`` measured at
step ``t``, ``NaN`` when it was not measured (a link the application did not use in a phase). Every
predictor returns ``P`` of shape ``(T + 1, S)``: ``P[t]`` is the forecast of ``X[t]`` made from ``X[:t]``
(``P[0]`` is NaN: nothing is known; ``P[T]`` forecasts the next, unseen step). Missing measurements are
skipped — a predictor's state changes only where a value was measured — and a window holding no
measurement falls back to the last one. All predictors are vectorised over series; exponential smoothing
loops over time.

References: R. Wolski, "Dynamically forecasting network performance using the Network Weather Service",
Cluster Computing 1(1), 1998; R. Wolski, N. Spring, J. Hayes, "The Network Weather Service: a distributed
resource performance forecasting service for metacomputing", FGCS 15(5–6), 1999.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.bounds import number_problem
from hermes.errors import ScenarioError

__all__ = ["Predictor", "DEFAULT_FAMILY", "parse_forecaster", "predict", "adaptive", "forecast",
           "mean_abs_rel_error", "family"]

KINDS = ("last", "mean", "window_mean", "window_median", "exp")
DEFAULT_WINDOWS = (3, 5, 10)
DEFAULT_GAINS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 0.9)


@dataclass(frozen=True)
class Predictor:
    """One member of the family: ``kind`` and its parameter (window length or gain)."""

    kind: str
    param: float | None = None

    @property
    def name(self) -> str:
        if self.param is None:
            return self.kind
        return f"{self.kind}:{int(self.param) if self.kind.startswith('window') else self.param:g}"


def family(windows=DEFAULT_WINDOWS, gains=DEFAULT_GAINS) -> tuple[Predictor, ...]:
    """The NWS family: last, running mean, window means and medians, exponential smoothing at each gain."""
    return (Predictor("last"), Predictor("mean"), *(Predictor("window_mean", int(w)) for w in windows),
            *(Predictor("window_median", int(w)) for w in windows), *(Predictor("exp", float(g)) for g in gains))


DEFAULT_FAMILY = family()


def parse_forecaster(name: str) -> Predictor | tuple[str, str]:
    """A predictor from its name, or ``("adaptive", metric)``; ScenarioError listing the valid names."""
    valid = "last, mean, window_mean:W, window_median:W, exp:G (1e-100 <= G <= 1), adaptive, adaptive_mse, adaptive_mae"
    n = str(name).strip()
    if n in ("adaptive", "adaptive_mse", "adaptive_mae"):
        return ("adaptive", "mae" if n.endswith("mae") else "mse")
    if n in ("last", "mean"):
        return Predictor(n)
    m = re.fullmatch(r"(window_mean|window_median):(\d+)", n)
    if m and int(m.group(2)) >= 1:
        return Predictor(m.group(1), int(m.group(2)))
    m = re.fullmatch(r"exp:([0-9.eE+-]+)", n)
    if m:
        try:
            g = float(m.group(1))
        except ValueError:
            g = -1.0
        if 0 < g <= 1 and number_problem(g) is None:  # hermes' rule for numbers: no subnormal gain
            return Predictor("exp", g)
    raise ScenarioError(f"monitor.forecaster: unknown forecaster {name!r} (valid: {valid})")


def _as2d(X) -> NDArray[np.float64]:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"series must be (T,) or (T, S), got shape {X.shape}")
    return X


def _last(X: NDArray[np.float64]) -> NDArray[np.float64]:
    T, S = X.shape
    idx = np.where(np.isnan(X), -1, np.arange(T)[:, None])
    idx = np.maximum.accumulate(idx, axis=0)
    filled = np.where(idx >= 0, X[np.maximum(idx, 0), np.arange(S)[None, :]], np.nan)
    return np.vstack([np.full((1, S), np.nan), filled])


def _cums(X: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """Prefix sums and counts with a zero row on top: ``cs[t] = Σ_{u<t} x_u`` over measured values."""
    S = X.shape[1]
    cs = np.vstack([np.zeros((1, S)), np.nancumsum(X, axis=0)])
    cnt = np.vstack([np.zeros((1, S)), np.cumsum(~np.isnan(X), axis=0)])
    return cs, cnt


def predict(X, pred: Predictor) -> NDArray[np.float64]:
    """Forecasts ``P`` (shape ``(T + 1, S)``) of one predictor over the columns of ``X`` (see module)."""
    X = _as2d(X)
    T, S = X.shape
    last = _last(X)
    if pred.kind == "last":
        return last
    if pred.kind == "mean":
        cs, cnt = _cums(X)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, cs / np.maximum(cnt, 1), np.nan)
    if pred.kind == "window_mean":
        w = int(pred.param)
        cs, cnt = _cums(X)
        lo = np.maximum(np.arange(T + 1) - w, 0)
        s, n = cs - cs[lo], cnt - cnt[lo]
        return np.where(n > 0, s / np.maximum(n, 1), last)
    if pred.kind == "window_median":
        w = int(pred.param)
        padded = np.vstack([np.full((w, S), np.nan), X])  # row t + w − 1 ends the window of P[t]
        win = np.lib.stride_tricks.sliding_window_view(padded, w, axis=0)[: T + 1]  # (T+1, S, w): X[t−w:t]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: fall back below
            med = np.nanmedian(win, axis=2)
        return np.where(np.isnan(med), last, med)
    if pred.kind == "exp":
        g = float(pred.param)
        out = np.full((T + 1, S), np.nan)
        s = np.full(S, np.nan)
        for t in range(T):
            x = X[t]
            s = np.where(np.isnan(s), x, np.where(np.isnan(x), s, s + g * (x - s)))
            out[t + 1] = s
        return out
    raise ValueError(f"unknown predictor kind {pred.kind!r}")


def adaptive(X, members=DEFAULT_FAMILY, metric: str = "mse") -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The NWS adaptive forecaster: per series and step, the member with the lowest cumulative error.

    Returns
    -------
    P : (T + 1, S) forecasts; ``P[t]`` uses only ``X[:t]``.
    choice : (T + 1, S) index into ``members`` of the member chosen for each forecast.

    Notes
    -----
    The error of member ``f`` at step ``u`` is ``e = P_f[u] − X[u]`` (squared for ``mse``, absolute for
    ``mae``), counted where both are defined. Before forecasting step ``t`` the cumulative errors
    ``E_f(t) = Σ_{u < t} e_f(u)`` are compared; ``argmin`` picks the first member on ties (so ``last``
    until errors tell the members apart).
    """
    if metric not in ("mse", "mae"):
        raise ValueError(f"unknown error metric {metric!r}: expected 'mse' or 'mae'")
    X = _as2d(X)
    T, S = X.shape
    Ps = np.stack([predict(X, m) for m in members])  # (F, T+1, S)
    err = Ps[:, :T] - X[None]
    err = err * err if metric == "mse" else np.abs(err)
    err = np.where(np.isnan(err), 0.0, err)
    cum = np.concatenate([np.zeros((len(members), 1, S)), np.cumsum(err, axis=1)], axis=1)  # E_f(t), t=0..T
    # a member with no forecast yet cannot be chosen while another has one
    cum = np.where(np.isnan(Ps), np.inf, cum)
    choice = np.argmin(cum, axis=0)
    P = np.take_along_axis(Ps, choice[None], axis=0)[0]
    return P, choice


def forecast(X, name: str = "adaptive_mse", members=DEFAULT_FAMILY) -> NDArray[np.float64]:
    """Forecasts ``(T + 1, S)`` of the forecaster called ``name`` (a member or an adaptive one)."""
    spec = parse_forecaster(name)
    if isinstance(spec, Predictor):
        return predict(X, spec)
    return adaptive(X, members, spec[1])[0]


def mean_abs_rel_error(forecast_values, true_values) -> float:
    """Mean of ``|F − X| / |X|`` over the entries where both are defined (NaN if none)."""
    F = np.asarray(forecast_values, dtype=np.float64)
    X = np.asarray(true_values, dtype=np.float64)
    ok = ~np.isnan(F) & ~np.isnan(X) & (X != 0)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(F[ok] - X[ok]) / np.abs(X[ok])))
