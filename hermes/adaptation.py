"""The driver's adapt step: marking, then weights or refinement, exact accounting and the serial replay.

Marking (``adaptation.region``)
    A geometric region (``random``, ``box``, ``disc``, a moving ``front``; :func:`hermes.data.adapt.
    region_mask`) or the real kernel's error indicator (``indicator``: the jump of the Jacobi solution
    across faces, maximum strategy with ``threshold`` / ``coarsen_threshold``;
    :mod:`hermes.app.mesh.indicator`). A region coarsens where it is not; the indicator coarsens where the
    jump is below ``coarsen_threshold × max``. The marking is evaluated once per phase, before any
    change, so a cell's fate does not depend on the order of the steps. A ``fraction`` thins the
    marking by a hash — of the global id for weights, of the centroid for refinement (ids depend on the
    distribution once cells are created, positions do not).

``adaptation.kind: weights``
    The marked cells' weights are multiplied by ``factor`` (thesis §10.2).
``adaptation.kind: refine``
    Split sibling pairs the marking lets coarsen are first brought onto one rank
    (:func:`hermes.data.refine_dist.unite_families`, a migration charged like one), then sibling pairs
    are merged (one pass of :func:`~hermes.data.refine_dist.coarsen_domain`) and the marked cells
    below ``max_level`` bisected (:func:`~hermes.data.refine_dist.refine_domain`); ``max_level`` is a cap:
    a marked cell whose refinement would force a neighbour beyond it, through the conforming closure, is
    not refined (one level below the cap, only its refinement edge is bisected). The bisections and
    merges and the weight they add (a copy of the parent's weight per bisection) or remove (a merged
    parent gets its children's mean) are read back from the cells' lineage and checked against the
    total weight and cell count (collectively; a mismatch raises).

Cost
    Everything the step does is charged to the clock's ``adapt`` category: the indicator's ghost
    exchange and allreduce, the family migration, and ``adaptation.work_per_cell`` work units per
    cell a rank bisects or merges (the virtual clock has no other way to know what refinement costs;
    the wall clock measures it).

Serial replay (``kernel: jacobi`` with refinement)
    Rank 0 records, each phase, the centroids of the cells the ranks bisected and the vertices their
    coarsening removed, and at the end replays the run serially on the whole mesh (the same merges,
    the same bisections, the same ``u``/``f`` transfer and the same sweeps); the meshes must be equal
    cell for cell (matched by their vertices) and the solutions are compared.

Independent of the partition
    Which cells refine or coarsen never depends on which rank holds them (issue 38): the marking reads
    positions, or the indicator of a solution that is the same bit for bit on every partition (the
    ranks number new cells as the serial code does, so every cell sums its neighbours in the same
    order), the closure and the cap agree across rank borders, and every pair the serial pass merges
    is merged — :func:`~hermes.data.refine_dist.unite_families` never gives a merge up to keep a rank
    from being emptied. ``replay_mismatches`` is 0 and the solution equals the replay exactly under
    every balancer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from hermes.app.mesh.indicator import gradient_jump, jump_indicator_serial, mark_max_strategy
from hermes.app.mesh.kernels import initial_fields, jacobi_sweeps
from hermes.runtime.comm import Bookkeeping
from hermes.data.adapt import adapt_weights, region_mask, uniform_hash
from hermes.data.distributed import LocalDomain
from hermes.data.migrate import MigrationStats
from hermes.data.refine import Adaptation, TriMesh, coarsen, merge_pairs, refine
from hermes.data.refine_dist import coarsen_domain, gather_trimesh, refine_domain, unite_families
from hermes.sections import AdaptationSpec, ApplicationSpec

__all__ = ["Adapter", "adapt_mesh", "MeshAdaptation", "position_key"]

# temporary per-cell fields carrying the marks through the family migration and the merges
_REFINE, _COARSEN = "_refine_mark", "_coarsen_mark"


def position_key(coords: np.ndarray) -> np.ndarray:
    """A uint64 per cell from the bits of its centroid: the same on every rank and in a serial replay."""
    b = np.ascontiguousarray(coords[:, :2], dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        return b[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ b[:, 1]


@dataclass
class MeshAdaptation:
    """What :func:`adapt_mesh` did on this rank."""

    dom: LocalDomain
    #: sibling pairs merged and cells bisected here, and the weight they changed
    merges: int
    bisections: int
    weight_coarsened: float
    weight_refined: float
    #: the load after uniting the families (before the merges): the accounting's reference
    load_before: float
    #: the cells moved to unite split families
    united: MigrationStats
    #: coordinates of the vertices the merges removed and of the cells marked for bisection (serial replay)
    removed_xy: np.ndarray
    marked_xy: np.ndarray
    #: a local inconsistency between the counts and the cells (the caller agrees on it)
    bad: bool


def adapt_mesh(comm, dom: LocalDomain, refine_mask, coarsen_mask, *, max_level: int, edges: str = "all",
               coarsen: bool = True, clock=None) -> MeshAdaptation:
    """One adaptation of a distributed triangle mesh: unite split families, coarsen, refine (collective).

    ``refine_mask`` and ``coarsen_mask`` mark the local cells once; the marks travel with the cells through
    the family migration (:func:`~hermes.data.refine_dist.unite_families`, charged to ``clock``) and the
    merges (a merged parent is never marked for refinement: both its children were marked for coarsening).
    Cells marked for refinement are bisected, no cell beyond ``max_level`` (newest-vertex bisection,
    conforming across ranks, the cap kept through the closure). This is the adapt step of :class:`Adapter`; tests and benchmarks call it directly.
    """
    dom = replace(dom, fields={**dom.fields, _REFINE: np.asarray(refine_mask, dtype=np.float64),
                               _COARSEN: np.asarray(coarsen_mask, dtype=np.float64)})
    united, bad = MigrationStats(), False
    merges, w_c, gone_xy = 0, 0.0, np.zeros((0, 2))
    if coarsen:
        dom, united = unite_families(comm, dom, dom.fields[_COARSEN] > 0.5, clock=clock)
    start = dom
    if coarsen:
        dom, cs = coarsen_domain(comm, dom, dom.fields[_COARSEN] > 0.5, passes=1, mergeable=united.mergeable)
        merges, w_c, ok = _coarsen_change(start, dom)
        bad = not ok or merges != cs.merges
        gone_xy = _removed_vertices(start, dom)
    mid = dom
    want = (dom.fields[_REFINE] > 0.5) & (dom.fields["level"] < max_level)
    dom, rs = refine_domain(comm, dom, want, edges=edges, max_level=max_level)
    bis, w_r, ok = _refine_change(mid, dom)
    bad = bad or not ok or bis != rs.bisections
    dom = replace(dom, fields={k: v for k, v in dom.fields.items() if k not in (_REFINE, _COARSEN)})
    return MeshAdaptation(dom, merges, bis, w_c, w_r, start.load, united, gone_xy, mid.coords[want, :2], bad)


class Adapter:
    """Runs the adapt step phase after phase on one rank (collective calls) and keeps its accounts.

    Attributes
    ----------
    totals : dict
        ``refined`` bisections, ``coarsened`` merges and the ``weight`` they added, over all phases
        (global figures, the same on every rank).
    walls : list of float
        Wall seconds of each phase's step (maximum over ranks).
    """

    def __init__(self, comm, adaptation: AdaptationSpec, application: ApplicationSpec, seed: int, bbox, clock):
        """``adaptation``, ``application`` and ``seed``: the scenario's sections this step reads (the marking and
        the mesh changes; the kernel and its iterations, for the serial replay; the seed of the random marking)."""
        self.comm, self.bbox, self.clock = comm, bbox, clock
        self.adaptation, self.application, self.seed = adaptation, application, seed
        self.refining = adaptation.kind == "refine"
        self.totals = {"refined": 0, "coarsened": 0, "weight": 0.0}
        self.walls: list[float] = []
        # rank 0, for the serial replay of a refined jacobi run: per phase, the vertices coarsening
        # removed and the centroids of the cells bisected
        self._replay = self.refining and application.kernel == "jacobi"
        self.removed: list[np.ndarray] = []
        self.marked: list[np.ndarray] = []
        #: after :meth:`jacobi_error` (rank 0): where a serial marking differs from the ranks' (0, 0 is exact)
        self.mismatches: dict[str, int] | None = None

    # -- marking ---------------------------------------------------------------------------------
    def marks(self, dom, phase: int) -> tuple[np.ndarray, np.ndarray]:
        """(refine mask, coarsen mask) of the local cells at ``phase`` (collective for the indicator)."""
        reg = self.adaptation.region
        key = position_key(dom.coords) if self.refining else dom.gid
        if reg.kind == "indicator":
            eta = gradient_jump(self.comm, dom, self.clock)
            ref, coarse, _ = mark_max_strategy(self.comm, eta, reg.threshold, reg.coarsen_threshold, self.clock)
            if reg.fraction < 1.0:
                ref &= uniform_hash(self.seed, phase, key) < reg.fraction
            return ref, coarse
        ref = region_mask(reg, dom.coords, key, phase, self.seed, self.bbox)
        return ref, ~ref

    # -- the step --------------------------------------------------------------------------------
    def step(self, dom, phase: int):
        """Adapt ``dom`` for ``phase`` (collective). Returns the new domain and the phase's changes."""
        t0 = time.perf_counter()
        with self.clock.activity("adapt"):
            ref, coarse = self.marks(dom, phase)
            if self.refining:
                dom, change = self._refine(dom, phase, ref, coarse)
            else:
                dom = replace(dom, weight=adapt_weights(dom.weight, ref, self.adaptation.factor))
                change = {"refined": 0, "coarsened": 0}
        for key in ("refined", "coarsened"):
            self.totals[key] += change[key]
        self.totals["weight"] += change.get("weight_refined", 0.0) + change.get("weight_coarsened", 0.0)
        self.walls.append(Bookkeeping(self.comm).max(time.perf_counter() - t0))
        return dom, change

    def _refine(self, dom, phase: int, ref, coarse):
        """Unite, coarsen, refine (:func:`adapt_mesh`); charge the work; check the accounting (collective)."""
        comm, ad = self.comm, self.adaptation
        res = adapt_mesh(comm, dom, ref, coarse, max_level=ad.max_level, edges=ad.edges, coarsen=ad.coarsen,
                         clock=self.clock)
        dom = res.dom
        self.clock.compute(ad.work_per_cell * (2 * res.merges + res.bisections))
        rows = np.array(comm.allgather((res.merges, res.bisections, res.weight_coarsened, res.weight_refined,
                                        res.load_before, dom.load, float(res.bad))))
        m, b, wc, wr, w0, w1, nbad = rows.sum(axis=0)  # same order on every rank: the same verdict
        if nbad or abs(w1 - (w0 + wc + wr)) > 1e-10 * (w0 + abs(wc) + abs(wr)):
            raise RuntimeError(f"phase {phase}: refinement accounting broken ({int(b)} bisections adding "
                               f"{wr:.17g}, {int(m)} merges adding {wc:.17g}, weight {w0:.17g} -> {w1:.17g}, "
                               f"{int(nbad)} ranks with inconsistent cells)")
        if self._replay:
            parts = comm.gather((res.removed_xy, res.marked_xy), root=0)
            if comm.Get_rank() == 0:
                # (a vertex whose patch two ranks merged, each its own pairs, is reported by both)
                self.removed.append(np.unique(np.concatenate([g for g, _ in parts]), axis=0))
                self.marked.append(np.concatenate([c for _, c in parts]))
        return dom, {"refined": int(b), "coarsened": int(m), "weight_refined": float(wr),
                     "weight_coarsened": float(wc), "united_cells": int(comm.allreduce(res.united.cells_sent))}

    # -- checks ----------------------------------------------------------------------------------
    def check_totals(self, cells_initial: int, cells_final: int, weight_initial: float, weight_final: float) -> None:
        """Every cell and, for refinement, every unit of weight accounted for (same verdict on every rank)."""
        refined, coarsened = self.totals["refined"], self.totals["coarsened"]
        if cells_final != cells_initial + refined - coarsened:
            raise RuntimeError(f"cells not accounted for: {cells_initial} + {refined} bisections - {coarsened} "
                               f"merges != {cells_final}")
        if self.refining and abs(weight_final - weight_initial - self.totals["weight"]) > \
                1e-10 * (weight_initial + weight_final):
            raise RuntimeError(f"weight not accounted for: {weight_initial!r} + {self.totals['weight']!r} from "
                               f"adaptation != {weight_final!r}")

    def jacobi_error(self, dom, tm0: TriMesh | None) -> float | None:
        """max |u − u_serial| / max |u_serial| over the cells (matched by their vertices), on rank 0
        (collective; refined jacobi runs)."""
        comm = self.comm
        g = gather_trimesh(comm, dom)
        us = comm.gather((dom.gid, dom.fields["u"]), root=0)
        err, u_err = None, None
        if comm.Get_rank() == 0:
            gid = np.concatenate([a for a, _ in us])
            u = np.concatenate([b for _, b in us])[np.argsort(gid, kind="stable")]
            ref, ref_u = self._replay_serial(tm0)
            (oa, ra), (ob, rb) = _cell_rows(g), _cell_rows(ref)
            if ra.shape != rb.shape or not np.array_equal(ra[oa], rb[ob]):
                err = (f"the serial replay's mesh ({ref.n_cells} cells) differs from the distributed one "
                       f"({g.n_cells} cells)")
            else:
                u_err = float(np.max(np.abs(u[oa] - ref_u[ob])) / max(np.max(np.abs(ref_u)), 1e-300))
        err = comm.bcast(err, root=0)
        if err:
            raise RuntimeError(err)
        return u_err

    def _replay_serial(self, tm: TriMesh) -> tuple[TriMesh, np.ndarray]:
        """Rank 0: the serial reference of a refined jacobi run (module docstring).

        It follows what the ranks did (the recorded merges and bisections) and also marks every phase
        itself, serially, from its own solution or region: :attr:`mismatches` counts the cells and
        vertices where that serial marking (the serial coarsening pass, the serial refinement marks)
        differs from what the ranks did — 0 when the distributed marking and coarsening are exact.
        """
        ad = self.adaptation
        fields = initial_fields(tm.centroids)
        u, f = fields["u"], fields["f"]
        self.mismatches = {"refine": 0, "coarsen": 0}
        for k in range(ad.phases):
            ref, coarse = self._serial_marks(tm, u, k + 1)
            if ad.coarsen:
                serial = coarsen(tm, coarse, passes=1).mesh
                self.mismatches["coarsen"] += _xor_count(_removed_points(tm, serial.points), self.removed[k])
                a = _coarsen_as(tm, self.removed[k])
                tm, u, f, ref = a.mesh, a.apply(u), a.apply(f), a.apply(ref.astype(np.float64)) > 0.5
            c = tm.centroids
            mark = _points_in(c, self.marked[k])
            self.mismatches["refine"] += int(np.count_nonzero(mark != (ref & (tm.level < ad.max_level))))
            a = refine(tm, mark, edges=ad.edges, max_level=ad.max_level)
            tm, u, f = a.mesh, a.apply(u), a.apply(f)
            u = jacobi_sweeps(*tm.graph, f, u, self.application.iterations)
        return tm, u

    def _serial_marks(self, tm: TriMesh, u: np.ndarray, phase: int) -> tuple[np.ndarray, np.ndarray]:
        """The marking of :meth:`marks`, computed serially on the whole mesh."""
        reg, c = self.adaptation.region, tm.centroids
        if reg.kind == "indicator":
            eta = jump_indicator_serial(*tm.graph, u)
            top = float(eta.max(initial=0.0))
            if top <= 0.0:
                return np.zeros(tm.n_cells, bool), np.zeros(tm.n_cells, bool)
            ref, coarse = eta >= reg.threshold * top, eta < reg.coarsen_threshold * top
            if reg.fraction < 1.0:
                ref &= uniform_hash(self.seed, phase, position_key(c)) < reg.fraction
            return ref, coarse
        ref = region_mask(reg, c, position_key(c), phase, self.seed, self.bbox)
        return ref, ~ref


def _removed_points(tm: TriMesh, kept: np.ndarray) -> np.ndarray:
    """The points of ``tm`` that are not in ``kept`` (vertices a coarsening removed)."""
    return tm.points[~_points_in(tm.points, kept)]


def _xor_count(a: np.ndarray, b: np.ndarray) -> int:
    """Size of the symmetric difference of two point sets."""
    return int(np.count_nonzero(~_points_in(a, b)) + np.count_nonzero(~_points_in(b, a)))


def _points_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each point (row x, y) of ``a``: whether ``b`` holds the same point, bit for bit."""
    return np.isin(a[:, 0] + 1j * a[:, 1], b[:, 0] + 1j * b[:, 1])


def _refine_change(before, after) -> tuple[int, float, bool]:
    """Bisections and added weight read from the cells: an old cell that vanished left ``d ≥ 2`` new
    cells (its deepest old ancestor in their lineage), i.e. ``d − 1`` bisections each adding a copy
    of its weight. Also whether the cells are consistent with that."""
    gone = ~np.isin(before.gid, after.gid)
    fresh = ~np.isin(after.gid, before.gid)
    if not fresh.any():
        return 0, 0.0, not gone.any()
    lin = after.fields["lineage"][fresh]
    hit = np.isin(lin, before.gid[gone])
    anc = lin[np.arange(lin.shape[0]), np.argmax(hit, axis=1)]
    d = np.bincount(np.searchsorted(before.gid, anc), minlength=before.n)
    g = np.flatnonzero(gone)
    ok = bool(np.all(hit.sum(axis=1) == 1) and np.all(d[g] >= 2) and d.sum() == d[g].sum())
    return int((d[g] - 1).sum()), float(np.sum((d[g] - 1) * before.weight[g])), ok


def _coarsen_change(before, after) -> tuple[int, float, bool]:
    """Merges and added (negative) weight read from the cells: every new cell is a parent whose two
    vanished children name it in their lineage; it weighs their mean."""
    gone = np.flatnonzero(~np.isin(before.gid, after.gid))
    fresh = np.flatnonzero(~np.isin(after.gid, before.gid))
    if gone.size == 0:
        return 0, 0.0, fresh.size == 0
    lv = before.fields["level"][gone]
    par = before.fields["lineage"][gone, np.maximum(lv - 1, 0)]
    pos = np.minimum(np.searchsorted(after.gid, par), after.n - 1)
    cnt = np.bincount(pos, minlength=after.n)
    sums = np.bincount(pos, weights=before.weight[gone], minlength=after.n)
    ok = bool(np.all(lv > 0) and np.all(after.gid[pos] == par) and np.all(cnt[fresh] == 2)
              and cnt.sum() == cnt[fresh].sum())
    return int(fresh.size), float(np.sum(sums[fresh] / 2.0 - sums[fresh])), ok


def _removed_vertices(before, after) -> np.ndarray:
    """Coordinates of the vertices this rank's cells used before and not after (coarsening removed them)."""
    vid, first = np.unique(before.fields["nodes"].ravel(), return_index=True)
    gone = ~np.isin(vid, after.fields["nodes"].ravel())
    return before.fields["xy"].reshape(-1, 2)[first[gone]]


def _cell_rows(tm: TriMesh) -> tuple[np.ndarray, np.ndarray]:
    """Each cell as a row (its vertices' coordinates in NVB order, its level) and the order sorting the
    rows: two meshes with the same cells give the same sorted rows whatever their ids."""
    r = np.column_stack([tm.points[tm.tris].reshape(-1, 6), tm.level])
    return np.lexsort(r.T[::-1]), r


def _coarsen_as(tm: TriMesh, removed_xy: np.ndarray) -> Adaptation:
    """The serial coarsening pass removing exactly the vertices at ``removed_xy`` (what the ranks did):
    every other vertex is frozen, so the mask can be everything."""
    frozen = np.flatnonzero(~_points_in(tm.points, removed_xy))
    mask = np.ones(tm.n_cells, dtype=bool)
    tris, gid, level, lineage, transfer, merged, _ = merge_pairs(tm.tris, tm.gid, tm.level, tm.lineage, mask,
                                                                 frozen)
    used = np.zeros(tm.points.shape[0], dtype=bool)
    used[tris.ravel()] = True
    return Adaptation(TriMesh(tm.points[used], (np.cumsum(used) - 1)[tris], gid, level, lineage), transfer,
                      merged, 1)
