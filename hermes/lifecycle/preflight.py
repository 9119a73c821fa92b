"""What can be checked before a run starts: files, counts, magnitudes and memory.

:func:`preflight` is what ``hermes run`` (and :func:`hermes.api.run`) checks serially before starting
``mpiexec``, so that bad input is one line and no MPI job is started for it: the capacity and schedule
files against the processor count, the mesh (read if it is cheap to read, :data:`READ_LIMIT`) against
the processor count, the magnitudes of the run with the real cell count
(:func:`hermes.scenario.check_magnitudes`) and the memory the run needs against what the machine has
(:func:`check_memory`), and that refinement can bisect the mesh (:func:`check_refinable`: 2-D triangles
and quadrilaterals). Under MPI, rank 0 runs :func:`check_size` and :func:`check_refinable` on the mesh it
reads (the driver's set-up), so a job started by hand with ``mpiexec`` gets the same verdicts.

Memory model (:func:`memory_needed`)
------------------------------------
``ranks × RANK_BYTES + cells × CELL_BYTES + cells × phases × PHASE_BYTES``, measured with peak resident
set sizes (``getrusage(RUSAGE_SELF).ru_maxrss`` of every rank at the end of ``hermes run --no-launch``
under ``mpiexec -n 4``, quickstart scenario with ``platform.capacities: homo`` on grids of 100, 160 000
and 10⁶ cells, 2 and 8 phases; numpy 2, Open MPI 5): a rank that has imported hermes holds 90 MB; the
four ranks together grew by 1.26 and 1.28 kB per cell (rank 0, which generates, partitions and scatters
the whole mesh, by 0.55–0.58 kB); 6 more phases added 3 bytes per cell and phase. The serial
run (one rank) measured 0.75 kB per cell. ``CELL_BYTES = 1300`` and ``PHASE_BYTES = 16`` (rank 0 keeps an
int32 owner and a float64 weight per cell and phase) are these figures rounded up. Refinement
(``adaptation.kind: refine``) multiplies the cells by an amount the scenario does not determine: the
estimate counts the initial cells only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hermes.bounds import MAX_TRACE_TASKS
from hermes.errors import MeshError, ScenarioError
from hermes.machine import memory_available, ranks_on_this_machine
from hermes.scenario import Scenario, check_magnitudes, check_processors
from hermes.sections import AdaptationSpec, MeshSpec

__all__ = [
    "READ_LIMIT",
    "check_memory",
    "check_refinable",
    "check_size",
    "memory_needed",
    "mesh_cells",
    "preflight",
]

RANK_BYTES = 90 * 2**20
#: a hosted processor's own state beyond its cells (hermes.runtime.hosting; measured in results/hosting.md)
PROCESSOR_BYTES = 2**20
CELL_BYTES = 1300
PHASE_BYTES = 16
#: mesh files up to this size are read before launching (a few seconds at most); larger ones are read by
#: rank 0 only, where the same checks run (:func:`check_size`)
READ_LIMIT = 64 * 2**20


def memory_needed(n_cells: int, ranks: int, phases: int, processors: int | None = None) -> float:
    """Bytes a run of ``n_cells`` cells on ``ranks`` MPI processes of this machine hosting ``processors``
    emulated processors (default: one per process) needs (module docstring): a process' own figure covers
    its first processor, each further one it hosts costs :data:`PROCESSOR_BYTES`."""
    hosted = 0 if processors is None else max(processors - ranks, 0)
    return ranks * RANK_BYTES + hosted * PROCESSOR_BYTES + n_cells * (CELL_BYTES + phases * PHASE_BYTES)


def _size(b: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if b < 1024 or unit == "PB":
            return f"{b:.3g} {unit}" if unit != "bytes" else f"{b:.0f} bytes"
        b /= 1024
    raise AssertionError


def _mesh_key(spec: MeshSpec) -> str:
    return f"mesh.grid: {spec.grid}" if spec.grid is not None else f"mesh.file: {spec.file}"


def check_memory(spec: MeshSpec, phases: int, n_cells: int, ranks: int, *, available: int | None = None,
                 processors: int | None = None) -> None:
    """Refuse a run of ``phases`` phases that needs more memory than this machine has (``ranks``: ranks on this
    machine); ``spec`` (the scenario's mesh section) names the mesh in the error line.

    Raises
    ------
    ScenarioError
        One line: what the run needs (and from what), what is available.
    """
    need = memory_needed(n_cells, ranks, phases, processors)
    avail = memory_available() if available is None else available
    if avail is not None and need > avail:
        hosted = "" if processors is None or processors <= ranks else \
            f" + {processors - ranks} more hosted processors × {_size(PROCESSOR_BYTES)}"
        raise ScenarioError(f"{_mesh_key(spec)} needs about {_size(need)} of memory ({n_cells} cells × "
                            f"{CELL_BYTES} bytes + {ranks} processes × {_size(RANK_BYTES)}{hosted}), but this "
                            f"machine has {_size(avail)} available")


def check_size(sc: Scenario, n_cells: int, p: int, *, ranks_here: int | None = None, capacities=None,
               schedule=None, weights: tuple[float, float] = (1.0, 1.0), processors_here: int | None = None) -> None:
    """The checks that need the mesh: cells ≥ processors, magnitudes, memory.

    ``capacities`` and ``schedule`` are the base capacities and the schedule's rows as read (None:
    homogeneous, no schedule); ``weights`` the smallest and largest of the mesh's own cell weights;
    ``ranks_here`` the ranks on this machine (default: as the launcher says,
    :func:`ranks_on_this_machine`).
    """
    if n_cells < p:
        raise MeshError(f"more processors ({p}) than cells ({n_cells}) in {_mesh_key(sc.mesh)}")
    spec = sc.output.trace_spec
    if spec is not None and spec.cells_per_block is None and n_cells > MAX_TRACE_TASKS:
        raise ScenarioError(f"output.lbdatafile: {n_cells} cells in {_mesh_key(sc.mesh)} are more tasks than a "
                            f"trace file should hold ({MAX_TRACE_TASKS}); give output.lbdatafile.cells_per_block")
    check_magnitudes(sc, n_cells=n_cells, p=p, capacities=capacities, schedule=schedule, weights=weights)
    here = ranks_on_this_machine(p) if ranks_here is None else ranks_here
    check_memory(sc.mesh, sc.adaptation.phases, n_cells, here,
                 processors=p if processors_here is None else processors_here)


def check_refinable(adaptation: AdaptationSpec, mesh, where: str) -> None:
    """Refuse ``adaptation.kind: refine`` (the scenario's ``adaptation`` section) on a mesh newest-vertex
    bisection cannot refine: 3-D cells (tetrahedra, hexahedra, wedges, pyramids), a surface whose points' z is
    not constant, a graph without cell polygons, polygons other than triangles and quadrilaterals. Nothing for
    other adaptations.

    Raises
    ------
    MeshError
        One line naming ``where`` and what the mesh has.
    """
    if adaptation.kind != "refine":
        return
    import numpy as np

    head = f"adaptation.kind: refine bisects 2-D triangles and quadrilaterals; {where}"
    if mesh.meta.get("dim") == 3:
        types = ", ".join(sorted(set(mesh.meta.get("cell_types", [])))) or "3-D cells"
        raise MeshError(f"{head} has 3-D cells ({types}): 3-D refinement is not implemented (use "
                        f"adaptation.kind: weights)")
    if not mesh.has_polygons or mesh.cell_nodes is None:
        raise MeshError(f"{head} is a graph without cell polygons (use a meshio file such as .vtu or .msh, "
                        f"or a grid)")
    pts = np.asarray(mesh.points)
    if pts.ndim == 2 and pts.shape[1] > 2 and np.ptp(pts[:, 2]) > 0:
        raise MeshError(f"{head} is a surface in 3-D (z from {pts[:, 2].min():.6g} to {pts[:, 2].max():.6g}): "
                        f"refinement needs a planar mesh")
    size = np.diff(mesh.cell_ptr)
    if np.any((size != 3) & (size != 4)):
        raise MeshError(f"{head} has cells with {int(size[(size != 3) & (size != 4)][0])} corners")


def mesh_cells(spec: MeshSpec, adaptation: AdaptationSpec,
               resolve: Callable[[str], Path]) -> tuple[int, tuple[float, float]] | None:
    """The cell count and (smallest, largest) cell weight of the mesh of the scenario's ``mesh`` section if they
    are cheap to know: a grid's, or a mesh file's (``resolve``: the scenario's) up to :data:`READ_LIMIT` (read
    and validated with :func:`hermes.data.io.read_mesh`, and checked against the ``adaptation`` section,
    :func:`check_refinable`: a bad file is found here); else None."""
    if spec.grid_cells is not None:
        return spec.grid_cells, (1.0, 1.0)
    path = resolve(spec.file)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise MeshError(f"mesh.file: cannot read {path}: {err.strerror or err}") from None
    if size > READ_LIMIT:
        return None
    from hermes.data.formats import select_constraint
    from hermes.data.io import read_mesh

    mesh = select_constraint(read_mesh(path, units=spec.units), spec.constraint, f"mesh.file: {path}")
    check_refinable(adaptation, mesh, f"mesh.file {path}")
    return mesh.n_cells, (float(mesh.weights.min()), float(mesh.weights.max()))


def preflight(sc: Scenario, p: int, *, processes: int | None = None) -> None:
    """Everything about a run on ``p`` processors that can be checked serially before starting MPI.

    Raises
    ------
    HermesError
        One line (ScenarioError, MeshError): the processor count against the scenario, the capacity and
        schedule files, the mesh, the magnitudes with the real cell count, the memory.
    """
    from hermes.extraload import CapacitySchedule

    check_processors(sc, p)  # capacities, links, schedule and extra load against p
    sched = CapacitySchedule.from_platform(sc.platform, sc.resolve, p)
    known = mesh_cells(sc.mesh, sc.adaptation, sc.resolve)
    if known is not None:
        caps = None if sc.platform.capacities == "homo" else sched.base.tolist()
        check_size(sc, known[0], p, capacities=caps, schedule=None if sched.table is None else sched.table.tolist(),
                   weights=known[1], ranks_here=processes)
