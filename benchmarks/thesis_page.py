"""The tables of results/thesis.md: hermes' thesis experiment beside thesis Tables 10.2, 10.5, 10.6 and 10.7.

Every hermes figure comes from the cache (``results/thesis.json``, :mod:`benchmarks.experiment`), every thesis
figure from its transcription in :mod:`benchmarks.thesis_platform`; each comparison is computed here from both,
so a new cache re-words the page.
"""

from __future__ import annotations

import csv
import math
from itertools import combinations
from typing import Any

from benchmarks.thesis_platform import (
    THESIS_GRAPHS,
    THESIS_GRID_SOURCE,
    THESIS_L9_LOADS,
    THESIS_METHODS,
    THESIS_TABLES,
)

__all__ = ["HOMO", "HETERO", "MESH_OF", "times", "thesis_times", "meshes_table", "grid_table", "times_table",
           "ratios_table", "orderings_table", "verdict", "het_homo_table", "headline", "table_10_6"]

HOMO, HETERO = "thesis-homogeneous", "thesis-heterogeneous"
#: thesis graph (Table 10.2) -> the label of hermes' mesh standing for it (None: no public copy)
MESH_OF = {"grid20x19": "grid20x19", "stufe": "stufe", "airfoil": "airfoil", "3elt": "3elt", "Whitaker": "whitaker3",
           "L9": None}
#: what hermes runs for each graph
STAND_IN = {"grid20x19": "meshes/grid20x19.vtu: the thesis' grid, its cells", "stufe": "meshes/thesis-stufe.vtu, nodes",
            "airfoil": "meshes/thesis-airfoil.vtu, nodes", "3elt": "meshes/thesis-3elt.vtu, nodes",
            "Whitaker": "whitaker3.mtx of the shared meshes", "L9": "not found (SuiteSparse AG-Monien/L-9)"}
#: the methods both sides ran (the thesis' ParMETIS as METIS equal)
SHARED = ("No DLB", "GDA1", "PCG", "METIS equal")


def _md(head: list[str], body: list[list[str]], right: int = 1) -> str:
    align = "|" + "|".join("---" if i < right else "---:" for i in range(len(head))) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", align, *("| " + " | ".join(r) + " |" for r in body)])


def times(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """scenario -> mesh label -> balancer -> simulated total time of the cache's runs that finished."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in data["figures"]["runs"]:
        if r["total_time"] is None:
            continue
        lab = r["labels"]
        out.setdefault(lab["scenario"], {}).setdefault(lab.get("mesh", "grid20x19"), {})[lab["balancer"]] = \
            r["total_time"]
    return out


def thesis_times(scenario: str, graph: str) -> dict[str, float]:
    """The thesis' seconds of ``graph`` in ``scenario`` (Table 10.5 or 10.7), by method."""
    return dict(zip(THESIS_METHODS, THESIS_TABLES[scenario][graph]))


def _graphs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mesh label -> the first run's graph size (vertices, entries) as the cache recorded it."""
    out: dict[str, dict[str, Any]] = {}
    for r in data["figures"]["runs"]:
        out.setdefault(r["labels"].get("mesh", "grid20x19"), r)
    return out


def meshes_table(data: dict[str, Any]) -> str:
    """Thesis Table 10.2 beside the graphs the cache's runs balanced (vertices, 2|E|, average degree)."""
    graphs = _graphs(data)
    body = []
    for graph, (n, e) in THESIS_GRAPHS.items():
        mine = graphs.get(MESH_OF[graph] or "")
        if mine is None or "vertices" not in mine:
            hermes = ["–", "–", "–"] if mine is None else ["(not recorded)", "", ""]
        else:
            hermes = [f"{mine['vertices']:,}", f"{mine['entries']:,}", f"{mine['entries'] / mine['vertices']:.3f}"]
        body.append([graph, STAND_IN[graph], f"{n:,}", f"{e:,}", f"{e / n:.3f}", *hermes])
    return _md(["graph", "hermes' mesh", "thesis vertices", "thesis 2\\|E\\|", "thesis degree", "vertices",
                "2\\|E\\|", "degree"], body, right=2)


def grid_table(data: dict[str, Any]) -> str:
    """Simulated total time (final imbalance) of every run: scenario and mesh down, balancer across."""
    runs = data["figures"]["runs"]
    rows = list(dict.fromkeys((r["labels"]["scenario"], r["labels"]["mesh"]) for r in runs))
    cols = list(dict.fromkeys(r["labels"]["balancer"] for r in runs))
    by = {(r["labels"]["scenario"], r["labels"]["mesh"], r["labels"]["balancer"]): r for r in runs}
    body = []
    for scen, mesh in rows:
        cells = []
        for b in cols:
            r = by.get((scen, mesh, b))
            cells.append("—" if r is None or r["total_time"] is None else
                         f"{r['total_time']:,.1f} s ({r['final_imbalance']:.2f})")
        body.append([scen.removeprefix("thesis-"), mesh, *cells])
    return _md(["capacities", "mesh", *cols], body, right=2)


def _fastest(t: dict[str, float]) -> str:
    return min(t, key=t.get)


def times_table(scenario: str):
    """Seconds of Table 10.5 (or 10.7) and of the cache, a row per graph and side."""
    def table(data: dict[str, Any]) -> str:
        mine = times(data).get(scenario, {})
        cols = ["No DLB", "GDA1", "GDA0", "PCG", "LPA", "MPA", "METIS equal", "METIS fair"]
        body = []
        for graph in THESIS_GRAPHS:
            th = thesis_times(scenario, graph)
            body.append([f"{graph}: thesis", *(f"{th[c]:.2f}" if c in th else "" for c in cols)])
            label = MESH_OF[graph]
            if label is None or label not in mine:
                body.append([f"{graph}: hermes", "not available here" if label is None else "not run",
                             *([""] * (len(cols) - 1))])
                continue
            h = mine[label]
            body.append([f"{graph}: hermes ({label})", *(f"{h[c]:.1f}" if c in h else "" for c in cols)])
        return _md(["graph (seconds)", *[c + (" (ParMETIS)" if c == "METIS equal" else "") for c in cols]], body)
    return table


def _checks(th_homo, th_het, h_homo, h_het) -> list[tuple[str, str, str, str]]:
    """(check, thesis, hermes, agreement) for one graph."""
    out = []
    for name, th, h in (("homogeneous", th_homo, h_homo), ("heterogeneous", th_het, h_het)):
        tf, hf = _fastest(th), _fastest(h)
        tsf = min(SHARED, key=th.get)
        hsf = min(SHARED, key=h.get)
        out.append((f"{name}: fastest (of the four both ran)", f"{tf} {th[tf]:.2f} s ({tsf})",
                    f"{hf} {h[hf]:.1f} s ({hsf})", "same" if tsf == hsf else "differs"))
    for name, a, th, h in (("homogeneous: No DLB ÷ fastest", "No DLB", th_homo, h_homo),
                           ("heterogeneous: METIS equal ÷ fastest", "METIS equal", th_het, h_het)):
        rt, rh = th[a] / th[_fastest(th)], h[a] / h[_fastest(h)]
        out.append((name, f"{rt:.2f}", f"{rh:.2f}", _size(rt, rh)))
    rt, rh = th_het["No DLB"] / th_homo["No DLB"], h_het["No DLB"] / h_homo["No DLB"]
    side = "same side of 1" if (rt < 1) == (rh < 1) else "opposite sides of 1"
    out.append(("No DLB: heterogeneous ÷ homogeneous", f"{rt:.2f}", f"{rh:.2f}", f"{side}; {_size(rt, rh)}"))
    return out


def _size(thesis: float, hermes: float) -> str:
    """hermes' ratio against the thesis': within 10 %, or the factor between them."""
    f = hermes / thesis
    return "within 10 %" if abs(math.log(f)) <= math.log(1.1) else f"hermes ×{f:.2f}"


def _pairs(data: dict[str, Any]):
    """(graph, mesh label, thesis homo, thesis het, hermes homo, hermes het) of every graph both sides ran."""
    mine = times(data)
    for graph, label in MESH_OF.items():
        if label is None or label not in mine.get(HOMO, {}) or label not in mine.get(HETERO, {}):
            continue
        yield graph, label, thesis_times(HOMO, graph), thesis_times(HETERO, graph), mine[HOMO][label], \
            mine[HETERO][label]


def ratios_table(data: dict[str, Any]) -> str:
    """Per graph: the fastest method and three ratios, each side from its own seconds."""
    body = []
    for graph, label, a, b, c, d in _pairs(data):
        for check, th, h, agree in _checks(a, b, c, d):
            body.append([graph, check, th, h, agree])
    return _md(["graph", "check", f"thesis ({THESIS_GRID_SOURCE[HOMO]}, {THESIS_GRID_SOURCE[HETERO]})",
                "hermes (this page's runs)", "agreement"], body, right=5)


def _order(t: dict[str, float]) -> list[str]:
    return sorted(SHARED, key=t.get)


def _discordant(a: list[str], b: list[str]) -> int:
    return sum((a.index(x) < a.index(y)) != (b.index(x) < b.index(y)) for x, y in combinations(SHARED, 2))


def orderings_table(data: dict[str, Any]) -> str:
    """The order of the four methods both ran, fastest first, per graph and scenario, and the pairs it swaps."""
    body = []
    for graph, label, a, b, c, d in _pairs(data):
        for scen, th, h in ((HOMO, a, c), (HETERO, b, d)):
            to, ho = _order(th), _order(h)
            n = _discordant(to, ho)
            body.append([graph, scen.removeprefix("thesis-"), " < ".join(to), " < ".join(ho),
                         "same" if n == 0 else f"{n} of 6 pairs swapped"])
    return _md(["graph", "capacities", "thesis, fastest first", "hermes, fastest first", "agreement"], body,
               right=5)


def verdict(data: dict[str, Any]) -> str:
    """What matches and what does not, counted over the graphs both sides ran (a bullet list)."""
    pairs = list(_pairs(data))
    n = len(pairs)
    if not n:
        return "- no graph of Table 10.2 in the cache"
    lines = []

    def count(pred) -> tuple[int, list[str]]:
        yes = [g for g, *rest in pairs if pred(*rest)]
        return len(yes), yes

    def names(gs):
        return ", ".join(gs) if gs else "none"

    k, gs = count(lambda label, a, b, c, d: min(SHARED, key=a.get) == min(SHARED, key=c.get))
    lines.append(f"- homogeneous, fastest of the four methods both ran: the same on {k} of {n} graphs ({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: min(SHARED, key=b.get) == min(SHARED, key=d.get))
    lines.append(f"- heterogeneous, fastest of the four: the same on {k} of {n} graphs ({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: b["PCG"] < b["METIS equal"] and d["PCG"] < d["METIS equal"])
    lines.append(f"- heterogeneous, PCG faster than METIS equal (the thesis' point: fair beats equal): on both "
                 f"sides on {k} of {n} graphs ({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: (b["GDA1"] < b["METIS equal"]) == (d["GDA1"] < d["METIS equal"]))
    lines.append(f"- heterogeneous, GDA1 against METIS equal: the same side on {k} of {n} graphs ({names(gs)})")
    for scen, i, j in ((HOMO, 0, 2), (HETERO, 1, 3)):
        k, gs = count(lambda label, *t: _discordant(_order(t[i]), _order(t[j])) == 0)
        lines.append(f"- {scen.removeprefix('thesis-')}, the order of the four: the same on {k} of {n} graphs "
                     f"({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: abs(math.log((c["No DLB"] / min(c.values()))
                                                      / (a["No DLB"] / min(a.values())))) <= math.log(1.1))
    lines.append(f"- homogeneous, No DLB ÷ fastest within 10 % of the thesis' ratio on {k} of {n} graphs "
                 f"({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: abs(math.log((d["METIS equal"] / min(d.values()))
                                                      / (b["METIS equal"] / min(b.values())))) <= math.log(1.1))
    lines.append(f"- heterogeneous, METIS equal ÷ fastest within 10 % of the thesis' ratio on {k} of {n} graphs "
                 f"({names(gs)})")
    k, gs = count(lambda label, a, b, c, d: (b["No DLB"] < a["No DLB"]) == (d["No DLB"] < c["No DLB"]))
    lines.append(f"- No DLB heterogeneous against homogeneous: the same order on {k} of {n} graphs ({names(gs)}); "
                 f"the thesis' heterogeneous run is the faster on "
                 f"{sum(b['No DLB'] < a['No DLB'] for _, _, a, b, _, _ in pairs)} of them, hermes' on "
                 f"{sum(d['No DLB'] < c['No DLB'] for *_, c, d in pairs)}")
    imb = {r["labels"]["mesh"]: r["final_imbalance"] for r in data["figures"]["runs"]
           if r["labels"]["scenario"] == HOMO and r["labels"]["balancer"] == "No DLB" and r["total_time"]}
    homo = times(data).get(HOMO, {})
    below = [m for m in imb if m in homo and homo[m]["No DLB"] / min(homo[m].values()) <= imb[m]]
    lines.append("- hermes' homogeneous No DLB final imbalance: " + ", ".join(f"{m} {v:.2f}" for m, v in imb.items())
                 + f"; its No DLB ÷ fastest is at most that on {len(below)} of {len(imb)} meshes")
    return "\n".join(lines)


def table_10_6() -> list[list[float]]:
    """Thesis Table 10.6 as shipped (``configs/thesis-table-10.6.csv``): one list of 15 capacities per phase."""
    from benchmarks.cache import ROOT

    with open(ROOT / "configs" / "thesis-table-10.6.csv", newline="") as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    return [[float(r[k]) for r in rows[1:]] for k in range(1, len(rows[0]))]


def het_homo_table(data: dict[str, Any]) -> str:
    """Why the thesis' heterogeneous No DLB cannot be the homogeneous run under Table 10.6: the checks."""
    cols = table_10_6()
    sums = [sum(c) for c in cols]
    homo_c = cols[0]
    mine = times(data)
    body = [["Table 10.6: first column (adaptation 1)",
             f"{min(homo_c):.4f}–{max(homo_c):.4f}, sum {sums[0]:.4f}: the homogeneous capacities (0.0667 each)"],
            ["Table 10.6: column sums (adaptations 1–7)", ", ".join(f"{s:.4f}" for s in sums)],
            ["Table 10.6: smallest capacity per column", ", ".join(f"{min(c):.4f}" for c in cols)]]
    ratios = {g: THESIS_TABLES[HETERO][g][0] / THESIS_TABLES[HOMO][g][0] for g in THESIS_GRAPHS}
    body.append(["thesis No DLB heterogeneous ÷ homogeneous, per graph",
                 ", ".join(f"{g} {r:.2f}" for g, r in ratios.items())
                 + f" (spread ×{max(ratios.values()) / min(ratios.values()):.2f})"])
    scale = {g: ratios[g] / (mine[HETERO][MESH_OF[g]]["No DLB"] / mine[HOMO][MESH_OF[g]]["No DLB"])
             for g in THESIS_GRAPHS if MESH_OF[g] and MESH_OF[g] in mine.get(HOMO, {})
             and MESH_OF[g] in mine.get(HETERO, {})}
    same = {g: mine[HETERO][MESH_OF[g]]["No DLB"] / mine[HOMO][MESH_OF[g]]["No DLB"] for g in scale}
    if same:
        body.append(["hermes No DLB heterogeneous ÷ homogeneous (the same M), per graph",
                     ", ".join(f"{g} {r:.2f}" for g, r in same.items())
                     + f" (spread ×{max(same.values()) / min(same.values()):.2f})"])
    if scale:
        body.append(["scaling factor M' of the heterogeneous runs (M = 50 homogeneous) that would turn hermes' "
                     "same-M ratio into the thesis', M'/M per graph",
                     ", ".join(f"{g} {s:.2f}" for g, s in scale.items())
                     + f" (spread ×{max(scale.values()) / min(scale.values()):.2f}: no single M')"])
    start, end = THESIS_L9_LOADS["start"], THESIS_L9_LOADS["end"]
    imb = [max(x) / (sum(x) / len(x)) for x in (start, end)]
    body.append(["L9 imbalance max l / mean l (Tables 10.3, 10.4)", f"start {imb[0]:.3f}, after phase 7 {imb[1]:.3f}"])
    last = cols[-1]
    het7 = max(l / c for l, c in zip(end, last))
    homo7 = max(end) / homo_c[0]
    body.append(["L9, last phase: max l_i / c_i with Table 10.4's loads, Table 10.6's last column ÷ the same with "
                 "0.0667 each", f"{het7:,.0f} ÷ {homo7:,.0f} = {het7 / homo7:.2f}"])
    bound = 1.0 / (imb[1] * sums[-1]) * (homo_c[0] * len(homo_c))
    body.append(["L9, last phase, any assignment of the loads to the capacities: at least (Σl / Σc) ÷ "
                 "(max l / 0.0667)", f"{bound:.2f}"])
    need = 1.0 / (ratios["L9"] * max(sums[1:-1])) * (homo_c[0] * len(homo_c))
    sign = ">" if bound > ratios["L9"] else "≤"
    body.append(["L9: that bound against the thesis' ratio of the totals (Tables 10.5, 10.7)",
                 f"{bound:.2f} {sign} {ratios['L9']:.2f}"])
    body.append(["L9: the homogeneous imbalance some phase 2–6 needs for a per-phase ratio below the thesis' "
                 "total one, at least 1 / (ratio × Σc), against Table 10.4's final imbalance",
                 f"{need:.2f} {'>' if need > imb[1] else '≤'} {imb[1]:.2f}"])
    return _md(["check", "value"], body, right=2)


def headline(data: dict[str, Any]) -> str:
    mine = times(data)
    meshes = list(mine.get(HOMO, {}))
    parts = []
    for scen in (HOMO, HETERO):
        wins: dict[str, int] = {}
        for label in meshes:
            if label in mine.get(scen, {}):
                b = _fastest(mine[scen][label])
                wins[b] = wins.get(b, 0) + 1
        parts.append(f"{scen}: fastest " + ", ".join(f"{b} on {k}" for b, k in sorted(wins.items())))
    return f"{len(meshes)} meshes; " + "; ".join(parts)
