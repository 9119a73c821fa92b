"""The offline gossip lab: Grapevine on object loads without MPI (``hermes lab gossip``).

Object generators (``iso``, ``uniform:A,B``, ``lognormal:A,B``, an LBAF trace), the iso-load optimum
of the Grapevine report (§3.2.1), and the JSON-ready lab run around
:func:`hermes.balance.gossip.grapevine_serial.grapevine`.

Bounds. The options are bounded as the balancer's parameters are (:func:`check_gossip_params`: iterations
≤ 1e4, rounds and fanout ≤ 1e5, iterations × rounds ≤ 1e6, seed a C int) and ``--ranks`` as a scenario's
processors (≤ 1e5). What they cost together is checked before any allocation: the serial reference keeps
one bitset of known ranks per rank (p²/8 bytes, copied a few times: ``RANK_PAIR_BYTES`` per pair of ranks),
draws and maps ``min(fanout, p − 1)`` peers per sender and round (``PICK_BYTES`` each) and holds the objects
(``OBJECT_BYTES``): together within the memory available. Its time grows like
``iterations × (p² + 500 p + 1000 · objects + rounds · (2e4 + p · (500 + p/64 + min(f, p − 1)²/2)))``
element operations (the transfer turns' CMFs, the bitset merges, the picks; a step of a Python loop — a
turn, a rank's draws in a round, an object's proposal — counted as hundreds): at most ``MAX_WORK``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.gossip.grapevine_serial import GrapevineParams, check_gossip_params, grapevine
from hermes.errors import BalancerError
from hermes.bounds import number_problem
from hermes.scenario import BIG, MAX_PROCESSORS

__all__ = ["iso_optimum", "make_objects", "gossip_cost", "gossip_lab", "format_gossip_report"]

_LAB_STREAM = 0x6C6162  # entropy word of the lab's load/mapping generator (apart from the rank streams)
#: peak memory per object of the lab (measured: ``ru_maxrss`` of ``hermes lab gossip --ranks 64 --iterations 2``
#: grew by 94 bytes per object from 10⁵ to 10⁶ objects), rounded up
OBJECT_BYTES = 128
#: peak memory per pair of ranks (measured: 2.8 GB at 65,536 ranks, 6.3 GB at 10⁵ with 4 rounds of fanout 4:
#: the bitsets of known ranks and their copies), rounded up
RANK_PAIR_BYTES = 1.0
#: peak memory per sender and picked peer in a gossip round (measured: 1.2 GB for 4,096 ranks × fanout 1,000:
#: the uniforms, pick_targets' arrays and the messages), rounded up
PICK_BYTES = 384
#: the lab's work budget in element operations (measured here: 3.5 to 6 ns each; an iteration on 10⁵ ranks is
#: about 1e10 of them and takes 37 s, 4 × 10⁵ rounds on 8 ranks 1e10 and 54 s): some minutes
MAX_WORK = 1e11


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long to be a path
        return False


def _integer(option: str, v: Any, low: int, high: int | None = None) -> int:
    """``v`` as an int in ``low..high``, or BalancerError naming the option (a bool is not an integer)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise BalancerError(f"{option}: must be an integer, got {v!r}")
    if v < low:
        raise BalancerError(f"{option}: must be at least {low}, got {v!r}")
    if high is not None and v > high:
        raise BalancerError(f"{option}: must be at most {high}, got {v!r}")
    return int(v)


def gossip_cost(ranks: int, objects: int, iterations: int, rounds: int, fanout: int) -> tuple[float, float]:
    """(peak bytes, element operations) of a lab run: the estimates of the module docstring."""
    p, used = float(ranks), float(min(fanout, ranks - 1))
    memory = OBJECT_BYTES * (float(objects) + p) + RANK_PAIR_BYTES * p * p + PICK_BYTES * p * used
    work = iterations * (p * p + 500 * p + 1000.0 * objects + rounds * (2e4 + p * (500 + p / 64 + used * used / 2)))
    return memory, work


def _check_cost(ranks: int, objects: int, iterations: int, rounds: int, fanout: int) -> None:
    """BalancerError (one line naming the options) if the run needs more memory than available or more work
    than ``MAX_WORK``."""
    from hermes.machine import memory_available

    memory, work = gossip_cost(ranks, objects, iterations, rounds, fanout)
    avail = memory_available()
    if avail is not None and memory > avail:
        raise BalancerError(f"--ranks {ranks}, --objects {objects}, --fanout {fanout}: need about {memory / 2**30:.3g} "
                            f"GB of memory ({OBJECT_BYTES} bytes per object or rank, {RANK_PAIR_BYTES:g} per pair of "
                            f"ranks, {PICK_BYTES} per rank and peer informed), this machine has {avail / 2**30:.3g} GB "
                            f"available")
    if work > MAX_WORK:
        raise BalancerError(f"--iterations {iterations} on --ranks {ranks} (--rounds {rounds}, --fanout {fanout}, "
                            f"--objects {objects}): about {work:.2g} operations, more than the lab's {MAX_WORK:.0e} "
                            f"(minutes); take fewer iterations, ranks, rounds, peers or objects")


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
    if loads_spec.startswith("lbaf:") or _is_file(Path(f"{stem}.0.json")):
        from hermes.lab.lbaf import read_lbdatafile

        data = read_lbdatafile(stem)
        if objects not in (0, None, data.loads.size):
            raise BalancerError(f"--objects {objects}, but {stem} holds {data.loads.size} tasks")
        if mapped_ranks is not None:
            raise BalancerError("--mapped-ranks does not apply to an LBAF trace")
        if data.n_ranks > ranks:
            raise BalancerError(f"{stem} uses {data.n_ranks} ranks, more than --ranks {ranks}")
        return data.loads, data.ranks
    objects = _integer("--objects", objects, 0)
    from hermes.machine import memory_available

    avail = memory_available()
    if avail is not None and (objects + ranks) * OBJECT_BYTES > avail:  # per-rank arrays: counted like objects
        raise BalancerError(f"{objects} objects on {ranks} ranks need about "
                            f"{(objects + ranks) * OBJECT_BYTES / 2**30:.3g} GB of memory ({OBJECT_BYTES} bytes per "
                            f"object or rank), this machine has {avail / 2**30:.3g} GB available")
    m = ranks if mapped_ranks is None else _integer("--mapped-ranks", mapped_ranks, 1, ranks)
    rng = np.random.default_rng(np.random.SeedSequence([seed, _LAB_STREAM]))
    kind, _, args = loads_spec.partition(":")
    if kind == "iso" and not args:
        loads = np.ones(objects)
    elif kind in ("uniform", "lognormal"):
        try:
            a, b = (float(v) for v in args.split(","))
        except ValueError:
            raise BalancerError(f"loads {loads_spec!r}: expected {kind}:A,B with two numbers") from None
        rule = number_problem(a) or number_problem(b)  # hermes' rule for numbers: no NaN, no subnormal
        if rule is not None:
            raise BalancerError(f"loads {loads_spec!r}: A and B {rule}")
        if kind == "uniform" and not (0 <= a <= b < math.inf):
            raise BalancerError(f"loads {loads_spec!r}: need 0 ≤ A ≤ B")
        if kind == "lognormal" and not (math.isfinite(a) and 0 <= b < math.inf):
            raise BalancerError(f"loads {loads_spec!r}: need a finite mean A and σ = B ≥ 0")
        with np.errstate(over="ignore"):
            loads = rng.uniform(a, b, objects) if kind == "uniform" else rng.lognormal(a, b, objects)
            total = loads.sum()
        if not total <= BIG:
            raise BalancerError(f"loads {loads_spec!r}: the loads sum to {total:g}, beyond {BIG:g} (the bound that "
                                f"keeps the lab's arithmetic finite)")
    else:
        raise BalancerError(f"unknown loads {loads_spec!r}: expected iso, uniform:A,B, lognormal:A,B or an LBAF stem")
    return loads, rng.integers(0, m, size=objects).astype(np.int64)


def gossip_lab(ranks: int, objects: int, mapped_ranks: int | None, loads_spec: str, iterations: int, rounds: int,
               fanout: int, threshold: float, criterion: str, seed: int, source_load: str = "turn",
               write_trace: str | None = None) -> dict[str, Any]:
    """Grapevine offline on generated objects (the engine of ``hermes lab gossip``); JSON-ready summary.

    ``write_trace``: also write the objects as an LBDatafile trace ``<write_trace>.<rank>.json`` with two phases,
    0 the initial assignment and 1 Grapevine's (objects numbered 0..n−1; for a vt trace whose ids and
    communications should be kept, ``hermes trace replay STEM --algorithm grapevine --write-trace``).

    ``source_load`` is L_i of criterion 6' (:func:`hermes.balance.gossip.grapevine_serial.grapevine_iter`): ``turn``
    (the report's simulator, default) or ``current``.

    Returns
    -------
    dict
        The parameters, ``average`` (x̄), ``iso_optimum`` (for ``iso`` loads, else None), ``converged``
        (F(D) ≤ 0 at the end), ``iterations_run``, ``history`` (per iteration: transfers, rejected,
        rejection_rate, ignored, imbalance, min, max, sigma; iteration 0 is the initial state),
        ``counters`` of the distributed form and ``seconds`` (wall time of generation + balancing).

    Raises
    ------
    BalancerError
        An option out of its bounds, or the run's estimated memory or work beyond the machine's or the lab's
        (one line naming the options: ``--fanout: must be at most 100000, got 1000000000``).
    """
    t0 = time.perf_counter()
    ranks = _integer("--ranks", ranks, 1, MAX_PROCESSORS)
    given = 0 if objects is None else _integer("--objects", objects, 0)
    if mapped_ranks is not None:
        _integer("--mapped-ranks", mapped_ranks, 1, ranks)
    check_gossip_params(iterations, rounds, fanout, threshold, criterion, seed, prefix="--", source_load=source_load)
    _check_cost(ranks, given, iterations, rounds, fanout)
    if write_trace is not None:  # before the work: a trace never replaces a file of the user's
        from hermes.trace.lbdatafile import check_new_trace

        check_new_trace(write_trace, ranks, "--write-trace")
    loads, owner = make_objects(ranks, objects, mapped_ranks, loads_spec, seed)
    if loads.size != given:  # an LBAF trace: its tasks are the objects
        _check_cost(ranks, loads.size, iterations, rounds, fanout)
    prm = GrapevineParams.of(iterations=iterations, rounds=rounds, fanout=fanout, threshold=threshold,
                             criterion=criterion, source_load=source_load)
    res = grapevine(loads, owner, ranks, prm, seed=seed)
    written = None
    if write_trace is not None:
        from hermes.trace import write_trace as write
        from hermes.trace.record import trace_from_assignments

        written = str(write(write_trace, trace_from_assignments(loads, [owner, res.object_rank], ranks))[0])
    return {"ranks": int(ranks), "objects": int(loads.size), "mapped_ranks": mapped_ranks, "loads": loads_spec,
            "trace": written,
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
             "imbalance here is Grapevine's max/mean - 1 (0 is balanced; hermes run and flow report max l_i/l̄_i, "
             "1.0 fair)",
             f"{'iteration':>9} {'transfers':>9} {'rejected':>9} {'rate %':>7} {'imbalance':>10} {'min':>10}"
             f" {'max':>10} {'sigma':>10}"]
    for h in r["history"]:
        lines.append(f"{h['iteration']:>9} {h['transfers']:>9} {h['rejected']:>9} {100 * h['rejection_rate']:>7.2f}"
                     f" {h['imbalance']:>10.4g} {h['min']:>10.4g} {h['max']:>10.4g} {h['sigma']:>10.4g}")
    if r["iso_optimum"] is not None:
        lines.append(f"iso-load optimum I* = (|P| - r)/|O| = {r['iso_optimum']:.4g}")
    lines.append(f"F(D) <= 0 reached: {'yes' if r['converged'] else 'no'}; {r['iterations_run']} iterations;"
                 f" {r['counters']['messages']} messages; {r['seconds']:.2f} s")
    if r.get("trace"):
        lines.append(f"trace (phase 0 initial, phase 1 Grapevine's): {r['trace'].removesuffix('.0.json')}.<rank>.json")
    return "\n".join(lines)


# -- hermes run ---------------------------------------------------------------------------------
