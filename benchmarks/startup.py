"""Start-up cost of hermes: CPU seconds (user + sys) of the command line and of a rank before its set-up.

    python -m benchmarks.startup [--repeats 5] [--tree LABEL=DIR ...] [--cache results/startup.json]

Each measure runs in a fresh child process and is the minimum over ``--repeats`` runs (the machine's other load
only ever adds time):

- ``hermes --version``, ``hermes --help``, ``hermes run --help``: ``python -m hermes ...`` (what the ``hermes``
  script runs), the child's user + sys CPU from ``os.wait4``;
- ``import hermes``: ``python -c "import hermes"``, likewise;
- ``rank start-up``: one rank under ``mpiexec -n 1`` running ``hermes run scenarios/refine-airfoil.yaml
  --set processors=1``, stopped when the driver begins the set-up (:func:`hermes.lifecycle.setup.distribute`, before the
  mesh is read): the rank's own CPU seconds at that point (``resource.getrusage(RUSAGE_SELF)`` inside the rank:
  the interpreter, every import, MPI_Init, the scenario's validation and the balancer's look-up; mpiexec's own
  CPU is not counted). The same count holds for every rank of a larger job.

``--tree LABEL=DIR`` (repeatable) measures another checkout of hermes side by side (``PYTHONPATH=DIR``, its own
scenario file), e.g. ``git worktree add /tmp/wt-before 58ba91b`` then ``--tree before=/tmp/wt-before``; the
default is this checkout alone. The interpreter is this one (the same venv, the same libraries) for all trees;
each child runs in its tree with ``PYTHONPATH`` set to it, which comes before the venv's editable install (the
rank checks which ``hermes.lifecycle.driver`` it imported).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hermes.interpreter import child_env, python_command

ROOT = Path(__file__).resolve().parents[1]

#: the rank's script: stop at the first step of the set-up and report this process's CPU seconds
RANK = """
import json, os, resource, sys
import hermes.lifecycle.driver as driver

def stop(*args, **kwargs):
    u = resource.getrusage(resource.RUSAGE_SELF)
    heavy = ["scipy.optimize", "matplotlib", "pandas"]
    print("STARTUP " + json.dumps({"cpu": u.ru_utime + u.ru_stime, "file": driver.__file__,
                                   "families": sorted(m for m in sys.modules if m.startswith("hermes.balance.")),
                                   "heavy": [m for m in heavy if m in sys.modules]}), flush=True)
    from mpi4py import MPI
    MPI.Finalize()
    os._exit(0)

import hermes.lifecycle.setup as setup
setup.distribute = stop  # the set-up's first step (setup.start calls it)
from hermes.cli import main
sys.exit(main(sys.argv[1:]))
"""


def cpu_of(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """User + sys CPU seconds of the child running ``cmd`` (its output discarded; a failure is fatal)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(env), cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{err}")
    return usage.ru_utime + usage.ru_stime


def mpiexec() -> list[str]:
    exe = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if exe is None:
        raise SystemExit("mpiexec not found")
    flags = ["--allow-run-as-root"] if os.geteuid() == 0 and "openmpi" in _flavour(exe) else []
    return [exe, *flags, "-n", "1"]


def _flavour(exe: str) -> str:
    res = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return (res.stdout + res.stderr).lower().replace(" ", "")


def rank_startup(tree: Path, env: dict[str, str], launcher: list[str]) -> dict:
    """The rank's CPU seconds at the start of the set-up, and what it had imported."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [*launcher, *python_command("-c", RANK, "run", str(tree / "scenarios" / "refine-airfoil.yaml"),
                                          "--set", "processors=1", "--no-pictures", "--out", str(Path(tmp) / "run"))]
        res = subprocess.run(cmd, capture_output=True, text=True, env=child_env(env), cwd=tree, timeout=300)
    lines = [x for x in res.stdout.splitlines() if x.startswith("STARTUP ")]
    if not lines:
        raise SystemExit(f"the rank did not reach the set-up (exit {res.returncode}):\n{res.stdout}{res.stderr}")
    return json.loads(lines[0].removeprefix("STARTUP "))


def measure(tree: Path, repeats: int, launcher: list[str]) -> dict[str, float | dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX_"))}
    env["PYTHONPATH"] = str(tree)
    commands = {"hermes --version": python_command("-m", "hermes", "--version"),
                "hermes --help": python_command("-m", "hermes", "--help"),
                "hermes run --help": python_command("-m", "hermes", "run", "--help"),
                "import hermes": python_command("-c", "import hermes")}
    out: dict[str, float | dict] = {}
    for name, cmd in commands.items():
        out[name] = min(cpu_of(cmd, env, tree) for _ in range(repeats))
    ranks = [rank_startup(tree, env, launcher) for _ in range(repeats)]
    best = min(ranks, key=lambda r: r["cpu"])
    out["rank start-up"] = best["cpu"]
    out["rank imports"] = best
    if not best["file"].startswith(str(tree)):
        raise SystemExit(f"{tree}: the rank imported {best['file']}, not this checkout")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per measure; the minimum is printed (default 5)")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                    help="another checkout to measure beside this one (repeatable)")
    ap.add_argument("--cache", type=Path, help="also write the figures to this JSON cache (results/)")
    args = ap.parse_args(argv)
    trees = [("this tree", ROOT)]
    for item in args.tree:
        label, eq, d = item.partition("=")
        if not eq or not (Path(d) / "hermes" / "__init__.py").is_file():
            raise SystemExit(f"--tree {item!r}: expected LABEL=DIR with DIR a checkout of hermes")
        trees.insert(0, (label, Path(d).resolve()))
    launcher = mpiexec()
    results = {label: measure(tree, args.repeats, launcher) for label, tree in trees}
    names = ["hermes --version", "hermes --help", "hermes run --help", "import hermes", "rank start-up"]
    print(f"CPU seconds (user + sys), min of {args.repeats}; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores\n")
    print("| measure | " + " | ".join(label for label, _ in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{results[label][name]:.2f}" for label, _ in trees) + " |")
    print()
    for label, _ in trees:
        imp = results[label]["rank imports"]
        print(f"{label}: the rank had imported {len(imp['families'])} hermes.balance modules"
              f"{' and ' + ', '.join(imp['heavy']) if imp['heavy'] else ''} when its set-up began")
    if args.cache:
        from benchmarks import cache

        figures = {"repeats": args.repeats, "trees": [label for label, _ in trees],
                   "measures": {label: {name: results[label][name] for name in names} for label, _ in trees},
                   "rank imports": {label: {k: v for k, v in results[label]["rank imports"].items() if k != "file"}
                                    for label, _ in trees}}
        cache.write(args.cache, "startup", cache.command_line("benchmarks.startup", argv), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
