"""The monitor's memory: time series of what the application got, NWS forecasts, and what the balancer sees.

HeRMeS' resource monitoring module handed the balancer "current values or forecasts" of the available
capacity and of the links' bandwidth (thesis §10.1, Fig. 10.6–10.8). :class:`Monitor` keeps, per
processor, the series of compute rates the application achieved (work units per second of its real work
in each phase; seeded by the start-up probe) and, per link, the series of bandwidths its messages got;
it forecasts the next value of every series with the NWS family (:mod:`hermes.monitor.forecast`) and
produces the balancer's view for the coming phase from one of four sources:

``nominal``
    the configured capacities and bandwidths (what hermes assumed before monitoring measured anything);
``measured``
    the last measurement of every series (a link never measured: nominal);
``forecast``
    the forecaster's prediction for the coming phase (``monitor.forecaster``, default ``adaptive_mse``);
``oracle``
    what the platform will really offer in the coming phase (under the virtual clock the sharing model's
    :meth:`~hermes.extraload.sharing.ProcessorLoad.available_rate`; given by the caller).

The object is pure and serial: every rank can hold an identical copy fed with allgathered measurements,
so the view is the same everywhere without further communication.

Link weights (``monitor.link_weight``): the balancing model's edge weights are conductances (a larger
weight lets more flow cross, docs/ARCHITECTURE.md); ``conductance`` maps bandwidth to ``w = B / B_max``;
``inverse_square`` is the thesis' choice, ``w ∝ 1 / B²`` (§10.2: "the weights w_i ... were set to the
square of the inverse of the forecasted bandwidth"), normalised to ``(B_min / B)²``. Under hermes'
conductance convention it gives *slow* links the larger weights; it is offered to reproduce the thesis.
The minimal flow does not depend on a common scale of the weights, only on their ratios.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator

from hermes.errors import ScenarioError
from hermes.strict import Strict
from hermes.monitor.forecast import (DEFAULT_FAMILY, DEFAULT_GAINS, DEFAULT_WINDOWS, family, forecast,
                                     mean_abs_rel_error, parse_forecaster)

__all__ = ["SOURCES", "LINK_WEIGHTS", "MonitorSpec", "Monitor", "MonitorView", "Observation", "link_weights", "pair_index",
           "bandwidth_from_timings", "undirected_bandwidth"]

SOURCES = ("forecast", "measured", "nominal", "oracle")
LINK_WEIGHTS = ("conductance", "inverse_square")


def pair_index(p: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The pairs ``i < j`` of ``p`` processors in row order (the columns of the link series)."""
    return np.triu_indices(p, k=1)


def link_weights(bandwidth, mapping: str = "conductance") -> NDArray[np.float64]:
    """Edge weights from link bandwidths: ``B / B_max`` (conductance) or ``(B_min / B)²`` (inverse_square)."""
    bw = np.asarray(bandwidth, dtype=np.float64)
    if bw.size == 0:
        return bw.copy()
    if np.any(~np.isfinite(bw)) or np.any(bw <= 0):
        raise ValueError("bandwidths must be positive and finite")
    if mapping == "conductance":
        return bw / bw.max()
    if mapping == "inverse_square":
        return (bw.min() / bw) ** 2
    raise ScenarioError(f"monitor.link_weight: unknown mapping {mapping!r} (valid: {', '.join(LINK_WEIGHTS)})")


def bandwidth_from_timings(nbytes, seconds, messages, latency):
    """Bandwidth the messages got: ``Σ bytes / (Σ durations − messages · α)`` (NaN where nothing was sent).

    Arrays align per link or channel: total bytes, total send-to-delivery seconds and number of messages
    over a phase, and the link's latency ``α`` (the probe's estimate; under the virtual clock latency is
    not shared, so the configured value is exact). The α-β model in reverse (thesis §4.2).
    """
    b = np.asarray(nbytes, dtype=np.float64)
    busy = np.asarray(seconds, dtype=np.float64) - np.asarray(messages, dtype=np.float64) * np.asarray(
        latency, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((b > 0) & (busy > 0), b / np.where(busy > 0, busy, 1.0), np.nan)


def undirected_bandwidth(directed) -> NDArray[np.float64]:
    """One bandwidth per link from the two directions: ``B_ij = 2 / (1/B_i→j + 1/B_j→i)``.

    The harmonic mean averages the seconds per byte (as :func:`hermes.monitor.estimate.estimate_links`
    averages β); a direction never measured leaves the other's value; NaN where neither was measured.
    """
    d = np.asarray(directed, dtype=np.float64)
    a, b = d, d.T
    both = ~np.isnan(a) & ~np.isnan(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(both, 2.0 / (1.0 / np.where(both, a, 1.0) + 1.0 / np.where(both, b, 1.0)),
                       np.where(np.isnan(a), b, a))
    np.fill_diagonal(out, np.nan)
    return out


@dataclass(frozen=True)
class MonitorView:
    """What the balancer sees for the coming phase."""

    source: str
    rates: NDArray[np.float64]  # (p,) work units / s per processor
    bandwidth: NDArray[np.float64]  # (p, p) symmetric, bytes / s

    @property
    def capacities(self) -> NDArray[np.float64]:
        """Rates normalised to sum 1 (the model's capacities)."""
        return self.rates / self.rates.sum()

    def edge_bandwidth(self, edges) -> NDArray[np.float64]:
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        return self.bandwidth[e[:, 0], e[:, 1]]

    def weights(self, edges, mapping: str = "conductance") -> NDArray[np.float64]:
        """Edge weights of the processor graph ``edges`` (pairs) from the view's bandwidths."""
        return link_weights(self.edge_bandwidth(edges), mapping)


@dataclass(frozen=True)
class Observation:
    """One step of the series: what was measured, what had been forecast for it, and the errors."""

    step: int
    rates: NDArray[np.float64]
    bandwidth: NDArray[np.float64]  # (n_pairs,), NaN where not measured
    forecast_rates: NDArray[np.float64] | None
    forecast_bandwidth: NDArray[np.float64] | None
    capacity_error: float  # mean |F − X| / X of the normalised capacities (NaN without a forecast)
    bandwidth_error: float  # same for the measured links' bandwidths


class MonitorSpec(Strict):
    """The scenario's ``monitor:`` section.

    ::

        monitor:
          source: forecast          # forecast | measured | nominal | oracle: what the balancer sees
          forecaster: adaptive_mse  # last, mean, window_mean:W, window_median:W, exp:G, adaptive(_mse|_mae)
          link_weight: conductance  # conductance (B / B_max) | inverse_square (thesis: 1 / B²)
          windows: [3, 5, 10]       # window lengths of the family's window mean and median
          gains: [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 0.9]   # exponential smoothing gains
    """

    source: Literal["forecast", "measured", "nominal", "oracle"] = "forecast"
    forecaster: str = "adaptive_mse"
    link_weight: Literal["conductance", "inverse_square"] = "conductance"
    windows: list[Annotated[int, Field(ge=1, le=10_000)]] = Field(default_factory=lambda: list(DEFAULT_WINDOWS), min_length=1)
    gains: list[Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=lambda: list(DEFAULT_GAINS),
                                                              min_length=1)

    @field_validator("forecaster")
    @classmethod
    def _forecaster(cls, v: str) -> str:
        try:
            parse_forecaster(v)
        except ScenarioError as err:
            raise ValueError(str(err).split(": ", 1)[1]) from None
        return v

    def build(self, p: int) -> Monitor:
        """A :class:`Monitor` for ``p`` processors with this configuration."""
        return Monitor(p, source=self.source, forecaster=self.forecaster, link_weight=self.link_weight,
                       members=family(self.windows, self.gains))


@dataclass
class Monitor:
    """Per-processor and per-link series, their forecasts and the balancer's view (see the module).

    Parameters
    ----------
    p : int
        Number of processors.
    source : str
        One of :data:`SOURCES`.
    forecaster : str
        A name accepted by :func:`hermes.monitor.forecast.parse_forecaster`.
    link_weight : str
        One of :data:`LINK_WEIGHTS`.
    members : tuple of Predictor
        The family the adaptive forecasters choose from.
    """

    p: int
    source: str = "forecast"
    forecaster: str = "adaptive_mse"
    link_weight: str = "conductance"
    members: tuple = DEFAULT_FAMILY
    _rates: list = field(default_factory=list, repr=False)
    _bw: list = field(default_factory=list, repr=False)
    observations: list[Observation] = field(default_factory=list)

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ScenarioError(f"monitor.source: unknown source {self.source!r} (valid: {', '.join(SOURCES)})")
        if self.link_weight not in LINK_WEIGHTS:
            raise ScenarioError(f"monitor.link_weight: unknown mapping {self.link_weight!r} "
                                f"(valid: {', '.join(LINK_WEIGHTS)})")
        parse_forecaster(self.forecaster)
        self._pairs = pair_index(self.p)

    # -- series --------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return len(self._rates)

    def rate_series(self) -> NDArray[np.float64]:
        """(steps, p) measured rates."""
        return np.array(self._rates).reshape(-1, self.p)

    def bandwidth_series(self) -> NDArray[np.float64]:
        """(steps, p(p−1)/2) measured bandwidths per pair ``i < j`` (NaN: not measured)."""
        return np.array(self._bw).reshape(-1, len(self._pairs[0]))

    def _pairs_of(self, bandwidth) -> NDArray[np.float64]:
        if bandwidth is None:
            return np.full(len(self._pairs[0]), np.nan)
        bw = np.asarray(bandwidth, dtype=np.float64)
        if bw.shape != (self.p, self.p):
            raise ValueError(f"bandwidth must be a ({self.p}, {self.p}) matrix, got {bw.shape}")
        return bw[self._pairs]

    def _matrix(self, pairs: NDArray[np.float64]) -> NDArray[np.float64]:
        m = np.full((self.p, self.p), np.nan)
        m[self._pairs] = pairs
        m[self._pairs[1], self._pairs[0]] = pairs
        return m

    def forecast(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Forecasts of the next step: rates ``(p,)`` and bandwidth ``(p, p)`` (NaN: never measured)."""
        if not self._rates:
            nan = np.full(self.p, np.nan)
            return nan, self._matrix(np.full(len(self._pairs[0]), np.nan))
        r = forecast(self.rate_series(), self.forecaster, self.members)[-1]
        b = forecast(self.bandwidth_series(), self.forecaster, self.members)[-1]
        return r, self._matrix(b)

    def last(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The last measurement of every series (links: the last step they were measured)."""
        if not self._rates:
            nan = np.full(self.p, np.nan)
            return nan, self._matrix(np.full(len(self._pairs[0]), np.nan))
        return (forecast(self.rate_series(), "last")[-1], self._matrix(forecast(self.bandwidth_series(), "last")[-1]))

    def observe(self, rates, bandwidth=None, *, true_rates=None, true_bandwidth=None) -> Observation:
        """Append one step: measured rates ``(p,)`` and bandwidths ``(p, p)`` (NaN where not measured).

        The forecast made for this step from the earlier ones is kept with its error against
        ``true_rates`` / ``true_bandwidth`` (default: the measurements): the mean absolute relative
        error of the normalised capacities, and of the bandwidths of the links measured.
        """
        r = np.asarray(rates, dtype=np.float64).reshape(-1)
        if r.shape != (self.p,) or np.any(~np.isfinite(r)) or np.any(r <= 0):
            raise ValueError(f"rates must be {self.p} positive numbers, got {r}")
        b = self._pairs_of(bandwidth)
        fr, fb = (None, None)
        cap_err = bw_err = float("nan")
        if self._rates:
            fr_full, fb_full = self.forecast()
            fr, fb = fr_full, fb_full[self._pairs]
            tr = r if true_rates is None else np.asarray(true_rates, dtype=np.float64)
            tb = b if true_bandwidth is None else self._pairs_of(true_bandwidth)
            cap_err = mean_abs_rel_error(fr / fr.sum(), tr / tr.sum())
            bw_err = mean_abs_rel_error(fb, tb)
        self._rates.append(r)
        self._bw.append(b)
        obs = Observation(self.steps - 1, r, b, fr, fb, cap_err, bw_err)
        self.observations.append(obs)
        return obs

    # -- the balancer's view -------------------------------------------------------------------
    def view(self, nominal_rates, nominal_bandwidth, *, oracle_rates=None, oracle_bandwidth=None,
             source: str | None = None) -> MonitorView:
        """The rates and bandwidths the balancer should assume for the coming phase.

        ``nominal_*`` fill whatever the chosen source does not know (no measurement yet, a link never
        used); ``oracle_*`` are required for the ``oracle`` source.
        """
        source = source or self.source
        if source not in SOURCES:
            raise ScenarioError(f"monitor.source: unknown source {source!r} (valid: {', '.join(SOURCES)})")
        nom_r = np.asarray(nominal_rates, dtype=np.float64).reshape(self.p)
        nom_b = np.asarray(nominal_bandwidth, dtype=np.float64)
        if nom_b.ndim == 0:
            nom_b = np.full((self.p, self.p), float(nom_b))
        if source == "nominal":
            r, b = nom_r, nom_b
        elif source == "oracle":
            if oracle_rates is None:
                raise ValueError("the oracle source needs oracle_rates")
            r = np.asarray(oracle_rates, dtype=np.float64).reshape(self.p)
            b = nom_b if oracle_bandwidth is None else np.asarray(oracle_bandwidth, dtype=np.float64)
        else:
            r, b = self.forecast() if source == "forecast" else self.last()
        r = np.where(np.isfinite(r) & (r > 0), r, nom_r)
        b = np.where(np.isfinite(b) & (b > 0), b, nom_b)
        return MonitorView(source, r, b)

    def errors(self) -> list[tuple[int, float, float]]:
        """Per observed step: (step, capacity error, bandwidth error) of the forecasts."""
        return [(o.step, o.capacity_error, o.bandwidth_error) for o in self.observations]
