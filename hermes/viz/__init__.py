"""VISUALISATION: partition pictures and per-phase plots of a run directory.

:func:`plot_run` turns a run directory (``geometry.npz``, ``partitions.npz``, ``summary.json``; see
``docs/ARCHITECTURE.md``, "Run directory") into ``partition-000.png``, ``partition-001.png``, ... and
``phases.png``. matplotlib is imported only when a picture is drawn; ``import hermes.viz`` is cheap.
A phase whose mesh was refined carries its own geometry in ``geometry.npz`` (``coords_XXX``,
``points_XXX``, ``cell_ptr_XXX``, ``cell_nodes_XXX``, optionally ``xadj_XXX``/``adjncy_XXX``; the names
:mod:`hermes.viz.vtu` reads); it replaces the shared arrays for that phase's picture.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from hermes.errors import HermesError
from hermes.viz.partition import plot_partition
from hermes.viz.timeline import plot_comparison, plot_phases
from hermes.viz.zoom import Box, auto_zoom, cell_areas, parse_zoom

__all__ = ["plot_run", "plot_partition", "plot_phases", "plot_comparison", "auto_zoom", "parse_zoom",
           "DEFAULT_SHOW", "SHOW_CHOICES"]

log = logging.getLogger(__name__)

_OWNER = re.compile(r"owner_(\d+)$")

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
) -> list[Path]:
    """Draw the partition of every recorded phase and the per-phase plot of a run directory.

    Parameters
    ----------
    run_dir : path-like
        A run directory holding ``geometry.npz``, ``partitions.npz`` and ``summary.json`` (and ``phases.csv``,
        whose capacities give the fair loads).
    phases : iterable of int, optional
        Only draw the partitions after these phases (0 = initial distribution); default all.
    zoom : "auto", None or (x0, x1, y0, y1)
        ``"auto"`` (default): the window in which every rank is legible (:func:`hermes.viz.zoom.auto_zoom`,
        one window for all the run's pictures; the whole domain on a uniform mesh); None: the whole domain.
    show : iterable of str
        Extra panels: ``weights`` (the unit weights beside the partition, or the refinement levels when the
        run recorded them) and ``loads`` (per-rank bars of the load against the fair load, under it).
    dpi : int
        Resolution of the PNGs.
    out_dir : path-like, optional
        Where the pictures go (default: the run directory).
    timeline : bool
        Also write ``phases.png`` (imbalance and time split per phase).

    Returns
    -------
    list of pathlib.Path
        The written files: ``partition-XXX.png`` in phase order, then ``phases.png``.

    Raises
    ------
    HermesError
        If ``run_dir`` or one of the three files is missing or unreadable, a requested phase was not
        recorded, or ``show`` names an unknown panel. All inputs are read and checked before anything is written.

    Notes
    -----
    Every rank keeps its colour in all pictures (``nparts`` = the run's processor count). The title of
    ``partition-k`` (k ≥ 1) quotes the summary entry with ``phase == k``: imbalance after balancing,
    edge cut and migrated cells. The fair load of rank i in phase k is ``c_i(k) · Σ l`` with the capacities
    of ``phases.csv`` (phase 0, the initial distribution, was cut for the capacities of phase 1).
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise HermesError(f"run directory not found: {run}")
    panels = {s.strip() for s in show if s.strip()}
    unknown = sorted(panels - set(SHOW_CHOICES))
    if unknown:
        raise HermesError(f"--show {unknown[0]!r}: expected some of {', '.join(SHOW_CHOICES)}")
    summary = _read_summary(run / "summary.json")
    geo = _read_npz(run / "geometry.npz", required=("coords", "xadj", "adjncy"))
    parts = _read_npz(run / "partitions.npz", required=())
    caps = _read_capacities(run / "phases.csv")

    recorded = sorted(int(m.group(1)) for k in parts if (m := _OWNER.match(k)))
    if not recorded:
        raise HermesError(f"cannot read {run / 'partitions.npz'}: no owner_XXX arrays")
    wanted = recorded if phases is None else sorted({int(p) for p in phases})
    missing = [p for p in wanted if p not in recorded]
    if missing:
        raise HermesError(
            f"phase {missing[0]} not recorded in {run / 'partitions.npz'} (recorded: {_ranges(recorded)})"
        )

    top = max(int(parts[f"owner_{p:03d}"].max(initial=-1)) for p in recorded) + 1
    try:
        procs = int(summary.get("processors") or 0)
    except (TypeError, ValueError):
        procs = 0
    nparts = max(procs, top)
    entries = {p.get("phase"): p for p in summary.get("phases") or [] if isinstance(p, dict)}

    plans = []
    for p in wanted:
        g = _phase_geometry(geo, p)
        n = g["coords"].shape[0]
        owner = parts[f"owner_{p:03d}"]
        if owner.shape != (n,):
            raise HermesError(
                f"cannot read {run / 'partitions.npz'}: owner_{p:03d} has {owner.size} entries for {n} units"
            )
        plans.append((p, g, owner))
    windows = _windows(zoom, plans, nparts)
    dest = Path(out_dir) if out_dir is not None else run
    written = []
    for (p, g, owner), window in zip(plans, windows):
        has_cells = all(g.get(k) is not None for k in ("points", "cell_ptr", "cell_nodes"))
        w = parts.get(f"weight_{p:03d}")
        loads = fair = None
        if "loads" in panels and w is not None and w.shape == owner.shape:
            loads = np.bincount(owner, weights=w, minlength=nparts)[:nparts]
            c = caps.get(p, caps.get(1))
            fair = c * loads.sum() if c is not None and c.size == nparts else None
        levels = parts.get(f"level_{p:03d}")
        path = plot_partition(
            dest / f"partition-{p:03d}.png",
            g["coords"],
            owner,
            points=g["points"] if has_cells else None,
            cell_ptr=g["cell_ptr"] if has_cells else None,
            cell_nodes=g["cell_nodes"] if has_cells else None,
            xadj=g.get("xadj"),
            adjncy=g.get("adjncy"),
            weights=w,
            levels=levels if levels is not None and levels.shape == owner.shape else None,
            nparts=nparts,
            title=_partition_title(summary, p, entries.get(p)),
            show_weights="weights" in panels and w is not None,
            zoom=window,
            loads=loads,
            fair=fair,
            dpi=dpi,
        )
        written.append(path)
    if timeline:
        written.append(plot_phases(dest / "phases.png", summary, dpi=dpi))
    log.info("wrote %d pictures in %s", len(written), dest)
    return written


def _windows(zoom: Box | str | None, plans: list, nparts: int) -> list[Box | None]:
    """The window of every picture: ``auto`` finds one for all phases that share the run's mesh (so the
    pictures of a run line up) and one per phase whose mesh was refined."""
    if zoom != "auto":
        return [zoom if zoom is None else tuple(float(v) for v in zoom)] * len(plans)  # type: ignore[misc]
    out: list[Box | None] = [None] * len(plans)
    groups: dict[int, list[int]] = {}
    for i, (_, g, _) in enumerate(plans):
        groups.setdefault(id(g["coords"]), []).append(i)
    for idx in groups.values():
        g = plans[idx[0]][1]
        has_cells = all(g.get(k) is not None for k in ("points", "cell_ptr", "cell_nodes"))
        areas = cell_areas(g["points"], g["cell_ptr"], g["cell_nodes"]) if has_cells else None
        window = auto_zoom(g["coords"], [plans[i][2] for i in idx], areas=areas, nparts=nparts)
        for i in idx:
            out[i] = window
    return out


def _read_capacities(path: Path) -> dict[int, np.ndarray]:
    """The capacities of every phase from ``phases.csv`` ({} when the file is absent or unreadable)."""
    import csv

    if not path.is_file():
        return {}
    per: dict[int, dict[int, float]] = {}
    try:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                per.setdefault(int(row["phase"]), {})[int(row["rank"])] = float(row["capacity"])
    except (OSError, KeyError, ValueError, TypeError):
        return {}
    return {k: np.array([v[r] for r in sorted(v)]) for k, v in per.items()}


# ----------------------------------------------------------------------------------------- helpers
_CELLS = ("coords", "points", "cell_ptr", "cell_nodes")


def _phase_geometry(geo: dict[str, np.ndarray], phase: int) -> dict[str, np.ndarray | None]:
    """The geometry of ``phase``: its own ``NAME_XXX`` arrays where recorded, else the shared ones.

    A phase with its own cells does not inherit the shared graph (``xadj``/``adjncy`` describe other units).
    """
    tag = f"_{phase:03d}"
    own = any(k + tag in geo for k in _CELLS)
    out = {k: geo.get(k + tag, geo.get(k)) for k in _CELLS}
    out.update({k: geo.get(k + tag, None if own else geo.get(k)) for k in ("xadj", "adjncy")})
    return out


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _read_summary(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise HermesError(f"missing {path.name} in run directory {path.parent}")
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise HermesError(f"cannot read {path}: {_one_line(err)}") from None
    if not isinstance(summary, dict):
        raise HermesError(f"cannot read {path}: expected a JSON object")
    return summary


def _read_npz(path: Path, required: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise HermesError(f"missing {path.name} in run directory {path.parent}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as err:  # zipfile.BadZipFile, ValueError, OSError, ...: all mean "unreadable"
        raise HermesError(f"cannot read {path}: {_one_line(err)}") from None
    absent = [k for k in required if k not in arrays]
    if absent:
        raise HermesError(f"cannot read {path}: no array '{absent[0]}'")
    return arrays


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``'0-2, 5'``."""
    out, start = [], values[0]
    for a, b in zip(values, values[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)


def _partition_title(summary: dict[str, Any], phase: int, entry: dict[str, Any] | None) -> str:
    head = f"{summary.get('scenario', '?')} — {summary.get('balancer', '?')}, {summary.get('processors', '?')} ranks"
    if phase == 0:
        return f"{head}\ninitial distribution"
    text = f"{head}\nafter phase {phase}"
    if entry:
        facts = []
        if entry.get("imbalance_after") is not None:
            facts.append(f"imbalance {float(entry['imbalance_after']):.3f}")
        if entry.get("edge_cut") is not None:
            facts.append(f"edge cut {entry['edge_cut']}")
        if entry.get("migrated_cells") is not None:
            facts.append(f"migrated {entry['migrated_cells']} cells")
        if facts:
            text += ": " + ", ".join(facts)
    return text
