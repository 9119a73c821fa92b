"""A worker of :func:`hermes.viz.parallel.draw_in_workers`: ``python -m hermes.viz.draw_worker JOB``, a fresh
interpreter that draws the phases of the job (JSON: run, out, show, dpi, tasks of (phase, window)), one line per
picture. Apart from :mod:`hermes.viz.parallel` so that the package does not import itself through it."""

from __future__ import annotations

import sys

from hermes.errors import HermesError
from hermes.viz.parallel import _PREFIX, _unbind

__all__: list[str] = []


def _main(argv: list[str]) -> int:
    """The worker: draw the phases of the job given as JSON, one line per picture."""
    from hermes.loaders import parse_json
    from hermes.viz import plot_run

    _unbind()
    job = parse_json(argv[0], "the drawing job", error=HermesError)
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
