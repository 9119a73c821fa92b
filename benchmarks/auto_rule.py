"""Measure PCG, the eigen-form LPS / LPA / MPA and Chebyshev diffusion (α-β time under the default links,
relative flow error) on the topologies of thesis Table 8.7 and on meshes, and score the `auto` rule against
the fastest *accurate* method (flow error < 1e-8). Prints a table and a summary line.

    .venv/bin/python -m benchmarks.auto_rule
"""

from __future__ import annotations

import warnings

from hermes.balance.potential.auto import CHOSEN_PARAMS, choose
from hermes.runtime.clock import Links
from hermes.lab.bench import TABLE_8_7, _table87
from hermes.lab.flow_lab import flow_lab
from hermes.lab.specs import parse_model

warnings.filterwarnings("ignore")
ACCURATE = 1e-8


def measure(graph: str, links: Links) -> dict[str, tuple[float, float]]:
    out = {}
    for a in ("pcg", "lps", "lpa", "mpa", "chebyshev"):
        try:
            r = flow_lab(graph, "hcuw", "1", "random:1", a, links=links, params=CHOSEN_PARAMS[a])
            out[a] = (r["time"], r["flow_error"])
        except Exception:  # a coefficient breakdown is reported as a BalancerError: not accurate
            out[a] = (float("inf"), float("inf"))
    return out


def main() -> int:
    links = Links()
    graphs = [_table87(t, p) for t in TABLE_8_7 for p in (4, 5, 6, 8, 10, 12, 16, 24, 32, 64)]
    graphs += [f"mesh:{r}x{c}" for r, c in ((2, 3), (3, 3), (3, 4), (4, 4), (4, 6), (8, 8), (12, 12))]
    graphs = [g for g in graphs if g]
    hits, worse, inaccurate = 0, [], 0
    print(f"{'graph':22s} {'auto':>9s} {'best':>9s} {'t_auto/t_best':>13s}  reason")
    for g in graphs:
        m = measure(g, links)
        ok = {a: t for a, (t, e) in m.items() if e < ACCURATE}
        best = min(ok, key=ok.get)
        pick, why = choose(parse_model(g, "hcuw", "1", "random:1"))
        t_pick, e_pick = m[pick]
        if e_pick >= ACCURATE:
            inaccurate += 1
        ratio = t_pick / ok[best]
        hits += pick == best
        if pick != best:
            worse.append(ratio)
        print(f"{g:22s} {pick:>9s} {best:>9s} {ratio:13.2f}  {why}")
    n = len(graphs)
    print(f"auto picked the fastest accurate method on {hits}/{n} graphs; otherwise within "
          f"{max(worse, default=1.0):.2f}x of it (median {sorted(worse)[len(worse) // 2] if worse else 1.0:.2f}x); "
          f"inaccurate picks: {inaccurate}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
