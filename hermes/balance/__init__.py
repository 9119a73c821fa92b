"""Dynamic load balancing: the model H = (G, l, c, w), the balancers, and how a flow becomes cell moves.

The balancers live in one subpackage per family — ``diffusion`` (gda0 … gda6, sos, implicit, chebyshev, fos),
``polynomial`` (lps, lpa, mpa, ada), ``potential`` (pcg, mincost, auto), ``gossip`` (grapevine) and
``repartition`` (none, metis, scotch) — each in the module named after it (``hermes.balance.potential.pcg``),
which registers it in :data:`BALANCERS` where it defines it; ``realisation`` turns a flow into cell moves. The
registry knows every built-in name (:data:`hermes.balance.registry.BUILTIN`) and imports a balancer's module
the first time it is looked up, so importing this package imports no balancer. The interface a balancer
implements is in :mod:`hermes.balance.interface`; the registry and the plug-in mechanism (entry points, import
paths) in :mod:`hermes.balance.registry`. The names below, and the subpackages (``hermes.balance.potential``,
...), are imported on first use (PEP 562).

The package itself is callable — ``hermes.balance(model, "pcg", tolerance=1e-10)`` is
:func:`balance` — so the public verb and the subpackage share one name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes.balance.flow import FlowResult
    from hermes.balance.model import Model

__all__ = ["Model", "minimal_flow", "topological_order", "FlowResult", "LocalFlowResult", "BALANCERS",
           "BalanceContext", "BalancerInfo", "Decision", "Params", "flow_balancer", "flow_from_local",
           "get_balancer", "check_params", "register", "all_balancers", "balance"]

#: the public names and the module that defines each, imported on first use
_LAZY = {
    **dict.fromkeys(("FlowResult", "LocalFlowResult", "minimal_flow", "topological_order"), "hermes.balance.flow"),
    **dict.fromkeys(("BalanceContext", "BalancerInfo", "Decision", "Params", "flow_balancer", "flow_from_local"),
                    "hermes.balance.interface"),
    "Model": "hermes.balance.model",
    **dict.fromkeys(("BALANCERS", "all_balancers", "check_params", "get_balancer", "register"),
                    "hermes.balance.registry"),
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # a submodule: hermes.balance.potential
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def balance(model: Model, algorithm: str = "pcg", *, links=None, **params) -> FlowResult:
    """The balancing flow of ``model`` computed by ``algorithm``'s serial reference.

    Parameters
    ----------
    model : Model
        The processor graph H = (G, l, c, w) (:meth:`Model.create`).
    algorithm : str
        A balancer with a serial reference (``hermes balancers``), an entry point or an import path.
    links : hermes.runtime.clock.Links, optional
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

    Examples
    --------
    Six units of load on the first of three processors in a line: 4 cross the first edge, 2 the second.

    >>> import hermes
    >>> model = hermes.Model.create(3, [(0, 1), (1, 2)], loads=[6, 0, 0], capacities=[1, 1, 1])
    >>> res = hermes.balance(model, "pcg", tolerance=1e-12)
    >>> res.flow.round(12).tolist(), res.converged
    ([4.0, 2.0], True)
    >>> model.apply_flow(res.flow).round(12).tolist()
    [2.0, 2.0, 2.0]
    >>> hermes.balance(model, "gda0", tolerance=1e-6).converged
    True
    >>> hermes.balance(model, "pgc")
    Traceback (most recent call last):
    ...
    hermes.errors.BalancerError: unknown balancer 'pgc'...
    """
    from hermes.balance.registry import get_balancer

    return get_balancer(algorithm).flow(model, links=links, **params)


class _CallablePackage(types.ModuleType):
    def __call__(self, model: Model, algorithm: str = "pcg", *, links=None, **params) -> FlowResult:
        return balance(model, algorithm, links=links, **params)


sys.modules[__name__].__class__ = _CallablePackage
