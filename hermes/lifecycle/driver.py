"""The driver: runs an experiment's adaptation phases under MPI and owns the run's life (HeRMeS, thesis
Fig. 10.1–10.2).

:func:`run` reads as the HeRMeS cycle: the set-up (:func:`hermes.lifecycle.setup.start`: rank 0 reads and
partitions the mesh with METIS, target fractions = the capacities; every rank receives its cells), then for each
phase the steps of :mod:`hermes.lifecycle.phase` — extra load, adaptation, the balancing rounds (monitor, decide,
balance, realise and migrate; the decisions are :mod:`hermes.balance.policy`'s), compute, record — each phase's
records written as it ends (:mod:`hermes.lifecycle.journal`, with a checkpoint when due), then the end
(:func:`hermes.lifecycle.finish.finish`: the final checks, the result files, then what the
:class:`~hermes.lifecycle.finish.Outputs` it is handed write: the trace, the VTU files, the pictures). :func:`resume`
continues a run from its last checkpoint. The driver holds the run directory's lock from the first check to
the end and arms the :class:`~hermes.runtime.watchdog.Watchdog`.

Refinement (``adaptation.kind: refine``)
    Set-up turns the mesh into a :class:`~hermes.data.refine.TriMesh` (quadrilaterals become two
    triangles, each a work unit with its polygon's weight) and distributes it with its geometry
    fields. Each phase then unites split families, coarsens, refines and checks the accounting
    (:class:`hermes.adaptation.Adapter`). Ids grow with gaps; balancers get a view numbered
    ``0..N−1`` contiguously by rank (ParMETIS' ``vtxdist`` order) when there are gaps. With
    ``kernel: jacobi`` rank 0 replays the run serially on the whole mesh and compares the solutions
    cell by cell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from hermes.claims import claim_dir
from hermes.runtime.comm import Bookkeeping, agree
from hermes.lifecycle.checkpoint import load_state
from hermes.lifecycle.directory import run_dir_for
from hermes.lifecycle.feed import close_load
from hermes.lifecycle.finish import DrawingAhead, Outputs, check_outputs, finish, pictures_to_draw
from hermes.lifecycle.phase import adapt, balance_rounds, compute, extra_load, record, step
from hermes.lifecycle.journal import checkpoint_refs, open_run, progress_summary, save_checkpoint, write_progress
from hermes.lifecycle.records import RunResult
from hermes.lifecycle.setup import start
from hermes.lifecycle.state import RunState
from hermes.progress import Progress, using
from hermes.runtime.watchdog import Watchdog
from hermes.scenario import Scenario

__all__ = ["run", "resume", "eta"]


# -- the run -------------------------------------------------------------------------------------------------
def run(sc: Scenario, comm, *, out_dir: str | Path | None = None, quiet: bool = False,
        progress: Callable[[str], None] | Progress | None = None, force: bool = False,
        timeout: float | None = None, lock_token: str | None = None,
        outputs: Outputs | None = None) -> RunResult | None:
    """Run the scenario on ``comm`` (collective). Returns the result on rank 0, None elsewhere.

    The run directory (``out_dir``, else ``output.dir``, else ``runs/<name>-<timestamp>``) is checked before
    any work and prepared after the set-up (:func:`hermes.lifecycle.directory.open_run_dir`: a previous hermes run in it
    is replaced, an unfinished one only with ``force``); every finished phase's records are written as the
    phase ends (summary.json with ``"complete": false`` until the end), and with ``output.checkpoint_every:
    K`` the distributed state every K phases (:func:`resume` continues from it). ``timeout`` (else
    ``run.timeout``) arms the :class:`~hermes.runtime.watchdog.Watchdog`. Rank 0 holds the run directory's lock
    (:func:`hermes.claims.claim_dir`) from the first check to the end, or joins the lock of the launcher that
    started the job (``lock_token``). The trace, the VTU files and the pictures the scenario asks for are
    written by ``outputs`` (:data:`hermes.outputs.RUN_OUTPUTS`: the tools, above the lifecycle).

    Raises
    ------
    HermesError
        On every rank, with the same one-line message, for bad input found at any rank (a ScenarioError before
        any work if the scenario asks for pictures, VTU files or a trace and ``outputs`` is None).
    """
    check_outputs(sc, outputs)
    with _progress(comm, progress, quiet) as say:
        return _run(sc, comm, say, out_dir, force, timeout, lock_token, outputs)


def _progress(comm, progress: Callable[[str], None] | Progress | None,
              quiet: bool) -> contextlib.AbstractContextManager[Progress]:
    """Rank 0's :class:`~hermes.progress.Progress` over ``progress`` (its lines and, repeated by a thread while a
    step lasts, the step in progress; :func:`hermes.progress.using`); a silent one elsewhere or with ``quiet``.
    Under hosting rank 0 is emulated processor 0; the thread only prints, never calls MPI."""
    return using(None if quiet or comm.Get_rank() != 0 else progress)


def _run(sc: Scenario, comm, say: Progress, out_dir: str | Path | None, force: bool, timeout: float | None,
         lock_token: str | None, outputs: Outputs | None) -> RunResult | None:
    """:func:`run` with its Progress."""
    held = []
    path, key = run_dir_for(sc.output, sc.name, sc.resolve, out_dir) if comm.Get_rank() == 0 else (None, None)

    def claim():
        held.append(claim_dir(path, key, force=force, token=lock_token, name=sc.name))
        return held[-1].path  # the default directory may have become path-2 (another run in the same second)

    where = Bookkeeping(comm).bcast(agree(comm, lambda: claim() if path else None))
    try:
        with Watchdog(comm, timeout if timeout is not None else sc.run.timeout, leader=comm.process_leader) as dog:
            r = start(comm, sc, say=say)
            try:
                say.status("set-up: opening the run directory")
                token = held[0].token if held else None
                out = Path(agree(comm, lambda: open_run(r, where, key, force, token) if r.rank == 0 else None)
                           or where)
                dog.beat(0)
                return _phases(r, 1, out, dog, last_checkpoint=None, outputs=outputs)
            finally:
                close_load(r.load)  # real task processes end with the run (they also die with the process)
    finally:
        for lock in held:
            lock.release(remove_if_unused=True)


def resume(run_dir: str | Path, comm, *, quiet: bool = False,
           progress: Callable[[str], None] | Progress | None = None,
           timeout: float | None = None, pictures: bool | None = None,
           lock_token: str | None = None, outputs: Outputs | None = None) -> RunResult | None:
    """Continue the run in ``run_dir`` from its last checkpoint (collective; the same number of ranks).

    Every rank reads back its state (:mod:`hermes.lifecycle.checkpoint`), rank 0 rewrites the records to the
    checkpoint's phase, and the run goes on as if it had never stopped: the virtual clock's results — the
    summary but its wall times, phases.csv, the per-cell arrays — are those of an uninterrupted run.
    ``pictures`` False skips them (None: as the scenario says); ``outputs`` as for :func:`run`.

    Raises
    ------
    HermesError
        On every rank (one line): no checkpoint, another number of ranks, a damaged file, an edited
        scenario.yaml (the run goes on with the scenario it started with).
    """
    out = Path(run_dir)
    held = []  # rank 0 holds the run directory's lock (or joins its launcher's, lock_token) to the end
    agree(comm, lambda: held.append(claim_dir(out, "resume", force=True, token=lock_token))
          if comm.Get_rank() == 0 else None)
    try:
        with _progress(comm, progress, quiet) as say:
            return _resume(out, comm, say, timeout, pictures, outputs)
    finally:
        for lock in held:
            lock.release(remove_if_unused=True)


def _resume(out: Path, comm, say: Progress, timeout: float | None,
            pictures: bool | None, outputs: Outputs | None) -> RunResult | None:
    say.status("resuming: reading the checkpoint")
    r, head = load_state(comm, out, lambda sc: checkpoint_refs(comm, sc, say))
    r.wall_start = time.perf_counter() - head.get("wall_seconds", 0.0)
    if pictures is not None and pictures != r.sc.output.pictures:
        r.sc = r.sc.model_copy(update={"output": r.sc.output.model_copy(update={"pictures": pictures})})
    check_outputs(r.sc, outputs)
    k = head["phase"]
    say(f"hermes: resuming {out} after phase {k}/{r.sc.adaptation.phases} on {r.p} ranks")
    with Watchdog(comm, timeout if timeout is not None else r.sc.run.timeout, leader=comm.process_leader) as dog:
        agree(comm, lambda: write_progress(r, out, k) if r.rank == 0 else None)
        dog.beat(k)
        return _phases(r, k + 1, out, dog, last_checkpoint=k, outputs=outputs)


def _phases(r: RunState, first: int, out: Path, dog: Watchdog, *, last_checkpoint: int | None,
            outputs: Outputs | None) -> RunResult | None:
    """The phases ``first``… of the run, each recorded as it ends (and checkpointed when due), then
    :func:`finish`."""
    pictures = pictures_to_draw(r.sc, r.sc.adaptation.phases)
    # a refined run's pictures are drawn while the phases run (each phase its own mesh and window)
    ahead = _draw_ahead(r, out, outputs)
    try:
        return _phase_loop(r, first, out, dog, last_checkpoint, pictures, ahead, outputs)
    finally:
        if ahead is not None:
            ahead.close()


def _draw_ahead(r: RunState, out: Path, outputs: Outputs | None) -> DrawingAhead | None:
    """Rank 0 of a refined run with pictures: the worker that draws each phase's picture as it is recorded."""
    if r.rank != 0 or not r.sc.output.pictures or not r.refining or outputs is None:
        return None
    from hermes.lifecycle.directory import base_geometry

    return outputs.ahead(out, base_geometry(r.setup.mesh))


def _phase_loop(r: RunState, first: int, out: Path, dog: Watchdog, last_checkpoint: int | None,
                pictures: int, ahead: DrawingAhead | None, outputs: Outputs | None) -> RunResult | None:
    """:func:`_phases`' loop (``ahead``: rank 0's drawing worker or None)."""
    sc = r.sc
    every = sc.output.checkpoint_every
    for k in range(first, sc.adaptation.phases + 1):
        t = time.perf_counter()
        ph = extra_load(r, k)
        adapt(r, ph)
        balance_rounds(r, ph)  # monitor → decide → balance → realise → migrate, per round
        compute(r, ph)
        line = record(r, ph)
        t_write = time.perf_counter()
        if every is not None and k % every == 0 and k < sc.adaptation.phases:
            step(r, ph, "checkpoint")
            save_checkpoint(r, k, out)
            last_checkpoint = k
        step(r, ph, "writing the records")
        agree(r.comm, lambda at=last_checkpoint: write_progress(r, out, at) if r.rank == 0 else None)
        if ahead is not None:  # the phase (and the initial partition with phase 1: its fair loads) to draw
            ahead.submit([0, k] if k == 1 else [k], r.geometry, r.partitions,
                         progress_summary(r, last_checkpoint), r.rank_rows(), r.columns)
        _fault(r, k)
        now = time.perf_counter()
        left = sc.adaptation.phases - k
        r.say(f"{line} | wall {now - r.wall_start:.1f} s, {eta(now - t, left, now - t_write, pictures)}")
        r.say.status(None)
        dog.beat(k)
    return finish(r, out_dir=out, watchdog=dog, ahead=ahead, outputs=outputs)


def _fault(r: RunState, k: int) -> None:
    """The kill-and-resume test's fault: with ``HERMES_FAULT=kill:RANK:PHASE`` in the environment, rank RANK
    kills itself (SIGKILL, as ``kill -9`` would) once phase PHASE's records and checkpoint are written."""
    if os.environ.get("HERMES_FAULT") == f"kill:{r.rank}:{k}":
        os.kill(os.getpid(), signal.SIGKILL)


def eta(phase_wall: float, left: int, write_wall: float, pictures: int) -> str:
    """The ETA of a progress line: ``left`` phases as long as the last one (``phase_wall`` seconds: the phases of
    an adaptive run grow, the last one is the best guess of the next), the final records written as fast as the
    last phase's were (``write_wall``), then the pictures — counted, not timed: none is drawn before the end, so
    there is no time of this run's to estimate them from."""
    text = f"ETA {left * phase_wall + write_wall:.0f} s"
    return text + (f" + drawing {pictures} pictures" if pictures else "")

