"""Balancing under a memory limit (hermes.trace.memorybound): the repair and the block-aware refinement keep
every task and its load, keep each rank's memory as the work model counts it, stay within the limit, and reach
what a block-blind balancer cannot."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.trace.memorybound import BlockState, bound_assignment, refine, repair
from hermes.trace.trace_phase import TracePhase
from hermes.trace.replay import check_options, replay_phase
from hermes.trace.workmodel import WorkModel, phase_figures, rank_figures

#: bytes of a shared block, of a rank's baseline, of a task's footprint and working set (LBAF's toy data's)
BLOCK, BASE, FOOT, WORK = 1.3e9, 0.98e9, 1024.0, 1.1e8


def _phase(p: int, block_loads: list[list[float]], block_rank: list[int], *, seed: int = 0,
           fixed: int = 0) -> TracePhase:
    """A phase of ``len(block_loads)`` shared blocks, block k's tasks (loads ``block_loads[k]``) on rank
    ``block_rank[k]``, LBAF's memory figures per task; the first ``fixed`` tasks not migratable."""
    loads = np.concatenate([np.asarray(b, dtype=np.float64) for b in block_loads])
    sid = np.concatenate([np.full(len(b), float(k)) for k, b in enumerate(block_loads)])
    ranks = np.concatenate([np.full(len(b), r, dtype=np.int64) for b, r in zip(block_loads, block_rank)])
    n = loads.size
    perm = np.random.default_rng(seed).permutation(n)  # tasks in no particular order of block or rank
    loads, sid, ranks = loads[perm], sid[perm], ranks[perm]
    mig = np.ones(n, dtype=bool)
    mig[:fixed] = False
    user = {"shared_id": sid, "shared_bytes": np.full(n, BLOCK), "task_footprint_bytes": np.full(n, FOOT),
            "task_working_bytes": np.full(n, WORK)}
    return TracePhase(p, np.arange(n, dtype=np.int64), loads, ranks, ranks.copy(), mig, 0, user=user,
                      rank_working=np.full(p, BASE))


def _limit(blocks: int, tasks: int) -> float:
    """The memory of a rank holding ``blocks`` blocks and ``tasks`` tasks."""
    return BASE + blocks * BLOCK + tasks * FOOT + WORK


def _random_phase(seed: int, p: int = 8, nb: int = 24) -> TracePhase:
    rng = np.random.default_rng(seed)
    blocks = [rng.uniform(1, 20, rng.integers(1, 12)).round(1).tolist() for _ in range(nb)]
    return _phase(p, blocks, np.minimum(rng.integers(0, p, nb), rng.integers(0, p, nb)).tolist(), seed=seed,
                  fixed=3)


def test_memory_is_the_work_models_after_any_moves():
    """BlockState's incremental memory (blocks once per rank, footprints, the largest working set) equals
    rank_figures' after each of 200 random moves, and its prediction of a move equals the memory after it.
    Bound: sums of at most 200 terms of at most 2·10¹⁰ B in another order differ by ≤ 200 ε 2·10¹⁰ < 1 B."""
    ph = _random_phase(1)
    rng = np.random.default_rng(2)
    st = BlockState(ph, ph.ranks, np.ones(ph.n_ranks), limit=1e12)
    for _ in range(200):
        vs = rng.choice(np.flatnonzero(ph.migratable), rng.integers(1, 6), replace=False)
        src = {int(st.r[v]) for v in vs}
        dst = int(rng.integers(0, ph.n_ranks))
        predicted = st.memory(dst, vs[st.r[vs] != dst], None) if len(src) == 1 and dst not in src else None
        left = st.memory(next(iter(src)), None, vs) if len(src) == 1 and dst not in src else None
        st.move(vs, dst)
        truth = rank_figures(ph, st.r, WorkModel()).memory
        assert np.allclose(st.memories(), truth, rtol=0, atol=1.0)
        if predicted is not None:
            assert abs(predicted - truth[dst]) <= 1.0 and abs(left - truth[next(iter(src))]) <= 1.0


@pytest.mark.parametrize("seed", range(6))
def test_bounding_conserves_tasks_and_load_and_keeps_the_limit(seed):
    """Every task once, the load conserved, the tasks that are not migratable in place; every rank within the
    limit after the step if the repair placed everything (``unplaced`` counts those that are not, as the work
    model's memory_over does); the largest load relative to the fair share never above the balancer's."""
    ph = _random_phase(seed)
    caps = np.full(ph.n_ranks, 1.0 / ph.n_ranks)
    limit = _limit(5, 40)
    got = bound_assignment(ph, ph.ranks, caps, limit)
    assert got.ranks.shape == ph.ranks.shape and got.ranks.min() >= 0 and got.ranks.max() < ph.n_ranks
    assert np.array_equal(got.ranks[~ph.migratable], ph.ranks[~ph.migratable])
    loads = np.bincount(got.ranks, weights=ph.loads, minlength=ph.n_ranks)
    assert abs(loads.sum() - ph.loads.sum()) <= 1e-12 * ph.loads.sum() * ph.n_tasks
    after = phase_figures(ph, got.ranks, WorkModel(memory_limit=limit), caps)
    assert after["memory_over"] == got.info["unplaced"]
    assert after["imbalance"] <= got.info["imbalance_balancer"] * (1 + 1e-12)


def test_a_block_blind_balancer_is_repaired_and_refined():
    """Twelve blocks of four tasks on rank 0 of 4, a limit of 4 blocks a rank: spreading every block's tasks over
    every rank (what a balancer that chooses tasks one at a time by load may do) puts all twelve blocks on every
    rank; the repair gathers them into whole clusters within the limit, and the refinement rebalances to the
    fair share exactly (48 equal tasks, 12 per rank)."""
    ph = _phase(4, [[1.0] * 4] * 12, [0] * 12)
    spread = np.arange(ph.n_tasks) % 4
    limit = _limit(4, 16)
    wm = WorkModel(memory_limit=limit)
    assert phase_figures(ph, spread, wm)["memory_over"] == 4
    got = bound_assignment(ph, spread, np.ones(4), limit)
    after = phase_figures(ph, got.ranks, wm)
    assert got.info["memory_over_balancer"] == 4 and got.info["unplaced"] == 0 and after["memory_over"] == 0
    assert after["imbalance"] == 1.0
    only = bound_assignment(ph, spread, np.ones(4), limit, refinement=False)
    assert phase_figures(ph, only.ranks, wm)["memory_over"] == 0 and "refine_steps" not in only.info


def test_what_cannot_be_placed_is_reported():
    """Two ranks, each holding three blocks under a limit of two: no rank can take a block, so the repair moves
    nothing and reports both ranks."""
    ph = _phase(2, [[1.0, 2.0]] * 6, [0, 0, 0, 1, 1, 1])
    got = bound_assignment(ph, ph.ranks, np.ones(2), _limit(2, 6))
    assert got.info["unplaced"] == 2 and got.info["repair_moved"] == 0


def test_the_refinement_splits_a_block_heavier_than_a_share():
    """A block of 6 units of load 20 (120) beside blocks of 20 and 10, on 4 ranks of 4 slots: the fair share is
    52.5; only splitting the big block reaches it within one task's load (20: 60 / 52.5 = 1.143 at most)."""
    ph = _phase(4, [[20.0] * 6, [5.0] * 4, [5.0] * 4, [10.0], [10.0], [10.0], [5.0, 5.0]], [0, 1, 1, 2, 2, 3, 3])
    caps = np.ones(4)
    got = bound_assignment(ph, ph.ranks, caps, _limit(4, 20))
    after = phase_figures(ph, got.ranks, WorkModel(memory_limit=_limit(4, 20)))
    assert after["memory_over"] == 0 and after["imbalance"] <= 60.0 / 52.5 and got.info["refine_splits"] >= 1


def test_the_descent_is_deterministic_and_monotone():
    """Twice the same answer; each step lowers the largest load relative to the share or leaves it (the pair's
    larger u ends below the giver's)."""
    ph = _random_phase(7)
    caps = np.linspace(1, 2, ph.n_ranks)
    a = bound_assignment(ph, ph.ranks, caps, _limit(5, 60))
    b = bound_assignment(ph, ph.ranks, caps, _limit(5, 60))
    assert np.array_equal(a.ranks, b.ranks) and a.info == b.info
    st = BlockState(ph, ph.ranks, caps, _limit(5, 60))
    repair(st)
    top = st.u().max()
    for _ in range(30):
        if refine(st, max_steps=1)["refine_steps"] == 0:
            break
        assert st.u().max() <= top * (1 + 1e-12)
        top = st.u().max()


def test_replay_applies_the_memory_step_to_every_balancer():
    """Under --memory-limit every balancer's assignment goes through the step (its own figures reported);
    memory_step off keeps the balancer's, repair the repair only; a bad value is one line."""
    ph = _phase(4, [[1.0] * 4] * 12, [0] * 12)
    wm = WorkModel(memory_limit=_limit(4, 16))
    for name in ("metis", "grapevine", "pcg", "mincost"):
        res = replay_phase(ph, name, work_model=wm, graph="full")
        assert res.after["memory_over"] == 0 and "imbalance_balancer" in res.info, name
    off = replay_phase(ph, "metis", work_model=wm, memory_step="off")
    assert "imbalance_balancer" not in off.info
    with pytest.raises(Exception, match="memory_step 'both': expected refine, repair or off"):
        check_options(memory_step="both")


def test_a_phase_without_load_or_within_its_share_is_left_alone():
    """Zero loads (no share to balance toward) and a balanced phase within the limit: nothing moves, no NaN."""
    zero = _phase(3, [[0.0, 0.0]] * 3, [0, 1, 2])
    got = bound_assignment(zero, zero.ranks, np.ones(3), _limit(2, 4))
    assert np.array_equal(got.ranks, zero.ranks) and got.info["refine_steps"] == 0
    fair = _phase(3, [[1.0, 2.0]] * 3, [0, 1, 2])
    got = bound_assignment(fair, fair.ranks, np.ones(3), _limit(2, 4))
    assert np.array_equal(got.ranks, fair.ranks) and got.info["imbalance_balancer"] == 1.0


def test_a_trace_experiment_refuses_a_memory_step_without_a_limit():
    from hermes.trace.trace_experiment import TRACE_OPTIONS, _check_run
    from hermes.trace.trace_phase import TraceError

    run = {"id": "r1", "algorithm": "pcg", "params": {}, "options": {**TRACE_OPTIONS, "memory_step": "repair"}}
    with pytest.raises(TraceError, match="run r1: memory_step repair: needs memory_limit"):
        _check_run(run)
    _check_run({**run, "options": {**run["options"], "memory_limit": 8e9}})


def test_tasks_without_a_block_leave_a_full_rank_one_by_one():
    """Footprints only (no shared blocks): rank 0 of 3 holds four tasks of 10 B under a 25 B limit; the repair
    moves tasks off it, each to a rank with room, until every rank fits."""
    ph = TracePhase(3, np.arange(4, dtype=np.int64), np.ones(4), np.zeros(4, dtype=np.int64),
                    np.zeros(4, dtype=np.int64), np.ones(4, dtype=bool), 0,
                    user={"task_footprint_bytes": np.full(4, 10.0)})
    got = bound_assignment(ph, ph.ranks, np.ones(3), 25.0, refinement=False)
    mem = rank_figures(ph, got.ranks, WorkModel()).memory
    assert got.info["unplaced"] == 0 and mem.max() <= 25.0 and got.info["repair_moved"] == 2


def test_yaml_off_is_the_memory_step_off():
    """YAML and --set read a bare off as false: a trace experiment takes it as memory_step off."""
    from hermes.trace.trace_experiment import trace_experiment

    exp = trace_experiment("x", axes={"memory_step": ["refine", False]}, sets={"memory_limit": 8e9})
    assert exp["axes"]["memory_step"] == ["refine", "off"]
    assert trace_experiment("x", sets={"memory_step": False})["set"]["memory_step"] == "off"
