"""An example of a balancer written outside hermes: first-order diffusion for a fixed number of steps.

Each step every rank exchanges its load with its neighbours and sends ``x_ij = s_ij w_ij (l_i/c_i − l_j/c_j)``
to each neighbour j, with the rate ``s_ij = min(c_i / (δ_i + 1), c_j / (δ_j + 1))`` of thesis eq. 5.6.1
(M¹(1), δ_i the weighted degree), which keeps the iteration stable on any graph. The flows accumulate;
after ``steps`` steps the accumulated flow is the decision. Unlike hermes' ``gda1`` it checks no residual:
no global reduction at all, only neighbour messages.

It plugs into hermes without editing hermes:

- by import path: ``hermes run s.yaml --set balancer.algorithm=fixed_diffusion:FixedStepDiffusion``
  (with this directory on ``PYTHONPATH``);
- by entry point: ``pip install -e examples/custom_balancer`` declares ``fixed_diffusion`` in the group
  ``hermes.balancers`` (see ``pyproject.toml``), then ``--set balancer.algorithm=fixed_diffusion``.

Its parameters live in its own section: ``balancer: {algorithm: fixed_diffusion, fixed_diffusion: {steps: 80}}``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from hermes.balance import BalanceContext, Decision, FlowResult, Model, Params, flow_from_local
from hermes.runtime.comm import Counters


class FixedStepDiffusion:
    """First-order diffusion for a fixed number of neighbour steps (an example plug-in)."""

    class Params(Params):
        steps: int = Field(200, ge=1, le=1_000_000, description="neighbour steps (no residual check)")

    def run(self, ctx: BalanceContext) -> Decision:
        """The SPMD form: ``ctx.nb`` exchanges with the subdomain-graph neighbours."""
        nb, steps = ctx.nb, ctx.params["steps"]
        w = np.asarray(ctx.weights, dtype=np.float64)
        c, load = float(ctx.capacity), float(ctx.load)
        deg = float(w.sum())
        theirs = nb.exchange([np.array([c, deg]) for _ in nb.neighbours])  # one set-up exchange
        cj = np.array([t[0] for t in theirs])
        degj = np.array([t[1] for t in theirs])
        rate = np.minimum(c / (deg + 1.0), cj / (degj + 1.0)) * w
        flows = np.zeros(len(nb.neighbours))
        for _ in range(steps):
            lj = nb.exchange_scalar(load)
            x = rate * (load / c - lj / cj)
            flows += x
            load -= float(x.sum())
        nb.counters.iterations = steps
        flow = flow_from_local(ctx.comm, ctx.model, nb.neighbours, flows)
        fair = ctx.model.capacities * ctx.model.loads.sum()
        residual = float(np.max(np.abs(ctx.model.apply_flow(flow) - fair) / fair))
        return Decision(flow=flow, iterations=steps, counters=nb.counters, info={"steps": steps, "residual": residual})

    def serial(self, model: Model, *, steps: int = 200, links=None) -> FlowResult:
        """The serial reference: the same steps on the whole processor graph (the oracle of the tests)."""
        e, w, c = model.edges, model.weights, model.capacities
        deg = np.bincount(e.ravel(), weights=np.repeat(w, 2), minlength=model.p)
        rate = np.minimum(c[e[:, 0]] / (deg[e[:, 0]] + 1.0), c[e[:, 1]] / (deg[e[:, 1]] + 1.0)) * w
        loads, flow = model.loads.astype(np.float64).copy(), np.zeros(model.q)
        for _ in range(steps):
            x = rate * (loads[e[:, 0]] / c[e[:, 0]] - loads[e[:, 1]] / c[e[:, 1]])
            flow += x
            loads -= np.bincount(e[:, 0], weights=x, minlength=model.p)
            loads += np.bincount(e[:, 1], weights=x, minlength=model.p)
        return FlowResult(flow=flow, iterations=steps, converged=True, counters=Counters(iterations=steps))
