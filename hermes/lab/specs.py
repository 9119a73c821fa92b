"""The inputs of the offline lab ``hermes lab flow``: processor graphs, capacities, edge weights, loads.

Each input is a short *spec* string (what the CLI takes) or, from Python, an array. Processors are
numbered from 0. The thesis' and the JPDC paper's test environments are built in:

Graphs (:func:`parse_graph`), with their *listing order* of edges (edge k is the k-th listed; the
weight spec ``kmod4`` depends on it):

``path:N``
    ``(i, i+1)`` for i = 0..N−2.
``ring:N``
    the path's edges, then the closing edge ``(0, N−1)`` (N ≥ 3; ``ring:2`` is one edge).
``star:N``
    centre 0: ``(0, i)`` for i = 1..N−1.
``mesh:RxC``
    R rows, C columns, processor ``row·C + col``; for every processor in increasing order its
    right edge ``(v, v+1)`` then its down edge ``(v, v+C)`` (= lexicographic order).
``torus:RxC``
    as ``mesh``, with the right/down edge of the last column/row wrapping round to the first; a
    dimension of size 1 or 2 does not wrap (its ring would repeat an edge), as in C_R × C_C.
``tree:K:N``
    partial (complete) K-ary tree of N processors in breadth-first numbering: ``(⌊(i−1)/K⌋, i)``
    for i = 1..N−1 (``tree:2:N`` is the thesis' partial binary tree).
``complete:N``
    ``(i, j)`` for all i < j, lexicographic.
``wheel:N``
    hub 0 and rim 1..N−1 (N ≥ 4): the spokes ``(0, i)``, then the rim ``(i, i+1)`` for
    i = 1..N−2, then ``(1, N−1)``.
``bipartite:AxB``
    complete bipartite, sides 0..A−1 and A..A+B−1: ``(i, A+j)`` lexicographic.
``mesh-file:PATH:P``
    the subdomain graph of the mesh or graph file PATH partitioned by METIS into P parts (seed 0):
    an edge for every pair of parts sharing a cut edge, lexicographic; ``meta["boundary"]`` holds
    the number of cut edges of each, usable as weights with the spec ``boundary``.
a file
    an edge list, one ``i j`` per line (``#`` or ``%`` comments), p = largest index + 1; or JSON
    ``{"p": ..., "edges": [[i, j], ...]}``. Listing order: the file's order.

Capacities (:func:`parse_capacities`, normalised to sum 1): ``homo`` (all equal), ``hcuw`` (speed
of processor r proportional to ``r mod 4 + 1``: thesis §5.7 and JPDC §4, environments HCUW/HCHW),
a comma list of p numbers, a single number (all equal) or a file of p numbers.

Edge weights (:func:`parse_weights`, in listing order): ``1`` (or any single number), ``kmod4``
(edge k gets ``k mod 4 + 1``: thesis §5.7, HCHW), ``ijmod3`` (edge {i, j} gets ``(i + j) mod 3 + 1``:
JPDC §4, HCHW), more generally ``kmodM`` / ``ijmodM`` (thesis Table 5.6 uses ``kmod2``),
``boundary`` (``mesh-file`` graphs only), a comma list of q numbers or a file.

Loads (:func:`parse_loads`), the distributions of the seeds:

``one``
    JPDC §4: "all processors have the same load, excepting one whose load is 500 × p times
    greater than of the others": l₀ = 500 p, every other l_r = 1.
``eq``
    JPDC §4: "the processors have affected the same load, equal to 200 × p": l_r = 200 p.
``high``
    thesis §5.7: "all processors have the same load except one whose load is 10 times greater
    than of the others": l₀ = 10, every other l_r = 1.
``half``
    thesis §5.7: "the processors are divided into two subsets, the processors in each subset have
    the same load but the ratio between the loads of two processors in different subsets is 1 to
    5": l_r = 5 for r < ⌈p/2⌉, 1 otherwise.
``random:SEED``
    integers drawn uniformly from 1..1000 with ``numpy.random.default_rng(SEED)``.

The seeds do not say which processor is the loaded "one" nor which subset is the heavy one:
hermes takes processor 0 and the first half, the worst case on a path or a tree rooted at 0.
A comma list of p numbers, a single number (all equal) or a file of p numbers also work.

Every bad spec raises :class:`~hermes.errors.GraphError` (graphs) or
:class:`~hermes.errors.ScenarioError` (capacities, weights, loads) with one line naming the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.model import Model
from hermes.errors import GraphError, HermesError, ScenarioError
from hermes.loaders import parse_json, read_text
from hermes.metrics import subdomain_graph
from hermes.bounds import shown as format_number
from hermes.scenario import BIG, TINY

__all__ = ["ProcessorGraph", "GRAPH_KINDS", "LOAD_KINDS", "parse_graph", "parse_capacities", "parse_weights",
           "parse_loads", "build_model", "parse_model"]

GRAPH_KINDS = ("path", "ring", "star", "mesh", "torus", "tree", "complete", "wheel", "bipartite", "mesh-file")
LOAD_KINDS = ("one", "eq", "high", "half", "random:SEED")
#: largest ratio of two capacities or two edge weights: the weighted Laplacian's condition number grows
#: with it, and at 1e12 its double-precision solves (eps 2.2e-16) keep about four correct digits
SPREAD_MAX = 1e12
#: graphs larger than this, generated or read, are refused (the lab is for processor graphs)
MAX_PROCESSORS = 1_000_000
MAX_EDGES = 5_000_000

#: a size, a processor number, a modulus or a seed in a spec: at most 18 digits (an int64; Python refuses to
#: convert more than 4300 digits at all), then bounded by what it counts
_SIZE = re.compile(r"\d{1,18}")
_DIMS = re.compile(r"(\d{1,18})x(\d{1,18})", re.IGNORECASE)
_MOD = re.compile(r"(k|ij)mod(\d{1,18})")


@dataclass(frozen=True, eq=False)
class ProcessorGraph:
    """A processor graph with its edges in listing order.

    Attributes
    ----------
    p : int
    edges : ndarray of int64, shape (q, 2)
        In the listing order of the spec (see the module docstring), as generated: not necessarily
        ``i < j`` nor sorted. :class:`~hermes.balance.model.Model` sorts them (with their weights).
    spec : str
    meta : dict
        Generator details; for ``mesh-file`` the mesh, its cell count and ``boundary`` (cut edges
        per listed edge).
    """

    p: int
    edges: NDArray[np.int64]
    spec: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def q(self) -> int:
        return int(len(self.edges))


def _is(path: Path, kind: str) -> bool:
    """``path.is_file()`` or ``is_dir()``, False where the name cannot be a path (too long: ENAMETOOLONG)."""
    try:
        return path.is_file() if kind == "file" else path.is_dir()
    except (OSError, ValueError):
        return False


# -- graphs ----------------------------------------------------------------------------------------
def _pairs(a, b) -> NDArray[np.int64]:
    return np.column_stack([np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)]).reshape(-1, 2)


def _grid(rows: int, cols: int, wrap: bool) -> NDArray[np.int64]:
    """Mesh/torus edges: per processor in rank order, its right edge then its down edge."""
    v = np.arange(rows * cols, dtype=np.int64)
    r, c = np.divmod(v, cols)
    right_ok = (c < cols - 1) | (wrap & (cols >= 3) & (c == cols - 1))
    down_ok = (r < rows - 1) | (wrap & (rows >= 3) & (r == rows - 1))
    right = _pairs(v, r * cols + (c + 1) % cols)
    down = _pairs(v, ((r + 1) % rows) * cols + c)
    both = np.stack([right, down], axis=1).reshape(-1, 2)  # v's right, v's down, (v+1)'s right, ...
    return both[np.stack([right_ok, down_ok], axis=1).ravel()]


def _generated(kind: str, args: list[int]) -> NDArray[np.int64]:
    if kind == "path":
        (n,) = args
        i = np.arange(n - 1)
        return _pairs(i, i + 1)
    if kind == "ring":
        (n,) = args
        i = np.arange(n - 1)
        e = _pairs(i, i + 1)
        return np.vstack([e, [[0, n - 1]]]) if n >= 3 else e
    if kind == "star":
        (n,) = args
        i = np.arange(1, n)
        return _pairs(np.zeros_like(i), i)
    if kind in ("mesh", "torus"):
        rows, cols = args
        return _grid(rows, cols, kind == "torus")
    if kind == "tree":
        k, n = args
        i = np.arange(1, n)
        return _pairs((i - 1) // k, i)
    if kind == "complete":
        (n,) = args
        i, j = np.triu_indices(n, 1)
        return _pairs(i, j)
    if kind == "wheel":
        (n,) = args
        rim = np.arange(1, n)
        return np.vstack([_pairs(np.zeros_like(rim), rim), _pairs(rim[:-1], rim[1:]), [[1, n - 1]]])
    if kind == "bipartite":
        a, b = args
        i, j = np.divmod(np.arange(a * b), b)
        return _pairs(i, a + j)
    raise AssertionError(kind)


def _sizes(kind: str, rest: str, spec: str) -> tuple[int, list[int]]:
    """Parse the sizes after ``kind:``; returns (p, args) or raises GraphError naming the spec."""
    usage = {"path": "path:N", "ring": "ring:N", "star": "star:N", "complete": "complete:N", "wheel": "wheel:N",
             "mesh": "mesh:RxC", "torus": "torus:RxC", "bipartite": "bipartite:AxB", "tree": "tree:K:N"}[kind]
    bad = GraphError(f"graph spec {spec!r}: expected {usage} with positive integers")
    if kind in ("mesh", "torus", "bipartite"):
        m = _DIMS.fullmatch(rest)
        if m is None:
            raise bad
        args = [int(m.group(1)), int(m.group(2))]
    elif kind == "tree":
        parts = rest.split(":")
        if len(parts) != 2 or not all(_SIZE.fullmatch(x) for x in parts):
            raise bad
        args = [int(x) for x in parts]
    else:
        if not _SIZE.fullmatch(rest):
            raise bad
        args = [int(rest)]
    if min(args) < 1:
        raise bad
    p = args[0] * args[1] if kind in ("mesh", "torus") else (sum(args) if kind == "bipartite" else args[-1])
    if kind == "wheel" and p < 4:
        raise GraphError(f"graph spec {spec!r}: a wheel needs N ≥ 4 (hub and a rim of at least 3)")
    q = p * (p - 1) // 2 if kind == "complete" else (args[0] * args[1] if kind == "bipartite" else 2 * p)
    if p > MAX_PROCESSORS or q > MAX_EDGES:
        raise GraphError(f"graph spec {spec!r}: too large for the lab ({p} processors, about {q} edges)")
    return p, args


def _edge_file(path: Path, spec: str) -> tuple[int, NDArray[np.int64]]:
    text = read_text(path, f"graph file {spec!r}", error=GraphError)
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        data = parse_json(text, f"graph file {spec!r}", error=GraphError)
        if not isinstance(data, dict) or "edges" not in data:
            raise GraphError(f"graph file {spec!r}: JSON must be an object {{\"p\": ..., \"edges\": [[i, j], ...]}}")
        rows = data["edges"]
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
                for r in rows):
            raise GraphError(f"graph file {spec!r}: 'edges' must be a list of [i, j] integer pairs")
        if len(rows) > MAX_EDGES or not all(0 <= x < MAX_PROCESSORS for r in rows for x in r):
            raise GraphError(f"graph file {spec!r}: too large for the lab (at most {MAX_EDGES} edges between "
                             f"processors 0..{MAX_PROCESSORS - 1})")
        edges = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        p = data.get("p")
        if p is None:
            p = int(edges.max()) + 1 if edges.size else 1
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= MAX_PROCESSORS:
            raise GraphError(f"graph file {spec!r}: 'p' must be an integer in 1..{MAX_PROCESSORS}, got {p!r}")
        where = [f"edge {k}" for k in range(len(edges))]
    else:
        rows, where = [], []
        for lineno, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            tok = s.split()
            if len(tok) != 2 or not all(_SIZE.fullmatch(t) for t in tok):
                raise GraphError(f"graph file {spec!r}, line {lineno}: expected two processor numbers 'i j', "
                                 f"got {s[:40]!r}")
            rows.append((int(tok[0]), int(tok[1])))
            where.append(f"line {lineno}")
            if rows[-1][0] >= MAX_PROCESSORS or rows[-1][1] >= MAX_PROCESSORS or len(rows) > MAX_EDGES:
                raise GraphError(f"graph file {spec!r}, line {lineno}: too large for the lab (at most {MAX_EDGES} "
                                 f"edges between processors 0..{MAX_PROCESSORS - 1})")
        edges = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        p = int(edges.max()) + 1 if edges.size else 1
    if edges.size and (edges.min() < 0 or edges.max() >= p):
        k = int(np.flatnonzero((edges < 0).any(axis=1) | (edges >= p).any(axis=1))[0])
        raise GraphError(f"graph file {spec!r}, {where[k]}: processor out of range 0..{p - 1}")
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if loops.size:
        raise GraphError(f"graph file {spec!r}, {where[loops[0]]}: self loop {tuple(edges[loops[0]].tolist())}")
    if edges.size:
        _, first = np.unique(np.sort(edges, axis=1), axis=0, return_index=True)
        later = np.ones(len(edges), dtype=bool)
        later[first] = False
        if later.any():
            k = int(np.flatnonzero(later)[0])
            raise GraphError(f"graph file {spec!r}, {where[k]}: duplicate edge {tuple(edges[k].tolist())}")
    return p, edges


def _mesh_file_graph(rest: str, spec: str) -> ProcessorGraph:
    from hermes.data.io import read_mesh
    from hermes.data.partition import metis_partition

    path, sep, parts = rest.rpartition(":")
    if not sep or not path or not _SIZE.fullmatch(parts) or int(parts) < 1:
        raise GraphError(f"graph spec {spec!r}: expected mesh-file:PATH:P with P a positive integer")
    if int(parts) > MAX_PROCESSORS:
        raise GraphError(f"graph spec {spec!r}: too large for the lab ({int(parts)} parts, at most {MAX_PROCESSORS})")
    nparts = int(parts)
    try:
        mesh = read_mesh(path)
        owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, nparts, seed=0)
    except HermesError as err:
        raise GraphError(f"graph spec {spec!r}: {err}") from None
    edges, boundary = subdomain_graph(mesh.xadj, mesh.adjncy, owner)
    meta = {"mesh": str(path), "cells": mesh.n_cells, "parts": nparts,
            "part_cells": np.bincount(owner, minlength=nparts).tolist(),
            "part_weights": np.bincount(owner, weights=mesh.weights, minlength=nparts).tolist(),
            "boundary": boundary.tolist()}
    return ProcessorGraph(nparts, edges, spec, meta)


def parse_graph(spec: str) -> ProcessorGraph:
    """The processor graph of a spec (generators and files: see the module docstring).

    Raises
    ------
    GraphError
        Unknown kind, bad sizes, too large, unreadable or malformed file (one line naming the spec).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise GraphError(f"graph spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.lower()
    if sep and kind == "mesh-file":
        return _mesh_file_graph(rest, spec)
    if sep and kind in GRAPH_KINDS:
        p, args = _sizes(kind, rest.strip(), spec)
        return ProcessorGraph(p, _generated(kind, args), spec, {"kind": kind, "sizes": args})
    path = Path(spec)
    if _is(path, "dir"):
        raise GraphError(f"graph spec {spec!r}: a directory, not a graph file")
    if _is(path, "file"):
        p, edges = _edge_file(path, spec)
        return ProcessorGraph(p, edges, spec, {"kind": "file", "file": str(path)})
    raise GraphError(f"graph spec {spec!r}: not a generator ({', '.join(k + ':…' for k in GRAPH_KINDS)}) "
                     f"nor an existing file")


# -- vectors: capacities, weights, loads -------------------------------------------------------------
def _numbers_from_file(path: Path, what: str, spec: str) -> NDArray[np.float64]:
    text = read_text(path, f"{what} file {spec!r}")
    if path.suffix.lower() == ".json" or text.lstrip().startswith("["):
        data = parse_json(text, f"{what} file {spec!r}")
        if not isinstance(data, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                 for x in data):
            raise ScenarioError(f"{what} file {spec!r}: JSON must be a list of numbers")
        big = next((k for k, x in enumerate(data) if isinstance(x, int) and abs(x) > BIG), None)
        if big is not None:  # a 400-digit integer is no float: say so rather than overflow
            raise ScenarioError(f"{what} file {spec!r}: value {big} is beyond {BIG:g}")
        return np.asarray(data, dtype=np.float64)
    values = []
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#%":
            continue
        for tok in s.replace(",", " ").split():
            try:
                values.append(float(tok))
            except ValueError:
                raise ScenarioError(f"{what} file {spec!r}, line {lineno}: {tok[:20]!r} is not a number") from None
    return np.asarray(values, dtype=np.float64)


def _vector(spec, n: int, what: str, count: str, *, positive: bool) -> NDArray[np.float64] | None:
    """A list, a single number, a file or an array-like: ``n`` values (None if ``spec`` is a keyword)."""
    if not isinstance(spec, str):
        try:
            v = np.asarray(spec, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ScenarioError(f"{what}: expected a spec string or {n} numbers, got {type(spec).__name__}") from None
        shown = "array"
    else:
        shown = spec
        s = spec.strip()
        try:
            v = np.asarray([float(t) for t in s.split(",")], dtype=np.float64)
        except ValueError:
            path = Path(s)
            if not _is(path, "file"):
                return None
            v = _numbers_from_file(path, what, spec)
    if v.size == 1 and n != 1:
        v = np.full(n, v[0])
    if v.size != n:
        raise ScenarioError(f"{what} {shown!r}: need {n} values ({count}), got {v.size}")
    # hermes' rule for numbers (hermes.bounds): finite, and 0 (loads only) or of magnitude TINY to BIG
    bad = ~np.isfinite(v) | ((v < TINY) if positive else ((v < 0) | ((v > 0) & (v < TINY)))) | (v > BIG)
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        sign = f"positive (at least {TINY:g})" if positive else f"non-negative (0 or at least {TINY:g})"
        raise ScenarioError(f"{what} {shown!r}: value {k} must be {sign}, finite and at most {BIG:g}, got "
                            f"{format_number(v[k])}")
    if positive and v.size and v.max() > SPREAD_MAX * v.min():
        raise ScenarioError(f"{what} {shown!r}: the values span {v.max() / v.min():.3g}, more than {SPREAD_MAX:g} "
                            f"(the weighted Laplacian would be numerically singular)")
    return v


def parse_capacities(spec, p: int) -> NDArray[np.float64]:
    """Capacities of p processors, normalised to sum 1 (``homo``, ``hcuw``, list, number, file).

    Raises
    ------
    ScenarioError
        Unknown keyword, wrong count, non-positive value, unreadable file.
    """
    key = spec.strip().lower() if isinstance(spec, str) else None
    if key == "homo":
        c = np.ones(p)
    elif key == "hcuw":
        c = np.arange(p) % 4 + 1.0
    else:
        c = _vector(spec, p, "capacities", "one per processor", positive=True)
        if c is None:
            raise ScenarioError(f"capacities spec {spec!r}: expected homo, hcuw, a comma list of {p} numbers, "
                                f"a number or a file")
    return c / c.sum()


def parse_weights(spec, graph: ProcessorGraph) -> NDArray[np.float64]:
    """Edge weights of ``graph`` in its listing order (``1``, ``kmodM``, ``ijmodM``, ``boundary``, list, file).

    Raises
    ------
    ScenarioError
        Unknown keyword, ``boundary`` on a graph without boundaries, wrong count, non-positive value.
    """
    key = spec.strip().lower() if isinstance(spec, str) else None
    m = _MOD.fullmatch(key) if key else None
    if m is not None:
        mod = int(m.group(2))
        if mod < 1:
            raise ScenarioError(f"weights spec {spec!r}: the modulus must be at least 1")
        if m.group(1) == "k":
            return np.arange(graph.q) % mod + 1.0
        return (graph.edges[:, 0] + graph.edges[:, 1]) % mod + 1.0
    if key == "boundary":
        if "boundary" not in graph.meta:
            raise ScenarioError(f"weights spec 'boundary' needs a mesh-file graph, not {graph.spec!r}")
        return np.asarray(graph.meta["boundary"], dtype=np.float64)
    w = _vector(spec, graph.q, "weights", "one per edge, in listing order", positive=True)
    if w is None:
        raise ScenarioError(f"weights spec {spec!r}: expected 1, kmod4, ijmod3, boundary, a comma list of "
                            f"{graph.q} numbers or a file")
    return w


def parse_loads(spec, p: int) -> NDArray[np.float64]:
    """Loads of p processors (``one``, ``eq``, ``high``, ``half``, ``random:SEED``, list, number, file).

    Raises
    ------
    ScenarioError
        Unknown keyword, bad seed, wrong count, negative value, unreadable file.
    """
    key = spec.strip().lower() if isinstance(spec, str) else None
    if key == "one":
        loads = np.ones(p)
        loads[0] = 500.0 * p
        return loads
    if key == "eq":
        return np.full(p, 200.0 * p)
    if key == "high":
        loads = np.ones(p)
        loads[0] = 10.0
        return loads
    if key == "half":
        return np.where(np.arange(p) < -(-p // 2), 5.0, 1.0)
    if key is not None and key.startswith("random:"):
        seed = key[len("random:"):].strip()
        if not _SIZE.fullmatch(seed):
            raise ScenarioError(f"loads spec {spec!r}: expected random:SEED with SEED a non-negative integer")
        return np.random.default_rng(int(seed)).integers(1, 1001, size=p).astype(np.float64)
    loads = _vector(spec, p, "loads", "one per processor", positive=False)
    if loads is None:
        raise ScenarioError(f"loads spec {spec!r}: expected one of {', '.join(LOAD_KINDS)}, a comma list of "
                            f"{p} numbers, a number or a file")
    return loads


# -- the model -------------------------------------------------------------------------------------
def build_model(graph: ProcessorGraph, capacities, weights, loads) -> Model:
    """The model H = (G, l, c, w) of a parsed graph and the three other specs (or arrays).

    The weights are read in the graph's listing order; :meth:`Model.create` then orients and sorts
    the edges, carrying each weight with its edge.

    Raises
    ------
    GraphError
        The graph is disconnected (or otherwise unusable), naming its spec.
    ScenarioError
        A bad capacities, weights or loads spec.
    """
    c = parse_capacities(capacities, graph.p)
    w = parse_weights(weights, graph)
    l = parse_loads(loads, graph.p)
    try:
        return Model.create(graph.p, graph.edges, l, c, w)
    except GraphError as err:
        raise GraphError(f"graph {graph.spec!r}: {err}") from None


def parse_model(graph: str, capacities, weights, loads) -> Model:
    """:func:`build_model` of :func:`parse_graph` (``graph``): the four specs of ``hermes lab flow`` → Model."""
    return build_model(parse_graph(graph), capacities, weights, loads)
