"""How long hermes takes to read a vt LBDatafile trace, against the cost of parsing its JSON at all.

Writes synthetic traces of the shapes that used to cost Python per phase or per task, and times ``hermes trace
info`` and ``hermes trace replay`` on each in a fresh process (wall and CPU seconds, peak memory), beside the physical
limit: ``json.loads`` of the same files (after brotli's decompression for a compressed trace) in one process.
results/trace-read.md records a run::

    .venv/bin/python -m benchmarks.trace_read --out /tmp/trace-read            # every case
    .venv/bin/python -m benchmarks.trace_read --out /tmp/trace-read --only empty-1e5 tasks-1e5

Cases (``--only`` takes their names):

- ``tiny``: one task in one phase: what starting hermes and its imports cost;
- ``empty-1e4``, ``empty-1e5``, ``empty-1e6``: one rank file of 10⁴…10⁶ empty phases (``{"id": k, "tasks": []}``);
- ``tasks-1e5``, ``tasks-1e6``: one phase of 10⁵ or 10⁶ tasks on 8 rank files, the tasks of rank r weighing
  r + 1 (an imbalance of 16/9), each with a subphase, a footprint and a shared block, and one message to the next
  task (a ring across the ranks);
- ``ranks-1e3``: 1,000 rank files of 100 tasks in each of 10 phases;
- ``brotli-1e5``: ``tasks-1e5`` brotli-compressed as vt writes it.

Replay runs ``--algorithm none,grapevine,pcg`` (``--no-plot``); on ``ranks-1e3`` ``none,grapevine`` only — a flow
balancer's object realisation passes objects rank to rank along the flow, and across a ring of 1,000 ranks with a
load gradient that is millions of moves, the balancer's cost rather than the trace's. A trace of more phases or
tasks than hermes replays (hermes.trace.replay.MAX_REPLAY_PHASES, MAX_REPLAY_TASKS) is refused in one line, and
that is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hermes.interpreter import python_command

HERMES = python_command("-m", "hermes")  # -P: nothing imported from the current directory


def _task(oid: int, r: int, t: float) -> dict:
    return {"entity": {"type": "object", "seq_id": oid, "collection_id": 0, "home": r, "migratable": True,
                       "index": [oid]},
            "node": r, "resource": "cpu", "time": t, "subphases": [{"id": 0, "time": t / 2}],
            "user_defined": {"task_footprint_bytes": 1024.0, "shared_id": oid % 16, "shared_bytes": 4096.0}}


def _comm(a: int, ra: int, b: int, rb: int) -> dict:
    e = lambda o, r: {"type": "object", "seq_id": o, "collection_id": 0, "home": r, "migratable": True}  # noqa: E731
    return {"type": "SendRecv", "from": e(a, ra), "to": e(b, rb), "messages": 1, "bytes": 64.0}


def _write(stem: Path, r: int, phases: list | str, compress: bool = False) -> None:
    body = phases if isinstance(phases, str) else json.dumps(phases, separators=(",", ":"))
    text = ('{"type":"LBDatafile","metadata":{"type":"LBDatafile","rank":%d},"phases":' % r + body + "}").encode()
    if compress:
        import brotli

        text = brotli.compress(text, quality=5)
    Path(f"{stem}.{r}.json").write_bytes(text)


def make_empty(stem: Path, n: int) -> None:
    _write(stem, 0, "[" + ",".join(f'{{"id":{k},"tasks":[]}}' for k in range(n)) + "]")


def make_tasks(stem: Path, n: int, ranks: int = 8, phases: int = 1, compress: bool = False) -> None:
    owner = np.arange(n) % ranks
    for r in range(ranks):
        mine = np.flatnonzero(owner == r).tolist()
        out = []
        for k in range(phases):
            tasks = [_task(i, r, float(r + 1)) for i in mine]
            comms = [_comm(i, r, (i + 1) % n, int(owner[(i + 1) % n])) for i in mine]
            out.append({"id": k, "tasks": tasks, "communications": comms})
        _write(stem, r, out, compress)


#: name: (what writes the trace, the balancers replayed on it)
CASES = {
    "tiny": (lambda s: make_tasks(s, 1, ranks=1), "none,grapevine,pcg"),
    "empty-1e4": (lambda s: make_empty(s, 10**4), "none,grapevine,pcg"),
    "empty-1e5": (lambda s: make_empty(s, 10**5), "none,grapevine,pcg"),
    "empty-1e6": (lambda s: make_empty(s, 10**6), "none,grapevine,pcg"),
    "tasks-1e5": (lambda s: make_tasks(s, 10**5), "none,grapevine,pcg"),
    "tasks-1e6": (lambda s: make_tasks(s, 10**6), "none,grapevine,pcg"),
    "ranks-1e3": (lambda s: make_tasks(s, 100_000, ranks=1000, phases=10), "none,grapevine"),
    "brotli-1e5": (lambda s: make_tasks(s, 10**5, compress=True), "none,grapevine,pcg"),
}


def measure_child(cmd: list[str], timeout: float, env: dict | None = None, cwd: Path | None = None) -> dict:
    """Wall and CPU seconds, peak resident memory (MiB), exit status and last stderr line of ``cmd`` in a fresh
    process (``os.wait4``: the child's own CPU time and memory); killed after ``timeout`` seconds."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return {"wall": None, "cpu": None, "rss": None, "status": "timeout", "line": f"killed after {timeout:g} s"}
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode().strip().splitlines()
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "status": os.waitstatus_to_exitcode(status), "line": err[-1] if err else ""}


def json_limit(stem: Path) -> dict:
    """CPU seconds of json.loads of every rank file (brotli-decompressed first when it is compressed) and the
    files' total size."""
    files = sorted(stem.parent.glob(stem.name + ".*.json"))
    size = sum(f.stat().st_size for f in files)
    t0 = time.process_time()
    for f in files:
        data = f.read_bytes()
        if data[:1] not in (b"{", b"["):
            import brotli

            data = brotli.decompress(data)
        json.loads(data)
    return {"json_cpu": time.process_time() - t0, "bytes": size, "files": len(files)}


def render(new: str, old: str | None = None) -> str:
    """The table of results/trace-read.md: per case, the CPU seconds and peak memory of trace info and replay,
    trace info's CPU beyond start-up (``tiny``) over json.loads', and the same of the older code if given."""
    rows = {r["case"]: r for r in json.loads(Path(new).read_text())}
    before = {r["case"]: r for r in json.loads(Path(old).read_text())} if old else {}

    def cell(r: dict | None, what: str) -> str:
        if r is None:
            return "not run"
        m = r[what]
        if m["cpu"] is None:
            return m["line"]
        return f"{m['cpu']:.2f} s, {m['rss']:.0f} MiB" + ("" if m["status"] == 0 else " (refused)")

    def ratio(r: dict | None, start: dict | None) -> str:
        if r is None or r["info"]["cpu"] is None or r["json_cpu"] < 0.05:
            return "-"
        return f"{(r['info']['cpu'] - (start['info']['cpu'] if start else 0.0)) / r['json_cpu']:.1f}"

    head = ["case", "MB", "json.loads", "trace info", "÷ json.loads", "replay"]
    if before:
        head += ["trace info before", "÷ json.loads", "replay before"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows.items():
        cells = [name, f"{r['bytes'] / 1e6:.1f}", f"{r['json_cpu']:.2f} s", cell(r, "info"),
                 ratio(r, rows.get("tiny")), cell(r, "replay")]
        if before:
            b = before.get(name)
            cells += [cell(b, "info"), ratio(b, before.get("tiny")), cell(b, "replay")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="a directory for the traces and the replays")
    ap.add_argument("--only", nargs="*", choices=list(CASES), help="these cases only")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--render", nargs="+", metavar="JSON", help="print the Markdown table of results/trace-read.md "
                    "from the --json files of a run (and of a --pythonpath run, second) instead of measuring")
    ap.add_argument("--pythonpath", help="run the commands with this hermes source tree first on the import path "
                    "(e.g. an archive of an older commit: git archive 9dbbfe4 | tar -x -C /tmp/old)")
    args = ap.parse_args(argv)
    if args.render:
        print(render(*args.render))
        return 0
    if not args.out:
        ap.error("--out DIR is needed to measure")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = None
    if args.pythonpath:
        env = {**os.environ, "PYTHONPATH": str(Path(args.pythonpath).resolve())}
    rows = []
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, numpy {np.__version__}, load {os.getloadavg()[0]:.1f}"
          f"{', hermes from ' + args.pythonpath if args.pythonpath else ''}")
    print(f"{'case':<11} {'MB':>6} {'json.loads':>10} {'info wall':>9} {'cpu':>6} {'MiB':>6} {'x json':>6} "
          f"{'replay wall':>11} {'cpu':>6} {'MiB':>6}  replay says")
    for name in args.only or list(CASES):
        d = out / name
        d.mkdir(exist_ok=True)
        stem = d / "data"
        if not Path(f"{stem}.0.json").exists():
            CASES[name][0](stem)
        lim = json_limit(stem)
        # run from the output directory: ``python -m`` puts the working directory first on the import path
        info = measure_child(HERMES + ["trace", "info", str(stem)], args.timeout, env, out)
        rd = out / f"replay-{name}"
        if rd.exists():
            import shutil

            shutil.rmtree(rd)
        rep = measure_child(HERMES + ["trace", "replay", str(stem), "--algorithm", CASES[name][1], "--no-plot",
                                      "--quiet", "--out", str(rd)], args.timeout, env, out)
        row = {"case": name, **lim, "info": info, "replay": rep, "load": os.getloadavg()[0]}
        rows.append(row)
        f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        ratio = info["cpu"] / lim["json_cpu"] if info["cpu"] is not None and lim["json_cpu"] > 0 else None
        said = (rep["line"] or str(rep["status"])) if rep["status"] != 0 else "ok"
        if info["status"] != 0:
            said = f"info: {info['line'] or info['status']}; {said}"
        print(f"{name:<11} {lim['bytes'] / 1e6:>6.1f} {lim['json_cpu']:>10.2f} {f(info['wall'], '.2f'):>9} "
              f"{f(info['cpu'], '.2f'):>6} {f(info['rss'], '.0f'):>6} {f(ratio, '.1f'):>6} {f(rep['wall'], '.2f'):>11} "
              f"{f(rep['cpu'], '.2f'):>6} {f(rep['rss'], '.0f'):>6}  {said[:90]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
