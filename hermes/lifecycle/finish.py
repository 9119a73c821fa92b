"""The end of a run (collective): the final checks (nothing lost), the summary, the run directory's result
files written by rank 0 (:mod:`hermes.lifecycle.directory`), then what the :class:`Outputs` the run was handed
write: the trace, the VTU files and the pictures (:data:`hermes.outputs.RUN_OUTPUTS`, a tool above the lifecycle).
"""

from __future__ import annotations

import platform as _platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hermes.app.mesh.kernels import jacobi_serial
from hermes.runtime.comm import agree
from hermes.data.distributed import gather_to_root
from hermes.errors import OutputError, ScenarioError
from hermes.files import RunDirError, reason, write_csv
from hermes.lifecycle.checkpoint import CHECKPOINT
from hermes.lifecycle.directory import run_dir_for, scenario_yaml, write_run
from hermes.lifecycle.records import RunResult
from hermes.lifecycle.state import RunState
from hermes.runtime.watchdog import Watchdog
from hermes.metrics import imbalance
from hermes.progress import Progress
from hermes.scenario import Scenario
from hermes.sections import OutputSpec
from hermes.version import __version__

__all__ = ["finish", "Outputs", "DrawingAhead", "check_outputs", "pictures_to_draw", "versions"]


class DrawingAhead(Protocol):
    """The worker that draws a refined run's pictures while its phases run, as the driver sees it."""

    def submit(self, phases: list[int], geometry: dict[str, np.ndarray], partitions: dict[str, np.ndarray],
               summary: dict[str, Any], rows: list[dict], columns: list[str]) -> None:
        """Hand over ``phases``, recorded (never raises)."""

    def close(self) -> None:
        """Stop the worker."""


class Outputs(Protocol):
    """What the lifecycle asks of the tools that write a run's outputs beyond its records (the trace, the VTU
    files, the pictures): :data:`hermes.outputs.RUN_OUTPUTS` is hermes'; the lifecycle never imports them."""

    def ahead(self, out: Path, base: dict[str, np.ndarray]) -> DrawingAhead:
        """Rank 0 of a refined run with pictures: the worker that draws each phase as it is recorded (``base``:
        the initial mesh's geometry)."""

    def write(self, out: Path, output: OutputSpec) -> None:
        """The files written with the records (the trace); OSError and OutputError reach the caller."""

    def draw(self, out: Path, sc: Scenario, say: Progress | None = None,
             ahead: DrawingAhead | None = None) -> None:
        """The VTU files and pictures, as the scenario asks (``ahead``: what drew some while the phases ran)."""


def check_outputs(sc: Scenario, outputs: Outputs | None) -> None:
    """ScenarioError (the same on every rank, before any work) if the scenario asks for an output that only the
    tools write and no :class:`Outputs` was handed to the run."""
    asked = [k for k, on in (("pictures", sc.output.pictures), ("vtu", sc.output.vtu),
                             ("lbdatafile", sc.output.trace_spec is not None)) if on]
    if outputs is None and asked:
        raise ScenarioError(f"output.{asked[0]}: the tools write it, and this run was handed none (pass "
                            f"outputs=hermes.outputs.RUN_OUTPUTS, or set output.{asked[0]} off)")


def finish(r: RunState, *, out_dir: str | Path | None = None, write: bool = True,
           watchdog: Watchdog | None = None, ahead: DrawingAhead | None = None,
           outputs: Outputs | None = None) -> RunResult | None:
    """The final checks (nothing lost), the summary and, on rank 0, the run directory (collective) with what
    ``outputs`` write; the watchdog stops once the collective part is over."""
    book, sc, dom = r.book, r.sc, r.dom
    r.say.status("the end: final checks" + (" and the serial Jacobi reference" if sc.application.kernel == "jacobi"
                                            else ""))
    cells_final, weight_final = book.sum(dom.n), book.sum(dom.load)
    final_imb = imbalance(np.array(book.allgather(dom.load)), r.sched.at(sc.adaptation.phases))
    total_time = book.max(r.clock.elapsed())
    u_err = _jacobi_error(r)
    r.adapter.check_totals(r.cells_initial, cells_final, r.weight_initial, weight_final)
    if watchdog is not None:
        watchdog.stop()
    end = _End(total_time, final_imb, u_err, cells_final, weight_final)
    # rank 0 writes; a failure to write (a full disk, a read-only medium) is one line on every rank
    return agree(r.comm, _finish_root, r, end, out_dir, write, ahead, outputs)


@dataclass(frozen=True)
class _End:
    """The run's figures at its end, agreed by every rank (the summary's)."""

    total_time: float
    imbalance: float
    jacobi_error: Any
    cells: int
    weight: float


def _summary(r: RunState, end: _End) -> dict[str, Any]:
    """The summary of a finished run (summary.json)."""
    sc = r.sc
    return {
        "complete": True,
        "scenario": sc.name, "processors": r.p, "balancer": r.balancer.name, "balancer_params": r.params,
        "clock": sc.clock, "seed": sc.seed, "versions": versions(), "mesh": r.setup.name,
        "kernel": sc.application.kernel,
        # async only (a sync summary stays as it was): the mode and the last phase's global residual
        **({"mode": "async", "final_residual": r.residual} if sc.application.mode == "async" else {}),
        "total_time": end.total_time, "final_imbalance": end.imbalance,
        "adaptation": sc.adaptation.kind, "cells_initial": r.cells_initial, "cells_final": end.cells,
        "cells_refined": r.adapter.totals["refined"], "cells_coarsened": r.adapter.totals["coarsened"],
        "weight_initial": r.weight_initial, "weight_final": end.weight,
        # the movement of cells over the phases (docs/RUNNING.md); migrated_cells: cell_sends' deprecated alias
        "cells_moved": _cells_moved(r), "cell_sends": r.total_moves, "migrated_cells": r.total_moves,
        "jacobi_max_rel_error": end.jacobi_error, "replay_mismatches": r.adapter.mismatches,
        "wall_seconds": time.perf_counter() - r.wall_start, "adapt_wall_seconds": r.adapter.walls,
        "phases": [ph.as_dict() for ph in r.phases],
    }


def _cells_moved(r: RunState) -> int | None:
    """The distinct cells that changed owner, summed over the phases (a cell moved in two phases counts twice);
    None if a phase did not record it."""
    moved = [ph.quality.get("migration_cells") for ph in r.phases]
    return None if None in moved else sum(moved)


def _finish_root(r: RunState, end: _End, out_dir: str | Path | None, write: bool, ahead: DrawingAhead | None,
                 outputs: Outputs | None) -> RunResult | None:
    """Rank 0: the summary, the run directory's files, then its VTU files and pictures (None elsewhere;
    ``ahead``: the worker that drew pictures while the phases ran)."""
    if r.rank != 0:
        return None
    sc = r.sc
    result = RunResult(_summary(r, end), r.rank_rows())
    if write:
        out = Path(out_dir or run_dir_for(sc.output, sc.name, sc.resolve)[0])
        t = time.perf_counter()
        r.say.status(f"the end: writing the final records in {out}")
        try:
            result.out_dir = write_run(out, scenario_yaml(sc), sc.output, result, r.columns, r.partitions,
                                       r.setup.mesh, r.geometry)
            if r.feed is not None and r.feed.link_rows:
                write_csv(result.out_dir / "links.csv", r.feed.link_rows)
            if outputs is not None:
                if sc.output.trace_spec is not None:
                    r.say.status("the end: writing the LBDatafile trace")
                outputs.write(result.out_dir, sc.output)
        except (OSError, OutputError) as err:
            raise RunDirError(f"cannot write the results in {out} ({reason(err)}); the records of the phases "
                              f"finished before are kept") from None
        shutil.rmtree(result.out_dir / CHECKPOINT, ignore_errors=True)  # a finished run has nothing to resume
        pictures = pictures_to_draw(sc, sc.adaptation.phases)
        files = " and ".join([f"{pictures} pictures"] * (pictures > 0) + ["the VTU files"] * sc.output.vtu)
        r.say(f"results written in {time.perf_counter() - t:.1f} s" + (f"; drawing {files}" if files else ""))
        t = time.perf_counter()
        if outputs is not None:
            outputs.draw(result.out_dir, sc, r.say, ahead)
        if files:
            r.say(f"drawn: {files} in {time.perf_counter() - t:.1f} s")
        r.say.status(None)
    return result


def pictures_to_draw(sc: Scenario, phases: int) -> int:
    """How many PNG files the end of a run of ``phases`` phases draws (:func:`draw`): a partition per phase and
    the initial one, ``phases.png``, and ``monitor.png`` with an extra load or a monitor."""
    if not sc.output.pictures:
        return 0
    return phases + 2 + (sc.extraload is not None or sc.monitor is not None)


def _jacobi_error(r: RunState) -> float | None:
    """max |u − u_serial| / max |u_serial| of a jacobi run, on rank 0 (collective).

    ``u_serial`` is the serial *synchronous* Jacobi of as many sweeps. A sync run equals it bit for bit
    (unrefined); an async run (``application.mode: async``) legitimately differs, its ghosts being stale, so
    there the figure is the async solution's distance to the serial sync one — reported, never checked —
    next to ``final_residual`` in the summary."""
    app, sc = r.sc.application, r.sc
    if app.kernel != "jacobi":
        return None
    if r.refining:
        return r.adapter.jacobi_error(r.dom, r.setup.trimesh)
    g = gather_to_root(r.comm, r.dom, r.setup.n_cells, extra={"u": r.dom.fields["u"]})
    if r.rank != 0:
        return None
    mesh = r.setup.mesh
    ref = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, sc.adaptation.phases * app.iterations)
    return float(np.max(np.abs(g[2]["u"] - ref)) / max(np.max(np.abs(ref)), 1e-300))


def versions() -> dict[str, str]:
    """The versions of hermes and of what it ran on (summary.json's ``versions``)."""
    import mpi4py
    import scipy
    from mpi4py import MPI

    out = {"hermes": __version__, "python": _platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__, "mpi4py": mpi4py.__version__,
           "mpi": MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()}  # Open MPI ends it with NUL
    try:
        import pymetis

        out["pymetis"] = getattr(pymetis, "version", getattr(pymetis, "__version__", "?"))
    except ImportError:  # pragma: no cover
        pass
    return {k: str(v) for k, v in out.items()}

