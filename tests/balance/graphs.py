"""Random processor graphs and balancing models shared by the balancer tests."""

from __future__ import annotations

import numpy as np

from hermes.balance.model import Model

KINDS = ["tree", "tree+", "path", "ring", "mesh", "star"]


def graph_edges(kind: str, p: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges of a connected graph on p vertices (mesh: the closest r×s grid with r·s = p)."""
    if kind == "path":
        return [(i, i + 1) for i in range(p - 1)]
    if kind == "ring":
        return [(i, (i + 1) % p) for i in range(p)] if p > 2 else [(0, 1)][: p - 1]
    if kind == "star":
        return [(0, i) for i in range(1, p)]
    if kind == "mesh":
        r = max(d for d in range(1, int(np.sqrt(p)) + 1) if p % d == 0)
        idx = np.arange(p).reshape(r, p // r)
        return ([(int(a), int(b)) for a, b in zip(idx[:, :-1].ravel(), idx[:, 1:].ravel())]
                + [(int(a), int(b)) for a, b in zip(idx[:-1].ravel(), idx[1:].ravel())])
    edges = {(int(rng.integers(0, i)), i) for i in range(1, p)}
    if kind == "tree+":
        for _ in range(p):
            i, j = sorted(int(v) for v in rng.choice(p, size=2, replace=False))
            edges.add((i, j))
    return sorted(edges)


def _edges_and_loads(kind: str, p: int, seed: int) -> tuple[np.random.Generator, list[tuple[int, int]], np.ndarray]:
    """The seeded generator, a ``kind`` graph on p vertices and loads in [0, 10) (about 20 % zero)."""
    rng = np.random.default_rng(seed)
    edges = graph_edges(kind, p, rng)
    loads = rng.uniform(0.0, 10.0, p)
    loads[rng.random(p) < 0.2] = 0.0
    return rng, edges, loads


def random_model(kind: str, p: int, seed: int, *, homogeneous: bool = False) -> Model:
    """Random loads, then capacities in [0.5, 3) and edge weights in [0.2, 1) (``homogeneous``: all 1)."""
    rng, edges, loads = _edges_and_loads(kind, p, seed)
    if homogeneous:
        return Model.create(p, edges, loads, np.ones(p))
    return Model.create(p, edges, loads, rng.uniform(0.5, 3.0, p), rng.uniform(0.2, 1.0, len(edges)))


def random_weighted_model(kind: str, p: int, seed: int, *, unit_weights: bool = False) -> Model:
    """Like :func:`random_model`, but the edge weights are drawn *before* the capacities.

    A different random stream from :func:`random_model` for the same seed (the PCG tests were tuned
    on it); ``unit_weights`` keeps the random capacities but sets every edge weight to 1.
    """
    rng, edges, loads = _edges_and_loads(kind, p, seed)
    weights = None if unit_weights else rng.uniform(0.2, 1.0, len(edges))
    return Model.create(p, edges, loads, rng.uniform(0.5, 3.0, p), weights)


def disconnected_model() -> Model:
    """Two separate edges on 4 vertices, built with ``check_connected=False``."""
    return Model.create(4, [(0, 1), (2, 3)], np.ones(4), np.ones(4), check_connected=False)


def zero_capacity_model() -> Model:
    """A 3-path whose middle capacity is 0, through the raw constructor (``Model.create`` rejects it)."""
    return Model(3, np.array([[0, 1], [1, 2]]), np.ones(3), np.array([0.5, 0.0, 0.5]), np.ones(2))


def unusable_models() -> list[tuple[Model, str]]:
    """Models every balancer must reject with a :class:`GraphError`, each with the message it matches."""
    return [(disconnected_model(), "disconnected"), (zero_capacity_model(), "capacity")]
