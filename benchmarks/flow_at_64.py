"""The flow computation at 64 processors (issue 10): PCG against the eigen-form LPA / MPA, Chebyshev and auto.

α-β time under the default links (α = 100 µs, 100 MB/s) and relative flow error of each serial reference on
paths, rings and the METIS subdomain graphs of the thesis' Table 10.1 meshes, homogeneous and HCUW, load ONE.
Prints the Markdown table of docs/BALANCERS.md.

    nice -n 10 .venv/bin/python benchmarks/flow_at_64.py [P]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hermes.balance.flow import flow_error
from hermes.balance.registry import BALANCERS, check_params
from hermes.runtime.clock import Links
from hermes.lab.bench import _table101_graph
from hermes.lab.specs import parse_model

METHODS = [("PCG", "pcg", {"tolerance": 1e-8}), ("LPA", "lpa", {}), ("MPA", "mpa", {}),
           ("Chebyshev", "chebyshev", {}), ("auto", "auto", {})]


def measure(p: int) -> list[dict]:
    """One row per (graph, environment): each method's α-β time (seconds) and relative flow error."""
    rows = []
    for topo in ("path", "ring", "SD_whitaker", "SD_airfoil", "SD_grid20x19", "SD_3elt"):
        graph = _table101_graph(topo, p)
        if graph is None:
            continue
        for env, caps in (("HOMO", "homo"), ("HCUW", "hcuw")):
            model = parse_model(graph, caps, "1", "one")
            row = {"graph": topo, "env": env, "methods": {}}
            for label, name, params in METHODS:
                res = BALANCERS[name].serial(model, **check_params(name, params), links=Links())
                row["methods"][label] = {"time": res.counters.time, "error": flow_error(model, res.flow),
                                         "choice": res.extra["auto_choice"] if name == "auto" else None}
            rows.append(row)
            print(f"# {topo} {env}", file=sys.stderr, flush=True)
    return rows


def markdown(p: int, rows: list[dict]) -> str:
    """The table of docs/BALANCERS.md: time (flow error[, auto's choice]) per method."""
    lines = [f"| graph (p = {p}) | env | " + " | ".join(m for m, _, _ in METHODS) + " |",
             "|---" * (len(METHODS) + 2) + "|"]
    for r in rows:
        cells = []
        for label, _, _ in METHODS:
            m = r["methods"][label]
            choice = f", {m['choice']}" if m["choice"] else ""
            cells.append(f"{1e3 * m['time']:.1f} ms ({m['error']:.0e}{choice})")
        lines.append(f"| {r['graph']} | {r['env']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("p", type=int, nargs="?", default=64, help="processors (default 64)")
    ap.add_argument("--cache", type=Path, help="also write the figures to this JSON cache (results/)")
    a = ap.parse_args(argv)
    rows = measure(a.p)
    print(markdown(a.p, rows))
    if a.cache:
        from benchmarks import cache

        cache.write(a.cache, "flow_at_64", cache.command_line("benchmarks.flow_at_64", argv), {"p": a.p, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
