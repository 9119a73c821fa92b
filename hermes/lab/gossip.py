"""The offline gossip lab: Grapevine on object loads without MPI (``hermes gossip``).

Object generators (``iso``, ``uniform:A,B``, ``lognormal:A,B``, an LBAF trace), the iso-load optimum
of the Grapevine report (§3.2.1), and the JSON-ready lab run around
:func:`hermes.balance.gossip.grapevine`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.gossip_serial import check_gossip_params, grapevine
from hermes.errors import BalancerError

__all__ = ["iso_optimum", "make_objects", "gossip_lab", "format_gossip_report"]

_LAB_STREAM = 0x6C6162  # entropy word of the lab's load/mapping generator (apart from the rank streams)


def iso_optimum(n_ranks: int, n_objects: int) -> float:
    """Best imbalance of ``n_objects`` unit objects on ``n_ranks`` ranks: ``(|P| − r)/|O|``, ``r = |O| mod |P|``
    (report §3.2.1), and 0 when r = 0."""
    r = n_objects % n_ranks
    return 0.0 if n_objects == 0 or r == 0 else (n_ranks - r) / n_objects


def make_objects(ranks: int, objects: int, mapped_ranks: int | None, loads_spec: str,
                 seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Object loads and initial ranks for the lab.

    ``loads_spec``: ``iso`` (unit loads), ``uniform:A,B`` (U(A, B)), ``lognormal:A,B`` (exp of N(A, B²)),
    or an LBAF data stem (``lbaf:STEM`` or ``STEM`` with ``STEM.0.json``; then the trace's tasks and
    ranks are used, ``objects`` must be 0 or their number and ``mapped_ranks`` unset). Otherwise the
    objects start uniformly at random on ranks ``0..mapped_ranks−1`` (all ranks by default).
    """
    stem = loads_spec[5:] if loads_spec.startswith("lbaf:") else loads_spec
    if loads_spec.startswith("lbaf:") or Path(f"{stem}.0.json").is_file():
        from hermes.lab.lbaf import read_lbdatafile

        data = read_lbdatafile(stem)
        if objects not in (0, None, data.loads.size):
            raise BalancerError(f"--objects {objects}, but {stem} holds {data.loads.size} tasks")
        if mapped_ranks is not None:
            raise BalancerError("--mapped-ranks does not apply to an LBAF trace")
        if data.n_ranks > ranks:
            raise BalancerError(f"{stem} uses {data.n_ranks} ranks, more than --ranks {ranks}")
        return data.loads, data.ranks
    if not (isinstance(objects, (int, np.integer)) and objects >= 0):
        raise BalancerError(f"objects must be a non-negative integer, got {objects!r}")
    m = ranks if mapped_ranks is None else mapped_ranks
    if not (isinstance(m, (int, np.integer)) and 1 <= m <= ranks):
        raise BalancerError(f"mapped ranks must be in 1..{ranks}, got {mapped_ranks!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, _LAB_STREAM]))
    kind, _, args = loads_spec.partition(":")
    if kind == "iso" and not args:
        loads = np.ones(objects)
    elif kind in ("uniform", "lognormal"):
        try:
            a, b = (float(v) for v in args.split(","))
        except ValueError:
            raise BalancerError(f"loads {loads_spec!r}: expected {kind}:A,B with two numbers") from None
        if kind == "uniform" and not (0 <= a <= b < math.inf):
            raise BalancerError(f"loads {loads_spec!r}: need 0 ≤ A ≤ B")
        if kind == "lognormal" and not (math.isfinite(a) and 0 <= b < math.inf):
            raise BalancerError(f"loads {loads_spec!r}: need a finite mean A and σ = B ≥ 0")
        loads = rng.uniform(a, b, objects) if kind == "uniform" else rng.lognormal(a, b, objects)
    else:
        raise BalancerError(f"unknown loads {loads_spec!r}: expected iso, uniform:A,B, lognormal:A,B or an LBAF stem")
    return loads, rng.integers(0, m, size=objects).astype(np.int64)


def gossip_lab(ranks: int, objects: int, mapped_ranks: int | None, loads_spec: str, iterations: int, rounds: int,
               fanout: int, threshold: float, criterion: str, seed: int, source_load: str = "turn") -> dict[str, Any]:
    """Grapevine offline on generated objects (the engine of ``hermes gossip``); JSON-ready summary.

    ``source_load`` is L_i of criterion 6' (:func:`hermes.balance.gossip.grapevine_iter`): ``turn``
    (the report's simulator, default) or ``current``.

    Returns
    -------
    dict
        The parameters, ``average`` (x̄), ``iso_optimum`` (for ``iso`` loads, else None), ``converged``
        (F(D) ≤ 0 at the end), ``iterations_run``, ``history`` (per iteration: transfers, rejected,
        rejection_rate, ignored, imbalance, min, max, sigma; iteration 0 is the initial state),
        ``counters`` of the distributed form and ``seconds`` (wall time of generation + balancing).
    """
    t0 = time.perf_counter()
    if not (isinstance(ranks, (int, np.integer)) and ranks >= 1):
        raise BalancerError(f"ranks must be a positive integer, got {ranks!r}")
    check_gossip_params(iterations, rounds, fanout, threshold, criterion, seed, source_load=source_load)
    loads, owner = make_objects(ranks, objects, mapped_ranks, loads_spec, seed)
    res = grapevine(loads, owner, ranks, iterations=iterations, rounds=rounds, fanout=fanout, threshold=threshold,
                    criterion=criterion, seed=seed, source_load=source_load)
    return {"ranks": int(ranks), "objects": int(loads.size), "mapped_ranks": mapped_ranks, "loads": loads_spec,
            "iterations": int(iterations), "rounds": int(rounds), "fanout": int(fanout),
            "threshold": float(threshold), "criterion": criterion, "source_load": source_load, "seed": seed,
            "average": float(res.average),
            "iso_optimum": iso_optimum(ranks, loads.size) if loads_spec == "iso" else None,
            "converged": bool(res.converged), "iterations_run": int(res.iterations), "history": res.history,
            "counters": res.counters.as_dict(), "seconds": time.perf_counter() - t0}


def format_gossip_report(result: dict[str, Any]) -> str:
    """The lab summary as a table like the report's (§2.1, Tables 3.x)."""
    r = result
    crit = "6' (modified)" if r["criterion"] == "modified" else "6 (original)"
    if r["criterion"] == "modified" and r.get("source_load", "turn") != "turn":
        crit += f", L_i {r['source_load']}"
    lines = [f"Grapevine, criterion {crit}: |P| = {r['ranks']}, |O| = {r['objects']} ({r['loads']}"
             + (f", on the first {r['mapped_ranks']} ranks" if r["mapped_ranks"] else "") + f"), i = {r['iterations']},"
             f" k = {r['rounds']}, f = {r['fanout']}, T = {r['threshold']}, seed {r['seed']}",
             f"{'iteration':>9} {'transfers':>9} {'rejected':>9} {'rate %':>7} {'imbalance':>10} {'min':>10}"
             f" {'max':>10} {'sigma':>10}"]
    for h in r["history"]:
        lines.append(f"{h['iteration']:>9} {h['transfers']:>9} {h['rejected']:>9} {100 * h['rejection_rate']:>7.2f}"
                     f" {h['imbalance']:>10.4g} {h['min']:>10.4g} {h['max']:>10.4g} {h['sigma']:>10.4g}")
    if r["iso_optimum"] is not None:
        lines.append(f"iso-load optimum I* = (|P| - r)/|O| = {r['iso_optimum']:.4g}")
    lines.append(f"F(D) <= 0 reached: {'yes' if r['converged'] else 'no'}; {r['iterations_run']} iterations;"
                 f" {r['counters']['messages']} messages; {r['seconds']:.2f} s")
    return "\n".join(lines)


# -- hermes run ---------------------------------------------------------------------------------
