"""The Grapevine tables of Pébaÿ & Lifflander (seed 004) beside hermes' (``hermes lab gossip``), several seeds.

Prints markdown: for every table of the report that the lab can express, the report's numbers and
hermes' range (min–max over the seeds; seed s places the objects and drives the algorithm), then the
`hermes lab gossip` command of one seed per set-up. Table 4.2 needs the VT object map the report used,
``data/vt_example_lb_stats/stats.R.vom`` of an LBAF checkout (pass that folder with ``--vom``).

    .venv/bin/python -m benchmarks.grapevine_report            # 5 seeds, both L_i variants (minutes)
    .venv/bin/python -m benchmarks.grapevine_report --quick    # 2 seeds, no Table 3.4, no variant
    .venv/bin/python -m benchmarks.grapevine_report --vom ~/LB-analysis-framework/data/vt_example_lb_stats
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np

from hermes.lab.gossip import gossip_lab

# -- the report's numbers -------------------------------------------------------------------------
#: §2.1.1 (criterion 6) and §2.1.3 (6'): 4,096 ranks, 10⁴ objects U(1e-5, 1e-1) on 16, i = k = 10, f = 6
REPORT_6 = [(None, None, 280), (9084, 154931, 187), (4, 1654, 187), (1, 1130, 187), (7, 2682, 185), (6, 2396, 183),
            (2, 1143, 183), (1, 1041, 183), (0, 882, 183), (0, 882, 182), (3, 1405, 182)]
REPORT_6P = [(None, None, 280), (11292, 648, 3.34), (4044, 3603, 1.60), (2201, 3412, 0.873), (1324, 3586, 0.632),
             (765, 3171, 0.632), (410, 2969, 0.626), (247, 2794, 0.626), (159, 2749, 0.626), (120, 2682, 0.626),
             (72, 2643, 0.623)]
#: §2.1.3, 8 objects per rank (32,768 objects)
REPORT_6P_8 = [(None, None, 270), (33761, 269, 1.52), (7179, 3642, 0.714), (4227, 5946, 0.399), (3304, 9023, 0.317),
               (2496, 9570, 0.273), (1978, 10138, 0.187), (1419, 9895, 0.139), (1026, 9312, 0.139),
               (692, 8938, 0.139), (463, 8379, 0.139)]
#: Tables 3.1 / 3.2: (min, max, σ, I) at iteration 0, criterion 6 at 4, 6' at 4
REPORT_31 = {"0": (80, 123, 9.18, 0.23), "6": (99, 116, 2.34, 0.16), "6p": (100, 100, 0.00, 0.00)}
REPORT_32 = {"0": (23, 61, 6.182, 0.5616), "6": (39, 45, 0.5192, 0.152), "6p": (39, 40, 0.2421, 0.024)}
#: Tables 3.3 / 3.4: ε → (min, max, R, σ, I) at iteration 0, 4 and 100 (6' only, 256 ranks)
EPS = ("0", "0.001", "0.01", "0.1", "1")
REPORT_33_0 = [(23, 61, 38, 6.182, 0.5616), (23.00, 61.00, 38.00, 6.182, 0.5616), (22.99, 61.03, 38.04, 6.179, 0.5624),
               (23.20, 60.89, 37.69, 6.217, 0.5586), (23.45, 66.37, 42.92, 7.516, 0.6974)]
REPORT_33_4 = [(39, 40, 1, 0.2421, 0.024), (38.99, 40.00, 1.01, 0.2405, 0.02399), (38.07, 40.00, 1.93, 0.2556, 0.02393),
               (38.11, 40.05, 1.94, 0.3748, 0.02525), (37.49, 40.28, 2.79, 0.3804, 0.03020)]
REPORT_34 = [(39, 40, 1, 0.2421, 0.024), (39.00, 40.00, 1.00, 0.2403, 0.02384), (38.95, 39.94, 0.99, 0.2257, 0.02243),
             (39.07, 39.54, 0.47, 0.2581, 0.01205), (39.07, 39.37, 0.30, 0.03111, 0.006778)]
#: Table 4.2 (VT map on 8 ranks, i = 5, k = f = 4): min, max, R, σ, γ₁, γ₂ (kurtosis, not excess), I
REPORT_42 = {"6": (0.28542, 1.7508, 1.4654, 0.46454, 2.2364, 6.0655, 2.3288),
             "6'": (0.49539, 0.57315, 0.077759, 0.024726, 0.77394, 2.3940, 0.089739)}


def cmd(ranks, objects, mapped, loads, it, k, f, crit, seed, source_load="turn") -> str:
    out = f".venv/bin/hermes lab gossip --ranks {ranks} --objects {objects}"
    out += f" --mapped-ranks {mapped}" if mapped else ""
    out += f" --loads {loads} --iterations {it} --rounds {k} --fanout {f} --criterion {crit} --seed {seed}"
    return out + (f" --source-load {source_load}" if source_load != "turn" else "")


def span(values, fmt: str = ".3g") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if lo == hi else f"{lo:{fmt}}–{hi:{fmt}}"


def lab(ranks, objects, mapped, loads, it, k, f, crit, seeds, source_load="turn") -> list[dict]:
    return [gossip_lab(ranks, objects, mapped, loads, it, k, f, 1.0, crit, s, source_load) for s in seeds]


def per_iteration(title, report, runs, commands):
    print(f"\n#### {title}\n")
    print("| it | transfers (report) | transfers (hermes) | rejected (report) | rejected (hermes) "
          "| I (report) | I (hermes) |")
    print("|---|---|---|---|---|---|---|")
    for i, (tr, rj, imb) in enumerate(report):
        h = [r["history"][min(i, len(r["history"]) - 1)] for r in runs]
        cells = ["", "", "", ""] if tr is None else [str(tr), span([x["transfers"] for x in h], "d"), str(rj),
                                                     span([x["rejected"] for x in h], "d")]
        print(f"| {i} | " + " | ".join(cells) + f" | {imb:g} | {span([x['imbalance'] for x in h])} |")
    print()
    for c in commands:
        print(f"    {c}")


def final_stats(runs, it=None):
    """(min, max, R, σ, I) of each run at iteration ``it`` (default: the last)."""
    out = []
    for r in runs:
        h = r["history"][-1 if it is None else min(it, len(r["history"]) - 1)]
        out.append((h["min"], h["max"], h["max"] - h["min"], h["sigma"], h["imbalance"]))
    return np.array(out)


def iso_tables(seeds):
    for ranks, name, report in ((100, "Table 3.1 (|P| = 100 divides |O|)", REPORT_31),
                                (256, "Table 3.2 (|P| = 256, r = 16)", REPORT_32)):
        print(f"\n#### {name}: 10⁴ unit objects at random, i = k = f = 4, T = 1\n")
        print("| statistic | it 0 (report) | it 0 (hermes) | 6 at 4 (report) | 6 at 4 (hermes) "
              "| 6′ at 4 (report) | 6′ at 4 (hermes) | 6′ reaches I* at (hermes) |")
        print("|---|---|---|---|---|---|---|---|")
        orig = lab(ranks, 10_000, None, "iso", 4, 4, 4, "original", seeds)
        mod = lab(ranks, 10_000, None, "iso", 4, 4, 4, "modified", seeds)
        first = [next(h["iteration"] for h in r["history"] if abs(h["imbalance"] - r["iso_optimum"]) < 1e-12)
                 for r in mod]
        s0, s6, s6p = final_stats(orig, 0), final_stats(orig), final_stats(mod)
        for j, (label, col) in enumerate((("min L", 0), ("max L", 1), ("σ L", 3), ("I", 4))):
            print(f"| {label} | {report['0'][j]:g} | {span(s0[:, col])} | {report['6'][j]:g} | {span(s6[:, col])} "
                  f"| {report['6p'][j]:g} | {span(s6p[:, col])} | {span(first, 'd') if j == 3 else ''} |")
        print()
        for crit in ("original", "modified"):
            print(f"    {cmd(ranks, 10_000, None, 'iso', 4, 4, 4, crit, seeds[0])}")


def noise_tables(seeds, with_100: bool):
    print("\n#### Tables 3.3 / 3.4: 256 ranks, 10⁴ objects U(1 − ε, 1 + ε), 6′, k = f = 4\n")
    print("| ε | it | min (report) | min (hermes) | max (report) | max (hermes) | R (report) | R (hermes) "
          "| σ (report) | σ (hermes) | I (report) | I (hermes) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e, eps in enumerate(EPS):
        spec = "iso" if eps == "0" else f"uniform:{1 - float(eps):g},{1 + float(eps):g}"
        runs = lab(256, 10_000, None, spec, 100 if with_100 else 4, 4, 4, "modified", seeds)
        rows = [(0, REPORT_33_0[e], final_stats(runs, 0)), (4, REPORT_33_4[e], final_stats(runs, 4))]
        if with_100:
            rows.append((100, REPORT_34[e], final_stats(runs, 100)))
        for it, rep, got in rows:
            print(f"| {eps} | {it} | " + " | ".join(f"{rep[j]:g} | {span(got[:, j])}" for j in range(5)) + " |")
    print()
    print(f"    {cmd(256, 10_000, None, 'uniform:0.9,1.1', 100 if with_100 else 4, 4, 4, 'modified', seeds[0])}")


def read_vom(folder: Path, phase: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Object loads and ranks of one phase of VT object maps ``stats.R.vom`` (rows phase, id, time)."""
    loads, ranks = [], []
    r = 0
    while (folder / f"stats.{r}.vom").is_file():
        with open(folder / f"stats.{r}.vom", newline="") as fh:
            for row in csv.reader(fh):
                if len(row) == 3 and int(row[0]) == phase:
                    loads.append(float(row[2]))
                    ranks.append(r)
        r += 1
    return np.array(loads), np.array(ranks, dtype=np.int64)


def vt_table(folder: Path, seeds):
    from hermes.balance.gossip.grapevine_serial import GrapevineParams, grapevine
    from hermes.lab.lbaf import dataset_from_assignment, write_lbdatafile

    loads, ranks = read_vom(folder)
    p = int(ranks.max()) + 1
    print(f"\n#### Table 4.2: VT object map ({loads.size} objects on {p} ranks), i = 5, k = f = 4, T = 1\n")
    print("| criterion | | min | max | R | σ | γ₁ | γ₂ | I |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        stem = Path(tmp) / "vt"
        write_lbdatafile(stem, dataset_from_assignment(loads, ranks, p))
        for crit, key in (("original", "6"), ("modified", "6'")):
            stats = []
            for s in seeds:
                prm = GrapevineParams(iterations=5, rounds=4, fanout=4, criterion=crit)
                res = grapevine(loads, ranks, p, prm, seed=s)
                assert gossip_lab(p, 0, None, f"lbaf:{stem}", 5, 4, 4, 1.0, crit, s)["history"] == res.history
                x = np.bincount(res.object_rank, weights=loads, minlength=p)
                z = (x - x.mean()) / x.std()
                stats.append((x.min(), x.max(), np.ptp(x), x.std(), np.mean(z ** 3), np.mean(z ** 4),
                              res.history[-1]["imbalance"]))
            got = np.array(stats)
            print(f"| {key} | report | " + " | ".join(f"{v:.5g}" for v in REPORT_42[key]) + " |")
            print(f"| {key} | hermes | " + " | ".join(span(got[:, j], ".4g") for j in range(7)) + " |")
    print(f"\n    .venv/bin/hermes lab gossip --ranks {p} --objects 0 --loads lbaf:STEM --iterations 5 --rounds 4 "
          f"--fanout 4 --criterion modified --seed {seeds[0]}   (STEM: phase 0 of the maps as LBDatafile JSON)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, no Table 3.4, no L_i variant")
    ap.add_argument("--seeds", type=int, help="seeds 0..N−1 (default 5, quick 2)")
    ap.add_argument("--vom", type=Path, help="folder with the VT maps stats.R.vom of Table 4.2")
    args = ap.parse_args()
    seeds = list(range(args.seeds or (2 if args.quick else 5)))
    t0 = time.perf_counter()
    print(f"Grapevine: the report's tables (seed 004) and hermes' over seeds {seeds[0]}..{seeds[-1]}")
    iso_tables(seeds)
    noise_tables(seeds, with_100=not args.quick)
    big = (4096, 10_000, 16, "uniform:0.00001,0.1", 10, 10, 6)
    variants = ("turn",) if args.quick else ("turn", "current")
    per_iteration("§2.1.1: criterion 6, 4,096 ranks, 10⁴ objects U(1e-5, 0.1) on 16, i = k = 10, f = 6", REPORT_6,
                  lab(*big, "original", seeds), [cmd(*big, "original", seeds[0])])
    for sl in variants:
        tag = "" if sl == "turn" else " (variant: L_i current)"
        per_iteration(f"§2.1.3: criterion 6′{tag}, same set-up", REPORT_6P, lab(*big, "modified", seeds, sl),
                      [cmd(*big, "modified", seeds[0], sl)])
        eight = (4096, 8 * 4096, 16, "uniform:0.00001,0.1", 10, 10, 6)
        per_iteration(f"§2.1.3: criterion 6′{tag}, 8 objects per rank (32,768)", REPORT_6P_8,
                      lab(*eight, "modified", seeds, sl), [cmd(*eight, "modified", seeds[0], sl)])
    if args.vom:
        vt_table(args.vom, seeds)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
