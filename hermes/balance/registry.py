"""The balancer interface and the registry of balancers by name.

A balancer is called collectively on every rank with a :class:`BalanceContext` and returns a
:class:`Decision`: either a *flow* on the subdomain graph (diffusion-type and potential methods; the
data layer then selects cells with the gain function and migrates in topological order) or new
*destinations* for the rank's cells (scratch-remap repartitioning). Adding a balancer means writing
one function and one registry entry with its parameters and defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.model import Model
from hermes.comm import Counters, NeighbourComm
from hermes.errors import BalancerError

__all__ = ["BalanceContext", "Decision", "BalancerInfo", "BALANCERS", "get_balancer", "check_params",
           "flow_from_local"]


@dataclass
class BalanceContext:
    """What a balancer may use on this rank.

    ``model`` is the global H = (G, l, c, w) (small: one entry per processor, gathered once per phase);
    ``nb`` exchanges with the subdomain-graph neighbours ``nb.neighbours`` whose edge weights are
    ``weights``; ``dom`` is the rank's cells (for repartitioning methods).
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


@dataclass
class Decision:
    """A balancer's answer: a global ``flow`` on ``model.edges``, or local cell destinations ``dest``."""

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
    ``serial(model, **params) -> FlowResult`` is the serial reference on the whole processor graph
    (the oracle of the tests and the engine of the offline lab ``hermes flow``), None for methods
    that do not compute a flow (``metis``). ``defaults`` lists every accepted parameter.
    """

    name: str
    run: Callable[[BalanceContext], Decision]
    defaults: dict[str, Any]
    doc: str
    serial: Callable[..., Any] | None = None
    #: optional extra validation of the merged parameters; raises BalancerError with one line
    check: Callable[[dict[str, Any]], None] | None = None


def flow_from_local(comm, model: Model, neighbours: NDArray[np.int64], flows: NDArray[np.float64]) -> NDArray:
    """Assemble the global flow on ``model.edges`` from every rank's per-neighbour flows (collective).

    The flow of edge (i, j), i < j, is taken from rank i (positive: i sends to j).
    """
    me = comm.Get_rank()
    mine = {(me, int(j)): float(f) for j, f in zip(neighbours, flows) if me < j}
    allf: dict[tuple[int, int], float] = {}
    for d in comm.allgather(mine):
        allf.update(d)
    return np.array([allf.get((int(i), int(j)), 0.0) for i, j in model.edges], dtype=np.float64)


def flow_balancer(distributed: Callable[..., Any], **fixed: Any) -> Callable[[BalanceContext], Decision]:
    """Adapt ``distributed(nb, load, capacity, weights, **params) -> LocalFlowResult`` to a balancer.

    ``fixed`` are extra keyword arguments computed from the context (callables ``ctx -> value``),
    e.g. ``eps=lambda ctx: epsilon0(ctx.model)`` for quantities the thesis assumes known globally.
    """

    def run(ctx: BalanceContext) -> Decision:
        extra = {k: (v(ctx) if callable(v) else v) for k, v in fixed.items()}
        res = distributed(ctx.nb, ctx.load, ctx.capacity, ctx.weights, **ctx.params, **extra)
        flow = flow_from_local(ctx.comm, ctx.model, ctx.nb.neighbours, res.flows)
        return Decision(flow=flow, iterations=res.iterations, converged=res.converged, counters=res.counters,
                        info={k: v for k, v in extra.items() if isinstance(v, (int, float, str))})

    return run


def _run_none(ctx: BalanceContext) -> Decision:
    return Decision(flow=np.zeros(ctx.model.q), iterations=0, info={"skipped": True})


def _run_metis(ctx: BalanceContext) -> Decision:
    from hermes.balance.scratch import metis_scratch_remap

    return metis_scratch_remap(ctx)


def _core() -> dict[str, BalancerInfo]:
    from hermes.balance.diffusion import epsilon0, gda, gda_distributed
    from hermes.balance.potential import pcg, pcg_distributed

    def pcg_serial(model, *, tolerance=1e-8, max_iterations=None, links=None):
        return pcg(model, tol=tolerance, max_iter=max_iterations, links=links)

    def pcg_dist(nb, load, capacity, weights, *, tolerance, max_iterations, p):
        return pcg_distributed(nb, load, capacity, weights, tol=tolerance, max_iter=max_iterations or 10 * p)

    def gda_entry(name, eps_kind, doc):
        def serial(model, *, tolerance=1e-3, max_iterations=100_000, check_every=1, lazy=False, links=None):
            eps = epsilon0(model) if eps_kind == "eps0" else 1.0
            return gda(model, eps, lazy=lazy, tol=tolerance, max_iter=max_iterations, check_every=check_every,
                       links=links)

        def dist(nb, load, capacity, weights, *, tolerance, max_iterations, check_every, lazy, eps):
            return gda_distributed(nb, load, capacity, weights, eps, lazy=lazy, tol=tolerance, max_iter=max_iterations,
                                   check_every=check_every)

        def check(params):
            if not isinstance(params["lazy"], bool):
                raise BalancerError(f"balancer.lazy: must be true or false, got {params['lazy']!r}")

        eps = (lambda ctx: epsilon0(ctx.model)) if eps_kind == "eps0" else 1.0
        return BalancerInfo(name, flow_balancer(dist, eps=eps),
                            {"tolerance": 1e-3, "max_iterations": 100_000, "check_every": 1, "lazy": False}, doc,
                            serial, check)

    return {
        "none": BalancerInfo("none", _run_none, {}, "no dynamic load balancing"),
        "pcg": BalancerInfo("pcg", flow_balancer(pcg_dist, p=lambda ctx: ctx.model.p),
                            {"tolerance": 1e-8, "max_iterations": None},
                            "method of potentials by conjugate gradients (thesis Alg. 8)", pcg_serial),
        "gda0": gda_entry("gda0", "eps0", "generalized diffusion with M¹(ε₀) (thesis Alg. 3, eq. 5.6.1, Cor. 2)"),
        "gda1": gda_entry("gda1", "one", "generalized diffusion with M¹(1) (thesis Alg. 3, eq. 5.6.1)"),
        "metis": BalancerInfo("metis", _run_metis, {"targets": "fair", "ufactor": 30},
                              "METIS from scratch, remapped to keep cells home (targets fair | equal)"),
    }


#: modules that contribute a ``REGISTRY: dict[str, BalancerInfo]`` of their own balancers
FAMILY_MODULES: tuple[str, ...] = (
    "hermes.balance.diffusion_family",  # gda2..gda6, lazy variants, SOS, implicit schemes
    "hermes.balance.polynomial",        # LPS / LPA, MPA
    "hermes.balance.incremental",       # AdA
    "hermes.balance.practical",         # Jeannot–Vernier practical FOS
    "hermes.balance.gossip",            # Grapevine
    "hermes.balance.scotch",            # Scotch adaptive repartitioning
    "hermes.balance.hybrid",            # auto: MPA / LPA / PCG chosen from the topology
)


def _build() -> dict[str, BalancerInfo]:
    import importlib

    out = _core()
    for mod in FAMILY_MODULES:
        reg = getattr(importlib.import_module(mod), "REGISTRY")
        dup = set(reg) & set(out)
        if dup:
            raise RuntimeError(f"balancer names registered twice: {sorted(dup)}")
        out.update(reg)
    return out


class _Registry(dict):
    """``BALANCERS``: built on first use so that importing hermes stays cheap and cycle-free."""

    def _fill(self) -> None:
        if not super().__len__():
            super().update(_build())

    def __getitem__(self, k):
        self._fill()
        return super().__getitem__(k)

    def __contains__(self, k):
        self._fill()
        return super().__contains__(k)

    def __iter__(self):
        self._fill()
        return super().__iter__()

    def __len__(self):
        self._fill()
        return super().__len__()

    def items(self):
        self._fill()
        return super().items()

    def keys(self):
        self._fill()
        return super().keys()

    def values(self):
        self._fill()
        return super().values()


BALANCERS: dict[str, BalancerInfo] = _Registry()


def get_balancer(name: str) -> BalancerInfo:
    try:
        return BALANCERS[name]
    except KeyError:
        raise BalancerError(f"unknown balancer {name!r}; valid: {', '.join(sorted(BALANCERS))}") from None


def check_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Merge ``params`` over the balancer's defaults; reject unknown or bad values (one line)."""
    info = get_balancer(name)
    unknown = sorted(set(params) - set(info.defaults))
    if unknown:
        valid = ", ".join(sorted(info.defaults)) or "none"
        raise BalancerError(f"balancer.{unknown[0]}: unknown parameter for '{name}' (valid: {valid})")
    out = {**info.defaults, **params}
    if "tolerance" in out and not (isinstance(out["tolerance"], (int, float)) and 0 < out["tolerance"] < 1):
        raise BalancerError(f"balancer.tolerance: must be a number in (0, 1), got {out['tolerance']!r}")
    for key in ("max_iterations", "check_every"):
        v = out.get(key)
        if key in out and v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise BalancerError(f"balancer.{key}: must be a positive integer, got {v!r}")
    if "targets" in out and out["targets"] not in ("fair", "equal"):
        raise BalancerError(f"balancer.targets: must be 'fair' or 'equal', got {out['targets']!r}")
    if "ufactor" in out and not (isinstance(out["ufactor"], int) and 1 <= out["ufactor"] <= 1000):
        raise BalancerError(f"balancer.ufactor: must be an integer in 1..1000, got {out['ufactor']!r}")
    if info.check is not None:
        info.check(out)
    return out
