"""The caches of ``results/``: what a benchmark measured, with the machine, the command and the date.

A benchmark whose figures have a page in ``results/`` writes them with :func:`write` (``--cache FILE``); the page
is rendered from that file alone by :mod:`benchmarks.pages`. A cache is a JSON object::

    {"benchmark": "startup", "command": "python -m benchmarks.startup --cache results/startup.json",
     "date": "2026-11-28T10:40:12Z", "commit": "d4a6ba1", "tree": "clean" | "hermes/ with uncommitted changes",
     "machine": {"cores": 2, "cpu": "...", "memory_gib": 23.5, "python": "3.11.7", "mpi": "Open MPI v5.0.11",
                 "load": 1.2},
     "figures": ...}

``figures`` is the benchmark's own (rows of a table, as the script measured them). Nothing else writes a cache:
its numbers come from running the command it names.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "machine", "revision", "write", "read", "command_line"]

ROOT = Path(__file__).resolve().parents[1]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _mpi_library() -> str | None:
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.Get_library_version().split(",")[0].strip()


def machine() -> dict[str, Any]:
    """The machine the figures come from: cores, CPU model, memory, Python, MPI library, the 1-minute load."""
    return {"cores": os.cpu_count(), "cpu": _cpu_model(), "memory_gib": _memory_gib(),
            "python": platform.python_version(), "mpi": _mpi_library(), "load": round(os.getloadavg()[0], 2)}


def revision() -> tuple[str, str]:
    """(short commit of HEAD, whether hermes/ differs from it) of this checkout: the code the figures measure."""
    def git(*args: str) -> str:
        res = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return res.stdout.strip() if res.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "hermes")
    return commit, ("hermes/ with uncommitted changes" if dirty else "clean")


def command_line(module: str, argv: list[str]) -> str:
    """The command as a user types it from the repository's top: ``python -m benchmarks.<module> ARGS``."""
    return shlex.join(["python", "-m", module, *argv])


def write(path: str | os.PathLike, benchmark: str, command: str, figures: Any) -> Path:
    """Write the cache ``path`` (atomically) with the machine, the command, the date and the commit."""
    path = Path(path)
    commit, tree = revision()
    data = {"benchmark": benchmark, "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit, "tree": tree, "machine": machine(), "figures": figures}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    print(f"# wrote {path}", file=sys.stderr)
    return path


def read(path: str | os.PathLike) -> dict[str, Any]:
    """A cache written by :func:`write`."""
    return json.loads(Path(path).read_text())
