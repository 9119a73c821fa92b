"""Which cells realise a flow: the heterogeneous gain function of thesis §10.1.

For a cell v in subdomain S_p and a target subdomain S_q,

    g(v, q) = Σ_i |e_i(v)| (w̃_pi − w̃_qi),

where ``e_i(v)`` are v's edges to cells in S_i and ``w̃`` is the p×p link-cost matrix (``w̃_ij`` the
cost of the link {i, j} when i and j are adjacent in the subdomain graph, 0 otherwise; 0 on the
diagonal). In the homogeneous case it reduces to ``|e_q(v)| − |e_p(v)|`` (plus terms for third
subdomains), the classical edge-cut gain. The thesis defines ``w̃`` with the model's weights ``w_k``;
hermes uses link *costs* here (relative per-byte time, ``bandwidth_max / bandwidth``), because the
gain measures communication cost while the model's weights are conductances. On a uniform network
both readings coincide.

The boundary is peeled in rounds: each round ranks the current candidates (cells at home that touch
S_q, counting cells already chosen for q as part of S_q) by decreasing gain (ties by global id, so the
choice is deterministic) and takes them while the moved weight gets closer to the flow. Cells chosen
for q expose new candidates for the next round.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hermes.data.distributed import LocalDomain

__all__ = ["gain", "select_gain"]


def gain(dom: LocalDomain, owner_of_edge: NDArray[np.int64], cells: NDArray[np.int64], q: int,
         cost: NDArray[np.float64]) -> NDArray[np.float64]:
    """g(v, q) for the local cells ``cells`` given the (current) owner of every adjacency entry."""
    p = dom.rank
    term = cost[p, owner_of_edge] - cost[q, owner_of_edge]
    per_cell = np.bincount(dom.rows, weights=term, minlength=dom.n)
    return per_cell[cells]


def select_gain(dom: LocalDomain, outflow: dict[int, float], cost: NDArray[np.float64],
                *, max_rounds: int = 10_000) -> NDArray[np.int64]:
    """Destination rank of every local cell so that about ``outflow[q]`` weight goes to each q.

    Every round, each home cell that touches a target still short of its flow is offered to its
    *preferred* target — the one maximising the gain among the targets it fits (thesis §10.1, the
    preference function ``f(v) = argmax_q g(v, q)``) — and each target takes its offered cells in decreasing gain order
    while the moved weight gets closer to its flow. All targets are served in the same round, so a
    large flow cannot starve a smaller one of its boundary cells. At least one cell stays home.

    Returns
    -------
    dest : array of int64, one rank per local cell (``dom.rank`` = stays).
    """
    me = dom.rank
    dest = np.full(dom.n, me, dtype=np.int64)
    li = dom.local_index
    local_entry = li >= 0
    w = dom.weight
    targets = np.array(sorted(outflow), dtype=np.int64)
    remaining = np.array([float(outflow[q]) for q in targets])
    for _ in range(max_rounds):
        active = remaining > 0
        if not active.any():
            break
        owner = dom.nbr_owner.copy()
        owner[local_entry] = dest[li[local_entry]]
        home = dest == me
        n_home = int(home.sum())
        # best gain of each home cell over the active targets it touches
        best_gain = np.full(dom.n, -np.inf)
        best_q = np.full(dom.n, -1, dtype=np.int64)
        for t in np.flatnonzero(active):
            q = int(targets[t])
            touches = np.zeros(dom.n, dtype=bool)
            touches[dom.rows[owner == q]] = True
            # offer a cell only where it fits: moving it must bring the target closer to its flow
            cand = np.flatnonzero(touches & home & (0.5 * w <= remaining[t]))
            if cand.size == 0:
                continue
            g = gain(dom, owner, cand, q, cost)
            better = g > best_gain[cand]
            best_gain[cand[better]] = g[better]
            best_q[cand[better]] = t
        progress = False
        for t in np.flatnonzero(active):
            cand = np.flatnonzero(best_q == t)
            if cand.size == 0 or n_home <= 1:
                continue
            cand = cand[np.lexsort((dom.gid[cand], -best_gain[cand]))]
            cum = np.cumsum(w[cand])
            take = (cum - 0.5 * w[cand]) <= remaining[t]
            k = int(np.argmin(take)) if not take.all() else take.size
            k = min(k, n_home - 1)
            if k <= 0:
                continue
            chosen = cand[:k]
            dest[chosen] = targets[t]
            remaining[t] -= float(w[chosen].sum())
            n_home -= k
            progress = True
        if not progress:
            break
    return dest
