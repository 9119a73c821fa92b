"""``auto``: pick MPA, LPA or PCG from the subdomain graph's size, diameter, degree and density.

The thesis concludes (§8.6, ch. 11) that the topology decides among the fast methods: MPA for low
degree and large diameter, LPA in between, PCG for dense graphs of small diameter. hermes' measurements
(``docs/BALANCERS.md``, produced by ``benchmarks/auto_rule.py``) refine this with what double
precision allows: the polynomial methods evaluate a degree-p polynomial of the Laplacian and lose
accuracy as p grows — even with two refinement steps, MPA beyond p = 5 and LPA beyond p ≈ 12
on general graphs — while PCG stays exact.
The rule, with p processors, diameter D, maximum degree Δ and density γ = 2|E| / (p (p − 1)):

1. ``D == 1`` (complete graph) → PCG (2 iterations);
2. ``D ≤ 2`` and (``Δ ≥ p / 2`` or ``γ ≥ 0.5``) → PCG (star-like or dense: few distinct eigenvalues);
3. ``4 ≤ p ≤ 5`` → MPA (fewest messages; with two refinement steps its worst relative flow error
   over 180 random instances per size was 1e-15 at p = 4, 5 but 1.0 at p = 3 and 4e6 at p = 6);
4. ``p ≤ 12`` → LPA (with two refinement steps);
5. otherwise → PCG.

The choice depends only on the global model, so every rank makes the same one without communicating.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse.csgraph as csg

import hermes.balance.polynomial  # noqa: F401  (registers the methods auto chooses from)
import hermes.balance.potential  # noqa: F401
from hermes.balance.interface import BalanceContext, Decision
from hermes.balance.model import Model
from hermes.balance.registry import BALANCERS, register

__all__ = ["choose", "graph_characteristics", "CHOSEN_PARAMS"]

MPA_MIN_P, MPA_MAX_P = 4, 5
LPA_MAX_P = 12
#: parameters of the chosen method: two steps of iterative refinement keep LPA / MPA at ~1e-15 up to
#: their thresholds (one is not enough for LPA at p = 10–11: errors ~1e-7)
CHOSEN_PARAMS: dict[str, dict[str, Any]] = {"pcg": {}, "lpa": {"refine": 2}, "mpa": {"refine": 2}}


def graph_characteristics(model: Model) -> dict[str, Any]:
    """p, diameter, maximum degree and density γ of the processor graph (thesis Table 8.7)."""
    p = model.p
    if p == 1:
        return {"p": 1, "diameter": 0, "max_degree": 0, "density": 1.0}
    dist = csg.shortest_path(model.laplacian != 0, unweighted=True, directed=False)
    return {"p": p, "diameter": int(np.max(dist)), "max_degree": int(model.degree.max()),
            "density": 2.0 * model.q / (p * (p - 1))}


def choose(model: Model) -> tuple[str, str]:
    """The method ``auto`` runs on ``model`` and the rule that chose it (see module docstring)."""
    g = graph_characteristics(model)
    p, d, dmax, gamma = g["p"], g["diameter"], g["max_degree"], g["density"]
    if d <= 1:
        return "pcg", "complete graph"
    if d <= 2 and (dmax >= p / 2 or gamma >= 0.5):
        return "pcg", f"small diameter {d} and dense (Δ = {dmax}, γ = {gamma:.2f})"
    if MPA_MIN_P <= p <= MPA_MAX_P:
        return "mpa", f"sparse, {MPA_MIN_P} ≤ p = {p} ≤ {MPA_MAX_P}"
    if p <= LPA_MAX_P:
        return "lpa", f"sparse, p = {p} ≤ {LPA_MAX_P}"
    return "pcg", f"p = {p} > {LPA_MAX_P}: polynomial methods lose accuracy"


def _serial(model: Model, *, links=None, **params):
    name, why = choose(model)
    res = BALANCERS[name].serial(model, links=links, **CHOSEN_PARAMS[name])
    res.extra = {**(res.extra or {}), "auto_choice": name, "auto_reason": why}
    return res


@register("auto", serial=_serial,
          doc="hybrid: MPA, LPA or PCG chosen from p, diameter, degree and density (thesis §8.6, ch. 11; "
              "thresholds measured, see docs/BALANCERS.md)")
def _run(ctx: BalanceContext) -> Decision:
    name, why = choose(ctx.model)
    info = BALANCERS[name]
    inner = replace(ctx, params=info.check(CHOSEN_PARAMS[name]))
    decision = info.run(inner)
    decision.info = {**decision.info, "auto_choice": name, "auto_reason": why}
    return decision
