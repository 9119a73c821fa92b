"""The Brusselator experiments of 003 (Bahi, Contassot-Vivier & Couturier): spec, runs, summary.

``hermes run SPEC.yaml [--set key=value ...] [--out DIR]`` starts ``mpiexec -n processors`` and prints the result
(:func:`result_lines`); a spec is recognised by ``application.kernel: brusselator``
(:func:`hermes.app.brusselator.is_spec_file`), and
:mod:`hermes.cli.run_brusselator` is the study as the command line's ``run`` sees it. ``python -m
hermes.cli.run_brusselator SPEC.yaml [--set key=value ...] [--serial] [--json OUT]`` is the lower-level runner: under
``mpiexec -n P`` it runs one processor per MPI process (:func:`run_brusselator`); with ``--serial`` (virtual clock only)
it runs all processors in one process (:func:`simulate`), with the same results bit for bit. Rank 0 prints the summary
as JSON.

The spec (:class:`BrusselatorSpec`, every key optional except where noted)::

    name: bahi-homogeneous
    processors: 8             # MPI processes / simulated processors (a line, 003 §VI-A)
    clock: virtual            # virtual (deterministic model) | wall (real time)
    application: {kernel: brusselator, mode: async}   # mode: sync (SISC, the default) | async (AIAC)
    problem:  {points: 2000, alpha: 0.02, t_end: 10, dt: 0.05, u_boundary: 1.0, v_boundary: 3.0,
               newton_tol: 1.0e-10, max_newton: 30}
    solver:   {accuracy: 7.0e-4, residual: auto, contraction: auto, window: all, overlap: auto,
               work_per_point: 1.0, persistence: 1, max_iterations: 100000,
               partition: even}   # partition: even | capacities (static balancing)
    platform: {capacities: homo, speed: 1.0e6, latency: 1.0e-4, bandwidth: 1.25e7,
               links: [{ranks: [4, 5], latency: 0.01, bandwidth: 1.25e6}],
               sites: [5, 5, 5],               # consecutive processors per site (optional) ...
               inter_site: {latency: 0.01, bandwidth: 1.25e6},   # ... and the links between sites
               delay: {max: 0.0, seed: 0}}     # extra random delay per message (tests)
    balancing: {enabled: false, estimator: residual, every: 20, threshold: 2.0, fraction: 0.5, min_keep: 1,
                residual: mean}   # AIAC's residual: mean (hermes' variant, the default) | last (003 as printed)
    check: true               # compare with the serial solution (rank 0; memory (n_steps+1)·N·16 bytes)

Every number is bounded (``hermes.scenario`` conventions: finite, at most ``BIG``; counts at most
``MAX_PROCESSORS`` / ``MAX_ITERATIONS``; points at most ``MAX_POINTS``, time steps at most ``MAX_STEPS``), and
errors are one line naming the key path.

``solver.accuracy`` is the distance to the serial solution the run must reach (max norm over the whole space-time
trajectory); the iteration stops a window when its residual ``‖F(X) − X‖∞`` is below the *residual threshold*
(:func:`residual_threshold`): ``solver.residual: auto`` derives it from the accuracy, the number of windows W and the
block iteration's contraction factor ρ (``solver.contraction``), ``ε_w = accuracy · (1 − ρ) / (ρ W)`` capped at the
accuracy; a number sets it directly (``residual: 7.0e-4`` is 003's own criterion, the accuracy read as a residual).

Capacities are relative speeds (normalised to sum 1, hermes convention): processor i does
``speed · p · c_i`` work units per second, a work unit being one Newton iteration on one point.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, ValidationError, field_validator, model_validator

from hermes.app.brusselator.brusselator import Brusselator, SolverError, auto_overlap, serial_solution, window_steps
from hermes.app.brusselator.iteration import (DelayedLinks, IterConfig, Platform, BlockRecord, StaticLinks, assemble,
                                  capacity_bounds, error_trace, even_bounds)
from hermes.app.brusselator.line_balance import LineBalance
from hermes.runtime.clock import Links
from hermes.errors import ScenarioError, validation_message
from hermes.loaders import load_yaml
from hermes.scenario import BIG, MAX_ITERATIONS, MAX_PROCESSORS, MAX_SEED, apply_overrides
from hermes.strict import Strict

__all__ = ["BrusselatorSpec", "load_spec", "parse_spec", "check_spec", "build", "residual_threshold",
           "contraction_estimate", "run_brusselator", "simulate", "error_times",
           "summarise", "result_lines", "write_run", "timeline", "MAX_POINTS", "MAX_STEPS"]

#: points of the line: the serial check holds (steps + 1) · points · 16 bytes, the blocks a window of them
MAX_POINTS = 10_000_000
#: implicit-Euler steps t_end / dt (per-rank records keep one row per window)
MAX_STEPS = 1_000_000

Pos = Annotated[float, Field(gt=0, le=BIG)]
NonNeg = Annotated[float, Field(ge=0, le=BIG)]
#: the boundary values: u²v appears in the reaction term, so |u|, |v| ≤ 1e30 keeps it within BIG
Value = Annotated[float, Field(ge=-1e30, le=1e30)]
Count = Annotated[int, Field(ge=1, le=MAX_ITERATIONS)]
#: a tolerance on the solution (of order 1 with the shipped boundary values): at least 1e-15, about 10 machine
#: epsilons — a smaller one cannot be met in double precision, and Newton (max_newton) or the iteration
#: (max_iterations) would run to their limits on every point of every window
MIN_TOL = 1e-15
Tol = Annotated[float, Field(ge=MIN_TOL, le=BIG)]



class ProblemSpec(Strict):
    """003 eq. (4) and its implicit-Euler / Newton discretisation."""

    points: Annotated[int, Field(ge=1, le=MAX_POINTS)] = 2000
    alpha: Pos = 0.02
    t_end: Pos = 10.0
    dt: Pos = 0.05
    u_boundary: Value = 1.0
    v_boundary: Value = 3.0
    newton_tol: Annotated[float, Field(ge=MIN_TOL, le=1)] = 1.0e-10
    max_newton: Annotated[int, Field(ge=1, le=1000)] = 30

    @model_validator(mode="after")
    def _steps(self):
        steps = self.t_end / self.dt
        if steps > MAX_STEPS:
            raise ValueError(f"t_end / dt is {steps:g} time steps, more than {MAX_STEPS}")
        return self


class SolverSpec(Strict):
    """The parallel iteration (:mod:`hermes.app.brusselator.brusselator`)."""

    accuracy: Tol = 7.0e-4
    residual: Tol | Literal["auto"] = "auto"
    contraction: Annotated[float, Field(gt=0, lt=1)] | Literal["auto"] = "auto"
    window: Annotated[int, Field(ge=1, le=MAX_STEPS)] | Literal["all"] = "all"
    overlap: Annotated[int, Field(ge=0, le=MAX_POINTS)] | Literal["auto"] = "auto"
    work_per_point: Pos = 1.0
    persistence: Annotated[int, Field(ge=1, le=1000)] = 1
    max_iterations: Count = 100_000
    partition: Literal["even", "capacities"] = "even"
    form: Literal["stepwise", "paper"] = "stepwise"


class LinkSpec(Strict):
    ranks: tuple[Annotated[int, Field(ge=0, lt=MAX_PROCESSORS)], Annotated[int, Field(ge=0, lt=MAX_PROCESSORS)]]
    latency: Pos
    bandwidth: Pos


class SiteLink(Strict):
    latency: Pos
    bandwidth: Pos


class DelaySpec(Strict):
    max: NonNeg = 0.0
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0


class PlatformSpec(Strict):
    """Processors on a line and the α-β links between them."""

    capacities: list[Pos] | Literal["homo"] = "homo"
    speed: Pos = 1.0e6
    latency: Pos = 1.0e-4
    bandwidth: Pos = 1.25e7
    links: list[LinkSpec] = []
    sites: list[Annotated[int, Field(ge=1, le=MAX_PROCESSORS)]] | None = None
    inter_site: SiteLink | None = None
    delay: DelaySpec = DelaySpec()


class BalancingSpec(Strict):
    """The line balancer (:mod:`hermes.app.brusselator.line_balance`, 003 Alg. 3–4).

    ``residual`` is how an asynchronous processor reads the residual estimator: ``last``, 003's rule as printed
    (the residual of its last iteration); ``mean``, hermes' variant (the mean over the last ``every`` iterations
    of its current block, decisions after a full period, neighbours' estimates only if made since the last
    transfer between them), the default because the shipped Table I grid ends with it and does not with
    ``last`` (docs/ASYNC.md, "Residual balancing on unequal machines"). The reproductions of 003's figures
    (``benchmarks/bahi_async.py``) set ``last``. No effect on the time estimator or on SISC.
    """

    enabled: bool = False
    estimator: Literal["residual", "time"] = "residual"
    every: Count = 20
    threshold: Annotated[float, Field(ge=1, le=BIG)] = 2.0
    fraction: Annotated[float, Field(gt=0, le=1)] = 0.5
    min_keep: Annotated[int, Field(ge=1, le=MAX_POINTS)] = 1
    residual: Literal["mean", "last"] = Field("mean", description="AIAC's residual estimate: mean (hermes' variant) | "
                                                                  "last (003's last iteration)")


class ApplicationSpec(Strict):
    """Which application and how it iterates (the key ``application.kernel: brusselator`` marks a spec file)."""

    kernel: Literal["brusselator"] = "brusselator"
    mode: Literal["sync", "async"] = Field("sync", description="sync: SISC (the default); async: AIAC (003 §II-B)")


class BrusselatorSpec(Strict):
    """One run of the 003 experiments (module docstring)."""

    name: str = "brusselator"
    processors: Annotated[int, Field(ge=1, le=MAX_PROCESSORS)] = 4
    clock: Literal["virtual", "wall"] = "virtual"
    application: ApplicationSpec = ApplicationSpec()
    problem: ProblemSpec = ProblemSpec()
    solver: SolverSpec = SolverSpec()
    platform: PlatformSpec = PlatformSpec()
    balancing: BalancingSpec = BalancingSpec()
    check: bool = True

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}", v):
            raise ValueError("may only contain letters, digits, '.', '_' and '-', start with a letter, a digit or "
                             f"'_', and have at most 100 characters, got {v[:40]!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        p, pl = self.processors, self.platform
        if isinstance(pl.capacities, list) and len(pl.capacities) != p:
            raise ValueError(f"platform.capacities: {len(pl.capacities)} values for {p} processors")
        for k, link in enumerate(pl.links):
            if max(link.ranks) >= p or link.ranks[0] == link.ranks[1]:
                raise ValueError(f"platform.links.{k}.ranks: {list(link.ranks)} is not a pair of processors below {p}")
        if pl.sites is not None:
            if sum(pl.sites) != p:
                raise ValueError(f"platform.sites: {sum(pl.sites)} processors in the sites, {p} processors")
            if pl.inter_site is None:
                raise ValueError("platform.sites needs platform.inter_site (latency and bandwidth between sites)")
        return self

    @property
    def mode(self) -> str:
        """``application.mode``: sync (SISC) or async (AIAC)."""
        return self.application.mode


def parse_spec(data: Any, overrides: list[str] | None = None) -> BrusselatorSpec:
    """Validate a raw mapping (from YAML) with ``key.path=value`` overrides; ScenarioError in one line."""
    if not isinstance(data, dict):
        raise ScenarioError("spec: the file must contain a mapping of keys")
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        return BrusselatorSpec.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(validation_message(err, root="spec", more=False)) from None


def load_spec(path: str | Path, overrides: list[str] | None = None) -> BrusselatorSpec:
    """Read and validate a spec file (:mod:`hermes.loaders`' limits), then build its iteration serially
    (:func:`check_spec`), so that a spec the run cannot start is refused before any MPI job."""
    spec = parse_spec(load_yaml(path, str(path)), overrides)
    check_spec(spec)
    return spec


def check_spec(spec: BrusselatorSpec) -> None:
    """What a spec's run would refuse at its start, checked serially: the blocks of the initial partition (more
    processors than the line can give points), the iteration's parameters, and the memory of the serial check.

    Raises
    ------
    ScenarioError
        One line.
    """
    try:
        build(spec)
    except SolverError as err:
        raise ScenarioError(str(err)) from None
    if spec.check:
        from hermes.machine import memory_available

        steps = round(spec.problem.t_end / spec.problem.dt)
        need = (steps + 1) * spec.problem.points * 16.0
        avail = memory_available()
        if avail is not None and need > avail:
            raise ScenarioError(f"check: the serial solution of {spec.problem.points} points × {steps + 1} time "
                                f"levels needs {need / 2**30:.3g} GiB, this machine has {avail / 2**30:.3g} GiB "
                                f"available (check: false skips it)")


def residual_threshold(accuracy: float, windows: int, contraction: float) -> float:
    """The residual below which a window is accepted so that the whole trajectory is within ``accuracy`` of the
    serial solution: ``min(accuracy, accuracy · (1 − ρ) / (ρ W))``.

    Why: if the block map F of a window contracts by ρ per sweep (max norm), a window accepted at residual
    ``r = ‖F(X) − X‖∞`` and replaced by F(X) is within ``ρ r / (1 − ρ)`` of the window's exact solution (from the
    same initial state), the standard a-posteriori bound of a contraction. The next window starts from that
    state; assuming the implicit-Euler window map of this dissipative problem does not amplify an initial error,
    the W windows' errors add up at most: ``error ≤ W ρ r / (1 − ρ)``. The measurements agree (docs/ASYNC.md, W = 40):
    error / threshold is 2.0–3.6 with δ = 2ℓ (the bound with ρ = e⁻¹ allows 23) and 12–47 with δ = ℓ (ρ = e^(−1/2)
    allows 62), AIAC below SISC, with the literal threshold (the accuracy) and with the derived one.
    """
    return min(accuracy, accuracy * (1.0 - contraction) / (contraction * windows))


def contraction_estimate(problem: Brusselator, overlap: int) -> float:
    """ρ = e^(−δ/(2ℓ)): an upper estimate of the block iteration's contraction per sweep with overlap δ.

    One implicit step damps a boundary error like e^(−k/ℓ) over k points, so the kept block sees e^(−δ/ℓ) of its
    overlap's boundary error; the measured ratios of successive SISC residuals are larger (max norm over the block,
    both sides, every step of the window): median 0.13 / 90 % quantile 0.38 with δ = 2ℓ, 0.47 / 0.78 with δ = ℓ
    (docs/ASYNC.md). e^(−δ/(2ℓ)) = 0.37 / 0.61 covers the bulk of them; set ``solver.contraction`` to a measured
    value for a stricter bound. Without overlap it is 1 − 1/(2ℓ) (slow convergence is real there).
    """
    ell = max(problem.screening_length, 1.0)
    return min(math.exp(-overlap / (2.0 * ell)), 1.0 - 1.0 / (2.0 * ell))


def build(spec: BrusselatorSpec) -> tuple[IterConfig, Platform, np.ndarray]:
    """The iteration, the platform and the initial line partition of a spec (same on every rank)."""
    pr = spec.problem
    problem = Brusselator(pr.points, pr.alpha, pr.t_end, pr.dt, pr.u_boundary, pr.v_boundary, pr.newton_tol,
                          pr.max_newton)
    sv, bl = spec.solver, spec.balancing
    overlap = auto_overlap(problem) if sv.overlap == "auto" else int(sv.overlap)
    balance = (LineBalance(bl.estimator, bl.every, bl.threshold, bl.fraction, max(bl.min_keep, overlap + 1),
                           bl.residual) if bl.enabled else None)
    window = problem.n_steps if sv.window == "all" else int(sv.window)
    if sv.residual == "auto":
        rho = contraction_estimate(problem, overlap) if sv.contraction == "auto" else float(sv.contraction)
        tol = residual_threshold(sv.accuracy, len(window_steps(problem.n_steps, window)), rho)
    else:
        tol = float(sv.residual)
    if tol < MIN_TOL:  # a contraction near 1 over many windows: a threshold no sweep can meet (spec validation)
        raise ScenarioError(f"solver.accuracy, solver.contraction: the window residual threshold derived from them is "
                            f"{tol:.3g}, below {MIN_TOL:g}, which double precision cannot meet (give solver.residual "
                            f"or a smaller solver.contraction)")
    # IterConfig.accuracy is the iteration's residual threshold (what the detection compares with)
    cfg = IterConfig(problem, overlap, window, tol, balance, sv.max_iterations, sv.persistence, sv.form)
    pl, p = spec.platform, spec.processors
    overrides: dict[tuple[int, int], tuple[float, float]] = {}
    if pl.sites is not None:
        site = np.repeat(np.arange(len(pl.sites)), pl.sites)
        for i in range(p):
            for j in range(i + 1, p):
                if site[i] != site[j]:
                    overrides[(i, j)] = (pl.inter_site.latency, pl.inter_site.bandwidth)
    for link in pl.links:
        i, j = sorted(link.ranks)
        overrides[(i, j)] = (link.latency, link.bandwidth)
    links = StaticLinks(Links(pl.latency, pl.bandwidth, overrides))
    if pl.delay.max > 0:
        links = DelayedLinks(links, pl.delay.max, pl.delay.seed)
    caps = np.ones(p) if pl.capacities == "homo" else np.asarray(pl.capacities, dtype=np.float64)
    platform = Platform.create(caps, pl.speed / sv.work_per_point, links)
    bounds = (even_bounds(problem.n, p, cfg.min_points) if sv.partition == "even"
              else capacity_bounds(problem.n, caps, overlap, cfg.min_points))
    return cfg, platform, bounds


def simulate(spec: BrusselatorSpec, trace: bool = False) -> tuple[list[BlockRecord], list]:
    """All processors in this process (virtual clock): SISC or the discrete-event AIAC simulation.

    With ``trace`` every rank also records the error of its block against the serial solution after each sweep
    (``window: all`` only; :func:`error_times` reads it, :func:`summarise` adds it to the summary). The iteration
    is the same: the trace only reads the blocks.
    """
    from dataclasses import replace

    from hermes.app.brusselator.aiac import aiac_serial
    from hermes.app.brusselator.sisc import sisc_serial

    if spec.clock != "virtual":
        raise ScenarioError("clock: a serial simulation needs the virtual clock (the wall clock needs mpiexec)")
    cfg, platform, bounds = build(spec)
    if trace:
        if spec.solver.window != "all":
            raise ScenarioError("solver.window: the error trace needs one window over the whole interval (all)")
        cfg = replace(cfg, reference=serial_solution(cfg.problem))
    if spec.mode == "sync":
        return sisc_serial(cfg, platform, bounds), []
    return aiac_serial(cfg, platform, bounds)


def run_brusselator(comm, spec: BrusselatorSpec, clock_kind: str | None = None) -> dict | None:
    """Collective: run ``spec`` with one processor per process of ``comm``; the summary on rank 0, None elsewhere.

    ``clock_kind`` overrides ``spec.clock``. Raises ScenarioError (on every rank) if the communicator's size is
    not ``spec.processors``.
    """
    from hermes.app.brusselator.aiac_mpi import aiac_mpi_virtual, aiac_mpi_wall
    from hermes.app.brusselator.sisc import sisc_mpi

    clock = clock_kind or spec.clock
    if comm.Get_size() != spec.processors:
        raise ScenarioError(f"processors: the spec asks for {spec.processors}, the job has {comm.Get_size()}")
    cfg, platform, bounds = build(spec)
    sim_rounds = 0
    if spec.mode == "sync":
        rec, rounds = sisc_mpi(comm, cfg, platform, bounds, clock), []
    elif clock == "virtual":
        rec, rounds, sim_rounds = aiac_mpi_virtual(comm, cfg, platform, bounds)
    else:
        rec, rounds, sim_rounds = aiac_mpi_wall(comm, cfg, platform, bounds)
    records = comm.gather(rec, root=0)
    rounds = comm.gather(rounds, root=0)
    if comm.Get_rank() != 0:
        return None
    out = summarise(spec.model_copy(update={"clock": clock}), records, [r for rs in rounds for r in rs])
    out["simulation_rounds"] = sim_rounds
    return out


def summarise(spec: BrusselatorSpec, records: list[BlockRecord], rounds: list) -> dict:
    """The run's summary: time to the accuracy, iterations, error against the serial solution, migrations."""
    cfg, _, _ = build(spec)
    problem = cfg.problem
    out: dict[str, Any] = {
        "name": spec.name, "mode": spec.mode, "clock": spec.clock, "processors": spec.processors,
        "points": problem.n, "steps": problem.n_steps, "window": cfg.window, "windows": len(cfg.windows),
        "overlap": cfg.overlap, "accuracy": spec.solver.accuracy, "residual_threshold": cfg.accuracy,
        "balancing": spec.balancing.model_dump() if spec.balancing.enabled else None,
        "time": max(r.time for r in records),
        "iterations": [r.iterations for r in records],
        "solves": [r.solves for r in records],
        "verifications": [r.verifications for r in records],
        "compute_time": [r.compute_time for r in records],
        "wait_time": [r.wait_time for r in records],
        "migrated_points": int(sum(r.sent_points for r in records)),
        "transfers": int(sum(r.transfers for r in records)),
        "messages": int(sum(r.messages for r in records)),
        "bytes": float(sum(r.bytes for r in records)),
        "final_bounds": _final_bounds(records),
        "detection_rounds": len(rounds),
        "rounds_failed": int(sum(1 for r in rounds if not r[3])),
        "failed_round_residuals": [float(r[2]) for r in rounds if not r[3]],
        # 003 leaves the detection out; the rule "stop once every processor has reported local convergence" stops
        # at the first round, where hermes' verification evaluated ‖F(X) − X‖∞ (AIAC; SISC's allreduce is exact)
        "first_round": ({"time": float(rounds[0][1]), "residual": float(rounds[0][2])} if rounds else None),
        "form": cfg.form,
        "residual_rule": "derived" if spec.solver.residual == "auto" else "given",
    }
    y = assemble(problem, cfg.window, records)
    out["solution_checksum"] = float(np.abs(y).sum())
    if spec.check:
        ref = serial_solution(problem)
        out["error_vs_serial"] = float(np.max(np.abs(y - ref)))
    if any(r.errors for r in records):  # simulate(..., trace=True): the times to the accuracy as an error
        out.update(error_times(records, spec.solver.accuracy, out.get("error_vs_serial")))
    return out


def error_times(records: list[BlockRecord], accuracy: float, final_error: float | None = None) -> dict:
    """When the iterate came within ``accuracy`` of the serial solution (max norm over the whole trajectory, 003's
    accuracy read as an error), from the ranks' per-sweep error trace
    (:func:`hermes.app.brusselator.iteration.error_trace`).

    Returns
    -------
    dict
        ``error_first_below``: the first sweep end at which the global error is below ``accuracy`` (None if never);
        ``converged_time``: the first sweep end from which it stays below until the run ends, if the result
        (``final_error``, when given) is within ``accuracy`` too, else None — the time to a converged result;
        ``trace_sweeps`` and ``trace_final_error``: the trace's length and its last value.
    """
    times, errs = error_trace(records)
    below = errs < accuracy
    first = float(times[np.argmax(below)]) if below.any() else None
    converged = None
    if below.size and below[-1] and (final_error is None or final_error < accuracy):
        above = np.flatnonzero(~below)
        converged = float(times[above[-1] + 1] if above.size else times[0])
    return {"error_first_below": first, "converged_time": converged, "trace_sweeps": int(times.size),
            "trace_final_error": float(errs[-1]) if errs.size else None}


def result_lines(summary: dict) -> list[str]:
    """What ``hermes run`` prints of a summary: the set-up, the time to the accuracy, the check."""
    bal = summary["balancing"]
    how = "no balancing" if bal is None else f"{bal['estimator']} estimator every {bal['every']} iterations"
    if bal is not None and bal["estimator"] == "residual" and summary["mode"] == "async":
        how += (" (residual: mean, hermes' variant)" if bal.get("residual", "mean") == "mean"
                else " (residual: last, 003's rule)")
    unit = "virtual" if summary["clock"] == "virtual" else "real"
    its = summary["iterations"]
    lines = [f"{summary['name']}: Brusselator N={summary['points']}, {summary['steps']} steps, "
             f"{'AIAC (async)' if summary['mode'] == 'async' else 'SISC (sync)'}, {summary['processors']} "
             f"processors, {summary['clock']} clock, {how}",
             f"time to accuracy {summary['accuracy']:g} (window residual below {summary['residual_threshold']:.3g}): "
             f"{summary['time']:.6g} s {unit}; iterations per "
             f"processor {min(its)}-{max(its)} over {summary['windows']} windows; detection rounds "
             f"{summary['detection_rounds']} ({summary['rounds_failed']} refused); points moved "
             f"{summary['migrated_points']} in {summary['transfers']} transfers"]
    err = summary.get("error_vs_serial")
    if err is not None:
        verdict = "within" if err <= summary["accuracy"] else "above"
        why = ("003's criterion: a residual below the accuracy does not bound the error; docs/ASYNC.md"
               if summary.get("residual_rule") == "given" else
               "the contraction estimate is too low: set solver.contraction; docs/ASYNC.md")
        lines.append(f"error vs serial solution {err:.3g}: {verdict} the accuracy {summary['accuracy']:g}"
                     + ("" if err <= summary["accuracy"] else f" ({why})"))
    first = summary.get("first_round")
    if first is not None and summary["rounds_failed"]:
        lines.append(f"003's rule (stop once every processor reports local convergence) would have stopped at "
                     f"{first['time']:.6g} s with ‖F(X) − X‖∞ = {first['residual']:.3g}")
    return lines


def _final_bounds(records: list[BlockRecord]) -> list[int]:
    last = [rec.windows[-1] for rec in records]
    return [int(w[1]) for w in last] + [int(last[-1][2])]


def timeline(records: list[BlockRecord]) -> dict[str, np.ndarray]:
    """Per-iteration arrays of all ranks (rank, start, duration, a, b, residual) for plots."""
    rows = [(r.rank, *row) for r in records for row in r.timeline]
    arr = np.array(rows, dtype=np.float64).reshape(-1, 6)
    return {k: arr[:, i] for i, k in enumerate(("rank", "start", "duration", "a", "b", "residual"))}


def write_run(out: Path, spec: BrusselatorSpec, summary: dict) -> None:
    """Rank 0: a Brusselator run's directory — its old files replaced, the spec and the summary, each atomic.

    Raises
    ------
    RunDirError
        A file that cannot be written (one line).
    """
    from hermes.claims import clear_dir
    from hermes.files import RunDirError, _finite, write_atomic
    from hermes.loaders import dump_yaml

    try:
        clear_dir(out)
        write_atomic(out / "scenario.yaml", dump_yaml(spec.model_dump(mode="json"), sort_keys=False))
        write_atomic(out / "summary.json", json.dumps(_finite(summary), indent=1, allow_nan=False) + "\n")
    except OSError as err:
        raise RunDirError(f"--out: cannot write the results in {out} ({err.strerror or err})") from None
