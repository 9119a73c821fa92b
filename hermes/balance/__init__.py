"""Dynamic load balancing: the model H = (G, l, c, w), the balancers and cell selection."""

from hermes.balance.flow import FlowResult, LocalFlowResult, minimal_flow, topological_order
from hermes.balance.model import Model, imbalance
from hermes.balance.registry import BALANCERS, Decision, get_balancer

__all__ = ["Model", "imbalance", "minimal_flow", "topological_order", "FlowResult", "LocalFlowResult",
           "BALANCERS", "Decision", "get_balancer"]
