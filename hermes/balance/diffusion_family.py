"""Registry entries of the diffusion family: GDA with M² … M⁶, SOS (ω*, ω_opt), the implicit schemes.

Each entry pairs the serial reference (``serial(model, **params, links=None) -> FlowResult``) with its
distributed form adapted by :func:`~hermes.balance.registry.flow_balancer`. Quantities the thesis
assumes globally known are computed by the adapter from ``ctx.model`` on every rank (deterministic,
so all ranks agree): ε₀ (Cor. 2: edge connectivity, w_min, c_min/c_max), α of M⁶ (spectrum of the
generalized Laplacian), ω* (eq. 7.1.7) and ω_opt (λ_M). The entries ``gda0`` / ``gda1`` (M¹) live in
:mod:`hermes.balance.diffusion`.

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

import functools
import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field

from hermes.balance.diffusion import StopParams, gda, gda_distributed
from hermes.balance.implicit import MAX_SWEEPS, implicit, implicit_distributed
from hermes.balance.interface import (BIG, BalanceContext, Decision, NonNegative, flow_balancer, integer_type,
                                      number_type)
from hermes.balance.model import Model
from hermes.balance.registry import register
from hermes.balance.second_order import omega_opt, omega_star, sos, sos_distributed
from hermes.balance.spectral import elsasser_alpha, epsilon0

__all__ = ["SOSParams", "SOSOptParams", "ImplicitParams", "WattsParams"]


# -- parameter models -----------------------------------------------------------------------------------
def _eps(v: Any) -> Any:
    if v == "eps0" or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= BIG):
        return v
    raise ValueError(f"must be 'eps0' or a number in [0, {BIG:g}], got {v!r}")


#: ε of M¹(ε): ``eps0`` (thesis Cor. 2) or a number in [0, BIG] (added to the degrees: a large ε only slows
#: the diffusion down, and max_iterations bounds the sweeps)
Eps = Annotated[Literal["eps0"] | NonNegative, BeforeValidator(_eps)]



class SOSOptParams(StopParams):
    """Parameters of ``sos_opt``."""

    eps: Eps = Field("eps0", description="ε of M¹(ε): 'eps0' (thesis Cor. 2) or a number ≥ 0")


class SOSParams(SOSOptParams):
    """Parameters of ``sos``."""

    omega: number_type(gt=0, lt=2) | None = Field(None, description="ω in (0, 2) (null: ω*, eq. 7.1.7)")


class WattsParams(StopParams):
    """Parameters of ``implicit_watts``."""

    alpha: number_type(gt=0, le=1e6) = Field(
        1.0, description="implicit step α (≤ 1e6: the inner solve's diagonal 1 + α δ/c must not swamp the loads)")
    inner_tolerance: number_type(gt=0, lt=1) = Field(1e-2, description="inner Jacobi tolerance")
    sweeps: integer_type(ge=0, le=MAX_SWEEPS) | None = Field(
        None, description="inner sweeps per step (null: from inner_tolerance; either way at most "
        f"{MAX_SWEEPS}: each costs a neighbour exchange in every outer step)")


class ImplicitParams(WattsParams):
    """Parameters of ``implicit``."""

    eps: Eps = Field("eps0", description="ε of M¹(ε): 'eps0' (thesis Cor. 2) or a number ≥ 0")


def _eps_value(model: Model, eps) -> float:
    return epsilon0(model) if eps == "eps0" else float(eps)


# -- GDA with M² … M⁶ -------------------------------------------------------------------------------
def _m6_nonnegative(model: Model, alpha: float, lazy: bool) -> bool:
    """Whether M⁶ (or its lazy form) is non-negative: ``min_i 1 − α δ_i^w / c_i ≥ 0``."""
    diag = 1.0 - alpha * model.weighted_degree / model.capacities
    return bool(np.min(0.5 * (1.0 + diag) if lazy else diag) >= -1e-12)


def _register_gda(kind: int, doc: str) -> None:
    fixed: dict[str, Any] = {}
    if kind <= 4:
        fixed["eps"] = lambda ctx: epsilon0(ctx.model)
    if kind == 6:
        fixed["alpha"] = lambda ctx: elsasser_alpha(ctx.model)
    distributed = functools.partial(gda_distributed, kind=kind) if kind <= 4 else \
        functools.partial(gda_distributed, kind=kind, eps=0.0)
    inner = flow_balancer(distributed, **fixed)

    def run(ctx: BalanceContext) -> Decision:
        dec = inner(ctx)
        if kind == 6:
            dec.info["nonnegative"] = _m6_nonnegative(ctx.model, dec.info["alpha"], ctx.params["lazy"])
        return dec

    serial = functools.partial(gda, eps="eps0" if kind <= 4 else 0.0, kind=kind)
    register(f"gda{kind}", params=StopParams, doc=doc, serial=serial)(run)


# -- SOS ---------------------------------------------------------------------------------------------
def _register_sos(name: str, optimal: bool, doc: str) -> None:
    def serial(model, *, eps="eps0", omega=None, links=None, **stop):
        om = "opt" if optimal else ("star" if omega is None else omega)
        return sos(model, eps, omega=om, links=links, **stop)

    def dist(nb, load, capacity, weights, *, eps, eps_value, omega_value, omega=None, **stop):
        return sos_distributed(nb, load, capacity, weights, eps_value, omega_value, **stop)

    def omega_of(ctx: BalanceContext) -> float:
        eps = _eps_value(ctx.model, ctx.params["eps"])
        if optimal:
            return omega_opt(ctx.model, eps, lazy=ctx.params["lazy"])
        given = ctx.params.get("omega")
        return float(given) if given is not None else omega_star(ctx.model, eps, lazy=ctx.params["lazy"])

    run = flow_balancer(dist, eps_value=lambda ctx: _eps_value(ctx.model, ctx.params["eps"]), omega_value=omega_of)
    register(name, params=SOSOptParams if optimal else SOSParams, doc=doc, serial=serial)(run)


# -- implicit schemes ----------------------------------------------------------------------------------
def _register_implicit(name: str, watts: bool, doc: str) -> None:
    def serial(model, *, eps="eps0", links=None, **params):
        return implicit(model, eps, watts=watts, links=links, **params)

    def dist(nb, load, capacity, weights, *, eps_value, eps=None, **params):
        return implicit_distributed(nb, load, capacity, weights, eps_value, watts=watts, **params)

    eps_value = 0.0 if watts else (lambda ctx: _eps_value(ctx.model, ctx.params["eps"]))
    register(name, params=WattsParams if watts else ImplicitParams, doc=doc, serial=serial)(
        flow_balancer(dist, eps_value=eps_value))


_register_gda(2, "generalized diffusion with M²(ε₀) (thesis eq. 5.6.2, JPDC eq. 4.2)")
_register_gda(3, "generalized diffusion with M³(ε₀) (thesis eq. 5.6.3, JPDC eq. 4.3)")
_register_gda(4, "generalized diffusion with M⁴(ε₀) (thesis eq. 5.6.4, JPDC eq. 4.4)")
_register_gda(5, "generalized diffusion with M⁵, the 'bad example' (thesis eq. 5.6.5, JPDC eq. 4.5)")
_register_gda(6, "generalized diffusion with M⁶ of Elsässer et al., α = 2/(μ₂+μ_p) "
                 "(thesis eq. 5.6.6, JPDC eq. 4.6; may be negative, e.g. on stars)")
_register_sos("sos", False, "second-order scheme on M¹(ε) with ω* (thesis Alg. 4, eq. 7.1.7) or a given ω")
_register_sos("sos_opt", True, "second-order scheme on M¹(ε) with ω_opt = 2/(1+√(1−λ²)) (thesis §7.1.2)")
_register_implicit("implicit", False, "generalized implicit diffusion scheme (thesis Alg. 6, eq. 7.2.2)")
_register_implicit("implicit_watts", True, "implicit diffusion of Watts et al., uniform links (thesis Alg. 5)")
