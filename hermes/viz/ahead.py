"""Pictures drawn while the phases run: each phase's partition picture of a refined run, as soon as the phase is
recorded, by one fresh interpreter at low priority on what the run leaves of the cores.

A refined run's phases each have their own mesh, so each picture's window depends on that phase alone
(:func:`hermes.viz._windows`) and the picture can be drawn before the run ends; a run on a fixed mesh shares one
window among all its phases and draws at the end (:meth:`hermes.outputs.RunOutputs.draw`). Rank 0 hands over a
phase by writing a small run directory of its own, ``RUN/drawing/phase-NNN/`` (NNN: the phase number in 3 digits;
the geometry and per-cell arrays of that phase, the records so far), and sending the phase number to the worker
(``python -m hermes.viz.ahead RUN``, never a fork of the MPI rank), which draws ``RUN/partition-NNN.png``
with :func:`hermes.viz.plot_run` — the same picture a drawing at the end makes, bit for bit — and removes the
phase's directory. The worker runs at nice 10,
so on a machine whose cores the run keeps busy it takes only what is idle. A worker that fails or is gone is one
warning; the pictures it did not draw are drawn at the end.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hermes.interpreter import child_env, python_command

__all__ = ["DrawAhead"]

log = logging.getLogger(__name__)

DIR = "drawing"
#: the worker's priority (os.nice increment): it draws with the cycles the run leaves
NICE = 10


class DrawAhead:
    """Rank 0's side: hand each recorded phase to the worker; at the end, which phases it drew.

    Parameters
    ----------
    out : Path
        The run directory (hermes' own, held by this run).
    base : dict of str to ndarray
        The arrays of ``geometry.npz`` shared by every phase (``coords``, ``xadj``, ``adjncy``, the polygons).
    """

    def __init__(self, out: Path, base: dict[str, np.ndarray]):
        self.out = Path(out)
        self.base = base
        self.proc: subprocess.Popen | None = None
        self.sent: list[int] = []
        self.broken = False
        try:  # started now, so that it imports matplotlib while the first phase runs
            self.proc = subprocess.Popen(python_command("-m", "hermes.viz.ahead", str(self.out)),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=child_env())
        except OSError as err:
            self.broken = True
            log.warning("pictures are drawn at the end: the drawing worker did not start (%s)", err)

    def submit(self, phases: list[int], geometry: dict[str, np.ndarray], partitions: dict[str, np.ndarray],
               summary: dict[str, Any], rows: list[dict], columns: list[str]) -> None:
        """Hand ``phases`` (recorded: their arrays in ``geometry``/``partitions``, their records in ``summary``
        and ``rows``) to the worker. Never raises: a failure is one warning and the end draws them."""
        if self.broken:
            return
        from hermes.claims import subdir
        from hermes.files import write_csv, write_json

        try:
            for k in phases:
                tag = f"_{k:03d}"
                d = subdir(self.out, DIR, f"phase-{k:03d}")
                own_geo = {name: v for name, v in geometry.items() if name.endswith(tag)}
                own_parts = {name: v for name, v in partitions.items() if name.endswith(tag)}
                # a phase with cells of its own reads only them (hermes.viz.rundir.phase_geometry): the shared
                # arrays go with the phases that have none (the initial partition)
                _write_plain_npz(d / "geometry.npz", own_geo or self.base)
                _write_plain_npz(d / "partitions.npz", own_parts)
                write_csv(d / "phases.csv", rows, columns)
                write_json(d / "summary.json", summary)
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write("".join(f"{k}\n" for k in phases))
            self.proc.stdin.flush()
            self.sent.extend(phases)
        except Exception as err:  # noqa: BLE001 - rank 0 alone: raising here would leave the other ranks waiting
            self.broken = True
            self.close()  # nothing of the hand-over stays (a full disk: the records come first)
            log.warning("pictures are drawn at the end: the drawing worker failed (%s)", err)

    def take_over(self, progress: Callable[[str], None] | None = None) -> list[int]:
        """Draw here, from the last one back, the phases the worker has not started (it claims a phase by
        renaming its directory, so does this: each picture is drawn once); stop at the first it has claimed,
        it draws every phase before that. The phases drawn here; a picture that cannot be drawn stays for the
        end."""
        from hermes.errors import HermesError
        from hermes.viz import plot_run

        taken: list[int] = []
        if self.broken:
            return taken
        for k in reversed(self.sent):
            mine = self.out / DIR / f"here-{k:03d}"
            try:
                os.rename(self.out / DIR / f"phase-{k:03d}", mine)
            except OSError:
                break
            try:
                plot_run(mine, phases=[k], out_dir=self.out, timeline=False, progress=progress)
            except (HermesError, OSError) as err:
                log.warning("partition-%03d.png: %s; drawn again at the end", k, err)
                continue
            shutil.rmtree(mine, ignore_errors=True)
            taken.append(k)
        return taken

    def finish(self) -> list[int]:
        """Wait for the worker; the phases whose picture it drew (the rest are the end's)."""
        drawn: list[int] = []
        left = 0
        if self.proc is not None:
            try:
                out, err = self.proc.communicate()
            except OSError as e:
                out, err = "", str(e)
            for line in out.splitlines():
                if line.startswith("drawn "):
                    drawn.append(int(line.split()[1]))
                elif line.startswith("taken "):
                    left += 1
            if self.proc.returncode != 0 or len(drawn) + left < len(self.sent):
                last = (err or "").strip().splitlines()[-1:] or ["no reason given"]
                log.warning("the drawing worker drew %d of %d pictures (%s); the end draws the rest", len(drawn),
                            len(self.sent), last[0])
        self.close()
        return drawn

    def close(self) -> None:
        """End the worker if it still runs and remove the hand-over directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.out / DIR, ignore_errors=True)


def _write_plain_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed ``.npz`` written atomically: the hand-over is read once, a few ms later (compressing a
    phase's geometry cost rank 0 ~0.05 s a phase)."""
    import io

    from hermes.files import write_atomic

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())


def _main(argv: list[str]) -> int:
    """The worker: for each phase number on stdin, draw ``RUN/partition-NNN.png`` from ``RUN/drawing/phase-NNN``
    and print ``drawn K``; a picture it cannot draw is a line on stderr, and it goes on with the next."""
    from hermes.errors import HermesError
    from hermes.viz import plot_run
    from hermes.viz.parallel import _unbind

    out = Path(argv[0])
    try:
        os.nice(NICE)
    except OSError:
        pass
    _unbind()
    for line in sys.stdin:
        k = int(line)
        src = out / DIR / f"worker-{k:03d}"
        try:  # claimed: the run's process may take over the phases not yet started (DrawAhead.take_over)
            os.rename(out / DIR / f"phase-{k:03d}", src)
        except OSError:
            print(f"taken {k}", flush=True)
            continue
        try:
            plot_run(src, phases=[k], out_dir=out, timeline=False)
        except (HermesError, OSError) as err:
            print(f"phase {k}: {err}", file=sys.stderr, flush=True)
            continue
        shutil.rmtree(src, ignore_errors=True)
        print(f"drawn {k}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
