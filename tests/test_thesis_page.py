"""results/thesis.md's comparison with thesis Tables 10.5 and 10.7: each side's ratios from its own seconds."""

from __future__ import annotations

from benchmarks.render import thesis_against_tables


def _cache(times: dict[str, dict[str, float]]) -> dict:
    runs = [{"labels": {"scenario": s, "balancer": b}, "total_time": t} for s, row in times.items()
            for b, t in row.items()]
    return {"figures": {"axes": ["scenario", "balancer"], "runs": runs}}


def test_the_ratios_come_from_the_thesis_tables_and_from_the_cache():
    homo = {"No DLB": 300.0, "GDA1": 120.0, "PCG": 110.0, "METIS equal": 100.0}
    hetero = {"No DLB": 150.0, "GDA1": 200.0, "PCG": 50.0, "METIS equal": 75.0}
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:]
            for line in thesis_against_tables(_cache({"thesis-homogeneous": homo,
                                                      "thesis-heterogeneous": hetero})).splitlines()[2:]}
    thesis, hermes = zip(*((v[0], v[1].rstrip(" |")) for v in rows.values()))
    # the thesis' seconds of Tables 10.5 and 10.7 (grid20x19 row), as printed
    assert thesis == ("METIS equal 129.98 s", "373.00 / 129.98 = 2.87",
                      "PCG, LPA, MPA; not GDA1 381.68 s (METIS equal 90.28 s)", "90.28 / 68.01 = 1.33 (LPA)",
                      "149.19 / 373.00 = 0.40")
    assert hermes == ("METIS equal 100.0 s", "300.0 / 100.0 = 3.00", "PCG; not GDA1 200.0 s (METIS equal 75.0 s)",
                      "75.0 / 50.0 = 1.50 (PCG)", "150.0 / 300.0 = 0.50")
