"""An experiment of ``experiments/`` through ``hermes compare``, its figures written to a cache of ``results/``.

    python -m benchmarks.experiment thesis --cache results/thesis.json     # experiments/thesis.yaml
    python -m benchmarks.experiment cfd --cache results/cfd.json           # experiments/cfd.yaml
    python -m benchmarks.experiment thesis --shared-mesh whitaker3 --cache results/thesis.json

``--shared-mesh NAME`` adds a third-party mesh of the shared meshes (``../shared/meshes`` beside the clone, or
``HERMES_SHARED_MESHES``; never copied into the repository) to the experiment's ``mesh`` axis; a missing file
stops the script in one line (exit 2) before anything runs.

Runs ``hermes compare experiments/<name>.yaml --out runs/<name> --no-report`` (complete runs found there are
kept, as compare does), then writes one row per run: the axis labels, the run's status, the simulated total
time, the final imbalance, the balancing and migration time summed over the phases, the cells that changed
owner and the size of the graph balanced (vertices, adjacency entries). Virtual clock: any machine gives the
same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import cache
from hermes.interpreter import child_env, python_command

ROOT = cache.ROOT


def figures(out: Path) -> dict:
    """The axes and one row per run of the experiment directory ``out`` (as ``hermes compare`` left it)."""
    from hermes.compare import collect
    from hermes.metrics import cells_moved

    import numpy as np

    plan, rows, _ = collect(out)
    runs = []
    for r in rows:
        s = r["_summary"] or {}
        ph = s.get("phases", [])
        geometry = out / r["run_dir"] / "geometry.npz"
        graph = {}
        if geometry.is_file():  # the graph the run balanced: vertices and adjacency entries (2|E|)
            with np.load(geometry) as z:
                graph = {"vertices": int(z["xadj"].size - 1), "entries": int(z["adjncy"].size)}
        runs.append({**graph, "labels": r["_labels"], "status": r["status"], "total_time": s.get("total_time"),
                     "final_imbalance": s.get("final_imbalance"),
                     "balance_time": sum(x["balance_time"] for x in ph) if ph else None,
                     "migrate_time": sum(x["migrate_time"] for x in ph) if ph else None,
                     "cells_moved": sum(int(cells_moved(x) or 0) for x in ph),
                     "clock": s.get("clock")})
    return {"experiment": plan["name"], "description": plan.get("description", ""), "axes": plan["axes"],
            "runs": runs}


def shared_dir() -> Path:
    """Where the third-party meshes are: ``HERMES_SHARED_MESHES``, else ``../shared/meshes`` beside the clone."""
    return Path(os.environ.get("HERMES_SHARED_MESHES", ROOT.parent / "shared" / "meshes"))


def mesh_axis_with(spec: Path, shared: list[str]) -> str:
    """``--set-axis mesh=[...]``: the experiment's own mesh axis (its files made absolute) and the shared meshes
    named (:data:`benchmarks.shared_meshes.MESH_FILES`), as a YAML flow list.

    Raises
    ------
    ValueError
        One line: a name that is no shared mesh, a file that is missing, an experiment without a mesh axis.
    """
    import yaml

    from benchmarks.shared_meshes import MESH_FILES

    values = (yaml.safe_load(spec.read_text()).get("axes") or {}).get("mesh")
    if not values:
        raise ValueError(f"{spec.name} has no mesh axis to add {', '.join(shared)} to")
    axis = []
    for v in values:
        if isinstance(v, dict) and "file" in v:
            v = {**v, "file": str((spec.parent / v["file"]).resolve())}
        elif isinstance(v, str) and not v.replace(" ", "").lower().replace("x", "").isdigit():
            v = str((spec.parent / v).resolve())
        axis.append(v)
    for name in shared:
        if name not in MESH_FILES:
            raise ValueError(f"--shared-mesh {name!r}: expected one of {', '.join(MESH_FILES)}")
        path = shared_dir() / MESH_FILES[name]
        if not path.is_file():
            raise ValueError(f"{MESH_FILES[name]} is not in {shared_dir()}: set HERMES_SHARED_MESHES to the "
                             f"directory that holds it (the shared meshes, ../shared/meshes beside the clone)")
        axis.append({"label": name, "file": str(path)})
    return "mesh=" + json.dumps(axis)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="an experiment of experiments/ (its file's stem)")
    ap.add_argument("--cache", type=Path, required=True, help="the JSON cache to write")
    ap.add_argument("--jobs", type=int, default=1, help="hermes compare --jobs")
    ap.add_argument("--shared-mesh", action="append", default=[], metavar="NAME",
                    help="add this mesh of the shared meshes to the experiment's mesh axis (e.g. whitaker3)")
    args = ap.parse_args(argv)
    spec = ROOT / "experiments" / f"{args.name}.yaml"
    if not spec.is_file():
        ap.error(f"no experiment {spec}")
    extra = []
    if args.shared_mesh:
        try:
            extra = ["--set-axis", mesh_axis_with(spec, args.shared_mesh)]
        except ValueError as err:
            print(f"benchmarks.experiment: {err}", file=sys.stderr)
            return 2
    out = ROOT / "runs" / args.name
    cmd = python_command("-m", "hermes", "compare", str(spec), "--out", str(out), "--no-report", "--quiet",
                         "--jobs", str(args.jobs), *extra)
    res = subprocess.run(cmd, cwd=ROOT, env=child_env(path=[ROOT]))
    if res.returncode != 0:
        return res.returncode
    fig = figures(out)
    bad = [r["labels"] for r in fig["runs"] if r["status"] != "done"]
    if bad:
        print(f"benchmarks.experiment: runs not done: {bad}", file=sys.stderr)
        return 1
    cache.write(args.cache, "experiment", cache.command_line("benchmarks.experiment", argv), fig)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
