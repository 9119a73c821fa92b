"""hermes compare: an experiment — a base scenario and axes swept over it — in one command.

``hermes compare experiments/thesis.yaml`` runs the cross product of the experiment's axes (each run a normal
run directory ``runs/<experiment>/runs/<id>/``), skipping runs already complete, and writes beside them:

- ``results.csv`` — one row per run: every axis, the status and error line, every summary figure (the movement of
  cells summed over the phases: ``cells_moved``, distinct cells that changed owner, and ``cell_sends``);
- ``phases.csv`` — one row per run and phase (``cells_moved`` and ``cell_sends`` per phase);
- ``table.md`` — thesis Tables 10.5 / 10.7 style: total time (final imbalance), ratios to ``none`` and to the best;
- ``plots/`` — total time by row, imbalance per phase, time breakdown, total time against the cells moved;
- ``report.html`` — all of it and each run's final partition, in one self-contained file.

The experiment format is in :mod:`hermes.compare.experiment`, the scheduling (``--jobs``, resume, failures) in
:mod:`hermes.compare.runner`, the tables in :mod:`hermes.compare.tables`; this module sweeps an experiment (its
runs executed, then its results collected and rendered) and holds :func:`compare`, which the package
:mod:`hermes.compare` hands on (``hermes.compare("experiments/thesis.yaml")``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes.claims import MARKER, DirLock, claim_dir, read_marker, subdir
from hermes.compare.experiment import Experiment, ExperimentError, load_experiment, make_experiment
from hermes.compare.runner import (ERROR, _scenario_of, cores, error_of, execute, planned_scenario, read_summary,
                                   side_file)
from hermes.compare.tables import columns_of, make_grid, markdown_tables, phase_rows, run_row
from hermes.errors import HermesError
from hermes.files import safe_name, write_atomic, write_csv
from hermes.loaders import load_json
from hermes.progress import Progress, using, wanted

__all__ = ["compare", "run_experiment", "render", "collect", "check_options", "PLAN", "MAX_JOBS", "MAX_TIMEOUT"]

#: the experiment's record in its directory: the runs planned, their labels, the table's layout
PLAN = "plan.json"


def run_experiment(exp: Experiment, out: str | os.PathLike | None = None, *, jobs: int = 1,
                   oversubscribe: bool = False, timeout: float | None = None, report: bool = True,
                   say: Callable[[str], None] | Progress | None = print) -> Path:
    """Run ``exp`` (skipping complete runs) and write its results; return the experiment directory.

    Parameters
    ----------
    exp : Experiment
        From :func:`load_experiment` or :func:`make_experiment`.
    out : path, optional
        The experiment directory (default ``runs/<experiment name>``: the same directory every time, so a
        second invocation finds the runs of the first).
    jobs, oversubscribe, timeout
        See :func:`hermes.compare.runner.execute`.
    report : bool
        Also draw the plots and write report.html (results.csv, phases.csv and table.md are always written).
    say : callable, Progress or None
        Receives the progress lines; the step in progress (the runs done and running, each running run's phase,
        then each figure of the report) is repeated at least every 5 s (:class:`hermes.progress.Progress`; None:
        silent).

    Raises
    ------
    ExperimentError
        A malformed experiment or an invalid run scenario, before anything runs (one line).
    """
    from hermes.balance.registry import plugins_deferred
    from hermes.lifecycle.plugins import check_plugins

    check_options(jobs, timeout)
    with plugins_deferred():  # a plug-in is imported last, in a child (hermes.lifecycle.plugins)
        runs = exp.runs()
    d = Path(out) if out is not None else Path("runs") / exp.name
    # the experiment directory is hermes' (marked) and locked for compare's life: a second compare into it is
    # refused, a directory hermes did not make is never written into
    lock = claim_dir(d, "--out", kind="experiment", name=exp.name)
    try:
        checked = set()
        for r in runs:  # each balancer section that names a plug-in, once
            key = repr(r.scenario.balancer.model_dump())
            if key not in checked:
                checked.add(key)
                check_plugins(r.scenario.balancer, r.scenario.run.timeout or timeout)
        with using(say) as shown:
            return _run_experiment(exp, runs, d, lock, jobs, oversubscribe, timeout, report, shown)
    finally:
        lock.release(remove_if_unused=True)


#: the most runs ``--jobs`` may start at once; the longest wall time ``--timeout`` may give a run (115 days)
MAX_JOBS = 1024
MAX_TIMEOUT = 1e7


def check_options(jobs: Any, timeout: Any) -> None:
    """``--jobs`` an integer in [1, MAX_JOBS], ``--timeout`` None or a finite number of seconds in (0, 1e7]."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ExperimentError(f"--jobs {jobs!r}: expected an integer from 1 to {MAX_JOBS}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT):
        raise ExperimentError(f"--timeout {timeout!r}: expected a number of seconds above 0 and at most "
                              f"{MAX_TIMEOUT:g}")


def _run_experiment(exp: Experiment, runs, d: Path, lock, jobs: int, oversubscribe: bool, timeout: float | None,
                    report: bool, say: Progress) -> Path:
    plan = {"name": exp.name, "description": exp.description, "axes": [a.name for a in exp.axes],
            "columns": exp.column_axis, "runs": [{"id": r.id, "labels": r.labels, "values": r.values,
                                                  "processors": r.processors} for r in runs],
            "experiment": exp.to_dict()}
    write_atomic(d / PLAN, json.dumps(plan, indent=1, default=str) + "\n")
    shape = " × ".join(f"{len(a.values)} {a.name}" for a in exp.axes) or "1 run"
    say(f"hermes compare: {exp.name}: {len(runs)} run{'s' * (len(runs) != 1)} ({shape}) in {d}; jobs {jobs}, "
        f"{cores()} cores" + (", oversubscribed: wall-clock timings unreliable" if oversubscribe else ""))
    t0 = time.perf_counter()
    outcomes = execute(runs, d / "runs", jobs=jobs, oversubscribe=oversubscribe, timeout=timeout, say=say,
                       token=lock.token)
    written = render(d, report=report, say=say, token=lock.token)
    n = {s: sum(o.status == s for o in outcomes) for s in ("done", "skipped", "failed")}
    say(f"hermes compare: {n['done']} ran, {n['skipped']} already complete, {n['failed']} failed in "
        f"{time.perf_counter() - t0:.1f} s wall; " + ", ".join(str(p) for p in written if p.parent == d))
    return d


def _read_plan(d: Path) -> dict[str, Any]:
    if not (d / PLAN).is_file():
        raise ExperimentError(f"{d}: not an experiment directory (no {PLAN}; run hermes compare first)")
    if read_marker(d) != "experiment":
        raise ExperimentError(f"{d}: not an experiment directory hermes made (no {MARKER} marker; run hermes "
                              f"compare into a new directory)")
    plan = load_json(d / PLAN, str(d / PLAN), error=ExperimentError)
    runs = plan.get("runs") if isinstance(plan, dict) else None
    if not isinstance(runs, list) or not isinstance(plan.get("axes"), list) or not all(
            isinstance(r, dict) and isinstance(r.get("labels"), dict) and isinstance(r.get("values"), dict)
            and isinstance(r.get("id"), str) for r in runs):
        raise ExperimentError(f"{d / PLAN}: not an experiment plan of hermes")
    for r in runs:
        try:
            safe_name(r["id"], f"{d / PLAN}: run id")
        except HermesError as err:
            raise ExperimentError(str(err)) from None
    return plan


def collect(d: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(plan, results rows, phases rows) of an experiment directory, read from its runs as they are on disk.

    A results row carries, besides its columns, ``_labels`` (the axis labels) and ``_summary`` (the run's
    summary) for the table and the plots; they are not written to the CSV files.
    """
    d = Path(d)
    plan = _read_plan(d)
    rows, prows = [], []
    for r in plan["runs"]:
        rd = d / "runs" / r["id"]
        summary = read_summary(rd)
        err = None
        if summary is not None and _scenario_of(rd) != planned_scenario(rd):
            # a run directory that holds another scenario than compare planned (an older experiment, or a run
            # someone else wrote there): not this experiment's result
            summary, status, err = None, "stale", "the run directory holds another scenario than planned"
        elif summary is not None:
            status = "done"
        elif side_file(rd, ERROR).exists():
            status, err = "failed", error_of(rd)
        else:
            status = "missing"
        row = run_row(r["id"], r["values"], status, err, summary, str(Path("runs") / r["id"]))
        row["_labels"], row["_summary"] = r["labels"], summary
        rows.append(row)
        if summary is not None:
            prows.extend(phase_rows(r["id"], r["values"], summary))
    return plan, rows, prows


def _public(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def render(d: str | os.PathLike, *, report: bool = True, say: Callable[[str], None] | Progress | None = print,
           dpi: int = 100, token: str | None = None) -> list[Path]:
    """Write results.csv, phases.csv, table.md and (``report``) the plots and report.html from the runs in
    the experiment directory ``d`` as they are (``hermes compare --report DIR``): a directory hermes made,
    locked meanwhile (``token``: the lock the caller holds). Returns the files written. ``say``: as
    :func:`run_experiment` (a status per figure drawn)."""
    d = Path(d)
    _read_plan(d)  # an experiment directory of hermes, before anything is locked or written
    lock = DirLock.acquire(d, "--report", token=token, what="experiment")
    try:
        with using(say) as shown:
            return _render(d, report, shown, dpi)
    except OSError as err:
        raise ExperimentError(f"cannot write the results in {d} ({err.strerror or err})") from None
    finally:
        lock.release()


def _render(d: Path, report: bool, say: Progress, dpi: int) -> list[Path]:
    say.status("report: reading the runs' results")
    plan, rows, prows = collect(d)
    public = _public(rows)
    written = [write_csv(d / "results.csv", public, columns_of(public))]
    if prows:
        written.append(write_csv(d / "phases.csv", prows, columns_of(prows)))
    grid = make_grid(rows, plan["axes"], plan.get("columns"))
    failures = [(r["run"], r["error"]) for r in rows if r["status"] == "failed"]
    clocks = {str((r["_summary"] or {}).get("clock")) for r in rows if r["_summary"]}
    clock = "virtual" if clocks <= {"virtual"} else ", ".join(sorted(clocks))
    title = f"Experiment {plan['name']}"
    text = markdown_tables(grid, title=title, description=plan.get("description", ""), clock=clock,
                           failures=failures)
    written.append(write_atomic(d / "table.md", text))
    if report and any(r["_summary"] for r in rows):
        written += _draw(d, plan, rows, grid, failures, clock, title, say, dpi)
    say.status(None)
    return written


def _draw(d: Path, plan: dict, rows: list[dict], grid, failures, clock: str, title: str, say: Progress,
          dpi: int) -> list[Path]:
    from hermes.compare.report import write_report
    from hermes.viz import plot_run
    from hermes.viz.compare_plots import plot_breakdown, plot_imbalance, plot_pareto, plot_totals

    cells = grid.summaries()
    pd = subdir(d, "plots")
    figures = 4 + sum(r["_summary"] is not None for r in rows)
    drawn = iter(range(1, figures + 1))

    def figure(name: str) -> Path:  # the status of the figure about to be drawn
        say.status(f"report: drawing {name}", next(drawn), figures)
        return pd / name

    plots = [
        ("Total time per " + (" × ".join(grid.row_axes) or "run") + ", one bar per " + (grid.col_axis or "run")
         + " (label: final imbalance).", plot_totals(figure("total-time.png"), grid.rows, grid.cols, cells, dpi=dpi)),
        ("Imbalance after balancing, phase by phase.",
         plot_imbalance(figure("imbalance.png"), grid.rows, grid.cols, cells, dpi=dpi)),
        ("Where the time goes: compute, halo exchange, synchronisation, balancing, migration, adaptation.",
         plot_breakdown(figure("time-breakdown.png"), grid.rows, grid.cols, cells, dpi=dpi)),
        ("Total time against the cells moved (distinct cells that changed owner, all phases; label: final "
         "imbalance); filled: on the Pareto front among "
         "the balancers that balance (no other is faster and moves less); ×: does not balance (none).",
         plot_pareto(figure("pareto.png"), grid.rows, grid.cols, cells, dpi=dpi)),
    ]
    pictures = []
    for r in rows:
        s = r["_summary"]
        caption = " · ".join(str(v) for v in r["_labels"].values()) or r["run"]
        if s is None:
            pictures.append((f"{caption}: {r['status']}", None))
            continue
        caption += f": {s['total_time']:.4g} s, final imbalance {s['final_imbalance']:.3f}"
        say.status(f"report: drawing the final partition of {r['run']}", next(drawn), figures)
        pictures.append((caption, _final_partition(d, r["run"], s, plot_run, say)))
    say.status("report: writing report.html")
    report = write_report(d / "report.html", title=title, description=plan.get("description", ""), grid=grid,
                          plots=plots, partitions=pictures, failures=failures,
                          counts={k: sum(r["status"] == k for r in rows) for k in ("done", "failed", "missing")},
                          clock=clock, experiment_dir=d.resolve())
    return [p for _, p in plots] + [report]


def _final_partition(d: Path, run_id: str, summary: dict, plot_run, say) -> Path | None:
    """The run's last partition, drawn once into plots/partitions/<run>/ (redrawn when the run is newer)."""
    run_dir = d / "runs" / run_id
    last = max([int(p.get("phase", 0)) for p in summary.get("phases") or [] if isinstance(p, dict)], default=0)
    dest = subdir(d, "plots", "partitions", run_id)
    png = dest / f"partition-{last:03d}.png"
    if png.is_file() and png.stat().st_mtime >= (run_dir / "summary.json").stat().st_mtime:
        return png
    try:
        return plot_run(run_dir, phases=[last], out_dir=dest, timeline=False, dpi=70)[0]
    except HermesError as err:
        say(f"hermes compare: no partition picture for {run_id}: {err}")
        return None


def compare(source: str | os.PathLike | dict | None = None, *, axes: dict[str, list[Any]] | None = None,
            out: str | os.PathLike | None = None, jobs: int = 1, oversubscribe: bool = False,
            timeout: float | None = None, report: bool = True, progress: bool = True, quiet: bool | None = None,
            name: str | None = None, **overrides: Any):
    """Run an experiment and return its results table (one row per run, as results.csv).

    Parameters
    ----------
    source : path, dict or None
        An experiment file (``experiments/thesis.yaml``), a scenario file (the base of ``axes``), an experiment
        or scenario mapping, or None (the embedded quickstart).
    axes : dict, optional
        Axes to sweep, added to (or replacing) the experiment's: ``{"balancer": ["pcg", "gda0"], "seed": [1, 2]}``
        (values as in the experiment file).
    out : path, optional
        The experiment directory (default ``runs/<name>``); complete runs found there are not run again.
    jobs, oversubscribe, timeout, report
        As ``hermes compare`` (:func:`run_experiment`).
    progress : bool
        Show the progress (default): a line per run started and ended and, repeated at least every 5 s, the
        runs done, running and failed, the ETA, each running run's phase, then each figure of the report (a
        live bar on a terminal). False: silent.
    quiet : bool, optional
        Deprecated (accepted for one release, with a DeprecationWarning): ``quiet=True`` is ``progress=False``.
    name : str, optional
        The experiment's name (default: the file's stem, or the scenario's name).
    **overrides
        Scenario keys set in every run, dotted (``**{"adaptation.phases": 2}``) or with ``__``
        (``adaptation__phases=2``).

    Returns
    -------
    pandas.DataFrame
        The rows of results.csv (``df.attrs["experiment_dir"]`` is the directory).

    Raises
    ------
    ExperimentError
        A malformed experiment or an invalid run (before anything runs).
    """
    show = wanted(progress, quiet, "hermes.compare")
    sets = {k.replace("__", "."): v for k, v in overrides.items()}
    if source is None or isinstance(source, dict):
        data = dict(source or {})
        if not ("axes" in data or "scenario" in data):  # a scenario mapping (or nothing: the quickstart)
            data = {"scenario": data} if data else {}
        exp = make_experiment(data, axes=axes, sets=sets, name=name)
    else:
        exp = load_experiment(source, sets=[], name=name)
        if axes or sets:
            exp = make_experiment(exp.source, here=exp.here, axes=axes, sets=sets, name=exp.name)
    with Progress(enabled=show) as shown:  # a live bar on a terminal, plain lines elsewhere (a notebook, a pipe)
        d = run_experiment(exp, out, jobs=jobs, oversubscribe=oversubscribe, timeout=timeout, report=report,
                           say=shown)
    rows = _public(collect(d)[1])
    import pandas as pd  # a dependency of hermes

    df = pd.DataFrame(rows)
    df.attrs["experiment_dir"] = str(d)
    return df
