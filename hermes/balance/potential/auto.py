"""``auto``: pick the product-form polynomial scheme, Chebyshev diffusion or PCG from the spectrum.

The thesis concludes (§8.6, ch. 11) that the topology decides among the fast methods: few messages
(MPA, LPA) on sparse graphs, PCG on dense graphs of small diameter. With the spectrum of the generalized
Laplacian at hand (:mod:`hermes.balance.polynomial.leja`, reused while the graph is unchanged) ``auto`` decides
with what it costs and what double precision allows:

* ``lps`` and ``lpa`` (eigen forms, Leja order): n neighbour steps (n distinct non-zero eigenvalues);
  ``lps`` repeats them for each of its r refinement sweeps, ``lpa`` exchanges rows of p words and
  refines with one allgather per sweep; candidates only if the predicted flow error
  ``SpectralPlan.predicted_error_after(r)`` is ≤ 1e-10 for some r ≤ 3 (``refine: auto``) — not on
  heterogeneous meshes and long heterogeneous paths, where the amplification Γ of any order of the
  eigenvalues exceeds what double precision absorbs;
* ``chebyshev`` (exact bounds): ``k = ⌈acosh(1/τ)/acosh(σ)⌉`` neighbour steps, τ = 1e-10 (always accurate);
* ``pcg``: min(n, k) iterations (CG needs no more iterations than distinct eigenvalues, and its
  error bound is Chebyshev's; CG often converges sooner), each one exchange and two allreduces.

The cost is the α-β time of each method's communication schedule on uniform default links
(:class:`hermes.runtime.clock.Links`: α = 100 µs, 100 MB/s; an exchange of w words costs α + 8w/bw, a
collective ⌈log2 p⌉ (α + 8w/bw), as :func:`hermes.balance.flow.alpha_beta_time` charges them). The
fewest wins; on ties the order above. Above ``SPECTRUM_LIMIT`` processors (no dense spectrum) ``auto``
runs PCG. The choice depends only
on the global model, so every rank makes the same one without communicating.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse.csgraph as csg

import hermes.balance.potential.pcg  # noqa: F401  (registers pcg, which auto may choose)
from hermes.balance.diffusion.chebyshev import bounds_from_spectrum, chebyshev_schedule, chebyshev_steps
from hermes.balance.interface import BalanceContext, Decision
from hermes.balance.model import Model
from hermes.balance.polynomial.leja import (SPECTRUM_LIMIT, SpectralPlan, charged_plan, leja_schedule, resolve_refine,
                                           serial_spectrum, spectral_plan, spectrum_report)
from hermes.balance.polynomial.lps import lpa_eigen_schedule
from hermes.balance.registry import BALANCERS, register
from hermes.runtime.clock import Links

__all__ = ["Choice", "choice", "choose", "schedule_time", "graph_characteristics", "CHOSEN_PARAMS"]

#: the flow accuracy ``auto`` asks of Chebyshev (and the polynomial scheme's refinement target)
AUTO_TOLERANCE = 1e-10
#: parameters of each method when ``auto`` runs it (``lps``'s refine is set per model; chebyshev's exact bounds
#: read the spectrum auto computed to choose)
CHOSEN_PARAMS: dict[str, dict[str, Any]] = {"pcg": {"tolerance": AUTO_TOLERANCE}, "lps": {"refine": "auto"},
                                            "lpa": {"refine": "auto"}, "mpa": {"refine": "auto"},
                                            "chebyshev": {"tolerance": AUTO_TOLERANCE, "bounds": "exact"}}


@dataclass(frozen=True)
class Choice:
    """What ``auto`` runs: the balancer ``name`` with ``params``, why, and the estimated cost of each candidate."""

    name: str
    params: dict[str, Any]
    reason: str
    costs: dict[str, float] = field(default_factory=dict)


def graph_characteristics(model: Model) -> dict[str, Any]:
    """p, diameter, maximum degree and density γ of the processor graph (thesis Table 8.7)."""
    p = model.p
    if p == 1:
        return {"p": 1, "diameter": 0, "max_degree": 0, "density": 1.0}
    dist = csg.shortest_path(model.laplacian != 0, unweighted=True, directed=False)
    return {"p": p, "diameter": int(np.max(dist)), "max_degree": int(model.degree.max()),
            "density": 2.0 * model.q / (p * (p - 1))}


def schedule_time(p: int, schedule: list, links: Links | None = None) -> float:
    """α-β time of a communication ``schedule`` ``[(repeat, [(kind, words), …]), …]`` on uniform links."""
    links = links or Links()
    total = 0.0
    for repeat, block in schedule:
        for kind, words in block:
            one = links.latency + 8.0 * words / links.bandwidth
            total += repeat * (one if kind == "exchange" else links.collective_cost(p, 8.0 * words))
    return total


def _pcg_schedule(iterations: int) -> list:
    return [(1, [("allreduce", 2), ("allreduce", 1), ("allreduce", 1)]),
            (iterations, [("exchange", 1), ("allreduce", 1), ("allreduce", 1)]), (1, [("exchange", 1)])]


def choice(model: Model, plan: SpectralPlan | None = None) -> Choice:
    """The method ``auto`` runs on ``model`` (see the module docstring); ``plan`` if already computed."""
    p = model.p
    if p == 1:
        return Choice("pcg", CHOSEN_PARAMS["pcg"], "one processor")
    if p > SPECTRUM_LIMIT:
        return Choice("pcg", CHOSEN_PARAMS["pcg"], f"p = {p} > {SPECTRUM_LIMIT}: no dense spectrum")
    plan = spectral_plan(model) if plan is None else plan

    n = plan.steps
    a, b = bounds_from_spectrum(plan.eigenvalues)  # what chebyshev's exact bounds compute
    w = model.weights
    k = chebyshev_steps(a, b, AUTO_TOLERANCE, float(w.max() / w.min()))
    costs: dict[str, float] = {}
    r = resolve_refine(plan, "auto")
    err = plan.predicted_error_after(r)
    if err <= AUTO_TOLERANCE:
        costs["lps"] = schedule_time(p, leja_schedule(p, n, r))
        costs["lpa"] = schedule_time(p, lpa_eigen_schedule(p, n, r))
    costs["chebyshev"] = schedule_time(p, chebyshev_schedule(p, k))
    n_cg = min(n, k)
    costs["pcg"] = schedule_time(p, _pcg_schedule(n_cg))
    name = min(costs, key=lambda m: (costs[m], list(costs).index(m)))
    params = {"coefficients": "eigen", "refine": r} if name in ("lps", "lpa") else CHOSEN_PARAMS[name]
    why = {"lps": f"Leja product form accurate (predicted error {err:.1e} with refine {r}): {(r + 1) * n} steps",
           "lpa": f"Leja rows accurate (predicted error {err:.1e} with refine {r}): {n} steps, {r + 1} allgathers",
           "chebyshev": f"Chebyshev diffusion, κ = {b / a:.3g}: {k} steps without reductions",
           "pcg": f"PCG: ≤ {n_cg} iterations of 1 exchange + 2 allreduces"}[name]
    if "lps" not in costs:
        why += f" (polynomial scheme inaccurate: predicted error {err:.1e}, log10 Γ = " \
               f"{plan.log10_amplification:.1f})"
    return Choice(name, params, why, costs)


def choose(model: Model) -> tuple[str, str]:
    """``(name, reason)`` of :func:`choice`."""
    c = choice(model)
    return c.name, c.reason


def _serial(model: Model, *, links=None, **params):
    c = choice(model)
    # the spectrum auto decided by is charged below, once: Chebyshev's exact bounds reuse it
    res = BALANCERS[c.name].flow(model, links=links, **({**c.params, "spectrum": "free"} if c.name == "chebyshev"
                                                        else c.params))
    if c.name not in ("lps", "lpa") and model.p <= SPECTRUM_LIMIT:  # the spectrum auto decided by is charged too
        plan = spectral_plan(model)
        res.counters, times, spent = serial_spectrum(res.counters, (res.extra or {}).get("rank_times"), model,
                                                     len(plan.nodes), links, "charged", plan.extra_units)
        res.extra = {**(res.extra or {}), **spent, "rank_times": times}
    res.extra = {**(res.extra or {}), "auto_choice": c.name, "auto_reason": c.reason, "auto_costs": c.costs}
    return res


@register("auto", serial=_serial,
          doc="hybrid: Leja polynomial scheme, Chebyshev diffusion or PCG, the cheapest accurate one by the spectrum "
              "(docs/BALANCERS.md)")
def _run(ctx: BalanceContext) -> Decision:
    c = choice(ctx.model, charged_plan(ctx) if 1 < ctx.model.p <= SPECTRUM_LIMIT else None)
    info = BALANCERS[c.name]
    decision = info.run(replace(ctx, params=info.check(c.params)))
    # the spectrum auto computed is charged once, here (lps and lpa then reuse it and report it)
    spent = spectrum_report(ctx) if "spectrum_report" in ctx.state or "spectrum" not in decision.info else {}
    decision.info = {**decision.info, **spent, "auto_choice": c.name, "auto_reason": c.reason}
    return decision
