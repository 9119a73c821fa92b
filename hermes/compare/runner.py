"""Running an experiment's runs: each a ``hermes run`` under its own ``mpiexec``, several at once when they fit.

A run is *complete* when its directory holds a complete ``summary.json`` (every phase, not marked
``"complete": false``) for the same scenario as planned; complete runs are skipped, so an interrupted
experiment resumes where it stopped and a finished one is re-read in seconds. A run that fails leaves its
error line in ``runs/ID.error.txt`` and the others go on. Progress lines say which clock a time is on: the runs'
results are in the scenario's clock (virtual by default), the elapsed time and the ETA are wall-clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from hermes.claims import EXPERIMENT_TOKEN, DirLock, _read_small, clear_dir, read_marker, refresh, subdir
from hermes.compare.experiment import PlannedRun
from hermes.errors import HermesError
from hermes.files import RunDirError, file_mode, safe_name, write_atomic
from hermes.interpreter import child_env
from hermes.runtime.launch import _LAUNCHER_ENV, mpiexec_command
from hermes.loaders import dump_yaml, load_json, load_yaml
from hermes.progress import Progress, clock, using

__all__ = ["Outcome", "run_status", "read_summary", "execute", "error_line", "cores", "error_of", "planned_scenario",
           "EXIT_RUNS_FAILED"]

#: the exit status of ``hermes compare`` when a run of the experiment failed (the others' results are written;
#: 2 stays bad input, nothing run)
EXIT_RUNS_FAILED = 3

#: compare's own files about run ID, beside its run directory ``runs/ID/`` (which belongs to the run: hermes
#: replaces a run directory wholesale and refuses one holding files it did not write)
LOG, ERROR, SPEC = "{}.log", "{}.error.txt", "{}.yaml"


def side_file(run_dir: Path, kind: str) -> Path:
    """compare's file ``kind`` (LOG, ERROR or SPEC) about the run whose directory is ``run_dir``."""
    return run_dir.parent / kind.format(run_dir.name)


@dataclass
class Outcome:
    """What happened to one run: ``done``, ``skipped`` (already complete) or ``failed`` (with its error line)."""

    run: PlannedRun
    status: str
    error: str | None = None
    wall: float = 0.0
    summary: dict[str, Any] | None = field(default=None, repr=False)


def cores() -> int:
    """The cores this process may use (the affinity mask where the OS has one, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _scenario_of(run_dir: Path) -> Any:
    """The run's scenario.yaml as data (None if it is missing or unreadable; :mod:`hermes.loaders`' limits)."""
    try:
        return load_yaml(run_dir / "scenario.yaml")
    except HermesError:
        return None


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary.json if it is complete (parses, every phase recorded, not ``"complete": false``) and
    the directory is a hermes run (its marker)."""
    if read_marker(run_dir) != "run":
        return None
    try:
        s = load_json(run_dir / "summary.json")
    except HermesError:
        return None
    if not isinstance(s, dict) or s.get("complete", True) is not True or not isinstance(s.get("phases"), list):
        return None
    had = _scenario_of(run_dir)
    try:
        planned = had["adaptation"]["phases"]
    except (KeyError, TypeError):
        planned = None
    if planned is not None and len(s["phases"]) != planned:
        return None
    return s


def error_of(run_dir: Path) -> str:
    """The error line compare recorded for a run (its side file; the first line, at most 4 kB, never through a
    symlink)."""
    text = _read_small(side_file(run_dir, ERROR))
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "failed (no error recorded)"


def planned_scenario(run_dir: Path) -> Any:
    """The scenario compare planned for a run (its side file ``runs/ID.yaml``), as data; None if unreadable."""
    try:
        return load_yaml(side_file(run_dir, SPEC))
    except HermesError:
        return None


def run_status(run: PlannedRun, run_dir: Path) -> str:
    """``complete``, ``stale`` (complete, but for another scenario: the experiment changed), ``failed`` (an
    ID.error.txt from an earlier attempt) or ``missing``."""
    if read_summary(run_dir) is not None:
        return "complete" if _scenario_of(run_dir) == run.scenario.to_dict() else "stale"
    return "failed" if side_file(run_dir, ERROR).is_file() else "missing"


def error_line(log: str, returncode: int) -> str:
    """The one line that says why a run failed: hermes' own error line, else the exception's last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("hermes: error:"):
            return ln.removeprefix("hermes: error:").strip()
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt")) and " " not in head:
            return ln
    return f"exit status {returncode}" + (f": {lines[-1][:300]}" if lines else "")


def _die_with_parent() -> None:  # pragma: no cover  (runs in the child between fork and exec)
    """Linux: the child mpiexec gets SIGTERM when compare dies, even by SIGKILL (no orphaned jobs)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class _Job:
    run: PlannedRun
    proc: subprocess.Popen
    log: Any
    t0: float


class _Progress:
    """One line per event: ``[ 3/12] ▕█████░░░░░▏ 25%  done  a · b: 239.3 s virtual, imbalance 1.03 | wall ...``."""

    def __init__(self, total: int, say: Progress):
        self.total, self.say, self.count, self.t0 = total, say, 0, time.perf_counter()
        self.walls: list[float] = []

    def bar(self) -> str:
        width = 20
        frac = self.count / max(self.total, 1)
        full = int(round(frac * width))
        return f"[{self.count:>{len(str(self.total))}}/{self.total}] ▕{'█' * full}{'░' * (width - full)}▏ {frac:4.0%}"

    def event(self, word: str, text: str, eta: float | None = None) -> None:
        self.count += 1
        elapsed = time.perf_counter() - self.t0
        tail = f" | elapsed {clock(elapsed)} wall"
        if eta is not None:
            tail += f", ETA {clock(eta)}"
        self.say(f"{self.bar()}  {word:<8} {text}{tail}")




def _result_text(summary: dict[str, Any]) -> str:
    kind = summary.get("clock", "virtual")
    total, imb = summary.get("total_time"), summary.get("final_imbalance")
    text = f"{total:.4g} s {kind} time" if isinstance(total, (int, float)) else "?"
    if isinstance(imb, (int, float)):
        text += f", final imbalance {imb:.3f}"
    return text


def execute(runs: list[PlannedRun], runs_dir: Path, *, jobs: int = 1, oversubscribe: bool = False,
            timeout: float | None = None, rerun_failed: bool = True,
            say: Callable[[str], None] | Progress | None = print, budget: int | None = None,
            token: str | None = None) -> list[Outcome]:
    """Run every run that is not complete, at most ``jobs`` at once, and return one outcome per run (in order).

    Parameters
    ----------
    runs : list of PlannedRun
        The experiment's runs (:meth:`Experiment.runs`).
    runs_dir : path
        Their run directories are ``runs_dir / run.id``.
    jobs : int
        How many runs may execute at once. A run starts only while the ranks of the runs executing, its own
        included, fit the machine's cores (``budget``, default :func:`cores`); a run bigger than the machine
        runs alone (oversubscribed).
    oversubscribe : bool
        Start ``jobs`` runs whatever their ranks: the virtual clock's results do not change, but wall-clock
        timings (``wall_seconds``, the ``wall`` clock) are then unreliable.
    timeout : float, optional
        Wall seconds after which a run is killed (and counted failed).
    rerun_failed : bool
        Retry runs that failed before (default); False keeps their error.
    token : str, optional
        The experiment's lock token (:func:`hermes.compare.run_experiment` holds the lock): given to the runs
        so that they may write into the experiment (a run from elsewhere is refused while compare runs).
    say : callable or Progress
        Receives the progress lines (a line per run started and ended); a :class:`~hermes.progress.Progress`
        also shows, while runs execute, the runs done, running and failed, the ETA and each running run's
        current step (:func:`run_step`), repeated at least every 5 s (a live bar on a terminal).

    Notes
    -----
    Each run is ``mpiexec -n P python -m mpi4py -m hermes run SPEC --no-launch --out DIR`` in its own
    process group (killed as a whole on timeout or interrupt), with stdout and stderr in ``runs/ID.log`` beside
    its directory ``runs/ID``: the run's own progress lines, whose last one says what it is doing.
    Scotch runs single-threaded (``SCOTCH_PTHREAD_NUMBER=1`` unless set): its threaded remapping is not
    reproducible. An interrupt (Ctrl-C, SIGTERM) kills the runs executing and re-raises; their directories
    hold no complete summary, so the next invocation runs them again.
    """
    with using(say) as shown:
        return _execute(runs, runs_dir, jobs, oversubscribe, timeout, rerun_failed, shown, budget, token)


def _execute(runs: list[PlannedRun], runs_dir: Path, jobs: int, oversubscribe: bool, timeout: float | None,
             rerun_failed: bool, say: Progress, budget: int | None, token: str | None) -> list[Outcome]:
    """:func:`execute` with its Progress."""
    budget = budget or cores()
    jobs = max(1, int(jobs))
    progress = _Progress(len(runs), say)
    outcomes: dict[str, Outcome] = {}
    todo: deque[PlannedRun] = deque()
    for run in runs:
        d = runs_dir / run.id
        status = run_status(run, d)
        if status == "complete":
            outcomes[run.id] = Outcome(run, "skipped", summary=read_summary(d))
            progress.event("complete", f"{run.title()}: {_result_text(outcomes[run.id].summary)}")
        elif status == "failed" and not rerun_failed:
            err = error_of(d)
            outcomes[run.id] = Outcome(run, "failed", err)
            progress.event("FAILED", f"{run.title()}: {err} (earlier attempt)")
        else:
            if status == "stale":
                say(f"{' ' * len(progress.bar())}  stale    {run.title()}: the experiment changed, running it again")
            todo.append(run)
    executing: list[_Job] = []
    env = child_env({k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV})  # hermes.interpreter
    env.setdefault("SCOTCH_PTHREAD_NUMBER", "1")
    if token is not None:  # the experiment's lock, held by this compare: its own runs may write in it
        env[EXPERIMENT_TOKEN] = token
    old_term = signal.getsignal(signal.SIGTERM)
    if old_term is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    eta: float | None = None
    shown = 0.0
    try:
        while todo or executing:
            if time.perf_counter() - shown >= 0.5:  # the logs read twice a second, not at every poll
                _show(say, progress, outcomes, executing, runs_dir, eta)
                shown = time.perf_counter()
            while todo and len(executing) < jobs:
                used = sum(j.run.processes for j in executing)
                if executing and not oversubscribe and used + todo[0].processes > budget:
                    break
                run = todo.popleft()
                refresh(runs_dir.parent)  # the experiment lock's file, which its runs read the token from
                try:
                    executing.append(_start(run, runs_dir, env))
                except HermesError as err:  # its directory is not one hermes may replace: the others go on
                    outcomes[run.id] = Outcome(run, "failed", str(err))
                    progress.event("FAILED", f"{run.title()}: {err}")
                    try:  # only into the experiment's own runs/ (not through a symlink planted there)
                        subdir(runs_dir.parent, runs_dir.name)
                        write_atomic(side_file(runs_dir / run.id, ERROR), f"{err}\n")
                    except HermesError:
                        pass  # the row says why in any case
                    continue
                say(f"{' ' * len(progress.bar())}  start    {executing[-1].run.title()} "
                    f"({executing[-1].run.processors} processors on {executing[-1].run.processes})")
            time.sleep(0.05)
            for job in list(executing):
                rc = job.proc.poll()
                late = timeout is not None and time.perf_counter() - job.t0 > timeout
                if rc is None and not late:
                    continue
                if rc is None:
                    _kill(job)
                executing.remove(job)
                out = _finish(job, runs_dir, rc, timeout if late else None)
                outcomes[job.run.id] = out
                progress.walls.append(out.wall)
                left = len(todo) + len(executing)
                eta = (sum(progress.walls) / len(progress.walls)) * left / max(1, min(jobs, left)) if left else 0.0
                if out.status == "done":
                    progress.event("done", f"{job.run.title()}: {_result_text(out.summary)} "
                                   f"(run {out.wall:.1f} s wall)", eta)
                else:
                    progress.event("FAILED", f"{job.run.title()}: {out.error}", eta)
    except BaseException:
        for job in executing:
            _kill(job)
            job.log.close()
        raise
    finally:
        say.status(None)
        if old_term is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return [outcomes[r.id] for r in runs]


def _show(say: Progress, progress: _Progress, outcomes: dict[str, Outcome], executing: list[_Job],
          runs_dir: Path, eta: float | None) -> None:
    """The status of the experiment: runs done, running, failed, the ETA, and each running run's current step."""
    failed = sum(o.status == "failed" for o in outcomes.values())
    text = (f"{len(outcomes) - failed} done, {len(executing)} running, {failed} failed of {progress.total}"
            + (f", ETA {clock(eta)}" if eta is not None else ""))
    steps = [f"{j.run.title()}: {run_step(side_file(runs_dir / j.run.id, LOG)) or 'starting'}" for j in executing]
    say.status(" | ".join([text, *steps]), len(outcomes), progress.total)


def run_step(log: Path) -> str | None:
    """What a running run is doing, from the last line of its log (``hermes run`` writes there its progress
    lines and, repeated while a step lasts, the step in progress): ``phase 2/8: compute (20 iterations)``, ``phase
    1/8 done``, ``set-up: partitioning 1000000 cells (METIS, 64 parts)``; None before its first line."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = [ln.strip() for ln in tail.splitlines()[1:] or tail.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("$ ")]  # the command, the log's first line
    if not lines:
        return None
    last = lines[-1]
    if last.startswith("phase ") and " | wall " in last:  # a phase's line: that phase is done
        return last.split(":", 1)[0] + " done"
    return last.split(" … ", 1)[0][:100]


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _clean(d: Path) -> None:
    """Empty the run directory ``d`` of an incomplete, stale or failed attempt — only if hermes made it (its
    marker; a symlink or a directory without the marker is refused and left as it is) and no run holds it."""
    safe_name(d.name, "run directory")
    if d.is_symlink() or (d.exists() and not d.is_dir()):
        raise RunDirError(f"{d} is not a run directory hermes made (not touched)")
    if not d.exists() or not any(d.iterdir()):
        return
    if read_marker(d) != "run":
        raise RunDirError(f"{d} holds files and carries no hermes marker (not touched; move it away)")
    with DirLock.acquire(d, str(d)):
        clear_dir(d)


def _create(path: Path):
    """A new file for writing at ``path`` (whatever was there removed first; never through a symlink)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                 file_mode())
    return os.fdopen(fd, "w")


def _start(run: PlannedRun, runs_dir: Path, env: dict[str, str]) -> _Job:
    try:
        return _start_job(run, runs_dir, env)
    except OSError as err:  # a side file that is a directory, a full disk: this run fails, the others go on
        raise RunDirError(f"cannot prepare {runs_dir / run.id} ({err.strerror or type(err).__name__})") from None


def _start_job(run: PlannedRun, runs_dir: Path, env: dict[str, str]) -> _Job:
    d = runs_dir / run.id
    subdir(runs_dir.parent, runs_dir.name)  # the experiment's runs/: a directory of its own, never a symlink
    _clean(d)
    side_file(d, ERROR).unlink(missing_ok=True)
    spec = side_file(d, SPEC)  # the run writes the same resolved scenario into its directory
    write_atomic(spec, dump_yaml(run.scenario.to_dict(), sort_keys=False))
    cmd = mpiexec_command(run.processes, ["run", str(spec), "--no-launch", "--out", str(d)])
    try:
        log = _create(side_file(d, LOG))
    except OSError as err:
        raise RunDirError(f"cannot write {side_file(d, LOG)} ({err.strerror or err})") from None
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    kwargs: dict[str, Any] = {"start_new_session": True}
    if sys.platform.startswith("linux"):
        kwargs["preexec_fn"] = _die_with_parent
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, **kwargs)
    return _Job(run, proc, log, time.perf_counter())


def _kill(job: _Job) -> None:
    try:
        os.killpg(job.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    job.proc.wait()


def _finish(job: _Job, runs_dir: Path, rc: int | None, timed_out: float | None) -> Outcome:
    job.log.close()
    wall = time.perf_counter() - job.t0
    d = runs_dir / job.run.id
    if timed_out is not None:
        err = f"timed out after {timed_out:g} s wall"
    elif rc != 0:
        err = error_line(side_file(d, LOG).read_text(errors="replace"), rc)
    else:
        summary = read_summary(d)
        if summary is not None:
            return Outcome(job.run, "done", None, wall, summary)
        err = "the run ended without a complete summary.json"
    try:  # only into the experiment's own runs/ (not through a symlink planted there meanwhile)
        subdir(runs_dir.parent, runs_dir.name)
        write_atomic(side_file(d, ERROR), err + "\n")
    except HermesError:
        pass  # the row says why in any case
    return Outcome(job.run, "failed", err, wall)
