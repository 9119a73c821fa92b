"""A run directory's pictures: :func:`plot_run` draws its partition pictures and per-phase plots (``hermes plot``).

:func:`plot_run` turns a run directory (``geometry.npz``, ``partitions.npz``, ``summary.json``; see
``docs/ARCHITECTURE.md``, "Run directory") into ``partition-000.png``, ``partition-001.png``, ... and
``phases.png``. matplotlib is imported only when a picture is drawn; ``import hermes.viz`` is cheap.
A phase whose mesh was refined carries its own geometry in ``geometry.npz`` (``coords_XXX``,
``points_XXX``, ``cell_ptr_XXX``, ``cell_nodes_XXX``, optionally ``xadj_XXX``/``adjncy_XXX``; the names
:mod:`hermes.viz.vtu` reads); it replaces the shared arrays for that phase's picture.

The run directory is read through :mod:`hermes.viz.rundir` (size limits, no pickle, every array checked) and
every picture is written through an exclusive temporary file (:func:`hermes.viz.partition_picture.save_figure`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from hermes.claims import MARKER, read_marker
from hermes.errors import HermesError
from hermes.metrics import cell_sends, cells_moved
from hermes.suggest import did_you_mean
from hermes.viz.partition_picture import ZOOM_3D, check_dpi, plain, plot_partition
from hermes.viz.rundir import (MAX_PHASES, Geometry, NpzArchive, check_owner, check_unit_array, phase_geometry,
                               read_capacities, read_summary, recorded_phases)
from hermes.viz.timeline import plot_comparison, plot_phases
from hermes.viz.zoom import Box, auto_zoom, cell_areas, check_zoom, parse_zoom, point_areas

__all__ = ["plot_run", "DEFAULT_SHOW", "SHOW_CHOICES"]

log = logging.getLogger(__name__)

#: the panels a partition picture can add (``hermes plot --show``) and those it adds by default
SHOW_CHOICES = ("weights", "loads")
DEFAULT_SHOW = SHOW_CHOICES


def plot_run(
    run_dir: str | os.PathLike[str],
    *,
    phases: Iterable[int] | None = None,
    zoom: Box | str | None = "auto",
    show: Iterable[str] = DEFAULT_SHOW,
    dpi: int = 150,
    out_dir: str | os.PathLike[str] | None = None,
    timeline: bool = True,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> list[Path]:
    """Draw the partition of every recorded phase and the per-phase plot of a run directory.

    Parameters
    ----------
    run_dir : path-like
        A run directory holding ``geometry.npz``, ``partitions.npz`` and ``summary.json`` (and ``phases.csv``,
        whose capacities give the fair loads).
    phases : iterable of int, optional
        Only draw the partitions after these phases (0 = initial distribution; integers up to
        ``MAX_PHASES``); default all.
    zoom : "auto", None or (x0, x1, y0, y1)
        ``"auto"`` (default): the window in which every rank is legible (:func:`hermes.viz.zoom.auto_zoom`,
        one window for all the run's pictures; the whole domain on a uniform mesh); None: the whole domain;
        a box of four finite numbers with x0 < x1, y0 < y1 (:func:`hermes.viz.zoom.check_zoom`; a ``--zoom``
        text is parsed). A 3-D mesh is drawn whole: a box is then a warning on stderr (:data:`ZOOM_3D`).
    show : iterable of str
        Extra panels: ``weights`` (the unit weights beside the partition, or the refinement levels when the
        run recorded them — a refining run always does; on a 3-D mesh its outer surface so coloured) and
        ``loads`` (per-rank bars of the load against the fair load under it; the loads sorted above 64 ranks).
    dpi : int
        Resolution of the PNGs, an integer in :data:`hermes.viz.partition_picture.DPI_RANGE` (10 to 1200).
    out_dir : path-like, optional
        Where the pictures go (default: the run directory).
    timeline : bool
        Also write ``phases.png`` (imbalance and time split per phase).
    progress : callable, optional
        Called with a line after every picture: ``drawn partition-003.png (4/7, 0.8 s)``.
    workers : int
        Draw the partition pictures in this many fresh processes at once (:mod:`hermes.viz.parallel`; the
        pictures are the same); 1 draws them in this process.

    Returns
    -------
    list of pathlib.Path
        The written files: ``partition-XXX.png`` in phase order, then ``phases.png``.

    Raises
    ------
    HermesError
        One line: an option out of range (``--dpi``, ``--zoom``, ``--phase``, ``--show``), ``run_dir`` or one of
        the three files missing, unreadable or damaged (:mod:`hermes.viz.rundir`: wrong types in the summary,
        arrays of the wrong dtype or shape, non-finite coordinates, rank ids outside ``[0, processors)``, CSR
        arrays that do not fit), or a requested phase not recorded. All inputs are read and checked before
        anything is written.

    Notes
    -----
    Every rank keeps its colour in all pictures (``nparts`` = the run's processor count). The title of
    ``partition-k`` (k ≥ 1) quotes the summary entry with ``phase == k``: imbalance after balancing,
    edge cut, cells moved and cell sends. The fair load of rank i in phase k is ``c_i(k) · Σ l`` with the capacities
    of ``phases.csv`` (phase 0, the initial distribution, was cut for the capacities of phase 1).
    """
    dpi = check_dpi(dpi)
    zoom = check_zoom(zoom)
    asked = None if phases is None else _check_phases(phases)
    run = Path(run_dir)
    if not run.is_dir():
        raise HermesError(f"run directory not found: {run}")
    if out_dir is None and read_marker(run) != "run":  # pictures go into a run directory only if hermes made it
        raise HermesError(f"{run}: not a run directory hermes made (no {MARKER} marker): nothing drawn (give "
                          f"out_dir to draw elsewhere)")
    panels = {s.strip() for s in show if s.strip()}
    unknown = sorted(panels - set(SHOW_CHOICES))
    if unknown:
        raise HermesError(f"--show {unknown[0]!r}{did_you_mean(unknown[0], SHOW_CHOICES)}: expected some of "
                          f"{', '.join(SHOW_CHOICES)}")
    summary = read_summary(run / "summary.json")
    procs = summary.get("processors")
    with NpzArchive(run / "geometry.npz") as geo, NpzArchive(run / "partitions.npz") as parts:
        recorded = recorded_phases(parts, "owner")
        if not recorded:
            raise parts.error("no owner_XXX arrays")
        wanted = recorded if asked is None else asked
        missing = [p for p in wanted if p not in recorded]
        if missing:
            raise HermesError(
                f"phase {missing[0]} not recorded in {run / 'partitions.npz'} (recorded: {_ranges(recorded)})"
            )
        shared: dict = {}
        plans = []
        for p in wanted:
            g = phase_geometry(geo, p, shared)
            owner = check_owner(parts, f"owner_{p:03d}", g.n, procs)
            plans.append((p, g, owner, check_unit_array(parts, f"weight_{p:03d}", g.n, "weight"),
                          check_unit_array(parts, f"level_{p:03d}", g.n, "level")))
    nparts = procs if procs is not None else max((int(o.max(initial=0)) + 1 for _, _, o, _, _ in plans), default=1)
    caps = read_capacities(run / "phases.csv", nparts) if "loads" in panels else {}
    entries = {e.get("phase"): e for e in summary.get("phases") or []}

    windows = _windows(zoom, plans, nparts)
    dest = Path(out_dir) if out_dir is not None else run
    written = []
    total, count, tick = len(plans) + bool(timeline), 0, time.perf_counter()

    def drawn(path: Path, timed: bool = True) -> None:
        nonlocal tick, count
        count += 1
        if progress is not None:
            now = time.perf_counter()
            progress(f"drawn {path.name} ({count}/{total}" + (f", {now - tick:.1f} s)" if timed else ")"))
            tick = now
    if workers > 1 and len(plans) > 1:
        from hermes.viz.parallel import draw_in_workers

        timed: list[Path] = []

        def meanwhile() -> None:  # phases.png in this process while the workers draw the partitions
            if timeline:
                timed.append(plot_phases(dest / "phases.png", summary, dpi=dpi))
                drawn(timed[0])

        written = draw_in_workers(run, dest, [(plan[0], window) for plan, window in zip(plans, windows)],
                                  show=sorted(panels), dpi=dpi, workers=min(int(workers), len(plans)),
                                  progress=lambda path: drawn(path, timed=False), meanwhile=meanwhile)
        log.info("wrote %d pictures in %s", len(written) + len(timed), dest)
        return written + timed
    for (p, g, owner, w, levels), window in zip(plans, windows):
        loads = fair = None
        if "loads" in panels and w is not None:
            loads = np.bincount(owner, weights=w, minlength=nparts)
            c = caps.get(p, caps.get(1))
            fair = c * loads.sum() if c is not None else None
        path = plot_partition(
            dest / f"partition-{p:03d}.png",
            g.coords,
            owner,
            points=g.points,
            cell_ptr=g.cell_ptr,
            cell_nodes=g.cell_nodes,
            xadj=g.xadj,
            adjncy=g.adjncy,
            weights=w,
            levels=levels,
            nparts=nparts,
            title=_partition_title(summary, p, entries.get(p)),
            show_weights="weights" in panels and w is not None,
            zoom=window,
            loads=loads,
            fair=fair,
            dpi=dpi,
            cell_types=g.cell_types,
        )
        written.append(path)
        drawn(path)
    if timeline:
        written.append(plot_phases(dest / "phases.png", summary, dpi=dpi))
        drawn(written[-1])
    log.info("wrote %d pictures in %s", len(written), dest)
    return written


def _check_phases(phases: Iterable[int]) -> list[int]:
    """``--phase``: integers (not booleans) in ``[0, MAX_PHASES]``, sorted without repeats."""
    try:
        values = list(phases)
    except TypeError:
        raise HermesError(f"--phase: expected phase numbers, got {type(phases).__name__}") from None
    for v in values:
        if not (isinstance(v, Integral) and not isinstance(v, (bool, np.bool_)) and 0 <= v <= MAX_PHASES):
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
            raise HermesError(f"--phase: must be phase numbers between 0 and {MAX_PHASES}, got {shown}")
    return sorted({int(v) for v in values})


def _windows(zoom: Box | str | None, plans: list, nparts: int) -> list[Box | None]:
    """The window of every picture: ``auto`` finds one for all phases that share the run's mesh (so the
    pictures of a run line up) and one per phase whose mesh was refined."""
    solid = [plan[1].cell_types is not None for plan in plans]  # a volume mesh is drawn whole, in 3-D
    if zoom != "auto":
        if zoom is not None and any(solid):
            log.warning(ZOOM_3D)  # once for the run, not once a picture
        return [None if s else zoom for s in solid]  # type: ignore[misc]
    out: list[Box | None] = [None] * len(plans)
    groups: dict[int, list[int]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault(id(plan[1]), []).append(i)
    for idx in groups.values():
        g: Geometry = plans[idx[0]][1]
        if solid[idx[0]]:
            continue
        # a graph without polygons: the area of a vertex from its spacing to its neighbours, so a graded cloud
        # is zoomed like a graded mesh
        areas = cell_areas(g.points, g.cell_ptr, g.cell_nodes) if g.has_cells else point_areas(g.coords)
        window = auto_zoom(g.coords, [plans[i][2] for i in idx], areas=areas, nparts=nparts)
        for i in idx:
            out[i] = window
    return out


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``'0-2, 5'``."""
    out, start = [], values[0]
    for a, b in zip(values, values[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)


def _partition_title(summary: dict[str, Any], phase: int, entry: dict[str, Any] | None) -> str:
    """The picture's title from the summary (checked by :func:`hermes.viz.rundir.check_summary`); names are
    shortened to one line of 60 characters."""
    head = (f"{plain(summary.get('scenario') or '?')} — {plain(summary.get('balancer') or '?')}, "
            f"{summary.get('processors') or '?'} ranks")
    if phase == 0:
        return f"{head}\ninitial distribution"
    text = f"{head}\nafter phase {phase}"
    if entry:
        facts = []
        if entry.get("imbalance_after") is not None:
            facts.append(f"imbalance {float(entry['imbalance_after']):.3f}")
        if entry.get("edge_cut") is not None:
            facts.append(f"edge cut {_count(entry['edge_cut'])}")
        moved, sends = cells_moved(entry), cell_sends(entry)  # a summary before these keys: their aliases
        if moved is not None:
            facts.append(f"moved {_count(moved)} cells" + (f" ({_count(sends)} sends)" if sends is not None else ""))
        elif sends is not None:
            facts.append(f"{_count(sends)} cell sends")
        if facts:
            text += ": " + ", ".join(facts)
    return text


def _count(v: float) -> str:
    """A count as recorded (``12``), a huge or fractional one in 6 digits."""
    return str(v) if isinstance(v, int) and abs(v) < 10**15 else f"{v:.6g}"
