"""Dynamic load balancing: the model H = (G, l, c, w), the balancers, and how a flow becomes cell moves.

Importing this package registers every built-in balancer in :data:`BALANCERS` (each family module
registers its own). The interface a balancer implements is in :mod:`hermes.balance.interface`; the
registry and the plug-in mechanism (entry points, import paths) in :mod:`hermes.balance.registry`.
"""

from hermes.balance import (  # noqa: F401  (the families register their balancers on import)
    diffusion,
    diffusion_family,
    gossip,
    hybrid,
    incremental,
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
           "get_balancer", "check_params", "register", "all_balancers"]
