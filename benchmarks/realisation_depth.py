"""Realising a flow at depth: the literal realisation against ``realisation: adaptive`` (docs/BALANCERS.md).

For every small case — an nx×ny grid, p METIS subdomains (at least 10 cells each), the cells of the band
start ≤ x < start + 0.2 (x scaled to [0, 1]) weighted ``factor`` — the minimal balancing flow is realised
once by the serial replay (:func:`hermes.balance.realisation.realise.simulate_realisation`, gain selection, exact
ghosts), literally and with the corrections of ``select_adaptive``; printed: the imbalance before, after the
literal round and after the adaptive one, then how many cases end above 1.2 and where adaptive is worse.
Deterministic (METIS seed 0); about a minute::

    .venv/bin/python -m benchmarks.realisation_depth
"""

from __future__ import annotations

import itertools

import numpy as np

from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.realisation.realise import RealiseOptions, SubdomainFlow, simulate_realisation
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.metrics import imbalance


def case(nx: int, ny: int, p: int, start: float, factor: float) -> tuple[float, float, float]:
    """(before, literal, adaptive) imbalance of one case."""
    m = grid(nx, ny)
    x = m.coords[:, 0]
    x = (x - x.min()) / (x.max() - x.min())
    owner = metis_partition(m.xadj, m.adjncy, None, p, seed=0)
    w = np.where((x >= start) & (x < start + 0.2), factor, 1.0)
    loads = np.bincount(owner, weights=w, minlength=p)
    src, dst = np.repeat(owner, np.diff(m.xadj)), owner[m.adjncy]
    pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)], 1)[src != dst], axis=0)
    model = Model.create(p, pairs, loads, np.ones(p))
    flow = minimal_flow(model)
    out = []
    for adaptive in (False, True):
        new, _ = simulate_realisation(m.xadj, m.adjncy, m.coords, w, owner, SubdomainFlow(model.edges, flow),
                                      RealiseOptions("gain", adaptive=adaptive))
        out.append(imbalance(np.bincount(new, weights=w, minlength=p), np.ones(p)))
    return imbalance(loads, np.ones(p)), out[0], out[1]


def main() -> None:
    rows = []
    print("| nx | ny | p | band at | factor | before | literal | adaptive |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nx, ny, p, start, factor in itertools.product([40, 60, 80], [30, 45, 60], [32, 64, 128], [0.1, 0.3],
                                                      [2.0, 4.0]):
        if nx * ny < 10 * p:
            continue
        before, lit, ada = case(nx, ny, p, start, factor)
        rows.append((lit, ada))
        print(f"| {nx} | {ny} | {p} | {start} | {factor:g} | {before:.3f} | {lit:.3f} | {ada:.3f} |", flush=True)
    lit, ada = np.array(rows).T
    print(f"\n{len(rows)} cases; above 1.2: literal {int((lit > 1.2).sum())}, adaptive {int((ada > 1.2).sum())}; "
          f"adaptive worse in {int((ada > lit).sum())}, better in {int((ada < lit).sum())}")


if __name__ == "__main__":
    main()
