"""Registry entries of the diffusion family: GDA with M² … M⁶, SOS (ω*, ω_opt), the implicit schemes.

Each entry pairs the serial reference (``serial(model, **params, links=None) -> FlowResult``) with its
distributed form adapted by :func:`~hermes.balance.registry.flow_balancer`. Quantities the thesis
assumes globally known are computed by the adapter from ``ctx.model`` on every rank (deterministic,
so all ranks agree): ε₀ (Cor. 2: edge connectivity, w_min, c_min/c_max), α of M⁶ (spectrum of the
generalized Laplacian), ω* (eq. 7.1.7) and ω_opt (λ_M). The entries ``gda0`` / ``gda1`` (M¹) live in
:mod:`hermes.balance.registry`.

============== ============================================== =========================================
name           method                                          parameters besides tolerance,
                                                               max_iterations, check_every, lazy
============== ============================================== =========================================
gda2 … gda4    GDA with M^k(ε₀) (thesis eq. 5.6.2–5.6.4)       —
gda5           GDA with M⁵ (eq. 5.6.5, the "bad example")      —
gda6           GDA with M⁶ (eq. 5.6.6, Elsässer et al.)        — (info ``nonnegative``: False on e.g. stars)
sos            SOS on M¹(ε) with ω* (Alg. 4, eq. 7.1.7)        eps ("eps0"), omega (None: ω*)
sos_opt        SOS on M¹(ε) with ω_opt                         eps ("eps0")
implicit       generalized implicit scheme (Alg. 6)            eps ("eps0"), alpha (1), inner_tolerance
                                                               (0.01), sweeps (None: from inner_tolerance)
implicit_watts Watts et al.'s implicit scheme (Alg. 5)         alpha (1), inner_tolerance, sweeps
============== ============================================== =========================================
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hermes.balance.diffusion import elsasser_alpha, epsilon0, gda, gda_distributed
from hermes.balance.implicit import implicit, implicit_distributed
from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext, BalancerInfo, Decision, flow_balancer
from hermes.balance.second_order import omega_opt, omega_star, sos, sos_distributed
from hermes.errors import BalancerError

__all__ = ["REGISTRY"]

_STOP = {"tolerance": 1e-3, "max_iterations": 100_000, "check_every": 1, "lazy": False}


# -- parameter checks (registry ``check`` hooks; one-line BalancerError) ---------------------------
def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_lazy(params: dict[str, Any]) -> None:
    if not isinstance(params["lazy"], bool):
        raise BalancerError(f"balancer.lazy: must be true or false, got {params['lazy']!r}")


def _check_eps(params: dict[str, Any]) -> None:
    eps = params["eps"]
    if not (eps == "eps0" or (_number(eps) and eps >= 0)):
        raise BalancerError(f"balancer.eps: must be 'eps0' or a number ≥ 0, got {eps!r}")


def _check_sos(params: dict[str, Any]) -> None:
    _check_lazy(params)
    _check_eps(params)
    om = params.get("omega")
    if om is not None and not (_number(om) and 0 < om < 2):
        raise BalancerError(f"balancer.omega: must be a number in (0, 2), got {om!r}")


def _check_implicit(params: dict[str, Any]) -> None:
    _check_lazy(params)
    if "eps" in params:
        _check_eps(params)
    if not (_number(params["alpha"]) and params["alpha"] > 0):
        raise BalancerError(f"balancer.alpha: must be a number > 0, got {params['alpha']!r}")
    it = params["inner_tolerance"]
    if not (_number(it) and 0 < it < 1):
        raise BalancerError(f"balancer.inner_tolerance: must be a number in (0, 1), got {it!r}")
    sw = params["sweeps"]
    if sw is not None and not (isinstance(sw, int) and not isinstance(sw, bool) and sw >= 0):
        raise BalancerError(f"balancer.sweeps: must be an integer ≥ 0 (or null: from inner_tolerance), got {sw!r}")


def _eps_value(model: Model, eps) -> float:
    return epsilon0(model) if eps == "eps0" else float(eps)


# -- GDA with M² … M⁶ -------------------------------------------------------------------------------
def _m6_nonnegative(model: Model, alpha: float, lazy: bool) -> bool:
    """Whether M⁶ (or its lazy form) is non-negative: ``min_i 1 − α δ_i^w / c_i ≥ 0``."""
    diag = 1.0 - alpha * model.weighted_degree / model.capacities
    return bool(np.min(0.5 * (1.0 + diag) if lazy else diag) >= -1e-12)


def _gda_entry(kind: int, doc: str) -> BalancerInfo:
    eps_kind = "eps0" if kind <= 4 else 0.0

    def serial(model, *, tolerance=1e-3, max_iterations=100_000, check_every=1, lazy=False, links=None):
        return gda(model, eps_kind, kind=kind, lazy=lazy, tol=tolerance, max_iter=max_iterations,
                   check_every=check_every, links=links)

    def dist(nb, load, capacity, weights, *, tolerance, max_iterations, check_every, lazy, eps=0.0, alpha=None):
        return gda_distributed(nb, load, capacity, weights, eps, kind=kind, lazy=lazy, alpha=alpha, tol=tolerance,
                               max_iter=max_iterations, check_every=check_every)

    fixed: dict[str, Any] = {}
    if kind <= 4:
        fixed["eps"] = lambda ctx: epsilon0(ctx.model)
    if kind == 6:
        fixed["alpha"] = lambda ctx: elsasser_alpha(ctx.model)
    run = flow_balancer(dist, **fixed)
    if kind == 6:
        inner = run

        def run(ctx: BalanceContext) -> Decision:
            dec = inner(ctx)
            dec.info["nonnegative"] = _m6_nonnegative(ctx.model, dec.info["alpha"], ctx.params["lazy"])
            return dec

    return BalancerInfo(f"gda{kind}", run, dict(_STOP), doc, serial, _check_lazy)


# -- SOS ---------------------------------------------------------------------------------------------
def _sos_entry(name: str, optimal: bool, doc: str) -> BalancerInfo:
    defaults = {**_STOP, "eps": "eps0"} if optimal else {**_STOP, "eps": "eps0", "omega": None}

    def serial(model, *, tolerance=1e-3, max_iterations=100_000, check_every=1, lazy=False, eps="eps0",
               omega=None, links=None):
        om = "opt" if optimal else ("star" if omega is None else omega)
        return sos(model, eps, omega=om, lazy=lazy, tol=tolerance, max_iter=max_iterations,
                   check_every=check_every, links=links)

    def dist(nb, load, capacity, weights, *, tolerance, max_iterations, check_every, lazy, eps, eps_value,
             omega_value, omega=None):
        return sos_distributed(nb, load, capacity, weights, eps_value, omega_value, lazy=lazy, tol=tolerance,
                               max_iter=max_iterations, check_every=check_every)

    def omega_of(ctx: BalanceContext) -> float:
        eps = _eps_value(ctx.model, ctx.params["eps"])
        if optimal:
            return omega_opt(ctx.model, eps, lazy=ctx.params["lazy"])
        given = ctx.params.get("omega")
        return float(given) if given is not None else omega_star(ctx.model, eps, lazy=ctx.params["lazy"])

    run = flow_balancer(dist, eps_value=lambda ctx: _eps_value(ctx.model, ctx.params["eps"]), omega_value=omega_of)
    return BalancerInfo(name, run, defaults, doc, serial, _check_sos)


# -- implicit schemes ----------------------------------------------------------------------------------
def _implicit_entry(name: str, watts: bool, doc: str) -> BalancerInfo:
    defaults = {**_STOP, "alpha": 1.0, "inner_tolerance": 1e-2, "sweeps": None}
    if not watts:
        defaults["eps"] = "eps0"

    def serial(model, *, tolerance=1e-3, max_iterations=100_000, check_every=1, lazy=False, eps="eps0", alpha=1.0,
               inner_tolerance=1e-2, sweeps=None, links=None):
        return implicit(model, eps, watts=watts, alpha=alpha, lazy=lazy, inner_tol=inner_tolerance, sweeps=sweeps,
                        tol=tolerance, max_iter=max_iterations, check_every=check_every, links=links)

    def dist(nb, load, capacity, weights, *, tolerance, max_iterations, check_every, lazy, alpha, inner_tolerance,
             sweeps, eps_value, eps=None):
        return implicit_distributed(nb, load, capacity, weights, eps_value, watts=watts, alpha=alpha, lazy=lazy,
                                    inner_tol=inner_tolerance, sweeps=sweeps, tol=tolerance, max_iter=max_iterations,
                                    check_every=check_every)

    eps_value = 0.0 if watts else (lambda ctx: _eps_value(ctx.model, ctx.params["eps"]))
    return BalancerInfo(name, flow_balancer(dist, eps_value=eps_value), defaults, doc, serial, _check_implicit)


REGISTRY: dict[str, BalancerInfo] = {
    "gda2": _gda_entry(2, "generalized diffusion with M²(ε₀) (thesis eq. 5.6.2, JPDC eq. 4.2)"),
    "gda3": _gda_entry(3, "generalized diffusion with M³(ε₀) (thesis eq. 5.6.3, JPDC eq. 4.3)"),
    "gda4": _gda_entry(4, "generalized diffusion with M⁴(ε₀) (thesis eq. 5.6.4, JPDC eq. 4.4)"),
    "gda5": _gda_entry(5, "generalized diffusion with M⁵, the 'bad example' (thesis eq. 5.6.5, JPDC eq. 4.5)"),
    "gda6": _gda_entry(6, "generalized diffusion with M⁶ of Elsässer et al., α = 2/(μ₂+μ_p) "
                          "(thesis eq. 5.6.6, JPDC eq. 4.6; may be negative, e.g. on stars)"),
    "sos": _sos_entry("sos", False, "second-order scheme on M¹(ε) with ω* (thesis Alg. 4, eq. 7.1.7) or a given ω"),
    "sos_opt": _sos_entry("sos_opt", True, "second-order scheme on M¹(ε) with ω_opt = 2/(1+√(1−λ²)) (thesis §7.1.2)"),
    "implicit": _implicit_entry("implicit", False, "generalized implicit diffusion scheme (thesis Alg. 6, eq. 7.2.2)"),
    "implicit_watts": _implicit_entry("implicit_watts", True,
                                      "implicit diffusion of Watts et al., uniform links (thesis Alg. 5)"),
}
