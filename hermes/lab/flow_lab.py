"""``hermes lab flow``: run one balancer's serial reference on a processor graph, without MPI.

The offline lab of the thesis' chapters 5 and 8: build H = (G, l, c, w) from four specs
(:mod:`hermes.lab.specs`), run the registry entry's serial reference
(``BALANCERS[name].serial``, the same function the tests use as the oracle of the distributed
form) and report its flow, the loads before and after, the iteration count, the convergence factor
(diffusion methods), the distance to the exact minimal balancing flow and the cost counters the
distributed form would report. :func:`flow_lab` returns a JSON-ready dict (``hermes lab flow --json``);
:func:`format_flow_report` is the human-readable form.

Bounds: ``--tol`` and every ``--param`` are checked by the balancer's parameter model (finite bounds on every
number, :mod:`hermes.balance.interface`); the graph has at most ``MAX_FLOW_PROCESSORS`` processors (the
references' set-up grows faster than p²); the iterations it allows, times what one costs, at most
``MAX_FLOW_WORK`` (:func:`check_flow_cost`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hermes.balance.flow import check_balancing, flow_error
from hermes.balance.interface import serial_kwargs
from hermes.balance.registry import BALANCERS, check_params
from hermes.errors import BalancerError, GraphError
from hermes.lab.specs import build_model, parse_graph
from hermes.metrics import imbalance

__all__ = ["flow_algorithms", "flow_lab", "format_flow_report", "check_flow_cost", "MAX_FLOW_PROCESSORS",
           "MAX_FLOW_WORK"]

#: flow rows shown by :func:`format_flow_report` (the JSON has all of them)
REPORT_ROWS = 24
#: the largest processor graph of the lab: the serial references' set-up grows faster than p² (measured here:
#: ε₀'s edge connectivity by networkx max-flows 2 × 64 s at 4,000 processors; LPA's and AdA's operators 90 s at
#: 2,000; dense spectra O(p³)); at 2,048 every built-in runs within minutes (the seeds' graphs have ≤ 256)
MAX_FLOW_PROCESSORS = 2048
#: the work budget of one run, in element operations (~10 ns each here): the iterations a method may take
#: (max_iterations; null: 10 p) × (1 + inner sweeps) × (p + q + 2.5e4, the Python overhead of a sweep)
MAX_FLOW_WORK = 1e11
#: inner sweeps assumed when the implicit schemes compute their count (about 10 at alpha 1)
_AUTO_SWEEPS = 10


def flow_algorithms() -> list[str]:
    """Names of the balancers that have a serial reference (those ``hermes lab flow`` can run)."""
    return sorted(name for name, info in BALANCERS.items() if info.serial is not None)


def check_flow_cost(graph: str, p: int, q: int, params: dict[str, Any]) -> None:
    """BalancerError (one line naming the option) if the graph is larger than ``MAX_FLOW_PROCESSORS`` or the
    run's iterations could cost more than ``MAX_FLOW_WORK`` (validated ``params``, defaults filled in)."""
    if p > MAX_FLOW_PROCESSORS:
        raise BalancerError(f"--graph {graph!r}: {p} processors, more than the flow lab's {MAX_FLOW_PROCESSORS} (the "
                            f"serial references' set-up grows faster than p²: ε₀'s edge connectivity, dense spectra)")
    if "max_iterations" not in params:
        return
    its = params["max_iterations"]
    sweeps = params.get("sweeps", 0)
    inner = 1 + (_AUTO_SWEEPS if sweeps is None else sweeps)
    n = 10 * p if its is None else its
    work = n * inner * (p + q + 2.5e4)
    if work > MAX_FLOW_WORK:
        raise BalancerError(f"--param balancer.max_iterations: {n} iterations"
                            + (" (null: 10 p)" if its is None else "") + f" on --graph {graph!r} ({p} processors, {q} edges"
                            + (f", {inner - 1} inner sweeps each" if inner > 1 else "") + f") are about {work:.2g} "
                            f"operations, more than the flow lab's {MAX_FLOW_WORK:.0e} (minutes); give fewer")


def _jsonable(x: Any) -> Any:
    """Numpy scalars and arrays → Python numbers and lists; non-finite floats → None."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def flow_lab(graph, capacities, weights, loads, algorithm: str, tol: float | None = None,
             params: dict[str, Any] | None = None, links=None) -> dict[str, Any]:
    """Run ``algorithm``'s serial reference on the model of four specs and report the outcome.

    Parameters
    ----------
    graph : str
        Graph spec (``path:N``, ``mesh:RxC``, ``tree:K:N``, a file, ...: :func:`~hermes.lab.specs.parse_graph`).
    capacities, weights, loads : str or array_like
        Specs (``homo``/``hcuw``, ``1``/``kmod4``/``ijmod3``, ``one``/``eq``/``high``/``half``/
        ``random:SEED``, lists, files: :mod:`hermes.lab.specs`) or arrays.
    algorithm : str
        A balancer with a serial reference (:func:`flow_algorithms`).
    tol : float, optional
        The balancer's ``tolerance`` parameter (its stopping rule; see the balancer's doc).
    params : dict, optional
        Other balancer parameters (as ``balancer.params`` of a scenario), checked by
        :func:`~hermes.balance.registry.check_params`.
    links : hermes.runtime.clock.Links, optional
        If given, ``time`` is the α-β time the distributed form would be charged.

    Returns
    -------
    dict
        JSON-ready: ``algorithm``, ``doc``, ``params`` (merged), ``specs``, ``graph`` (generator
        details), ``p``, ``q``, ``edges`` (the model's sorted ``[i, j]``, i < j), ``weights`` and
        ``flow`` on them (``flow[k] > 0`` moves load from ``edges[k][0]`` to ``edges[k][1]``),
        ``capacities`` (normalised), ``initial_loads``, ``fair_loads``, ``final_loads``
        (``l − A f``), ``imbalance_initial``, ``imbalance_final``, ``iterations``, ``converged``,
        ``convergence_factor`` (None for non-diffusion methods), ``flow_error``
        (``‖f − f*‖₂ / ‖f*‖₂`` to the minimal flow), ``balancing_defect``
        (:func:`~hermes.balance.flow.check_balancing`), ``flow_norm`` (‖f‖₂), the counters
        ``exchange_rounds``, ``collectives``, ``messages``, ``bytes``, ``time``, the serial run's
        ``wall_seconds``, and ``extra`` (the method's scalar details, e.g. ε, residual).

    Raises
    ------
    BalancerError
        Unknown algorithm or one without a serial reference (listing the valid names), ``tol`` for
        a method without a tolerance, bad parameters (``--param balancer.max_iterations: must be less than or
        equal to 1000000, got 1000000000``), a graph or a run beyond the lab's bounds (:func:`check_flow_cost`).
    GraphError, ScenarioError
        A bad spec (one line naming it).
    """
    valid = flow_algorithms()
    info = BALANCERS[algorithm] if algorithm in BALANCERS else None
    if info is None:
        from hermes.suggest import did_you_mean

        raise BalancerError(f"unknown algorithm {algorithm!r}{did_you_mean(algorithm, valid)}; valid: "
                            f"{', '.join(valid)}")
    if info.serial is None:
        raise BalancerError(f"algorithm {algorithm!r} computes no flow (it has no serial reference); "
                            f"valid: {', '.join(valid)}")
    given = dict(params or {})
    if tol is not None:
        if "tolerance" not in info.defaults:
            raise BalancerError(f"--tol: algorithm {algorithm!r} has no tolerance parameter")
        check_params(algorithm, {"tolerance": tol}, prefix="--tol balancer.")  # the option and the key
        given["tolerance"] = tol
    merged = check_params(algorithm, given, prefix="--param balancer.")
    pg = parse_graph(graph)
    check_flow_cost(graph if isinstance(graph, str) else pg.spec, pg.p, pg.q, merged)
    model = build_model(pg, capacities, weights, loads)
    try:
        return _run(info, algorithm, merged, pg, model, links, (graph, capacities, weights, loads))
    except (RuntimeError, ArithmeticError, ValueError, np.linalg.LinAlgError) as err:  # splu: "Factor is exactly
        # singular"; a parameter far out of a method's range (implicit's alpha: ZeroDivisionError, ValueError)
        raise GraphError(f"graph {pg.spec!r}: {algorithm} failed numerically on this model "
                         f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None


def _run(info, algorithm: str, merged: dict[str, Any], pg, model, links, specs) -> dict[str, Any]:
    graph, capacities, weights, loads = specs
    kw = serial_kwargs(info.serial, merged, links)
    start = time.perf_counter()
    res = info.serial(model, **kw)
    wall = time.perf_counter() - start
    flow = np.asarray(res.flow, dtype=np.float64)
    final = model.apply_flow(flow)
    c = res.counters
    extra = {k: v for k, v in res.extra.items() if isinstance(v, (int, float, str, bool, np.number))}
    return _jsonable({
        "algorithm": algorithm,
        "doc": info.doc,
        "params": {k: merged[k] for k in merged},
        "specs": {k: (v if isinstance(v, str) else "array") for k, v in
                  (("graph", graph), ("capacities", capacities), ("weights", weights), ("loads", loads))},
        "graph": pg.meta,
        "p": model.p,
        "q": model.q,
        "edges": model.edges,
        "weights": model.weights,
        "capacities": model.capacities,
        "flow": flow,
        "initial_loads": model.loads,
        "fair_loads": model.fair_loads,
        "final_loads": final,
        "imbalance_initial": model.imbalance,
        "imbalance_final": imbalance(final, model.capacities),
        "iterations": int(res.iterations),
        "converged": bool(res.converged),
        "convergence_factor": res.convergence_factor,
        "flow_error": flow_error(model, flow),
        "balancing_defect": check_balancing(model, flow),
        "flow_norm": float(np.linalg.norm(flow)),
        "exchange_rounds": c.exchange_rounds,
        "collectives": dict(c.collectives),
        "messages": c.messages,
        "bytes": c.bytes,
        "time": c.time,
        "wall_seconds": wall,
        "extra": extra,
    })


def _num(x, fmt: str = ".6g") -> str:
    return "n/a" if x is None else format(x, fmt)


def format_flow_report(result: dict[str, Any]) -> str:
    """The human-readable report of a :func:`flow_lab` result (``hermes lab flow`` without ``--json``)."""
    r = result
    specs = r["specs"]
    lines = [
        f"hermes lab flow: {r['algorithm']} on {specs['graph']} — {r['p']} processors, {r['q']} edges",
        f"  capacities {specs['capacities']}, weights {specs['weights']}, loads {specs['loads']}",
        f"  {r['doc']}",
        f"  iterations          {r['iterations']} ({'converged' if r['converged'] else 'NOT converged'})",
        f"  convergence factor  {_num(r['convergence_factor'])}",
        f"  imbalance           {_num(r['imbalance_initial'], '.6g')} -> {_num(r['imbalance_final'], '.6g')}"
        "  (max l_i / fair l_i)",
        f"  flow error          {_num(r['flow_error'], '.3e')}  (relative distance to the minimal balancing flow)",
        f"  balancing defect    {_num(r['balancing_defect'], '.3e')}",
        f"  flow norm           {_num(r['flow_norm'])}",
    ]
    coll = ", ".join(f"{k} {v}" for k, v in sorted(r["collectives"].items())) or "none"
    t = r["time"]
    lines.append(f"  cost                exchange rounds {r['exchange_rounds']}, collectives ({coll}), "
                 f"messages {r['messages']}, bytes {r['bytes']}, "
                 + (f"time {t:.6g} s" if t else "time 0 (no link model)"))
    if r["extra"]:
        lines.append("  details             " + ", ".join(f"{k} {_num(v) if isinstance(v, float) else v}"
                                                          for k, v in r["extra"].items()))
    if r["p"] <= REPORT_ROWS:
        lines.append("  processor  capacity      initial         fair        final")
        for i in range(r["p"]):
            lines.append(f"  {i:9d}  {r['capacities'][i]:8.4f}  {r['initial_loads'][i]:11.6g}  "
                         f"{r['fair_loads'][i]:11.6g}  {r['final_loads'][i]:11.6g}")
    lines.append("  flow on each edge (> 0 moves load from the first processor to the second)")
    for k, ((i, j), f) in enumerate(zip(r["edges"], r["flow"])):
        if k == REPORT_ROWS:
            lines.append(f"  ... {r['q'] - REPORT_ROWS} more edges (--json for all)")
            break
        lines.append(f"  {i:6d} -> {j:<6d} {f:14.6g}")
    return "\n".join(lines)
