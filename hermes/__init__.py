"""hermes: a testbed for dynamic load balancing of adaptive mesh simulations.

A revival of HeRMeS (T. Rotaru, PhD thesis, Neuchatel 2003, ch. 10). The package is split like the
HeRMeS design: data management (:mod:`hermes.data`), application simulation (:mod:`hermes.app`),
dynamic load balancing (:mod:`hermes.balance`), resource monitoring (:mod:`hermes.monitor`),
extra-load injection (:mod:`hermes.extraload`) and visualisation (:mod:`hermes.viz`), tied together
by the phase driver (:mod:`hermes.driver`) and the command line (:mod:`hermes.cli`).
"""

from __future__ import annotations

from hermes.version import __version__

__all__ = ["__version__"]
