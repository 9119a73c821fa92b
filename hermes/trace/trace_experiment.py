"""``hermes compare`` on a trace: the replay options and balancers swept over a real application's trace.

An experiment whose base is a trace (``hermes compare --trace STEM``, or an experiment file with ``trace:``)
runs :func:`hermes.trace.replay_report.replay_to_dir` once per point of its axes instead of ``hermes run``::

    name: nolb                                  # the directory runs/<name> (default: the trace's name)
    description: ...
    trace: ../data/nolb-8color-16nodes-data/data   # relative to this file
    set: {phase: 1-301, beta: 1.0e-9}           # replay options for every run
    axes:
      balancer: [grapevine, pcg, {label: METIS 1 %, algorithm: metis, ufactor: 10}]
      graph: [comm, full]                       # ... and any replay option: phase, graph, capacities, alpha,
                                                #     beta, gamma, delta, memory_limit, rounds, trigger,
                                                #     realisation, memory_step, seed

Each run's directory ``runs/<id>/`` is a replay directory (replay.csv, replay.json, table.md, replay.png); the
experiment writes ``results.csv`` (every row of every run with the run's axis labels), ``table.md`` (the
imbalance after balancing per phase, one column per run, the trace's own first) and ``compare.png``
(imbalance and off-rank bytes per phase, one line per run). A finished run found in the directory is kept.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from hermes.claims import claim_dir, read_marker, subdir
from hermes.errors import HermesError
from hermes.files import slug, write_atomic, write_csv
from hermes.trace.lbdatafile import read_trace
from hermes.trace.trace_phase import TraceError

__all__ = ["TRACE_OPTIONS", "trace_experiment", "load_trace_experiment", "run_trace_experiment",
           "render_trace_experiment", "is_trace_experiment"]

#: the replay options an experiment may set or sweep, with their defaults (hermes trace replay's)
TRACE_OPTIONS: dict[str, Any] = {"phase": "all", "graph": "auto", "capacities": None, "alpha": 1.0, "beta": 0.0,
                                 "gamma": 0.0, "delta": 0.0, "memory_limit": None, "rounds": 3, "trigger": 1.0,
                                 "realisation": "auto", "memory_step": "refine", "seed": 0}
_TOP = {"name", "description", "trace", "set", "axes"}


def _doc(path: Path) -> dict[str, Any] | None:
    """A JSON file hermes wrote into the experiment (read with the loaders' limits), None if it is not one."""
    from hermes.loaders import load_json

    try:
        doc = load_json(path, error=TraceError)
    except TraceError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows", []), list) or not all(
            isinstance(r, dict) for r in doc.get("rows", [])):
        return None
    return doc


def _balancer(v: Any) -> tuple[str, dict[str, Any], str]:
    """(algorithm, its parameters, label) of a balancer axis value: a name or {label, algorithm, params...}."""
    if isinstance(v, str):
        return v, {}, v
    if isinstance(v, dict) and isinstance(v.get("algorithm"), str):
        params = {k: x for k, x in v.items() if k not in ("label", "algorithm")}
        return v["algorithm"], params, str(v.get("label") or v["algorithm"])
    raise TraceError(f"axis balancer: {v!r}: expected a balancer name or {{algorithm: NAME, label: ..., "
                     f"<parameter>: ...}}")


def trace_experiment(stem: str | Path, *, axes: dict[str, list[Any]] | None = None,
                     sets: dict[str, Any] | None = None, name: str | None = None,
                     description: str = "") -> dict[str, Any]:
    """A checked trace experiment (the dict of the module docstring, ``trace`` absolute)."""
    axes = dict(axes or {})
    sets = dict(sets or {})
    for key in list(axes) + list(sets):
        if key != "balancer" and key not in TRACE_OPTIONS:
            raise TraceError(f"{key}: not a replay option (balancer, {', '.join(TRACE_OPTIONS)})")
    if "balancer" in sets:
        raise TraceError("set: balancer is an axis (axes: {balancer: [...]})")
    # YAML (and --set) read a bare off as false: memory_step's off
    if sets.get("memory_step") is False:
        sets["memory_step"] = "off"
    if isinstance(axes.get("memory_step"), list):
        axes["memory_step"] = ["off" if v is False else v for v in axes["memory_step"]]
    axes.setdefault("balancer", ["grapevine", "pcg", "metis"])
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise TraceError(f"axis {key}: expected a non-empty list of values")
    for v in axes["balancer"]:
        _balancer(v)
    labels = [_balancer(v)[2] for v in axes["balancer"]]
    if len(set(labels)) != len(labels):
        raise TraceError(f"axis balancer: two values share the label {next(x for x in labels if labels.count(x) > 1)!r}"
                         f" (give each a label)")
    return {"name": name or slug(Path(str(stem)).name), "description": description, "trace": str(stem),
            "set": sets, "axes": axes}


def load_trace_experiment(path: str | Path, *, name: str | None = None) -> dict[str, Any]:
    """A trace experiment file (``trace:`` relative to it)."""
    from hermes.loaders import load_yaml

    path = Path(path)
    doc = load_yaml(path)
    if not isinstance(doc, dict) or "trace" not in doc:
        raise TraceError(f"{path}: not a trace experiment (no 'trace' key)")
    extra = sorted(set(doc) - _TOP)
    if extra:
        raise TraceError(f"{path}: {extra[0]}: unknown key of a trace experiment ({', '.join(sorted(_TOP))})")
    stem = Path(str(doc["trace"])).expanduser()
    stem = stem if stem.is_absolute() else path.parent / stem
    return trace_experiment(stem, axes=doc.get("axes") or {}, sets=doc.get("set") or {},
                            name=name or doc.get("name") or path.stem, description=str(doc.get("description") or ""))


def _runs(exp: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(exp["axes"])
    runs = []
    for combo in itertools.product(*(exp["axes"][k] for k in keys)):
        opts = {**TRACE_OPTIONS, **exp["set"]}
        labels = {}
        algorithm, params = None, {}
        for key, value in zip(keys, combo):
            if key == "balancer":
                algorithm, params, labels[key] = _balancer(value)
            else:
                opts[key] = value
                labels[key] = value if isinstance(value, (str, int, float)) else json.dumps(value)
        rid = slug("_".join(str(labels[k]) for k in keys))
        runs.append({"id": rid, "labels": labels, "algorithm": algorithm, "params": params, "options": opts})
    ids = [r["id"] for r in runs]
    if len(set(ids)) != len(ids):
        raise TraceError("two runs of the experiment have the same labels (give the axis values distinct labels)")
    return runs


def _work_model(o: dict[str, Any]):
    from hermes.trace.workmodel import WorkModel

    def num(key):
        v = o[key]
        if v is None and key == "memory_limit":
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TraceError(f"{key}: expected a number, got {v!r}")
        return float(v)

    return WorkModel(num("alpha"), num("beta"), num("gamma"), num("delta"), num("memory_limit"))


def _check_run(run: dict[str, Any]) -> None:
    """A run's replay options and balancer parameters, checked as hermes trace replay checks them (TraceError naming the
    run)."""
    from hermes.balance.registry import get_balancer
    from hermes.trace.replay import check_options

    o = run["options"]
    try:
        _work_model(o)
        check_options(graph=o["graph"], capacities=o["capacities"], seed=o["seed"], rounds=o["rounds"],
                      trigger=o["trigger"], realisation=o["realisation"], memory_step=o["memory_step"])
        if o["memory_step"] != TRACE_OPTIONS["memory_step"] and o["memory_limit"] is None:
            raise TraceError(f"memory_step {o['memory_step']}: needs memory_limit (the step finishes each balancer "
                             f"under a memory limit)")
        get_balancer(run["algorithm"]).check(run["params"], prefix=f"{run['algorithm']}.")
    except HermesError as err:
        raise TraceError(f"run {run['id']}: {err}") from None


def run_trace_experiment(exp: dict[str, Any], out: str | Path | None = None, *, report: bool = True,
                         say=print) -> Path:
    """Run every point of ``exp`` (skipping finished ones) and write the experiment's files; its directory.
    ``say`` gets a line per run; if it is a :class:`~hermes.progress.Progress` (``hermes compare``'s), it also
    shows the step in progress, ``replay 2/6 (pcg_comm): phase 3 (4/10): pcg``, repeated while it lasts."""
    from hermes.progress import Progress
    from hermes.trace.replay_report import replay_json, replay_to_dir

    runs = _runs(exp)
    for run in runs:  # every run's options and balancer parameters before the first replay (one line)
        _check_run(run)
    d = Path(out) if out is not None else Path("runs") / exp["name"]
    lock = claim_dir(d, "--out", kind="trace-experiment", name=exp["name"])
    try:
        cache: dict[str, Any] = {}
        say(f"hermes compare: {exp['name']}: {len(runs)} replay{'s' * (len(runs) != 1)} of {exp['trace']} in {d}")
        write_atomic(d / "trace-experiment.json", json.dumps({**exp, "runs": runs}, indent=1, default=str) + "\n")
        rows: list[dict[str, Any]] = []
        for i, run in enumerate(runs, 1):
            o = run["options"]
            shown = _Within(say, f"replay {i}/{len(runs)} ({run['id']}): ") if isinstance(say, Progress) else None
            rd = subdir(d, "runs", run["id"])
            done = rd / "replay.json"
            data = _doc(done) if done.is_file() and read_marker(rd) == "replay" else None
            if data is not None:
                if data.get("experiment_run") == run["id"]:
                    say(f"  {run['id']}: complete, kept")
                    rows += [{**r, **run["labels"]} for r in data["rows"]]
                    continue
            key = str(o["phase"])
            if key not in cache:
                if shown is not None:
                    shown.status("reading the trace")
                cache[key] = read_trace(exp["trace"], phases=o["phase"], progress=shown)
            trace = cache[key]
            from hermes.claims import write_marker

            write_marker(rd, "replay", run["id"])
            table = replay_to_dir(trace, [run["algorithm"]], rd, params={run["algorithm"]: run["params"]},
                                  graph=o["graph"], capacities=o["capacities"], work_model=_work_model(o),
                                  seed=o["seed"], rounds=o["rounds"], trigger=o["trigger"],
                                  realisation=o["realisation"], memory_step=o["memory_step"], plot=report,
                                  progress=shown)
            got = table.rows()
            meta = _doc(done)
            if meta is None:
                raise TraceError(f"{done}: the replay's record cannot be read back")
            meta["experiment_run"] = run["id"]
            write_atomic(done, replay_json(meta, meta.pop("rows")))
            say(f"  {run['id']}: " + ", ".join(f"phase {r['phase']} {r['imbalance_before']:.4f} → "
                                              f"{r['imbalance_after']:.4f}" for r in got[:3])
                + (" ..." if len(got) > 3 else ""))
            rows += [{**r, **run["labels"]} for r in got]
        if isinstance(say, Progress):
            say.status("writing results.csv and table.md" + (", drawing compare.png" if report else ""))
        _write(d, exp, runs, rows, report)
        if isinstance(say, Progress):
            say.status(None)
    except HermesError:
        raise
    finally:
        lock.release(remove_if_unused=True)
    return d


class _Within:
    """A :class:`~hermes.progress.Progress`'s status with a prefix (the run of the experiment a replay's step
    belongs to)."""

    def __init__(self, progress, prefix: str):
        self.progress, self.prefix = progress, prefix

    def status(self, text: str | None, done: int | None = None, total: int | None = None) -> None:
        self.progress.status(None if text is None else self.prefix + text, done, total)


def _write(d: Path, exp: dict[str, Any], runs: list[dict[str, Any]], rows: list[dict[str, Any]],
           report: bool) -> None:
    from hermes.trace.replay_report import COLUMNS

    axes = list(exp["axes"])
    extra = sorted({k for r in rows for k in r} - set(COLUMNS) - set(axes))
    write_csv(d / "results.csv", rows, axes + COLUMNS + extra)
    phases = list(dict.fromkeys(r["phase"] for r in rows))
    label = {run["id"]: " / ".join(str(v) for v in run["labels"].values()) for run in runs}
    by = {(r["phase"], "_".join(str(r[k]) for k in axes)): r for r in rows}
    cols = [(run, "_".join(str(run["labels"][k]) for k in axes)) for run in runs]
    head = "| phase | trace | " + " | ".join(label[run["id"]] for run, _ in cols) + " |"
    lines = [f"# {exp['name']}: imbalance (max/mean load) after balancing, per phase", "",
             exp["description"] or f"Trace {exp['trace']}.", "", head, "|" + "---|" * (len(cols) + 2)]
    for ph in phases:
        first = next(r for r in rows if r["phase"] == ph)
        cells = [f"{by[(ph, key)]['imbalance_after']:.4f}" if (ph, key) in by else "" for _, key in cols]
        lines.append(f"| {ph} | {first['imbalance_before']:.4f} | " + " | ".join(cells) + " |")
    write_atomic(d / "table.md", "\n".join(lines) + "\n")
    if report and rows:
        _plot(d / "compare.png", exp, cols, label, by, phases)


def _plot(path: Path, exp, cols, label, by, phases) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hermes.files import write_through

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    first = [by[(ph, cols[0][1])] for ph in phases if (ph, cols[0][1]) in by]
    axes[0].plot([r["phase"] for r in first], [r["imbalance_before"] for r in first], "k--", marker="o",
                 label="trace")
    axes[1].plot([r["phase"] for r in first], [r["offrank_bytes_before"] for r in first], "k--", marker="o",
                 label="trace")
    for run, key in cols:
        mine = [by[(ph, key)] for ph in phases if (ph, key) in by]
        axes[0].plot([r["phase"] for r in mine], [r["imbalance_after"] for r in mine], marker=".",
                     label=label[run["id"]])
        axes[1].plot([r["phase"] for r in mine], [r["offrank_bytes_after"] for r in mine], marker=".",
                     label=label[run["id"]])
    for ax, y in zip(axes, ("imbalance after (max / mean load)", "off-rank bytes after")):
        ax.set_xlabel("phase")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{exp['name']}: {Path(exp['trace']).name}", fontsize=10)
    fig.tight_layout()
    write_through(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def is_trace_experiment(path: str | Path) -> bool:
    """Whether the YAML file ``path`` is a trace experiment (has a top-level ``trace`` key)."""
    from hermes.loaders import load_yaml

    try:
        doc = load_yaml(Path(path))
    except HermesError:
        return False
    return isinstance(doc, dict) and "trace" in doc


def render_trace_experiment(d: str | Path, *, report: bool = True) -> list[Path]:
    """Write results.csv, table.md and compare.png of the trace experiment in ``d`` again from its runs."""
    d = Path(d)
    if read_marker(d) != "trace-experiment" or not (d / "trace-experiment.json").is_file():
        raise TraceError(f"{d}: not a trace experiment directory hermes made")
    plan = _doc(d / "trace-experiment.json")
    runs = plan.get("runs") if plan is not None else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("id"), str)
                                             and isinstance(r.get("labels"), dict) for r in runs) or not (
            isinstance(plan.get("axes"), dict) and isinstance(plan.get("name"), str)
            and isinstance(plan.get("trace"), str) and isinstance(plan.get("description", ""), str)):
        raise TraceError(f"{d / 'trace-experiment.json'}: not a trace experiment's plan")
    rows: list[dict[str, Any]] = []
    for run in runs:
        f = subdir(d, "runs", run["id"]) / "replay.json"
        got = _doc(f) if f.is_file() else None
        if got is not None:
            rows += [{**r, **run["labels"]} for r in got.get("rows", [])]
    _write(d, plan, runs, rows, report)
    return [d / "results.csv", d / "table.md"] + ([d / "compare.png"] if report and rows else [])
