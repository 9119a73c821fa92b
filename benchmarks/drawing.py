"""The share of a run's wall time spent drawing its pictures: drawing wall / phases wall.

Runs a scenario (``hermes run SCENARIO --out DIR --force``, its own pictures switched off), reads the phases'
wall time from its last progress line, then draws that run directory's pictures in fresh interpreters: with
this checkout in-process (``workers=1``) and with one worker per core (what the driver uses when the cores
are idle, :func:`hermes.viz.parallel.default_workers`), and with
``--tree NAME=PATH`` with another checkout of hermes (e.g. ``git worktree add /tmp/wt-before <commit>``),
in-process. Each drawing is timed as wall and CPU seconds of its process (the workers' CPU not included).

    .venv/bin/python -m benchmarks.drawing scenarios/refine-airfoil.yaml --tree before=/tmp/wt-before
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hermes.interpreter import child_env, python_command

ROOT = Path(__file__).resolve().parents[1]

_DRAW = """
import sys, time
from hermes.viz import plot_run
kw = {} if sys.argv[3] == "-" else {"workers": int(sys.argv[3])}
t, c = time.perf_counter(), time.process_time()
plot_run(sys.argv[1], out_dir=sys.argv[2], **kw)
print(f"{time.perf_counter() - t:.2f} {time.process_time() - c:.2f}")
"""


def _draw(run: Path, out: Path, workers: str, tree: Path | None) -> tuple[float, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    done = subprocess.run(python_command("-c", _DRAW, str(run), str(out), workers), capture_output=True,
                          text=True, env=child_env(env), cwd=tree or ROOT, check=True)
    wall, cpu = done.stdout.split()[-2:]
    return float(wall), float(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                    help="also draw with the hermes of another checkout (in-process)")
    args = ap.parse_args()
    from hermes.viz.parallel import default_workers, idle_cores

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        done = subprocess.run([str(ROOT / ".venv/bin/hermes"), "run", args.scenario, "--out", str(run), "--force",
                               "--no-pictures"], capture_output=True, text=True, check=True)
        walls = re.findall(r"phase (\d+)/\d+:.*\| wall ([0-9.]+) s", done.stdout)
        setup = re.search(r"set-up: mesh, initial partition and distribution in ([0-9.]+) s", done.stdout)
        phases = float(walls[-1][1]) - (float(setup.group(1)) if setup else 0.0)
        print(f"{Path(args.scenario).name}: {len(walls)} phases in {phases:.2f} s wall (load "
              f"{os.getloadavg()[0]:.2f})")
        cases = [(name, "-", Path(path)) for name, path in (t.split("=", 1) for t in args.tree)]
        cores, chosen = os.cpu_count() or 1, default_workers(99)
        cases += [("in-process", "1", None), (f"{cores} workers", str(cores), None)]
        print(f"  (the driver would draw with {chosen} worker{'s' * (chosen != 1)} now: "
              f"{idle_cores() or 0:.1f} idle cores)")
        for name, workers, tree in cases:
            wall, cpu = _draw(run, Path(tmp) / f"pics-{name.replace(' ', '-')}", workers, tree)
            print(f"  {name:>12}: pictures {wall:6.2f} s wall, {cpu:6.2f} s CPU, share {wall / phases:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
