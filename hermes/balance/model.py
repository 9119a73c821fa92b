"""The heterogeneous model H = (G, l, c, w) of thesis §4.5 / JPDC §2.

G is the processor (subdomain) graph with p vertices and q edges, l the loads, c the capacities
(normalised to sum 1), w the edge weights. The fair load is ``l̄ = c · Σ l``. A flow ``f`` on the
edges is a *balancing flow* if ``A f = l − l̄`` where ``A`` is the p×q incidence matrix with
``+1`` at the tail ``edges[k, 0]`` and ``−1`` at the head ``edges[k, 1]`` (so ``f[k] > 0`` moves
load from ``edges[k, 0]`` to ``edges[k, 1]``).

The edge weight ``w_k`` plays the role of a conductance: the minimal flow minimises
``Σ f_k² / w_k`` (thesis Th. 19–20), so a larger weight lets more load cross that edge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.errors import GraphError
from hermes.metrics import imbalance

T = TypeVar("T")

__all__ = ["Model", "derived", "edge_values"]


@dataclass(frozen=True, eq=False)
class Model:
    """H = (G, l, c, w) on processors ``0..p-1``.

    Attributes
    ----------
    p : int
        Number of processors.
    edges : ndarray of int64, shape (q, 2)
        Undirected edges with ``edges[k, 0] < edges[k, 1]``, sorted lexicographically.
    loads : ndarray of float64, shape (p,)
    capacities : ndarray of float64, shape (p,)
        Normalised to sum 1 by :meth:`create`.
    weights : ndarray of float64, shape (q,)
        Positive edge weights (conductances).

    Examples
    --------
    Three processors in a line, the first twice as fast as the others:

    >>> from hermes.balance.model import Model
    >>> m = Model.create(3, [(1, 2), (1, 0)], loads=[0, 8, 0], capacities=[2, 1, 1])
    >>> m.edges.tolist(), m.capacities.tolist()
    ([[0, 1], [1, 2]], [0.5, 0.25, 0.25])
    >>> m.fair_loads.tolist(), m.imbalance
    ([4.0, 2.0, 2.0], 4.0)
    >>> m.degree.tolist()
    [1, 2, 1]
    """

    p: int
    edges: NDArray[np.int64]
    loads: NDArray[np.float64]
    capacities: NDArray[np.float64]
    weights: NDArray[np.float64]

    @classmethod
    def create(cls, p: int, edges, loads, capacities, weights=None, *, check_connected: bool = True) -> Model:
        """Validate and normalise: edges oriented i<j and sorted, capacities summing to 1.

        Raises
        ------
        GraphError
            On a bad shape, an out-of-range or duplicate edge, a non-positive capacity or weight,
            a negative load, or (by default) a disconnected graph.
        """
        p = int(p)
        if p < 1:
            raise GraphError("a model needs at least one processor")
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        w = np.ones(len(e)) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.shape != (len(e),):
            raise GraphError(f"{len(w)} edge weights for {len(e)} edges")
        if len(e) and (e.min() < 0 or e.max() >= p):
            raise GraphError(f"edge endpoint out of range 0..{p - 1}")
        if np.any(e[:, 0] == e[:, 1]):
            raise GraphError("processor graph has a self loop")
        e = np.sort(e, axis=1)
        order = np.lexsort((e[:, 1], e[:, 0]))
        e, w = e[order], w[order]
        if len(e) > 1 and np.any(np.all(e[1:] == e[:-1], axis=1)):
            raise GraphError("processor graph has a duplicate edge")
        if np.any(~np.isfinite(w)) or np.any(w <= 0):
            raise GraphError("edge weights must be positive")
        l = np.asarray(loads, dtype=np.float64).reshape(-1)
        c = np.asarray(capacities, dtype=np.float64).reshape(-1)
        if l.shape != (p,) or c.shape != (p,):
            raise GraphError(f"need {p} loads and {p} capacities, got {l.size} and {c.size}")
        if np.any(~np.isfinite(l)) or np.any(l < 0):
            raise GraphError("loads must be non-negative")
        if np.any(~np.isfinite(c)) or np.any(c <= 0):
            bad = int(np.flatnonzero(~((c > 0) & np.isfinite(c)))[0])
            raise GraphError(f"capacity of processor {bad} must be positive and finite, got {c[bad]}")
        model = cls(p=p, edges=e, loads=l, capacities=c / c.sum(), weights=w)
        if check_connected and not model.is_connected:
            raise GraphError("processor graph is disconnected")
        return model

    # -- derived quantities -------------------------------------------------------------------
    @property
    def q(self) -> int:
        return int(len(self.edges))

    @cached_property
    def fair_loads(self) -> NDArray[np.float64]:
        """``l̄ = c Σ l``."""
        return self.capacities * self.loads.sum()

    @cached_property
    def incidence(self) -> sp.csr_array:
        """p×q incidence matrix A: +1 at the tail ``edges[k,0]``, −1 at the head ``edges[k,1]``."""
        k = np.arange(self.q)
        rows = np.concatenate([self.edges[:, 0], self.edges[:, 1]])
        cols = np.concatenate([k, k])
        vals = np.concatenate([np.ones(self.q), -np.ones(self.q)])
        return sp.csr_array((vals, (rows, cols)), shape=(self.p, self.q))

    @cached_property
    def laplacian(self) -> sp.csr_array:
        """Weighted Laplacian ``L = A W Aᵀ``."""
        a = self.incidence
        return (a @ sp.diags_array(self.weights) @ a.T).tocsr()

    @cached_property
    def weighted_degree(self) -> NDArray[np.float64]:
        """δ_i^w = Σ_{k ∋ i} w_k."""
        return np.bincount(self.edges.ravel(), weights=np.repeat(self.weights, 2), minlength=self.p)

    @cached_property
    def degree(self) -> NDArray[np.int64]:
        return np.bincount(self.edges.ravel(), minlength=self.p)

    @cached_property
    def diameter(self) -> int:
        """The hop diameter of G: the most edges on a shortest path between two processors (0 for p < 2; of a
        disconnected G, the largest finite distance). Breadth-first from every vertex, O(p q)."""
        if self.p < 2 or self.q == 0:
            return 0
        adj = sp.csr_array((np.ones(self.q), (self.edges[:, 0], self.edges[:, 1])), shape=(self.p, self.p))
        dist = sp.csgraph.shortest_path(adj, method="D", directed=False, unweighted=True)
        return int(np.max(dist[np.isfinite(dist)]))

    @cached_property
    def is_connected(self) -> bool:
        if self.p == 1:
            return True
        ncomp, _ = sp.csgraph.connected_components(self.laplacian, directed=False)
        return ncomp == 1

    @cached_property
    def neighbours(self) -> list[NDArray[np.int64]]:
        """Sorted neighbour list of each processor."""
        out: list[list[int]] = [[] for _ in range(self.p)]
        for i, j in self.edges.tolist():
            out[i].append(j)
            out[j].append(i)
        return [np.array(sorted(x), dtype=np.int64) for x in out]

    @property
    def imbalance(self) -> float:
        return imbalance(self.loads, self.capacities)

    def apply_flow(self, flow: NDArray[np.float64]) -> NDArray[np.float64]:
        """Loads after moving ``flow`` (``l − A f``)."""
        return self.loads - self.incidence @ np.asarray(flow, dtype=np.float64)

    def with_loads(self, loads) -> Model:
        return Model(self.p, self.edges, np.asarray(loads, dtype=np.float64), self.capacities, self.weights)


def derived(model: Model, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` — a value computed from ``model`` and inputs that are the same on every rank — once per model
    object and ``key``, as the model's cached properties are: processors hosted together share one model
    (:func:`hermes.lifecycle.phase.monitor`), so 1,024 of them compute a spectrum or a serial estimate once instead of
    1,024 times. The value is shared: give out copies of mutable ones."""
    memo = model.__dict__.setdefault("_derived", {})
    if key not in memo:
        memo[key] = build()
    return memo[key]


def edge_values(comm, rank: int, neighbours, values, edges, default: float | None = None) -> NDArray[np.float64]:
    """Per-neighbour values of every rank (``values[t]`` for the edge to ``neighbours[t]``, each edge reported by
    its lower endpoint) gathered into one array in the order of ``edges`` (collective bookkeeping: one
    ``comm.allgather``, uncharged). An edge nobody reported takes ``default`` (None: a KeyError). ``comm`` is a
    runtime communicator (:class:`hermes.runtime.communicator.Communicator`)."""
    # a tuple of tuples: hosted processors share the gathered values and assemble them once (shared_value)
    mine = tuple((rank, int(j), float(v)) for j, v in zip(neighbours, values) if rank < j)
    gathered = comm.allgather(mine)

    def build() -> NDArray[np.float64]:
        table = {(i, j): v for part in gathered for i, j, v in part}
        key = (lambda e: table[e]) if default is None else (lambda e: table.get(e, default))
        return np.array([key((int(i), int(j))) for i, j in edges], dtype=np.float64)

    edges = np.asarray(edges)
    return comm.shared_value(f"edge-values-{default}", gathered, edges, build).copy()
