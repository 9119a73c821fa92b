"""An experiment: a base scenario and the axes swept over it; its runs are the cross product of the axes.

The file (``experiments/*.yaml``)::

    name: thesis                      # the directory runs/<name> (default: the file's stem)
    description: ...                  # one paragraph, shown in table.md and report.html
    scenario: ../scenarios/x.yaml     # the base scenario: a file (relative to this one), an inline mapping,
                                      # or absent (the embedded quickstart, or the 'scenario' axis)
    set: {output.vtu: true}           # --set overrides applied to every run
    axes:                             # swept, the first axis slowest
      scenario: [../scenarios/a.yaml, ../scenarios/b.yaml]     # whole base scenarios
      balancer: [none, pcg, {label: METIS equal, algorithm: metis, targets: equal}]
      mesh: [../meshes/airfoil.vtu, 20x19]                     # a mesh file or a grid
      processors: [4, 8]                                       # ... and any --set key:
      seed: [1, 2, 3]
      platform: [{label: homo, capacities: homo}, {label: fast0, capacities: [4, 1, 1, 1]}]
      adaptation.factor: [1.5, 2.0]
      anything: [{label: a, set: {application.iterations: 10, adaptation.phases: 3}}]
    table: {columns: balancer}        # the axis across table.md (default balancer, else the last axis)

An axis value is a scalar (the key's value), a mapping merged into the key's section (each leaf one
``--set``; ``label:`` names it), or ``{label: ..., set: {key: value, ...}}`` for several keys at once. A
balancer's own parameters go to its section ``balancer.<algorithm>`` (``targets: equal`` above is
``balancer.metis.targets=equal``); ``trigger``, ``rounds`` and ``selection`` to ``balancer``. Files named in
the experiment (mesh, capacities, schedule) are relative to the experiment file; those in a scenario file
to that file.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes.errors import HermesError
from hermes.files import safe_name, slug
from hermes.runtime.start import processes_for
from hermes.loaders import dump_yaml, load_yaml
from hermes.scenario import MESH_SOURCES, QUICKSTART, Scenario, parse_scenario, yaml_value
from hermes.sections import BalancerSpec, MeshSpec, PlatformSpec
from hermes.scenario import PATH_KEYS as SCENARIO_PATH_KEYS

__all__ = ["Experiment", "AxisValue", "Axis", "PlannedRun", "ExperimentError", "load_experiment",
           "make_experiment", "parse_axis_option", "absolute_paths", "PATH_KEYS"]

#: scenario keys holding a file name (made absolute so a run's scenario can be written anywhere)
PATH_KEYS = SCENARIO_PATH_KEYS
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_GRID = re.compile(r"\s*\d+\s*x\s*\d+\s*")
#: the most runs an experiment may have (each is validated, planned and given a directory)
MAX_RUNS = 10_000
#: what every run of an experiment gets unless the experiment says otherwise: no pictures of its own (the
#: report draws each run's final partition, once)
RUN_DEFAULTS = {"output.pictures": False}


class ExperimentError(HermesError):
    """A malformed experiment: unknown key, empty axis, clashing labels, or a run whose scenario is invalid."""


@dataclass(frozen=True)
class AxisValue:
    """One value of an axis: its label and the ``--set`` overrides it stands for (``scenario``: a base file)."""

    label: str
    sets: dict[str, Any] = field(default_factory=dict)
    scenario: Path | None = None
    #: the value as written when it is a scalar (the tidy results keep numbers as numbers)
    raw: Any = None


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[AxisValue, ...]


@dataclass(frozen=True)
class PlannedRun:
    """One run of the cross product: its directory name, its label on every axis, its validated scenario."""

    id: str
    labels: dict[str, str]
    values: dict[str, Any]
    scenario: Scenario

    @property
    def processors(self) -> int:
        return int(self.scenario.processors or 4)

    @property
    def processes(self) -> int:
        """The MPI processes hosting its processors (:func:`hermes.runtime.start.processes_for`)."""
        return processes_for(self.scenario.run, self.scenario.clock, self.processors)

    def title(self, sep: str = " · ") -> str:
        return sep.join(self.labels.values()) or self.id


class _TableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    columns: str | None = Field(None, description="the axis across table.md (default: balancer, else the last)")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = None
    description: str = ""
    scenario: str | dict[str, Any] | None = None
    set: dict[str, Any] = {}
    axes: dict[str, list[Any]] = {}
    table: _TableSpec = _TableSpec()


@dataclass(frozen=True)
class Experiment:
    """A base scenario, fixed overrides and axes; :meth:`runs` expands and validates the cross product."""

    name: str
    base: dict[str, Any]
    base_dir: Path
    here: Path
    sets: dict[str, Any]
    axes: tuple[Axis, ...]
    description: str = ""
    columns: str | None = None
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def column_axis(self) -> str | None:
        """The axis across the table: ``table.columns``, else ``balancer``, else the last axis."""
        names = [a.name for a in self.axes]
        if self.columns is not None:
            return self.columns
        if "balancer" in names:
            return "balancer"
        return names[-1] if names else None

    def runs(self) -> list[PlannedRun]:
        """Every run of the cross product, validated (the first axis varies slowest).

        Raises
        ------
        ExperimentError
            One line naming the run and the key, for the first run whose scenario is invalid.
        """
        count = math.prod(len(a.values) for a in self.axes)
        if count > MAX_RUNS:
            shape = " × ".join(f"{len(a.values)} {a.name}" for a in self.axes)
            raise ExperimentError(f"experiment: {shape} is {count:,} runs, more than the {MAX_RUNS:,} hermes compare "
                                  f"runs (split it into several experiments)")
        out, seen = [], {}
        combos = itertools.product(*(a.values for a in self.axes)) if self.axes else [()]
        for combo in combos:
            labels = {a.name: v.label for a, v in zip(self.axes, combo)}
            values = {a.name: (v.raw if v.raw is not None else v.label) for a, v in zip(self.axes, combo)}
            run_id = "__".join(_slug(a.name.rsplit(".", 1)[-1] + "-" + v.label if v.raw is not None else v.label)
                               for a, v in zip(self.axes, combo)) or "run"
            try:
                safe_name(run_id, "run directory")
            except HermesError as err:
                raise ExperimentError(f"run {' · '.join(labels.values())!r}: {err} (give its values shorter "
                                      f"labels)") from None
            if run_id in seen:
                raise ExperimentError(f"runs {seen[run_id]!r} and {' · '.join(labels.values())!r} get the same "
                                      f"directory {run_id!r}: give the values distinct labels")
            seen[run_id] = " · ".join(labels.values())
            base, base_dir = self.base, self.base_dir
            sets = {**RUN_DEFAULTS, **self.sets}
            for v in combo:
                if v.scenario is not None:
                    base, base_dir = _read_scenario(v.scenario), v.scenario.parent
                sets.update(v.sets)
            try:
                sc = parse_scenario(base, base_dir=base_dir, overrides=_as_sets(sets))
            except HermesError as err:
                raise ExperimentError(f"run {run_id}: {err}") from None
            if sc.processors is None:
                sc = sc.model_copy(update={"processors": 4})
            try:
                processes_for(sc.run, sc.clock, sc.processors)
            except HermesError as err:
                raise ExperimentError(f"run {run_id}: {err}") from None
            out.append(PlannedRun(run_id, labels, values,
                                  sc.model_copy(update=absolute_paths(sc.mesh, sc.platform, sc.resolve))))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The experiment as written to ``<dir>/experiment.yaml`` (every path absolute, so it reads back anywhere)."""
        axes = {}
        for a in self.axes:
            axes[a.name] = [{"label": v.label, "set": v.sets, **({"scenario": str(v.scenario)} if v.scenario else {}),
                             **({"value": v.raw} if v.raw is not None else {})} for v in a.values]
        return {"name": self.name, "description": self.description, "scenario": self.base,
                "scenario_dir": str(self.base_dir), "set": self.sets, "axes": axes,
                "table": {"columns": self.columns}}


# -- building an experiment ---------------------------------------------------------------------------------
def load_experiment(path: str | Path, *, set_axes: list[str] | None = None, sets: list[str] | None = None,
                    name: str | None = None) -> Experiment:
    """An experiment from a file — an experiment (it has ``axes:`` or ``scenario:``) or a plain scenario, which
    becomes the base — with ``--set-axis KEY=V1,V2`` axes and ``--set KEY=VALUE`` overrides added.

    Raises
    ------
    ExperimentError, ScenarioError
        One line.
    """
    path = Path(path)
    data = _read_yaml(path)
    if not ("axes" in data or "scenario" in data):  # a scenario file: the base of a quick sweep
        _no_misspelt_axes(data, path)
        data = {"scenario": path.name}
    data.setdefault("name", path.stem)
    return make_experiment(data, here=path.parent, set_axes=set_axes, sets=sets, name=name)


def _no_misspelt_axes(data: dict[str, Any], path: Path) -> None:
    """An experiment whose ``axes:`` (or ``scenario:``) is misspelt would be read as a scenario and refused for
    what a scenario lacks; a key that is no scenario key but close to an experiment's is named instead."""
    from hermes.errors import keys_at
    from hermes.scenario import Scenario
    from hermes.suggest import did_you_mean

    scenario_keys = set(keys_at(Scenario, ()))
    for key in data:
        close = did_you_mean(str(key), ("axes", "scenario")) if key not in scenario_keys else ""
        if close:
            raise ExperimentError(f"experiment {path}: {key}: unknown key{close}")


def make_experiment(data: dict[str, Any] | None, *, here: str | Path = ".", set_axes: list[str] | None = None,
                    sets: list[str] | dict[str, Any] | None = None, axes: dict[str, list[Any]] | None = None,
                    name: str | None = None) -> Experiment:
    """An experiment from a raw mapping (the YAML file's content), ``here`` being the directory its relative
    paths start from; ``axes`` / ``set_axes`` add or replace axes, ``sets`` adds overrides.
    """
    data = dict(data or {})
    try:
        spec = _Spec.model_validate(data)
    except ValidationError as err:
        from hermes.errors import keys_at
        from hermes.suggest import did_you_mean

        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key" + did_you_mean(str(e["loc"][-1]), keys_at(_Spec, e["loc"][:-1]))
        raise ExperimentError(f"experiment: {loc or 'file'}: {msg}") from None
    here = Path(here).resolve()
    if spec.scenario is None:
        base, base_dir = dict(QUICKSTART), here
    elif isinstance(spec.scenario, dict):
        base, base_dir = dict(spec.scenario), here
    else:
        file = _resolve(here, spec.scenario)
        base, base_dir = _read_scenario(file), file.parent
    # paths written in the file are relative to it (``here``); paths given on the command line (--set-axis,
    # --set) to the current directory
    cwd = Path.cwd().resolve()
    raw_axes = {key: (values, here) for key, values in spec.axes.items()}
    for item in set_axes or []:
        key, values = parse_axis_option(item)
        raw_axes[key] = (values, cwd)
    raw_axes.update({key: (values, here) for key, values in (axes or {}).items()})
    fixed = dict(spec.set)
    if isinstance(sets, dict):
        fixed.update(sets)
    else:
        given = {}
        for item in sets or []:
            k, v = _split_item(item, "--set")
            given[k] = _value(v, f"--set {k}")
        for k in given:
            _check_key(k, "set")
            if k in MESH_SOURCES and given[k] is not None:  # the command line's source replaces the file's
                fixed.update({o: None for o in MESH_SOURCES if o != k and o not in given and o in fixed})
        fixed.update(_absolute_sets(given, cwd))
    for key in fixed:
        _check_key(key, "set")
    fixed = _absolute_sets(fixed, here)
    built = tuple(_axis(key, values, base) for key, (values, base) in raw_axes.items())
    exp_name = name or spec.name or (base.get("name") if isinstance(base.get("name"), str) else None) or "experiment"
    if not isinstance(exp_name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}", exp_name):
        raise ExperimentError(f"experiment: name {str(exp_name)[:60]!r} may only contain letters, digits, '.', '_' "
                              f"and '-', and start with a letter, a digit or '_' (it names the experiment "
                              f"directory)")
    exp = Experiment(exp_name, base, base_dir, here, fixed, built, spec.description.strip(), spec.table.columns, data)
    if exp.columns is not None and exp.columns not in [a.name for a in built]:
        raise ExperimentError(f"experiment: table.columns: {exp.columns!r} is not an axis "
                              f"(axes: {', '.join(a.name for a in built) or 'none'})")
    return exp


def parse_axis_option(item: str) -> tuple[str, list[Any]]:
    """``--set-axis KEY=V1,V2,...`` → (KEY, [V1, V2, ...]); a value list in brackets is read as YAML
    (``--set-axis 'platform.capacities=[[1,1],[2,1]]'``), each value of a comma list as YAML too."""
    key, text = _split_item(item, "--set-axis")
    text = text.strip()
    if text.startswith("["):
        values = _value(text, f"--set-axis {key}")
    else:
        values = [_value(v, f"--set-axis {key}") for v in text.split(",")]
    if not isinstance(values, list) or not values:
        raise ExperimentError(f"--set-axis {item!r}: expected KEY=V1,V2,... with at least one value")
    return key, values


def absolute_paths(mesh: MeshSpec, platform: PlatformSpec, resolve: Callable[[str], Path]) -> dict[str, Any]:
    """The sections that name files (``mesh``, ``platform``) with every file path made absolute by ``resolve``
    (the scenario's), as an update of the scenario: ``sc.model_copy(update=absolute_paths(sc.mesh, sc.platform,
    sc.resolve))`` can be written anywhere."""
    if mesh.file is not None:
        mesh = mesh.model_copy(update={"file": str(resolve(mesh.file).resolve())})
    upd = {}
    for key in ("capacities", "schedule"):
        val = getattr(platform, key)
        if isinstance(val, str) and val != "homo":
            upd[key] = str(resolve(val).resolve())
    return {"mesh": mesh, "platform": platform.model_copy(update=upd)}


# -- helpers ------------------------------------------------------------------------------------------------
def _axis(key: str, values: list[Any], here: Path) -> Axis:
    if not isinstance(values, list) or not values:
        raise ExperimentError(f"axes.{key}: expected a non-empty list of values")
    if key == "scenario":
        built = [_scenario_value(v, here) for v in values]
    elif key == "mesh":
        built = [_mesh_value(v, here) for v in values]
    elif key == "balancer":
        built = [_balancer_value(v) for v in values]
    else:
        built = [_generic_value(key, v, here) for v in values]
    labels = [v.label for v in built]
    for lab in labels:
        if labels.count(lab) > 1:
            raise ExperimentError(f"axes.{key}: the label {lab!r} is given twice (add label: to tell the values apart)")
    slugs = [_slug(lab) for lab in labels]
    for s, lab in zip(slugs, labels):
        if slugs.count(s) > 1:
            raise ExperimentError(f"axes.{key}: labels {[x for x, y in zip(labels, slugs) if y == s]} make the same "
                                  f"directory name {s!r}")
    return Axis(key, tuple(built))


def _scenario_value(v: Any, here: Path) -> AxisValue:
    label = None
    if isinstance(v, dict):
        label, v = v.get("label"), v.get("file")
    if not isinstance(v, str):
        raise ExperimentError(f"axes.scenario: expected a scenario file (or {{label, file}}), got {v!r}")
    file = _resolve(here, v)
    return AxisValue(str(label or _read_scenario(file)["name"]), {}, file)


def _mesh_value(v: Any, here: Path) -> AxisValue:
    if isinstance(v, str):
        if _GRID.fullmatch(v):
            return AxisValue(v.replace(" ", ""), {"mesh.grid": v, "mesh.file": None})
        return AxisValue(Path(v).stem, {"mesh.file": str(_resolve(here, v)), "mesh.grid": None})
    if isinstance(v, dict):
        v = dict(v)
        label = v.pop("label", None)
        sets = _flatten("mesh", v)
        if "mesh.file" in sets:
            sets["mesh.file"] = str(_resolve(here, sets["mesh.file"]))
            sets.setdefault("mesh.grid", None)
            label = label or Path(sets["mesh.file"]).stem
        elif "mesh.grid" in sets:
            sets.setdefault("mesh.file", None)
            label = label or str(sets["mesh.grid"])
        return AxisValue(str(label or _compact(v)), sets)
    raise ExperimentError(f"axes.mesh: expected a mesh file, a grid such as 20x19 or a mapping, got {v!r}")


def _balancer_value(v: Any) -> AxisValue:
    """``pcg`` or ``{label, algorithm, <its parameters>, trigger/rounds/selection, <name>: {section}}``."""
    if isinstance(v, str):
        return AxisValue(v, {"balancer.algorithm": v})
    if not isinstance(v, dict) or not isinstance(v.get("algorithm"), str):
        raise ExperimentError(f"axes.balancer: expected a balancer name or a mapping with 'algorithm', got {v!r}")
    v = dict(v)
    label = v.pop("label", None)
    algo = v.pop("algorithm")
    common = set(BalancerSpec.model_fields) - {"algorithm"}
    sets: dict[str, Any] = {"balancer.algorithm": algo}
    params = []
    for k, val in v.items():
        _check_key(k, "axes.balancer")
        if k in common:
            sets[f"balancer.{k}"] = val
        elif isinstance(val, dict):  # an explicit section: balancer.<name>.<key>
            sets.update(_flatten(f"balancer.{k}", val))
        else:
            sets[f"balancer.{algo}.{k}"] = val
        params.append(f"{k}={_compact(val)}")
    return AxisValue(str(label or " ".join([algo, *params])), sets)


def _generic_value(key: str, v: Any, here: Path) -> AxisValue:
    if isinstance(v, dict) and "set" in v:
        extra = sorted(set(v) - {"label", "set"})
        if extra or not isinstance(v["set"], dict):
            raise ExperimentError(f"axes.{key}: a value with 'set' takes only 'label' and 'set' (a mapping)")
        for k in v["set"]:
            _check_key(k, f"axes.{key}.set")
        return AxisValue(str(v.get("label") or _compact(v["set"])), _absolute_sets(dict(v["set"]), here))
    _check_key(key, "axes")
    if isinstance(v, dict):
        v = dict(v)
        label = v.pop("label", None)
        return AxisValue(str(label or _compact(v)), _absolute_sets(_flatten(key, v), here))
    return AxisValue(_compact(v), _absolute_sets({key: v}, here), raw=v if isinstance(v, (int, float, str)) else None)


def _flatten(prefix: str, d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}"
        _check_key(key, "axes")
        if isinstance(v, dict) and v:
            out.update(_flatten(key, v))
        else:
            out[key] = v
    return out


def _absolute_sets(sets: dict[str, Any], here: Path) -> dict[str, Any]:
    out = dict(sets)
    for k in PATH_KEYS:
        v = out.get(k)
        if isinstance(v, str) and v != "homo":
            out[k] = str(_resolve(here, v))
    return out


def _as_sets(sets: dict[str, Any]) -> list[str]:
    def text(value: Any) -> str:
        return dump_yaml(value, default_flow_style=True, width=1 << 30).strip().removesuffix("...").strip()

    return [f"{k}={text(v)}" for k, v in sets.items()]


def _check_key(key: str, where: str) -> None:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ExperimentError(f"{where}: {key!r} is not a scenario key path such as adaptation.factor")


def _split_item(item: str, option: str) -> tuple[str, str]:
    if "=" not in item:
        raise ExperimentError(f"{option} {item!r}: expected KEY=VALUE")
    key, value = item.split("=", 1)
    key = key.strip()
    _check_key(key, option)
    return key, value


def _compact(v: Any) -> str:
    if isinstance(v, dict):
        return ",".join(f"{k}={_compact(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ",".join(_compact(x) for x in v) + "]"
    return "null" if v is None else str(v)


def _slug(label: str) -> str:
    """A safe directory name from a label: never '.', '..', a separator or a NUL (:func:`hermes.files.slug`)."""
    return slug(label)


def _value(text: str, what: str) -> Any:
    """A command-line value read as YAML (:func:`hermes.scenario.yaml_value`: the loaders' limits)."""
    try:
        return yaml_value(text)
    except ValueError as err:
        raise ExperimentError(f"{what}: {err}") from None


def _resolve(here: Path, p: str) -> Path:
    path = Path(p).expanduser()
    return (path if path.is_absolute() else here / path).resolve()


def _read_scenario(path: Path) -> dict[str, Any]:
    """A scenario file's mapping, named after the file when it has no name (as ``hermes run`` names it)."""
    data = _read_yaml(path)
    if not isinstance(data.get("name"), str):
        data["name"] = re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem)
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ExperimentError(f"file not found: {path}")
    data = load_yaml(path, str(path), error=ExperimentError)
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: expected a mapping of keys")
    return data
