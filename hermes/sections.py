"""The sections of a scenario (``mesh``, ``platform``, ``application``, ``adaptation``, ``balancer``, ``output``,
``run``) as strict pydantic models, each bounded (:mod:`hermes.bounds`), and the constants of their checks. A part
that needs one section imports it from here and receives it, never the whole :class:`hermes.scenario.Scenario`."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, ConfigDict, Discriminator, Field, Tag, field_validator, model_serializer,
                      model_validator)

from hermes.bounds import BIG, MAX_ITERATIONS, MAX_PHASES, MAX_PROCESSORS
from hermes.errors import BalancerError
from hermes.strict import Strict

__all__ = ["MeshSpec", "LinkSpec", "PlatformSpec", "PlatformProfile", "ApplicationSpec", "RegionSpec", "AdaptationSpec",
           "RefinementSpec", "BalancerSpec", "LBDatafileSpec", "OutputSpec", "RunSpec", "FileName", "PosFloat",
           "NonNegFloat", "Coord", "PROBE_SECONDS", "MAX_TIME_SPAN", "MAX_SCENARIO_BYTES", "MAX_CONSTRAINTS"]

#: the monitor's capacity probe (1 ms of an average processor) and the widest span of the platform's times it
#: may be measured against (a duration of 1e-12 × the longest still keeps 3 of the clock's 16 digits)
PROBE_SECONDS = 1e-3
MAX_TIME_SPAN = 1e12
#: a scenario file larger than this is refused before it is read (an inline schedule of 100 000 processors
#: × 20 phases is about 20 MB)
MAX_SCENARIO_BYTES = 64 * 2**20
#: mesh.constraint: a vertex weight among at most this many (METIS graphs carry a handful; a bound, not a use)
MAX_CONSTRAINTS = 1000
#: where the named platform profiles live (platform.profile: NAME reads platform-NAME.yaml)
PROFILES = Path(__file__).resolve().parents[1] / "configs"

PosFloat = Annotated[float, Field(gt=0, le=BIG)]
NonNegFloat = Annotated[float, Field(ge=0, le=BIG)]
Coord = Annotated[float, Field(ge=-BIG, le=BIG)]


def _file_name(v: Any) -> Any:
    if isinstance(v, str) and (not v.strip() or any(ord(c) < 32 or c == "\x7f" for c in v)):
        raise ValueError(f"a file name must be non-empty and hold no control characters (NUL, newline, ...), "
                         f"got {v[:40]!r}")
    return v


#: a file or directory name from the scenario: non-empty, no control characters (a NUL byte is no path)
FileName = Annotated[str, AfterValidator(_file_name)]


def _positive(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= BIG:
        raise ValueError(f"{what} must be a positive number up to {BIG:g}, got {x!r}")
    return float(x)




class MeshSpec(Strict):
    """Where the work units come from: a file or a generator (exactly one)."""

    file: FileName | None = None
    grid: str | None = Field(None, description="structured grid of quadrilateral cells, e.g. '20x19'")
    units: Literal["cells", "nodes"] = "cells"
    weight: PosFloat = 1.0
    constraint: Annotated[int, Field(ge=1, le=MAX_CONSTRAINTS)] | Literal["sum", "all"] | None = Field(
        None, description="a multi-constraint graph's vertex weight to balance (1-based), 'sum' of them, or 'all' "
                          "(every weight at once: the first is the load, the others are balanced beside it)")

    @field_validator("grid", mode="before")
    @classmethod
    def _grid_text(cls, v):
        if v is None or isinstance(v, str):
            return v
        hint = " (YAML reads 0x... as a hexadecimal number: quote the grid, '0x5')" if isinstance(v, int) else ""
        raise ValueError(f"grid must be a string like '20x19', got {v!r}{hint}")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.file is None) == (self.grid is None):
            raise ValueError("give exactly one of 'file' or 'grid'")
        if self.grid is not None and not re.fullmatch(r"\s*\d{1,9}\s*x\s*\d{1,9}\s*", self.grid):
            raise ValueError(f"grid must look like '20x19', got {self.grid!r}")
        if self.grid is not None and any(int(v) < 1 for v in self.grid.lower().split("x")):
            raise ValueError("grid sizes must be positive")
        if self.grid is not None and self.constraint is not None:
            raise ValueError("constraint picks a vertex weight of a multi-constraint graph file; a grid has one")
        if self.grid is not None and self.units == "nodes":
            # refused rather than implemented: the nodal graph of an nx × ny grid of cells is the
            # (nx+1) × (ny+1) lattice, which is exactly the dual graph of grid (nx+1)x(ny+1)
            nx, ny = (int(v) for v in self.grid.lower().split("x"))
            raise ValueError(f"units 'nodes' applies to mesh files; a grid's work units are its cells "
                             f"(for the graph of this grid's nodes use grid: {nx + 1}x{ny + 1})")
        return self

    @property
    def grid_cells(self) -> int | None:
        """Cells of the generated grid (None for a file)."""
        if self.grid is None:
            return None
        nx, ny = (int(v) for v in self.grid.lower().split("x"))
        return nx * ny


class LinkSpec(Strict):
    ranks: tuple[Annotated[int, Field(ge=0, lt=MAX_PROCESSORS)], Annotated[int, Field(ge=0, lt=MAX_PROCESSORS)]]
    latency: NonNegFloat | None = None
    bandwidth: PosFloat | None = None


class PlatformSpec(Strict):
    """Processors and network (thesis §4.2, α-β model)."""

    capacities: list[PosFloat] | FileName = Field("homo", description="'homo', a list of relative speeds, or a file")
    speed: PosFloat = Field(1.0e6, description="work units per second of an average processor (c_i = 1/p)")
    latency: NonNegFloat = 1.0e-4
    bandwidth: PosFloat = 1.0e8
    links: list[LinkSpec] = []
    schedule: list[list[PosFloat]] | FileName | None = Field(
        None, description="capacities per phase: a list of per-processor lists, or a CSV file (thesis Table 10.6)")
    profile: FileName | None = Field(
        None, description="the cost of a balancer's messages: a profile name (configs/platform-NAME.yaml, e.g. "
                          "'thesis2003', fitted to thesis Table 10.1) or a profile file")

    @model_serializer(mode="wrap")
    def _without_profile(self, handler):
        # a scenario without a profile dumps as before the key existed (its summary.json stays the same)
        out = handler(self)
        if isinstance(out, dict) and out.get("profile", 0) is None:
            del out["profile"]
        return out

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
        if not isinstance(v, list) or not v or not all(isinstance(r, list) and r for r in v):
            raise ValueError("must be a CSV file name or a non-empty list of per-processor capacity lists (one per "
                             "phase)")
        if len(v) > MAX_PHASES or max(len(r) for r in v) > MAX_PROCESSORS:
            raise ValueError(f"at most {MAX_PHASES} phases of at most {MAX_PROCESSORS} capacities")
        return [[_positive(x, f"phase {k + 1}, capacity of processor {i}") for i, x in enumerate(r)]
                for k, r in enumerate(v)]


class PlatformProfile(Strict):
    """A platform profile (``platform.profile``): what one neighbour-exchange round and one collective of a
    balancer cost, in seconds, in place of the platform's α and ⌈log2 p⌉ α (the bytes still cross at the
    platform's bandwidth), and optionally the terms of thesis §8.6's estimate: a set-up per balancing call, a price
    per message of the busiest rank and per allreduce and hop of the processor graph's diameter
    (:class:`hermes.runtime.clock.BalancePrices`; all zero by default: charged as without them).
    ``configs/platform-thesis2003.yaml`` is fitted to thesis Table 10.1 by ``benchmarks/thesis_platform.py``."""

    name: Annotated[str, Field(min_length=1, max_length=100)]
    balance_exchange: NonNegFloat
    balance_allreduce: NonNegFloat
    # a number or a mapping, told apart before validation (errors name one form; the tags' spelling is one
    # hermes.errors.validation_message leaves out of the key path)
    balance_setup: Annotated[Annotated[NonNegFloat, Tag("tagged-union[number]")]
                             | Annotated[dict[str, NonNegFloat], Tag("tagged-union[names]")],
                             Discriminator(lambda v: f"tagged-union[{'names' if isinstance(v, dict) else 'number'}]")
                             ] = Field(
        0.0, description="s per balancing call: one number for every balancer, or by balancer name (0 for others)",
        json_schema_extra={"x-key": "balancer"})
    balance_message: NonNegFloat = Field(
        0.0, description="s per message the busiest rank sends in a balancer's neighbour-exchange round")
    balance_allreduce_hop: NonNegFloat = Field(
        0.0, description="s per allreduce of a balancer and hop of the diameter of its processor graph")

    @field_validator("balance_setup")
    @classmethod
    def _known_balancers(cls, v):
        """Every name a balancer of the registry (import paths and plug-ins are not imported to check)."""
        if isinstance(v, dict):
            from hermes.balance.registry import get_balancer, plugins_deferred

            for name in v:
                try:
                    with plugins_deferred():
                        get_balancer(name)
                except BalancerError as err:
                    raise ValueError(str(err)) from None
        return v

    def prices(self):
        """The prices beyond :meth:`links` (:class:`hermes.runtime.clock.BalancePrices`), None if all are zero."""
        from hermes.runtime.clock import BalancePrices

        setup = self.balance_setup if isinstance(self.balance_setup, float) else \
            {k: v for k, v in self.balance_setup.items() if v}
        if not setup and not self.balance_message and not self.balance_allreduce_hop:
            return None
        return BalancePrices(setup, self.balance_message, self.balance_allreduce_hop)

    @classmethod
    def load(cls, profile: str, resolve, key: str = "platform.profile") -> PlatformProfile:
        """The profile named ``profile`` (``configs/platform-NAME.yaml`` beside the package) or the file
        ``resolve(profile)``; a missing or malformed one is a one-line ScenarioError naming ``key``."""
        from pydantic import ValidationError

        from hermes.errors import ScenarioError, validation_message
        from hermes.loaders import load_yaml

        named = re.fullmatch(r"[A-Za-z0-9_-]+", profile) is not None
        path = (PROFILES / f"platform-{profile}.yaml") if named else resolve(profile)
        if not path.is_file():
            known = sorted(f.stem[len("platform-"):] for f in PROFILES.glob("platform-*.yaml"))
            raise ScenarioError(f"{key}: no profile {profile!r} ({path}); known: {', '.join(known)}")
        data = load_yaml(path, key)
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise ScenarioError(f"{key} ({path.name}): {validation_message(err, root='profile')}") from None

    def links(self, bandwidth: float):
        """The links a balancer's messages are charged with: this profile's costs at ``bandwidth``."""
        from hermes.runtime.clock import Links

        return Links(self.balance_exchange, bandwidth, collective_latency=self.balance_allreduce)


class ApplicationSpec(Strict):
    """The simulated solver (thesis Alg. 2, Fig. 10.5)."""

    kernel: Literal["synthetic", "jacobi"] = "synthetic"
    iterations: Annotated[int, Field(ge=1, le=MAX_ITERATIONS)] = 20
    work_per_weight: PosFloat = 1.0
    bytes_per_edge: NonNegFloat = 64.0
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: a halo exchange and a reduction every iteration; async: asynchronous iterations "
                            "on the newest values received (hermes/app/mesh/async_mesh.py)")


class RegionSpec(Strict):
    """Where the adaptation happens: a geometric region (``random``, ``box``, ``disc``, a moving
    ``front``) or where the kernel's error indicator is large (``indicator``, :mod:`hermes.app.mesh.indicator`)."""

    kind: Literal["random", "box", "disc", "front", "indicator"] = "random"
    fraction: Annotated[float, Field(gt=0, le=1)] = 1.0
    box: tuple[Coord, Coord, Coord, Coord] | None = Field(None, description="xmin, ymin, xmax, ymax")
    center: tuple[Coord, Coord] | None = None
    radius: PosFloat | None = None
    start: Coord | None = Field(None, description="front: x position at phase 1")
    speed: Coord | None = Field(None, description="front: x advance per phase")
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


class AdaptationSpec(Strict):
    """How the work changes each phase: weights multiplied on a region, or the mesh refined there."""

    phases: Annotated[int, Field(ge=1, le=MAX_PHASES)] = 7
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


class RefinementSpec(Strict):
    """Boundary refinement after a realisation (:mod:`hermes.balance.realisation.boundary`); ``passes: 0`` = off."""

    passes: Annotated[int, Field(ge=0, le=100)] = Field(
        0, description="largest number of passes (an upward and a downward sweep); 0 = no refinement")
    tolerance: Annotated[float, Field(gt=0.0, le=0.5)] = Field(
        0.03, description="loads stay within (1 ± tolerance) of their fair share (or no further from it); "
        "below: a different lower bound")
    geometric: Annotated[float, Field(ge=0.0, le=100.0)] = Field(
        0.25, description="weight of the geometric gain (cell widths beyond the centroids' bisector); 0 = cut only")
    below: Annotated[float, Field(gt=0.0, le=0.5)] | None = Field(
        None, description="loads may fall to (1 - below) of their fair share (a lopsided tolerance: only the most "
        "loaded rank sets the time); default: tolerance")
    decide: Literal["always", "auto"] = Field(
        "always", description="always refine after a flow moved cells, or auto: only when the phase's ghost "
        "exchange with its sends serialised (iterations times the sum of the α-β message times) exceeds what the "
        "tolerance may cost (tolerance times the compute time) plus the last refinement's migration time")


class BalancerSpec(Strict):
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
    trigger: Literal["auto"] | Annotated[float, Field(ge=1.0, le=1e6)] = Field(
        1.0, description="balance only if imbalance exceeds this; auto: only if the expected gain over the "
        "phase's iterations exceeds the modelled cost of balancing and migrating (hermes.balance.payoff)")
    rounds: Annotated[int, Field(ge=1, le=1000)] = Field(
        10, description="at most this many balancing rounds per phase: a round runs while the last one changed the "
        "imbalance, and beyond the first min_rounds only while the imbalance exceeds 1 + imbalance_tolerance")
    min_rounds: Annotated[int, Field(ge=1, le=1000)] = Field(
        3, description="rounds that run whatever the imbalance_tolerance (while the last one changed the imbalance); "
        "later ones balance what a deep processor graph's first rounds leave above 1 + imbalance_tolerance "
        "(docs/design/depth.md)")
    imbalance_tolerance: Annotated[float, Field(ge=0.0, le=1e6)] = Field(
        0.03, description="the imbalance above 1 that rounds beyond min_rounds balance away (or the heaviest cell "
        "over the smallest fair load, if more: no round can do better)")
    realisation: Literal["adaptive", "literal"] = Field(
        "adaptive", description="how a rank realises its part of a flow: adaptive (passes on what arrived beyond "
        "the flow and reroutes what a target it cannot reach any more was to get: "
        "hermes.balance.realisation.realise.select_adaptive) or literal (sends each edge's flow as computed, thesis §10.1)")
    selection: Literal["gain", "peel", "wavefront"] = Field(
        "gain", description="which cells realise a flow: gain (thesis §10.1), peel (BFS layers from the shared "
        "boundary), wavefront (straight front)")
    refinement: RefinementSpec = Field(
        default_factory=lambda: RefinementSpec(),
        description="boundary refinement after a flow's cells moved (hermes.balance.realisation.boundary)")
    ghosts: Literal["lazy", "exact"] = Field(
        "lazy", description="ghost owners while a flow is realised level by level: lazy (patched with what a rank "
        "sent and received, refreshed at the end) or exact (neighbours told of every move, one message per level: "
        "every selection sees the subdomains as they are; at 1,024 processors the study's first phase ends at "
        "1.021 after 3 rounds exact, 1.295 lazy)")
    delivery: Literal["direct", "hops"] = Field(
        "direct", description="how a flow's cells travel: direct (the levels move identity records, each cell is "
        "then shipped once from its owner to its final rank, charged on that pair's link) or hops (the cells "
        "themselves move level by level through intermediate ranks, the thesis' realisation); the same partitions")
    conductance: Literal["links", "boundary"] = Field(
        "links", description="edge weights of the model the flow balancers see: links (the monitor's bandwidth "
        "weights) or boundary (those times the subdomains' common boundary, relative to the longest)")

    @field_validator("trigger", mode="before")
    @classmethod
    def _trigger(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, str):  # YAML 1.1 reads 1e7 (no dot) as a string; pydantic's floats accept it too
            try:
                v = float(v)
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"must be 'auto' or a number between 1 and 1e6, got {v!r}")
        if not math.isfinite(v):
            raise ValueError(f"must be a finite number (or 'auto'), got {v}")
        if v < 1.0:
            raise ValueError(f"must be at least 1 (or 'auto'), got {v}")
        if v > 1e6:
            raise ValueError(f"must be at most 1e6 (or 'auto'), got {v}")
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

        params = get_balancer(self.algorithm).params
        mine = set(params.model_fields)
        takes_any = params.model_config.get("extra") == "allow"  # a plug-in not imported yet: checked when it is
        raw, ignored = {}, []
        known = None
        for key, value in self.flat.items():
            if key in mine or takes_any:
                raw[key] = value
                continue
            known = known if known is not None else {k for b in all_balancers().values() for k in b.params.model_fields}
            if key not in known:
                from hermes.suggest import did_you_mean

                valid = ", ".join(sorted(mine)) or "none"
                close = did_you_mean(key, [*(k for k, f in type(self).model_fields.items() if not f.exclude), *mine],
                                     n=3)
                raise BalancerError(f"balancer.{key}: unknown key{close}: neither a key of balancer: nor a parameter "
                                    f"for '{self.algorithm}' (its parameters: {valid})")
            ignored.append(key)
        section = self.section
        if section is not None:
            raw.update(section)
        return raw, ignored, f"balancer.{self.algorithm}." if section is not None else "balancer."

    @property
    def section(self) -> dict[str, Any] | None:
        """The chosen algorithm's parameter section, keyed by its name exactly as ``algorithm`` gives it — a
        plug-in's import path too (``mymod:MyBalancer``; ``mymod.MyBalancer`` also as nested mappings, as
        ``--set balancer.mymod.MyBalancer.key=...`` writes it)."""
        extra = self.model_extra or {}
        if isinstance(extra.get(self.algorithm), dict):
            return dict(extra[self.algorithm])
        if "." in self.algorithm and ":" not in self.algorithm:
            cur: Any = extra
            for part in self.algorithm.split("."):
                cur = cur.get(part) if isinstance(cur, dict) else None
            if isinstance(cur, dict):
                return dict(cur)
        return None

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
        info = get_balancer(self.algorithm)
        if info.replay_only:
            raise BalancerError(f"balancer.algorithm: {info.name} balances a trace's tasks (hermes trace replay "
                                f"--algorithm {info.name}); a mesh run cannot use it")
        return info.check(raw, prefix=prefix)

    @model_validator(mode="after")
    def _validate_parameters(self):
        from hermes.balance.registry import get_balancer

        nested = self.section is not None and self.algorithm not in self.sections
        for name, section in self.sections.items():
            if name == self.algorithm or (nested and name == self.algorithm.split(".")[0]):
                continue
            try:
                info = get_balancer(name)
            except BalancerError:
                tail = re.split(r"[:.]", self.algorithm)[-1]
                if name in (tail, self.algorithm.split(":")[0]) and name != self.algorithm:
                    raise BalancerError(f"balancer.{name}: the parameters of balancer {self.algorithm!r} go under "
                                        f"the name balancer.algorithm gives, in full: balancer: {{algorithm: "
                                        f"'{self.algorithm}', '{self.algorithm}': {{...}}}} (or flat under "
                                        f"balancer:, e.g. --set balancer.<key>=...)") from None
                raise BalancerError(f"balancer.{name}: not a balancer (a mapping under balancer: is the "
                                    f"parameter section of the balancer it names, keyed as balancer.algorithm "
                                    f"writes it)") from None
            info.check(section, prefix=f"balancer.{name}.")
        self.params  # noqa: B018  (raises BalancerError in one line)
        return self


class LBDatafileSpec(Strict):
    """The run written as a vt LBDatafile trace (:mod:`hermes.trace.record`): ``<run>/lbdatafile/data.<r>.json``."""

    cells_per_block: Annotated[int, Field(ge=1, le=10**9)] | None = Field(
        None, description="tasks are blocks of about this many cells (a fixed METIS partition of the mesh, one task "
        "per piece of a block on a rank); default: every cell is a task (at most 200,000 cells)")
    compress: bool = Field(False, description="brotli-compress the files, as vt writes them")


class OutputSpec(Strict):
    dir: FileName | None = Field(None, description="the run directory, relative to the scenario file (default "
                            "runs/<name>-<timestamp> in the current directory; --out overrides)")
    pictures: bool = True
    partitions: bool = True
    #: write vtu/phase-XXX.vtu per phase and partition.pvd (ParaView time series)
    vtu: bool = False
    lbdatafile: LBDatafileSpec | None = Field(
        None, description="also write the run as a vt LBDatafile trace (lbdatafile/data.<rank>.json: per phase the "
        "cells with their loads and halo messages, as LBAF and vt-tv read it): true, or {cells_per_block, compress}")
    checkpoint_every: Annotated[int, Field(ge=1, le=MAX_PHASES)] | None = Field(
        None, description="save the distributed state every K phases (hermes resume RUN_DIR continues)")

    @field_validator("lbdatafile", mode="before")
    @classmethod
    def _lbdatafile(cls, v: Any) -> Any:
        if isinstance(v, bool):  # true: the defaults; false: no trace
            return {} if v else None
        return v

    @property
    def trace_spec(self) -> LBDatafileSpec | None:
        """``lbdatafile`` (None: no trace)."""
        return self.lbdatafile


class RunSpec(Strict):
    """How the run is watched."""

    timeout: Annotated[float, Field(gt=0, le=1e7)] | None = Field(
        None, description="wall seconds a phase (or the set-up) may take; a job without progress for that long "
        "(a rank stopped or hung) is ended with one line and exit status 124; --timeout overrides")
    processes: Annotated[int, Field(ge=1, le=MAX_PROCESSORS)] | None = Field(
        None, description="MPI processes hosting the processors (at most one process per processor); default: "
        "one per processor up to the cores of this machine (one fewer when a refined run draws its pictures "
        "while the phases run), the processors shared evenly among them "
        "(hermes.runtime.hosting); clock: wall needs one per processor; --processes overrides")
    bulk: Literal["auto", "off"] = Field(
        "auto", description="auto: the kernels that allow it run once per MPI process for all the processors it "
        "hosts, as arrays — under the virtual clock without extra load, the solver's iterations "
        "(hermes.app.mesh.simulate_bulk) "
        "and the pcg and chebyshev balancers — the same results bit for bit, the Python paid per process instead "
        "of per processor; off: every processor runs its own loop (the reference of the bulk forms)")

    @field_validator("bulk", mode="before")
    @classmethod
    def _bulk_words(cls, v):
        # YAML 1.1 reads a bare off / on as false / true
        return {False: "off", True: "auto"}.get(v, v) if isinstance(v, bool) else v
