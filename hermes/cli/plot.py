"""``hermes plot``: (re)draw the pictures of a run directory (:func:`hermes.viz.plot_run`)."""

from __future__ import annotations

import sys
from pathlib import Path

from hermes.cli.common import error

__all__ = ["cmd_plot"]


def cmd_plot(args) -> int:
    import contextlib

    from hermes.errors import HermesError
    from hermes.claims import DirLock, MARKER, claim_dir, read_marker, subdir
    from hermes.viz import parse_zoom, plot_run

    try:
        phases = None
        if args.phases is not None:
            try:
                phases = [int(k) for item in args.phases for k in item.split(",") if k.strip()]
            except ValueError:
                raise HermesError(f"--phase {','.join(args.phases)!r}: expected phase numbers") from None
        show = [] if args.show.strip().lower() in ("none", "") else args.show.split(",")
        run_dir = Path(args.run_dir)
        if not run_dir.is_dir():
            raise HermesError(f"run directory not found: {run_dir}")
        ours = read_marker(run_dir) == "run"
        if not ours and args.out is None:  # hermes writes pictures only into a run directory it made
            raise HermesError(f"{run_dir}: not a run directory hermes made (no {MARKER} marker): nothing drawn "
                              "(give --out DIR to draw elsewhere)")
        zoom = parse_zoom(args.zoom)
        # progress on stderr (stdout lists the pictures); one worker per idle core, as a run draws its own
        from hermes.viz.parallel import default_workers

        from hermes.progress import Progress

        shown = held_progress = Progress(stream=sys.stderr)  # stdout lists the pictures

        def drawn(line: str) -> None:  # "drawn partition-003.png (3/9, 1.2 s)": the next picture's status
            shown(line)
            done, _, total = line.partition("(")[2].split(",")[0].split(")")[0].partition("/")
            if done.isdigit() and total.isdigit() and int(done) < int(total):
                shown.status(f"drawing picture {int(done) + 1} of {total}")

        drawing = {"progress": drawn, "workers": default_workers(len(phases) if phases is not None else 8)}
        out = Path(args.out) if args.out is not None else None
        if out is not None and ours and out.resolve() == (run_dir / "plots").resolve():
            out = None  # the run's own plots directory: part of the run, not a hermes directory of its own
        with contextlib.ExitStack() as held:
            held.enter_context(held_progress)  # the step repeated on stderr while a picture is drawn
            held_progress.status("drawing the first picture")
            if out is not None:  # like any directory hermes writes: new, empty, or hermes' own plots directory
                lock = claim_dir(out, "--out", kind="plots")
                held.callback(lock.release, remove_if_unused=True)
            if ours:
                held.enter_context(DirLock.acquire(run_dir, "plot"))  # not while a run writes into it
            dest = out if out is not None else subdir(run_dir, "plots")
            dest.mkdir(parents=True, exist_ok=True)
            paths = plot_run(run_dir, phases=phases, zoom=zoom, show=show, dpi=args.dpi, out_dir=dest, **drawing)
    except HermesError as err:
        return error(str(err))
    for p in paths:
        print(p)
    return 0
