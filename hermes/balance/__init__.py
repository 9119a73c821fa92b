"""Dynamic load balancing: the model H = (G, l, c, w), the balancers, and how a flow becomes cell moves.

Importing this package registers every built-in balancer in :data:`BALANCERS` (each family module
registers its own). The interface a balancer implements is in :mod:`hermes.balance.interface`; the
registry and the plug-in mechanism (entry points, import paths) in :mod:`hermes.balance.registry`.

The package itself is callable — ``hermes.balance(model, "pcg", tolerance=1e-10)`` is
:func:`balance` — so the public verb and the subpackage share one name.
"""

import sys
import types

from hermes.balance import (  # noqa: F401  (the families register their balancers on import)
    chebyshev,
    diffusion,
    diffusion_family,
    gossip,
    hybrid,
    incremental,
    mincost,
    polynomial,
    potential,
    practical,
    scotch,
    scratch,
)
from hermes.balance.flow import FlowResult, LocalFlowResult, minimal_flow, topological_order
from hermes.balance.interface import BalanceContext, BalancerInfo, Decision, Params, flow_balancer, flow_from_local
from hermes.balance.model import Model
from hermes.balance.registry import BALANCERS, all_balancers, check_params, get_balancer, register

__all__ = ["Model", "minimal_flow", "topological_order", "FlowResult", "LocalFlowResult", "BALANCERS",
           "BalanceContext", "BalancerInfo", "Decision", "Params", "flow_balancer", "flow_from_local",
           "get_balancer", "check_params", "register", "all_balancers", "balance"]


def balance(model: Model, algorithm: str = "pcg", *, links=None, **params) -> FlowResult:
    """The balancing flow of ``model`` computed by ``algorithm``'s serial reference.

    Parameters
    ----------
    model : Model
        The processor graph H = (G, l, c, w) (:meth:`Model.create`).
    algorithm : str
        A balancer with a serial reference (``hermes balancers``), an entry point or an import path.
    links : hermes.clock.Links, optional
        If given, ``counters.time`` is the α-β time the distributed form would be charged.
    **params
        The balancer's parameters (validated against its parameter model).

    Returns
    -------
    FlowResult
        ``flow`` on ``model.edges`` (``flow[k] > 0`` moves load from ``edges[k, 0]`` to ``edges[k, 1]``),
        ``iterations``, ``converged``, ``counters`` (messages, bytes, collectives, modelled time), ``extra``.

    Raises
    ------
    BalancerError
        Unknown balancer, one without a flow (``metis``), or a bad parameter.
    """
    return get_balancer(algorithm).flow(model, links=links, **params)


class _CallablePackage(types.ModuleType):
    def __call__(self, model: Model, algorithm: str = "pcg", *, links=None, **params) -> FlowResult:
        return balance(model, algorithm, links=links, **params)


sys.modules[__name__].__class__ = _CallablePackage
