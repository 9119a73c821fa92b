"""Resource monitoring: capacity and link estimates handed to the balancer each phase."""

from hermes.monitor.estimate import Estimates, estimate_capacity, estimate_links, monitor

__all__ = ["Estimates", "estimate_capacity", "estimate_links", "monitor"]
