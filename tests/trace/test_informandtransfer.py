"""LBAF's InformAndTransfer ported (hermes.trace.informandtransfer): tasks and load kept, unmovable tasks left in
place, the memory limit kept from a feasible start, no accepted move raising max(W_src, W_dst), the same
assignment for the same seed, and one-line refusals. Its reproduction of LBAF's own figures needs LBAF's data
and is benchmarks/lbaf_memory.py's (results/lbaf_memory.md)."""

from __future__ import annotations

import numpy as np
import pytest

import hermes.trace.informandtransfer as it
from hermes.errors import BalancerError
from hermes.trace.informandtransfer import MAX_SUBSETS, inform_and_transfer
from hermes.trace.phase import TracePhase
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
    ({"criterion": "strictlocalizing"}, "not ported"),
    ({"transfer_strategy": "recursive"}, "not ported"),
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
    from hermes.trace.phase import Trace
    from hermes.trace.replay import replay

    ph = _phase(4, 4, 2)
    with pytest.raises(BalancerError, match=r"^informandtransfer: the port prices a rank by α·load"):
        replay_phase(ph, "informandtransfer", {}, work_model=WorkModel(**weights))
    with pytest.raises(BalancerError, match=r"^informandtransfer: the port prices a rank by α·load"):
        replay(Trace(4, [ph]), ["pcg", "informandtransfer"], work_model=WorkModel(**weights))
    assert replay_phase(ph, "pcg", {}, work_model=WorkModel(**weights)).after  # the others read every term
