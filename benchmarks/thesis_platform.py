"""Fit a platform profile to thesis Table 10.1 (measured seconds of GDA1, PCG, LPA, MPA on 16 PCs, 2003).

hermes charges a balancer's communication, not its arithmetic (a few flops per processor and step): a serial
reference reports per rank ``exchange_rounds`` (neighbour exchanges of a scalar or two) and ``collectives``
(allreduces), and the virtual clock charges each exchange ``α + 8w/bw`` and each allreduce
``⌈log2 p⌉ (α + 8w/bw)`` (:func:`hermes.balance.flow.alpha_beta_time`). With messages of one or two words the
bandwidth term is below a microsecond, so a balancer's time is

    t = τ_x · exchange_rounds + τ_a · collectives

and the profile is the two costs τ_x (one neighbour-exchange round of a balancer) and τ_a (one allreduce).
The default links give τ_x = α = 100 µs and τ_a = ⌈log2 16⌉ α = 400 µs; Table 10.1 asks for other values.
They are fitted by least squares on log times (every entry weighs the same whatever its size) to the 28
entries of Table 10.1, with hermes' counts of the same runs (``hermes lab bench --family table10.1``: load
ONE, GDA1 to 1 %, PCG to 1e-8, the accurate LPA / MPA; SD_shock is not available, SD_3elt stands in).

The shipped fit uses the HCUW environment (heterogeneous capacities: the thesis' cluster was measured by its
monitor; with homogeneous capacities and the load on the star's centre one GDA1 step balances exactly, where
the thesis measured 8.59 s). The alternatives are printed for comparison, each with the number of entries it
fitted. A mesh of Table 10.1 missing from the clone (whitaker3.mtx lives in the shared meshes, found beside the
clone or by ``HERMES_SHARED_MESHES``) stops the script in one line: the fit would have fewer entries and give
another profile.

    .venv/bin/python -m benchmarks.thesis_platform            # the fit, every residual, the alternatives
    .venv/bin/python -m benchmarks.thesis_platform --write    # and (re)write configs/platform-thesis2003.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from hermes.interpreter import child_env, python_command

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "configs" / "platform-thesis2003.yaml"

#: thesis Table 10.1, seconds: topology -> (GDA, PCG, LPA, MPA); hermes' stand-in for SD_shock is SD_3elt
THESIS_TABLE_10_1 = {
    "path": (19.82, 0.45, 0.32, 0.28),
    "ring": (6.69, 0.59, 0.39, 0.30),
    "star": (8.59, 0.15, 0.20, 0.46),
    "SD_whitaker": (2.40, 0.32, 0.24, 0.22),
    "SD_airfoil": (3.55, 0.43, 0.23, 0.18),
    "SD_grid20x19": (2.05, 0.16, 0.20, 0.15),
    "SD_3elt": (3.97, 0.39, 0.23, 0.20),
}
METHODS = ("GDA", "PCG", "LPA", "MPA")
#: the environment and methods of the shipped fit
SHIPPED = {"environment": "HCUW", "methods": METHODS}


def counts(environment: str = "HCUW", methods=METHODS, variant: dict[str, str] | None = None) -> list[dict]:
    """hermes' counts of every Table 10.1 entry: topology, method, exchange rounds, collectives, thesis seconds.

    ``variant`` maps a method to the bench label that stands for it (e.g. ``{"LPA": "LPA thesis"}``).
    """
    from hermes.lab.bench import table101_family

    variant = variant or {}
    labels = tuple(variant.get(m, m) for m in methods)
    rows = table101_family(environments=(environment,), methods=labels)
    back = {variant.get(m, m): m for m in methods}
    out = []
    for r in rows:
        if r["topology"] not in THESIS_TABLE_10_1:
            continue
        m = back[r["method"]]
        out.append({"topology": r["topology"], "method": m, "exchanges": r["exchange_rounds"],
                    "collectives": r["collectives"], "iterations": r["iterations"],
                    "thesis": THESIS_TABLE_10_1[r["topology"]][METHODS.index(m)]})
    return out


def missing_meshes(p: int = 16) -> list[str]:
    """One sentence per mesh file that a topology of :data:`THESIS_TABLE_10_1` needs and this clone lacks.

    Without them the bench skips the topology and the fit would have fewer entries (a different profile).
    """
    import os

    from hermes.lab.bench import TABLE_10_1, _table101_graph

    out = []
    for topo in THESIS_TABLE_10_1:
        if topo not in TABLE_10_1 or _table101_graph(topo, p) is not None:
            continue
        name = Path(TABLE_10_1[topo].split(":", 1)[1].rsplit(":", 1)[0]).name
        if "{shared}" in TABLE_10_1[topo]:
            where = os.environ.get("HERMES_SHARED_MESHES", str(ROOT.parent / "shared" / "meshes"))
            out.append(f"{name} (topology {topo} of thesis Table 10.1) is not in {where}: set HERMES_SHARED_MESHES "
                       f"to the directory that holds it (the shared meshes, ../shared/meshes beside the clone)")
        else:
            out.append(f"{name} (topology {topo} of thesis Table 10.1) is not in {ROOT / 'meshes'}: "
                       f"restore it from the repository (git checkout -- meshes/{name})")
    return out


def fit(rows: list[dict], *, constant: bool = False) -> dict:
    """Least squares on log times: τ_x, τ_a (and, with ``constant``, a per-call τ_0), all positive.

    Returns the parameters, the fitted seconds of every row and the rms of the log residuals.
    """
    from scipy.optimize import least_squares

    design = np.array([[r["exchanges"], r["collectives"]] + ([1.0] if constant else []) for r in rows], dtype=float)
    target = np.log([r["thesis"] for r in rows])

    def residual(theta):
        return np.log(design @ np.exp(theta)) - target

    start = np.log(np.full(design.shape[1], 1e-3))
    sol = least_squares(residual, start, method="lm", xtol=1e-14, ftol=1e-14, gtol=1e-14)
    theta = np.exp(sol.x)
    fitted = design @ theta
    names = ["exchange", "allreduce"] + (["call"] if constant else [])
    return {"params": dict(zip(names, theta.tolist())), "fitted": fitted,
            "rms_log": float(np.sqrt(np.mean(residual(sol.x) ** 2)))}


def shipped_fit() -> tuple[list[dict], dict]:
    """The rows and the fit written to :data:`PROFILE`."""
    rows = counts(SHIPPED["environment"], SHIPPED["methods"])
    return rows, fit(rows)


def round_params(params: dict[str, float], digits: int = 4) -> dict[str, float]:
    """The fitted costs as the profile stores them (``digits`` significant digits)."""
    return {k: float(f"{v:.{digits}g}") for k, v in params.items()}


def _table(rows: list[dict], res: dict) -> list[str]:
    lines = ["| topology | method | exchanges | allreduces | thesis (s) | fitted (s) | fitted / thesis |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r, t in zip(rows, res["fitted"]):
        lines.append(f"| {r['topology']} | {r['method']} | {r['exchanges']} | {r['collectives']} | "
                     f"{r['thesis']:.2f} | {t:.3f} | {t / r['thesis']:.2f} |")
    return lines


def _summary(label: str, rows: list[dict], res: dict) -> str:
    ratios = res["fitted"] / np.array([r["thesis"] for r in rows])
    ps = ", ".join(f"τ_{k} = {v * 1e3:.3f} ms" for k, v in res["params"].items())
    return (f"{label}: {ps}; rms log residual {res['rms_log']:.3f} (×{np.exp(res['rms_log']):.2f}); "
            f"fitted/thesis {ratios.min():.2f}–{ratios.max():.2f}")


def write_profile(params: dict[str, float], res: dict, path: Path = PROFILE) -> None:
    """Write the profile (the fitted costs to 4 significant digits) atomically."""
    from hermes.files import write_atomic

    p = round_params(params)
    text = (
        "# Platform profile 'thesis2003': the cost of a balancer's communication on the thesis' cluster\n"
        "# (16 DELL PCs, 2003), fitted to thesis Table 10.1 by benchmarks/thesis_platform.py --write\n"
        "# (least squares on log times, HCUW counts of hermes lab bench --family table10.1;\n"
        f"# rms log residual {res['rms_log']:.3f}). Do not edit by hand: rerun the fit.\n"
        "# Used by a scenario with  platform: {profile: thesis2003}  (or --set platform.profile=thesis2003):\n"
        "# inside the balancer's step every neighbour-exchange round costs balance_exchange and every\n"
        "# collective balance_allreduce (plus the bytes over the platform's bandwidth); the application's\n"
        "# halo exchanges, the monitor and the migration keep the platform's latency and bandwidth.\n"
        "name: thesis2003\n"
        f"balance_exchange: {p['exchange']!r}    # s per neighbour-exchange round of a balancer\n"
        f"balance_allreduce: {p['allreduce']!r}   # s per allreduce of a balancer\n")
    write_atomic(path, text)


#: thesis Table 10.2 (p. 169): the graphs of the adaptive experiment, (vertices, edges as printed = 2|E|), in the
#: order of the rows of Tables 10.5 and 10.7 (which name each graph by these two numbers)
THESIS_GRAPHS = {"grid20x19": (380, 1442), "stufe": (1036, 3736), "airfoil": (4253, 24578), "3elt": (4720, 27444),
                 "Whitaker": (9800, 57978), "L9": (17983, 71192)}
#: the balancers of Tables 10.5 and 10.7, as printed (ParMETIS: hermes' METIS with equal targets)
THESIS_METHODS = ("No DLB", "GDA1", "PCG", "LPA", "MPA", "METIS equal")
#: thesis Tables 10.5 (homogeneous, p. 171) and 10.7 (heterogeneous, Table 10.6 capacities, p. 172): seconds,
#: graph -> one per :data:`THESIS_METHODS`, every row as printed
THESIS_TABLES = {
    "thesis-homogeneous": {
        "grid20x19": (373.00, 157.16, 132.13, 132.03, 145.21, 129.98),
        "stufe": (1146.95, 475.62, 419.45, 415.59, 420.93, 389.73),
        "airfoil": (3913.53, 1247.62, 1159.51, 1093.52, 1179.26, 1093.30),
        "3elt": (4977.12, 1462.09, 1224.85, 1220.71, 1316.33, 1307.82),
        "Whitaker": (9785.57, 3340.40, 3097.48, 3272.81, 3288.05, 3481.00),
        "L9": (17851.39, 5017.15, 5657.72, 4820.13, 4809.60, 4693.74)},
    "thesis-heterogeneous": {
        "grid20x19": (149.19, 381.68, 77.03, 68.01, 70.47, 90.28),
        "stufe": (956.27, 223.76, 174.57, 161.22, 175.00, 302.86),
        "airfoil": (2365.73, 521.78, 494.11, 482.68, 490.84, 535.11),
        "3elt": (2571.26, 586.67, 527.38, 517.08, 533.05, 630.33),
        "Whitaker": (6293.51, 1159.93, 1049.05, 1037.39, 1103.45, 2745.69),
        "L9": (7759.36, 2103.14, 1888.27, 1872.55, 1883.49, 3586.92)}}
#: thesis Tables 10.3 and 10.4 (p. 170): L9's loads per processor at the start and after the last adaptation
#: without balancing (the thesis: "an imbalance factor of 1.94")
THESIS_L9_LOADS = {
    "start": (1202, 1206, 1196, 1206, 1208, 1192, 1199, 1190, 1193, 1205, 1201, 1192, 1203, 1199, 1191),
    "end": (25844, 84635, 62928, 121206, 121096, 105085, 141652, 54541, 31545, 91754, 4888, 104326, 88568, 50348,
            1574)}
#: thesis Tables 10.5 and 10.7, grid20x19 row (380 × 1442), seconds
THESIS_GRID = {scen: dict(zip(THESIS_METHODS, rows["grid20x19"])) for scen, rows in THESIS_TABLES.items()}
#: where :data:`THESIS_TABLES`' rows are printed (the thesis' List of Tables gives the pages)
THESIS_GRID_SOURCE = {"thesis-homogeneous": "Table 10.5, p. 171", "thesis-heterogeneous": "Table 10.7, p. 172"}
#: the balancers of the re-measured tables: label -> --set overrides (METIS equal is the thesis' ParMETIS)
TABLE_BALANCERS = {"No DLB": ["balancer.algorithm=none"], "GDA1": ["balancer.algorithm=gda1"],
                   "PCG": ["balancer.algorithm=pcg"], "LPA": ["balancer.algorithm=lpa"],
                   "MPA": ["balancer.algorithm=mpa"],
                   "METIS equal": ["balancer.algorithm=metis", "balancer.targets=equal"],
                   "METIS fair": ["balancer.algorithm=metis", "balancer.targets=fair"]}


def _run_summary(scenario: str, sets: list[str], out: Path) -> dict:
    import json
    import subprocess

    cmd = python_command("-m", "hermes", "run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--quiet",
                         "--no-pictures", "--out", str(out))
    for s in sets:
        cmd += ["--set", s]
    res = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    if res.returncode != 0:
        raise SystemExit(f"{scenario} {sets}: {res.stderr.strip().splitlines()[-1:]}")
    s = json.loads((out / "summary.json").read_text())
    balance = sum(ph.get("balance_time", 0.0) for ph in s.get("phases", []))
    return {"total": s["total_time"], "imbalance": s["final_imbalance"], "balance": balance}


def tables(profile: str = "thesis2003") -> list[str]:
    """Thesis Tables 10.5 and 10.7 (grid20x19 row) against hermes' thesis scenarios, default links and profile."""
    import tempfile

    lines = ["| scenario | balancer | thesis (s) | hermes default (s) | hermes thesis2003 (s) | "
             "balancing, default → thesis2003 (s) |", "|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for scen, thesis in THESIS_GRID.items():
            for k, (label, sets) in enumerate(TABLE_BALANCERS.items()):
                d = _run_summary(scen, sets, Path(tmp) / f"{scen}-{k}-d")
                q = _run_summary(scen, [*sets, f"platform.profile={profile}"], Path(tmp) / f"{scen}-{k}-p")
                t = f"{thesis[label]:.2f}" if label in thesis else "–"
                lines.append(f"| {scen} | {label} | {t} | {d['total']:.1f} ({d['imbalance']:.2f}) | "
                             f"{q['total']:.1f} ({q['imbalance']:.2f}) | {d['balance']:.3f} → {q['balance']:.3f} |")
                print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {PROFILE.relative_to(ROOT)}")
    ap.add_argument("--tables", action="store_true",
                    help="also run the thesis scenarios (Tables 10.5, 10.7) with and without the profile "
                         f"({2 * len(THESIS_GRID) * len(TABLE_BALANCERS)} runs)")
    args = ap.parse_args(argv)
    missing = missing_meshes()
    if missing:
        print(f"thesis_platform: {missing[0]}", file=sys.stderr)
        return 2
    rows, res = shipped_fit()
    env, methods = SHIPPED["environment"], " ".join(SHIPPED["methods"])
    print(_summary(f"shipped fit ({env}, {methods}, {len(rows)} entries)", rows, res))
    print()
    print("\n".join(_table(rows, res)))
    print()
    print("alternatives:")
    without = [r for r in rows if r["method"] != "GDA"]
    print(" ", _summary(f"without GDA ({len(without)} entries)", without, fit(without)))
    print(" ", _summary("with a per-call constant τ_call", rows, fit(rows, constant=True)))
    homo = counts("HOMO")
    print(" ", _summary("HOMO counts", homo, fit(homo)))
    literal = counts("HCUW", variant={"LPA": "LPA thesis", "MPA": "MPA thesis"})
    print(" ", _summary("thesis' literal LPA (Faddeev) and MPA (Berlekamp-Massey)", literal, fit(literal)))
    default = {"exchange": 1e-4, "allreduce": 4e-4}
    t = np.array([default["exchange"] * r["exchanges"] + default["allreduce"] * r["collectives"] for r in rows])
    lr = np.log(t / np.array([r["thesis"] for r in rows]))
    print(f"  default links (τ_x = 0.1 ms, τ_a = 0.4 ms): rms log residual {np.sqrt(np.mean(lr ** 2)):.3f}")
    if args.write:
        write_profile(res["params"], res)
        print(f"\nwrote {PROFILE.relative_to(ROOT)}: {round_params(res['params'])}")
    print()
    print("\n".join(remeasured_table101()))
    if args.tables:
        print()
        tables()
    return 0


def remeasured_table101(environment: str = "HCUW") -> list[str]:
    """``hermes lab bench --family table10.1``'s runs under the shipped profile's links beside the thesis and the
    default links (ms → s), with each topology's order of PCG, LPA, MPA."""
    from hermes.lab.bench import table101_family
    from hermes.sections import PlatformProfile

    links = PlatformProfile.load("thesis2003", Path).links(1.25e7)
    prof = table101_family(environments=(environment,), methods=METHODS, links=links)
    dflt = {(r["topology"], r["method"]): r["time"] for r in
            table101_family(environments=(environment,), methods=METHODS)}
    lines = ["| topology | " + " | ".join(f"{m}: thesis / default / thesis2003 (ratio)" for m in METHODS) + " |",
             "|---|" + "---:|" * len(METHODS)]
    for topo in THESIS_TABLE_10_1:
        got = {r["method"]: r["time"] for r in prof if r["topology"] == topo}
        if not got:
            continue
        cells = [f"{THESIS_TABLE_10_1[topo][k]:.2f} / {dflt[topo, m]:.4f} / {got[m]:.2f} "
                 f"({got[m] / THESIS_TABLE_10_1[topo][k]:.2f})" for k, m in enumerate(METHODS)]
        lines.append(f"| {topo} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
