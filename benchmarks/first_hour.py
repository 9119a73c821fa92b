"""A new user's first hour on a fresh clone, measured for silence (issue 43's acceptance check).

    .venv/bin/python -m benchmarks.first_hour [--out /tmp/hermes-first-hour] [--skip-make | --cold]
        [--hammond2 /work/shared/meshes/hammond2.graph] [--lbaf-data DIR | --lbaf-git GIT_DIR]
        [--cells 1000000] [--processors 256] [--only 2,4] [--timeout 3600] [--quiet]

Each step is a command a newcomer types, run as a child process with its stdout and stderr piped (a file or a
``| tee``, not a terminal: what a job script, CI or an IDE's console gives; the children's Python then
block-buffers whatever it does not flush, and ``PYTHONUNBUFFERED`` is removed from their environment so that the
caller's own setting cannot hide it). One reader thread per pipe stamps every line as it arrives; per step the
page gives the wall time, the lines, and the **longest silence**: the largest gap between consecutive output
moments, counting the start to the first line and the last line to the process' end, with the lines on either
side of it (what was silent). A step silent for more than 10 s is flagged.

The steps (a step whose input is absent is skipped with the reason):

1. ``make run``: the README's first set-up command (a fresh ``.venv`` from the lock, then the quickstart;
   quick when ``.venv`` is there; ``--cold``: ``make run VENV=OUT/venv``, a new venv from the lock as a fresh
   clone's first command builds it). ``--skip-make`` leaves it out.
2. ``hermes compare scenarios/refine-airfoil.yaml --set-axis balancer=none,pcg,gda0,metis``.
3. The README's Python examples (each ```` ```python ```` block of README.md, run as it is from the repository's
   top), with progress shown: hermes.run and hermes.compare show it by default where they take ``progress=``;
   before that (``quiet=True`` by default) the block is run with ``quiet=False``.
4. A 3-D tetrahedral mesh of one's own (``hermes mesh generate`` makes 2-D meshes only: a unit cube meshed by
   gmsh's Python API, written with meshio): ``hermes mesh info``, a 2-phase ``hermes run --set mesh.file=...``,
   ``hermes plot`` of that run.
5. The two-weight hammond2 graph (``--hammond2``): ``hermes mesh info``, a 2-phase run with
   ``--set mesh.constraint=all`` (docs/DATA.md §7).
6. A disconnected mesh (two separate squares of triangles in one file): ``hermes mesh info``, then ``hermes run``,
   which must be refused: the step passes when the refusal is one line and a non-zero exit.
7. A real application's trace: LBAF's ``data/nolb-8color-16nodes-11firstphases`` (vt LBDatafile, 16 ranks, 11
   phases; from ``--lbaf-data`` (LBAF's ``data/`` directory) or extracted with ``git archive`` from
   ``--lbaf-git``, a bare clone of LB-analysis-framework): ``hermes trace info`` and ``hermes replay``.
   (tests/trace/lbaf-roundtrip/ is not used: it is a trace hermes wrote of its own run.)
8. At scale: ``hermes mesh generate large --size 1000000``, then ``hermes run`` on it with 256 processors,
   ``pcg``, 2 phases (``--cells``, ``--processors`` to scale it down).

The children run this checkout's hermes (``python -P -m hermes`` with the repository on ``PYTHONPATH``, through
:mod:`hermes.interpreter`); the table shows them as a user types them (``hermes ...``). Every step's output, each
line with its time, is in ``OUT/logs/``. The figures are written, atomically, to ``results/first_hour.json`` (the
cache of :mod:`benchmarks.cache`: machine, command, date, commit) and ``results/first_hour.md`` (rendered by
:mod:`benchmarks.render`, as ``make results`` does); with ``--only`` nothing is written there unless
``--results DIR`` is given. Exit status 1 if a step failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hermes.interpreter import child_env, python_command

__all__ = ["COMMANDS", "SILENT", "Watched", "longest_silence", "watch", "markdown", "headline", "main"]

ROOT = Path(__file__).resolve().parents[1]

#: the spelling of each hermes command the steps use (the grammar ``hermes --help`` lists: verbs run,
#: resume, compare, plot; nouns mesh, trace, lab)
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("run",),
    "compare": ("compare",),
    "plot": ("plot",),
    "mesh info": ("mesh", "info"),
    "mesh generate": ("mesh", "generate"),
    "trace info": ("trace", "info"),
    "replay": ("trace", "replay"),
}

#: a step silent for longer than this many seconds is flagged
SILENT = 10.0
#: the output directory is this script's when it holds this file (anything else non-empty is refused)
MARKER = ".hermes-first-hour"
HAMMOND2 = Path("/work/shared/meshes/hammond2.graph")
LBAF_GIT = Path("/work/.mirror/DARMA-tasking+LB-analysis-framework/repo")
LBAF_TRACE = "nolb-8color-16nodes-11firstphases"
#: hermes.run/compare before progress was shown by default: ask for it with quiet=False, where each function is
#: defined (hermes.compare is a callable package that calls its module's ``compare``); prints nothing of its own
PROGRESS_PRELUDE = """\
import functools as _functools, importlib as _importlib, inspect as _inspect
import hermes as _hermes
for _module, _name in (("hermes.api", "run"), ("hermes.compare", "compare")):
    try:
        _mod = _importlib.import_module(_module)
        _f = getattr(_mod, _name)
    except (ImportError, AttributeError):  # moved: left as it is
        continue
    _params = _inspect.signature(_f).parameters
    if "progress" not in _params and "quiet" in _params:
        setattr(_mod, _name, _functools.partial(_f, quiet=False))
        if _name == "run":
            _hermes.run = _mod.run
"""


# ------------------------------------------------------------------------------------------ watching a process


@dataclass
class Watched:
    """What one child process printed, and when."""

    #: the exit status; None when it was killed after the time-out
    returncode: int | None
    #: seconds from the start to the process' end (the end of its output if that came later)
    wall: float
    #: (seconds since the start, "out" or "err", the line without its line break), in order of arrival
    lines: list[tuple[float, str, str]] = field(default_factory=list)


def longest_silence(times: list[float], wall: float) -> tuple[float, int]:
    """The largest gap between consecutive output moments ``0, *times, wall``, and where it ends.

    Returns ``(gap, k)``: the gap ends at line ``k`` (``k == len(times)``: at the end), so it follows line
    ``k - 1`` (``k == 0``: the start).

    Examples
    --------
    >>> longest_silence([1.0, 2.0, 5.0], 6.0)
    (3.0, 2)
    >>> longest_silence([], 4.0)
    (4.0, 0)
    """
    moments = [0.0, *times, max(wall, times[-1] if times else 0.0)]
    gaps = [b - a for a, b in zip(moments, moments[1:])]
    k = max(range(len(gaps)), key=gaps.__getitem__)
    return gaps[k], k


def _reader(pipe, stream: str, t0: float, lines: list, lock: threading.Lock, log, echo: bool) -> None:
    for raw in iter(pipe.readline, b""):
        t = time.monotonic() - t0
        text = raw.decode(errors="replace").rstrip("\r\n")
        with lock:
            lines.append((t, stream, text))
            if log is not None:
                log.write(f"[{t:9.3f} s] {stream}| {text}\n")
                log.flush()
            if echo:
                print(f"   {'|' if stream == 'out' else '!'} {text}", flush=True)
    pipe.close()


def watch(cmd: list[str], *, cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None,
          log: Path | None = None, timeout: float | None = None, echo: bool = False) -> Watched:
    """Run ``cmd`` with stdout and stderr piped, stamping each line as it arrives (a reader thread per pipe).

    The child gets its own process group, killed whole after ``timeout`` seconds (``returncode`` None). ``log``
    receives every line with its time and stream; ``echo`` prints them as they come.
    """
    lock = threading.Lock()
    lines: list[tuple[float, str, str]] = []
    fh = log.open("w") if log is not None else None
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        readers = [threading.Thread(target=_reader, args=(pipe, name, t0, lines, lock, fh, echo), daemon=True)
                   for pipe, name in ((proc.stdout, "out"), (proc.stderr, "err"))]
        for r in readers:
            r.start()
        try:
            returncode: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            returncode = None
        end = time.monotonic() - t0
        for r in readers:  # a grandchild may still hold a pipe: its lines count, but not for ever
            r.join(timeout=10)
        with lock:
            got = sorted(lines)
        return Watched(returncode, max([end, *(t for t, _, _ in got)]), got)
    finally:
        if fh is not None:
            fh.close()


# ---------------------------------------------------------------------------------------------------- the steps


@dataclass
class Step:
    """One command of the first hour: what it is, how it is run, and what counts as success."""

    key: str
    title: str
    #: the command as a user types it (shown in the table)
    shown: str
    #: the command run (None: skipped, see ``skip``)
    cmd: list[str] | None
    #: "ok": exit status 0; "refused": a non-zero status and exactly one line of output
    expect: str = "ok"
    skip: str = ""
    note: str = ""
    cwd: Path = ROOT


def hermes_cmd(name: str, *args: str | os.PathLike) -> tuple[str, list[str]]:
    """(the command as typed, the command run) of ``hermes <name> ARGS`` with the spelling of :data:`COMMANDS`."""
    words = [*COMMANDS[name], *map(str, args)]
    return shlex.join(["hermes", *words]), python_command("-m", "hermes", *words)


def hermes_step(key: str, title: str, name: str, *args: str | os.PathLike, expect: str = "ok") -> Step:
    shown, cmd = hermes_cmd(name, *args)
    return Step(key, title, shown, cmd, expect)


def skipped(key: str, title: str, shown: str, reason: str) -> Step:
    return Step(key, title, shown, None, skip=reason)


def readme_blocks(readme: Path) -> list[str]:
    """The ```` ```python ```` code blocks of the README, in order."""
    return re.findall(r"^```python\n(.*?)^```", readme.read_text(), re.M | re.S)


def progress_by_default() -> bool:
    """Whether this checkout's hermes.run takes ``progress=`` (progress shown by default)."""
    import inspect

    import hermes

    return "progress" in inspect.signature(hermes.run).parameters


def tetrahedra(path: Path, size: float = 0.12) -> int:
    """A unit cube meshed into tetrahedra by gmsh's Python API, written by meshio; the number of cells."""
    import gmsh
    import meshio
    import numpy as np

    gmsh.initialize(readConfigFiles=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add("cube")
        gmsh.model.occ.addBox(0, 0, 0, 1, 1, 1)
        gmsh.model.occ.synchronize()
        gmsh.option.setNumber("Mesh.MeshSizeMax", size)
        gmsh.model.mesh.generate(3)
        tags, xyz, _ = gmsh.model.mesh.getNodes()
        kinds, _, nodes = gmsh.model.mesh.getElements(3)
    finally:
        gmsh.finalize()
    (tets,) = [np.asarray(n).reshape(-1, 4) for k, n in zip(kinds, nodes) if k == 4]  # 4: gmsh's 4-node tetrahedron
    index = np.empty(int(tags.max()) + 1, dtype=np.int64)
    index[tags.astype(np.int64)] = np.arange(len(tags))
    meshio.write(path, meshio.Mesh(xyz.reshape(-1, 3), [("tetra", index[tets.astype(np.int64)])]))
    return len(tets)


def two_squares(path: Path, n: int = 10) -> int:
    """Two separate n×n squares of triangles (no node shared) in one file; the number of cells."""
    import meshio
    import numpy as np

    g = np.arange(n + 1, dtype=float)
    x, y = np.meshgrid(g, g)
    square = np.column_stack([x.ravel(), y.ravel(), np.zeros(x.size)])
    a = (np.arange(n)[None, :] + (n + 1) * np.arange(n)[:, None]).ravel()
    tri = np.concatenate([np.column_stack([a, a + 1, a + n + 2]), np.column_stack([a, a + n + 2, a + n + 1])])
    points = np.vstack([square, square + [2.0 * n, 0.0, 0.0]])
    meshio.write(path, meshio.Mesh(points, [("triangle", np.vstack([tri, tri + len(square)]))]))
    return 2 * len(tri)


def lbaf_stem(args: argparse.Namespace, out: Path) -> tuple[Path | None, str]:
    """The LBAF trace's stem (``.../nolb-8color-16nodes-11firstphases/data``) and where it came from, or
    (None, why not)."""
    if args.lbaf_data:
        stem = Path(args.lbaf_data) / LBAF_TRACE / "data"
        ok = stem.with_name("data.0.json").is_file()
        return (stem, f"from {args.lbaf_data}") if ok else (None, f"no {LBAF_TRACE}/data.0.json under --lbaf-data")
    git = Path(args.lbaf_git)
    if not git.is_dir():
        return None, f"no LBAF data: --lbaf-data not given and no git directory {git}"
    res = subprocess.run(["git", "--git-dir", str(git), "archive", "HEAD", f"data/{LBAF_TRACE}"],
                         capture_output=True, timeout=120)
    if res.returncode != 0:
        return None, f"git archive of data/{LBAF_TRACE} from {git} failed: {res.stderr.decode().strip()}"
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        tar.extractall(out / "lbaf", filter="data")
    commit = subprocess.run(["git", "--git-dir", str(git), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return out / "lbaf" / "data" / LBAF_TRACE / "data", f"LBAF {commit}, extracted with git archive"


def plan(args: argparse.Namespace, out: Path) -> list[Step]:
    """The steps in order; inputs the steps need are made here (small meshes, the LBAF files)."""
    steps: list[Step] = []
    if args.skip_make:
        steps.append(skipped("1", "set-up", "make run", "--skip-make"))
    elif shutil.which("make") is None:
        steps.append(skipped("1", "set-up", "make run", "no make on PATH"))
    else:
        venv = out / "venv"  # a cold set-up: a new venv from the lock, beside .venv (which stays as it is)
        steps.append(Step("1", "set-up", f"make run VENV={venv}" if args.cold else "make run",
                          ["make", "run", f"VENV={venv}"] if args.cold else ["make", "run"]))

    steps.append(hermes_step("2", "compare four balancers", "compare", "scenarios/refine-airfoil.yaml",
                             "--set-axis", "balancer=none,pcg,gda0,metis", "--out", out / "compare"))

    new_api = progress_by_default()
    for i, code in enumerate(readme_blocks(ROOT / "README.md")):
        st = Step(f"3{'abcdefgh'[i]}", f"README's Python example {i + 1}", f"python (README.md's python block {i + 1})",
                  python_command("-c", code if new_api else PROGRESS_PRELUDE + code))
        st.note = "progress by default" if new_api else "run with quiet=False (progress= not yet in hermes.run)"
        steps.append(st)

    tet = out / "meshes" / "cube-tetra.vtu"
    try:
        cells = tetrahedra(tet)
    except Exception as err:  # noqa: BLE001 - gmsh missing or failing: the step is skipped, the reason stated
        steps.append(skipped("4", "3-D tetrahedral mesh", "hermes mesh info cube-tetra.vtu",
                             f"no tetrahedral mesh: {type(err).__name__}: {err}"))
    else:
        steps.append(hermes_step("4a", "3-D tetrahedral mesh", "mesh info", tet))
        steps[-1].note = f"a unit cube, {cells:,} tetrahedra (gmsh's Python API)"
        steps.append(hermes_step("4b", "3-D tetrahedral mesh", "run", "--set", f"mesh.file={tet}",
                                 "--set", "adaptation.phases=2", "--out", out / "tetra-run"))
        steps.append(hermes_step("4c", "3-D tetrahedral mesh", "plot", out / "tetra-run"))

    graph = Path(args.hammond2)
    if graph.is_file():
        steps.append(hermes_step("5a", "two-weight graph", "mesh info", graph))
        steps.append(hermes_step("5b", "two-weight graph", "run", "--set", f"mesh.file={graph}",
                                 "--set", "mesh.constraint=all", "--set", "adaptation.phases=2",
                                 "--out", out / "hammond2-run"))
    else:
        steps.append(skipped("5", "two-weight graph", "hermes mesh info hammond2.graph", f"no file {graph}"))

    two = out / "meshes" / "two-squares.vtu"
    cells = two_squares(two)
    steps.append(hermes_step("6a", "disconnected mesh", "mesh info", two))
    steps[-1].note = f"two separate squares, {cells} triangles"
    steps.append(hermes_step("6b", "disconnected mesh", "run", "--set", f"mesh.file={two}", "--out",
                             out / "two-squares-run", expect="refused"))

    stem, origin = lbaf_stem(args, out)
    if stem is None:
        steps.append(skipped("7", "a real trace", f"hermes trace info {LBAF_TRACE}/data", origin))
    else:
        steps.append(hermes_step("7a", "a real trace", "trace info", stem))
        steps[-1].note = f"LBAF's {LBAF_TRACE} ({origin})"
        steps.append(hermes_step("7b", "a real trace", "replay", stem, "--out", out / "replay"))

    big = out / "meshes" / f"large-{args.cells}.vtu"
    steps.append(hermes_step("8a", "at scale", "mesh generate", "large", "--size", str(args.cells), "--out", big))
    steps.append(hermes_step("8b", "at scale", "run", "--set", f"mesh.file={big}", "--set",
                             f"processors={args.processors}", "--set", "platform.capacities=homo", "--set",
                             "balancer.algorithm=pcg", "--set", "adaptation.phases=2", "--out", out / "large-run"))
    steps[-1].note = f"{args.processors} processors, {args.cells:,} cells, pcg, 2 phases"

    if args.only:
        wanted = set(args.only.split(","))
        steps = [s for s in steps if s.key in wanted or s.key.rstrip("abcdefgh") in wanted]
    return steps


def _short(text: str, width: int = 70, out: Path | None = None) -> str:
    """``text`` on one line, ``out`` written $OUT, cut at ``width`` characters."""
    text = " ".join(text.split())
    if out is not None:
        text = text.replace(str(out), "$OUT")
    return text if len(text) <= width else text[:width - 1] + "…"


def outcome(step: Step, w: Watched, log: Path, out: Path) -> dict[str, Any]:
    """The step's record: status, pass or fail, wall time, lines, the longest silence and the lines around it
    (``out``, the output directory, written $OUT)."""
    times = [t for t, _, _ in w.lines]
    gap, k = longest_silence(times, w.wall)
    if w.returncode is None:
        status, passed = "timed out (killed)", False
    elif step.expect == "refused":
        passed = w.returncode != 0 and len(w.lines) == 1
        status = (f"refused in {len(w.lines)} line{'s' * (len(w.lines) != 1)} (exit {w.returncode})"
                  if w.returncode != 0 else "accepted (exit 0), expected a refusal")
    else:
        passed = w.returncode == 0
        status = "ok" if passed else f"failed (exit {w.returncode})"
    return {"key": step.key, "title": step.title, "command": _short(step.shown, 1000, out), "expect": step.expect,
            "status": status,
            "passed": passed, "returncode": w.returncode, "wall": round(w.wall, 3), "lines": len(w.lines),
            "stderr_lines": sum(s == "err" for _, s, _ in w.lines), "longest_silence": round(gap, 3),
            "silence_after": _short(w.lines[k - 1][2], out=out) if k > 0 else None,
            "silence_before": _short(w.lines[k][2], out=out) if k < len(w.lines) else None,
            "silence_at": round(times[k - 1] if k > 0 else 0.0, 3),
            "refusal": _short(w.lines[0][2], 1000, out) if step.expect == "refused" and w.lines else None,
            "log": str(log), "note": step.note, "skipped": None}


# ------------------------------------------------------------------------------------------------------ the page


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def _where(r: dict[str, Any]) -> str:
    after = f"“{_cell(r['silence_after'])}”" if r["silence_after"] is not None else "the start"
    before = f"“{_cell(r['silence_before'])}”" if r["silence_before"] is not None else "the end"
    return f"after {after}, until {before}"


def markdown(figures: dict[str, Any]) -> str:
    """The table of the steps: command, result, wall, lines, longest silence and what was silent."""
    limit = figures["silent_threshold"]
    rows = ["| step | command | result | wall (s) | lines | longest silence (s) | what was silent |",
            "|---|---|---|---:|---:|---:|---|"]
    for r in figures["steps"]:
        if r["skipped"] is not None:
            rows.append(f"| {r['key']} | `{_cell(r['command'])}` | skipped: {_cell(r['skipped'])} | | | | |")
            continue
        flag = " ⚠" if r["longest_silence"] > limit else ""
        result = r["status"] if r["passed"] else f"**{r['status']}**"
        note = f" — {_cell(r['note'])}" if r["note"] else ""
        rows.append(f"| {r['key']} | `{_cell(r['command'])}`{note} | {result} | {r['wall']:.1f} | {r['lines']} | "
                    f"{r['longest_silence']:.1f}{flag} | {_where(r)} |")
    return "\n".join(rows)


def headline(figures: dict[str, Any]) -> str:
    """One line for BENCHMARKS.md: the longest silence, how many steps were silent too long, and failures."""
    ran = [r for r in figures["steps"] if r["skipped"] is None]
    worst = max(ran, key=lambda r: r["longest_silence"])
    loud = sum(r["longest_silence"] > figures["silent_threshold"] for r in ran)
    failed = [r["key"] for r in ran if not r["passed"]]
    verb = " ".join(worst["command"].split()[:2])
    return (f"longest silence {worst['longest_silence']:.0f} s (step {worst['key']}, {worst['title']}: `{verb}`); "
            f"{loud} of {len(ran)} steps silent over {figures['silent_threshold']:g} s; "
            + (f"failed: {', '.join(failed)}" if failed else "none failed"))


def write_results(results: Path, command: str, figures: dict[str, Any]) -> None:
    """``results/first_hour.json`` (the cache: machine, command, date, commit) and the page rendered from it."""
    import datetime

    from benchmarks import cache, render
    from hermes.files import write_atomic

    commit, tree = cache.revision()
    data = {"benchmark": "first_hour", "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit, "tree": tree, "machine": MACHINE, "figures": figures}
    write_atomic(results / "first_hour.json", json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    (page,) = [p for p in render.PAGES if p.name == "first_hour"]
    if results.resolve() != render.RESULTS.resolve():  # elsewhere: the page rendered from that cache
        page = replace(page, cache=str((results / "first_hour.json").resolve()))
    write_atomic(results / "first_hour.md", render.render_page(page))
    print(f"# wrote {results / 'first_hour.json'} and {results / 'first_hour.md'}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------------ the script


MACHINE: dict[str, Any] = {}


def prepare(out: Path) -> None:
    """Make ``out`` this script's (a marker file), emptying it when a former run of the script left it."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise SystemExit(f"benchmarks.first_hour: {out} is not empty and was not written by this script "
                             f"(no {MARKER}); name another --out")
        for p in out.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "meshes").mkdir(exist_ok=True)
    (out / "tmp").mkdir(exist_ok=True)
    (out / MARKER).write_text("benchmarks/first_hour.py\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/hermes-first-hour", help="the steps' runs and logs (made if missing)")
    ap.add_argument("--results", help="where first_hour.json and first_hour.md go (default results/; with --only "
                    "nothing is written unless given)")
    ap.add_argument("--skip-make", action="store_true", help="leave out step 1 (make run)")
    ap.add_argument("--cold", action="store_true", help="step 1 builds a new venv from the lock in OUT/venv "
                    "(make run VENV=OUT/venv: the set-up a fresh clone meets, from the package registries)")
    ap.add_argument("--hammond2", default=str(HAMMOND2), help="the two-weight hammond2 graph (step 5)")
    ap.add_argument("--lbaf-data", help="LBAF's data/ directory (step 7; default: extracted from --lbaf-git)")
    ap.add_argument("--lbaf-git", default=str(LBAF_GIT), help="a bare git clone of LB-analysis-framework")
    ap.add_argument("--cells", type=int, default=1_000_000, help="cells of step 8's mesh")
    ap.add_argument("--processors", type=int, default=256, help="processors of step 8's run")
    ap.add_argument("--only", metavar="KEYS", help="only these steps, comma-separated (e.g. 2,4 or 6b)")
    ap.add_argument("--timeout", type=float, default=3600, help="kill a step after this many seconds")
    ap.add_argument("--quiet", action="store_true", help="do not echo the steps' output")
    args = ap.parse_args(argv)
    from benchmarks import cache

    MACHINE.update(cache.machine())  # the load before the steps add theirs
    command = cache.command_line("benchmarks.first_hour", sys.argv[1:] if argv is None else argv)
    out = Path(args.out).resolve()
    prepare(out)
    env = child_env(path=[ROOT])
    env.pop("PYTHONUNBUFFERED", None)
    env["TMPDIR"] = str(out / "tmp")  # the README's tempfile.mkdtemp() runs land under --out
    records = []
    for step in plan(args, out):
        if step.cmd is None:
            print(f"== {step.key} {step.title}: skipped ({step.skip})", flush=True)
            records.append({"key": step.key, "title": step.title, "command": _short(step.shown, 1000, out),
                            "skipped": step.skip,
                            "passed": True, "note": step.note})
            continue
        print(f"== {step.key} {step.title}: {step.shown}", flush=True)
        log = out / "logs" / f"{step.key}.log"
        w = watch(step.cmd, cwd=step.cwd, env=env, log=log, timeout=args.timeout, echo=not args.quiet)
        r = outcome(step, w, log, out)
        flag = f"  ⚠ silent over {SILENT:g} s" if r["longest_silence"] > SILENT else ""
        print(f"== {step.key}: {r['status']}, {r['wall']:.1f} s, {r['lines']} lines, longest silence "
              f"{r['longest_silence']:.1f} s {_where(r)}{flag}", flush=True)
        records.append(r)
    figures = {"silent_threshold": SILENT, "steps": records, "out": str(out)}
    print(markdown(figures))
    results = Path(args.results) if args.results else (None if args.only else ROOT / "results")
    if results is not None:
        write_results(results, command, figures)
    return 0 if all(r["passed"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
