"""A run's outputs beyond its records — the LBDatafile trace, the VTU files, the pictures and monitor.png — written
by the tools (:mod:`hermes.trace`, :mod:`hermes.viz`) for the run's lifecycle.

The lifecycle writes the records (summary.json, phases.csv, the arrays) and asks the :class:`RunOutputs` it is
handed (:data:`RUN_OUTPUTS`: ``hermes run``, :func:`hermes.run`) for the rest, through the
:class:`hermes.lifecycle.finish.Outputs` protocol: the lifecycle sits below the tools and never imports them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from hermes.errors import HermesError, OutputError
from hermes.files import RunDirError, reason
from hermes.progress import Progress, quiet
from hermes.scenario import Scenario
from hermes.sections import OutputSpec

__all__ = ["RunOutputs", "RUN_OUTPUTS"]

log = logging.getLogger(__name__)


class RunOutputs:
    """hermes' writers of a run's outputs beyond its records (:class:`hermes.lifecycle.finish.Outputs`)."""

    def ahead(self, out: Path, base: dict[str, np.ndarray]):
        """The worker that draws a refined run's pictures while its phases run
        (:class:`hermes.viz.ahead.DrawAhead`; ``base``: the geometry of the initial mesh)."""
        from hermes.viz.ahead import DrawAhead

        return DrawAhead(out, base)

    def write(self, out: Path, output: OutputSpec) -> None:
        """The files written with the records: the run as a vt LBDatafile trace when ``output.lbdatafile`` asks
        (:func:`hermes.trace.record.write_run_trace`; OSError and OutputError reach the caller)."""
        spec = output.trace_spec
        if spec is not None:
            from hermes.trace.record import write_run_trace

            write_run_trace(out, cells_per_block=spec.cells_per_block, compress=spec.compress)

    def draw(self, out: Path, sc: Scenario, say: Progress | None = None, ahead=None) -> None:
        """The run's VTU files and pictures, as the scenario asks (``say``: a progress line after every picture
        and, while one is drawn, the status ``the end: drawing pictures 3/9``; ``ahead``: the
        :class:`hermes.viz.ahead.DrawAhead` that drew some while the phases ran — the rest here). A picture
        hermes cannot draw from the records is a warning; a file it cannot write (a full disk, a read-only
        medium) is a RunDirError after the records are complete."""
        say = say if say is not None else quiet()
        try:
            if sc.output.vtu:
                from hermes.viz.vtu import write_run_vtu

                say.status("the end: writing the VTU files")
                try:
                    write_run_vtu(out)
                except OutputError:
                    raise
                except HermesError as err:
                    log.warning("VTU files not written: %s", err)
            if sc.output.pictures:
                from hermes.viz import plot_run
                from hermes.viz.parallel import default_workers

                counted = _Counted(say, sc.adaptation.phases + 2)
                try:
                    if ahead is None:
                        plot_run(out, progress=counted, workers=default_workers(sc.adaptation.phases + 1))
                    else:  # phases.png and, from the last back, the pictures the worker has not started; then
                        plot_run(out, phases=[], progress=counted)  # what neither drew
                        here = ahead.take_over(counted)
                        say.status("the end: waiting for the drawing worker")
                        done = set(ahead.finish())
                        say(f"drawn {len(done)} partition pictures while the phases ran"
                            + (f", {len(here)} here" if here else ""))
                        done |= set(here)
                        rest = [k for k in range(sc.adaptation.phases + 1) if k not in done]
                        counted.total = counted.done + len(rest)
                        counted.show()
                        if rest:
                            plot_run(out, phases=rest, timeline=False, progress=counted,
                                     workers=default_workers(len(rest)))
                except OutputError:
                    raise
                except HermesError as err:
                    log.warning("pictures not written: %s", err)
                if sc.extraload is not None or sc.monitor is not None:
                    say.status("the end: drawing monitor.png")
                    _draw_monitor(out)
        except (OSError, OutputError) as err:
            raise RunDirError(f"cannot write the pictures in {out} ({reason(err)}); the run's records are "
                              f"complete") from None


class _Counted:
    """A picture's progress line relayed, and the status ``the end: drawing pictures K/N`` for the next one (the
    lines come as each picture is done; the status fills the wait for the next)."""

    def __init__(self, say: Progress, total: int):
        self.say, self.total, self.done = say, total, 0
        self.show()

    def show(self) -> None:
        if self.done < self.total:
            self.say.status(f"the end: drawing pictures {self.done + 1}/{self.total}")
        else:
            self.say.status("the end: the pictures drawn")

    def __call__(self, line: str) -> None:
        self.say(line)
        self.done += 1
        self.show()


def _draw_monitor(out: Path) -> None:
    """monitor.png: true vs forecast (vs measured) capacity per rank over the phases, from phases.csv."""
    import csv

    from hermes.viz.monitor import monitor_arrays, plot_monitor

    try:
        with open(out / "phases.csv", newline="") as f:
            a = monitor_arrays(csv.DictReader(f))
        plot_monitor(out / "monitor.png", a["phases"], a["true"], a["forecast"], a["measured"])
    except OutputError:
        raise
    except HermesError as err:
        log.warning("monitor.png not written: %s", err)


#: hermes' writers, handed to :func:`hermes.lifecycle.driver.run` and :func:`~hermes.lifecycle.driver.resume`
RUN_OUTPUTS = RunOutputs()
