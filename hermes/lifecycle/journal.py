"""What a run writes as it goes (rank 0 unless said): the run directory opened after the set-up, the records of
the phases finished so far (summary.json with ``"complete": false``, phases.csv) and, collectively, the
checkpoints every ``output.checkpoint_every`` phases (:mod:`hermes.lifecycle.checkpoint`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes.balance.realisation.selection import get_selection
from hermes.balance.registry import get_balancer
from hermes.runtime.comm import agree
from hermes.errors import OutputError
from hermes.files import RunDirError, reason, write_atomic
from hermes.lifecycle.checkpoint import CHECKPOINT, save_state
from hermes.lifecycle.directory import open_run_dir, scenario_yaml, write_records
from hermes.lifecycle.finish import versions
from hermes.lifecycle.state import RunState

__all__ = ["open_run", "write_progress", "progress_summary", "checkpoint_refs", "save_checkpoint"]


def open_run(r: RunState, path: Path, key: str, force: bool, token: str | None = None) -> Path:
    """Rank 0, after the set-up (holding the directory's lock, ``token``): the run directory emptied of an
    earlier run, marked, with the scenario and the (empty) records."""
    out = open_run_dir(path, key, force=force, token=token)
    write_atomic(out / "scenario.yaml", scenario_yaml(r.sc))
    write_progress(r, out, None)
    return out


def _summary_head(r: RunState) -> dict[str, Any]:
    """Rank 0: what the summary says before the first phase (its first keys)."""
    sc = r.sc
    return {"scenario": sc.name, "processors": r.p, "balancer": r.balancer.name, "balancer_params": r.params,
            "clock": sc.clock, "seed": sc.seed, "versions": versions(), "mesh": r.setup.name,
            "kernel": sc.application.kernel}


def progress_summary(r: RunState, checkpoint_phase: int | None) -> dict[str, Any]:
    """Rank 0: summary.json of an unfinished run (``"complete": false``, the phases finished so far)."""
    return {"complete": False, "checkpoint": checkpoint_phase, **_summary_head(r),
            "adaptation": r.sc.adaptation.kind, "cells_initial": r.cells_initial,
            "weight_initial": r.weight_initial, "phases": [ph.as_dict() for ph in r.phases]}


def write_progress(r: RunState, out: Path, checkpoint_phase: int | None) -> None:
    """Rank 0: the records of the phases finished so far — phases.csv and summary.json with ``"complete":
    false`` and the phase of the last checkpoint (each written atomically)."""
    try:
        write_records(out, progress_summary(r, checkpoint_phase), r.rank_rows(), r.columns)
    except (OSError, OutputError) as err:
        raise RunDirError(f"cannot write the records in {out} ({reason(err)})") from None


def checkpoint_refs(comm, sc, say: Callable[[str], None]) -> dict[str, Any]:
    """What a checkpoint stores as references by name: the communicator, the printer, registry entries."""
    return {"comm": comm, "say": say, "balancer": get_balancer(sc.balancer.algorithm),
            "select": get_selection(sc.balancer.selection)}


def save_checkpoint(r: RunState, k: int, out: Path) -> None:
    """Save every rank's :class:`RunState` after phase ``k`` in ``out/checkpoint`` (collective; see
    :mod:`hermes.lifecycle.checkpoint`).

    The manifest records the SHA-256 of the scenario.yaml the run wrote (:func:`_open`): a new run's first
    checkpoint hashes that text, later ones keep what the checkpoint before them recorded (a resumed run
    checked the file against it; its scenario may differ from the file by ``--no-pictures``)."""
    import hashlib

    from hermes.lifecycle.checkpoint import read_manifest

    def scenario_sha256() -> str | None:
        if r.rank != 0:
            return None
        if (out / CHECKPOINT / "manifest.json").exists():
            return read_manifest(out).scenario_sha256
        return hashlib.sha256(scenario_yaml(r.sc).encode()).hexdigest()

    refs = {"comm": r.comm, "say": r.say, "balancer": r.balancer, "select": r.select}
    save_state(r.comm, r, phase=k, run_dir=out, scenario=r.sc, refs=refs,
               keep={"wall_seconds": time.perf_counter() - r.wall_start},
               scenario_sha256=agree(r.comm, scenario_sha256))

