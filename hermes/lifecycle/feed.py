"""The monitor feed: the driver's link to the extra load and to the monitor's series (issue 11;
docs/EXTRALOAD.md).

:func:`open_load` gives the clock its competition: a :class:`~hermes.extraload.sharing.ProcessorLoad` per
rank under the virtual clock (processor sharing and link congestion, deterministic), real task processes
(:class:`~hermes.extraload.real.RealLoad`) under the wall clock. :class:`Feed` keeps, on every rank, an
identical :class:`~hermes.monitor.series.Monitor` fed after each phase with what every processor and link
gave the application, and answers what the balancer should see for the coming phase
(``monitor.source``: nominal, measured, forecast or oracle).

What is measured after phase k (collective, one allgather):

- the rate of rank i: the work its application computed in the phase over the seconds it spent computing
  (``clock.work`` / ``clock.totals``, the probe excluded: it is charged to balancing);
- the true rate: what the processor really offered the application — under the virtual clock with a load,
  the load model's own integral (``app_work`` / ``app_busy``), which the measurement must equal; without a
  load, the clock's rate; under the wall clock, the measurement itself;
- per channel i → j the bandwidth the application's messages got (bytes over seconds transferring, from the
  load model under the virtual clock; nominal without a load), both directions combined by the harmonic
  mean (:func:`~hermes.monitor.series.undirected_bandwidth`).

Capacities in the records are normalised to sum 1 over the ranks, like the schedule's.

The oracle (virtual clock only) is the rate a continuously computing application would get on each
processor over the coming phase's horizon ``H`` = the phase's work (iterations × load × work per weight) over
the platform's nominal total rate: :meth:`~hermes.extraload.sharing.ProcessorLoad.available_rate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.runtime.clock import Links
from hermes.runtime.comm import Bookkeeping
from hermes.extraload.real import RealLoad
from hermes.extraload.sharing import ProcessorLoad
from hermes.monitor.estimate import probe_rates
from hermes.monitor.series import Monitor, MonitorSpec, undirected_bandwidth

__all__ = ["open_load", "close_load", "Feed"]


def open_load(comm, extraload, resolve, clock: str, links: Links):
    """The extra load of this rank (collective under the wall clock), or None without an ``extraload`` section
    (``extraload``: the scenario's section or None; ``resolve``: its path rule; ``clock``: ``virtual`` or
    ``wall``)."""
    if extraload is None:
        return None
    tasks = extraload.compile(resolve, comm.Get_size())
    if clock == "virtual":
        return ProcessorLoad(comm.Get_rank(), tasks, links, application_priority=extraload.application_priority)
    return RealLoad.open(comm, tasks)


def close_load(load) -> None:
    """End the real task processes (nothing to do for the model)."""
    if isinstance(load, RealLoad):
        load.close()


def nominal_bandwidth(links: Links, p: int) -> NDArray[np.float64]:
    """(p, p) bandwidths the platform declares (diagonal: NaN)."""
    b = np.full((p, p), np.nan)
    for i in range(p):
        for j in range(p):
            b[i, j] = links.params(i, j)[1] if i != j else np.nan
    return b


@dataclass
class Feed:
    """Every rank's copy of the monitor's series and what the phase started from (see the module)."""

    comm: Any
    spec: MonitorSpec
    #: True when the scenario has a ``monitor`` section: the balancer sees :meth:`view`, else the probe
    steers: bool
    monitor: Monitor
    nominal_bw: NDArray[np.float64]
    ref: dict[str, Any] = field(default_factory=dict)
    #: the forecast made for the current phase (normalised; NaN before the first measurement)
    forecast: NDArray[np.float64] | None = None
    #: rank 0: rows of links.csv
    link_rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def create(cls, comm, monitor: MonitorSpec | None, extraload: bool, clock, probe_work: float) -> Feed | None:
        """A feed when the scenario has an extra load (``extraload``) or a ``monitor`` section (collective: the
        start-up probe seeds the series), else None."""
        if not extraload and monitor is None:
            return None
        spec = monitor or MonitorSpec()
        p = comm.Get_size()
        w = cls(comm, spec, monitor is not None, spec.build(p), nominal_bandwidth(clock.links, p))
        rates = probe_rates(comm, clock, probe_work)
        w.monitor.observe(rates, None)
        return w

    # -- a phase -------------------------------------------------------------------------------------
    def begin(self, clock) -> None:
        """Phase start: this rank's counters (work, compute seconds, the load model's integrals)."""
        load = getattr(clock, "load", None)
        self.ref = {"work": clock.work["compute"], "busy": clock.totals["compute"]}
        if isinstance(load, ProcessorLoad):
            self.ref.update(app_work=load.app_work, app_busy=load.app_busy, channels=dict(load.channel_stats()))
        r, _ = self.monitor.forecast()
        self.forecast = r / r.sum() if np.all(np.isfinite(r)) else np.full(len(r), np.nan)

    def view(self, clock, nominal_rates, horizon: float):
        """What the balancer sees for the coming phase (collective only for the oracle)."""
        oracle = None
        if self.spec.source == "oracle":
            load = getattr(clock, "load", None)
            mine = load.available_rate(clock.now, clock.now + horizon) if isinstance(load, ProcessorLoad) \
                else clock.rate
            oracle = np.array(Bookkeeping(self.comm).allgather(float(mine)))
        return self.monitor.view(nominal_rates, self.nominal_bw, oracle_rates=oracle)

    def observe(self, clock, phase: int, book: Bookkeeping) -> tuple[dict[str, float], dict[str, Any]]:
        """Phase end (collective): measure, append to the series; this rank's record fields and the phase's
        forecast errors."""
        measured, true, out = self._readings(clock)
        rows = book.allgather((measured, true, out))
        p = len(rows)
        rates = np.array([x[0] for x in rows])
        trues = np.array([x[1] for x in rows])
        directed = np.full((p, p), np.nan)
        for i, (_, _, chans) in enumerate(rows):
            for j, bw in chans.items():
                directed[i, j] = bw
        bw = undirected_bandwidth(directed) if np.isfinite(directed).any() else None
        obs = self.monitor.observe(rates, bw, true_rates=trues)
        me = self.comm.Get_rank()
        fields = {"capacity_true": float(trues[me] / trues.sum()),
                  "capacity_measured": float(rates[me] / rates.sum()),
                  "capacity_forecast": float(self.forecast[me])}
        if me == 0 and bw is not None:
            fb = obs.forecast_bandwidth
            for k, (i, j) in enumerate(zip(*self.monitor._pairs)):
                if np.isfinite(bw[i, j]):
                    self.link_rows.append({"phase": phase, "rank_a": int(i), "rank_b": int(j),
                                           "bandwidth_nominal": float(self.nominal_bw[i, j]),
                                           "bandwidth_measured": float(bw[i, j]),
                                           "bandwidth_forecast": float(fb[k]) if fb is not None else float("nan")})
        def finite(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None  # no forecast yet, or no link measured: null

        errors = {"source": self.spec.source if self.steers else "probe",
                  "capacity_forecast_error": finite(obs.capacity_error),
                  "bandwidth_forecast_error": finite(obs.bandwidth_error)}
        return fields, errors

    def _readings(self, clock) -> tuple[float, float, dict[int, float]]:
        work = clock.work["compute"] - self.ref["work"]
        busy = clock.totals["compute"] - self.ref["busy"]
        measured = work / busy if busy > 0 else clock.rate
        load = getattr(clock, "load", None)
        if clock.kind == "wall":
            return measured, measured, {}
        if not isinstance(load, ProcessorLoad):
            return measured, clock.rate, {}
        dw, db = load.app_work - self.ref["app_work"], load.app_busy - self.ref["app_busy"]
        true = dw / db if db > 0 else clock.rate
        chans = {}
        for j, (nbytes, secs) in load.channel_stats().items():
            b0, s0 = self.ref["channels"].get(j, (0.0, 0.0))
            if secs - s0 > 0 and nbytes - b0 > 0:
                chans[int(j)] = (nbytes - b0) / (secs - s0)
        return measured, true, chans
