"""What is in a mesh, and what is wrong with it: ``hermes mesh info`` and ``hermes mesh generate``.

:func:`mesh_info` summarises a :class:`~hermes.data.mesh.Mesh` as a JSON-ready dict — counts,
connected components, degrees, bounding box, weights, area — and counts its *problems* instead of
raising, so that a broken mesh can be diagnosed: malformed or asymmetric adjacency, self loops,
isolated cells, extra components, bad weights or coordinates and, for meshes with cell polygons,
out-of-range nodes, degenerate, duplicate, inverted and zero-area cells, non-manifold sides,
hanging nodes and a dual graph that differs from the cells' shared sides.
:func:`mesh_info_file` reads a file leniently (a 2-D cell mesh the strict reader rejects is still
described) and says what ``hermes run`` would refuse (``refused_by_run``: a disconnected graph, or the strict
reader's one line) and which cells of the file the reader dropped (``dropped``: gmsh's boundary lines and
vertices, the faces of a volume mesh); :func:`format_mesh_info` prints the dict; :func:`generate` writes a
registered mesh.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.data.cfd_meshes import get_generator
from hermes.data.io import check_writable_format, write_mesh
from hermes.data.mesh import SOLID_TYPES, Mesh
from hermes.data.polygons import mesh_from_polygons, polygon_areas, polygon_facets
from hermes.errors import MeshError
from hermes.progress import Progress, quiet

__all__ = ["PROBLEMS", "mesh_info", "mesh_info_file", "format_mesh_info", "generate"]

#: Problem counters of :func:`mesh_info` (all present, 0 when fine) and how they are printed.
PROBLEMS = {
    "malformed_adjacency": "malformed CSR adjacency (nothing else about the graph is checked)",
    "self_loops": "self loops",
    "asymmetric_entries": "one-way adjacency entries",
    "duplicate_neighbours": "duplicate adjacency entries",
    "isolated_cells": "isolated cells (no neighbour)",
    "extra_components": "extra connected components",
    "bad_weights": "non-positive or non-finite weights",
    "bad_coords": "non-finite coordinates",
    "bad_node_indices": "cell node indices out of range (polygons not checked)",
    "degenerate_cells": "cells repeating a node",
    "duplicate_cells": "duplicate cells (same nodes as another cell)",
    "non_manifold_facets": "sides shared by more than 2 cells",
    "inverted_cells": "inverted cells (orientation against the majority)",
    "zero_area_cells": "zero-area cells",
    "hanging_nodes": "hanging nodes (a node on another cell's side)",
    "dual_graph_mismatch": "adjacency entries that do not match shared sides",
}

_ZERO_AREA = 1e-12  # relative to the squared bounding-box diagonal


def _graph_part(mesh: Mesh, info: dict, problems: dict) -> sp.csr_array | None:
    n = mesh.n_cells
    xadj, adjncy = np.asarray(mesh.xadj), np.asarray(mesh.adjncy)
    ok = (
        xadj.ndim == 1 and xadj.size == n + 1 and xadj[0] == 0 and xadj[-1] == adjncy.size
        and not np.any(np.diff(xadj) < 0)
        and (adjncy.size == 0 or (adjncy.min() >= 0 and adjncy.max() < n))
    )
    if not ok:
        problems["malformed_adjacency"] = 1
        return None
    if n == 0:
        return None
    deg = np.diff(xadj)
    info["degree"] = {"min": int(deg.min()), "max": int(deg.max()), "mean": float(deg.mean())}
    rows = np.repeat(np.arange(n, dtype=np.int64), deg)
    loops = rows == adjncy
    problems["self_loops"] = int(loops.sum())
    a = sp.coo_array((np.ones(int(np.count_nonzero(~loops))), (rows[~loops], adjncy[~loops])), shape=(n, n)).tocsr()
    a.sum_duplicates()
    problems["duplicate_neighbours"] = int(np.count_nonzero(~loops) - a.nnz)
    a.data[:] = 1.0
    asym = (a - a.T).tocoo()
    asym.eliminate_zeros()
    problems["asymmetric_entries"] = int(asym.nnz // 2)  # a one-way entry shows at (i, j) and (j, i)
    sym = sp.csr_array((a + a.T) > 0, dtype=np.int8)
    info["edges"] = int(sym.nnz // 2)
    ncomp, labels = sp.csgraph.connected_components(sym, directed=False)
    info["components"] = int(ncomp)
    info["largest_component"] = int(np.bincount(labels).max())
    problems["extra_components"] = max(int(ncomp) - 1, 0)
    problems["isolated_cells"] = int(np.count_nonzero(np.diff(sym.indptr) == 0)) if n > 1 else 0
    return sym


def _ragged_keys(cell_ptr: NDArray[np.int64], cell_nodes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each cell's sorted node ids, padded with −1 to the largest cell size: (n, kmax)."""
    sizes = np.diff(cell_ptr)
    n, kmax = sizes.size, int(sizes.max()) if sizes.size else 0
    out = np.full((n, kmax), -1, dtype=np.int64)
    owner = np.repeat(np.arange(n), sizes)
    out[owner, np.arange(cell_nodes.size) - cell_ptr[owner]] = cell_nodes
    out.sort(axis=1)
    return out


def _runs(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Sort ``keys``: (order, run id of each key, run lengths) — ``np.unique`` without hashing."""
    order = np.argsort(keys)
    ks = keys[order]
    first = np.ones(ks.size, dtype=bool)
    first[1:] = ks[1:] != ks[:-1]
    run = np.empty(ks.size, dtype=np.int64)
    run[order] = np.cumsum(first) - 1
    return order, run, np.diff(np.append(np.flatnonzero(first), ks.size))


def _duplicate_rows(keys: NDArray[np.int64]) -> int:
    """Number of rows equal to an earlier row."""
    if keys.shape[0] < 2:
        return 0
    ks = keys[np.lexsort(keys.T[::-1])]
    return int(np.count_nonzero(np.all(ks[1:] == ks[:-1], axis=1)))


def _hanging_nodes(pts, facets, owner, boundary, keys) -> int:
    """Boundary sides A–M and M–B with A–B also a boundary side of another cell, M inside AB."""
    npts = pts.shape[0]
    bnd, bnd_owner = facets[boundary], owner[boundary]
    bkey = bnd[:, 0] * npts + bnd[:, 1]
    sort = np.argsort(bkey)
    bnd, bnd_owner, bkey = bnd[sort], bnd_owner[sort], bkey[sort]
    mid = np.flatnonzero(np.bincount(bnd.ravel(), minlength=npts) == 2)
    if mid.size == 0:
        return 0
    ends = np.concatenate([bnd, bnd[:, ::-1]])
    ends = ends[np.argsort(ends[:, 0], kind="stable")]
    start = np.searchsorted(ends[:, 0], mid)
    a, b = ends[start, 1], ends[start + 1, 1]
    abk = np.minimum(a, b) * npts + np.maximum(a, b)
    at = np.minimum(np.searchsorted(bkey, abk), bkey.size - 1)
    cand = (bkey[at] == abk) & ~np.any(keys[bnd_owner[at]] == mid[:, None], axis=1)  # not a sliver AMB
    pa, ab, am = pts[a], pts[b] - pts[a], pts[mid] - pts[a]
    ab2 = np.einsum("ij,ij->i", ab, ab)
    cross = ab[:, 0] * am[:, 1] - ab[:, 1] * am[:, 0]
    t = np.einsum("ij,ij->i", am, ab) / np.maximum(ab2, 1e-300)
    return int(np.count_nonzero(cand & (np.abs(cross) <= 1e-9 * ab2) & (t > 0) & (t < 1)))


def _dual_mismatch(sym: sp.csr_array, own: NDArray[np.int64], run: NDArray[np.int64], mult: NDArray[np.int64]) -> int:
    """Adjacency entries between cells sharing no side, plus cell pairs sharing a side (shared by
    exactly two cells) that are not adjacent; ``own``/``run`` are the sides' cells in sorted order."""
    n = sym.shape[0]
    pairs = []
    for off in range(1, int(mult.max()) if mult.size else 1):  # every pair of cells on one side
        same = np.flatnonzero(run[off:] == run[:-off])
        pairs.append(np.column_stack([own[same], own[same + off], mult[run[same]] == 2]))
    p = np.concatenate(pairs) if pairs else np.zeros((0, 3), dtype=np.int64)
    p = p[p[:, 0] != p[:, 1]]

    def graph(q):
        g = sp.coo_array((np.ones(len(q)), (q[:, 0], q[:, 1])), shape=(n, n)).tocsr()
        return sp.csr_array((g + g.T) > 0, dtype=np.int8)

    share_any, share_two = graph(p), graph(p[p[:, 2] == 1])
    extra = (sym - share_any).tocoo()   # +1: adjacent without a shared side
    missing = (share_two - sym).tocoo()  # +1: a manifold side without an adjacency entry
    return int((np.count_nonzero(extra.data > 0) + np.count_nonzero(missing.data > 0)) // 2)


def _polygon_part(mesh: Mesh, sym: sp.csr_array | None, info: dict, problems: dict) -> None:
    pts = np.asarray(mesh.points, dtype=np.float64)
    cell_ptr, cell_nodes = np.asarray(mesh.cell_ptr), np.asarray(mesh.cell_nodes)
    n, npts = mesh.n_cells, pts.shape[0]
    sizes = np.diff(cell_ptr)
    info["nodes"] = int(npts)
    names = {3: "triangle", 4: "quad"}
    kinds, counts = np.unique(sizes, return_counts=True)
    info["cell_types"] = {names.get(int(k), f"polygon{int(k)}"): int(c) for k, c in zip(kinds, counts)}
    if (cell_ptr.size != n + 1 or cell_ptr[0] != 0 or cell_ptr[-1] != cell_nodes.size or np.any(sizes < 3)
            or (cell_nodes.size and (cell_nodes.min() < 0 or cell_nodes.max() >= npts))):
        problems["bad_node_indices"] = 1
        return
    used = np.bincount(cell_nodes, minlength=npts) > 0
    info["unused_nodes"] = int(npts - np.count_nonzero(used))
    keys = _ragged_keys(cell_ptr, cell_nodes)
    repeat = (keys[:, 1:] == keys[:, :-1]) & (keys[:, 1:] >= 0)
    problems["degenerate_cells"] = int(np.count_nonzero(np.any(repeat, axis=1)))
    problems["duplicate_cells"] = _duplicate_rows(keys)

    # sides: multiplicity, boundary, non-manifold, the dual graph they imply
    facets, owner = polygon_facets(cell_ptr, cell_nodes)
    order, run, mult = _runs(facets[:, 0] * npts + facets[:, 1])
    problems["non_manifold_facets"] = int(np.count_nonzero(mult > 2))
    info["boundary_facets"] = int(np.count_nonzero(mult == 1))
    if sym is not None:
        problems["dual_graph_mismatch"] = _dual_mismatch(sym, owner[order], run[order], mult)

    # areas: shoelace terms per side, summed per cell
    area = polygon_areas(pts, cell_ptr, cell_nodes)
    box = pts[used]
    zero = np.abs(area) <= _ZERO_AREA * float(np.sum((box.max(axis=0) - box.min(axis=0)) ** 2))
    pos, neg = int(np.count_nonzero((area > 0) & ~zero)), int(np.count_nonzero((area < 0) & ~zero))
    problems["zero_area_cells"] = int(zero.sum())
    problems["inverted_cells"] = min(pos, neg)
    info["orientation"] = "mixed" if pos and neg else ("ccw" if pos >= neg else "cw")
    info["area"] = float(np.abs(area).sum())
    problems["hanging_nodes"] = _hanging_nodes(pts, facets, owner, mult[run] == 1, keys)
    info["euler"] = int(np.count_nonzero(used) - mult.size + n)  # V − E + F = components − holes


def mesh_info(mesh: Mesh) -> dict:
    """Counts, connectivity, degrees, bounding box and validity problems of a mesh.

    Parameters
    ----------
    mesh : Mesh
        Any mesh, even a broken one (nothing is raised for bad content).

    Returns
    -------
    dict
        JSON-ready: ``name``, ``cells``, ``edges`` (undirected, of the symmetrised graph),
        ``components``, ``largest_component``, ``degree`` {min, max, mean}, ``bbox`` {min, max}
        (of the nodes of a cell mesh — every point of the file —, else of the unit coordinates: the true
        extent, not the box of the cell centroids), ``weights`` {total, min, max} of the load hermes uses
        (the first weight) with ``count`` and ``each`` [{min, max, sum}, ...] of every vertex weight a
        multi-weight graph carries; a 3-D cell mesh also ``nodes`` and ``cell_types``;
        with polygons also ``nodes``, ``unused_nodes``, ``cell_types``,
        ``boundary_facets``, ``holes`` (from Euler's formula), ``area`` and ``orientation``
        ("ccw", "cw" or "mixed"). ``problems`` maps every key of :data:`PROBLEMS` to a count;
        ``valid`` is true when all are 0.

    Notes
    -----
    Inverted cells are those whose signed area has the minority sign (a consistently clockwise
    mesh is valid); zero-area cells have ``|A| ≤ 10⁻¹² · diag²`` of the bounding box. A hanging
    node M is found when boundary sides A–M and M–B and A–B all exist with M inside segment AB
    (one level of non-conformity; a conforming mesh has no side lying along two others).
    """
    n = mesh.n_cells
    problems = dict.fromkeys(PROBLEMS, 0)
    info: dict = {"name": mesh.name, "cells": int(n), "edges": None, "components": None,
                  "largest_component": None, "degree": None}
    sym = _graph_part(mesh, info, problems)
    w = np.asarray(mesh.weights, dtype=np.float64)
    problems["bad_weights"] = int(np.count_nonzero(~np.isfinite(w) | (w <= 0))) if w.shape == (n,) else n
    info["weights"] = _weights(mesh, w)
    info["zero_weights_made_one"] = int(mesh.meta.get("zero_weights_replaced") or 0)
    coords = np.asarray(mesh.coords, dtype=np.float64)
    problems["bad_coords"] = int(np.count_nonzero(~np.all(np.isfinite(coords), axis=1))) if coords.ndim == 2 else n
    if mesh.has_polygons:
        box = np.asarray(mesh.points, dtype=np.float64)
    elif mesh.solid is not None:
        box = np.asarray(mesh.solid.points, dtype=np.float64)
        info["nodes"] = int(box.shape[0])
        names = {vtk: name for name, (vtk, _) in SOLID_TYPES.items()}
        kinds, counts = np.unique(mesh.solid.cell_types, return_counts=True)
        info["cell_types"] = {names.get(int(k), str(int(k))): int(c) for k, c in zip(kinds, counts)}
    else:
        box = coords
    box = box[np.all(np.isfinite(box), axis=1)] if box.ndim == 2 else np.zeros((0, 2))
    info["bbox"] = {"min": box.min(axis=0).tolist(), "max": box.max(axis=0).tolist()} if box.size else None
    if mesh.has_polygons and mesh.cell_nodes is not None:
        _polygon_part(mesh, sym, info, problems)
    info["problems"] = problems
    info["valid"] = not any(problems.values())
    euler = info.pop("euler", None)
    if mesh.has_polygons:
        ok = info["valid"] and euler is not None and info["components"] is not None
        info["holes"] = int(info["components"] - euler) if ok else None
    return info


def _weights(mesh: Mesh, w: NDArray[np.float64]) -> dict | None:
    """The ``weights`` entry of :func:`mesh_info`: the load's figures, and every vertex weight of the file."""
    n = mesh.n_cells
    good = w[np.isfinite(w)] if w.shape == (n,) else np.zeros(0)
    if not good.size:
        return None
    out = {"total": float(good.sum()), "min": float(good.min()), "max": float(good.max()), "count": 1}
    every = mesh.meta.get("vertex_weights")
    every = np.asarray(every, dtype=np.float64) if every is not None else None
    if every is not None and every.ndim == 2 and every.shape[0] == n and every.shape[1] > 1:
        out["count"] = int(every.shape[1])
        out["each"] = [{"min": float(c.min()), "max": float(c.max()), "sum": float(c.sum())} for c in every.T]
    return out


def _lenient_meshio(path: Path) -> Mesh | None:
    """A 2-D cell mesh read without checks (None if the file has no usable 2-D cells)."""
    from hermes.data.io import meshio_read

    raw = meshio_read(path)
    pts = np.asarray(raw.points, dtype=np.float64)
    flat = [b for b in raw.cells if b.type in ("triangle", "quad") or b.type.startswith("polygon")]
    dropped: dict[str, int] = {}
    for b in raw.cells:
        if b not in flat and len(b.data):
            dropped[b.type] = dropped.get(b.type, 0) + len(b.data)
    blocks = [np.asarray(b.data, dtype=np.int64) for b in flat]
    blocks = [b for b in blocks if b.ndim == 2 and b.size]
    if not blocks or pts.ndim != 2 or pts.shape[1] < 2:
        return None
    sizes = np.concatenate([np.full(len(b), b.shape[1], dtype=np.int64) for b in blocks])
    cell_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cell_nodes = np.concatenate([b.ravel() for b in blocks])
    if cell_nodes.min() < 0 or cell_nodes.max() >= pts.shape[0]:
        return None
    return mesh_from_polygons(pts[:, :2], cell_ptr, cell_nodes, name=path.stem,
                              meta={"path": str(path), "lenient": True, "dropped": dropped}, check=False)


def mesh_info_file(path: str | os.PathLike, *, units: str = "cells") -> dict:
    """:func:`mesh_info` of a mesh or graph file, read with :func:`hermes.data.io.read_mesh`.

    A disconnected graph is read all the same (``connected=False``) and its components counted. A 2-D
    cell mesh (triangles, quadrilaterals, polygons) that the strict reader rejects — a side shared by
    three cells, say — is read again without checks, so that its problems are counted; any other
    failure raises the reader's one-line :class:`MeshError`.

    Returns
    -------
    dict
        :func:`mesh_info`'s, with ``path``, ``units``, ``dropped`` (the cells of lower dimensions the
        reader left out, by meshio type: ``{"line": 40, "vertex": 4}``; empty for a graph file or a mesh
        of one dimension) and ``refused_by_run`` (one line per reason ``hermes run`` would refuse the
        file, as ``hermes run`` words it; empty when it would take it).
    """
    from hermes.data.formats import GRAPH_SUFFIXES
    from hermes.data.io import read_mesh

    p = Path(path)
    refused = []
    try:
        mesh = read_mesh(p, units=units, connected=False)
    except MeshError as err:
        refused.append(str(err).replace(f"{p}: ", "", 1))
        lenient = None
        if units == "cells" and p.is_file() and p.suffix.lower() not in (*GRAPH_SUFFIXES, ".mtx"):
            try:
                lenient = _lenient_meshio(p)
            except MeshError:
                lenient = None
        if lenient is None:
            raise
        mesh = lenient
    info = mesh_info(mesh)
    if not refused and (info["components"] or 0) > 1:
        refused.append(f"the graph is disconnected ({info['components']} components; hermes run needs a connected "
                       f"graph)")
    return {"path": str(p), "units": units, **info, "dropped": dict(mesh.meta.get("dropped") or {}),
            "refused_by_run": refused}


def _num(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:.4g}"


def format_mesh_info(info: dict) -> str:
    """A human-readable multi-line summary of a :func:`mesh_info` dict."""
    out = [f"mesh        {info['name']}" + (f"  ({info['path']})" if info.get("path") else "")]
    cells = f"cells       {_num(info['cells'])}"
    if info.get("cell_types"):
        cells += "  (" + ", ".join(f"{k} {_num(v)}" for k, v in info["cell_types"].items()) + ")"
    out.append(cells)
    if info.get("nodes") is not None:
        out.append(f"nodes       {_num(info['nodes'])}" + (f"  ({_num(info['unused_nodes'])} unused)"
                                                          if info.get("unused_nodes") else ""))
    if info.get("edges") is not None:
        out.append(f"edges       {_num(info['edges'])}")
    if info.get("degree"):
        d = info["degree"]
        out.append(f"degree      min {d['min']}  mean {d['mean']:.3f}  max {d['max']}")
    if info.get("components") is not None:
        out.append(f"components  {info['components']}  (largest {_num(info['largest_component'])} cells)")
    if info.get("bbox"):
        lo, hi = info["bbox"]["min"], info["bbox"]["max"]
        out.append(f"bbox        [{', '.join(f'{v:.4g}' for v in lo)}] .. [{', '.join(f'{v:.4g}' for v in hi)}]")
    if info.get("area") is not None:
        extra = f"  holes {info['holes']}" if info.get("holes") is not None else ""
        out.append(f"area        {info['area']:.6g}  boundary sides {_num(info['boundary_facets'])}"
                   f"  orientation {info['orientation']}{extra}")
    if info.get("weights"):
        w = info["weights"]
        if w.get("count", 1) > 1:
            out.append(f"weights     {w['count']} per vertex (a scenario picks the load with mesh.constraint: "
                       f"1..{w['count']}, sum or all)")
            out += [f"  w{k + 1:<8} sum {e['sum']:.6g}  min {e['min']:.4g}  max {e['max']:.4g}"
                    for k, e in enumerate(w["each"])]
        else:
            out.append(f"weights     total {w['total']:.6g}  min {w['min']:.4g}  max {w['max']:.4g}")
    if info.get("zero_weights_made_one"):
        out.append(f"approximated {_num(info['zero_weights_made_one'])} zero first weights made 1 (a work unit needs "
                   f"positive work; hermes run does the same)")
    if info.get("dropped"):
        kept = "/".join(info["cell_types"]) if info.get("cell_types") else "top-dimension"
        out.append("dropped     " + ", ".join(f"{_num(v)} {k}" for k, v in info["dropped"].items())
                   + f"  (the {kept} cells are the work units)")
    refused = info.get("refused_by_run") or []
    bad = [(k, v) for k, v in info["problems"].items() if v]
    if not bad and not refused:
        out.append("problems    none")
    else:
        out.append("problems    " + str(sum(v for _, v in bad)))
        out += [f"  refused by run: {line}" for line in refused]
        said = any("disconnected" in line for line in refused)  # the extra components, said in run's words
        out += [f"  {v:>8,}  {PROBLEMS.get(k, k)}" for k, v in bad if not (said and k == "extra_components")]
    return "\n".join(out)


#: peak memory per generated cell (measured: ``ru_maxrss`` of ``hermes mesh generate`` grew by 200 (large) to 380
#: (lshape) bytes per cell from 2·10⁵ to 2·10⁶ cells, written as .vtu, at about 4 µs per cell), rounded up
CELL_BYTES = 512
#: the largest mesh ``generate`` builds: about 10 GB and a minute and a half (hermes.data cannot ask
#: hermes.lifecycle.preflight for the memory available: preflight imports hermes.data)
MAX_GENERATED_CELLS = 20_000_000


def generate(name: str, size: int | None, out_path: str | os.PathLike, *, progress: Progress | None = None) -> Mesh:
    """Build the registered mesh ``name`` with about ``size`` cells and write it to ``out_path``.

    Parameters
    ----------
    name : str
        A key of :data:`hermes.data.cfd_meshes.CFD_MESHES`.
    size : int or None
        Approximate number of cells; ``None``: the registered default (the shipped mesh).
    out_path : str or path-like
        Output file; the suffix selects the format (``.vtu``, ``.msh``, any meshio format).
    progress : Progress, optional
        Told the step in progress (``generating large, ~1,000,000 cells``, then ``writing m.vtu``), which it
        repeats while it lasts: gmsh and the writing of 10⁶ cells take tens of seconds.

    Returns
    -------
    Mesh
        The mesh written.

    Raises
    ------
    MeshError
        Unknown name (the message lists the valid ones), size out of range (``--size: must be at most
        20000000 ...``: ``MAX_GENERATED_CELLS``, then the generator's own range), unwritable file.
    """
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise MeshError(f"--size: must be an integer number of cells, got {size!r}")
        if size < 1:
            raise MeshError(f"--size: must be at least 1, got {size}")
        if size > MAX_GENERATED_CELLS:
            raise MeshError(f"--size: must be at most {MAX_GENERATED_CELLS} (about "
                            f"{MAX_GENERATED_CELLS * CELL_BYTES / 1e9:.0f} GB of memory at {CELL_BYTES} bytes per cell), "
                            f"got {size}")
    check_writable_format(out_path)  # before the (possibly long) generation
    entry = get_generator(name)
    shown = progress if progress is not None else quiet()
    size = entry.default_size if size is None else size
    shown.status(f"generating {name}, ~{size:,} cells")
    mesh = entry.build(size)
    shown.status(f"writing {out_path} ({mesh.n_cells:,} cells)")
    write_mesh(mesh, out_path)
    shown.status(None)
    return mesh
