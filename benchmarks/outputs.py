"""Run a fixed set of scenarios and compare their results with another run of the same set.

A refactor proves itself by bit-identical results: every shipped scenario, and the quickstart with every
built-in balancer, must give the same ``summary.json``, ``phases.csv`` and ``partitions.npz`` before and after
(virtual clock). Fields that measure real time (``wall_seconds``, ``adapt_wall_seconds``), the library
versions and the run-state flag ``complete`` are left out of the comparison; everything else must match byte for byte
once printed, and the per-cell arrays of ``partitions.npz`` (when either run wrote one) name for name, in shape,
dtype and value (NaN equal to NaN).

``diff --rtol X`` (X > 0; docs/design/bulk-emulation.md §6) compares ``summary.json`` leaf by leaf (JSON paths, list
indices folded to ``*``: ``phases[*].sync_time``) and ``phases.csv`` cell by cell by column. Integers, booleans and
strings stay exact; two floats a, b with ``|a - b| <= X·max(|a|, |b|)`` are *within tolerance*, not the same: the
report names every field that needed the tolerance with its largest relative gap, and still lists every real
difference. ``partitions.npz`` stays exact. The exit status is 0 only if everything is identical or within tolerance.

Usage::

    python -m benchmarks.outputs run OUT_DIR [--only NAME ...]   # every case into OUT_DIR/<case>/
    python -m benchmarks.outputs diff OLD_DIR NEW_DIR             # exit 1 and list the differences
    python -m benchmarks.outputs diff OLD_DIR NEW_DIR --rtol 1e-12   # floats within 1e-12 relative: listed, exit 0

Each case runs through the ``hermes`` command next to this Python (self-launching under mpiexec),
without pictures.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hermes.interpreter import child_env, python_command

__all__ = ["IGNORED", "cases", "run", "diff", "compare_json", "compare_csv", "compare_npz", "relative_gap", "main"]

ROOT = Path(__file__).resolve().parents[1]
HERMES = python_command("-m", "hermes")
#: the quickstart's balancer matrix: every built-in that runs on 4 heterogeneous ranks
BALANCERS = ("none", "pcg", "gda0", "gda1", "gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit",
             "implicit_watts", "lps", "lpa", "mpa", "ada", "fos", "grapevine", "metis", "scotch", "auto", "chebyshev",
             "mincost")
#: fields that are not results of the simulation (``complete``: the run's state, absent before it was written)
IGNORED = {"wall_seconds", "adapt_wall_seconds", "versions", "complete"}


def cases() -> dict[str, list[str]]:
    out = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        out[path.stem] = [str(path)]
    for b in BALANCERS:
        out[f"quickstart-{b}"] = ["--set", f"balancer.algorithm={b}"]
    for b in ("gda0", "metis", "peel"):
        sel = ["--set", "balancer.selection=peel"] if b == "peel" else ["--set", f"balancer.algorithm={b}"]
        out[f"refine-lshape-{b}"] = [str(ROOT / "scenarios" / "refine-lshape.yaml"), *sel]
    return out


def run(out_dir: Path, only: list[str] | None) -> int:
    failed = 0
    for name, args in cases().items():
        if only and name not in only:
            continue
        dest = out_dir / name
        cmd = [*HERMES, "run", *args, "--out", str(dest), "--quiet", "--no-pictures"]
        t = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        status = "ok" if res.returncode == 0 else f"exit {res.returncode}: {res.stderr.strip().splitlines()[-1:]}"
        failed += res.returncode != 0
        print(f"{name:28s} {time.perf_counter() - t:6.1f} s  {status}", flush=True)
    return 1 if failed else 0


def _clean(obj):
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if k not in IGNORED}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


@dataclass
class Tolerated:
    """The fields that needed the tolerance: (file, field) -> largest relative gap, values, cases."""

    gaps: dict[tuple[str, str], float] = field(default_factory=dict)
    values: dict[tuple[str, str], int] = field(default_factory=dict)
    cases: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def add(self, case: str, file: str, name: str, gap: float) -> None:
        key = (file, name)
        self.gaps[key] = max(self.gaps.get(key, 0.0), gap)
        self.values[key] = self.values.get(key, 0) + 1
        self.cases.setdefault(key, set()).add(case)

    def update(self, other: Tolerated) -> None:
        for key, gap in other.gaps.items():
            self.gaps[key] = max(self.gaps.get(key, 0.0), gap)
            self.values[key] = self.values.get(key, 0) + other.values[key]
            self.cases.setdefault(key, set()).update(other.cases[key])

    def lines(self) -> list[str]:
        return [f"  {file} {name}: {self.gaps[(file, name)]:.1e} ({self.values[(file, name)]} values, "
                f"{len(self.cases[(file, name)])} cases)" for file, name in sorted(self.gaps)]


@dataclass
class Differences:
    """The real differences of one file: field -> (count, first example)."""

    found: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(self, name: str, example: str) -> None:
        count, first = self.found.get(name, (0, example))
        self.found[name] = (count + 1, first)

    def lines(self) -> list[str]:
        return [f"  {name}: {first}" + (f" ({count} values)" if count > 1 else "")
                for name, (count, first) in self.found.items()]


def relative_gap(a: float, b: float) -> float:
    """``|a - b| / max(|a|, |b|)``: 0 for equal values (NaN equal to NaN), inf for an infinity against another value
    or a NaN against a number."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    gap = abs(a - b) / max(abs(a), abs(b))
    return math.inf if math.isnan(gap) else gap


def _leaf(a: Any, b: Any, name: str, rtol: float, where: tuple[str, str, str], diffs: Differences,
          tol: Tolerated) -> None:
    """Two leaves: floats within ``rtol`` go to ``tol``; every other inequality (type, int, bool, str) to ``diffs``."""
    if type(a) is float and type(b) is float:
        gap = relative_gap(a, b)
        if gap == 0.0:
            return
        if gap <= rtol:
            tol.add(where[0], where[1], name, gap)
            return
    elif type(a) is type(b) and a == b:
        return
    diffs.add(name, f"{where[2]}old {a!r}, new {b!r}")


def compare_json(a: Any, b: Any, rtol: float, case: str, diffs: Differences, tol: Tolerated, path: str = "") -> None:
    """Compare two JSON documents leaf by leaf (list indices folded to ``*`` in the field names)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                diffs.add(sub, f"missing in {'old' if k not in a else 'new'}")
            else:
                compare_json(a[k], b[k], rtol, case, diffs, tol, sub)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.add(path or "(top)", f"length {len(a)} in old, {len(b)} in new")
        for x, y in zip(a, b):
            compare_json(x, y, rtol, case, diffs, tol, f"{path}[*]")
    else:
        _leaf(a, b, path or "(top)", rtol, (case, "summary.json", ""), diffs, tol)


def _cell(text: str) -> Any:
    """A CSV cell as the number it prints (int before float), else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def compare_csv(a: str, b: str, rtol: float, case: str, diffs: Differences, tol: Tolerated) -> None:
    """Compare two CSV texts cell by cell by column name (integers and text exactly, floats within ``rtol``)."""
    ra, rb = csv.reader(io.StringIO(a, newline="")), csv.reader(io.StringIO(b, newline=""))
    ha, hb = next(ra, []), next(rb, [])
    ra, rb = [dict(zip(ha, r)) for r in ra], [dict(zip(hb, r)) for r in rb]
    if ha != hb:
        diffs.add("(columns)", f"only in old {sorted(set(ha) - set(hb))}, only in new {sorted(set(hb) - set(ha))}"
                  if set(ha) != set(hb) else "in another order")
    if len(ra) != len(rb):
        diffs.add("(rows)", f"{len(ra)} in old, {len(rb)} in new")
    for i, (x, y) in enumerate(zip(ra, rb)):
        for col in ha:
            if col in IGNORED or col not in hb or x.get(col) == y.get(col):
                continue
            _leaf(_cell(x.get(col) or ""), _cell(y.get(col) or ""), col, rtol, (case, "phases.csv", f"row {i}: "),
                  diffs, tol)


def compare_npz(a: Path, b: Path) -> list[str]:
    """The differences of two ``.npz`` archives: array names, then each common array's shape, dtype and values
    (``np.array_equal``, NaN equal to NaN for inexact dtypes); empty if identical."""
    out = []
    with np.load(a, allow_pickle=False) as za, np.load(b, allow_pickle=False) as zb:
        na, nb = set(za.files), set(zb.files)
        if na - nb:
            out.append(f"only in old {sorted(na - nb)}")
        if nb - na:
            out.append(f"only in new {sorted(nb - na)}")
        for k in sorted(na & nb):
            x, y = za[k], zb[k]
            if x.shape != y.shape:
                out.append(f"{k}: shape {x.shape} in old, {y.shape} in new")
            elif x.dtype != y.dtype:
                out.append(f"{k}: dtype {x.dtype} in old, {y.dtype} in new")
            elif not np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.inexact)):
                out.append(f"{k}: values differ")
    return out


def diff(old: Path, new: Path, rtol: float = 0.0) -> int:
    """Compare every case of two ``run`` directories (module docstring); 0 if all is identical or within ``rtol``."""
    bad = 0
    tol = Tolerated()
    tolerated_files = 0
    names = sorted({p.name for p in old.iterdir() if p.is_dir()} | {p.name for p in new.iterdir() if p.is_dir()})
    for name in names:
        for f in ("summary.json", "phases.csv", "partitions.npz"):
            a, b = old / name / f, new / name / f
            if not a.exists() and not b.exists() and f != "summary.json":
                continue  # a scenario without phases (the Bahi et al. solver) writes none, before and after
            if not a.exists() or not b.exists():
                print(f"{name}/{f}: missing in {'old' if not a.exists() else 'new'}")
                bad += 1
                continue
            if f.endswith(".npz"):
                problems = compare_npz(a, b)
                same = not problems
                if not same:
                    print(f"{name}/{f}: differs in {'; '.join(problems)}")
            elif rtol > 0:
                diffs, mine = Differences(), Tolerated()
                if f.endswith(".json"):
                    compare_json(_clean(json.loads(a.read_text())), _clean(json.loads(b.read_text())), rtol, name,
                                 diffs, mine)
                else:
                    compare_csv(a.read_text(), b.read_text(), rtol, name, diffs, mine)
                same = not diffs.found
                if not same:
                    print(f"{name}/{f}: differs in")
                    print("\n".join(diffs.lines()))
                elif mine.gaps:
                    tolerated_files += 1
                    print(f"{name}/{f}: within rtol {rtol:g} in {', '.join(n for _, n in sorted(mine.gaps))}")
                tol.update(mine)  # every field that needed the tolerance, in a differing file too
            elif f.endswith(".json"):
                ja, jb = _clean(json.loads(a.read_text())), _clean(json.loads(b.read_text()))
                same = json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
                if not same:
                    keys = sorted(k for k in set(ja) | set(jb) if ja.get(k) != jb.get(k))
                    print(f"{name}/{f}: differs in {keys}")
            else:
                same = a.read_bytes() == b.read_bytes()
                if not same:
                    print(f"{name}/{f}: differs")
            bad += not same
    if rtol > 0:
        print(f"fields within rtol {rtol:g} (largest relative gap):" if tol.gaps else
              f"no field needed rtol {rtol:g}")
        if tol.gaps:
            print("\n".join(tol.lines()))
        print(f"{len(names)} cases compared, {bad} files differ, {tolerated_files} files within rtol {rtol:g}")
    else:
        print(f"{len(names)} cases compared, {bad} files differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out_dir", type=Path)
    r.add_argument("--only", nargs="*")
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    d.add_argument("--rtol", type=float, default=0.0,
                   help="relative tolerance of floats (default 0: byte for byte); integers and strings stay exact")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return run(args.out_dir, args.only)
    if not args.rtol >= 0:
        ap.error(f"--rtol must be 0 or positive, got {args.rtol}")
    return diff(args.old, args.new, args.rtol)


if __name__ == "__main__":
    sys.exit(main())
