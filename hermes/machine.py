"""What this machine can give a run: its available memory and how many of a job's ranks share it.

The checks before a run (:mod:`hermes.lifecycle.preflight`), the Brusselator study's serial check
(:mod:`hermes.app.brusselator.study`) and the gossip lab (:mod:`hermes.lab.gossip`) weigh what they need against these.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["memory_available", "ranks_on_this_machine"]


def memory_available() -> int | None:
    """Bytes this machine can still give: ``MemAvailable`` of /proc/meminfo (else free pages ×
    page size), capped by the cgroup's limit (containers); None if unknown."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:
        cg = Path("/sys/fs/cgroup")
        limit = (cg / "memory.max").read_text().strip()
        if limit != "max":
            avail = min(avail, int(limit) - int((cg / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return avail


def ranks_on_this_machine(p: int) -> int:
    """Ranks of a job of ``p`` sharing this machine, as the launcher tells them (Open MPI, MPICH); else ``p``."""
    for key in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        try:
            return max(1, min(p, int(os.environ[key])))
        except (KeyError, ValueError):
            continue
    return p
