"""A plug-in balancer for tests/mpi/test_trigger_run.py: every round of the first phase makes the imbalance worse
(half of a rank's cells go to the most loaded rank), later phases take METIS scratch-remap's decision."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hermes.balance import Decision, get_balancer


class WorseFirst:
    """Fails in phase 1 (moves cells to the most loaded rank), METIS afterwards."""

    def run(self, ctx) -> Decision:
        if ctx.round == 0:
            ctx.state["phase"] = ctx.state.get("phase", 0) + 1
        if ctx.state["phase"] == 1:
            me, n, m = ctx.comm.Get_rank(), ctx.dom.n, ctx.model
            top = int(np.argmax(m.loads / m.capacities))  # the same on every rank
            dest = np.full(n, me, dtype=np.int64)
            if me == (top + 1) % m.p:
                dest[: n // 2] = top
            return Decision(dest=dest, info={"worse": True})
        metis = get_balancer("metis")
        return metis.run(replace(ctx, params=metis.check({})))
