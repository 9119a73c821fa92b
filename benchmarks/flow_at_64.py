"""The flow computation at 64 processors (issue 10): PCG against the eigen-form LPA / MPA, Chebyshev and auto.

α-β time under the default links (α = 100 µs, 100 MB/s) and relative flow error of each serial reference on
paths, rings and the METIS subdomain graphs of the thesis' Table 10.1 meshes, homogeneous and HCUW, load ONE.
Prints the Markdown table of docs/BALANCERS.md.

    nice -n 10 .venv/bin/python benchmarks/flow_at_64.py [P]
"""

from __future__ import annotations

import sys

from hermes.balance.flow import flow_error
from hermes.balance.registry import BALANCERS, check_params
from hermes.clock import Links
from hermes.lab.bench import _table101_graph
from hermes.lab.specs import parse_model

METHODS = [("PCG", "pcg", {"tolerance": 1e-8}), ("LPA", "lpa", {}), ("MPA", "mpa", {}),
           ("Chebyshev", "chebyshev", {}), ("auto", "auto", {})]


def main(p: int = 64) -> int:
    print(f"| graph (p = {p}) | env | " + " | ".join(m for m, _, _ in METHODS) + " |")
    print("|---" * (len(METHODS) + 2) + "|")
    for topo in ("path", "ring", "SD_whitaker", "SD_airfoil", "SD_grid20x19", "SD_3elt"):
        graph = _table101_graph(topo, p)
        if graph is None:
            continue
        for env, caps in (("HOMO", "homo"), ("HCUW", "hcuw")):
            model = parse_model(graph, caps, "1", "one")
            cells = []
            for _, name, params in METHODS:
                res = BALANCERS[name].serial(model, **check_params(name, params), links=Links())
                choice = f", {res.extra['auto_choice']}" if name == "auto" else ""
                cells.append(f"{1e3 * res.counters.time:.1f} ms ({flow_error(model, res.flow):.0e}{choice})")
            print(f"| {topo} | {env} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 64))
