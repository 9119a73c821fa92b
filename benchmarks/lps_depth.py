"""Why lps is not realised at 1,024 processors: the study's processor graph, the product form's measured error, the
polynomial's own conditioning, and two other evaluations of the same polynomial.

    .venv/bin/python -m benchmarks.lps_depth [--cells 1000] [--parts 1024] [--out results/lps_depth.md]

The graph: an n × n grid of cells in ``parts`` METIS parts (pymetis, as the at-scale study's first phase; edge weight:
the cut edges between two parts), homogeneous and with Table 10.6's capacities (the study's three phases). Printed
per case: the distinct eigenvalues, log10 Γ of the discrete Leja order and of the interval's Leja points snapped to
the eigenvalues (:func:`hermes.balance.polynomial.leja.interval_leja_order`), the any-order bound, the order the plan
takes and its trial's relative defect after one sweep (where its bound is ≥ 1), lps' flow error, and ``max log10 |R(μ ± 16 ε μ_max)|`` — the
degree-n polynomial R(μ) = Π (1 − μ/μ_j) at points double precision cannot tell from the eigenvalues: where it is ≫ 0
no backward-stable evaluation can be accurate. For the homogeneous case also the relative defect after 1 and 2 sweeps
of the two-term conjugate-gradient recurrence of the nodes (an evaluation tried before the interval order) (weights μ^e, e = 0…4; its coefficients from Lanczos with
full reorthogonalisation on diag(nodes)): another evaluation of the same polynomial.
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse as sp

from hermes.balance.flow import ordered_total
from hermes.balance.model import Model
from hermes.balance.polynomial.charpoly import NeighbourTables
from hermes.balance.flow import flow_error
from hermes.balance.polynomial.leja import interval_leja_order, leja_order, log_amplification, spectral_plan
from hermes.balance.polynomial.lps import lps

def subdomain_graph(n: int, parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges, weights (cut edges) and cell counts of an n × n grid in ``parts`` METIS parts."""
    import pymetis

    idx = np.arange(n * n).reshape(n, n)
    e = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)])
    a = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n * n, n * n))
    a = (a + a.T).tocsr()
    part = np.asarray(pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(a.indptr, a.indices))[1])
    cut = part[e[:, 0]] != part[e[:, 1]]
    pe, w = np.unique(np.sort(np.stack([part[e[cut, 0]], part[e[cut, 1]]], 1), axis=1), axis=0, return_counts=True)
    return pe, w.astype(float), np.bincount(part, minlength=parts).astype(float)


def subdomain_model(n: int, parts: int, capacities=None) -> Model:
    """The processor graph of an n × n grid of cells in ``parts`` METIS parts (edge weight: the cut edges between
    two parts; loads: the parts' cells times a seeded factor in [0.5, 2)) — the kind of graph the at-scale study
    balances on, at a test's size (tests/balance/test_leja.py). The grid's adjacency is given to METIS as lists in
    edge order (horizontal edges, then vertical), which fixes its partition."""
    import pymetis

    idx = np.arange(n * n).reshape(n, n)
    e = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)])
    adj = [[] for _ in range(n * n)]
    for a, b in e:
        adj[a].append(int(b))
        adj[b].append(int(a))
    part = np.asarray(pymetis.part_graph(parts, adjacency=adj)[1])
    cut = part[e[:, 0]] != part[e[:, 1]]
    pe, w = np.unique(np.sort(np.stack([part[e[cut, 0]], part[e[cut, 1]]], 1), axis=1), axis=0, return_counts=True)
    loads = np.bincount(part, minlength=parts) * np.random.default_rng(1).uniform(0.5, 2.0, parts)
    caps = np.ones(parts) if capacities is None else capacities
    return Model.create(parts, pe, loads, caps, w.astype(float))


def cg_coefficients(nodes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a_k, b_k) of CG on diag(nodes) with the start vector √weights (Lanczos, full reorthogonalisation)."""
    n = len(nodes)
    q = np.zeros((n, n))
    alpha, beta = np.zeros(n), np.zeros(n)
    q[:, 0] = np.sqrt(weights) / np.linalg.norm(np.sqrt(weights))
    for j in range(n):
        v = nodes * q[:, j]
        alpha[j] = q[:, j] @ v
        for _ in range(2):
            v -= q[:, :j + 1] @ (q[:, :j + 1].T @ v)
        if j + 1 < n:
            beta[j + 1] = np.linalg.norm(v)
            q[:, j + 1] = v / beta[j + 1]
    a, b = np.zeros(n), np.zeros(n)
    for j in range(n):
        a[j] = 1.0 / (alpha[j] - (b[j - 1] / a[j - 1] if j else 0.0))
        if j + 1 < n:
            b[j] = (beta[j + 1] * a[j]) ** 2
    return a, b


def cg_defects(model: Model, a: np.ndarray, b: np.ndarray, sweeps: int) -> list[float]:
    """Relative defects after 1 … ``sweeps`` sweeps of the fixed-coefficient recurrence (loads far from balance)."""
    g, c, e = NeighbourTables(model), model.capacities, model.edges
    x0 = model.loads - c * ordered_total(model.loads)
    scale, flow, out = float(np.max(np.abs(x0))), np.zeros(model.q), []
    with np.errstate(all="ignore"):
        for s in range(sweeps):
            r = x0 if s == 0 else g.defect(flow)
            p = r.copy()
            for k in range(len(a)):
                z = p / c
                flow = flow + a[k] * (model.weights * (z[e[:, 0]] - z[e[:, 1]]))
                r = r - a[k] * g.apply(z)
                p = r + b[k] * p
            out.append(float(np.max(np.abs(g.defect(flow)))) / scale)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1000, help="grid side n (n × n cells)")
    ap.add_argument("--parts", type=int, default=1024)
    ap.add_argument("--out", help="also write the Markdown page here (atomically)")
    args = ap.parse_args(argv)
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    from benchmarks.scale import table_schedule

    edges, w, cells = subdomain_graph(args.cells, args.parts)
    p = args.parts
    loads = cells * np.random.default_rng(1).uniform(0.5, 2.0, p)
    cases = [("homogeneous", np.ones(p))] + [(f"Table 10.6 phase {k + 1}", np.asarray(c, dtype=float))
                                             for k, c in enumerate(table_schedule(p, 3))]
    say(f"{args.cells} x {args.cells} cells in {p} METIS parts: {len(edges)} links")
    say("| capacities | distinct eigenvalues | log10 Γ, discrete Leja | log10 Γ, interval Leja | any-order bound | "
        "plan's order | its trial defect, 1 sweep | lps flow error (refine auto) | max log10 of abs R(μ ± 16 ε μ_max) |")
    say("|---|---|---|---|---|---|---|---|---|")
    for name, caps in cases:
        m = Model.create(p, edges, loads, caps, w)
        plan = spectral_plan(m)
        rest = plan.eigenvalues[1:]
        discrete = min(log_amplification(leja_order(plan.nodes, s), rest) for s in ("max", "min"))
        interval = log_amplification(interval_leja_order(plan.nodes), rest)
        trial = f"{plan.trial[0]:.2g}" if plan.trial else "(bound < 1)"
        with np.errstate(all="ignore"):  # the refused cases overflow
            res = lps(m)
        err = f"{flow_error(m, res.flow):.2g}" if res.converged else "refused"
        say(f"| {name} | {plan.steps} | {discrete:.1f} | {interval:.1f} | {plan.log10_lower_bound:.1f} | {plan.order} | "
            f"{trial} | {err} | {plan.log10_condition:.1f} |")
    # the smaller graphs docs/BALANCERS.md quotes: 128 × 128 cells in 256 parts (homogeneous, and capacities drawn
    # uniformly in [1, 2) with seed 5, as tests/balance/test_leja.py), and path:64 with the HCUW capacities
    from hermes.lab.specs import parse_model

    small = [("128 x 128 in 256 parts, homogeneous", subdomain_model(128, 256)),
             ("128 x 128 in 256 parts, capacities in [1, 2)",
              subdomain_model(128, 256, np.random.default_rng(5).uniform(1.0, 2.0, 256))),
             ("path:64 HCUW", parse_model("path:64", "hcuw", "1", "random:1"))]
    say()
    say("| graph | log10 Γ, discrete Leja | log10 Γ, interval Leja | plan's order | its error bound | trial defects |")
    say("|---|---|---|---|---|---|")
    for name, sm in small:
        plan = spectral_plan(sm)
        rest = plan.eigenvalues[1:]
        discrete = min(log_amplification(leja_order(plan.nodes, s), rest) for s in ("max", "min"))
        interval = log_amplification(interval_leja_order(plan.nodes), rest)
        trial = ", ".join(f"{t:.2g}" for t in plan.trial) or "(bound < 1)"
        say(f"| {name} | {discrete:.1f} | {interval:.1f} | {plan.order} | {plan.bound_error:.2g} | {trial} |")
    m = Model.create(p, edges, loads, np.ones(p), w)
    nodes = np.sort(spectral_plan(m).nodes)
    say()
    say("homogeneous, the conjugate-gradient recurrence of the nodes (weights μ^e): relative defect after 1, 2 "
        "sweeps")
    for ex in range(5):
        a, b = cg_coefficients(nodes, nodes ** ex)
        say(f"  e = {ex}: " + ", ".join(f"{d:.2g}" for d in cg_defects(m, a, b, 2)))
    if args.out:
        import platform
        import subprocess

        from hermes.files import write_atomic

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        head = ["# lps at depth: the study's kind of processor graph (benchmarks/lps_depth.py)", "",
                f"Command: `.venv/bin/python -m benchmarks.lps_depth --out {args.out}` (commit {commit or '?'}; "
                f"{platform.node()}, numpy {np.__version__}). Deterministic: METIS' partition, seeded loads.", ""]
        write_atomic(args.out, "\n".join(head + lines) + "\n")


if __name__ == "__main__":
    main()
