"""Spanning-tree convergence detection of the practical FOS (Jeannot & Vernier, RR-5875, §3.3.2) and its costs.

The detection tree is a BFS spanning tree (:func:`bfs_tree`; in hermes rooted at a centre of the graph,
:func:`graph_center`, so that its height h is the radius), built on the ranks by a distributed BFS
(:func:`build_tree_rounds`); once per FOS iteration every rank exchanges one word with its tree neighbours
(:class:`TreeRounds`), and all ranks stop ``2h − 1`` rounds after the first iteration without transfers.
Also here: what :func:`~hermes.balance.diffusion.fos.fos_distributed` communicates, analytically
(:func:`fos_counters`) and replayed on per-rank α-β clocks for the serial reference (:class:`Replay`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.balance.model import Model
from hermes.runtime.clock import Links
from hermes.runtime.comm import Counters, NeighbourComm

__all__ = ["Tree", "LinkCosts", "bfs_tree", "graph_center", "fos_counters", "edge_costs"]


@dataclass(frozen=True)
class Tree:
    """One rank's view of the detection tree: depth, parent (−1 at the root), children, height h."""

    depth: int
    parent: int
    children: tuple[int, ...]
    height: int


def bfs_tree(model: Model, root: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """BFS spanning tree ``(parent, depth)``; a parent is the smallest-numbered neighbour one layer up."""
    depth = np.full(model.p, -1, dtype=np.int64)
    parent = np.full(model.p, -1, dtype=np.int64)
    depth[root], frontier = 0, [root]
    while frontier:
        nxt = []
        for i in frontier:
            for j in model.neighbours[i].tolist():
                if depth[j] < 0:
                    depth[j], parent[j] = depth[i] + 1, i
                    nxt.append(j)
        frontier = sorted(nxt)
    return parent, depth


def graph_center(model: Model) -> int:
    """Smallest-numbered vertex of least eccentricity: where 001 §3.3.2's leaf-started waves meet."""
    if model.p < 2:
        return 0
    e = model.edges
    adj = sp.csr_array((np.ones(model.q), (e[:, 0], e[:, 1])), shape=(model.p, model.p))
    return int(np.argmin(sp.csgraph.shortest_path(adj, directed=False, unweighted=True).max(axis=1)))


def build_tree_rounds(nb: NeighbourComm, root: int) -> Tree:
    """Distributed BFS from ``root`` (collective): rounds of distance exchanges until an allreduce(max)
    of the distances is finite (it is then the height), then one exchange of parent flags."""
    dist, parent = (0.0 if nb.rank == root else math.inf), -1
    while not math.isfinite(top := float(nb.allreduce(dist, op="max"))):
        got = nb.exchange_scalar(dist)
        if not math.isfinite(dist) and len(got) and math.isfinite(got.min()):
            dist, parent = float(got.min()) + 1.0, int(nb.neighbours[int(np.argmin(got))])
    got = nb.exchange((nb.neighbours == parent).astype(np.float64), recv_sizes=np.ones(len(nb.neighbours)))
    children = tuple(int(j) for j, v in zip(nb.neighbours, got) if v[0] > 0.5)
    return Tree(int(dist), parent, children, int(top))


class TreeRounds:
    """One rank's side of the synchronous detection of 001 §3.3.2 (one tree exchange per iteration).

    In round t a rank at depth d sends its parent ``A(t) = s(t − h + d) ∧ A_children(t − 1)`` (s: no
    transfer in that iteration), so the root holds ``∧_i s_i(t − h)``; when that is true it sends
    ``S = t + h − 1`` down, which reaches depth h in round S. With ``times`` a second word carries the
    iteration time the same way (up: the subtree's max, down: the root's global ``T(t − h)``), so every
    rank knows ``T(j)`` after round ``j + 2h − 1``. Words of −1 mean "not defined yet".
    """

    def __init__(self, nb: NeighbourComm, tree: Tree, times: bool):
        self.tree, self.times, self.stop, self.messages = tree, times, None, 0
        nbrs = sorted(tree.children + ((tree.parent,) if tree.parent >= 0 else ()))
        self.comm = NeighbourComm(nb.comm, np.array(nbrs, dtype=np.int64), nb.clock, nb.counters)
        self.is_child = np.isin(self.comm.neighbours, tree.children)
        self.child_ok = np.zeros(len(tree.children), dtype=bool)
        self.child_t = np.full(len(tree.children), -1.0)
        self.quiet: deque[bool] = deque(maxlen=tree.height - tree.depth + 1)
        self.tau: deque[float] = deque(maxlen=tree.height - tree.depth + 1)
        self.known: dict[int, float] = {}  # global T(j) known here

    def round(self, n: int, quiet: bool, tau: float) -> None:
        tr, h, d = self.tree, self.tree.height, self.tree.depth
        self.quiet.append(quiet)
        self.tau.append(tau)
        full = len(self.quiet) == self.quiet.maxlen
        up = full and self.quiet[0] and bool(self.child_ok.all())
        if tr.parent < 0 and self.stop is None and up:
            self.stop = n + max(h - 1, 0)
        up_t = max(self.tau[0], float(np.max(self.child_t, initial=-1.0))) if full and self.times else -1.0
        if tr.parent < 0 and up_t >= 0:
            self.known[n - h] = up_t
        down_t = self.known.get(n - h - d, -1.0)
        words = [[float(self.stop or 0), down_t] if c else [float(up), up_t] for c in self.is_child]
        nw = 2 if self.times else 1
        got = self.comm.exchange([np.array(x[:nw]) for x in words], recv_sizes=np.full(len(words), nw))
        self.messages += len(words)
        recv = np.array([x for v in got for x in v], dtype=np.float64).reshape(-1, nw)
        self.child_ok, self.child_t = recv[self.is_child, 0] > 0.5, recv[self.is_child, nw - 1]
        if tr.parent >= 0:
            par = recv[~self.is_child][0]
            self.stop = int(par[0]) if self.stop is None and par[0] > 0 else self.stop
            if self.times and par[1] >= 0:
                self.known[n - h - d + 1] = float(par[1])


# -- what the practical FOS communicates ------------------------------------------------------------------
def fos_counters(model: Model, iterations: int, *, detection: bool = True, shaker: bool = False,
                 halving: bool = False, height: int = 0, build_tree: bool = True) -> tuple[Counters, int]:
    """Counters of :func:`~hermes.balance.diffusion.fos.fos_distributed` after ``iterations``, and its detection
    messages.

    Notes
    -----
    Setup: one allreduce of (l_i, error flag), then the M_r handshake: one exchange of the speed C_i
    and one of δ_i (001 Alg. 1 sends Mr_ij and rescales; δ_i carries the same information). Building
    the tree (detection and ``build_tree``): a BFS from the root, allreduce(max) of the distances and
    then h times (exchange of distances, allreduce), plus one exchange of parent flags. Per iteration:
    one exchange of w_i (both ends then evaluate the pair's FOS transfer identically), with the shaker
    one exchange of the amounts sent, with detection one exchange on the tree edges (with "halving"
    two words: the iteration time rides along). Other messages are one word. With n iterations,
    B = build, D = detection, S = shaker, H = halving, p ranks, q edges, h the tree height:

    * ``exchange_rounds = 2 + B (h + 1) + n (1 + S + D)``, ``collectives = {"allreduce": 1 + B (h + 1)}``;
    * ``messages = 4q + B·2q(h + 1) + n (2q (1 + S) + D·2(p − 1))``;
    * ``bytes = 16p + 8p·B(h + 1) + 8 (messages + H·D·2(p − 1) n)``;
    * detection messages ``B·2q(h + 1) + D·2(p − 1) n`` (tree build + tree rounds).
    """
    n, p, q, h = int(iterations), model.p, model.q, int(height)
    d, s, hv = int(bool(detection)), int(bool(shaker)), int(bool(halving))
    bld = d * int(bool(build_tree))
    msgs = 4 * q + bld * 2 * q * (h + 1) + n * (2 * q * (1 + s) + d * 2 * (p - 1))
    counters = Counters(iterations=n, exchange_rounds=2 + bld * (h + 1) + n * (1 + s + d),
                        collectives={"allreduce": 1 + bld * (h + 1)}, messages=msgs,
                        bytes=16 * p + 8 * p * bld * (h + 1) + 8 * (msgs + hv * d * 2 * (p - 1) * n))
    return counters, bld * 2 * q * (h + 1) + d * 2 * (p - 1) * n


class LinkCosts(NamedTuple):
    """Latency (s) and bandwidth (bytes/s) of each link: of every edge (:func:`edge_costs`) or of a rank's link
    to each neighbour (:func:`~hermes.balance.diffusion.fos.fos_distributed`)."""

    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64]


def edge_costs(model: Model, links) -> LinkCosts:
    """Latency (s) and bandwidth (bytes/s) of every edge (see :mod:`hermes.balance.diffusion.fos`)."""
    if links is None:
        return LinkCosts(np.full(model.q, Links().latency), Links().bandwidth * model.weights)
    par = np.array([links.params(int(i), int(j)) for i, j in model.edges.tolist()], dtype=np.float64)
    return LinkCosts(par.reshape(-1, 2)[:, 0].copy(), par.reshape(-1, 2)[:, 1].copy())


class Replay:
    """Per-rank α-β clocks of the schedule, charged as :class:`~hermes.runtime.clock.VirtualClock` does."""

    def __init__(self, model: Model, links):
        e = model.edges
        self.p, self.links = model.p, links
        self.src, self.dst = np.concatenate([e[:, 0], e[:, 1]]), np.concatenate([e[:, 1], e[:, 0]])
        lat, bw = edge_costs(model, links)
        self.alpha, self.bw = np.concatenate([lat, lat]), np.concatenate([bw, bw])
        self.t = np.zeros(model.p)

    def exchange(self, mask=None, words: int = 1) -> None:
        sel = slice(None) if mask is None else np.concatenate([mask, mask])
        src, cost = self.src[sel], self.alpha[sel] + 8.0 * words / self.bw[sel]
        own, last = np.zeros(self.p), np.full(self.p, -np.inf)
        np.maximum.at(own, src, cost)
        np.maximum.at(last, self.dst[sel], self.t[src] + cost)
        self.t = np.maximum(self.t + own, last)

    def allreduce(self, words: int = 1) -> None:
        self.t = np.full(self.p, float(np.max(self.t)) + self.links.collective_cost(self.p, 8.0 * words))
