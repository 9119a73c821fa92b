"""The platform profile thesis2003 (configs/platform-thesis2003.yaml) and its fit to thesis Table 10.1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import thesis_platform as tp
from hermes.runtime.clock import Links
from hermes.errors import ScenarioError
from hermes.scenario import load_scenario
from hermes.sections import PlatformProfile


def test_the_profile_loads_by_name_and_through_a_scenario():
    sc = load_scenario(tp.ROOT / "scenarios" / "thesis-homogeneous.yaml", ["platform.profile=thesis2003"])
    prof = PlatformProfile.load(sc.platform.profile, sc.resolve)
    assert prof.name == "thesis2003" and prof.balance_allreduce > 0 and prof.balance_message > 0
    assert prof.balance_allreduce_hop > 0 and set(prof.balance_setup) == set(tp.BALANCER_OF.values())
    links = prof.links(sc.platform.bandwidth)
    # a collective costs the profile's allreduce plus ⌈log2 p⌉ times the bytes over the bandwidth
    assert links.collective_cost(16, 8.0) == pytest.approx(prof.balance_allreduce + 4 * 8.0 / sc.platform.bandwidth,
                                                           rel=1e-15)
    assert links.cost(0, 1, 0.0) == prof.balance_exchange


def test_a_scenario_without_profile_dumps_as_before():
    sc = load_scenario(tp.ROOT / "scenarios" / "thesis-homogeneous.yaml")
    assert "profile" not in sc.to_dict()["platform"]
    assert Links().collective_cost(16, 8.0) == 4 * (1e-4 + 8.0 / 1e8)


def test_unknown_and_malformed_profiles_are_one_line_errors(tmp_path):
    with pytest.raises(ScenarioError, match=r"^platform.profile: no profile 'nope' .*known: .*thesis2003"):
        PlatformProfile.load("nope", lambda p: tmp_path / p)
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\nbalance_exchange: -1\nbalance_allreduce: 0.01\n")
    with pytest.raises(ScenarioError, match=r"^platform.profile \(p.yaml\): balance_exchange: must be at least 0"):
        PlatformProfile.load("p.yaml", lambda p: tmp_path / p)


def test_the_shipped_profile_is_the_shaped_fit_and_the_bench_charges_it():
    """Rerunning the shaped fit with every Spearman ≥ 0.5 gives the shipped prices (stored to 4 significant digits:
    within 5e-4 relative), and the table10.1 bench under the profile — its links priced per call for each graph's
    maximum degree and diameter, plus the set-up, as the clock charges a balancing call — charges what the shaped
    model says of the shipped prices: at least the model, and at most 1 % more (the bytes of the one- and two-word
    messages at 100 Mbit/s, which the model leaves out)."""
    import os
    from pathlib import Path

    from tests.conftest import SHARED_MESHES

    rows, _ = tp.shipped_fit()
    prof = PlatformProfile.load("thesis2003", lambda p: p)
    shipped = {k: getattr(prof, k) for k in ("balance_exchange", "balance_message", "balance_allreduce",
                                            "balance_allreduce_hop", "balance_setup")}
    shared = Path(os.environ.get("HERMES_SHARED_MESHES", SHARED_MESHES))
    if (shared / "whitaker3.mtx").is_file():
        assert len(rows) == 28
        ranked, _ = tp.shipped_shape(rows)
        fitted = tp.profile_prices(ranked["params"], digits=17)
        for k, v in fitted.items():
            assert shipped[k] == (pytest.approx(v, rel=5e-4) if k != "balance_setup"
                                  else {n: pytest.approx(x, rel=5e-4) for n, x in v.items()}), k
    else:  # a clone without ../shared/meshes: SD_whitaker's 4 entries are missing, so the shipped fit is not rerun
        assert len(rows) == 24 and not any(r["topology"] == "SD_whitaker" for r in rows)
    from hermes.lab.bench import table101_family

    bench = {(r["topology"], r["method"]): r["time"]
             for r in table101_family(environments=("HCUW",), methods=tp.METHODS, links=prof.links(1.25e7),
                                      prices=prof.prices())}
    model = tp.model_seconds(rows, shipped)
    for r, m in zip(rows, model):
        assert m <= bench[r["topology"], r["method"]] <= 1.01 * m, r


@pytest.mark.parametrize("topology, spec, where", [
    ("SD_whitaker", "mesh-file:{shared}/absent.mtx:{p}", "HERMES_SHARED_MESHES"),
    ("SD_airfoil", "mesh-file:{meshes}/absent.vtu:{p}", "git checkout -- meshes/absent.vtu")])
def test_a_missing_mesh_is_refused_in_one_line(monkeypatch, tmp_path, capsys, topology, spec, where):
    """A mesh of Table 10.1 that is not found stops the fit before it starts (it would fit fewer entries, to
    another profile): one line naming the file, its topology and how to point at it; exit status 2."""
    from hermes.lab import bench

    monkeypatch.setitem(bench.TABLE_10_1, topology, spec)
    monkeypatch.setattr(tp, "THESIS_TABLE_10_1", {t: tp.THESIS_TABLE_10_1[t] for t in ("path", topology)})
    monkeypatch.setenv("HERMES_SHARED_MESHES", str(tmp_path))
    assert tp.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"thesis_platform: {Path(spec.split(':')[1]).name} (topology {topology} ") and where in err
    if "{shared}" in spec:
        assert str(tmp_path) in err


@pytest.mark.parametrize("topologies", [("path", "ring", "star"), ("star", "SD_grid20x19")])
def test_the_printed_entries_are_the_rows_fitted(monkeypatch, capsys, topologies):
    """The fit's line counts its entries (4 methods a topology; 3 without GDA), whatever Table 10.1 holds."""
    monkeypatch.setattr(tp, "THESIS_TABLE_10_1", {t: tp.THESIS_TABLE_10_1[t] for t in topologies})
    assert tp.main([]) == 0
    out = capsys.readouterr().out
    n = len(tp.shipped_fit()[0])
    assert n == 4 * len(topologies)
    assert out.startswith(f"two-price fit (HCUW, GDA PCG LPA MPA, {n} entries): ")
    assert f"without GDA ({3 * len(topologies)} entries): " in out


def test_a_run_with_the_profile_charges_only_the_balancer_at_its_costs(tmp_path):
    """quickstart (4 processors, PCG) with and without the profile: every phase's balancer messages cost at least
    τ_x per exchange round and τ_a per collective with the profile, and less than that with the default links
    (the rounds may differ: the policy weighs a further round against the cost of the last)."""
    import hermes

    prof = PlatformProfile.load("thesis2003", lambda p: p)
    runs = [hermes.run(None, 4, out=tmp_path / name, **{"balancer.algorithm": "pcg", "output.pictures": False,
                                                        **extra})
            for name, extra in (("default", {}), ("profile", {"platform.profile": "thesis2003"}))]
    balanced = 0

    def floor(ph):
        c = ph["balance_counters"]
        return prof.balance_exchange * c["exchange_rounds"] + prof.balance_allreduce * sum(c["collectives"].values())

    for a, b in zip(*(r.summary["phases"] for r in runs)):
        if floor(b) > 0:
            balanced += 1
            assert b["balance_counters"]["time"] >= floor(b) * (1 - 1e-12)
            assert b["balance_time"] >= (floor(b) + b["balance_rounds"] * prof.balance_setup["pcg"]) * (1 - 1e-12)
        assert a["balance_counters"]["time"] < floor(a) or floor(a) == 0
    assert balanced >= 1


def test_a_checkpointed_clock_keeps_its_profile():
    """The clock's balance links survive a checkpoint (hermes/lifecycle/codec.py), and only its balancing step
    charges at them."""
    from hermes.runtime.clock import VirtualClock
    from hermes.lifecycle.codec import Decoder, Encoder

    clock = VirtualClock(0, 4, Links(), 1.0, 0.25)
    clock.balance_links = PlatformProfile.load("thesis2003", lambda p: p).links(1e8)
    enc = Encoder({})
    back = Decoder(enc.arrays, {})(enc(clock, "clock"))
    assert back.balance_links == clock.balance_links and back.links == Links()
    with back.balancing():
        assert back.links.collective_cost(4, 0.0) == clock.balance_links.collective_latency
    assert back.links.collective_cost(4, 0.0) == 2 * Links().latency


REDUCED = ("path", "ring", "star", "SD_grid20x19")


def _reduced_rows(monkeypatch):
    monkeypatch.setattr(tp, "THESIS_TABLE_10_1", {t: tp.THESIS_TABLE_10_1[t] for t in REDUCED})
    return tp.counts()


def test_the_shaped_model_beats_the_constant_per_method_baseline_on_a_reduced_table(monkeypatch):
    """On 4 topologies (16 entries) the shaped model's least squares has a lower rms log residual than one
    constant per method (which it contains: its set-ups), and every price is non-negative."""
    rows = _reduced_rows(monkeypatch)
    assert len(rows) == 16
    base, shaped = tp.baseline(rows), tp.shaped_fit(rows)
    assert shaped["rms_log"] < base["rms_log"] - 0.05, (shaped["rms_log"], base["rms_log"])
    assert all(v >= 0 for v in shaped["params"].values())
    design, names = tp.structured_design(rows)
    assert np.allclose(design @ np.array([shaped["params"][n] for n in names]), shaped["fitted"])


def test_the_correlations_are_computed_from_the_fitted_times(monkeypatch):
    """Spearman per method follows the fitted values it is given: the thesis' own times give 1 everywhere, their
    reverse −1, a constant no order (nan); the fastest-method count follows likewise."""
    rows = _reduced_rows(monkeypatch)
    thesis = np.array([r["thesis"] for r in rows])
    assert all(v == pytest.approx(1.0) for v in tp.spearman_by_method(rows, thesis).values())
    assert all(v == pytest.approx(-1.0) for v in tp.spearman_by_method(rows, -thesis).values())
    assert all(np.isnan(v) for v in tp.spearman_by_method(rows, np.ones(len(rows))).values())
    assert tp.fastest_matched(rows, thesis) == (len(REDUCED), len(REDUCED))
    assert tp.fastest_matched(rows, 1 / thesis)[0] < len(REDUCED)


def test_the_rank_constrained_fit_keeps_its_constraint_and_the_baseline_beaten():
    """The whole table (4 topologies leave too few orders for Spearman ≥ 0.5 in every method)."""
    rows = tp.counts()
    res = tp.shaped_fit(rows, min_spearman=0.5)
    assert res is not None and res["rms_log"] < tp.baseline(rows)["rms_log"]
    assert min(tp.spearman_by_method(rows, res["fitted"]).values()) >= 0.5
    assert res["rms_log"] >= tp.shaped_fit(rows)["rms_log"] - 1e-9


def test_the_dominance_bound_is_the_best_order_a_non_negative_model_can_reach():
    """On made-up rows: b's counts dominate a's while the thesis measured b faster, so no non-negative prices
    order them as the thesis; with the columns that say otherwise the bound is 1."""
    rows = [{"topology": t, "method": "PCG", "thesis": s, "exchanges": x, "busiest": x, "messages": x,
             "collectives": c, "max_degree": 2, "edges": 3, "z": z}
            for t, s, x, c, z in (("a", 0.5, 1, 1, 2), ("b", 0.2, 2, 2, 1), ("c", 0.9, 3, 1, 3))]
    bound, wrong = tp.dominance_bound(rows, "PCG")
    assert wrong == [("b", "a")] and bound < 1.0
    assert bound == pytest.approx(0.5)  # a < b < c or a < c < b: the first ranks (0, 1, 2) against (1, 0, 2)
    assert tp.dominance_bound(rows, "PCG", columns=("exchanges",)) == (pytest.approx(0.5), [("b", "a")])
    assert tp.dominance_bound(rows, "PCG", columns=("z",)) == (pytest.approx(1.0), [])


def _profile(tmp_path, body: str) -> Path:
    f = tmp_path / "p.yaml"
    f.write_text("name: x\nbalance_exchange: 0.0\nbalance_allreduce: 0.001\n" + body + "\n")
    return f


@pytest.mark.parametrize("body, message", [
    ("balance_setup: {pgc: 0.1}", r"balance_setup: unknown balancer 'pgc' \(did you mean 'pcg'\?\); valid: "),
    ("balance_setup: {pcg: -0.1}", r"balance_setup\.pcg: must be at least 0, got -0\.1$"),
    ("balance_setup: -1", r"balance_setup: must be at least 0, got -1$"),
    ("balance_message: -1.0e-3", r"balance_message: must be at least 0, got -0\.001$"),
    ("balance_allreduce_hop: -2", r"balance_allreduce_hop: must be at least 0, got -2$")])
def test_a_bad_price_is_one_line_naming_its_key(tmp_path, body, message):
    f = _profile(tmp_path, body)
    with pytest.raises(ScenarioError, match=r"^platform.profile \(p.yaml\): " + message) as err:
        PlatformProfile.load(str(f), Path)
    assert "\n" not in str(err.value)


def test_prices_default_to_none_and_name_their_balancers(tmp_path):
    """A profile without the new terms (or with them all zero) has no prices: its runs are charged as before."""
    assert PlatformProfile.load(str(_profile(tmp_path, "")), Path).prices() is None
    zero = "balance_setup: {pcg: 0.0}\nbalance_message: 0\nbalance_allreduce_hop: 0.0"
    assert PlatformProfile.load(str(_profile(tmp_path, zero)), Path).prices() is None
    pr = PlatformProfile.load(str(_profile(tmp_path, "balance_setup: 0.5\nbalance_message: 1e-3")), Path).prices()
    assert pr.setup_of("pcg") == pr.setup_of("metis") == 0.5 and pr.message == 1e-3 and pr.allreduce_hop == 0.0
    pr = PlatformProfile.load(str(_profile(tmp_path, "balance_setup: {lpa: 0.25, gda1: 2}")), Path).prices()
    assert (pr.setup_of("lpa"), pr.setup_of("gda1"), pr.setup_of("pcg")) == (0.25, 2.0, 0.0)


def test_the_new_terms_are_charged_per_call_as_priced(tmp_path):
    """quickstart on 6 processors (PCG; METIS' six parts of the 40 × 30 grid: max degree 4, diameter 3 in every
    call) with thesis2003, with it less its hop price and with it less every new term: the same rounds and counts,
    and each phase's balance time longer by the set-ups, exchange rounds × max degree × message and collectives ×
    diameter × hop; the degree and diameter the prices were charged for are read back from the differences."""
    import hermes

    prof = PlatformProfile.load("thesis2003", lambda p: p)
    zero = tmp_path / "zero.yaml"
    zero.write_text(f"name: zero\nbalance_exchange: {prof.balance_exchange}\n"
                    f"balance_allreduce: {prof.balance_allreduce}\n")
    no_hop = tmp_path / "no-hop.yaml"
    no_hop.write_text(zero.read_text().replace("name: zero", "name: no-hop")
                      + f"balance_message: {prof.balance_message}\nbalance_setup: {dict(prof.balance_setup)}\n")
    runs = [hermes.run(None, 6, out=tmp_path / name, **{"balancer.algorithm": "pcg", "output.pictures": False,
                                                        "platform.capacities": "homo", "platform.profile": pr})
            for name, pr in (("priced", "thesis2003"), ("no-hop", str(no_hop)), ("zero", str(zero)))]
    phases = list(zip(*(r.summary["phases"] for r in runs), strict=True))
    assert phases and all(a["balance_rounds"] >= 1 for a, _, _ in phases)
    for a, b, c in phases:
        ca, cb, cc = ({k: v for k, v in ph["balance_counters"].items() if k != "time"} for ph in (a, b, c))
        assert ca == cb == cc and a["balance_rounds"] == b["balance_rounds"] == c["balance_rounds"]
        setups = a["balance_rounds"] * prof.balance_setup["pcg"]
        degree = (b["balance_time"] - c["balance_time"] - setups) / (ca["exchange_rounds"] * prof.balance_message)
        diameter = (a["balance_time"] - b["balance_time"]) / (sum(ca["collectives"].values())
                                                              * prof.balance_allreduce_hop)
        assert (degree, diameter) == (pytest.approx(4, abs=1e-6), pytest.approx(3, abs=1e-6)), (a, b, c)
        extra = (setups + ca["exchange_rounds"] * 4 * prof.balance_message
                 + sum(ca["collectives"].values()) * 3 * prof.balance_allreduce_hop)
        assert a["balance_time"] - c["balance_time"] == pytest.approx(extra, abs=1e-12), (a, c)
        assert extra > 0.05
