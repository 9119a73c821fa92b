"""The pages of ``results/``, rendered from their benchmarks' caches; BENCHMARKS.md, their index.

    python -m benchmarks.render                  # every page from its cache (seconds; no benchmark runs)
    python -m benchmarks.render --run thesis     # rerun a page's benchmark (refreshing its cache), then render
    python -m benchmarks.render --run quick      # every benchmark of a few minutes; --run all: every one
    python -m benchmarks.render --check          # exit 1 when a page or the index differs from its cache's

``make results`` is the first command, ``make results RUN=thesis,extraload`` (or ``RUN=quick``, ``RUN=all``) the
second. A page is its template (``benchmarks/pages/<name>.md``: the reading of the figures, in words) with these
placeholders filled from the cache:

- ``{{about}}``: the machine, the command and the date of the figures, and the command that refreshes them;
- ``{{table NAME}}``: a table of the page's figures, made by the function NAME of :data:`PAGES`' entry.

A page without a cache (``cache=None``: its benchmark has not yet written one) is kept as it is, with the tables
recorded in it; the index says so and names the command that would make its cache.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import cache as caches
from benchmarks import thesis_page
from hermes.interpreter import child_env, python_command

__all__ = ["Page", "PAGES", "render_page", "render_index", "main"]

ROOT = caches.ROOT
RESULTS = ROOT / "results"
TEMPLATES = Path(__file__).resolve().parent / "pages"
INDEX = ROOT / "BENCHMARKS.md"


@dataclass(frozen=True)
class Page:
    """One page of ``results/``: ``results/<name>.md``, rendered from ``results/<cache>``."""

    name: str
    title: str
    #: the cache, relative to results/ (a JSON file of :mod:`benchmarks.cache`, or a directory of CSV files);
    #: None: the page holds recorded tables (cache pending)
    cache: str | None
    #: the command that (re)writes the cache, run from the repository's top with this Python
    refresh: tuple[str, ...]
    #: minutes of CPU the refresh takes on a 2-core machine, roughly (``--run quick``: at most 10)
    minutes: float
    #: the figure of the index line: a function of the loaded cache, or the text of a recorded page
    headline: Callable[[Any], str] | str
    tables: dict[str, Callable[[Any], str]] = field(default_factory=dict)
    #: for a cache of CSV files written before the caches carried their date: the date and machine in words
    about: str = ""

    @property
    def path(self) -> Path:
        return RESULTS / f"{self.name}.md"

    def load(self) -> Any:
        """The cache: the JSON object, or for a directory {stem: rows} of its CSV files and its JSON files."""
        assert self.cache is not None
        p = RESULTS / self.cache
        if p.is_dir():
            out: dict[str, Any] = {}
            for f in sorted(p.glob("*.csv")):
                with f.open(newline="") as fh:
                    out[f.stem] = list(csv.DictReader(fh))
            for f in sorted(p.glob("*.json")):
                out[f.stem] = json.loads(f.read_text())
            return out
        return caches.read(p)


# ---------------------------------------------------------------------------------------------------- the about line


def _machine(m: dict[str, Any]) -> str:
    mpi = f", {m['mpi']}" if m.get("mpi") else ""
    mem = f", {m['memory_gib']:g} GiB" if m.get("memory_gib") else ""
    return (f"{m['cores']} cores ({m['cpu']}){mem}, CPython {m['python']}{mpi}; 1-minute load {m['load']:g} "
            f"when the benchmark started")


def about(page: Page, data: Any) -> str:
    """Machine, command, date and commit of the figures, and how to refresh them."""
    refresh = " ".join(page.refresh)
    if page.about:  # a cache that does not carry its own
        return f"{page.about}\n\nRefresh: `{refresh}` (`make results RUN={page.name}`)."
    tree = "" if data["tree"] == "clean" else f" ({data['tree']})"
    return (f"Figures of {data['date'][:10]} ({data['date'][11:16]} UTC), commit {data['commit']}{tree}, from "
            f"`{data['command']}`.\nMachine: {_machine(data['machine'])}.\n\n"
            f"Refresh: `{refresh}` (`make results RUN={page.name}`); this page: `make results`.")


# ------------------------------------------------------------------------------------------------ tables of pages


def _md(head: list[str], body: list[list[str]], right: int = 1) -> str:
    """A Markdown table; columns from ``right`` on are right-aligned."""
    align = "|" + "|".join("---" if i < right else "---:" for i in range(len(head))) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", align, *("| " + " | ".join(r) + " |" for r in body)])


def _down(labels: dict[str, str], axes: list[str]) -> str:
    """A run's row label: its labels on every axis but the last, joined."""
    return " · ".join(labels[a] for a in axes[:-1])


def experiment_grid(data: dict[str, Any]) -> str:
    """Total simulated time (final imbalance) of each run: the other axes down, the last across."""
    fig = data["figures"]
    runs = fig["runs"]
    axes = fig["axes"]
    down, across = " · ".join(axes[:-1]), axes[-1]
    rows = list(dict.fromkeys(_down(r["labels"], axes) for r in runs))
    cols = list(dict.fromkeys(r["labels"][across] for r in runs))
    by = {(_down(r["labels"], axes), r["labels"][across]): r for r in runs}
    body = []
    for a in rows:
        cells = [a]
        for b in cols:
            r = by.get((a, b))
            cells.append("—" if r is None or r["total_time"] is None else
                         f"{r['total_time']:#.4g} s ({r['final_imbalance']:.2f})")
        body.append(cells)
    return _md([down, *cols], body)


def experiment_balancing(data: dict[str, Any]) -> str:
    """Balancing and migration time summed over the phases, and the cells moved, of each run."""
    fig = data["figures"]
    down, across = " · ".join(fig["axes"][:-1]), fig["axes"][-1]
    body = [[_down(r["labels"], fig["axes"]), r["labels"][across], f"{r['balance_time']:.4g}",
             f"{r['migrate_time']:.4g}",
             f"{r['cells_moved'] if 'cells_moved' in r else r['moved_cells']:,}"]  # moved_cells: caches before
            for r in fig["runs"] if r["total_time"] is not None]
    return _md([down, across, "balance (s)", "migrate (s)", "cells moved"], body, right=2)


def _best(data: dict[str, Any], down: str) -> tuple[dict, dict | None]:
    fig = data["figures"]
    a0, a1 = fig["axes"][0], fig["axes"][-1]
    mine = [r for r in fig["runs"] if r["labels"][a0] == down and r["total_time"] is not None]
    best = min(mine, key=lambda r: r["total_time"])
    none = next((r for r in mine if r["labels"][a1].lower() in ("none", "no dlb")), None)
    return best, none


def cfd_headline(data: dict[str, Any]) -> str:
    a1 = data["figures"]["axes"][-1]
    best, none = _best(data, "cylinder")
    return (f"cylinder: {best['labels'][a1]} {best['total_time']:.4g} s against {none['total_time']:.4g} s "
            f"unbalanced (six balancers, six meshes, 8 ranks)")


def extraload_table(data: dict[str, Any]) -> str:
    from benchmarks.extraload_runs import markdown

    return markdown(data["figures"])


def extraload_gap(data: dict[str, Any]) -> str:
    body = []
    for r in data["figures"]:
        gap = r["nominal"] - r["oracle"]
        body.append([r["scenario"], *(f"{100 * (r['nominal'] - r[k]) / gap:.0f} %" if gap else "—"
                                      for k in ("probe", "measured", "forecast"))])
    return _md(["scenario", "probe", "measured", "forecast"], body)


def extraload_headline(data: dict[str, Any]) -> str:
    r = data["figures"][0]
    return (f"{r['scenario']}: probe {r['probe']:.1f} s, oracle {r['oracle']:.1f} s, nominal {r['nominal']:.1f} s, "
            f"no balancing {r['none']:.1f} s")


def sources_settings(data: dict[str, Any]) -> str:
    s = data["figures"]["settings"]
    return _md(["processors", "phases", "rate (units/s)", "work of phase 1", "growth per phase", "chunks per phase"],
               [[str(s["processors"]), str(s["phases"]), f"{s['rate']:g}", f"{s['work']:g}", f"{s['growth']:g}",
                 str(s["iterations"])]])


def sources_totals(data: dict[str, Any]) -> str:
    body = []
    for st in data["figures"]["studies"]:
        t = {r["source"]: r["total_time"] for r in st["sources"]}
        gap = t["nominal"] - t["oracle"]
        body.append([st["tasks"], *(f"{t[k]:.1f} s" for k in ("nominal", "measured", "forecast", "oracle")),
                     *(f"{100 * (t['nominal'] - t[k]) / gap:.0f} %" for k in ("measured", "forecast"))])
    return _md(["tasks", "nominal", "measured", "forecast", "oracle", "gap closed: measured", "forecast"], body)


def sources_phases(data: dict[str, Any]) -> str:
    body = [[st["tasks"], r["source"], " ".join(f"{d:.1f}" for d in r["phase_times"]), f"{r['forecast_error']:.3f}"]
            for st in data["figures"]["studies"] for r in st["sources"]]
    return _md(["tasks", "source", "phase times (s)", "mean forecast error"], body, right=3)


def sources_headline(data: dict[str, Any]) -> str:
    st = data["figures"]["studies"][0]
    t = {r["source"]: r["total_time"] for r in st["sources"]}
    return (f"{st['tasks']}: measured {t['measured']:.1f} s, forecast {t['forecast']:.1f} s against nominal "
            f"{t['nominal']:.1f} s and oracle {t['oracle']:.1f} s")


def flow64_table(data: dict[str, Any]) -> str:
    from benchmarks.flow_at_64 import markdown

    return markdown(data["figures"]["p"], data["figures"]["rows"])


def flow64_headline(data: dict[str, Any]) -> str:
    rows = data["figures"]["rows"]
    ratio = [r["methods"]["PCG"]["time"] / r["methods"]["auto"]["time"] for r in rows]
    worst = max(r["methods"]["auto"]["error"] for r in rows)
    return (f"p = {data['figures']['p']}: `auto` {min(ratio):.1f}–{max(ratio):.1f}× faster than PCG on "
            f"{len(rows)} graphs, flow error ≤ {worst:.0e}")


def _jpdc(env: str, graph: str) -> Callable[[Any], str]:
    def table(data: dict[str, Any]) -> str:
        from benchmarks.jpdc_factors import markdown_rows

        return markdown_rows(data, env, graph)

    return table


def jpdc_variants(data: dict[str, Any]) -> str:
    from benchmarks.jpdc_factors import markdown_variants

    return markdown_variants(data)


def jpdc_headline(data: dict[str, Any]) -> str:
    from benchmarks.jpdc_factors import headline

    return headline(data)


STARTUP = ["hermes --version", "hermes --help", "hermes run --help", "import hermes", "rank start-up"]


def startup_table(data: dict[str, Any]) -> str:
    fig = data["figures"]
    return _md(["measure (CPU s, min of %d)" % fig["repeats"], *fig["trees"]],
               [[m, *(f"{fig['measures'][t][m]:.2f}" for t in fig["trees"])] for m in STARTUP])


def startup_imports(data: dict[str, Any]) -> str:
    fig = data["figures"]
    lines = []
    for t in fig["trees"]:
        imp = fig["rank imports"][t]
        heavy = f"; of the heavy libraries: {', '.join(imp['heavy'])}" if imp["heavy"] else \
            "; none of scipy.optimize, matplotlib, pandas"
        lines.append(f"- {t}: {len(imp['families'])} `hermes.balance` modules imported when the set-up began{heavy}")
    return "\n".join(lines)


def startup_headline(data: dict[str, Any]) -> str:
    m = data["figures"]["measures"][data["figures"]["trees"][-1]]
    return f"a rank's start-up {m['rank start-up']:.2f} s of CPU, `import hermes` {m['import hermes']:.2f} s"


def _f(x: str, spec: str) -> str:
    return format(float(x), spec)


def async_fig7(data: dict[str, Any]) -> str:
    by: dict[int, dict[str, dict]] = {}
    for r in data["fig7"]:
        by.setdefault(int(r["processors"]), {})[r["label"]] = r
    body = []
    for p, v in sorted(by.items()):
        t = {k: float(x["time"]) for k, x in v.items()}
        err = max(float(x["error"]) for x in v.values())
        body.append([str(p), *(f"{t[k]:.3f}" for k in ("sync", "async", "async+residual", "async+time")),
                     f"{t['sync'] / t['async']:.2f}", f"{t['async'] / t['async+residual']:.2f}",
                     f"{t['async'] / t['async+time']:.2f}", f"{err:.1e}"])
    return _md(["processors", "SISC", "AIAC", "AIAC + residual", "AIAC + time", "SISC/AIAC",
                "AIAC ÷ (AIAC+residual)", "AIAC ÷ (AIAC+time)", "worst error vs serial"], body)


ASYNC_LABELS = {"sync": "SISC", "sync+static": "SISC, static partition by capacity", "async": "AIAC",
                "async+residual": "AIAC + residual balancing", "async+time": "AIAC + time balancing",
                "async+static": "AIAC, static partition by capacity"}


def async_table1(data: dict[str, Any]) -> str:
    body = []
    for r in sorted(data["table1"], key=lambda r: list(ASYNC_LABELS).index(r["label"])):
        moved = f"{int(r['migrated'])} ({int(r['transfers'])})" if int(r["migrated"]) else "—"
        body.append([ASYNC_LABELS[r["label"]], _f(r["time"], ".3f"), _f(r["error"], ".1e"), moved])
    return _md(["variant", "time (s)", "error vs serial", "points moved (transfers)"], body)


def async_fig9(data: dict[str, Any]) -> str:
    by: dict[float, dict[str, dict]] = {}
    for r in data["fig9"]:
        by.setdefault(float(r["accuracy"]), {})[r["label"]] = r
    body = []
    for acc, v in sorted(by.items(), reverse=True):
        t = {k: float(x["time"]) for k, x in v.items()}
        err = max(float(x["error"]) for x in v.values())
        body.append([f"{acc:.0e}", _f(v["async"]["residual_threshold"], ".1e"),
                     *(f"{t[k]:.3f}" for k in ("async", "async+residual", "async+time")),
                     f"{t['async'] / t['async+residual']:.2f}", f"{t['async'] / t['async+time']:.2f}",
                     f"{t['async+residual'] / t['async+time']:.2f}", f"{err:.1e}"])
    return _md(["accuracy", "window threshold", "AIAC", "AIAC + residual", "AIAC + time", "AIAC ÷ (AIAC+residual)",
                "AIAC ÷ (AIAC+time)", "(AIAC+residual) ÷ (AIAC+time)", "worst error"], body)


PAPER_COLS = [("sync", "SISC"), ("async", "AIAC"), ("async+residual", "AIAC + residual"), ("async+time", "AIAC + time")]


def _paper_table(rows: list[dict], key: str, fmt: Callable[[str], str]) -> str:
    """003's form: one line per case, the time of each variant, 003's ratios, the errors and the sweeps."""
    by: dict[float, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(float(r["case"]), {})[r["label"]] = r
    cols = [(k, h) for k, h in PAPER_COLS if any(k in v for v in by.values())]
    body = []
    for case, v in sorted(by.items()):
        t = {k: float(x["time"]) for k, x in v.items()}
        f = {k: float(x["first_round_time"]) for k, x in v.items()}
        errs = [float(x["error"]) for x in v.values()]
        ratio = lambda a, b: f"{t[a] / t[b]:.2f}" if a in t and b in t else ""  # noqa: E731
        first = f"{f['async'] / f['async+residual']:.2f}" if "async" in f and "async+residual" in f else ""
        its = lambda k: (f"{int(v[k]['min_iterations'])}–{int(v[k]['max_iterations'])}"  # noqa: E731
                         if k in v else "")
        moved = f"{int(v['async+residual']['migrated']):,}" if "async+residual" in v else ""
        body.append([fmt(next(iter(v.values()))["case"]), *(f"{t[k]:.3f}" if k in t else "" for k, _ in cols),
                     ratio("async", "async+residual"), first, ratio("async", "async+time"), ratio("sync", "async"),
                     f"{min(errs):.1e} – {max(errs):.1e}", its("async"), its("async+residual"), moved])
    return _md([key, *(f"{h} (s)" for _, h in cols), "AIAC ÷ (AIAC+residual)",
                "the same at 003's rule (first round)", "AIAC ÷ (AIAC+time)", "SISC ÷ AIAC",
                "error vs serial (all variants)", "AIAC sweeps", "AIAC+residual sweeps", "points moved (residual)"],
               body)


def async_paper(key: str, fmt: Callable[[str], str]) -> Callable[[dict[str, Any]], str]:
    head = {"paper-fig7": "processors", "paper-n": "N", "paper-table1": "speed spread (fastest ÷ slowest)",
            "paper-fig9": "accuracy (= residual threshold)"}[key.removesuffix("-60000")]
    return lambda data: _paper_table(data[key], head + (", N = 60,000" if key.endswith("-60000") else ""), fmt)


def async_converged(data: dict[str, Any]) -> str:
    """paper-n to a converged result: the time until the error against the serial solution stays below the
    accuracy, beside paper-n's time to the criterion, and the gains (ratios) at both."""
    if "paper-converged" not in data:
        return "(not run: `python -m benchmarks.bahi_async paper-converged`)"
    crit = {(int(float(r["case"])), r["label"]): float(r["time"]) for r in data.get("paper-n", [])}
    conv = {(int(float(r["case"])), r["label"]): r for r in data["paper-converged"]}
    body = []
    for n in sorted({k[0] for k in conv}):
        t = {v: float(conv[(n, v)]["converged_time"]) for v in ("sync", "async", "async+residual")
             if (n, v) in conv}
        c = {v: crit[(n, v)] for v in ("sync", "async", "async+residual") if (n, v) in crit}
        ratio = lambda d, a, b: f"{d[a] / d[b]:.2f}" if a in d and b in d else ""  # noqa: E731
        errs = [float(conv[(n, v)]["error"]) for v in t]
        body.append([f"{n:,}", *(f"{t[v]:.3f}" if v in t else "" for v in ("sync", "async", "async+residual")),
                     ratio(t, "async", "async+residual"), ratio(c, "async", "async+residual"),
                     ratio(t, "sync", "async"), ratio(c, "sync", "async"),
                     f"{float(next(iter(conv.values()))['residual_threshold']):.1e}",
                     f"{max(errs):.1e}" if errs else ""])
    return _md(["N", "SISC (s)", "AIAC (s)", "AIAC+residual (s)", "AIAC ÷ (AIAC+residual), converged",
                "the same at the criterion (paper-n)", "SISC ÷ AIAC, converged", "the same at the criterion",
                "residual threshold of the runs", "largest final error"], body)


def async_headline(data: dict[str, Any]) -> str:
    fig7 = {(int(float(r["case"])), r["label"]): float(r["time"]) for r in data["paper-fig7"]}
    big = {r["label"]: float(r["time"]) for r in data["paper-fig7-60000"] if int(float(r["case"])) == 8}
    return (f"003's form, 8 processors, N = 800: residual balancing {fig7[(8, 'async')] / fig7[(8, 'async+residual')]:.2f}× "
            f"faster than unbalanced AIAC (003 Fig. 7: 6.2–7.4); at N = 60,000 "
            f"{big['async'] / big['async+residual']:.2f}× (the literal criterion holds before any balancing)")


def flow_bench_figures(data: dict[str, Any]) -> str:
    pngs = sorted(p.name for p in (RESULTS / "flow-bench").glob("*.png"))
    return "\n\n".join(f"![{n}](flow-bench/{n})" for n in pngs)


def flow_bench_headline(data: dict[str, Any]) -> str:
    rows = sum(len(v) for v in data.values() if isinstance(v, list))
    return f"the published iteration and time figure families: {rows:,} rows of CSV, {len(data)} families"


def _scale_rows(data: dict[str, Any]) -> dict[tuple, list[dict[str, Any]]]:
    from benchmarks import scale

    rows = scale.load(RESULTS / "scale")
    order = {m: i for i, m in enumerate(scale.METHODS)}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["mesh"], r["capacities"], r["kind"], r["iterations"], r["phases"]), []).append(r)
    for key, rs in groups.items():
        rs.sort(key=lambda r: (r["ranks"], order.get(r["method"], 99)))
        metis = {r["ranks"]: r for r in rs if r["method"] == "metis"}
        for r in rs:
            m = metis.get(r["ranks"])
            r["cut_vs_metis"] = max(a / b for a, b in zip(r["cuts"], m["cuts"])) if m else None
            r["distinct_vs_metis"] = r["distinct_cells"] / m["distinct_cells"] if m and m["distinct_cells"] else None
    return groups


def _scale_table(caps: str) -> Callable[[Any], str]:
    def table(data: dict[str, Any]) -> str:
        from benchmarks import scale
        from benchmarks.partition_compare import markdown_table

        (rs,) = [rs for key, rs in _scale_rows(data).items() if key[1] == caps]
        return markdown_table(rs, scale.TABLE)
    return table


def scale_headline(data: dict[str, Any]) -> str:
    (rs,) = [rs for key, rs in _scale_rows(data).items() if key[1] == "homo"]
    at = {r["method"]: r for r in rs if r["ranks"] == 1024}
    best = at["chebyshev+compacta24+trigger"]
    return (f"1,024 processors, 10⁶ cells, one price list: chebyshev+compacta24+trigger {best['total_time']:.4f} s "
            f"against METIS {at['metis']['total_time']:.4f} s, peak memory {best['peak_rss_gib']:.2f} GiB")


def scale_grapevine(data: dict[str, Any]) -> str:
    """The study's Grapevine with the report's settings at 4,096 processors, its first balancing beside the
    report's Table (benchmarks.grapevine_mesh.table)."""
    from benchmarks.grapevine_mesh import table

    return table(json.loads((RESULTS / "scale" / "grid1000x1000_homo_weights_it200_ph3_p4096_grapevine-report.json")
                            .read_text()))


def grapevine_table(data: dict[str, Any]) -> str:
    from benchmarks.grapevine_mesh import table

    return table(data["grid500x500_p2048_it10_i10k10f6"])


def grapevine_run(data: dict[str, Any]) -> str:
    from benchmarks.grapevine_mesh import phase_line

    rec = data["grid500x500_p2048_it10_i10k10f6"]
    return (f"`hermes run`: wall {rec['summary']['wall_seconds']:.0f} s (job), peak RSS {rec['peak_rss_gib']:.2f} GiB; "
            f"{phase_line(rec)}.")


def grapevine_headline(data: dict[str, Any]) -> str:
    ph = data["grid500x500_p2048_it10_i10k10f6"]["summary"]["phases"][0]
    return (f"2,048 processors, 250,000 cells: I {ph['imbalance_before'] - 1:.4g} → {ph['imbalance_after'] - 1:.4g} "
            f"in Grapevine's 10 iterations")


def first_hour_table(data: dict[str, Any]) -> str:
    from benchmarks.first_hour import markdown

    return markdown(data["figures"])


def first_hour_headline(data: dict[str, Any]) -> str:
    from benchmarks.first_hour import headline

    return headline(data["figures"])


PY = "python"
PAGES: list[Page] = [
    Page("thesis", "The thesis experiment (Tables 10.5 and 10.7) on five meshes", "thesis.json",
         (PY, "-m", "benchmarks.experiment", "thesis", "--shared-mesh", "whitaker3", "--jobs", "2", "--cache",
          "results/thesis.json"), 8,
         thesis_page.headline, {"grid": thesis_page.grid_table, "balancing": experiment_balancing,
                                "meshes": thesis_page.meshes_table,
                                "times-homogeneous": thesis_page.times_table(thesis_page.HOMO),
                                "times-heterogeneous": thesis_page.times_table(thesis_page.HETERO),
                                "ratios": thesis_page.ratios_table, "orderings": thesis_page.orderings_table,
                                "verdict": thesis_page.verdict, "het-homo": thesis_page.het_homo_table}),
    Page("cfd", "Balancers on the CFD meshes", "cfd.json",
         (PY, "-m", "benchmarks.experiment", "cfd", "--cache", "results/cfd.json"), 10,
         cfd_headline, {"grid": experiment_grid, "balancing": experiment_balancing}),
    Page("extraload", "Extra load and monitoring: what each monitor source gives the balancer", "extraload.json",
         (PY, "-m", "benchmarks.extraload_runs", "--cache", "results/extraload.json"), 8,
         extraload_headline, {"sources": extraload_table, "gap": extraload_gap}),
    Page("extraload-sources", "Extra load: which monitor source serves a balancer best? (an idealised study)",
         "extraload-sources.json",
         (PY, "-m", "benchmarks.extraload_sources", "--tasks", "configs/extraload-bursty.csv", "--tasks",
          "configs/extraload-table-10.6.yaml", "--cache", "results/extraload-sources.json"), 1,
         sources_headline, {"settings": sources_settings, "totals": sources_totals, "phases": sources_phases}),
    Page("startup", "Start-up: the CPU of the command line and of a rank before its set-up", "startup.json",
         (PY, "-m", "benchmarks.startup", "--cache", "results/startup.json"), 2,
         startup_headline, {"cpu": startup_table, "imports": startup_imports}),
    Page("flow-at-64", "The flow computation at 64 processors: PCG, LPA, MPA, Chebyshev and `auto`",
         "flow-at-64.json", (PY, "-m", "benchmarks.flow_at_64", "--cache", "results/flow-at-64.json"), 1,
         flow64_headline, {"flows": flow64_table}),
    Page("jpdc-factors", "JPDC Tables 3 and 4: convergence factors of GDA1, GDA0, GDA6 on paths and 2-D meshes",
         "jpdc-factors.json", (PY, "-m", "benchmarks.jpdc_factors", "--cache", "results/jpdc-factors.json"), 1,
         jpdc_headline, {"hcuw-path": _jpdc("HCUW", "path"), "hcuw-mesh": _jpdc("HCUW", "mesh"),
                         "hchw-path": _jpdc("HCHW", "path"), "hchw-mesh": _jpdc("HCHW", "mesh"),
                         "variants": jpdc_variants}),
    Page("async", "Asynchronous iterations and residual-driven balancing (seed 003)", "async",
         (PY, "-m", "benchmarks.bahi_async", "everything", "--jobs", "2"), 120,
         async_headline, {"fig7": async_fig7, "table1": async_table1, "fig9": async_fig9,
                          "paper-fig7": async_paper("paper-fig7", lambda c: str(int(float(c)))),
                          "paper-n": async_paper("paper-n", lambda c: f"{int(float(c)):,}"),
                          "paper-converged": async_converged,
                          "paper-table1": async_paper("paper-table1", lambda c: f"{float(c):g}"),
                          "paper-fig9": async_paper("paper-fig9", lambda c: f"{float(c):.0e}"),
                          "paper-fig7-60000": async_paper("paper-fig7-60000", lambda c: str(int(float(c)))),
                          "paper-table1-60000": async_paper("paper-table1-60000", lambda c: f"{float(c):g}")},
         about="Virtual clock, serial simulations equal to the MPI runs bit for bit: any machine gives these "
               "figures. The CSV files of `results/async/` were written by `python -m benchmarks.bahi_async all` "
               "(hermes' windowed variant: fig7, table1, fig9; fig7 took about 12 min on 2 cores shared with other "
               "jobs) and, on 2026-11-28, by `paper-fig7`, `paper-n`, `paper-table1`, `paper-fig9` and `paper-60000` "
               "(003's form; each 3–15 min on the same cores)."),
    Page("flow-bench", "The flow computations' published figure families (`hermes lab bench`)", "flow-bench",
         ("hermes", "lab", "bench", "--out", "results/flow-bench"), 10,
         flow_bench_headline, {"figures": flow_bench_figures},
         about="Serial references under the α-β model (no wall-clock figure): any machine gives these figures. "
               "`results/flow-bench/` is the directory `hermes lab bench --out results/flow-bench` writes "
               "(marked as hermes' own): one CSV and its plots per family."),
    Page("scale", "The at-scale study: 64 to 16,384 processors, every method's result, wall time and memory",
         "scale", (PY, "-m", "benchmarks.scale", "run", "--out", "results/scale", "--meshes", "grid1000x1000",
                   "--capacities", "homo,table", "--processes", "2", "--ranks", "64,256,1024,4096",
                   "--methods", "none,pcg,chebyshev,mincost+compacta+trigger,grapevine-report,metis,scotch"), 1500,
         scale_headline, {"homo": _scale_table("homo"), "table": _scale_table("table"),
                          "grapevine": scale_grapevine},
         about="Each row is one run's JSON in `results/scale/` (the run's summary.json, its wall seconds and the "
               "job's peak resident memory, sampled every 0.2 s over every process) as `python -m benchmarks.scale "
               "run` wrote it, on this 2-core machine (24 GiB, CPython 3.11.7, Open MPI 5.0.11 wheel): 27–28 Nov "
               "2026 beside other jobs (64 and 256 processors, METIS and Scotch at 1,024: their wall bounds a quiet "
               "machine's from above), 5–6 Dec 2026 with nothing else running (the other rows; 16,384 processors: "
               "`--ranks 16384 --methods none`), and the rows at 1,024 of pcg, pcg-single, chebyshev, its compact "
               "settings, the at-scale setting and METIS on 6 Dec 2026 under the price list (docs/COSTS.md) and "
               "direct delivery, beside other jobs (their wall bounds a quiet machine's from above); later that day, "
               "also under the price list and beside other jobs: lps and the settings with 24 refinement passes "
               "(chebyshev+, pcg+, lps+compacta24+trigger) at 1,024, the recommended setting, METIS and METIS once "
               "per phase at 4,096, and the recommended setting, METIS and lps at 256 (each JSON names its case; "
               "the commits are in the issue's note). Virtual times are exact."),
    Page("grapevine-mesh", "Grapevine end to end at 2,048 processors", "grapevine-mesh",
         (PY, "-m", "benchmarks.grapevine_mesh", "--ranks", "2048", "--grid", "500x500", "--iterations", "10",
          "--processes", "2", "--out", "results/grapevine-mesh"), 30,
         grapevine_headline, {"iterations": grapevine_table, "run": grapevine_run},
         about="The run's JSON in `results/grapevine-mesh/` (its summary.json, wall seconds and the job's peak "
               "resident memory) as `python -m benchmarks.grapevine_mesh` wrote it, 28 Nov 2026, on this 2-core "
               "machine (24 GiB, CPython 3.11.7, Open MPI 5.0.11 wheel), beside the test suite of a fresh clone."),
    Page("hosting", "Hosted processors: one MPI process per processor against many per process", None,
         (PY, "-m", "benchmarks.hosting", "--grid", "160x120", "--ranks", "64", "--processes", "64,2,1",
          "--iterations", "20", "--phases", "3", "--methods", "pcg"), 15,
         "64 processors: 14.9 s and 0.37 GiB on 2 processes against 178.4 s and 6.94 GiB on 64, same results"),
    Page("drawing", "Drawing: the pictures' share of a run", None,
         (PY, "-m", "benchmarks.drawing", "scenarios/refine-airfoil.yaml"), 5,
         "refine-airfoil: a partition picture 0.49–0.53 s of CPU; the pictures add 1.6–2.3 s to 4.7–5.4 s"),
    Page("bulk", "Kernels in bulk: the at-scale study's runs before and after", None,
         (PY, "-m", "benchmarks.scale", "run", "--out", "/tmp/sc", "--meshes", "grid1000x1000", "--capacities",
          "homo", "--processes", "2", "--ranks", "1024,4096", "--methods", "none,pcg,chebyshev,"
          "mincost+compacta+trigger,metis"), 90,
         "none: 1,024 processors 21.0 s (4.4 × the numpy bound), 4,096 42.7 s, 16,384 300 s and 6.96 GiB; pcg at "
         "1,024 196.9 s against 1,133.8 s, same results; 4,096: pcg 571 s, the at-scale setting 831 s"),
    Page("trace-read", "Reading vt LBDatafile traces: hermes against the cost of parsing their JSON", None,
         (PY, "-m", "benchmarks.trace_read", "--out", "/tmp/trace-read", "--timeout", "900", "--json",
          "results/trace-read.json"), 10,
         "10⁶ empty phases: trace info 8.2 s of CPU (before: killed after 500 s); 1,000 rank files of 485 MB "
         "24.7 s against 114 s and 7.4 GB before"),
    Page("first_hour", "A new user's first hour: each step's wall time and longest silence (issue 43)",
         "first_hour.json", (PY, "-m", "benchmarks.first_hour"), 15,
         first_hour_headline, {"steps": first_hour_table}),
]


# ---------------------------------------------------------------------------------------------------- rendering

PLACEHOLDER = re.compile(r"\{\{(about|table) ?([\w-]*)\}\}")


def render_page(page: Page) -> str:
    """The text of ``results/<page>.md`` from its template and its cache."""
    data = page.load()
    template = (TEMPLATES / f"{page.name}.md").read_text()

    def fill(m: re.Match) -> str:
        if m.group(1) == "about":
            return about(page, data)
        if m.group(2) not in page.tables:
            raise KeyError(f"{page.name}: no table {m.group(2)!r} (known: {', '.join(page.tables)})")
        return page.tables[m.group(2)](data)

    text = PLACEHOLDER.sub(fill, template)
    return f"<!-- rendered by `python -m benchmarks.render` from results/{page.cache}: edit " \
           f"benchmarks/pages/{page.name}.md -->\n{text}"


def headline(page: Page) -> str:
    return page.headline if isinstance(page.headline, str) else page.headline(page.load())


def render_index() -> str:
    """BENCHMARKS.md: one line per page with its headline figure."""
    intro = ["Every result of hermes has one page in [`results/`](results/), which states the machine, the command "
             "and the date of its figures. A page is rendered from its benchmark's cache (`results/<page>.json` or "
             "`results/<page>/`) by `make results` (seconds, no benchmark runs); `make results RUN=<page>` reruns "
             "that page's benchmark first (`RUN=1` or `RUN=quick`: every benchmark of a few minutes; `RUN=all`: all "
             "of them, hours). The commands are in `benchmarks/render.py` (`python -m benchmarks.render --help`).",
             "Wall-clock figures on this 2-core machine with more processes than cores compare only side by side "
             "within one page; virtual-clock figures are exact and the same on any machine."]
    lines = ["# Benchmarks and results", ""]
    for para in intro:
        if para:
            lines += textwrap.wrap(para, 115, break_on_hyphens=False, break_long_words=False)
        lines.append("")
    lines += ["| page | headline | cache |", "|---|---|---|"]
    for p in PAGES:
        if p.cache is None:
            state = f"recorded tables (cache pending: `{' '.join(p.refresh)}`)"
        else:
            state = f"`results/{p.cache}`"
        lines.append(f"| [{p.title}](results/{p.name}.md) | {headline(p)} | {state} |")
    return "\n".join(lines) + "\n"


def refresh(page: Page) -> None:
    """Rerun the page's benchmark, which rewrites its cache."""
    cmd = list(page.refresh)
    if cmd[0] == PY:  # -m benchmarks.X: the repository named on the path, not found as the current directory
        cmd = python_command(*cmd[1:])
    elif cmd[0] == "hermes":
        cmd[0] = str(Path(sys.executable).with_name("hermes"))
    print(f"# {page.name}: {' '.join(page.refresh)}", file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env=child_env(path=[ROOT]))


def _select(names: str) -> list[Page]:
    if names == "all":
        return [p for p in PAGES if p.cache is not None]
    if names == "quick":
        return [p for p in PAGES if p.cache is not None and p.minutes <= 10]
    known = {p.name: p for p in PAGES}
    bad = [n for n in names.split(",") if n not in known]
    if bad:
        raise SystemExit(f"benchmarks.render: unknown page {', '.join(bad)} (pages: {', '.join(known)}, quick, all)")
    return [known[n] for n in names.split(",")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", metavar="PAGES", help="rerun these pages' benchmarks first: names, quick or all")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is not its cache's")
    args = ap.parse_args(argv)
    if args.run and args.check:
        ap.error("--run and --check exclude each other")
    for page in _select(args.run) if args.run else []:
        refresh(page)
    stale = []
    texts = {p.path: render_page(p) for p in PAGES if p.cache is not None}
    texts[INDEX] = render_index()
    for path, text in texts.items():
        old = path.read_text() if path.is_file() else None
        if old == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT))
        else:
            path.write_text(text)
            print(f"# rendered {path.relative_to(ROOT)}", file=sys.stderr)
    for p in PAGES:
        if p.cache is None and not p.path.is_file():
            stale.append(p.path.relative_to(ROOT))
    if stale:
        print("benchmarks.render: not rendered from the caches: " + ", ".join(map(str, stale))
              + " (run make results)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
