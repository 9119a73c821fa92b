"""Resource monitoring: measurements of what the application got, NWS forecasts, the balancer's view.

- :mod:`.estimate` — the timed probes (capacity, link latency and bandwidth) the driver runs each phase;
- :mod:`.forecast` — the NWS forecaster family and the adaptive forecaster;
- :mod:`.series` — :class:`Monitor`: per-processor and per-link series, sources nominal / measured /
  forecast / oracle, link-weight mappings;
- :mod:`.oracle` — the equal-finish horizon that defines the oracle's capacities.
"""

from hermes.monitor.estimate import Estimates, estimate_capacity, estimate_links, monitor, probe_rates
from hermes.monitor.forecast import DEFAULT_FAMILY, Predictor, adaptive, forecast, parse_forecaster, predict
from hermes.monitor.oracle import equal_finish
from hermes.monitor.series import (LINK_WEIGHTS, SOURCES, Monitor, MonitorView, bandwidth_from_timings, link_weights,
                                   undirected_bandwidth)

__all__ = ["Estimates", "estimate_capacity", "estimate_links", "monitor", "probe_rates", "DEFAULT_FAMILY", "Predictor", "adaptive",
           "forecast", "parse_forecaster", "predict", "equal_finish", "LINK_WEIGHTS", "SOURCES", "Monitor",
           "MonitorView", "bandwidth_from_timings", "link_weights", "undirected_bandwidth"]
