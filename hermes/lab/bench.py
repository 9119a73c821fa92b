"""hermes lab bench: regenerate the families of the published figures with the serial references.

Three families:

``diffusion``
    Iterations versus p of GDA0, GDA1, GDA6 and SOS on paths, 2-D meshes (4 × p/4), 2-D tori
    (4 × p/4) and partial binary trees, in the environments HOMO (homogeneous), HCUW (speed ∝
    r mod 4 + 1, unit weights) and HCHW (same speeds, edge weight (i + j) mod 3 + 1), with the load
    distributions ONE, EQ, HIGH and HALF — JPDC Figs. 1–18, thesis Tables 5.1–5.3.
``polynomial``
    PCG versus LPA versus MPA on the topologies of thesis Table 8.7 (path, ring, binary and quaternary
    tree, star, wheel, complete bipartite, complete) for p = 4 … 16: iterations, neighbour-exchange
    rounds, collectives and the α-β time of each — thesis Figs. 8.12–8.29 (which report measured
    times; hermes reports the modelled time of the same communication pattern).

``table10.1``
    GDA1, PCG, LPA and MPA — the thesis' literal forms (Faddeev–LeVerrier, Berlekamp–Massey) and the
    eigen / spectrum forms in Leja order — and Chebyshev diffusion on the topologies of thesis Table 10.1
    at 16 processors: path, ring, star and the METIS subdomain graphs of whitaker, airfoil, grid20x19 and
    (shock is not available; 3elt from Table 10.2 stands in) with the ONE load (all but one processor at
    1, one at 500 p: "a highly imbalanced load distribution"), HOMO and HCUW: α-β time under the default
    links, iterations, exchanges, collectives and the flow error of each (thesis Table 10.1 reports
    measured seconds on 16 PCs; hermes the modelled time of the same communication pattern).

Each family writes a CSV (one row per run) and PNG plots; all files are written atomically.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from hermes.balance.model import Model
from hermes.claims import claim_dir
from hermes.files import write_csv
from hermes.lab.flow_lab import check_flow_cost
from hermes.lab.specs import build_model, parse_graph, parse_model
from hermes.runtime.clock import BalancePrices, Links

__all__ = ["diffusion_family", "polynomial_family", "table101_family", "flow_bench", "ENVIRONMENTS", "FAMILIES",
           "TABLE_10_1"]

#: the families :func:`flow_bench` knows, in the order it runs them
FAMILIES = ("diffusion", "polynomial", "table10.1")

#: environment name -> (capacities spec, weights spec), JPDC §4
ENVIRONMENTS = {"HOMO": ("homo", "1"), "HCUW": ("hcuw", "1"), "HCHW": ("hcuw", "ijmod3")}
DIFFUSION_ALGORITHMS = ("gda0", "gda1", "gda6", "sos")
POLYNOMIAL_ALGORITHMS = ("pcg", "lpa", "mpa")


def _topology(kind: str, p: int) -> str | None:
    if kind == "path":
        return f"path:{p}"
    if kind in ("mesh", "torus"):
        return f"{kind}:4x{p // 4}" if p % 4 == 0 and p >= 8 else None
    if kind == "tree":
        return f"tree:2:{p}"
    raise ValueError(kind)


def _priced_call(model: Model, balancer: str, links: Links | None = None,
                prices: BalancePrices | None = None) -> tuple[Links, float]:
    """The links one call of ``balancer`` on ``model`` is charged with, and its set-up price (s).

    Without ``prices``: ``links`` (default: the default links) and no set-up. With a profile's ``prices``: what
    a run's clock adds to one balancing call on the same graph (:meth:`hermes.runtime.clock.VirtualClock.balancing`,
    thesis §8.6): the links priced for the graph's maximum degree and diameter, and the balancer's set-up.

    Notes
    -----
    Links without a ``collective_latency`` (the default links) get their own tree cost ``⌈log2 p⌉ α`` as one, which
    charges every collective exactly as before, so the allreduce-hop price has a latency to add to.
    """
    links = links or Links()
    if prices is None:
        return links, 0.0
    if links.collective_latency is None and model.p > 1:
        links = Links(links.latency, links.bandwidth, links.overrides,
                      collective_latency=math.ceil(math.log2(model.p)) * links.latency)
    return prices.links(links, int(model.degree.max()), model.diameter), prices.setup_of(balancer)


def _run(graph: str, caps: str, weights: str, loads: str, algorithm: str, tol: float, links: Links | None,
         prices: BalancePrices | None = None):
    """One serial run, its tolerance checked by the balancer's model and its size by the flow lab's bounds; its
    links and set-up priced by :func:`_priced_call`."""
    from hermes.balance.registry import BALANCERS, check_params

    info = BALANCERS[algorithm]
    params = {"tolerance": tol} if "tolerance" in info.defaults else {}
    pg = parse_graph(graph)
    check_flow_cost(graph, pg.p, pg.q, check_params(algorithm, params, prefix="tol "))
    model = build_model(pg, caps, weights, loads)
    call, setup = _priced_call(model, algorithm, links, prices)
    t = time.perf_counter()
    res = info.serial(model, **params, links=call)
    return model, res, setup, time.perf_counter() - t


def diffusion_family(ps: Iterable[int], *, topologies=("path", "mesh", "torus", "tree"),
                     environments=tuple(ENVIRONMENTS), loads=("one", "eq", "high", "half"),
                     algorithms=DIFFUSION_ALGORITHMS, tol: float = 1e-3) -> list[dict[str, Any]]:
    """One row per (topology, p, environment, load, algorithm): iterations and convergence factor."""
    rows = []
    for topo in topologies:
        for p in ps:
            graph = _topology(topo, p)
            if graph is None:
                continue
            for env in environments:
                caps, weights = ENVIRONMENTS[env]
                for load in loads:
                    for alg in algorithms:
                        model, res, _, wall = _run(graph, caps, weights, load, alg, tol, None)
                        rows.append({"family": "diffusion", "topology": topo, "graph": graph, "p": model.p,
                                     "environment": env, "loads": load.upper(), "algorithm": alg,
                                     "iterations": res.iterations, "converged": res.converged,
                                     "convergence_factor": res.convergence_factor, "wall_seconds": wall})
    return rows


#: Table 8.7 topologies as graph specs for p processors
def _table87(kind: str, p: int) -> str | None:
    return {"path": f"path:{p}", "ring": f"ring:{p}", "binary tree": f"tree:2:{p}",
            "quaternary tree": f"tree:4:{p}", "star": f"star:{p}", "wheel": f"wheel:{p}" if p >= 4 else None,
            "complete bipartite": f"bipartite:{p // 2}x{p - p // 2}", "complete": f"complete:{p}"}[kind]


TABLE_8_7 = ("path", "ring", "binary tree", "quaternary tree", "star", "wheel", "complete bipartite", "complete")


def polynomial_family(ps: Iterable[int], *, topologies=TABLE_8_7, algorithms=POLYNOMIAL_ALGORITHMS,
                      loads: str = "random:1", links: Links | None = None,
                      prices: BalancePrices | None = None) -> list[dict[str, Any]]:
    """One row per (topology, p, algorithm): iterations, rounds, collectives and α-β time.

    ``links`` and ``prices`` charge each call as in :func:`table101_family` (``time`` includes the set-up).
    """
    rows = []
    for topo in topologies:
        for p in ps:
            graph = _table87(topo, p)
            if graph is None:
                continue
            for alg in algorithms:
                model, res, setup, wall = _run(graph, "hcuw", "1", loads, alg, 1e-10, links, prices)
                c = res.counters
                deg = model.degree
                rows.append({"family": "polynomial", "topology": topo, "graph": graph, "p": model.p,
                             "diameter": model.diameter, "max_degree": int(deg.max()),
                             "connectivity": 2 * model.q / (model.p * (model.p - 1)), "algorithm": alg,
                             "iterations": res.iterations, "exchange_rounds": c.exchange_rounds,
                             "collectives": int(sum(c.collectives.values())), "messages": c.messages,
                             "bytes": c.bytes, "time": c.time + setup, "wall_seconds": wall})
    return rows


#: thesis Table 10.1 topologies at p processors (shock is not available: 3elt of Table 10.2 stands in)
TABLE_10_1 = {"path": "path:{p}", "ring": "ring:{p}", "star": "star:{p}",
              "SD_whitaker": "mesh-file:{shared}/whitaker3.mtx:{p}", "SD_airfoil": "mesh-file:{meshes}/airfoil.vtu:{p}",
              "SD_grid20x19": "mesh-file:{meshes}/grid20x19.vtu:{p}", "SD_3elt": "mesh-file:{meshes}/3elt.vtu:{p}"}
#: label -> (balancer, parameters): the thesis' four methods, literal and stable, and Chebyshev
TABLE_10_1_METHODS = {
    "GDA": ("gda1", {"tolerance": 1e-2}),
    "PCG": ("pcg", {"tolerance": 1e-8}),
    "LPA": ("lpa", {"coefficients": "eigen", "refine": "auto"}),
    "MPA": ("mpa", {"polynomial": "spectrum", "refine": "auto"}),
    "LPA thesis": ("lpa", {"coefficients": "faddeev", "refine": 0}),
    "MPA thesis": ("mpa", {"polynomial": "berlekamp-massey", "refine": 0}),
    "Chebyshev": ("chebyshev", {"tolerance": 1e-8}),
}


def _table101_graph(name: str, p: int) -> str | None:
    root = Path(__file__).resolve().parents[2]
    spec = TABLE_10_1[name].format(p=p, meshes=root / "meshes", shared=root.parent / "shared" / "meshes")
    if spec.startswith("mesh-file:"):
        path = spec[len("mesh-file:"):].rsplit(":", 1)[0]
        # a clone elsewhere than beside ../shared names the third-party meshes by HERMES_SHARED_MESHES
        shared = Path(os.environ.get("HERMES_SHARED_MESHES", root.parent / "shared" / "meshes")) / Path(path).name
        if not Path(path).exists():
            if not shared.exists():
                return None
            spec = f"mesh-file:{shared}:{p}"
    return spec


def table101_family(p: int = 16, *, topologies=tuple(TABLE_10_1), environments=("HOMO", "HCUW"),
                    methods=tuple(TABLE_10_1_METHODS), links: Links | None = None,
                    prices: BalancePrices | None = None) -> list[dict[str, Any]]:
    """One row per (topology, environment, method) of thesis Table 10.1: α-β time, counts and flow error.

    ``links`` (default: the default links) charge the balancers' messages; ``prices`` (a platform profile's,
    :meth:`hermes.sections.PlatformProfile.prices`) add what a run's clock adds to one balancing call on the same
    graph (:meth:`hermes.runtime.clock.VirtualClock.balancing`): the set-up, and the links priced for its maximum
    degree and diameter.

    The GDA flow is compared with the minimal flow too, although GDA1 converges to the flow of its own
    matrix (docs/BALANCERS.md): its ``flow_error`` is informative only; ``imbalance`` is the final one.
    """
    from hermes.balance.flow import flow_error
    from hermes.balance.registry import BALANCERS, check_params

    rows = []
    for topo in topologies:
        graph = _table101_graph(topo, p)
        if graph is None:
            continue
        for env in environments:
            caps, weights = ENVIRONMENTS[env]
            model = parse_model(graph, caps, weights, "one")
            for label in methods:
                name, params = TABLE_10_1_METHODS[label]
                call, setup = _priced_call(model, name, links, prices)
                t = time.perf_counter()
                res = BALANCERS[name].serial(model, **check_params(name, params), links=call)
                wall = time.perf_counter() - t
                c = res.counters
                final = model.apply_flow(res.flow)
                rows.append({"family": "table10.1", "topology": topo, "graph": graph, "p": model.p, "q": model.q,
                             "environment": env, "method": label, "algorithm": name, "iterations": res.iterations,
                             "exchange_rounds": c.exchange_rounds, "collectives": int(sum(c.collectives.values())),
                             "messages": c.messages, "max_degree": int(model.degree.max()),
                             "edges": len(model.edges), "diameter": model.diameter,
                             "time": c.time + setup, "flow_error": flow_error(model, res.flow),
                             "imbalance": float(np.max(final / model.fair_loads)),
                             "predicted_error": (res.extra or {}).get("predicted_error"), "wall_seconds": wall})
    return rows


def _plot_table101(rows, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    from hermes.viz.partition_picture import save_figure

    envs = [e for e in ENVIRONMENTS if any(r["environment"] == e for r in rows)]
    topos = [t for t in TABLE_10_1 if any(r["topology"] == t for r in rows)]
    methods = [m for m in TABLE_10_1_METHODS if any(r["method"] == m for r in rows)]
    fig = Figure(figsize=(11, 3.2 * len(envs)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(envs), 1, squeeze=False)[:, 0])
    width = 0.8 / max(len(methods), 1)
    for ax, env in zip(axes, envs):
        for k, meth in enumerate(methods):
            ts = [next((1e3 * r["time"] for r in rows if (r["topology"], r["environment"], r["method"])
                        == (t, env, meth)), np.nan) for t in topos]
            ax.bar(np.arange(len(topos)) + k * width, ts, width, label=meth)
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(topos)) + 0.4 - width / 2, topos, fontsize="small")
        ax.set_ylabel("α-β time [ms]", fontsize="small")
        ax.set_title(env, fontsize="small")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize="x-small", ncol=len(methods))
    fig.suptitle("thesis Table 10.1 on 16 processors (modelled α-β time)",
                 fontsize="medium")
    return [save_figure(fig, out / "table-10.1.png")]


def _plot_diffusion(rows, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    from hermes.viz.partition_picture import save_figure

    paths = []
    for topo in sorted({r["topology"] for r in rows}):
        envs = [e for e in ENVIRONMENTS if any(r["environment"] == e and r["topology"] == topo for r in rows)]
        loads = sorted({r["loads"] for r in rows if r["topology"] == topo})
        fig = Figure(figsize=(3.2 * len(loads), 2.6 * len(envs)), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(envs), len(loads), squeeze=False))
        for i, env in enumerate(envs):
            for j, load in enumerate(loads):
                ax = axes[i, j]
                for alg in sorted({r["algorithm"] for r in rows}):
                    sel = [r for r in rows if (r["topology"], r["environment"], r["loads"], r["algorithm"])
                           == (topo, env, load, alg)]
                    if sel:
                        ax.plot([r["p"] for r in sel], [r["iterations"] for r in sel], marker="o", ms=3, label=alg)
                ax.set_title(f"{env}-{load}", fontsize="small")
                ax.set_xlabel("p", fontsize="small")
                ax.set_ylabel("iterations", fontsize="small")
                ax.grid(alpha=0.3)
        axes[0, 0].legend(fontsize="x-small")
        fig.suptitle(f"iterations of diffusion schemes on {_plural(topo)} (JPDC Figs. 1-18)", fontsize="medium")
        paths.append(save_figure(fig, out / f"diffusion-{topo}.png"))
    return paths


def _plot_polynomial(rows, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    from hermes.viz.partition_picture import save_figure

    topos = [t for t in TABLE_8_7 if any(r["topology"] == t for r in rows)]
    cols = 4
    nrow = -(-len(topos) // cols)
    fig = Figure(figsize=(3.2 * cols, 2.6 * nrow), layout="constrained")
    axes = np.atleast_2d(fig.subplots(nrow, cols, squeeze=False))
    for k, topo in enumerate(topos):
        ax = axes[k // cols, k % cols]
        for alg in POLYNOMIAL_ALGORITHMS:
            sel = [r for r in rows if r["topology"] == topo and r["algorithm"] == alg]
            if sel:
                ax.plot([r["p"] for r in sel], [1e3 * r["time"] for r in sel], marker="o", ms=3, label=alg)
        ax.set_title(topo, fontsize="small")
        ax.set_xlabel("p", fontsize="small")
        ax.set_ylabel("α-β time [ms]", fontsize="small")
        ax.grid(alpha=0.3)
    for k in range(len(topos), nrow * cols):
        axes[k // cols, k % cols].set_visible(False)
    axes[0, 0].legend(fontsize="x-small")
    fig.suptitle("PCG vs LPA vs MPA on the topologies of thesis Table 8.7 (modelled time)", fontsize="medium")
    return [save_figure(fig, out / "polynomial-table-8.7.png")]


def flow_bench(out: str | Path, *, quick: bool = False, families=FAMILIES, profile: str | None = None) -> list[Path]:
    """Run the families, write CSV + PNG into ``out``; returns the written paths.

    ``out`` is a directory of hermes' own (:func:`hermes.claims.claim_dir`, kind ``flow-bench``): new, empty,
    or made by an earlier ``hermes lab bench``; locked while the families run. ``profile`` (a platform profile's
    name or file, e.g. ``thesis2003``) charges the polynomial and table10.1 families' messages at its costs and
    each call at its prices per call, message and allreduce hop, as :func:`table101_family` says."""
    links = prices = None
    if profile is not None:
        from hermes.sections import PlatformProfile

        prof = PlatformProfile.load(profile, Path, "--profile")
        links, prices = prof.links(Links().bandwidth), prof.prices()
    lock = claim_dir(out, "--out", kind="flow-bench")
    try:
        return _flow_bench(Path(lock.path), quick, families, links, prices)
    finally:
        lock.release(remove_if_unused=True)


def _flow_bench(out: Path, quick: bool, families, links: Links | None = None,
                prices: BalancePrices | None = None) -> list[Path]:
    written: list[Path] = []
    if "diffusion" in families:
        ps = [8, 16] if quick else list(range(8, 65, 8))
        rows = diffusion_family(ps, loads=("one", "eq") if quick else ("one", "eq", "high", "half"))
        written.append(write_csv(out / "diffusion.csv", rows))
        written += _plot_diffusion(rows, out)
    if "polynomial" in families:
        ps = [4, 8] if quick else list(range(4, 17))
        rows = polynomial_family(ps, links=links, prices=prices)
        written.append(write_csv(out / "polynomial.csv", rows))
        written += _plot_polynomial(rows, out)
    if "table10.1" in families:
        rows = table101_family(16, environments=("HCUW",) if quick else ("HOMO", "HCUW"), links=links,
                               prices=prices)
        written.append(write_csv(out / "table-10.1.csv", rows))
        written += _plot_table101(rows, out)
    return written


def _plural(noun: str) -> str:
    """'torus' → 'tori', 'mesh' → 'meshes', 'path' → 'paths'."""
    if noun.endswith("us"):
        return noun[:-2] + "i"
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")
