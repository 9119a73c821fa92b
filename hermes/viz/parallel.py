"""Draw a run's partition pictures in several fresh processes at once.

:func:`hermes.viz.plot_run` checks the run directory and finds every picture's window, then hands the pictures
to :func:`draw_in_workers`: each worker is a new interpreter (``python -m hermes.viz.parallel``, never a fork
of the caller, which may be an MPI process: :mod:`hermes.viz.draw_worker`) that reads the run directory itself and draws its share of the
phases with the windows it was given, so the pictures are those a single process draws. A worker prints one
line per picture, relayed as progress.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from hermes.errors import HermesError
from hermes.interpreter import child_env, python_command

__all__ = ["draw_in_workers", "default_workers", "idle_cores"]

log = logging.getLogger(__name__)

_PREFIX = "drawn "


#: fewer usable cores than this: draw in-process. A worker's start costs ~0.6 s of CPU, a picture of
#: refine-airfoil ~0.8 s: on an idle 2-core machine 2 workers drew its 7 pictures in 3.4 s instead of 6.2 s
#: (on the same machine busy with other jobs, load 4 to 6, in 9.7 s instead of 6.3 s)
MIN_CORES = 2


def default_workers(pictures: int) -> int:
    """One worker per core that is idle now, at most one per picture and per core; 1 (draw in-process) below
    :data:`MIN_CORES` cores or when no other core is idle.

    The machine's cores, not this process's affinity: mpiexec binds rank 0 to one core, and at the end of a run
    the other ranks wait idle; a worker widens its affinity again (:func:`_unbind`). Idle cores are read from
    ``/proc/stat`` over :data:`IDLE_PROBE` seconds (elsewhere every core is taken as idle): on a machine busy
    with other jobs, workers only compete with them and with each other."""
    cores = os.cpu_count() or 1
    if cores < MIN_CORES or pictures < 2:
        return 1
    idle = idle_cores()
    free = cores if idle is None else int(idle + 0.5)
    return max(1, min(cores, pictures, free))


#: how long :func:`idle_cores` watches the processors (seconds)
IDLE_PROBE = 0.2


def idle_cores(interval: float = IDLE_PROBE) -> float | None:
    """How many cores were idle (idle + iowait time) during ``interval`` seconds, from ``/proc/stat``; None
    where it cannot be read."""
    import time

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", "rb") as f:
                fields = [int(v) for v in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        return (fields[3] + fields[4], sum(fields)) if len(fields) >= 5 else None

    a = sample()
    time.sleep(interval)
    b = sample()
    if a is None or b is None or b[1] <= a[1]:
        return None
    return (os.cpu_count() or 1) * (b[0] - a[0]) / (b[1] - a[1])


def _unbind() -> None:
    """Let this worker run on every core the system allows it (a cgroup's cpuset still applies: the kernel
    intersects the mask with it), not only on the core its MPI parent was bound to."""
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except (AttributeError, OSError):  # pragma: no cover - not Linux, or not permitted: keep the binding
        pass


def draw_in_workers(run_dir: Path, out_dir: Path, tasks: Sequence[tuple[int, tuple[float, ...] | None]], *,
                    show: Sequence[str], dpi: int, workers: int,
                    progress: Callable[[Path], None] | None = None,
                    meanwhile: Callable[[], None] | None = None) -> list[Path]:
    """Draw ``partition-XXX.png`` of every ``(phase, window)`` in ``tasks`` with ``workers`` processes.

    Returns the pictures in the order of ``tasks``; ``progress`` is called with each as it is drawn, and
    ``meanwhile`` once the workers are started (this process draws something else in the meantime).

    Raises
    ------
    HermesError
        A worker failed: its last line of error output.
    """
    shares = [list(tasks[i::workers]) for i in range(workers)]
    procs = []
    for share in shares:
        if not share:
            continue
        job = {"run": str(run_dir), "out": str(out_dir), "show": list(show), "dpi": dpi,
               "tasks": [[p, None if w is None else list(w)] for p, w in share]}
        procs.append(subprocess.Popen(python_command("-m", "hermes.viz.draw_worker", json.dumps(job)),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      stdin=subprocess.DEVNULL, env=child_env()))
    failures = []
    try:
        if meanwhile is not None:
            meanwhile()
    except BaseException:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise
    for proc in procs:  # lines of one worker at a time: each picture is still reported when its worker is read
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(_PREFIX) and progress is not None:
                progress(out_dir / line[len(_PREFIX):].strip())
        err = proc.stderr.read() if proc.stderr is not None else ""
        if proc.wait() != 0:
            lines = [s for s in err.splitlines() if s.strip()]
            failures.append(lines[-1] if lines else f"exit status {proc.returncode}")
    if failures:
        raise HermesError(f"drawing the pictures failed: {failures[0]}")
    return [out_dir / f"partition-{p:03d}.png" for p, _ in tasks]
