"""LBAF's per-rank figures (hermes.trace.workmodel) on a phase small enough to add up by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.errors import GraphError
from hermes.trace.phase import TracePhase
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
