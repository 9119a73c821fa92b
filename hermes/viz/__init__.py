"""VISUALISATION: partition pictures and per-phase plots of a run directory.

The package hands on the names below from the modules that define them; :func:`plot_run` is in
:mod:`hermes.viz.pictures`.
"""

from hermes.viz.partition_picture import plot_partition
from hermes.viz.pictures import DEFAULT_SHOW, SHOW_CHOICES, plot_run
from hermes.viz.timeline import plot_comparison, plot_phases
from hermes.viz.zoom import auto_zoom, parse_zoom

__all__ = ["plot_run", "plot_partition", "plot_phases", "plot_comparison", "auto_zoom", "parse_zoom", "DEFAULT_SHOW",
           "SHOW_CHOICES"]
