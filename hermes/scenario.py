"""The scenario: one YAML file describing an experiment, validated before any work.

Every rank reads and validates the same file, so every rank reaches the same verdict without
communicating; errors are one line naming the key path (``balancer.tolerance: ...``).

Fixed key paths scripts can rely on: ``processors``, ``seed``, ``clock`` (``virtual`` | ``wall``),
``balancer.algorithm`` and the balancer's parameters under ``balancer`` (e.g. ``balancer.targets``).
Any value can be overridden with ``--set key.path=value`` (the value is parsed as YAML).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hermes.errors import BalancerError, ScenarioError

__all__ = ["Scenario", "load_scenario", "parse_scenario", "apply_overrides", "QUICKSTART"]

PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


def _positive(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or x != x or x == float("inf"):
        raise ValueError(f"{what} must be a positive number, got {x!r}")
    return float(x)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MeshSpec(_Strict):
    """Where the work units come from: a file or a generator (exactly one)."""

    file: str | None = None
    grid: str | None = Field(None, description="structured grid of quadrilateral cells, e.g. '20x19'")
    units: Literal["cells", "nodes"] = "cells"
    weight: PosFloat = 1.0

    @model_validator(mode="after")
    def _one_source(self):
        if (self.file is None) == (self.grid is None):
            raise ValueError("give exactly one of 'file' or 'grid'")
        if self.grid is not None and not re.fullmatch(r"\s*\d+\s*x\s*\d+\s*", self.grid):
            raise ValueError(f"grid must look like '20x19', got {self.grid!r}")
        if self.grid is not None and any(int(v) < 1 for v in self.grid.lower().split("x")):
            raise ValueError("grid sizes must be positive")
        return self


class LinkSpec(_Strict):
    ranks: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]
    latency: NonNegFloat | None = None
    bandwidth: PosFloat | None = None


class PlatformSpec(_Strict):
    """Processors and network (thesis §4.2, α-β model)."""

    capacities: list[float] | str = Field("homo", description="'homo', a list of relative speeds, or a file")
    speed: PosFloat = Field(1.0e6, description="work units per second of an average processor (c_i = 1/p)")
    latency: NonNegFloat = 1.0e-4
    bandwidth: PosFloat = 1.0e8
    links: list[LinkSpec] = []
    schedule: list[list[float]] | str | None = Field(
        None, description="capacities per phase: a list of per-processor lists, or a CSV file (thesis Table 10.6)")

    @field_validator("capacities", mode="before")
    @classmethod
    def _caps(cls, v):
        if isinstance(v, str):
            return v
        if not isinstance(v, list) or not v:
            raise ValueError("must be 'homo', a file name or a non-empty list of numbers")
        return [_positive(x, f"capacity of processor {i}") for i, x in enumerate(v)]

    @field_validator("schedule", mode="before")
    @classmethod
    def _sched(cls, v):
        if v is None or isinstance(v, str):
            return v
        if not isinstance(v, list) or not all(isinstance(r, list) and r for r in v):
            raise ValueError("must be a CSV file name or a list of per-processor capacity lists")
        return [[_positive(x, f"phase {k + 1}, capacity of processor {i}") for i, x in enumerate(r)]
                for k, r in enumerate(v)]


class ApplicationSpec(_Strict):
    """The simulated solver (thesis Alg. 2, Fig. 10.5)."""

    kernel: Literal["synthetic", "jacobi"] = "synthetic"
    iterations: Annotated[int, Field(ge=1)] = 20
    work_per_weight: PosFloat = 1.0
    bytes_per_edge: NonNegFloat = 64.0


class RegionSpec(_Strict):
    """Where the adaptation happens: a geometric region (``random``, ``box``, ``disc``, a moving
    ``front``) or where the kernel's error indicator is large (``indicator``, :mod:`hermes.app.indicator`)."""

    kind: Literal["random", "box", "disc", "front", "indicator"] = "random"
    fraction: Annotated[float, Field(gt=0, le=1)] = 1.0
    box: tuple[float, float, float, float] | None = Field(None, description="xmin, ymin, xmax, ymax")
    center: tuple[float, float] | None = None
    radius: PosFloat | None = None
    start: float | None = Field(None, description="front: x position at phase 1")
    speed: float | None = Field(None, description="front: x advance per phase")
    width: PosFloat | None = Field(None, description="front: band width")
    relative: bool = Field(True, description="coordinates are fractions of the mesh bounding box")
    threshold: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5, description="indicator: mark cells whose solution jump is at least this fraction of the maximum")
    coarsen_threshold: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.1, description="indicator: coarsen cells whose jump is below this fraction of the maximum")

    @model_validator(mode="after")
    def _params(self):
        # (a default value is allowed anywhere, so a dumped scenario reads back)
        extra = sorted(k for k in ("threshold", "coarsen_threshold")
                       if k in self.model_fields_set and getattr(self, k) != type(self).model_fields[k].default)
        if self.kind != "indicator" and extra:
            raise ValueError(f"{', '.join(extra)} only apply to region kind 'indicator'")
        if self.kind == "indicator" and self.coarsen_threshold >= self.threshold:
            raise ValueError(f"coarsen_threshold {self.coarsen_threshold} must be below threshold {self.threshold}")
        need = {"box": ["box"], "disc": ["center", "radius"], "front": ["start", "speed", "width"]}.get(self.kind, [])
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"region kind '{self.kind}' needs {', '.join(missing)}")
        if self.kind == "random" and self.fraction >= 1.0:
            raise ValueError("region kind 'random' needs a fraction below 1")
        return self


class AdaptationSpec(_Strict):
    """How the work changes each phase: weights multiplied on a region, or the mesh refined there."""

    phases: Annotated[int, Field(ge=1)] = 7
    kind: Literal["weights", "refine"] = Field(
        "weights", description="weights: multiply the region's weights by factor; refine: bisect the region's "
        "cells (newest-vertex bisection) and coarsen where the region has left")
    factor: PosFloat = Field(2.0, description="weights: the multiplier (ignored by refine)")
    region: RegionSpec = RegionSpec(kind="random", fraction=0.2)
    max_level: Annotated[int, Field(ge=1, le=30)] = Field(4, description="refine: bisections a cell may accumulate")
    edges: Literal["all", "refinement"] = Field(
        "all", description="refine: bisect all three edges of a marked cell (4 children) or its refinement edge (2)")
    coarsen: bool = Field(True, description="refine: merge sibling pairs the region has left")
    work_per_cell: NonNegFloat = Field(
        1.0, description="refine: work units charged to the clock per cell bisected or merged")


class RefinementSpec(_Strict):
    """Boundary refinement after a realisation (:mod:`hermes.balance.refinement`); ``passes: 0`` = off."""

    passes: Annotated[int, Field(ge=0, le=100)] = Field(
        0, description="largest number of passes (an upward and a downward sweep); 0 = no refinement")
    tolerance: Annotated[float, Field(gt=0.0, le=0.5)] = Field(
        0.03, description="loads stay within (1 ± tolerance) of their fair share (or no further from it)")
    geometric: Annotated[float, Field(ge=0.0, le=100.0)] = Field(
        0.25, description="weight of the geometric gain (cell widths beyond the centroids' bisector); 0 = cut only")


class BalancerSpec(_Strict):
    """The balancer and its parameters.

    Parameters have a home per algorithm — ``balancer: {algorithm: pcg, pcg: {tolerance: 1e-8}, metis:
    {targets: equal}}`` — so one scenario carries settings for several balancers and ``--set
    balancer.algorithm=X`` always works. The flat form of earlier versions (``balancer: {algorithm: pcg,
    tolerance: 1e-8}``) is still read: a flat key applies to the chosen algorithm if it is one of its
    parameters, is ignored (and listed in :attr:`ignored`) if only other balancers know it, and is an error
    if no balancer does. A per-algorithm key wins over the same flat key. Every section is validated
    against its balancer's parameter model, so a typo fails before any work.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    algorithm: str = Field("pcg", description="a name of `hermes balancers`, or an import path 'pkg.module:Name'")
    trigger: Literal["auto"] | float = Field(
        1.0, description="balance only if imbalance exceeds this; auto: only if the expected gain over the "
        "phase's iterations exceeds the modelled cost of balancing and migrating (hermes.balance.payoff)")
    rounds: Annotated[int, Field(ge=1, le=1000)] = Field(
        3, description="balancing rounds per phase: a round runs while it still lowers the imbalance")
    selection: Literal["gain", "peel", "wavefront"] = Field(
        "gain", description="which cells realise a flow: gain (thesis §10.1), peel (BFS layers from the shared "
        "boundary), wavefront (straight front)")
    refinement: RefinementSpec = Field(
        default_factory=lambda: RefinementSpec(),
        description="boundary refinement after a flow's cells moved (hermes.balance.refinement)")
    ghosts: Literal["lazy", "exact"] = Field(
        "lazy", description="ghost owners while a flow is realised level by level: lazy (patched with what a rank "
        "sent and received, refreshed at the end) or exact (neighbours told of every move, one message per level)")
    conductance: Literal["links", "boundary"] = Field(
        "links", description="edge weights of the model the flow balancers see: links (the monitor's bandwidth "
        "weights) or boundary (those times the subdomains' common boundary, relative to the longest)")

    @field_validator("trigger", mode="before")
    @classmethod
    def _trigger(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1.0 <= v <= 1e6:
            raise ValueError(f"must be 'auto' or a number between 1 and 1e6, got {v!r}")
        return float(v)

    @property
    def sections(self) -> dict[str, dict[str, Any]]:
        """The per-algorithm parameter sections, by balancer name."""
        return {k: dict(v) for k, v in (self.model_extra or {}).items() if isinstance(v, dict)}

    @property
    def flat(self) -> dict[str, Any]:
        """The parameters given directly under ``balancer:`` (the flat form)."""
        return {k: v for k, v in (self.model_extra or {}).items() if not isinstance(v, dict)}

    def _split(self) -> tuple[dict[str, Any], list[str], str]:
        """(raw parameters of the chosen algorithm, ignored flat keys, error prefix)."""
        from hermes.balance.registry import all_balancers, get_balancer

        mine = set(get_balancer(self.algorithm).params.model_fields)
        raw, ignored = {}, []
        known = None
        for key, value in self.flat.items():
            if key in mine:
                raw[key] = value
                continue
            known = known if known is not None else {k for b in all_balancers().values() for k in b.params.model_fields}
            if key not in known:
                valid = ", ".join(sorted(mine)) or "none"
                raise BalancerError(f"balancer.{key}: unknown parameter for '{self.algorithm}' (valid: {valid})")
            ignored.append(key)
        section = self.sections.get(self.algorithm)
        if section is not None:
            raw.update(section)
        return raw, ignored, f"balancer.{self.algorithm}." if section is not None else "balancer."

    @property
    def given(self) -> dict[str, Any]:
        """The raw parameters that apply to the chosen algorithm (flat and its section)."""
        return self._split()[0]

    @property
    def ignored(self) -> list[str]:
        """Flat keys that belong to other balancers, not to the chosen one (ignored)."""
        return self._split()[1]

    @property
    def params(self) -> dict[str, Any]:
        """The chosen algorithm's parameters, validated, with every default filled in."""
        from hermes.balance.registry import get_balancer

        raw, _, prefix = self._split()
        return get_balancer(self.algorithm).check(raw, prefix=prefix)

    @model_validator(mode="after")
    def _validate_parameters(self):
        from hermes.balance.registry import get_balancer

        for name, section in self.sections.items():
            if name == self.algorithm:
                continue
            try:
                info = get_balancer(name)
            except BalancerError:
                raise BalancerError(f"balancer.{name}: not a balancer (a mapping under balancer: is the "
                                    f"parameter section of the balancer it names)") from None
            info.check(section, prefix=f"balancer.{name}.")
        self.params  # noqa: B018  (raises BalancerError in one line)
        return self


class OutputSpec(_Strict):
    dir: str | None = None
    pictures: bool = True
    partitions: bool = True
    #: write vtu/phase-XXX.vtu per phase and partition.pvd (ParaView time series)
    vtu: bool = False


class Scenario(_Strict):
    """A whole experiment (see README: 'Scenario format')."""

    name: str = "scenario"
    processors: Annotated[int, Field(ge=1)] | None = None
    seed: Annotated[int, Field(ge=0)] = 0
    clock: Literal["virtual", "wall"] = "virtual"
    mesh: MeshSpec
    platform: PlatformSpec = PlatformSpec()
    application: ApplicationSpec = ApplicationSpec()
    adaptation: AdaptationSpec = AdaptationSpec()
    balancer: BalancerSpec = BalancerSpec()
    output: OutputSpec = OutputSpec()
    #: directory relative paths in the scenario are resolved against (not a YAML key)
    base_dir: str = Field(".", exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", v):
            raise ValueError("name may only contain letters, digits, '.', '_' and '-'")
        return v

    def resolve(self, path: str) -> Path:
        """A path from the scenario, relative to the scenario file's directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"base_dir"})


def _format_error(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and x.startswith(("function-", "literal["))))
    msg = e["msg"]
    if e["type"] == "extra_forbidden":
        msg = "unknown key"
    msg = msg.replace("Value error, ", "")
    more = f" (and {len(err.errors()) - 1} more problems)" if len(err.errors()) > 1 else ""
    return f"{loc or 'scenario'}: {msg}{more}"


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


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a raw scenario dict."""
    out = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ScenarioError(f"--set {item!r}: expected key.path=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            raise ScenarioError(f"--set {item!r}: bad key path {key!r}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        _set_path(out, key, value)
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
    if sc.adaptation.kind == "refine" and sc.mesh.units != "cells":
        raise ScenarioError("adaptation.kind: refine needs mesh.units: cells (it bisects the cell polygons)")
    if sc.adaptation.region.kind == "indicator" and sc.application.kernel != "jacobi":
        raise ScenarioError("adaptation.region.kind: indicator needs application.kernel: jacobi (it marks where "
                            "the solution jumps)")
    if sc.mesh.file is not None and not sc.resolve(sc.mesh.file).is_file():
        raise ScenarioError(f"mesh.file: no such file: {sc.resolve(sc.mesh.file)}")
    for key, val in (("platform.capacities", sc.platform.capacities), ("platform.schedule", sc.platform.schedule)):
        if isinstance(val, str) and val != "homo" and not sc.resolve(val).is_file():
            raise ScenarioError(f"{key}: no such file: {sc.resolve(val)}")
    p = sc.processors
    if p is not None:
        if isinstance(sc.platform.capacities, list) and len(sc.platform.capacities) != p:
            raise ScenarioError(f"platform.capacities: {len(sc.platform.capacities)} values for {p} processors")
        for k, link in enumerate(sc.platform.links):
            if max(link.ranks) >= p or link.ranks[0] == link.ranks[1]:
                raise ScenarioError(f"platform.links.{k}.ranks: {list(link.ranks)} is not a pair of ranks below {p}")
        if isinstance(sc.platform.schedule, list):
            for k, row in enumerate(sc.platform.schedule):
                if len(row) != p:
                    raise ScenarioError(f"platform.schedule.{k}: {len(row)} capacities for {p} processors")


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, override and validate a scenario file."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"scenario file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ScenarioError(f"{path}: not valid YAML{where}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read ({err.__class__.__name__})") from None
    if data is None:
        raise ScenarioError(f"{path}: the scenario is empty")
    sc = parse_scenario(data, base_dir=path.parent, overrides=overrides)
    if "name" not in data and not any(o.startswith("name=") for o in overrides or []):
        sc = sc.model_copy(update={"name": re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem)})
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
