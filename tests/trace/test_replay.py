"""hermes trace replay: every balancer on a trace's phases, nothing lost; the command; a hermes run's trace round
trip."""

from __future__ import annotations

from pathlib import Path

import csv
import json

import brotli
import numpy as np
import pytest

from hermes.balance.interface import BalancerInfo, Decision
from hermes.balance.registry import BALANCERS
from hermes.errors import BalancerError, GraphError
from hermes.trace import Trace, read_trace, write_trace
from hermes.trace.trace_phase import TracePhase
from hermes.trace.replay import processor_graph, replay, replay_algorithms, replay_phase
from tests.test_cli import cli


def _phase(seed: int = 0, p: int = 6, n: int = 90, pid: int = 0) -> TracePhase:
    """Objects piled on the first ranks, a random communication graph over all of them (connected ranks), a
    tenth of the objects not migratable."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.integers(0, p, n), rng.integers(0, p, n))  # skewed toward rank 0
    ranks[:p] = np.arange(p)
    loads = rng.uniform(0.5, 2.0, n)
    a = rng.integers(0, n, 4 * n)
    b = (a + rng.integers(1, n, 4 * n)) % n
    mig = np.ones(n, dtype=bool)
    mig[rng.choice(n, n // 10, replace=False)] = False
    return TracePhase(p, np.arange(n, dtype=np.int64) * 3 + 1, loads, ranks.astype(np.int64), ranks.astype(np.int64),
                      mig, pid, (a * 3 + 1).astype(np.int64), (b * 3 + 1).astype(np.int64),
                      np.ones(a.size, dtype=np.int64), rng.uniform(1, 100, a.size))


@pytest.mark.parametrize("name", replay_algorithms())
def test_every_balancer_conserves_the_objects_and_the_load(name):
    ph = _phase()
    res = replay_phase(ph, name, seed=3)
    assert res.ranks.shape == ph.ranks.shape and res.ranks.min() >= 0 and res.ranks.max() < ph.n_ranks
    assert np.array_equal(res.ranks[~ph.migratable], ph.ranks[~ph.migratable])  # the pinned objects stay
    # the same objects with the same loads, only on other ranks: the rank loads still add up to the total
    # (fsum-free sums of 90 terms: relative error ≤ 90 ε)
    total = ph.loads.sum()
    assert np.bincount(res.ranks, weights=ph.loads, minlength=ph.n_ranks).sum() == pytest.approx(total, rel=90 * 2.3e-16)
    assert res.after["load_mean"] == pytest.approx(res.before["load_mean"], rel=90 * 2.3e-16)
    assert res.info["objects_moved"] == int(np.sum(res.ranks != ph.ranks))


@pytest.mark.parametrize("name", ["pcg", "chebyshev", "mincost", "grapevine", "metis", "scotch"])
def test_the_main_balancers_lower_the_imbalance(name):
    ph = _phase(1)
    res = replay_phase(ph, name, seed=1)
    assert res.before["imbalance"] > 1.5
    assert res.after["imbalance"] < 0.8 * res.before["imbalance"], (res.before["imbalance"], res.after["imbalance"])


def test_the_processor_graph_from_the_communications():
    ph = _phase()
    edges, kind = processor_graph(ph, "comm")
    assert kind == "comm" and len(edges) > 0
    lonely = TracePhase(4, np.arange(4, dtype=np.int64), np.ones(4), np.arange(4, dtype=np.int64),
                        np.arange(4, dtype=np.int64), np.ones(4, dtype=bool), 0, np.array([0]), np.array([1]),
                        np.array([1]), np.array([8.0]))
    edges, kind = processor_graph(lonely, "auto")
    assert kind == "full" and len(edges) == 6
    with pytest.raises(GraphError, match="3 components"):
        processor_graph(lonely, "comm")


def test_a_balancer_without_serial_reference_is_refused_in_one_line():
    BALANCERS.add(BalancerInfo("distributed-only", lambda ctx: Decision(), doc="test"))
    try:
        with pytest.raises(BalancerError, match="no serial reference"):
            replay_phase(_phase(), "distributed-only")
    finally:
        del BALANCERS["distributed-only"]
    with pytest.raises(BalancerError, match="unknown balancer|not a balancer|no balancer"):
        replay_phase(_phase(), "no-such-balancer")


def test_bad_replay_options_are_one_line():
    tr = Trace(6, [_phase()])
    for kw, msg in [({"realisation": "magic"}, "realisation"), ({"rounds": 0}, "rounds"), ({"trigger": 0.5}, "trigger")]:
        with pytest.raises(GraphError, match=msg):
            replay(tr, ["pcg"], **kw)
    with pytest.raises(BalancerError, match="tolerance"):
        replay(tr, ["pcg"], {"pcg": {"tolerance": -1}})


# -- the command ------------------------------------------------------------------------------------------------
def _trace(tmp_path, compress=True):
    tr = Trace(6, [_phase(0, pid=1), _phase(1, pid=2)])
    write_trace(tmp_path / "t", tr, compress=compress)
    return tmp_path / "t"


@pytest.mark.slow
def test_replay_command_three_balancers_in_one_go(tmp_path):
    stem = _trace(tmp_path)
    out = tmp_path / "out"
    res = cli("trace", "replay", str(stem), "--algorithm", "grapevine,pcg,metis", "--out", str(out), "--beta", "1e-3",
              "--write-trace", "--param", "grapevine.fanout=3")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((out / "replay.csv").open()))
    assert [(r["phase"], r["algorithm"]) for r in rows] == [(k, a) for k in ("1", "2")
                                                            for a in ("grapevine", "pcg", "metis")]
    assert all(float(r["imbalance_after"]) < float(r["imbalance_before"]) for r in rows)
    meta = json.loads((out / "replay.json").read_text())
    assert meta["params"] == {"grapevine": {"fanout": 3}} and meta["work_model"]["beta"] == 1e-3
    assert (out / "replay.png").stat().st_size > 0 and (out / "table.md").read_text().count("\n") == 8
    back = read_trace(out / "traces" / "metis" / "t")  # the balanced assignment, readable as a trace
    assert back.phase_ids == [1, 2]
    row = next(r for r in rows if r["algorithm"] == "metis" and r["phase"] == "2")
    loads = back.phase(2).rank_loads()
    assert loads.max() / loads.mean() == pytest.approx(float(row["imbalance_after"]), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("damage, message", [
    ("truncate", "brotli stream ends early|neither JSON nor a valid brotli"),
    ("schema", "phases.0.tasks.0.time"),
    ("missing", "t.3.json is missing"),
    ("algorithm", "no-such"),
    ("param", "--param"),
    ("phase", "no phase 7"),
])
def test_replay_command_errors_are_one_line(tmp_path, damage, message):
    stem = _trace(tmp_path)
    args = ["trace", "replay", str(stem), "--out", str(tmp_path / "o")]
    if damage == "truncate":
        path = tmp_path / "t.2.json"
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "schema":
        doc = json.loads(brotli.decompress((tmp_path / "t.1.json").read_bytes()))
        doc["phases"][0]["tasks"][0]["time"] = "fast"
        (tmp_path / "t.1.json").write_bytes(brotli.compress(json.dumps(doc).encode()))
    elif damage == "missing":
        (tmp_path / "t.3.json").unlink()
    elif damage == "algorithm":
        args += ["--algorithm", "pcg,no-such"]
    elif damage == "param":
        args += ["--algorithm", "pcg", "--param", "metis.ufactor=3"]
    elif damage == "phase":
        args += ["--phase", "7"]
    res = cli(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermes: error: ") and "Traceback" not in res.stderr
    assert any(m in lines[0] for m in message.split("|")), lines[0]


@pytest.mark.slow
def test_a_hermes_run_replayed_gives_its_imbalance_figures(tmp_path):
    """The round trip: output.lbdatafile writes the run; replaying it with the run's balancer gives each phase's
    imbalance before exactly (the same loads and capacities: sums of ≤ 1,200 terms, relative error ≤ 1,200 ε)
    and after within the balancer's own tolerance of the realisation."""
    out = tmp_path / "run"
    res = cli("run", "--out", str(out), "--processes", "1", "--set", "processors=4", "--set", "output.pictures=false",
              "--set", "output.lbdatafile=true")
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    trace = read_trace(out / "lbdatafile" / "data")
    assert trace.phase_ids == [ph["phase"] for ph in summary["phases"]]
    results = replay(trace, [summary["balancer"]])
    for ph, r in zip(summary["phases"], results):
        assert r.before["imbalance"] == pytest.approx(ph["imbalance_before"], rel=1200 * 2.3e-16)
        assert abs(r.after["imbalance"] - ph["imbalance_after"]) <= 0.01, (ph["phase"], r.after, ph)
        assert r.info["realisation_used"] == "cells"
    # what LBAF 1.6.0 (commit 9615e7ab) printed for the trace this run wrote at commit fe5ff95 (docs/TRACES.md:
    # no-op InformAndTransfer, AffineCombination β 1, γ 0), as LBAF prints them (.6g): load (sum, max/mean − 1, min,
    # mean, max), the rank-local and total volumes, the inter-rank sent volumes (pairs, sum, max), the work (sum,
    # max/mean − 1, max). That very trace is kept, brotli-compressed, in tests/trace/lbaf-roundtrip/ (the run's
    # partitions have changed since with the price list of docs/COSTS.md, and LBAF's figures are of that file)
    from hermes.trace.workmodel import WorkModel, rank_figures

    trace = read_trace(Path(__file__).parent / "lbaf-roundtrip" / "data")

    lbaf = {1: ("0.288", "0.333333", "0.048", "0.072", "0.096", "5.74976e+06", "5.9648e+06", 4, "107520", "40960",
                "215040", "0.571428", "84480.1"),
            2: ("0.336", "0.835714", "0.0576", "0.084", "0.1542", "5.73184e+06", "5.9648e+06", 4, "116480", "48640",
                "232960", "0.692308", "98560.2"),
            3: ("0.384", "0.679167", "0.0672", "0.096", "0.1612", "5.71392e+06", "5.9648e+06", 4, "125440", "53760",
                "250880", "0.632653", "102400"),
            4: ("0.432", "0.601852", "0.0768", "0.108", "0.173", "5.7088e+06", "5.9648e+06", 4, "128000", "49920",
                "256000", "0.62", "103680")}
    g = "{:.6g}".format
    for ph in trace.phases:
        f = rank_figures(ph, ph.ranks, WorkModel(beta=1.0))
        mine = (g(f.load.sum()), g(f.load.max() / f.load.mean() - 1), g(f.load.min()), g(f.load.mean()),
                g(f.load.max()), g(f.local_volume), g(f.local_volume + f.offrank_volume), f.pair_volumes.size,
                g(f.pair_volumes.sum()), g(f.pair_volumes.max()), g(f.work.sum()),
                g(f.work.max() / f.work.mean() - 1), g(f.work.max()))
        assert mine == lbaf[ph.phase], (ph.phase, mine)


def test_the_memory_limit_keeps_a_flow_from_overfilling_a_rank():
    """Four objects of load 1 and footprint 10 B on rank 0 of 2: balanced, rank 1 would hold 20 B; under a 15 B
    limit (LBAF's upper bound) the realisation moves one object only: the receiving rank stays within the limit
    (rank 0, above it from the start, is still counted)."""
    from hermes.trace.workmodel import WorkModel

    ph = TracePhase(2, np.arange(4, dtype=np.int64), np.ones(4), np.zeros(4, dtype=np.int64),
                    np.zeros(4, dtype=np.int64), np.ones(4, dtype=bool), 0,
                    user={"task_footprint_bytes": np.full(4, 10.0)})
    free = replay_phase(ph, "pcg", work_model=WorkModel(memory_limit=1e9))
    assert free.after["imbalance"] == 1.0 and free.after["memory_max"] == 20.0
    capped = replay_phase(ph, "pcg", work_model=WorkModel(memory_limit=15.0))
    assert capped.before["memory_over"] == 1 and capped.after["memory_over"] == 1  # rank 0: 40 B, then 30 B
    assert capped.after["memory_max"] == 30.0 and capped.info["objects_moved"] == 1
    assert capped.after["imbalance"] == 1.5


@pytest.mark.slow
def test_compare_takes_a_trace_as_its_base(tmp_path):
    stem = _trace(tmp_path)
    spec = tmp_path / "exp.yaml"
    spec.write_text(f"name: t\ntrace: {stem.name}\nset: {{beta: 1.0e-3}}\n"
                    "axes:\n  balancer: [pcg, {label: METIS 1 %, algorithm: metis, ufactor: 10}]\n"
                    "  graph: [comm, full]\n")
    out = tmp_path / "exp"
    res = cli("compare", str(spec), "--out", str(out))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert {(r["balancer"], r["graph"]) for r in rows} == {(b, g) for b in ("pcg", "METIS 1 %")
                                                           for g in ("comm", "full")}
    assert len(rows) == 8 and all(r["work_mean_before"] for r in rows)
    table = (out / "table.md").read_text()
    assert "| pcg / comm | pcg / full | METIS 1 % / comm | METIS 1 % / full |" in table
    assert (out / "compare.png").stat().st_size > 0
    # the same with --trace and axes given on the command line; a second run keeps the finished replays
    res = cli("compare", "--trace", str(stem), "--set-axis", "balancer=grapevine,none", "--out", str(tmp_path / "c"))
    assert res.returncode == 0 and "none" in (tmp_path / "c" / "table.md").read_text()
    res = cli("compare", "--trace", str(stem), "--set-axis", "balancer=grapevine,none", "--out", str(tmp_path / "c"))
    assert res.returncode == 0 and res.stdout.count("complete, kept") == 2
    res = cli("compare", "--trace", str(stem), "--set-axis", "speed=1,2", "--out", str(tmp_path / "d"))
    assert res.returncode == 2 and "speed: not a replay option" in res.stderr


# -- traces of any length (issue 38) -------------------------------------------------------------------------------
def test_empty_phases_cost_no_python_in_a_replay(tmp_path, monkeypatch):
    """10⁵ empty phases, three balancers: the figures of every phase in one vectorised pass and no balancer run
    (the old replay spent ~0.4 ms of Python per phase and algorithm: minutes). Checked by what it calls, not by a
    timer (a CPU bound failed under the suite's load): neither the per-phase replay nor the balancing step runs for
    an empty phase. `python -m benchmarks.trace_read` times it (results/trace-read.md)."""
    import hermes.trace.replay as replay_module

    def never(*args, **kwargs):
        raise AssertionError("an empty phase was replayed one by one")

    monkeypatch.setattr(replay_module, "replay_phase", never)
    monkeypatch.setattr(replay_module, "_balance", never)
    n = 100_000
    (tmp_path / "e.0.json").write_text('{"type":"LBDatafile","phases":[' + ",".join(
        f'{{"id":{k},"tasks":[]}}' for k in range(n)) + "]}")
    results = replay(read_trace(tmp_path / "e"), ["none", "grapevine", "pcg"])
    assert len(results) == 3 * n and results[-1].phase == n - 1 and results[-1].after["imbalance"] == 1.0


def test_realising_a_flow_costs_no_pass_over_the_pool_per_object():
    """The affinities of a rank's objects are computed once per target and then only for the neighbours of an
    object that moved: on 8,000 objects of 4 ranks, about 60,000 affinities for 3,000 objects moved (the old
    loop computed every remaining object's at each move: ~10⁷). The ranks are the plain loop's, bit for bit."""
    import hermes.trace.replay as rp

    rng = np.random.default_rng(4)
    n, p = 8000, 4
    ranks = np.repeat(np.arange(p), [5000, 1000, 1000, 1000])
    a = rng.integers(0, n, 3 * n)
    b = (a + rng.integers(1, 50, a.size)) % n
    ph = TracePhase(p, np.arange(n, dtype=np.int64), rng.uniform(0.5, 1.5, n), ranks, ranks, np.ones(n, dtype=bool),
                    0, a.astype(np.int64), b.astype(np.int64), np.ones(a.size, dtype=np.int64),
                    rng.integers(1, 9, a.size).astype(float))
    edges = np.array([[0, 1], [0, 2], [0, 3]])
    flow = np.full(3, (5000 - 2000) / 3 * 1.0)
    counted = []
    plain = rp._affinity

    def counting(cand, *args):
        counted.append(cand.size)
        return plain(cand, *args)

    rp._affinity = counting
    try:
        new = rp.realise_flow_on_objects(ph, edges, flow)
    finally:
        rp._affinity = plain
    moved = int(np.sum(new != ranks))
    assert moved > 2500 and sum(counted) < 40 * moved, (moved, sum(counted))
    assert np.array_equal(new, _plain_realisation(ph, edges, flow))


def _plain_realisation(ph, edges, flow):
    """The realisation as first written: every remaining object's affinity recomputed at every move (the
    reference the incremental affinities must equal)."""
    from hermes.trace.replay import _affinity, _flow_order, object_graph

    r = ph.ranks.copy()
    p = ph.n_ranks
    xadj, adjncy, w = object_graph(ph)
    loads = ph.loads
    out = [[] for _ in range(p)]
    for (i, j), f in zip(edges.tolist(), flow.tolist()):
        if f > 0:
            out[i].append((j, f))
        elif f < 0:
            out[j].append((i, -f))
    members = [[] for _ in range(p)]
    for v in np.flatnonzero(ph.migratable).tolist():
        members[r[v]].append(v)
    for i in _flow_order(p, edges, flow):
        demand = {j: f for j, f in out[i] if f > 0}
        if not demand or not members[i]:
            continue
        pool = np.array(sorted(members[i]), dtype=np.int64)
        pool = pool[np.lexsort((pool, -loads[pool]))]
        alive = np.ones(pool.size, dtype=bool)
        pl = loads[pool]
        over = 0.0
        while demand and alive.any():
            j = max(demand, key=lambda t: (demand[t], -t))
            total = sum(demand.values()) - over
            if total <= 0:
                break
            idx = np.flatnonzero(alive)
            gain = _affinity(pool[idx], j, i, r, xadj, adjncy, w)
            idx = idx[np.argsort(-gain, kind="stable")]
            fits = idx[pl[idx] < 2.0 * demand[j]]
            if fits.size == 0:
                light = idx[pl[idx] < 2.0 * total]
                fits = light[np.argsort(pl[light], kind="stable")[:1]] if light.size else light
            if not fits.size:
                del demand[j]
                continue
            v = int(pool[fits[0]])
            alive[fits[0]] = False
            r[v] = j
            members[j].append(v)
            demand[j] -= loads[v]
            if demand[j] <= 0:
                over -= demand[j]
                del demand[j]
        members[i] = pool[alive].tolist()
    return r


def test_a_message_to_no_task_joins_no_ranks():
    """Ranks 0 and 1 exchange messages only through an object that is no task of the phase (an objgroup): the
    communication graph LBAF's model has is not connected, so ``auto`` takes the full graph and ``comm`` is
    refused (the old graph joined them through the message's file rank and the entity's home)."""
    ph = TracePhase(2, np.array([1, 2], dtype=np.int64), np.array([3.0, 1.0]), np.array([0, 1]), np.array([0, 1]),
                    np.ones(2, dtype=bool), 0, np.array([1], dtype=np.int64), np.array([99], dtype=np.int64),
                    np.ones(1, dtype=np.int64), np.array([10.0]), np.array([0]), np.array([1]))
    assert processor_graph(ph, "auto")[1] == "full"
    with pytest.raises(GraphError, match="2 components"):
        processor_graph(ph, "comm")


def test_replay_limits_are_one_line(tmp_path, monkeypatch):
    """More phases than a replay takes (10⁵: a row per phase and algorithm) is one line naming the count and
    --phase, exit 2, in seconds; so is a phase with more tasks than it balances (checked in-process with a
    lowered limit)."""
    import time

    import hermes.trace.replay as rp

    n = 100_001
    (tmp_path / "e.0.json").write_text('{"type":"LBDatafile","phases":[' + ",".join(
        f'{{"id":{k},"tasks":[]}}' for k in range(n)) + "]}")
    t0 = time.perf_counter()
    res = cli("trace", "replay", str(tmp_path / "e"), "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermes: error: ") and "100,001 phases, more than hermes " \
        "replays at once (limit 100,000): choose some with --phase" in lines[0], lines
    assert time.perf_counter() - t0 < 60
    assert not (tmp_path / "o").exists()
    monkeypatch.setattr(rp, "MAX_REPLAY_TASKS", 50)
    with pytest.raises(GraphError, match=r"phase 0 has 90 tasks, more than hermes replays \(limit 50 per phase"):
        rp.replay_trace(Trace(6, [_phase()]), ["pcg"])
