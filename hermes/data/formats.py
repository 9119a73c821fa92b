"""Classic graph formats: Chaco/METIS adjacency lists and Matrix Market sparsity patterns.

The readers behind :func:`hermes.data.io.read_mesh` for graph files (the meshio formats are in
:mod:`hermes.data.io`, which re-exports every public name here). Every reader returns a
:class:`~hermes.data.mesh.Mesh` whose work units are numbered ``0..n-1`` in file order, checked by
:func:`~hermes.data.mesh.validate_graph`; every failure raises :class:`~hermes.errors.MeshError` with
one line naming the file.

Formats
-------
``.graph`` / ``.chaco`` / ``.metis``
    Chaco/METIS adjacency lists (:func:`read_chaco`, :func:`write_chaco`), coordinates from a sibling
    ``.xyz``/``.coords``.
``.mtx``
    Matrix Market sparsity pattern (:func:`read_matrix_market`), coordinates from ``<stem>_coord.mtx``.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from hermes.data.mesh import Mesh, csr_from_edges, validate_graph
from hermes.errors import MeshError, OutputError

__all__ = [
    "GRAPH_SUFFIXES",
    "read_chaco",
    "read_matrix_market",
    "select_constraint",
    "write_chaco",
]

log = logging.getLogger(__name__)

GRAPH_SUFFIXES = (".graph", ".chaco", ".metis")


# --------------------------------------------------------------------------------------------
# helpers (shared with the meshio reader of hermes.data.io)
# --------------------------------------------------------------------------------------------


def existing_file(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise MeshError(f"mesh file not found: {p}")
    if not p.is_file():
        raise MeshError(f"mesh path is not a file: {p}")
    return p


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise MeshError(f"cannot read mesh file {path}: {err.strerror or err}") from err


def one_line(text: object) -> str:
    """The first non-blank line of ``text`` (messages from third-party code can span lines)."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _parse_floats(blob: bytes) -> NDArray[np.float64] | None:
    """All whitespace-separated numbers in ``blob``, or ``None`` if some token is not a number."""
    if not blob.strip():
        return np.zeros(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return np.fromstring(blob, dtype=np.float64, sep=" ")
        except (ValueError, DeprecationWarning):
            return None


def _first_bad_line(lines: list[bytes]) -> int:
    """Index of the first line holding a token that is not a number (slow path, errors only)."""
    for i, line in enumerate(lines):
        for token in line.split():
            try:
                float(token)
            except ValueError:
                return i
    return 0


def _content_lines(data: bytes) -> tuple[list[bytes], NDArray[np.int64]]:
    """Lines of ``data`` without ``%`` comment lines, and their 1-based line numbers in the file."""
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the newline ending the last line does not start another line
        lines.pop()
    if b"%" not in data:
        return lines, np.arange(1, len(lines) + 1, dtype=np.int64)
    keep = [not line.lstrip().startswith(b"%") for line in lines]
    linenos = np.flatnonzero(keep) + 1
    return [line for line, k in zip(lines, keep) if k], linenos


def planar_coords(xyz: NDArray[np.float64]) -> NDArray[np.float64]:
    """Coordinates as 2 or 3 columns: pad one column with zeros, drop an all-zero third column."""
    xyz = np.asarray(xyz, dtype=np.float64)
    if xyz.shape[1] == 1:
        xyz = np.column_stack([xyz, np.zeros(xyz.shape[0])])
    if xyz.shape[1] == 3 and not np.any(xyz[:, 2]):
        xyz = xyz[:, :2]
    return np.ascontiguousarray(xyz)


def validated_mesh(mesh: Mesh, path: Path, *, connected: bool = True) -> Mesh:
    """Run :func:`validate_graph` (``connected``: also refuse a disconnected graph), restating its message with
    the file name."""
    try:
        validate_graph(mesh, require_connected=connected)
    except MeshError as err:
        msg = str(err).replace(f"mesh '{mesh.name}': ", "")
        raise MeshError(f"{path}: {msg}") from err
    return mesh


def _graph_name(path: Path) -> str:
    return path.stem


# --------------------------------------------------------------------------------------------
# Chaco / METIS
# --------------------------------------------------------------------------------------------


def _parse_header(line: bytes, path: Path, lineno: int) -> tuple[int, int, str, int]:
    tokens = line.split()
    where = f"{path}, line {lineno}"
    if not 2 <= len(tokens) <= 4 or not all(t.isdigit() for t in tokens):
        shown = line.decode("utf-8", "replace").strip()[:60]
        raise MeshError(f"{where}: bad Chaco/METIS header {shown!r}: expected 'n m [fmt [ncon]]'")
    n, m = int(tokens[0]), int(tokens[1])
    fmt = tokens[2].decode() if len(tokens) > 2 else "0"
    if len(fmt) > 3 or set(fmt) - {"0", "1"}:
        raise MeshError(f"{where}: bad Chaco/METIS format code {fmt!r}: expected digits 0/1, e.g. 10 or 011")
    ncon = int(tokens[3]) if len(tokens) > 3 else 1
    if ncon < 1:
        raise MeshError(f"{where}: number of vertex weights must be ≥ 1, got {ncon}")
    if n < 1:
        raise MeshError(f"{where}: graph has no vertices")
    return n, m, fmt.zfill(3), ncon


def read_chaco(path: str | os.PathLike, *, connected: bool = True) -> Mesh:
    """Read a graph in Chaco/METIS format, with coordinates from a sibling file if one exists.

    Parameters
    ----------
    path : str or path-like
        The graph file. Header ``n m [fmt [ncon]]`` (``m`` counts undirected edges), then one line per
        vertex: ``[size] [w_1 .. w_ncon] v_1 [e_1] v_2 [e_2] ...`` with 1-based neighbours ``v``.
        ``fmt`` digits: 1 = edge weights ``e``, 10 = ``ncon`` vertex weights, 100 = vertex sizes.
        Lines starting with ``%`` are comments.
    connected : bool
        Refuse a disconnected graph (False: read it anyway, as ``hermes mesh info`` does).

    Returns
    -------
    Mesh
        ``weights`` = first vertex weight (1 without weights); ``edge_weights`` if ``fmt`` has them;
        ``coords`` from ``<path>.xyz``, ``<stem>.xyz`` or ``<stem>.coords`` (first found; 1–3 numbers
        per line, one line per vertex), else zeros with ``meta["has_coords"] = False``. ``meta`` holds
        ``"vertex_weights_extra"`` (n × (ncon − 1)) for further constraints, with ``ncon > 1`` also
        ``"ncon"`` and ``"vertex_weights"`` (n × ncon, as read; a scenario must pick or combine them:
        :func:`select_constraint`), ``"vertex_sizes"`` and
        ``"zero_weights_replaced"`` (the number of zero first weights replaced by 1: METIS allows
        weight 0 but a hermes work unit needs positive work).

    Raises
    ------
    MeshError
        Missing or unreadable file, bad header, non-numeric token, line count or edge count not
        matching the header, neighbour out of range, self loop, duplicate or one-way edge,
        non-positive edge weight, bad coordinate file, disconnected graph. The message names the
        file and, where it can, the line.

    Notes
    -----
    The body is tokenised in one pass (``np.fromstring`` on the joined lines); the only per-line
    Python work is counting tokens, about 0.2 s per million vertices. A third coordinate column
    that is all zero is dropped, so planar meshes stored as ``x y 0`` are 2-D.
    """
    path = existing_file(path)
    lines, linenos = _content_lines(_read_bytes(path))
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise MeshError(f"{path}: empty graph file")
    n, m, fmt, ncon = _parse_header(lines[first], path, int(linenos[first]))
    has_vsize, has_vwgt, has_ewgt = (c == "1" for c in fmt)

    body = lines[first + 1 :]
    body_linenos = linenos[first + 1 :]
    while len(body) > n and not body[-1].strip():
        body.pop()
    if len(body) < n:
        raise MeshError(f"{path}: header announces {n} vertices but the file has {len(body)} vertex lines")
    if len(body) > n:
        raise MeshError(
            f"{path}, line {body_linenos[n]}: more vertex lines than the {n} announced in the header"
        )

    counts = np.fromiter((len(line.split()) for line in body), dtype=np.int64, count=n)
    values = _parse_floats(b" ".join(body))
    if values is None or values.size != counts.sum():
        bad = _first_bad_line(body)
        raise MeshError(f"{path}, line {body_linenos[bad]}: not a number")
    if not np.all(np.isfinite(values)):
        bad = int(np.searchsorted(np.cumsum(counts), np.flatnonzero(~np.isfinite(values))[0], side="right"))
        raise MeshError(f"{path}, line {body_linenos[bad]}: non-finite value")

    prefix = int(has_vsize) + (ncon if has_vwgt else 0)
    stride = 2 if has_ewgt else 1
    rest = counts - prefix
    bad_rows = np.flatnonzero((rest < 0) | (rest % stride != 0))
    if bad_rows.size:
        i = int(bad_rows[0])
        what = f"{prefix} leading value(s)" + (" and neighbour/weight pairs" if has_ewgt else "")
        raise MeshError(f"{path}, line {body_linenos[i]}: {counts[i]} values do not match format {fmt} ({what})")

    line_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=line_start[1:])
    pos = np.arange(values.size, dtype=np.int64) - np.repeat(line_start[:-1], counts)
    in_list = pos >= prefix
    nbr_mask = in_list & ((pos - prefix) % stride == 0)
    lead = values[~in_list].reshape(n, prefix)
    nbr = values[nbr_mask]
    line_of_nbr = np.repeat(np.arange(n), rest // stride)

    def fail_at(mask: NDArray[np.bool_], msg: str) -> None:
        if np.any(mask):
            i = int(line_of_nbr[np.flatnonzero(mask)[0]])
            raise MeshError(f"{path}, line {body_linenos[i]}: {msg}")

    fail_at(nbr != np.round(nbr), "neighbour ids must be integers")
    fail_at((nbr < 1) | (nbr > n), f"neighbour id out of range 1..{n}")
    adjncy = nbr.astype(np.int64) - 1
    fail_at(adjncy == line_of_nbr, "self loop (a vertex lists itself)")
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rest // stride, out=xadj[1:])

    edge_weights = None
    if has_ewgt:
        edge_weights = values[in_list & ((pos - prefix) % stride == 1)]
        fail_at(edge_weights <= 0, "edge weights must be positive")

    if adjncy.size != 2 * m:
        raise MeshError(
            f"{path}: header announces {m} edges but the adjacency lists hold {adjncy.size} entries "
            f"({adjncy.size / 2:g} undirected edges)"
        )
    a = sp.csr_array((np.ones(adjncy.size), adjncy.copy(), xadj.copy()), shape=(n, n))
    a.sum_duplicates()  # sorts the index arrays in place: hence the copies (file order is kept)
    if a.nnz != adjncy.size:
        entry = int(np.flatnonzero(a.data > 1)[0])
        i = int(np.searchsorted(a.indptr, entry, side="right") - 1)
        raise MeshError(f"{path}, line {body_linenos[i]}: duplicate neighbour")
    asym = (a - a.T).tocoo()
    asym.eliminate_zeros()
    if asym.nnz:
        k = int(np.argmin(asym.row * n + asym.col))
        i, j = (int(asym.row[k]), int(asym.col[k])) if asym.data[k] > 0 else (int(asym.col[k]), int(asym.row[k]))
        raise MeshError(
            f"{path}, line {body_linenos[i]}: vertex {i + 1} lists {j + 1} but vertex {j + 1} does not list {i + 1}"
        )
    if edge_weights is not None:
        w = sp.csr_array((edge_weights, adjncy, xadj), shape=(n, n))
        diff = (w - w.T).tocoo()
        diff.eliminate_zeros()
        if diff.nnz:
            i = int(diff.row.min())
            raise MeshError(f"{path}, line {body_linenos[i]}: edge weights are not symmetric")

    meta: dict = {"format": "chaco", "path": str(path)}
    col = 0
    if has_vsize:
        meta["vertex_sizes"] = lead[:, 0].copy()
        col = 1
    weights = np.ones(n)
    if has_vwgt:
        vw = lead[:, col : col + ncon]
        if np.any(vw < 0):
            i = int(np.flatnonzero(np.any(vw < 0, axis=1))[0])
            raise MeshError(f"{path}, line {body_linenos[i]}: vertex weights must be non-negative")
        weights = vw[:, 0].copy()
        if ncon > 1:
            meta["vertex_weights_extra"] = vw[:, 1:].copy()
            meta["vertex_weights"] = vw.copy()
            meta["ncon"] = ncon
        zero = weights == 0
        if np.any(zero):
            weights[zero] = 1.0
            meta["zero_weights_replaced"] = int(zero.sum())
            log.debug("%s: %d zero vertex weights replaced by 1", path, int(zero.sum()))  # said by run, mesh info

    coords, coord_path = _chaco_coords(path, n)
    meta["has_coords"] = coord_path is not None
    if coord_path is not None:
        meta["coords_path"] = str(coord_path)
    mesh = Mesh(
        name=_graph_name(path),
        xadj=xadj,
        adjncy=adjncy,
        weights=weights,
        coords=coords,
        edge_weights=edge_weights,
        meta=meta,
    )
    return validated_mesh(mesh, path, connected=connected)


def select_constraint(mesh: Mesh, constraint: int | str | None, where: str) -> Mesh:
    """The mesh with one load per vertex from a multi-constraint graph (``ncon > 1`` vertex weights).

    ``constraint`` says which load: ``k`` (1-based) the k-th weight, ``"sum"`` their sum (zeros become 1
    as in :func:`read_chaco`), or ``"all"``: every weight at once, read as given — the first is the load
    (``Mesh.weights``; it must be positive), the others are ``meta["constraints"]`` (n × (ncon − 1), a zero
    stays zero), balanced beside it (:mod:`hermes.balance.constraints`). A single-weight mesh is returned
    as it is (``constraint`` None, 1, ``"sum"`` or ``"all"``: one setting can serve a sweep over several
    meshes).

    Raises
    ------
    MeshError
        One line naming ``where`` and ``ncon``: several weights and no ``constraint``, or a column
        beyond ``ncon``.
    """
    ncon = int(mesh.meta.get("ncon", 1))
    if ncon == 1:
        if constraint not in (None, 1, "sum", "all"):
            raise MeshError(f"mesh.constraint: {where} has one vertex weight per vertex, got constraint "
                            f"{constraint!r} (give it only for multi-constraint graphs)")
        return mesh
    if constraint is None:
        raise MeshError(f"{where} has {ncon} vertex weights per vertex (ncon = {ncon}) and hermes balances one load: "
                        f"set mesh.constraint to 1..{ncon} (that weight), 'sum' or 'all' (every weight at once)")
    vw = np.asarray(mesh.meta["vertex_weights"], dtype=np.float64)
    if constraint == "all":
        zero = np.flatnonzero(vw[:, 0] <= 0)
        if zero.size:
            raise MeshError(f"mesh.constraint: all: {where}: vertex {int(zero[0]) + 1} has first weight "
                            f"{vw[zero[0], 0]:g} ({zero.size} vertices with a zero first weight): the first weight "
                            f"is the load and must be positive (further weights may be zero)")
        meta = {**mesh.meta, "constraint": "all", "constraints": vw[:, 1:].copy(), "zero_weights_replaced": 0}
        return replace(mesh.with_weights(vw[:, 0].copy()), meta=meta)
    if constraint == "sum":
        w = vw.sum(axis=1)
    elif isinstance(constraint, int) and 1 <= constraint <= ncon:
        w = vw[:, constraint - 1].copy()
    else:
        raise MeshError(f"mesh.constraint: {where} has {ncon} vertex weights (ncon = {ncon}): give 1..{ncon}, "
                        f"'sum' or 'all', got {constraint!r}")
    zero = w == 0
    w[zero] = 1.0
    meta = {**mesh.meta, "constraint": constraint, "zero_weights_replaced": int(zero.sum())}
    return replace(mesh.with_weights(w), meta=meta)


def _chaco_coords(path: Path, n: int) -> tuple[NDArray[np.float64], Path | None]:
    """Coordinates from ``<path>.xyz``, ``<stem>.xyz`` or ``<stem>.coords``, else zeros."""
    candidates = [path.with_name(path.name + ".xyz"), path.with_suffix(".xyz"), path.with_suffix(".coords")]
    coord_path = next((c for c in candidates if c.is_file()), None)
    if coord_path is None:
        return np.zeros((n, 2)), None
    lines, linenos = _content_lines(_read_bytes(coord_path))
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) != n:
        raise MeshError(f"{coord_path}: {len(lines)} coordinate lines for {n} vertices")
    ncol = len(lines[0].split())
    if not 1 <= ncol <= 3:
        raise MeshError(f"{coord_path}, line {linenos[0]}: expected 1 to 3 coordinates per line, got {ncol}")
    values = _parse_floats(b" ".join(lines))
    if values is None:
        bad = _first_bad_line(lines)
        raise MeshError(f"{coord_path}, line {linenos[bad]}: not a number")
    if values.size != n * ncol:
        counts = np.fromiter((len(line.split()) for line in lines), dtype=np.int64, count=n)
        bad = int(np.flatnonzero(counts != ncol)[0])
        raise MeshError(f"{coord_path}, line {linenos[bad]}: expected {ncol} coordinates, got {counts[bad]}")
    xyz = values.reshape(n, ncol)
    if not np.all(np.isfinite(xyz)):
        raise MeshError(f"{coord_path}: non-finite coordinates")
    return planar_coords(xyz), coord_path


def write_chaco(mesh: Mesh, path: str | os.PathLike, *, coords: bool = True,
                vertex_weights: ArrayLike | None = None) -> Path:
    """Write ``mesh`` as a Chaco/METIS graph (and its coordinates as ``<path>.xyz``).

    Parameters
    ----------
    mesh : Mesh
    path : str or path-like
        The graph file to write.
    coords : bool
        Also write ``<path>.xyz`` (one line of ``dim`` coordinates per vertex), which
        :func:`read_chaco` picks up.
    vertex_weights : array_like, shape (n, ncon), optional
        Several weights per vertex (a multi-constraint graph, header ``n m 10 ncon`` or ``11 ncon``),
        written instead of ``mesh.weights``; non-negative.

    Returns
    -------
    Path
        The graph file written.

    Notes
    -----
    Vertex weights are written (format digit 10) unless all are 1, edge weights (digit 1) when the
    mesh has them. Integral weights are written as integers, as METIS requires; other weights are
    written exactly (``%.17g``), which :func:`read_chaco` reads back but METIS' own tools do not.
    One Python line per vertex: meant for tests and small exports.
    """
    p = Path(path)
    n = mesh.n_cells
    vw = np.asarray(mesh.weights if vertex_weights is None else vertex_weights, dtype=np.float64).reshape(n, -1)
    if np.any(vw < 0) or not np.all(np.isfinite(vw)):
        raise MeshError(f"{p}: vertex weights must be non-negative finite numbers")
    ncon = vw.shape[1]
    has_vwgt = ncon > 1 or not np.all(vw == 1.0)
    has_ewgt = mesh.edge_weights is not None
    fmt = ("1" if has_vwgt else "0") + ("1" if has_ewgt else "0")

    def num(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.17g}"

    out = [f"{n} {mesh.n_edges}" + (f" {fmt}" if fmt != "00" else "") + (f" {ncon}" if ncon > 1 else "")]
    nbr = (mesh.adjncy + 1).tolist()
    ew = mesh.edge_weights.tolist() if has_ewgt else None
    w = vw.tolist()
    xadj = mesh.xadj.tolist()
    for i in range(n):
        lo, hi = xadj[i], xadj[i + 1]
        tokens = [num(x) for x in w[i]] if has_vwgt else []
        if has_ewgt:
            for v, e in zip(nbr[lo:hi], ew[lo:hi]):
                tokens += [str(v), num(e)]
        else:
            tokens += map(str, nbr[lo:hi])
        out.append(" ".join(tokens))
    from hermes.files import write_atomic, write_through

    try:  # each file atomically: never through a symlink at its name, as it was if the write fails
        write_atomic(p, "\n".join(out) + "\n")
        if coords:
            write_through(p.with_name(p.name + ".xyz"), lambda tmp: np.savetxt(tmp, mesh.coords, fmt="%.17g"))
    except OutputError as err:
        raise MeshError(str(err)) from None
    return p


# --------------------------------------------------------------------------------------------
# Matrix Market
# --------------------------------------------------------------------------------------------


def _mmread(path: Path):
    import scipy.io

    try:
        return scipy.io.mmread(str(path))
    except Exception as err:  # scipy raises ValueError, OSError, IndexError, ... on bad input
        raise MeshError(f"cannot read Matrix Market file {path}: {one_line(err) or type(err).__name__}") from err


def read_matrix_market(path: str | os.PathLike, *, connected: bool = True) -> Mesh:
    """Read the sparsity pattern of a square Matrix Market matrix as a graph.

    Parameters
    ----------
    path : str or path-like
        A ``.mtx`` coordinate (sparse) matrix. Entry ``(i, j)``, ``i ≠ j``, is an edge; values are
        ignored, the diagonal is dropped and the pattern is symmetrised.
    connected : bool
        Refuse a disconnected graph (False: read it anyway, as ``hermes mesh info`` does).

    Returns
    -------
    Mesh
        Unit weights; ``coords`` from a sibling ``<stem>_coord.mtx`` (a dense n × 2 or n × 3 array)
        if present, else zeros with ``meta["has_coords"] = False``.

    Raises
    ------
    MeshError
        Missing or unreadable file, a dense or non-square matrix, a coordinate array of the wrong
        shape, a disconnected graph.
    """
    path = existing_file(path)
    a = _mmread(path)
    if not sp.issparse(a):
        raise MeshError(f"{path}: expected a sparse (coordinate) matrix, got a dense array")
    if a.shape[0] != a.shape[1]:
        raise MeshError(f"{path}: matrix is not square ({a.shape[0]} x {a.shape[1]})")
    n = int(a.shape[0])
    coo = sp.coo_array(a)
    xadj, adjncy = csr_from_edges(n, np.column_stack([coo.row, coo.col]))

    coord_path = path.with_name(path.stem + "_coord.mtx")
    meta: dict = {"format": "matrix-market", "path": str(path), "has_coords": coord_path.is_file()}
    coords = np.zeros((n, 2))
    if coord_path.is_file():
        xyz = _mmread(coord_path)
        if sp.issparse(xyz):
            xyz = xyz.toarray()
        xyz = np.asarray(xyz, dtype=np.float64)
        if xyz.ndim != 2 or xyz.shape[0] != n or not 1 <= xyz.shape[1] <= 3:
            raise MeshError(f"{coord_path}: coordinate array of shape {xyz.shape} for {n} vertices")
        coords = planar_coords(xyz)
        meta["coords_path"] = str(coord_path)
    mesh = Mesh(name=_graph_name(path), xadj=xadj, adjncy=adjncy, weights=np.ones(n), coords=coords, meta=meta)
    return validated_mesh(mesh, path, connected=connected)
