"""What a balancer gets and what it returns — the interface every balancer, built in or plugged in, implements.

A balancer is called collectively on every rank of a ``hermes run`` with a :class:`BalanceContext` and
returns a :class:`Decision`:

- a **flow** on the subdomain graph (diffusion, polynomial and potential methods): the driver checks that
  it lowers the imbalance, then realises it — cells are selected by the gain function and migrated in the
  topological order of the flow (:mod:`hermes.balance.realisation.realise`);
- or new **destinations** of the rank's own cells (scratch-remap repartitioning, gossip).

Its parameters are declared once, as a pydantic model derived from :class:`Params` (defaults, bounds and a
description per field): the scenario's ``balancer:`` section, ``--set balancer.<name>.<key>=…``,
``hermes balancers`` and the generated documentation all read that model. :class:`BalancerInfo` ties a name,
the SPMD ``run`` function, the parameter model, a one-line description and an optional serial reference
together; :func:`hermes.balance.registry.register` files it under its name. The shared field types below
(``Count``, ``Number``, ``Tolerance``, ``Seed``, ...; :func:`number_type` and :func:`integer_type` for other
ranges) carry finite bounds, so no accepted value hangs a run or exhausts its memory, a plug-in's included.

Writing a balancer (see ``examples/custom_balancer`` for a complete one)::

    from hermes.balance import BalanceContext, Decision, Params, flow_from_local
    from hermes.balance.interface import Count

    class MyDiffusion:
        "Plain first-order diffusion for a fixed number of steps."

        class Params(Params):
            steps: Count = Field(50, description="neighbour steps")  # 1..MAX_ITERATIONS

        def run(self, ctx: BalanceContext) -> Decision:
            ...  # ctx.nb.exchange(...) with the neighbours, ctx.params["steps"], ctx.state for memory
            return Decision(flow=flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, flows), info={...})

It plugs in by import path (``balancer: {algorithm: mypkg.mymodule:MyDiffusion}``) or by an entry point
in the group ``hermes.balancers`` of the package that defines it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args

import numpy as np
from numpy.typing import NDArray
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema,
                      field_validator)

from hermes.balance.model import Model, edge_values
from hermes.bounds import BIG, MAX_ITERATIONS, MAX_PROCESSORS, MAX_SEED
from hermes.runtime.comm import Counters, NeighbourComm
from hermes.errors import BalancerError
from hermes.strict import number_rule

__all__ = ["BalanceContext", "Decision", "Params", "NoParams", "BalancerInfo", "flow_from_local", "flow_balancer",
           "Number", "Integer", "Tolerance", "StopTolerance", "MIN_TOLERANCE", "Count", "OptionalCount", "Seed", "Fraction", "NonNegative", "Positive",
           "Flag", "number_type", "integer_type", "BIG", "MAX_PROCESSORS", "MAX_ITERATIONS", "MAX_SEED",
           "describe_params", "serial_kwargs"]


# -- parameter types shared by the families ----------------------------------------------------------------
# The run's bounds (hermes.bounds; derived in hermes/scenario.py, "Bounds") bound the parameters too: ``BIG``
# the largest magnitude of a number (loads, times and byte counts stay finite when squared and summed over
# MAX_PROCESSORS ranks), ``MAX_PROCESSORS`` the largest processor count (and so of a fanout, a degree, a
# number of peers), ``MAX_ITERATIONS`` the largest iteration count (finite time; a method whose iterations
# are costly declares a smaller one and says why), ``MAX_SEED`` the largest seed (a C int, as METIS takes it).


def _no_bool(v: Any) -> Any:
    """A number as given, or ValueError: a bool (YAML ``true``) is not a number, nor is ``.inf`` or ``.nan``."""
    if isinstance(v, bool):
        raise ValueError(f"must be a number, got {v!r}")
    if isinstance(v, (float, np.floating)) and not math.isfinite(v):
        raise ValueError(f"must be finite, got {v!r}")
    return v


def _strict_bool(v: Any) -> Any:
    if not isinstance(v, bool):
        raise ValueError(f"must be true or false, got {v!r}")
    return v


def _strict_int(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"must be an integer, got {v!r}")
    return int(v)


def number_type(*, ge: float | None = None, gt: float | None = None, le: float | None = None,
                lt: float | None = None) -> Any:
    """The annotated type of a finite float (not a bool) within bounds; a side not given is bounded by ∓BIG.

    Declare a field's bounds here rather than by ``Annotated[Number, Field(ge=...)]``: both validate, but only
    these reach the JSON schema as ``minimum``/``maximum`` (what ``hermes balancers --markdown`` prints).
    """
    ge = -BIG if ge is None and gt is None else ge
    le = BIG if le is None and lt is None else le
    return Annotated[float, Field(ge=ge, gt=gt, le=le, lt=lt), BeforeValidator(_no_bool)]


def integer_type(*, ge: int = -MAX_ITERATIONS, le: int = MAX_ITERATIONS) -> Any:
    """The annotated type of an integer (not a bool, not a float) in ``ge..le`` (default ±MAX_ITERATIONS)."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_strict_int)]


#: a finite float (not a bool) of magnitude at most BIG
Number = number_type()
#: the smallest relative tolerance an iteration may be given: below about 10 machine epsilons (ε = 2.2e-16) no
#: iteration in double precision can meet it, and it would run to its iteration limit
MIN_TOLERANCE = 1e-15
#: a relative convergence tolerance in [1e-15, 1)
Tolerance = number_type(ge=MIN_TOLERANCE, lt=1)


def _zero_or_tolerance(v: float) -> float:
    if 0 < v < MIN_TOLERANCE:
        raise ValueError(f"must be 0 (no early stop: the iteration limit decides) or at least {MIN_TOLERANCE:g} "
                         f"(below about 10 machine epsilons no iteration can meet it), got {v!r}")
    return v


#: a stopping tolerance: 0 (the iteration limit decides: a fixed number of sweeps) or a :data:`Tolerance`
StopTolerance = Annotated[float, Field(ge=0, lt=1), BeforeValidator(_no_bool), AfterValidator(_zero_or_tolerance),
                          WithJsonSchema({"anyOf": [{"const": 0}, {"type": "number", "minimum": MIN_TOLERANCE,
                                                                   "exclusiveMaximum": 1}]})]
#: an integer (not a bool, not a float) of magnitude at most MAX_ITERATIONS (declare wider ones with
#: :func:`integer_type`)
Integer = integer_type()
#: a positive integer (iteration counts, strides) up to MAX_ITERATIONS
Count = integer_type(ge=1)
#: a positive integer up to MAX_ITERATIONS or null (null: the method's own default, e.g. a bound in p)
OptionalCount = Count | None
#: a seed of a random stream: 0..MAX_SEED
Seed = integer_type(ge=0, le=MAX_SEED)
#: a number in [0, 1]
Fraction = number_type(ge=0, le=1)
#: a number in [0, BIG]
NonNegative = number_type(ge=0)
#: a number in (0, BIG]
Positive = number_type(gt=0)
#: true or false, nothing else (YAML ``yes`` is read as true by the YAML parser, "yes" the string is refused)
Flag = Annotated[bool, BeforeValidator(_strict_bool)]


class Params(BaseModel):
    """Base of a balancer's parameter model: one declaration of names, defaults, bounds and documentation.

    Subclasses declare fields with ``pydantic.Field(default, ..., description=...)``; unknown keys are
    rejected. :meth:`BalancerInfo.check` validates a raw mapping against the model and returns the merged
    plain dict the balancer sees as ``ctx.params``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @field_validator("*", mode="after")
    @classmethod
    def _number_rule(cls, value: Any) -> Any:
        """Every float of every field — a plug-in's too — within hermes' rule for numbers (finite, 0 or of
        magnitude 1e-100 to 1e100: :func:`hermes.strict.number_rule`), whatever range the field declares."""
        return number_rule(value)

    @classmethod
    def of(cls, raw: dict[str, Any] | None = None, /, **values: Any):
        """The parameters ``raw`` and ``values`` validated (defaults filled in): what a kernel takes when it is
        called from Python rather than through the registry.

        Raises
        ------
        BalancerError
            One line naming the key (``k: must be greater than 0, got -1.0``).
        """
        try:
            return cls.model_validate({**(raw or {}), **values})
        except ValidationError as err:
            raise BalancerError(_format(err, "", cls.model_fields).removeprefix(": ")) from None


class NoParams(Params):
    """A balancer without parameters."""


def _format(err: ValidationError, prefix: str, known: Iterable[str] = ()) -> str:
    """One line from a parameter model's ValidationError; an unknown parameter names the ``known`` ones closest
    to it (:func:`hermes.suggest.did_you_mean`)."""
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and "[" in x))
    if e["type"] == "extra_forbidden":
        from hermes.suggest import did_you_mean

        return f"{prefix}{loc}: unknown parameter{did_you_mean(loc, known)}"
    msg = e["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
    words = {"less_than_equal": ("le", "less than or equal to"), "less_than": ("lt", "less than"),
             "greater_than_equal": ("ge", "greater than or equal to"), "greater_than": ("gt", "greater than")}
    if e["type"] in words:  # the bound as written (1e-15, not 0.000000000000001; 1000000, not 1e+06)
        key, text = words[e["type"]]
        bound = e["ctx"][key]
        if bound in (BIG, -BIG):  # the default bound
            msg = f"must be a finite number of magnitude at most {BIG:g}"
        else:
            shown = str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e16 else f"{bound:g}"
            msg = f"must be {text} {shown}"
    got = "" if "got " in msg or "input" not in e else f", got {e['input']!r}"
    return f"{prefix}{loc}: {msg}{got}"


def _accepts_none(annotation: Any) -> bool:
    return annotation is type(None) or any(_accepts_none(a) for a in get_args(annotation))


def describe_params(model: type[Params]) -> list[tuple[str, Any, str]]:
    """(name, default, description) of every parameter, in declaration order."""
    return [(name, f.default, f.description or "") for name, f in model.model_fields.items()]


@dataclass
class BalanceContext:
    """What a balancer may use on this rank.

    ``model`` is the global H = (G, l, c, w) (small: one entry per processor, gathered once per round; charged to
    the round as one gather if the balancer reads it, on any rank: docs/COSTS.md);
    ``nb`` exchanges with the subdomain-graph neighbours ``nb.neighbours`` whose edge weights are
    ``weights``; ``dom`` is the rank's cells (for methods that choose cells themselves); ``params`` the
    validated parameters (a plain dict of the balancer's :class:`Params` model).
    """

    comm: Any
    clock: Any
    nb: NeighbourComm
    model: Model
    load: float
    capacity: float
    weights: NDArray[np.float64]
    dom: Any
    params: dict[str, Any]
    seed: int = 0
    #: the monitor's measured latency (s) and bandwidth (bytes/s) of the link to each neighbour
    latency: NDArray[np.float64] | None = None
    bandwidth: NDArray[np.float64] | None = None
    #: per-rank state that persists from phase to phase for the whole run (e.g. AdA's operator Θ);
    #: a balancer keeps what it needs under its own name
    state: dict[str, Any] = field(default_factory=dict)
    #: the balancing round within the phase (0: the first; ``balancer.rounds`` allows more while they pay)
    round: int = 0
    #: the scenario's ``balancer.conductance``: ``boundary`` when the model's edge weights already include the
    #: subdomains' common boundaries, ``links`` when they are the monitor's link weights alone
    conductance: str = "links"
    #: the scenario's ``run.bulk``: ``auto`` lets a balancer with a bulk form run it once per MPI process for the
    #: processors it hosts (the same bits), ``off`` keeps every processor's own loop
    bulk: str = "off"
    #: whether ``model`` was read on this rank (set by reading it): a round in which any rank read it pays the
    #: model's gather (hermes.balance.central, docs/COSTS.md)
    model_read: bool = False

    def __getattribute__(self, name: str) -> Any:
        if name == "model":
            object.__setattr__(self, "model_read", True)
        return object.__getattribute__(self, name)


@dataclass
class Decision:
    """A balancer's answer: a global ``flow`` on ``model.edges``, or local cell destinations ``dest``.

    ``info`` lands in ``summary.json`` (``phases[k].balance_info``): scalars and strings only.
    """

    flow: NDArray[np.float64] | None = None
    dest: NDArray[np.int64] | None = None
    iterations: int = 0
    converged: bool = True
    counters: Counters = field(default_factory=Counters)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BalancerInfo:
    """A registry entry.

    ``run(ctx) -> Decision`` is the distributed form, called collectively inside ``hermes run``;
    ``serial(model, *, links=None, **params) -> FlowResult`` is the serial reference on the whole
    processor graph (the oracle of the tests and the engine of the offline lab ``hermes lab flow``), None for
    methods that do not compute a flow (``metis``). ``params`` is the parameter model.
    """

    name: str
    run: Callable[[BalanceContext], Decision]
    params: type[Params] = NoParams
    doc: str = ""
    serial: Callable[..., Any] | None = None
    #: balances a trace's tasks only (``hermes trace replay``): a mesh scenario naming it is refused when it is read
    replay_only: bool = False

    @property
    def defaults(self) -> dict[str, Any]:
        """Every parameter with its default value."""
        return {name: f.default for name, f in self.params.model_fields.items()}

    def flow(self, model: Model, *, links=None, **params: Any):
        """The serial reference on ``model`` with ``params`` validated (defaults filled in).

        Raises
        ------
        BalancerError
            If the balancer computes no flow (no serial reference) or a parameter is bad.
        """
        if self.serial is None:
            raise BalancerError(f"balancer {self.name!r} computes no flow (it has no serial reference)")
        return self.serial(model, **serial_kwargs(self.serial, self.check(params, prefix=""), links))

    def check(self, raw: dict[str, Any] | None = None, *, prefix: str = "balancer.") -> dict[str, Any]:
        """Validate ``raw`` against the parameter model; the merged parameters as a plain dict.

        Raises
        ------
        BalancerError
            One line naming the key (``balancer.tolerance: must be less than 1, got 3``).
        """
        fields = self.params.model_fields
        # null means "the default" for a parameter that has no null of its own (``--set balancer.x=null``)
        given = {k: v for k, v in (raw or {}).items()
                 if not (v is None and k in fields and not _accepts_none(fields[k].annotation))}
        try:
            return self.params.model_validate(given).model_dump()
        except ValidationError as err:
            raise BalancerError(_format(err, prefix, fields)) from None


def serial_kwargs(serial: Callable[..., Any], params: dict[str, Any], links=None) -> dict[str, Any]:
    """The parameters a serial reference accepts (all of them if it takes ``**kwargs``), plus ``links`` if it
    takes them. Every built-in accepts all its parameters (a test checks it); a plug-in's reference may take
    fewer."""
    sig = inspect.signature(serial).parameters
    var = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values())
    kw = dict(params) if var else {k: v for k, v in params.items() if k in sig}
    if links is not None and ("links" in sig or var):
        kw["links"] = links
    return kw


def flow_from_local(comm, model: Model, neighbours: NDArray[np.int64], flows: NDArray[np.float64]) -> NDArray:
    """Assemble the global flow on ``model.edges`` from every rank's per-neighbour flows (collective).

    The flow of edge (i, j), i < j, is taken from rank i (positive: i sends to j). The allgather itself is the
    testbed's bookkeeping; the round pays it as one gather of ``q`` words when the flow is realised
    (hermes.lifecycle.phase, docs/COSTS.md).
    """
    return edge_values(comm, comm.Get_rank(), neighbours, flows, model.edges, default=0.0)


def _reportable(v: Any) -> bool:
    """A scalar or a string (what summary.json's balance_info holds), not an array or a state object."""
    return isinstance(v, (bool, int, float, str, np.bool_, np.integer, np.floating))


def flow_balancer(distributed: Callable[..., Any], **fixed: Any) -> Callable[[BalanceContext], Decision]:
    """Adapt ``distributed(nb, load, capacity, weights, **params, **fixed) -> LocalFlowResult`` to a balancer.

    ``params`` are passed under their declared names. ``fixed`` are extra keyword arguments computed from
    the context (callables ``ctx -> value``), e.g. ``eps=lambda ctx: epsilon0(ctx.model)`` for quantities
    the thesis assumes known globally. The decision's info reports the scalar values of both and of the
    balancer's own result (``LocalFlowResult.extra``: PCG's residual, GDA's non-negativity, ...); these
    are this rank's values — rank 0's reach summary.json.
    """

    def run(ctx: BalanceContext) -> Decision:
        extra = {k: (v(ctx) if callable(v) else v) for k, v in fixed.items()}
        res = distributed(ctx.nb, ctx.load, ctx.capacity, ctx.weights, **ctx.params, **extra)
        flow = flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, res.flows)
        info = {k: v for k, v in extra.items() if _reportable(v)}
        info.update({k: v for k, v in (res.extra or {}).items() if _reportable(v)})  # e.g. PCG's residual
        return Decision(flow=flow, iterations=res.iterations, converged=res.converged, counters=res.counters,
                        info=info)

    return run
