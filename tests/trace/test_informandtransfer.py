"""LBAF's InformAndTransfer ported (hermes.trace.informandtransfer): tasks and load kept, unmovable tasks left in
place, the memory limit kept from a feasible start, no accepted move raising max(W_src, W_dst), the same
assignment for the same seed, and one-line refusals, for the Clustering and Recursive strategies (Recursive's
object orders as documented) under the Tempered and StrictLocalizing criteria. Its reproduction of LBAF's own
figures needs LBAF's data and is benchmarks/lbaf_memory.py's (results/lbaf_memory.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hermes.trace.informandtransfer as it
from hermes.balance.registry import get_balancer
from hermes.errors import BalancerError
from hermes.trace.informandtransfer import MAX_SUBSETS, inform_and_transfer
from hermes.trace.trace_phase import TracePhase
from hermes.trace.replay import replay_phase
from hermes.trace.workmodel import WorkModel, rank_figures

#: bytes of a shared block, of a rank's baseline, of a task's footprint and working set (LBAF's toy data's)
BLOCK, BASE, FOOT, WORK = 1.3e9, 0.98e9, 1024.0, 1.1e8
#: at most 5 blocks per rank (LBAF's toy data's limit)
LIMIT = 8e9


def _phase(p: int, n_blocks: int, per_block: int, *, seed: int = 0, fixed: int = 0, loose: int = 0,
           skew: bool = True) -> TracePhase:
    """``n_blocks`` shared blocks of ``per_block`` tasks each with random integer loads, every block on one rank
    (the first ranks more crowded when ``skew``), tasks listed in random order and with scattered ids; the first
    ``fixed`` tasks not migratable, the last ``loose`` without a shared block."""
    rng = np.random.default_rng(seed)
    n = n_blocks * per_block
    loads = rng.integers(1, 60, n).astype(np.float64)
    sid = np.repeat(np.arange(n_blocks, dtype=np.float64), per_block)
    home = (np.arange(n_blocks) % max(1, p // 2 if skew else p)).astype(np.int64)
    ranks = np.repeat(home, per_block)
    sid[n - loose:] = -1.0
    ids = np.sort(rng.choice(10**7, n, replace=False)).astype(np.int64) * 8 + 3
    mig = np.ones(n, dtype=bool)
    mig[:fixed] = False
    user = {"shared_id": sid, "shared_bytes": np.full(n, BLOCK), "task_footprint_bytes": np.full(n, FOOT),
            "task_working_bytes": np.full(n, WORK)}
    listing = rng.permutation(n).astype(np.int64)
    return TracePhase(p, ids, loads, ranks, ranks.copy(), mig, 0, user=user, rank_working=np.full(p, BASE),
                      listing=listing)


DET = {"n_iterations": 4, "n_rounds": 3, "fanout": 3, "deterministic_transfer": True, "max_objects_per_transfer": 6}
RANDOM = {"n_iterations": 4, "n_rounds": 3, "fanout": 3, "deterministic_transfer": False, "max_subclusters": 8}


@pytest.mark.parametrize("params", [DET, RANDOM, {**DET, "separate_subclustering": True},
                                    {**RANDOM, "max_subclusters": 0}])
@pytest.mark.parametrize("seed", [0, 1])
def test_tasks_load_and_limit_kept(params, seed):
    ph = _phase(8, 20, 5, seed=seed, fixed=3, loose=4)
    assert rank_figures(ph, ph.ranks, WorkModel(memory_limit=LIMIT)).memory.max() <= LIMIT  # a feasible start
    res = inform_and_transfer(ph, params, memory_limit=LIMIT)
    assert res.ranks.shape == ph.ranks.shape and res.ranks.min() >= 0 and res.ranks.max() < ph.n_ranks
    before, after = ph.rank_loads(), ph.rank_loads(res.ranks)
    assert after.sum() == pytest.approx(before.sum())
    stay = ~ph.migratable | (ph.user["shared_id"] < 0)  # never moved by Clustering
    assert np.array_equal(res.ranks[stay], ph.ranks[stay])
    assert rank_figures(ph, res.ranks, WorkModel(memory_limit=LIMIT)).memory.max() <= LIMIT
    assert after.max() <= before.max()
    assert len(res.max_work) == len(res.imbalance) <= params["n_iterations"]


@pytest.mark.parametrize("params", [DET, RANDOM])
def test_same_seed_same_run(params):
    ph = _phase(8, 24, 4, seed=3)
    a = inform_and_transfer(ph, {**params, "seed": 7}, memory_limit=LIMIT)
    b = inform_and_transfer(ph, {**params, "seed": 7}, memory_limit=LIMIT)
    assert np.array_equal(a.ranks, b.ranks) and a.max_work == b.max_work and a.transfers == b.transfers


@pytest.mark.parametrize("params", [DET, RANDOM, {**RANDOM, "max_subclusters": 0}])
@pytest.mark.parametrize("limit", [LIMIT, None])
def test_tempered_never_raises_the_pair_maximum(monkeypatch, params, limit):
    """Every transfer made (not the criterion's trial moves) lowers max(W_src, W_dst)."""
    moves: list[tuple[float, float]] = []
    trial = [0]
    tempered, transfer = it._Ranks.tempered, it._Ranks.transfer

    def watched_tempered(self, *args):
        trial[0] += 1
        try:
            return tempered(self, *args)
        finally:
            trial[0] -= 1

    def watched_transfer(self, src, objs, dst, back=()):
        if trial[0]:
            return transfer(self, src, objs, dst, back)
        w0 = max(self.work(src), self.work(dst))
        n = transfer(self, src, objs, dst, back)
        moves.append((w0, max(self.work(src), self.work(dst))))
        return n

    monkeypatch.setattr(it._Ranks, "tempered", watched_tempered)
    monkeypatch.setattr(it._Ranks, "transfer", watched_transfer)
    inform_and_transfer(_phase(8, 20, 5, seed=2), params, memory_limit=limit)
    assert moves and all(after < before for before, after in moves)


def test_gossip_reaches_every_rank():
    """With fanout p − 1 every rank hears of every other in round 0 (knowledge ratio 1, LBAF's kappa)."""
    ph = _phase(6, 12, 3)
    res = inform_and_transfer(ph, {**DET, "fanout": 5, "n_rounds": 1})
    assert res.knowledge == [1.0] * len(res.knowledge)


def test_without_limit_a_single_cluster_can_go_anywhere():
    """Two ranks, two blocks on rank 0: one block moves (a one-way push: the empty cluster on the target)."""
    ph = TracePhase(2, np.array([10, 20, 30, 40]), np.array([5.0, 5.0, 5.0, 5.0]), np.zeros(4, np.int64),
                    np.zeros(4, np.int64), np.ones(4, bool), user={"shared_id": np.array([0.0, 0.0, 1.0, 1.0])})
    res = inform_and_transfer(ph, {"n_iterations": 1, "fanout": 1, "deterministic_transfer": True})
    assert sorted(ph.rank_loads(res.ranks).tolist()) == [10.0, 10.0]
    assert res.max_work == [10.0] and res.swaps == 1


def test_replay_reports_the_ports_own_figures():
    ph = _phase(8, 20, 5, seed=4)
    got = replay_phase(ph, "informandtransfer", DET, work_model=WorkModel(memory_limit=LIMIT), memory_step="off")
    last = float(got.info["max_work_per_iteration"].split()[-1])
    assert got.after["work_max"] == pytest.approx(last)
    assert got.info["iterations"] == len(got.info["max_work_per_iteration"].split())
    direct = inform_and_transfer(ph, DET, memory_limit=LIMIT)
    assert np.array_equal(got.ranks, direct.ranks)


@pytest.mark.parametrize("params, words", [
    ({"fanouts": 2}, "fanouts"),
    ({"fanout": -1}, "fanout"),
    ({"n_iterations": 2.5}, "n_iterations"),
    ({"cluster_swap_rtol": -0.1}, "cluster_swap_rtol"),
    ({"max_objects_per_transfer": 0}, "max_objects_per_transfer"),
    ({"deterministic_transfer": "yes"}, "deterministic_transfer"),
    ({"criterion": "greedy"}, "criterion"),
    ({"transfer_strategy": "random"}, "transfer_strategy"),
    ({"order_strategy": "by_size"}, "order_strategy"),
    ({"order_strategy": "Element_ID"}, "order_strategy"),
    ({"seed": -3}, "seed"),
])
def test_bad_parameters_refused_in_one_line(params, words):
    with pytest.raises(BalancerError) as err:
        inform_and_transfer(_phase(4, 4, 2), params)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_exhaustive_subclustering_refused_beyond_the_bound():
    """A cluster of 25 objects, deterministic, no max_objects_per_transfer: 2^25 − 1 subsets, refused."""
    ph = TracePhase(2, np.arange(26), np.ones(26), np.r_[np.zeros(25, np.int64), 1], np.zeros(26, np.int64),
                    np.ones(26, bool), user={"shared_id": np.r_[np.zeros(25), 1.0]})
    assert 2**25 > MAX_SUBSETS
    with pytest.raises(BalancerError, match=r"cluster of 25 objects, max_objects_per_transfer None") as err:
        inform_and_transfer(ph, {"n_iterations": 1, "fanout": 1, "deterministic_transfer": True})
    assert "\n" not in str(err.value)
    # bounded by max_objects_per_transfer it runs (C(25, 1) + ... + C(25, 4) subsets)
    res = inform_and_transfer(ph, {"n_iterations": 1, "fanout": 1, "deterministic_transfer": True,
                                   "max_objects_per_transfer": 4})
    assert ph.rank_loads(res.ranks).max() < 25.0


def test_capacities_refused_by_replay():
    ph = _phase(4, 4, 2)
    with pytest.raises(BalancerError, match="equal speed"):
        replay_phase(ph, "informandtransfer", {}, capacities=[1.0, 2.0, 1.0, 1.0])


@pytest.mark.parametrize("weights", [{"beta": 1e-9}, {"gamma": 1.0}, {"delta": 1e-3}])
def test_work_terms_the_port_does_not_read_are_refused(weights):
    """The port prices a rank by α·load under the memory limit (docs/WORKMODEL.md): a β, γ or δ it would ignore
    is one line, for one phase and for a whole trace."""
    from hermes.trace.trace_phase import Trace
    from hermes.trace.replay import replay

    ph = _phase(4, 4, 2)
    with pytest.raises(BalancerError, match=r"^informandtransfer: the port prices a rank by α·load"):
        replay_phase(ph, "informandtransfer", {}, work_model=WorkModel(**weights))
    with pytest.raises(BalancerError, match=r"^informandtransfer: the port prices a rank by α·load"):
        replay(Trace(4, [ph]), ["pcg", "informandtransfer"], work_model=WorkModel(**weights))
    assert replay_phase(ph, "pcg", {}, work_model=WorkModel(**weights)).after  # the others read every term


# -- Recursive strategy and StrictLocalizing criterion --------------------------------------------------------------
REC_DET = {**DET, "transfer_strategy": "recursive", "order_strategy": "element_id"}
REC_RANDOM = {**RANDOM, "transfer_strategy": "recursive", "max_objects_per_transfer": 4}


def _talking(p: int, n_blocks: int, per_block: int, n_comms: int, *, seed: int = 0, **kw) -> TracePhase:
    """:func:`_phase` with ``n_comms`` random communications between its tasks (and one to an object that is not a
    task of the phase, which counts for nothing)."""
    ph = _phase(p, n_blocks, per_block, seed=seed, **kw)
    rng = np.random.default_rng(seed + 100)
    ends = rng.choice(ph.ids, (n_comms, 2))
    frm = np.r_[ends[:, 0], ph.ids[0]]
    to = np.r_[ends[:, 1], 5]  # 5: no task has this id (theirs are 8k + 3)
    return replace(ph, comm_from=frm, comm_to=to, comm_messages=np.ones(frm.size, np.int64),
                   comm_bytes=np.full(frm.size, 8.0), comm_from_rank=None, comm_to_rank=None)


def test_strictlocalizing_criterion():
    """−1 exactly when a task of the set sends to or receives from a task now on the source (another task of the
    set included: it has not moved yet), whatever the target and the loads."""
    ids = np.array([10, 20, 30, 40, 50])
    ph = TracePhase(2, ids, np.array([1.0, 2.0, 3.0, 4.0, 50.0]), np.array([0, 0, 0, 0, 1]), np.zeros(5, np.int64),
                    np.ones(5, bool), comm_from=np.array([10, 50, 40]), comm_to=np.array([20, 30, 99]),
                    comm_messages=np.ones(3, np.int64), comm_bytes=np.ones(3))
    m = it._Ranks(ph, None)
    assert m.strict(0, [10], 1) == m.strict(0, [20], 1) == -1.0  # 10 → 20, both on rank 0
    assert m.strict(0, [10, 20], 1) == -1.0
    assert m.strict(0, [30], 1) == 1.0  # its partner 50 is on rank 1
    assert m.strict(0, [40], 1) == 1.0  # 99 is no task of the phase
    assert m.strict(0, [30, 40], 0) == 1.0
    assert m.strict(1, [50], 0) == 1.0  # its partner 30 is on rank 0, not on the source
    m.transfer(0, [20], 1)  # the criterion reads where the partners are now
    assert m.strict(0, [10], 1) == 1.0 and m.strict(1, [20], 0) == 1.0
    m.transfer(0, [30], 1)
    assert m.strict(1, [50], 0) == m.strict(1, [30], 0) == -1.0


@pytest.mark.parametrize("params", [DET, RANDOM, REC_DET, REC_RANDOM])
def test_strictlocalizing_moves_no_task_away_from_a_partner(monkeypatch, params):
    """Under StrictLocalizing every task a transfer takes from a rank talks to no task left on it (both strategies;
    a swap's returning cluster is not judged, as in LBAF)."""
    moved: list[bool] = []
    transfer = it._Ranks.transfer

    def watched(self, src, objs, dst, back=()):
        moved.append(all(self.state.r[q] != src for o in objs for q in self.partners[self.pos[o]]))
        return transfer(self, src, objs, dst, back)

    monkeypatch.setattr(it._Ranks, "transfer", watched)
    ph = _talking(8, 20, 5, 40, seed=1)
    res = inform_and_transfer(ph, {**params, "criterion": "strictlocalizing"})
    assert moved and all(moved) and res.transfers > 0
    # without communications it accepts every move it is offered
    assert inform_and_transfer(_phase(8, 20, 5, seed=1), {**params, "criterion": "strictlocalizing"}).transfers


@pytest.mark.parametrize("params", [REC_DET, REC_RANDOM, {**REC_DET, "order_strategy": "small_objects"},
                                    {**REC_RANDOM, "order_strategy": "fewest_migrations"}])
@pytest.mark.parametrize("seed", [0, 1])
def test_recursive_keeps_tasks_load_and_limit(monkeypatch, params, seed):
    """Recursive moves any migratable task (a shared block or not), never more than max_objects_per_transfer at
    once, keeps the load and, from a feasible start, every rank within the memory limit."""
    sizes: list[int] = []
    transfer = it._Ranks.transfer

    def watched(self, src, objs, dst, back=()):
        sizes.append(len(objs) + len(back))
        return transfer(self, src, objs, dst, back)

    monkeypatch.setattr(it._Ranks, "transfer", watched)
    ph = _phase(8, 20, 5, seed=seed, fixed=3, loose=4)
    assert rank_figures(ph, ph.ranks, WorkModel(memory_limit=LIMIT)).memory.max() <= LIMIT
    res = inform_and_transfer(ph, params, memory_limit=LIMIT)
    before, after = ph.rank_loads(), ph.rank_loads(res.ranks)
    assert res.ranks.shape == ph.ranks.shape and res.ranks.min() >= 0 and res.ranks.max() < ph.n_ranks
    assert after.sum() == pytest.approx(before.sum()) and after.max() <= before.max()
    assert np.array_equal(res.ranks[~ph.migratable], ph.ranks[~ph.migratable])
    assert rank_figures(ph, res.ranks, WorkModel(memory_limit=LIMIT)).memory.max() <= LIMIT
    assert res.transfers > 0 and res.swaps == res.subcluster_transfers == 0
    assert max(sizes) <= params["max_objects_per_transfer"]


@pytest.mark.parametrize("params", [REC_DET, REC_RANDOM, {**REC_RANDOM, "criterion": "strictlocalizing"}])
def test_recursive_same_seed_same_run(params):
    ph = _talking(8, 24, 4, 30, seed=3)
    a = inform_and_transfer(ph, {**params, "seed": 7}, memory_limit=LIMIT)
    b = inform_and_transfer(ph, {**params, "seed": 7}, memory_limit=LIMIT)
    assert np.array_equal(a.ranks, b.ranks) and a.max_work == b.max_work and a.transfers == b.transfers


def test_order_strategies():
    """Each order as LBAF's Recursive strategy lists a rank's tasks (the last is popped first). Rank 0 holds loads
    8, 1, 4, 2, 6 (ids 1–5) and ranks 1–3 hold 13 each: the initial average is 15, rank 0's excess 21 − 15 = 6."""
    loads = np.array([8.0, 1.0, 4.0, 2.0, 6.0, 13.0, 13.0, 13.0])
    ranks = np.array([0, 0, 0, 0, 0, 1, 2, 3])
    ph = TracePhase(4, np.arange(1, 9), loads, ranks, ranks.copy(), np.ones(8, bool),
                    listing=np.array([3, 0, 4, 1, 2, 0, 0, 0]))
    load = dict(zip(range(1, 9), loads.tolist()))

    def order(how: str) -> list[int]:
        run = it._InformAndTransfer(ph, get_balancer("informandtransfer").check({"order_strategy": how}), None)
        assert run.ave_load == 15.0
        return run.ordered(0)

    run = it._InformAndTransfer(ph, get_balancer("informandtransfer").check({}), None)
    assert order("arbitrary") == list(run.m.objects[0]) and sorted(order("arbitrary")) == [1, 2, 3, 4, 5]
    assert order("element_id") == [1, 2, 3, 4, 5]
    assert [load[o] for o in order("decreasing_loads")] == [8.0, 6.0, 4.0, 2.0, 1.0]
    assert [load[o] for o in order("increasing_loads")] == [1.0, 2.0, 4.0, 6.0, 8.0]
    # the tasks of at most the excess, largest first, then the larger ones, smallest first
    assert [load[o] for o in order("fewest_migrations")] == [6.0, 4.0, 2.0, 1.0, 8.0]
    # ascending cumulated loads 1, 3, 7, 13, 21: the excess 6 falls after 3, so the first 2 + 1 tasks (largest
    # first), then the rest (smallest first)
    assert [load[o] for o in order("small_objects")] == [4.0, 2.0, 1.0, 6.0, 8.0]
    assert set(it.ORDER_STRATEGIES) == {"arbitrary", "element_id", "decreasing_loads", "increasing_loads",
                                        "fewest_migrations", "small_objects"}


def test_recursive_pops_the_end_of_the_list_first():
    """Two ranks, tasks of loads 1, 2, 3 on rank 0 (ids 1, 2, 3), deterministic: with element_id the first task
    tried is id 3 (the list's last), which the Tempered criterion accepts (6 → 3 | 3)."""
    ph = TracePhase(2, np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0]), np.zeros(3, np.int64),
                    np.zeros(3, np.int64), np.ones(3, bool))
    res = inform_and_transfer(ph, {"n_iterations": 1, "fanout": 1, "deterministic_transfer": True,
                                   "transfer_strategy": "recursive", "order_strategy": "element_id"})
    assert res.ranks.tolist() == [0, 0, 1] and res.max_work == [3.0]
    res = inform_and_transfer(ph, {"n_iterations": 1, "fanout": 1, "deterministic_transfer": True,
                                   "transfer_strategy": "recursive", "order_strategy": "decreasing_loads"})
    assert res.ranks.tolist() == [1, 1, 0] and res.max_work == [3.0]  # 1 goes (6 → 5 | 1), then 2 (5 → 3 | 3)
