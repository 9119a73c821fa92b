"""The bulk kernels' shared input check (hermes.balance.flow.bulk_inputs): one processor's bad input fails every
processor of the process with that processor's one-line error, as agree_local_inputs does per processor."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.balance.diffusion.chebyshev import chebyshev_bulk
from hermes.balance.polynomial.leja import leja_bulk, spectral_plan
from hermes.balance.potential.pcg import pcg_bulk
from hermes.balance.registry import check_params
from hermes.errors import GraphError
from hermes.lab.specs import parse_model
from hermes.runtime.clock import Links
from hermes.runtime.start import start
from tests.mpi.harness import RankView

MODEL = parse_model("mesh:2x3", "hcuw", "1", "random:1")
NODES = spectral_plan(MODEL).nodes
KERNELS = {
    "leja": lambda ctx, w: leja_bulk(ctx.nb, ctx.load, ctx.capacity, w, NODES),
    "chebyshev": lambda ctx, w: chebyshev_bulk(ctx.nb, ctx.load, ctx.capacity, w, a=0.1, b=10.0, steps=5),
    "pcg": lambda ctx, w: pcg_bulk(ctx.nb, ctx.load, ctx.capacity, w),
}


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_one_processors_bad_weight_fails_every_processor_with_its_message(kernel):
    run = KERNELS[kernel]

    def body(comm):
        ctx = RankView.of(comm, MODEL, Links()).context(check_params("pcg", {}), state={})
        w = np.array(ctx.weights, dtype=float)
        good = run(ctx, w)
        if comm.Get_rank() == 1:
            w[0] = -1.0
        try:
            run(ctx, w)
        except GraphError as err:
            return bool(np.all(np.isfinite(good.flows))), str(err)
        return bool(np.all(np.isfinite(good.flows))), None

    got = start(MODEL.p, body)  # 6 processors hosted by this process: the bulk kernel runs once for all
    assert all(got[r] == (True, "rank 1: edge weights must be positive") for r in range(MODEL.p))
