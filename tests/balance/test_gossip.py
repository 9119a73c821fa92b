"""Grapevine gossip (seed 004 ch. 2–4): kernels, invariants, the report's iso-load results, the lab."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from hermes.balance.gossip import grapevine, grapevine_iter
from hermes.balance.gossip_serial import _bitrows, _members, _merge, _pad_row, _pick_targets
from hermes.lab.gossip import format_gossip_report, gossip_lab, iso_optimum, make_objects
from hermes.balance.registry import BALANCERS, check_params
from hermes.errors import BalancerError


def random_known(p: int, n: int, density: float, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).random((n, p)) < density
    rows = np.zeros((n, (p + 63) // 64), dtype=np.uint64)
    for i in range(n):
        for b in np.flatnonzero(bits[i]):
            rows[i, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return rows


# -- kernels ------------------------------------------------------------------------------------
@pytest.mark.parametrize("p,f,density,seed", [(5, 3, 0.3, 0), (64, 4, 0.5, 1), (130, 6, 0.9, 2), (200, 2, 0.0, 3),
                                              (70, 8, 0.97, 4)])
def test_pick_targets_matches_sequential_sampling(p, f, density, seed):
    n = 40
    excl = random_known(p, n, density, seed) | _pad_row(p, (p + 63) // 64)
    u = np.random.default_rng(seed + 10).random((n, f))
    got = _pick_targets(excl, u, p)
    rows, ids = _members(excl, p)
    for i in range(n):
        clear = sorted(set(range(p)) - set(ids[rows == i].tolist()))
        picks = []
        for j in range(min(f, len(clear))):
            remaining = [c for c in clear if c not in picks]
            picks.append(remaining[min(int(u[i, j] * len(remaining)), len(remaining) - 1)])
        assert got[i].tolist() == picks + [-1] * (f - len(picks))


def test_bitset_members_and_merge():
    p = 150
    known = random_known(p, p, 0.05, 7)
    rows, ids = _members(known, p)
    dense = np.zeros((p, p), dtype=bool)
    dense[rows, ids] = True
    assert np.all(np.diff(rows) >= 0) and np.array_equal(_members(_bitrows(np.array([3, 149]), 3), p)[1], [3, 149])
    rng = np.random.default_rng(8)
    src, dst = rng.integers(0, p, 400), rng.integers(0, p, 400)
    ref = dense.copy()
    for s, d in zip(src, dst):  # synchronous: from the old rows
        ref[d] |= dense[s]
    r2, i2 = _members(_merge(known, src, dst), p)
    got = np.zeros_like(dense)
    got[r2, i2] = True
    assert np.array_equal(got, ref)


# -- invariants ---------------------------------------------------------------------------------
def random_case(seed: int, p: int = 40, n: int = 600, mapped: int = 5):
    rng = np.random.default_rng(seed)
    return rng.lognormal(0.0, 1.0, n), rng.integers(0, mapped, n), p


@pytest.mark.parametrize("criterion", ["original", "modified"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_iteration_moves_exactly_its_transfers(criterion, seed):
    loads, owner, p = random_case(seed)
    states = list(grapevine_iter(loads, owner, p, iterations=6, rounds=3, fanout=3, criterion=criterion, seed=seed))
    for a, b in zip(states, states[1:]):
        assert np.count_nonzero(a.object_rank != b.object_rank) == b.record["transfers"]
        assert np.allclose(b.loads, np.bincount(b.object_rank, weights=loads, minlength=p))
        x = b.loads
        assert b.record["imbalance"] == pytest.approx(x.max() / (loads.sum() / p) - 1)
        assert b.record["max"] == x.max() and b.record["min"] == x.min()
        assert b.record["sigma"] == pytest.approx(x.std())
    assert states[-1].loads.sum() == pytest.approx(loads.sum())
    assert states[-1].record["imbalance"] < states[0].record["imbalance"]


def test_seeded_and_reproducible():
    loads, owner, p = random_case(3)
    a = grapevine(loads, owner, p, iterations=4, seed=5)
    b = grapevine(loads, owner, p, iterations=4, seed=5)
    c = grapevine(loads, owner, p, iterations=4, seed=6)
    assert np.array_equal(a.object_rank, b.object_rank) and a.history == b.history
    assert not np.array_equal(a.object_rank, c.object_rank)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_single_source_first_iteration_obeys_the_criteria(seed):
    # with one overloaded rank its view of the receivers is exact: criterion 6 keeps every receiver
    # below L_ave; criterion 6' never raises the maximum (report Lemma 1)
    loads, owner, p = random_case(seed, p=30, n=300, mapped=1)
    ave = loads.sum() / p
    orig = list(grapevine_iter(loads, owner, p, iterations=1, criterion="original", seed=seed))[-1]
    assert orig.record["transfers"] > 0 and np.all(orig.loads[1:] < ave)
    mod = list(grapevine_iter(loads, owner, p, iterations=1, criterion="modified", seed=seed))[-1]
    assert mod.record["transfers"] > 0 and mod.loads.max() < loads.sum()


@pytest.mark.parametrize("criterion", ["original", "modified"])
def test_heterogeneous_speeds_compare_relative_loads(criterion):
    n, p = 2000, 10
    speeds = np.array([4.0, 2.0] + [1.0] * 8)
    owner = np.random.default_rng(0).integers(0, 3, n)
    res = grapevine(np.ones(n), owner, p, iterations=15, rounds=3, fanout=3, criterion=criterion, seed=1,
                    speeds=speeds)
    final = np.bincount(res.object_rank, minlength=p)
    x = final / speeds
    assert res.history[-1]["imbalance"] == pytest.approx(x.max() / (n / speeds.sum()) - 1)
    assert res.history[-1]["imbalance"] < 0.1
    assert final[0] > 3 * final[2:].mean()
    # a power-of-two scale of the speeds changes no rounding, hence nothing
    again = grapevine(np.ones(n), owner, p, iterations=15, rounds=3, fanout=3, criterion=criterion, seed=1,
                      speeds=2 * speeds)
    assert np.array_equal(again.object_rank, res.object_rank)


def test_stopping_criterion_and_degenerate_inputs():
    # |P| divides |O|: 6' reaches F(D) = 0 and stops before using all its iterations
    res = grapevine(np.ones(10_000), np.random.default_rng(0).integers(0, 100, 10_000), 100, iterations=30, seed=0)
    assert res.converged and res.iterations < 30 and len(res.history) == res.iterations + 1
    assert res.history[-1]["imbalance"] == 0.0
    # a loose threshold: stops as soon as max x ≤ T x̄, not before
    loads, owner, p = random_case(4)
    res = grapevine(loads, owner, p, iterations=30, threshold=1.3, seed=0)
    assert res.converged and res.history[-1]["imbalance"] <= 0.3 < res.history[-2]["imbalance"]
    assert grapevine(loads, owner, p, threshold=1e9).iterations == 0
    one = grapevine(loads, np.zeros(loads.size, int), 1)
    assert one.converged and one.iterations == 0
    zero = grapevine(np.zeros(50), np.zeros(50, int), 4)
    assert zero.iterations == 0 and zero.history[0]["imbalance"] == 0.0
    empty = grapevine(np.zeros(0), np.zeros(0, int), 4)
    assert empty.object_rank.size == 0 and empty.converged


def test_counters_follow_the_message_pattern():
    loads, owner, p = random_case(5)
    rounds = 3
    res = grapevine(loads, owner, p, iterations=5, rounds=rounds, fanout=2, seed=0)
    it = res.iterations
    assert it == 5 and res.counters.iterations == it
    assert res.counters.exchange_rounds == it * (rounds + 1) + 1
    assert res.counters.collectives == {"allgather": it + 1, "alltoall": it * (rounds + 1) + 1}
    away = int(np.count_nonzero(res.object_rank != owner))
    payload = res.counters.bytes - 48 * p * (it + 1) - 8 * p * p * (it * (rounds + 1) + 1) - 8 * away
    transfers = sum(h["transfers"] for h in res.history)
    assert payload % 24 == 0 and payload > 24 * transfers
    assert res.counters.messages > it * 2  # at least the fanout of one underloaded rank per round


@pytest.mark.parametrize("kwargs,match", [
    ({"fanout": 0}, "fanout"), ({"rounds": 0}, "rounds"), ({"iterations": -1}, "iterations"),
    ({"threshold": 0.5}, "threshold"), ({"threshold": float("nan")}, "threshold"), ({"criterion": "6"}, "criterion"),
    ({"seed": None}, "seed"), ({"seed": -3}, "seed"), ({"speeds": [1.0, 0.0, 1.0]}, "speeds"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(BalancerError, match=match):
        grapevine(np.ones(4), np.array([0, 1, 2, 0]), 3, **kwargs)


@pytest.mark.parametrize("loads,owner,p,match", [
    ([1.0, -1.0], [0, 1], 2, "non-negative"), ([1.0, 2.0], [0, 2], 2, "0..1"), ([1.0], [0, 0], 2, "object ranks"),
    ([1.0], [0], 0, "n_ranks"),
])
def test_bad_objects(loads, owner, p, match):
    with pytest.raises(BalancerError, match=match):
        grapevine(loads, owner, p)


# -- the report's results (seed 004 §2.1, §3.2.1) ----------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_iso_load_optimum_with_criterion_6_prime_only(seed):
    # Table 3.2 set-up: |P| = 16², |O| = 10⁴ unit objects placed at random, k = f = 4, T = 1;
    # optimum q = 39, r = 16: min 39, max 40, σ = 0.2421, I = (|P| − r)/|O| = 0.024
    n, p = 10_000, 256
    owner = np.random.default_rng(seed).integers(0, p, n)
    mod = grapevine(np.ones(n), owner, p, iterations=10, criterion="modified", seed=seed).history[-1]
    assert mod["imbalance"] == pytest.approx(iso_optimum(p, n)) == pytest.approx(0.024)
    assert (mod["min"], mod["max"]) == (39.0, 40.0) and mod["sigma"] == pytest.approx(0.2421, abs=1e-4)
    orig = grapevine(np.ones(n), owner, p, iterations=10, criterion="original", seed=seed).history
    assert orig[-1]["imbalance"] > 0.1 and orig[-1]["rejection_rate"] == 1.0 and orig[-1]["transfers"] == 0


def test_mapped_ranks_on_4096_ranks_in_seconds():
    # 10⁴ unit objects from 16 ranks onto 2¹² ranks (report §2.1.1 set-up; LBAF: > 48 min)
    t = time.perf_counter()
    res = gossip_lab(4096, 10_000, 16, "iso", 4, 4, 4, 1.0, "modified", 0)
    assert time.perf_counter() - t < 20.0
    hist = res["history"]
    assert hist[0]["imbalance"] == pytest.approx(hist[0]["max"] / (10_000 / 4096) - 1)
    assert hist[0]["imbalance"] > 250 and hist[-1]["imbalance"] < 5
    assert res["iso_optimum"] == pytest.approx((4096 - 1808) / 10_000)


# -- offline lab and registry -------------------------------------------------------------------
def test_iso_optimum_formula():
    assert iso_optimum(100, 10_000) == 0.0
    assert iso_optimum(256, 10_000) == pytest.approx(0.024)
    assert iso_optimum(8, 5) == pytest.approx(3 / 5)  # one object on 5 of 8 ranks: 1/(5/8) − 1


def test_lab_is_json_ready_and_reported():
    res = gossip_lab(64, 500, 4, "uniform:0.5,1.5", 3, 2, 3, 1.0, "original", 7)
    again = json.loads(json.dumps(res))
    assert again["history"][0]["iteration"] == 0 and len(again["history"]) == 4
    assert {"transfers", "rejected", "imbalance", "min", "max", "sigma"} <= set(again["history"][1])
    assert again["iso_optimum"] is None and again["counters"]["iterations"] == 3
    text = format_gossip_report(res)
    assert "criterion 6 (original)" in text and len(text.splitlines()) == 2 + 4 + 1


def test_make_objects():
    loads, owner = make_objects(50, 1000, 3, "lognormal:0,1", 4)
    assert loads.shape == (1000,) and np.all(loads > 0) and set(np.unique(owner)) == {0, 1, 2}
    loads2, owner2 = make_objects(50, 1000, 3, "lognormal:0,1", 4)
    assert np.array_equal(loads, loads2) and np.array_equal(owner, owner2)
    loads, owner = make_objects(50, 1000, None, "uniform:2,3", 4)
    assert loads.min() >= 2 and loads.max() <= 3 and owner.max() > 40
    for spec in ("gauss:1,2", "uniform:3,1", "uniform:1", "lognormal:0,-1", "iso:2"):
        with pytest.raises(BalancerError):
            make_objects(50, 10, None, spec, 0)
    with pytest.raises(BalancerError, match="mapped ranks"):
        make_objects(50, 10, 51, "iso", 0)


def test_registry_entry_and_checks():
    info = BALANCERS["grapevine"]
    assert info.serial is None and set(info.defaults) == {"iterations", "rounds", "fanout", "threshold",
                                                          "criterion", "seed"}
    assert check_params("grapevine", {"criterion": "original", "seed": 3})["fanout"] == 4
    with pytest.raises(BalancerError, match="balancer.fanout"):
        check_params("grapevine", {"fanout": 0})
    with pytest.raises(BalancerError, match="balancer.criterion"):
        check_params("grapevine", {"criterion": "tempered"})


# -- LBAF LBDatafile traces (hermes.lab.lbaf) ---------------------------------------------------
def test_lbdatafile_round_trip(tmp_path):
    from hermes.lab.lbaf import LBDataset, dataset_from_assignment, read_lbdatafile, write_lbdatafile

    rng = np.random.default_rng(0)
    n, p = 60, 6
    base = dataset_from_assignment(rng.uniform(0, 2, n), rng.integers(0, 4, n), p, ids=rng.permutation(1000)[:n] * 3,
                                   home=rng.integers(0, p, n), phase=3)
    data = LBDataset(**{**base.__dict__, "comm_from": np.sort(base.ids[:5]), "comm_to": base.ids[10:15],
                        "comm_messages": np.arange(1, 6), "comm_bytes": np.linspace(8, 64, 5)})
    paths = write_lbdatafile(tmp_path / "trace", data)
    assert [x.name for x in paths] == [f"trace.{r}.json" for r in range(p)]
    back = read_lbdatafile(tmp_path / "trace")
    assert back.n_ranks == p and back.phase == 3
    for key in ("ids", "loads", "ranks", "home", "migratable", "comm_from", "comm_to", "comm_messages", "comm_bytes"):
        assert np.array_equal(getattr(back, key), getattr(data, key)), key
    doc = json.loads(paths[5].read_text())
    assert doc["metadata"] == {"type": "LBDatafile", "rank": 5} and doc["phases"][0]["tasks"] == []
    # a balanced assignment written back moves the tasks, keeps their homes
    res = grapevine(back.loads, back.ranks, p, iterations=3, seed=0)
    write_lbdatafile(tmp_path / "out", back.with_ranks(res.object_rank))
    moved = read_lbdatafile(tmp_path / "out")
    assert np.array_equal(moved.ranks, res.object_rank) and np.array_equal(moved.home, data.home)
    # and the lab balances a trace exactly as the function does
    lab = gossip_lab(p, 0, None, f"lbaf:{tmp_path / 'trace'}", 3, 4, 4, 1.0, "modified", 0)
    assert lab["history"] == res.history and lab["objects"] == n


def test_reads_the_minimal_lbaf_input(tmp_path):
    from hermes.lab.lbaf import read_lbdatafile

    # ANCHORS.md: the minimal input LBAF accepted, plus what LBAF's output adds
    for r, tasks in enumerate([[(0, 1.5), (1, 0.5)], [(2, 2.0)]]):
        doc = {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r}, "phases": [{"id": 0, "tasks": [
            {"entity": {"type": "object", ("seq_id" if r else "id"): i, "collection_id": 0, "home": r,
                        "migratable": True}, "node": r, "resource": "cpu", "time": t, "user_defined": {"x": 1}}
            for i, t in tasks], "communications": [
            {"type": "Broadcast", "from": {"type": "node", "id": 0}, "to": {"type": "object", "id": 2},
             "messages": 1, "bytes": 4.0}], "lb_iterations": []}]}
        (tmp_path / f"m.{r}.json").write_text(json.dumps(doc))
    data = read_lbdatafile(tmp_path / "m")
    assert data.n_ranks == 2 and data.ids.tolist() == [0, 1, 2] and data.ranks.tolist() == [0, 0, 1]
    assert data.loads.tolist() == [1.5, 0.5, 2.0] and data.comm_from.size == 0


def test_lbdatafile_errors(tmp_path):
    from hermes.errors import MeshError
    from hermes.lab.lbaf import dataset_from_assignment, read_lbdatafile, write_lbdatafile

    with pytest.raises(MeshError, match="no LBDatafile"):
        read_lbdatafile(tmp_path / "none")
    (tmp_path / "z.0.json").write_bytes(b"\x1b\x8f\x00\xff")
    with pytest.raises(MeshError, match="brotli"):
        read_lbdatafile(tmp_path / "z")
    write_lbdatafile(tmp_path / "t", dataset_from_assignment([1.0, 2.0], [0, 1], 2))
    with pytest.raises(MeshError, match="no phase 4"):
        read_lbdatafile(tmp_path / "t", phase=4)
    with pytest.raises(MeshError, match="missing"):
        read_lbdatafile(tmp_path / "t", n_ranks=3)
    doc = json.loads((tmp_path / "t.1.json").read_text())
    doc["phases"][0]["tasks"][0]["entity"]["seq_id"] = 0  # same id as rank 0's task
    (tmp_path / "t.1.json").write_text(json.dumps(doc))
    with pytest.raises(MeshError, match="twice"):
        read_lbdatafile(tmp_path / "t")
    doc["metadata"]["rank"] = 0
    (tmp_path / "t.1.json").write_text(json.dumps(doc))
    with pytest.raises(MeshError, match="metadata says rank 0"):
        read_lbdatafile(tmp_path / "t")
    (tmp_path / "t.1.json").write_text(json.dumps({"type": "LBStatsfile", "phases": []}))
    with pytest.raises(MeshError, match="not an LBDatafile"):
        read_lbdatafile(tmp_path / "t")
    with pytest.raises(MeshError, match="unique"):
        dataset_from_assignment([1.0, 2.0], [0, 1], 2, ids=[4, 4])
