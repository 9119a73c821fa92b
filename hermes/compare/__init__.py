"""hermes compare: an experiment — a base scenario and axes swept over it — in one command.

``hermes compare experiments/thesis.yaml`` runs the cross product of the experiment's axes (each run a normal
run directory ``runs/<experiment>/runs/<id>/``), skipping runs already complete, and writes beside them
results.csv, phases.csv, table.md, plots/ and report.html. The parts: the experiment format
(:mod:`hermes.compare.experiment`), the scheduling of the runs (:mod:`hermes.compare.runner`), the sweep and its
results (:mod:`hermes.compare.sweep`), the tables (:mod:`hermes.compare.tables`), the report
(:mod:`hermes.compare.report`). The package is callable: ``hermes.compare("experiments/thesis.yaml")`` is
:func:`hermes.compare.sweep.compare`.
"""

from __future__ import annotations

import sys
import types

from hermes.compare.experiment import Experiment, ExperimentError, load_experiment, make_experiment, parse_axis_option
from hermes.compare.sweep import MAX_JOBS, MAX_TIMEOUT, PLAN, check_options, collect, compare, render, run_experiment

__all__ = ["compare", "run_experiment", "render", "collect", "check_options", "load_experiment", "make_experiment",
           "Experiment", "ExperimentError", "parse_axis_option", "PLAN", "MAX_JOBS", "MAX_TIMEOUT"]


class _CallablePackage(types.ModuleType):
    """The package's class: calling it is calling :func:`compare`."""

    def __call__(self, *args, **kwargs):
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
