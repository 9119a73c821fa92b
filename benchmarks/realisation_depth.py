"""Realising a flow at depth: the literal realisation against ``realisation: adaptive`` (docs/BALANCERS.md).

For every small case — an nx×ny grid, p METIS subdomains (at least 10 cells each), the cells of the band
start ≤ x < start + 0.2 (x scaled to [0, 1]) weighted ``factor`` — the minimal balancing flow is realised
once by the serial replay (:func:`hermes.balance.realisation.realise.simulate_realisation`, gain selection, exact
ghosts), literally and with the corrections of ``select_adaptive``; printed: the imbalance before, after the
literal round and after the adaptive one, then how many cases end above 1.2 and where adaptive is worse.
Deterministic (METIS seed 0); about a minute::

    .venv/bin/python -m benchmarks.realisation_depth

``--study P`` replays, serially, the first balancing of the at-scale study's run (benchmarks/scale.py: grid1000x1000,
the quickstart front, homogeneous capacities) at P processors: the run's own phase-1 partition and weights (one
``hermes run`` with ``balancer: none`` records them), then ``--rounds`` rounds of the l2-minimal flow realised by the
serial replay (adaptive gain selection, exact ghosts). Per round it prints the imbalance after, the flow's levels,
its largest through-flow (half the |flow| on a subdomain's edges) over that subdomain's load, the weight the flow
moves against the weight that changed owner, and the weight handed over *detached*: cells a rank received at a level
that are connected, within its new subdomain, to none of the cells it held before that level — weight it can pass
on only to targets those cells happen to touch (docs/design/depth.md §3)::

    .venv/bin/python -m benchmarks.realisation_depth --study 1024 --rounds 3
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

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
    model = subdomain_model(m.xadj, m.adjncy, owner, w, p)
    loads = model.loads
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


def study_state(p: int) -> tuple[dict, NDArray[np.int64], NDArray[np.float64]]:
    """(geometry, owner, weights) before the first balancing of the at-scale study's run at ``p`` processors."""
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    import yaml

    from benchmarks.scale import scenario
    from hermes.interpreter import child_env, python_command

    sc = scenario("grid1000x1000", "none", ranks=p, capacities="homo", kind="weights", iterations=1, phases=1)
    sc["output"] = {"pictures": False, "partitions": True}
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="hermes-depth-") as tmp:
        (Path(tmp) / "sc.yaml").write_text(yaml.safe_dump(sc, sort_keys=False))
        env = child_env({**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")})
        subprocess.run(python_command("-m", "hermes", "run", str(Path(tmp) / "sc.yaml"), "--no-launch", "--quiet",
                                      "--no-pictures", "--out", str(Path(tmp) / "run")), check=True, env=env, cwd=root)
        with np.load(Path(tmp) / "run" / "geometry.npz") as g, np.load(Path(tmp) / "run" / "partitions.npz") as z:
            geo = {k: g[k] for k in ("xadj", "adjncy", "coords")}
            return geo, z["owner_000"].astype(np.int64), z["weight_001"]


def subdomain_model(xadj, adjncy, owner, w, p: int) -> Model:
    """The subdomain graph of ``owner`` with homogeneous capacities and unit edge weights."""
    src, dst = np.repeat(owner, np.diff(xadj)), owner[adjncy]
    pairs = np.unique(np.stack([src, dst], 1)[src < dst], axis=0)
    return Model.create(p, pairs, np.bincount(owner, weights=w, minlength=p), np.ones(p))


def detached_weight(xadj, adjncy, w, before, after) -> float:
    """The weight of the cells that changed owner in components of their new owner's subdomain (``after``) that
    hold none of the cells that owner had in ``before``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = before.size
    src = np.repeat(np.arange(n), np.diff(xadj))
    same = after[src] == after[adjncy]
    g = csr_matrix((np.ones(int(same.sum())), (src[same], adjncy[same])), shape=(n, n))
    _, label = connected_components(g, directed=False)
    anchored = np.zeros(label.max() + 1, dtype=bool)
    anchored[label[before == after]] = True
    moved = before != after
    return float(w[moved & ~anchored[label]].sum())


def study(p: int, rounds: int) -> None:
    """Print the study's first balancing at ``p`` processors round by round (module docstring)."""
    geo, owner, w = study_state(p)
    xadj, adjncy, coords = geo["xadj"], geo["adjncy"], geo["coords"]
    start = owner.copy()
    caps = np.ones(p)
    print(f"grid1000x1000, {p} processors, imbalance before {imbalance(np.bincount(owner, weights=w, minlength=p), caps):.4f}")
    print("| round | imbalance after | levels | max through-flow / load | flow Σ|f| | weight moved | "
          "detached weight | cells moved (round) | cells moved (from start) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in range(1, rounds + 1):
        model = subdomain_model(xadj, adjncy, owner, w, p)
        flow = minimal_flow(model)
        through = 0.5 * (np.bincount(model.edges[:, 0], weights=np.abs(flow), minlength=p)
                         + np.bincount(model.edges[:, 1], weights=np.abs(flow), minlength=p))
        levels, detached = [], [0.0]

        def observe(k, before, after):
            levels.append(k)
            detached[0] += detached_weight(xadj, adjncy, w, before, after)

        new, _ = simulate_realisation(xadj, adjncy, coords, w, owner, SubdomainFlow(model.edges, flow),
                                      observe=observe)
        moved = new != owner
        print(f"| {r} | {imbalance(np.bincount(new, weights=w, minlength=p), caps):.4f} | {len(levels)} | "
              f"{float((through / model.loads).max()):.2f} | {float(np.abs(flow).sum()):,.0f} | "
              f"{float(w[moved].sum()):,.0f} | {detached[0]:,.0f} | {int(moved.sum()):,} | "
              f"{int((new != start).sum()):,} |", flush=True)
        owner = new


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", type=int, default=None, help="processors of the at-scale study's first balancing")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.study is None:
        main()
    else:
        study(args.study, args.rounds)
