"""The scenario: one YAML file describing an experiment, validated before any work.

Every rank reads and validates the same file, so every rank reaches the same verdict without
communicating; errors are one line naming the key path (``balancer.tolerance: ...``).

Fixed key paths scripts can rely on: ``processors``, ``seed``, ``clock`` (``virtual`` | ``wall``),
``balancer.algorithm`` and the balancer's parameters under ``balancer`` (e.g. ``balancer.targets``).
Any value can be overridden with ``--set key.path=value`` (the value is parsed as YAML).

Bounds
------
Every number has finite bounds, so that no valid scenario can make the run's arithmetic overflow,
underflow to zero or produce NaN (summary.json is strict JSON). Two constants carry the argument:

``BIG = 1e100``
    The largest load, time or byte count a run may produce. hermes squares loads (PCG's residual
    norms, the variance of the loads, the flow's 2-norm) and sums such squares over at most
    ``MAX_PROCESSORS = 1e5`` ranks or over the iterations: ``BIG² · 1e5 = 1e205`` stays far below the
    float maximum 1.8e308, with room for the products by iteration counts and capacities.
``TINY = 1e-100``
    The smallest cell weight a run may produce: its square ``1e-200`` stays a normal float (above
    2.2e-308), so no positive weight or load rounds to zero and no division by a load blows up.

Each key is bounded on its own (``Field(gt=..., le=BIG)``, finite: ``.inf``/``.nan`` are refused), and
:func:`check_magnitudes` bounds the products the run forms, naming the keys involved:

* cell weights after the adaptation, ``mesh.weight · max(1, factor)^phases`` (``kind: weights``;
  ``refine`` keeps the weights and can multiply the cells by ``4^max_level``), times the cell count,
  is the largest load: ≤ ``BIG``; ``mesh.weight · min(1, factor)^phases ≥ TINY``;
* a phase's compute time ``load · work_per_weight · iterations / (speed · c_min)`` (``c_min`` the
  smallest normalised capacity of the base capacities and the schedule), times the phases: ≤ ``BIG``;
* a phase's communication time, ``iterations · (latency · cells + bytes_per_edge · cells² /
  bandwidth)`` (cells bound the degree, cells² the edges), times the phases: ≤ ``BIG``.

The products are compared in log10, so the check itself cannot overflow. Files (capacities,
schedule) are read during validation; a mesh file's cell count is known only once it is read, so
``hermes run`` checks again with it before launching (:mod:`hermes.lifecycle.preflight`).
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from hermes.bounds import BIG, MAX_ITERATIONS, MAX_PHASES, MAX_PROCESSORS, MAX_SEED, MAX_TRACE_TASKS, TINY
from hermes.errors import ScenarioError, validation_message
from hermes.extraload.tasks import ExtraLoadSpec
from hermes.loaders import parse_yaml, read_text
from hermes.monitor.series import MonitorSpec
from hermes.sections import (MAX_SCENARIO_BYTES, MAX_TIME_SPAN, PROBE_SECONDS, AdaptationSpec, ApplicationSpec,
                             BalancerSpec, FileName, MeshSpec, OutputSpec, PlatformProfile, PlatformSpec,
                             RunSpec)
from hermes.strict import Strict

__all__ = ["Scenario", "load_scenario", "parse_scenario", "apply_overrides", "check_magnitudes", "check_processors",
           "yaml_value", "FileName", "PATH_KEYS", "MESH_SOURCES", "command_line_path", "replace_source",
           "QUICKSTART", "BIG", "TINY"]

class Scenario(Strict):
    """A whole experiment (see docs/SCENARIOS.md)."""

    name: str = "scenario"
    processors: Annotated[int, Field(ge=1, le=MAX_PROCESSORS)] | None = None
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    clock: Literal["virtual", "wall"] = "virtual"
    mesh: MeshSpec
    platform: PlatformSpec = PlatformSpec()
    application: ApplicationSpec = ApplicationSpec()
    adaptation: AdaptationSpec = AdaptationSpec()
    balancer: BalancerSpec = BalancerSpec()
    output: OutputSpec = OutputSpec()
    run: RunSpec = RunSpec()
    #: external tasks competing for the processors and links (docs/EXTRALOAD.md); none by default
    extraload: ExtraLoadSpec | None = None
    #: what the balancer sees of the platform: measurements and forecasts (docs/EXTRALOAD.md); by default the
    #: start-of-phase probe, as without this section
    monitor: MonitorSpec | None = None
    #: directory relative paths in the scenario are resolved against (not a YAML key)
    base_dir: str = Field(".", exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}", v):
            raise ValueError("name may only contain letters, digits, '.', '_' and '-', start with a letter, a digit "
                             f"or '_', and have at most 100 characters (it names the run directory), got {v[:40]!r}")
        return v

    @model_validator(mode="after")
    def _trace_output(self):
        spec = self.output.trace_spec
        if spec is not None and self.adaptation.kind == "refine":
            raise ValueError("output.lbdatafile: a refining run's cells change from phase to phase; its trace is not "
                             "written yet (adaptation.kind weights runs are)")
        cells = self.mesh.grid_cells
        if spec is not None and spec.cells_per_block is None and cells is not None and cells > MAX_TRACE_TASKS:
            raise ValueError(f"output.lbdatafile: {cells} cells are more tasks than a trace file should hold "
                             f"({MAX_TRACE_TASKS}); give output.lbdatafile.cells_per_block")
        return self

    def resolve(self, path: str) -> Path:
        """A path from the scenario, relative to the scenario file's directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"base_dir"})


def _format_error(err: ValidationError) -> str:
    return validation_message(err, root="scenario", model=Scenario)


def _set_path(d: dict, path: str, value: Any) -> None:
    keys = path.split(".")
    cur = d
    for k in keys[:-1]:
        if k not in cur or cur[k] is None:
            cur[k] = {}
        if not isinstance(cur[k], dict):
            raise ScenarioError(f"--set {path}: '{k}' is not a section")
        cur = cur[k]
    cur[keys[-1]] = value


def yaml_value(raw: str) -> Any:
    """A command-line value read as YAML (``""`` for an empty one; :mod:`hermes.loaders`' limits); ValueError
    saying why it cannot be read, with the line and column where it can (malformed YAML, a character YAML does
    not allow — a control character, a byte that is not UTF-8 —, a tag such as ``!!python/name`` that the safe
    loader refuses, nested too deep, aliases expanding too far)."""
    if not raw.strip():
        return ""
    try:
        return parse_yaml(raw, "value")
    except ScenarioError as err:
        shown, why = repr(raw[:40]), str(err).removeprefix("value: ")
        if getattr(err, "kind", "syntax") == "tag":
            raise ValueError(f"the value {shown} is a tag hermes does not read") from None
        raise ValueError(f"the value {shown} is {why}" if why.startswith("not valid YAML") else
                         f"the value {shown}: {why}") from None


#: the scenario keys holding a file or directory name (``platform.capacities`` and ``platform.schedule`` only when
#: a string other than ``homo``): in a YAML file relative to that file, on the command line to the current directory
PATH_KEYS = ("mesh.file", "platform.capacities", "platform.schedule", "output.dir", "extraload.tasks")
#: the keys of ``mesh:`` that say where the cells come from; setting one on the command line replaces the others
MESH_SOURCES = ("mesh.file", "mesh.grid")


def command_line_path(key: str, value: Any, cwd: str | Path | None = None) -> Any:
    """``value`` of ``key`` as given on the command line: a relative path of a :data:`PATH_KEYS` key made
    absolute from ``cwd`` (default: the current directory); anything else unchanged."""
    if key in PATH_KEYS and isinstance(value, str) and value.strip() and value != "homo":
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else Path(cwd or Path.cwd()).absolute() / p)
    return value


def replace_source(data: dict, key: str, value: Any, keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Setting a mesh source (:data:`MESH_SOURCES`) to a value removes the section's other sources (those in
    ``keep`` stay: set in the same breath, they make the scenario give two sources, which validation refuses)."""
    mesh = data.get("mesh")
    if key in MESH_SOURCES and value is not None and isinstance(mesh, dict):
        for other in MESH_SOURCES:
            if other != key and other not in keep:
                mesh.pop(other.split(".", 1)[1], None)


def apply_overrides(data: dict, overrides: list[str], *, cwd: str | Path | None = None) -> dict:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a raw scenario dict.

    They are command-line values: a relative path of a :data:`PATH_KEYS` key is relative to ``cwd`` (default:
    the current directory), not to the scenario file; ``mesh.file=...`` replaces a ``mesh.grid`` source and
    ``mesh.grid=...`` a ``mesh.file`` (:func:`replace_source`).
    """
    out = copy.deepcopy(data)
    given: set[str] = set()
    for item in overrides:
        if "=" not in item:
            raise ScenarioError(f"--set {item!r}: expected key.path=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            raise ScenarioError(f"--set {item!r}: bad key path {key!r}")
        try:
            value = yaml_value(raw)
        except ValueError as err:
            hint = f" (quote a string: {key}='\"...\"')" if "not valid YAML" in str(err) else ""
            raise ScenarioError(f"--set {key}: {err}{hint}") from None
        value = command_line_path(key, value, cwd)
        _set_path(out, key, value)
        replace_source(out, key, value, given)
        if value is not None:
            given.add(key)
    return out


def parse_scenario(data: Any, *, base_dir: str | Path = ".", overrides: list[str] | None = None) -> Scenario:
    """Validate a raw dict (from YAML) into a :class:`Scenario`; raise ScenarioError in one line."""
    if not isinstance(data, dict):
        raise ScenarioError("scenario: the file must contain a mapping of keys")
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        sc = Scenario.model_validate({**data, "base_dir": str(base_dir)})
    except ValidationError as err:
        raise ScenarioError(_format_error(err)) from None
    _check_files(sc)
    return sc


def _check_files(sc: Scenario) -> None:
    """Cross-key rules and the files the scenario names (capacities and schedule are read here: they are
    small, and every rank reaches the same verdict); then :func:`check_magnitudes`."""
    from hermes.extraload.schedule import read_capacities, read_schedule_csv

    if sc.adaptation.kind == "refine" and sc.mesh.units != "cells":
        raise ScenarioError("adaptation.kind: refine needs mesh.units: cells (it bisects the cell polygons)")
    if sc.adaptation.kind == "refine" and sc.mesh.file is not None and \
            Path(sc.mesh.file).suffix.lower() in (".graph", ".chaco", ".metis", ".mtx"):
        raise ScenarioError(f"adaptation.kind: refine needs a mesh with cell polygons (a meshio file such as .vtu "
                            f"or .msh, or a grid); mesh.file {sc.mesh.file} is a graph without polygons")
    if sc.adaptation.region.kind == "indicator" and sc.application.kernel != "jacobi":
        raise ScenarioError("adaptation.region.kind: indicator needs application.kernel: jacobi (it marks where "
                            "the solution jumps)")
    if sc.application.mode == "async" and sc.clock == "virtual":
        zero = [f"platform.links.{k}.latency" for k, link in enumerate(sc.platform.links) if link.latency == 0]
        if sc.platform.latency == 0:
            zero.insert(0, "platform.latency")
        if zero:
            raise ScenarioError(f"{zero[0]}: application.mode async on the virtual clock needs a positive latency "
                                f"(its conservative simulation relies on α > 0, hermes/app/mesh/async_mesh.py)")
    if sc.mesh.file is not None:
        _existing(sc, "mesh.file", sc.mesh.file)
    if sc.platform.profile is not None:  # a small file: a missing or malformed profile is refused before the run
        PlatformProfile.load(sc.platform.profile, sc.resolve)
    caps, table = sc.platform.capacities, sc.platform.schedule
    if isinstance(caps, str) and caps != "homo":
        caps = _read(read_capacities, _existing(sc, "platform.capacities", caps), "platform.capacities").tolist()
    if isinstance(table, str):
        table = _read(read_schedule_csv, _existing(sc, "platform.schedule", table), "platform.schedule").tolist()
    p = sc.processors
    for k, link in enumerate(sc.platform.links):
        if link.ranks[0] == link.ranks[1]:
            raise ScenarioError(f"platform.links.{k}.ranks: {list(link.ranks)} is not a pair of two ranks")
    if p is not None:
        _check_counts(sc, p, caps, table)
    elif sc.extraload is not None:
        if isinstance(sc.extraload.tasks, str):
            _existing(sc, "extraload.tasks", sc.extraload.tasks)
        sc.extraload.compile(sc.resolve, None)  # one-line errors naming the key or the file's line
    if (sc.extraload is not None or sc.monitor is not None) and sc.output.checkpoint_every is not None:
        raise ScenarioError("output.checkpoint_every: not available with an extraload or monitor section (their "
                            "state is not checkpointed)")
    if sc.monitor is not None and sc.monitor.source == "oracle" and sc.clock != "virtual":
        raise ScenarioError("monitor.source: oracle needs clock: virtual (only the model knows the coming phase)")
    if table is not None and len({len(row) for row in table}) > 1:
        raise ScenarioError("platform.schedule: every phase needs the same number of capacities")
    for key, value in sc.balancer.params.items():  # whatever a balancer's own model allows: finite, within BIG
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not (math.isfinite(value) and abs(value) <= (BIG if isinstance(value, float) else 2**62)):
            raise ScenarioError(f"balancer.{sc.balancer.algorithm}.{key}: must be a finite number of magnitude at "
                                f"most {BIG if isinstance(value, float) else 2**62:g}, got {value:g}")
    check_magnitudes(sc, n_cells=sc.mesh.grid_cells or 1, p=p or 1, capacities=None if caps == "homo" else caps,
                     schedule=table)


def _check_counts(sc: Scenario, p: int, caps, table) -> None:
    """What must agree with the processor count ``p``: capacities, links, schedule, extra-load tasks."""
    if isinstance(caps, list) and len(caps) != p:
        raise ScenarioError(f"platform.capacities: {len(caps)} values for {p} processors")
    for k, link in enumerate(sc.platform.links):
        if max(link.ranks) >= p:
            raise ScenarioError(f"platform.links.{k}.ranks: {list(link.ranks)} is not a pair of ranks below {p} "
                                f"(the run has {p} processors)")
    if table is not None:
        for k, row in enumerate(table):
            if len(row) != p:
                raise ScenarioError(f"platform.schedule: phase {k + 1} has {len(row)} capacities for {p} "
                                    f"processors")
    if sc.extraload is not None:
        if isinstance(sc.extraload.tasks, str):
            _existing(sc, "extraload.tasks", sc.extraload.tasks)
        sc.extraload.compile(sc.resolve, p)  # one-line errors naming the key or the file's line


def check_processors(sc: Scenario, p: int) -> None:
    """The checks that need the processor count, for a scenario without ``processors`` once the run's count
    ``p`` is known (before launching, and on every rank of a job started by hand): capacities, links, the
    schedule and the extra load's tasks against ``p``.

    Raises
    ------
    ScenarioError
        One line naming the key.
    """
    from hermes.extraload.schedule import read_capacities, read_schedule_csv

    if sc.processors is not None and sc.processors != p:
        raise ScenarioError(f"processors: the scenario asks for {sc.processors} processors, not {p}")
    caps, table = sc.platform.capacities, sc.platform.schedule
    if isinstance(caps, str) and caps != "homo":
        caps = _read(read_capacities, _existing(sc, "platform.capacities", caps), "platform.capacities").tolist()
    if isinstance(table, str):
        table = _read(read_schedule_csv, _existing(sc, "platform.schedule", table), "platform.schedule").tolist()
    _check_counts(sc, p, caps, table)


def _existing(sc: Scenario, key: str, name: str) -> Path:
    """The path of a file the scenario names, or a one-line error saying what is wrong with it."""
    path = sc.resolve(name)
    if path.is_dir():
        raise ScenarioError(f"{key}: {path} is a directory, not a file")
    if not path.is_file():
        raise ScenarioError(f"{key}: no such file: {path}")
    return path


def _read(reader, path: Path, key: str):
    try:
        return reader(path)
    except ScenarioError as err:
        raise ScenarioError(f"{key}: {err}") from None


def _min_capacity(capacities, schedule, p: int) -> float:
    """log10 of the smallest normalised capacity of the base capacities and of every schedule row (in logs: a
    quotient of bounded numbers must not underflow to 0)."""
    rows = [[1.0] * p if capacities is None else list(capacities)] + [list(r) for r in schedule or []]
    return min(math.log10(min(r)) - math.log10(sum(r)) for r in rows)


def check_magnitudes(sc: Scenario, *, n_cells: int, p: int, capacities=None, schedule=None,
                     weights: tuple[float, float] = (1.0, 1.0)) -> None:
    """Refuse a scenario whose run could leave finite arithmetic (see "Bounds" in the module docstring).

    Parameters
    ----------
    sc : Scenario
    n_cells : int
        Cells of the mesh (a lower bound, e.g. 1, checks what does not depend on it).
    p : int
        Processors (1 if unknown: homogeneous capacities are then 1/p = 1).
    capacities, schedule : list, optional
        The base capacities (None: homogeneous) and the schedule's rows, as read.
    weights : (float, float)
        The smallest and largest weight of the mesh's cells (a mesh file's own weights; 1 for a grid),
        which ``mesh.weight`` multiplies.

    Raises
    ------
    ScenarioError
        One line naming the keys whose product exceeds ``BIG`` (or falls below ``TINY``).
    """
    lg = math.log10
    ad, app, pl = sc.adaptation, sc.application, sc.platform
    if ad.kind == "weights":
        up, down = ad.phases * max(lg(ad.factor), 0.0), ad.phases * min(lg(ad.factor), 0.0)
        cells = lg(n_cells)
    else:  # refinement keeps the weights and can multiply the cells
        up = down = 0.0
        cells = lg(n_cells) + ad.max_level * lg(4 if ad.edges == "all" else 2)
    w_lo, w_hi = lg(sc.mesh.weight) + lg(weights[0]), lg(sc.mesh.weight) + lg(weights[1])
    limit = lg(BIG)

    def fail(keys: str, what: str, exponent: float, bound: str) -> None:
        raise ScenarioError(f"{keys}: {what} can reach 1e{exponent:+.0f}, beyond {bound}, the bound that keeps "
                            f"the run's arithmetic finite (see hermes/scenario.py, Bounds)")

    if w_lo + down < lg(TINY):
        fail("mesh.weight, adaptation.factor, adaptation.phases", "cell weights (mesh.weight × factor^phases)",
             w_lo + down, f"{TINY:g} below")
    if w_hi + up > limit:
        fail("mesh.weight, adaptation.factor, adaptation.phases", "cell weights (mesh.weight × factor^phases)",
             w_hi + up, f"{BIG:g}")
    load = cells + w_hi + up
    if load > limit:
        fail("mesh.weight, adaptation.factor, adaptation.phases", f"the total load ({n_cells} cells × their "
             f"weights)", load, f"{BIG:g}")
    lg_c_min = _min_capacity(capacities, schedule, p)
    compute = (load + lg(app.work_per_weight) + lg(app.iterations) + lg(ad.phases)
               - lg(pl.speed) - lg_c_min)
    if ad.kind == "refine" and ad.work_per_cell > 0:
        compute = max(compute, cells + lg(ad.work_per_cell) + lg(ad.phases) - lg(pl.speed) - lg_c_min)
    if compute > limit:
        fail("application.work_per_weight, application.iterations, platform.speed, platform.capacities",
             "the computing time (load × work_per_weight × iterations × phases / (speed × smallest capacity))",
             compute, f"{BIG:g} s")
    latency = max([pl.latency] + [k.latency for k in pl.links if k.latency is not None])
    bandwidth = min([pl.bandwidth] + [k.bandwidth for k in pl.links if k.bandwidth is not None])
    lat = lg(latency) + cells if latency > 0 else -math.inf
    vol = lg(app.bytes_per_edge) + 2 * cells - lg(bandwidth) if app.bytes_per_edge > 0 else -math.inf
    comm = lg(app.iterations) + lg(ad.phases) + max(lat, vol, 0.0)
    if comm > limit:
        fail("platform.latency, platform.bandwidth, application.bytes_per_edge, application.iterations",
             "the communication time (iterations × phases × (latency × cells + bytes_per_edge × cells² / "
             "bandwidth))", comm, f"{BIG:g} s")
    # the monitor measures durations as differences of virtual times: the platform's shortest and longest
    # message (and its 1 ms capacity probe) must stay within MAX_TIME_SPAN of each other
    lats = [v for v in [pl.latency] + [k.latency for k in pl.links if k.latency is not None] if v > 0]
    bws = [pl.bandwidth] + [k.bandwidth for k in pl.links if k.bandwidth is not None]
    # in log10, so that no quotient of two bounded numbers can underflow to 0 (log10(0): a math domain error)
    times = [lg(PROBE_SECONDS), *map(lg, lats)] + (
        [lg(app.bytes_per_edge) - lg(b) for b in bws] if app.bytes_per_edge > 0 else [])
    span = max(times) - min(times)
    if span > lg(MAX_TIME_SPAN):
        raise ScenarioError(f"platform.latency, platform.bandwidth, platform.links: the platform's times span "
                            f"1e{span:.0f} (from {10 ** min(times):.3g} s to {10 ** max(times):.3g} s: latencies, "
                            f"bytes_per_edge / bandwidths and the monitor's {PROBE_SECONDS:g} s probe), beyond "
                            f"{MAX_TIME_SPAN:g}: the virtual clock (relative precision 2e-16) could no longer measure "
                            f"the shortest against the longest")


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, override and validate a scenario file (read with :mod:`hermes.loaders`' limits)."""
    path = Path(path)
    if path.is_dir():
        raise ScenarioError(f"scenario {path} is a directory, not a file")
    if not path.exists():
        raise ScenarioError(f"scenario file not found: {path}")
    text = read_text(path, "scenario", max_bytes=MAX_SCENARIO_BYTES)
    data = parse_yaml(text, str(path))
    if data is None:
        raise ScenarioError(f"{path}: the scenario is empty")
    sc = parse_scenario(data, base_dir=path.parent, overrides=overrides)
    if "name" not in data and not any(o.startswith("name=") for o in overrides or []):
        sc = sc.model_copy(update={"name": re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem).lstrip(".") or "scenario"})
    return sc


#: the embedded default experiment (``hermes run`` with no file, and ``make run``)
QUICKSTART: dict[str, Any] = {
    "name": "quickstart",
    "processors": 4,
    "seed": 1,
    "clock": "virtual",
    "mesh": {"grid": "40x30"},
    "platform": {"capacities": [0.4, 0.2, 0.2, 0.2], "speed": 1.0e5, "latency": 1.0e-4, "bandwidth": 1.0e8},
    "application": {"kernel": "jacobi", "iterations": 20, "work_per_weight": 1.0, "bytes_per_edge": 64},
    "adaptation": {"phases": 4, "factor": 2.0,
                   "region": {"kind": "front", "start": 0.1, "speed": 0.25, "width": 0.2}},
    "balancer": {"algorithm": "pcg"},
}
