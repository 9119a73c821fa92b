"""LBAF's per-rank figures (hermes.trace.workmodel) on a phase small enough to add up by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.errors import GraphError
from hermes.trace.trace_phase import TracePhase
from hermes.trace.workmodel import WorkModel, phase_figures, rank_figures

NAN = np.nan


def _phase() -> TracePhase:
    """Objects a=0, b=1 on rank 0, c=2 on rank 1, d=3 on rank 2 (loads 2, 1, 4, 1); messages a→c 10 B, c→a 4,
    b→a 100 (local), d→c 3, c→d 8, a→b 1 (local); footprints 1, 2, 4, 8; working 10, 30, 5, 0; shared block 1
    used by a and b (listed on rank 0, 100 B) and by c (listed on rank 1, 50 B: another block); rank working
    bytes 1000, 2000, 0."""
    ids = np.arange(4, dtype=np.int64)
    frm = np.array([0, 2, 1, 3, 2, 0])
    to = np.array([2, 0, 0, 2, 3, 1])
    user = {"task_footprint_bytes": np.array([1.0, 2.0, 4.0, 8.0]),
            "task_working_bytes": np.array([10.0, 30.0, 5.0, 0.0]),
            "shared_id": np.array([1.0, 1.0, 1.0, NAN]), "shared_bytes": np.array([100.0, 100.0, 50.0, NAN])}
    return TracePhase(3, ids, np.array([2.0, 1.0, 4.0, 1.0]), np.array([0, 0, 1, 2]), np.array([0, 0, 1, 2]),
                      np.ones(4, dtype=bool), 0, frm, to, np.ones(6, dtype=np.int64),
                      np.array([10.0, 4.0, 100.0, 3.0, 8.0, 1.0]), user=user,
                      rank_working=np.array([1000.0, 2000.0, 0.0]))


def test_communication_figures():
    f = rank_figures(_phase(), [0, 0, 1, 2])
    assert f.sent.tolist() == [10.0, 12.0, 3.0] and f.received.tolist() == [4.0, 13.0, 8.0]
    assert f.local_volume == 101.0 and f.offrank_volume == 25.0
    assert sorted(f.pair_volumes.tolist()) == [8.0, 10.0]  # (0,1): max(10, 4); (1,2): max(8, 3)


def test_memory_with_shared_blocks_and_homing():
    ph = _phase()
    f = rank_figures(ph, ph.ranks)
    # rank working + distinct blocks + footprints + the largest working bytes
    assert f.memory.tolist() == [1000 + 100 + 3 + 30, 2000 + 50 + 4 + 5, 8.0]
    assert f.homing.tolist() == [0.0, 0.0, 0.0]
    moved = rank_figures(ph, [0, 1, 1, 2])  # b joins c: its block (homed on rank 0) now counts on rank 1 too
    assert moved.memory.tolist() == [1000 + 100 + 1 + 10, 2000 + 50 + 100 + 6 + 30, 8.0]
    assert moved.homing.tolist() == [0.0, 100.0, 0.0]


def test_the_affine_work_model_and_its_memory_limit():
    ph = _phase()
    w = rank_figures(ph, ph.ranks, WorkModel(alpha=1.0, beta=1.0)).work
    assert w.tolist() == [3 + 10, 4 + 13, 1 + 8]
    w = rank_figures(ph, [0, 1, 1, 2], WorkModel(alpha=2.0, beta=0.5, gamma=1.0, delta=0.25)).work
    # b on rank 1: b→a (100 B) and c→a leave rank 1, a→b and a→c leave rank 0
    sent, received = [10.0 + 1.0, 4.0 + 100.0 + 8.0, 3.0], [4.0 + 100.0, 10.0 + 3.0 + 1.0, 8.0]
    expect = [2 * 2 + 0.5 * max(sent[0], received[0]) + 1,
              2 * 5 + 0.5 * max(sent[1], received[1]) + 1 + 0.25 * 100, 2 * 1 + 0.5 * 8 + 1]
    assert w.tolist() == pytest.approx(expect, rel=1e-15)
    limited = rank_figures(ph, [0, 1, 1, 2], WorkModel(memory_limit=2100.0)).work
    assert math.isinf(limited[1]) and np.isfinite(limited[[0, 2]]).all()
    figs = phase_figures(ph, [0, 1, 1, 2], WorkModel(memory_limit=2100.0))
    assert figs["memory_over"] == 1 and math.isinf(figs["work_max"])


def test_imbalance_relative_to_capacities():
    ph = _phase()
    f = phase_figures(ph, ph.ranks)
    assert f["imbalance"] == 4.0 / (8.0 / 3) and f["lbaf_imbalance"] == pytest.approx(0.5, rel=1e-15)
    f = phase_figures(ph, ph.ranks, capacities=[3.0, 4.0, 1.0])
    assert f["imbalance"] == pytest.approx(max(3 / 3.0, 4 / 4.0, 1 / 1.0), rel=1e-15)


@pytest.mark.parametrize("kw", [{"alpha": math.nan}, {"beta": math.inf}, {"memory_limit": 0.0}, {"gamma": True}])
def test_bad_work_model_is_one_line(kw):
    with pytest.raises(GraphError, match="work model"):
        WorkModel(**kw)


def test_the_rank_alpha_of_the_metadata_scales_the_load(tmp_path):
    from hermes.trace import read_trace, write_trace

    ph = _phase()
    ph.rank_user["rank_alpha"] = np.array([2.0, 1.0, 0.5])
    write_trace(tmp_path / "a", ph)
    back = read_trace(tmp_path / "a").phases[0]
    assert back.rank_user["rank_alpha"].tolist() == [2.0, 1.0, 0.5]
    assert rank_figures(back, back.ranks).work.tolist() == [2.0 * 3, 4.0, 0.5 * 1]


# -- one function for the figures of every phase (issue 38) --------------------------------------------------------
def _reference(ph, ranks, p, caps):
    """The figures of one phase by their definitions, object by object (LBAF's way: a message counts only
    between two tasks of the phase)."""
    where = dict(zip(ph.ids.tolist(), np.asarray(ranks).tolist()))
    load = [0.0] * p
    for r, x in zip(ranks, ph.loads.tolist()):
        load[r] += x
    sent, recv, local, off, pairs = [0.0] * p, [0.0] * p, 0.0, 0.0, {}
    for a, b, w in zip(ph.comm_from.tolist(), ph.comm_to.tolist(), ph.comm_bytes.tolist()):
        if a not in where or b not in where:
            continue
        ra, rb = where[a], where[b]
        if ra == rb:
            local += w
            continue
        off += w
        sent[ra] += w
        recv[rb] += w
        pairs[(ra, rb)] = pairs.get((ra, rb), 0.0) + w
    vol = {}
    for (a, b), w in pairs.items():
        key = (min(a, b), max(a, b))
        vol[key] = max(vol.get(key, 0.0), w)
    total = sum(load)
    return {"load_max": max(load), "load_mean": total / p, "offrank_bytes": off, "local_bytes": local,
            "imbalance": max(x / (total * c) for x, c in zip(load, caps)) if total > 0 else 1.0,
            "comm_max": max(max(s, r) for s, r in zip(sent, recv)),
            "pair_volume_max": max([v for v in vol.values() if v > 0], default=0.0)}


def _random_phase(rng, pid, p=5):
    n = int(rng.integers(0, 30))
    ids = np.sort(rng.choice(1000, n, replace=False)).astype(np.int64)
    m = int(rng.integers(0, 60))
    ends = np.concatenate([ids, [2000, 2001]])  # two objects that are not tasks of the phase
    return TracePhase(p, ids, rng.integers(0, 9, n).astype(float), rng.integers(0, p, n), rng.integers(0, p, n),
                      rng.random(n) < 0.8, pid, rng.choice(ends, m).astype(np.int64),
                      rng.choice(ends, m).astype(np.int64), np.ones(m, dtype=np.int64),
                      rng.integers(1, 50, m).astype(float))


def test_trace_figures_are_each_phases_figures_by_definition():
    """trace_figures of 40 random phases at once (some empty, messages with endpoints that are no task) equal
    the figures computed phase by phase from their definitions, under the trace's assignment and another
    (sums of at most 60 integers: exact)."""
    from hermes.trace.trace_phase import Trace
    from hermes.trace.workmodel import trace_figures

    rng = np.random.default_rng(11)
    phases = [_random_phase(rng, 3 * k) for k in range(40)]
    flat = Trace(5, phases).flat
    caps = np.array([1.0, 2.0, 1.0, 1.0, 5.0]) / 10.0
    other = rng.integers(0, 5, flat.ids.size)
    for ranks in (None, other):
        f = trace_figures(flat, ranks, capacities=caps)
        for k, ph in enumerate(phases):
            r = ph.ranks if ranks is None else other[flat.tasks_of(k)]
            want = _reference(ph, r.tolist(), 5, caps.tolist())
            for key, v in want.items():
                assert f[key][k] == pytest.approx(v, rel=1e-12, abs=0), (k, key)
            assert f["tasks"][k] == ph.n_tasks


def test_trace_info_and_replay_print_the_same_figures(tmp_path):
    """vt-tv's lb_test_data, phase 0, in small: a message from a task to an object that is no task of the phase
    (an objgroup on another rank). hermes trace info counted its bytes as off-rank (7,600 there against replay's
    and LBAF's 6,928); both now take the figures from one function and leave it out, as LBAF does."""
    import json

    from hermes.trace import read_trace, write_trace
    from hermes.trace.lbdatafile import trace_summary
    from hermes.trace.replay import replay
    from tests.test_cli import cli

    ph = TracePhase(2, np.array([1, 2, 3], dtype=np.int64), np.array([1.0, 2.0, 4.0]), np.array([0, 0, 1]),
                    np.array([0, 0, 1]), np.ones(3, dtype=bool), 0, np.array([1, 2, 3], dtype=np.int64),
                    np.array([3, 77, 1], dtype=np.int64), np.ones(3, dtype=np.int64), np.array([100.0, 672.0, 28.0]),
                    np.array([0, 0, 1]), np.array([0, 1, 0]))
    write_trace(tmp_path / "t", [ph])
    tr = read_trace(tmp_path / "t")
    info = trace_summary(tr)["phases"][0]
    res = replay(tr, ["none"])[0]
    assert info["offrank_bytes"] == res.before["offrank_bytes"] == 128.0  # 1→3 and 3→1; 2→77 is no task's
    assert info["communications"] == 2 and info["other_communications"] == 1
    assert info["imbalance"] == res.before["imbalance"] and info["load_max"] == res.before["load_max"]
    out = cli("trace", "info", str(tmp_path / "t"), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["phases"][0]["offrank_bytes"] == 128.0
    rep = cli("trace", "replay", str(tmp_path / "t"), "--algorithm", "none", "--no-plot", "--out", str(tmp_path / "r"))
    assert rep.returncode == 0, rep.stderr
    assert "off-rank bytes 128 → 128" in rep.stdout
