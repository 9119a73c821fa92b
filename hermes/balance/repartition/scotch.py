"""Scotch adaptive repartitioning: the graph is remapped starting from the current distribution.

Where the ``metis`` balancer partitions from scratch and only relabels the parts afterwards
(:mod:`hermes.balance.repartition.metis`), Scotch's remapping (``SCOTCH_graphRemap``; ``SCOTCH_graphRepart``
is its special case for a homogeneous target) knows the old partition while it partitions: a vertex
placed away from its old part costs ``migration_cost`` times a cut edge, so the multilevel
refinement trades edge cut against migrated vertices. The result keeps most cells home. Measured
on a 100×100 grid in 8 parts after a disc of cells became 4× heavier (10 seeds, 3 % tolerance):
Scotch moved 1,190–2,330 cells (homogeneous) and 860–1,820 (capacities ∝ r mod 4 + 1) where METIS
scratch-remap moved 3,830–4,910 and 5,660–7,680 (5 seeds).

Heterogeneous targets use Scotch's *weighted complete graph* architecture (``SCOTCH_archCmpltw``):
part ``r`` receives a share of the vertex weight proportional to the capacity of rank ``r``
(``targets: fair``), or an equal share (``targets: equal``, ``SCOTCH_archCmplt``), as for the
``metis`` balancer. Like that balancer this one is centralised: the graph is gathered on rank 0,
remapped there and every rank receives its cells' destinations; the gather and scatter are charged
to the balancing time under the virtual clock.

The binding is ``pyscotch`` (Scotch 7.0.13 bundled in a binary wheel); hermes calls Scotch's C API
(``SCOTCH_graphBuild``, ``SCOTCH_archCmpltw``, ``SCOTCH_stratGraphMapBuild``, ``SCOTCH_graphRemap``)
through its ctypes bindings, inside a Scotch *context* with the deterministic and fixed-seed options
set, so a remapping is reproducible for a given seed.

The effect of ``migration_cost`` is small and not monotone above 0.1 on that test (moves vary
more with the seed); 0 makes migration free, and Scotch then does not even keep the labels
(9,100 of 10,000 cells moved).

References
----------
F. Pellegrini, *Scotch and libScotch 7.0 User's Guide*, Inria Bordeaux Sud-Ouest:
``SCOTCH_graphRemap``, ``SCOTCH_archCmpltw``, ``SCOTCH_stratGraphMapBuild``, contexts.
"""

from __future__ import annotations

import contextlib
import io
import math
from ctypes import POINTER, byref, c_double
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BeforeValidator, Field, model_validator

from hermes.balance.central import charge_central, scotch_units
from hermes.balance.interface import BalanceContext, Decision, Params, integer_type, number_type
from hermes.balance.registry import register
from hermes.balance.repartition.metis import Targets, gather_graph, scatter_destinations
from hermes.data.partition import metis_vertex_weights
from hermes.errors import BalancerError, GraphError

__all__ = ["REQUIREMENT", "scotch_library", "scotch_remap", "scotch_repartition", "ScotchParams"]

#: the requirement line of the binding (pyproject.toml); 7.0.6 and later need Python ≥ 3.12
REQUIREMENT = "pyscotch==7.0.5"
#: upper bound of ``migration_cost``: Scotch stores it as an integer number of hundredths
MAX_MIGRATION_COST = 1.0e4
#: Scotch context options (scotch.h): deterministic run, fixed random seed
_OPTION_DETERMINISTIC = 0
_OPTION_FIXED_SEED = 1
#: SCOTCH_STRATDEFAULT
_STRAT_DEFAULT = 0x0

_LIB: Any = None


def scotch_library():
    """Scotch's C API through pyscotch's ctypes bindings, loaded once.

    pyscotch prints two lines (library path, structure sizes) when it loads Scotch; they are
    swallowed here.

    Raises
    ------
    BalancerError
        If pyscotch is not installed or Scotch cannot be loaded (one line saying what to install).
    """
    global _LIB
    if _LIB is None:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                from pyscotch import libscotch
        except Exception as err:  # ImportError, or OSError from a broken shared library
            raise BalancerError(f"balancer 'scotch' needs the Scotch binding ({REQUIREMENT}): "
                                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
        _LIB = libscotch
    return _LIB


def _check_migration_cost(value) -> float:
    """``value`` as Scotch's ``emraval``; ValueError (a one-line reason) if Scotch cannot take it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or v > MAX_MIGRATION_COST or 0 < v < 0.01:
        raise ValueError(f"must be 0 or a number in [0.01, {MAX_MIGRATION_COST:g}] (Scotch keeps hundredths), "
                         f"got {value!r}")
    return v


def scotch_remap(xadj: ArrayLike, adjncy: ArrayLike, weights: ArrayLike | None, old: ArrayLike, nparts: int,
                 params: ScotchParams | None = None, *, targets: ArrayLike | None = None,
                 seed: int = 0) -> NDArray[np.int64]:
    """Remap a partitioned graph with Scotch, starting from the partition ``old``.

    Parameters
    ----------
    xadj, adjncy : array_like of int
        Symmetric CSR adjacency without self loops.
    weights : array_like of float or None
        Positive work per vertex (None: unit weights), made integer by
        :func:`~hermes.data.partition.metis_vertex_weights`.
    old : array_like of int, shape (n,)
        Current part of every vertex, in ``0..nparts-1``.
    nparts : int
    params : ScotchParams, optional
        ``migration_cost``: Scotch's ``emraval``, the cost of migrating one vertex relative to cutting one
        edge (0 makes migration free: a partition from scratch, not even relabelled; Scotch rounds it to
        hundredths). ``ufactor``: the allowed imbalance ``max_r l_r / l̄_r − 1`` in thousandths (30 = 3 %),
        passed to Scotch as its balance ratio scaled for the smallest target (see Notes). ``targets``
        (``fair`` or ``equal``) is the caller's: it chooses the ``targets`` array below. Default
        ``ScotchParams()``; checked again here.
    targets : array_like of float, optional
        Positive fraction of the total weight wanted in each part (the capacities); None means
        equal parts. Made integer like the weights (their ratios are kept to 0.1 %).
    seed : int
        Seed of Scotch's random generator (the run is deterministic for a given seed).

    Returns
    -------
    ndarray of int64, shape (n,)
        The new part of every vertex.

    Raises
    ------
    GraphError
        Malformed graph, weights, old partition or targets.
    BalancerError
        Bad ``migration_cost`` or ``ufactor``, no binding, or a Scotch failure (one line).

    Notes
    -----
    ``SCOTCH_graphRemap(graph, arch, old, emraval, vmlotab=NULL, strat, new)`` with ``arch`` the
    weighted complete graph of ``targets`` (``SCOTCH_archCmpltw``; ``SCOTCH_archCmplt`` for equal
    parts, which makes it ``SCOTCH_graphRepart``) and ``strat`` built by
    ``SCOTCH_stratGraphMapBuild(SCOTCH_STRATDEFAULT, nparts, balrat)``. Scotch bounds the deviation
    of every part from its target by ``balrat`` times the *average* part weight (measured: targets
    1:5:1:1, balrat 0.05, 600 cells → parts 74, 368, 80, 78, i.e. 6.7 % over on a small part), so
    hermes passes ``balrat = imbalance · nparts · min_r t_r`` (t normalised, ``imbalance = ufactor / 1000``):
    then the relative imbalance of the smallest part, hence of every part, stays within ``imbalance``. Scotch
    minimises ``cut + emraval · (number of migrated vertices)`` under the balance constraint (vertex
    migration costs ``vmlotab`` are all 1: a cell costs the same to move whatever its work).
    The graph is bound to a Scotch context with the deterministic and fixed-seed options.
    """
    prm = ScotchParams() if params is None else params
    graph = _remap_graph(xadj, adjncy, weights, old, nparts, targets)
    try:
        emrat = _check_migration_cost(prm.migration_cost)
    except ValueError as err:
        raise BalancerError(f"migration_cost: {err}") from None
    imbalance = prm.ufactor / 1000.0
    if isinstance(imbalance, bool) or not (isinstance(imbalance, (int, float)) and 0 < imbalance < 1):
        raise BalancerError(f"Scotch imbalance must be in (0, 1), got {imbalance!r}")
    balrat = float(imbalance) * graph.shrink
    if graph.nparts == 1:
        return np.zeros(graph.old.size, dtype=np.int64)
    new = _graph_remap(graph, emrat, balrat, seed)
    if new.min() < 0 or new.max() >= graph.nparts:  # cannot happen with a valid strategy; never pass it on
        raise BalancerError("Scotch returned a part number out of range")
    return new


@dataclass(frozen=True)
class _RemapGraph:
    """The checked input of :func:`scotch_remap`: CSR adjacency, positive vertex weights, the old partition, the
    number of parts, the integer target weights (None: equal parts) and ``min_r t_r · nparts`` (1 for equal
    parts), by which the balance ratio shrinks."""

    xadj: NDArray[np.int64]
    adjncy: NDArray[np.int64]
    weights: NDArray[np.float64]
    old: NDArray[np.integer]
    nparts: int
    target_weights: NDArray[np.int64] | None
    shrink: float


def _remap_graph(xadj, adjncy, weights, old, nparts, targets) -> _RemapGraph:
    """:func:`scotch_remap`'s arguments checked (GraphError, one line, on the first problem found)."""
    xadj = np.ascontiguousarray(xadj, dtype=np.int64)
    adjncy = np.ascontiguousarray(adjncy, dtype=np.int64)
    n = xadj.size - 1
    if n < 1 or xadj[0] != 0 or xadj[-1] != adjncy.size or np.any(np.diff(xadj) < 0):
        raise GraphError("malformed CSR adjacency (xadj, adjncy) for Scotch")
    if adjncy.size and (adjncy.min() < 0 or adjncy.max() >= n):
        raise GraphError(f"neighbour index out of range 0..{n - 1} in the graph for Scotch")
    if isinstance(nparts, bool) or not isinstance(nparts, (int, np.integer)) or nparts < 1:
        raise GraphError(f"number of parts must be a positive integer, got {nparts!r}")
    nparts = int(nparts)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise GraphError(f"vertex weights must be {n} positive finite numbers")
    old = np.asarray(old)
    if old.shape != (n,) or not np.issubdtype(old.dtype, np.integer) or old.min() < 0 or old.max() >= nparts:
        raise GraphError(f"old partition must be {n} integers in 0..{nparts - 1}")
    tw, shrink = None, 1.0
    if targets is not None:
        t = np.asarray(targets, dtype=np.float64)
        if t.shape != (nparts,) or not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise GraphError(f"target fractions must be {nparts} positive finite numbers")
        tw = metis_vertex_weights(t)
        if np.all(tw == tw[0]):
            tw = None
        else:
            shrink = float(nparts * t.min() / t.sum())  # smallest target / average target
    return _RemapGraph(xadj, adjncy, w, old, nparts, tw, shrink)


def _graph_remap(graph: _RemapGraph, emrat: float, balrat: float, seed: int) -> NDArray[np.int64]:
    """``SCOTCH_graphRemap`` of ``graph`` in a deterministic, fixed-seed, single-thread Scotch context (the Notes
    of :func:`scotch_remap`); the new part of every vertex."""
    lib = scotch_library()
    dt = lib.get_scotch_dtype()
    num, ptr = lib.SCOTCH_Num, POINTER(lib.SCOTCH_Num)
    n, nparts = graph.old.size, graph.nparts
    # arrays stay referenced until the end of the function: Scotch keeps pointers into them
    verttab = np.ascontiguousarray(graph.xadj, dtype=dt)
    edgetab = np.ascontiguousarray(graph.adjncy, dtype=dt)
    velotab = np.ascontiguousarray(metis_vertex_weights(graph.weights), dtype=dt)
    parotab = np.ascontiguousarray(graph.old, dtype=dt).copy()
    parttab = np.zeros(n, dtype=dt)
    archtab = None if graph.target_weights is None else np.ascontiguousarray(graph.target_weights, dtype=dt)

    def c(a):
        return a.ctypes.data_as(ptr)

    def ok(ret, what):
        if ret != 0:
            msg = str(lib.scotch_error(what, ret)).splitlines()
            raise BalancerError(f"Scotch failed: {' '.join(s.strip() for s in msg)}")

    with contextlib.ExitStack() as stack:
        graph, bound = lib.SCOTCH_Graph(), lib.SCOTCH_Graph()
        ctx, arch, strat = lib.SCOTCH_Context(), lib.SCOTCH_Arch(), lib.SCOTCH_Strat()
        ok(lib.SCOTCH_graphInit(byref(graph)), "SCOTCH_graphInit")
        stack.callback(lib.SCOTCH_graphExit, byref(graph))
        ok(lib.SCOTCH_graphBuild(byref(graph), num(0), num(n), c(verttab), None, c(velotab), None,
                                 num(edgetab.size), c(edgetab), None), "SCOTCH_graphBuild")
        ok(lib.SCOTCH_contextInit(byref(ctx)), "SCOTCH_contextInit")
        stack.callback(lib.SCOTCH_contextExit, byref(ctx))
        ok(lib.SCOTCH_contextOptionSetNum(byref(ctx), _OPTION_DETERMINISTIC, num(1)), "SCOTCH_contextOptionSetNum")
        ok(lib.SCOTCH_contextOptionSetNum(byref(ctx), _OPTION_FIXED_SEED, num(1)), "SCOTCH_contextOptionSetNum")
        lib.SCOTCH_contextRandomSeed(byref(ctx), num(int(seed) % 2**31))
        # one thread: with several, Scotch's results differ between identical calls (measured: 2 of 12)
        ok(lib.SCOTCH_contextThreadSpawn(byref(ctx), num(1), None), "SCOTCH_contextThreadSpawn")
        ok(lib.SCOTCH_graphInit(byref(bound)), "SCOTCH_graphInit")
        stack.callback(lib.SCOTCH_graphExit, byref(bound))  # runs before the context exits
        ok(lib.SCOTCH_contextBindGraph(byref(ctx), byref(graph), byref(bound)), "SCOTCH_contextBindGraph")
        ok(lib.SCOTCH_archInit(byref(arch)), "SCOTCH_archInit")
        stack.callback(lib.SCOTCH_archExit, byref(arch))
        if archtab is None:
            ok(lib.SCOTCH_archCmplt(byref(arch), num(nparts)), "SCOTCH_archCmplt")
        else:
            ok(lib.SCOTCH_archCmpltw(byref(arch), num(nparts), c(archtab)), "SCOTCH_archCmpltw")
        ok(lib.SCOTCH_stratInit(byref(strat)), "SCOTCH_stratInit")
        stack.callback(lib.SCOTCH_stratExit, byref(strat))
        ok(lib.SCOTCH_stratGraphMapBuild(byref(strat), num(_STRAT_DEFAULT), num(nparts), c_double(balrat)),
           "SCOTCH_stratGraphMapBuild")
        ok(lib.SCOTCH_graphRemap(byref(bound), byref(arch), c(parotab), c_double(emrat), None, byref(strat),
                                 c(parttab)), "SCOTCH_graphRemap")
    return parttab.astype(np.int64)


#: Scotch's emraval: 0 or a number in [0.01, MAX_MIGRATION_COST] (the validator's message says so)
MigrationCost = Annotated[number_type(ge=0, le=MAX_MIGRATION_COST), BeforeValidator(_check_migration_cost)]


# -- the balancer (collective) ---------------------------------------------------------------------
class ScotchParams(Params):
    """Parameters of ``scotch``."""

    targets: Targets = Field("fair", description="part sizes: the measured capacities (fair) or equal")
    migration_cost: MigrationCost = Field(
        1.0, description="Scotch's emraval: the cost of moving a cell against an edge cut (0 or 0.01 … "
        f"{MAX_MIGRATION_COST:g})")
    ufactor: integer_type(ge=1, le=999) = Field(30, description="allowed imbalance (1/1000; Scotch takes below 1)")

    @model_validator(mode="after")
    def _binding(self):
        scotch_library()  # the binding must import on every rank before any collective (BalancerError)
        return self


# -- the balancer (collective) ---------------------------------------------------------------------
@register("scotch", params=ScotchParams,
          doc="Scotch adaptive repartitioning (SCOTCH_graphRemap from the current distribution; targets fair | "
              "equal, migration_cost = Scotch's emraval)")
def scotch_repartition(ctx: BalanceContext) -> Decision:
    """Remap the distributed graph with Scotch on rank 0 (collective): the ``scotch`` balancer.

    Parameters (``ctx.params``): ``targets`` (``fair``: part sizes ∝ the measured capacities;
    ``equal``), ``migration_cost`` (Scotch's ``emraval``) and ``ufactor`` (allowed imbalance in
    tenths of a percent, as for ``metis``; Scotch's balance ratio is ``ufactor / 1000``).

    Returns
    -------
    Decision
        ``dest``: the new rank of each of this rank's cells; ``counters`` is ``ctx.nb.counters`` with
        one gather and one scatter added (``messages`` +1, ``bytes`` + the graph this rank sent,
        ``time`` + the virtual time charged).

    Raises
    ------
    BalancerError
        On every rank, if Scotch fails on rank 0.
    """
    comm = ctx.comm
    size = comm.Get_size()
    counters = ctx.nb.counters  # the phase's balancing counters, as for the flow balancers
    parts, graph, nbytes = gather_graph(ctx, counters)
    dest_parts = None
    if comm.Get_rank() == 0:
        xadj, adjncy, w, old = graph
        targets = ctx.model.capacities if ctx.params["targets"] == "fair" else None
        # rank 0 remaps: its clock pays the work, the others wait for it in the scatter (docs/COSTS.md)
        charge_central(comm, ctx.clock, counters, scotch_units(xadj.size - 1, adjncy.size, size))
        try:
            new = scotch_remap(xadj, adjncy, w, old, size, ScotchParams.of(ctx.params), targets=targets,
                               seed=ctx.seed)
            dest_parts = [new[g] for g, *_ in parts]
        except (BalancerError, GraphError) as err:  # agreed through the scatter: no rank is left waiting
            dest_parts = [str(err)] * size
    dest = scatter_destinations(ctx, dest_parts, counters, nbytes)
    return Decision(dest=dest, iterations=1, counters=counters,
                    info={"targets": ctx.params["targets"], "migration_cost": ctx.params["migration_cost"]})
