"""Draw a run's partition pictures in several fresh processes at once.

:func:`hermes.viz.plot_run` checks the run directory and finds every picture's window, then hands the pictures
to :func:`draw_in_workers`: each worker is a new interpreter (``python -m hermes.viz.parallel``, never a fork
of the caller, which may be an MPI process) that reads the run directory itself and draws its share of the
phases with the windows it was given, so the pictures are those a single process draws. A worker prints one
line per picture, relayed as progress.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hermes.errors import HermesError

__all__ = ["draw_in_workers", "default_workers"]

log = logging.getLogger(__name__)

_PREFIX = "drawn "


#: fewer usable cores than this: draw in-process (a worker's start costs ~0.6 s of CPU, a picture of a CFD run
#: ~0.7 s; on a 2-core machine shared with other jobs, 2 workers drew refine-airfoil's pictures slower)
MIN_CORES = 3


def default_workers(pictures: int) -> int:
    """As many workers as the cores this process may use, at most one per picture; 1 (draw in-process) below
    :data:`MIN_CORES` cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return 1 if cores < MIN_CORES else max(1, min(cores, pictures))


def draw_in_workers(run_dir: Path, out_dir: Path, tasks: Sequence[tuple[int, tuple[float, ...] | None]], *,
                    show: Sequence[str], dpi: int, workers: int,
                    progress: Callable[[Path], None] | None = None) -> list[Path]:
    """Draw ``partition-XXX.png`` of every ``(phase, window)`` in ``tasks`` with ``workers`` processes.

    Returns the pictures in the order of ``tasks``; ``progress`` is called with each as it is drawn.

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
        procs.append(subprocess.Popen([sys.executable, "-m", "hermes.viz.parallel", json.dumps(job)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      stdin=subprocess.DEVNULL))
    failures = []
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


def _main(argv: list[str]) -> int:
    """The worker: draw the phases of the job given as JSON, one line per picture."""
    from hermes.viz import plot_run

    job = json.loads(argv[0])
    try:
        for phase, window in job["tasks"]:
            paths = plot_run(job["run"], phases=[phase], zoom=None if window is None else tuple(window),
                             show=job["show"], dpi=job["dpi"], out_dir=job["out"], timeline=False)
            print(f"{_PREFIX}{paths[0].name}", flush=True)
    except HermesError as err:
        print(f"hermes: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
