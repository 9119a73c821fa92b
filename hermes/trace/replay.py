"""``hermes trace replay``: any balancer of the registry on the phases of a real application's trace.

Each phase of the trace is balanced on its own, from the assignment the trace records (as LBAF analyses a
phase): the objects (tasks) are the units, their times the loads, the ranks the processors (homogeneous
unless capacities are given). Per algorithm:

- a **flow balancer** (every registry entry with a serial reference: pcg, chebyshev, gda*, mincost, ...)
  computes its flow on the processor graph — the ranks whose objects communicate (``graph: comm``), every
  pair of ranks (``full``), or ``auto``: the communication graph when it is connected, else the full graph —
  in the rounds ``hermes run`` would run, each flow realised by choosing objects
  (:func:`realise_flow_on_objects`, within a memory limit if one is given) or, on a trace hermes wrote, by
  hermes' own cell selection on the objects' centroids;
- ``grapevine`` runs the gossip of the Sandia report on the objects (its serial form, the full graph; objects
  that cannot move count in their rank's load and are never offered);
- ``informandtransfer`` is LBAF's InformAndTransfer (:mod:`hermes.trace.informandtransfer`: gossip, then
  Clustering or Recursive transfers under the Tempered or StrictLocalizing criterion, the memory limit through
  the work model; its own ``seed``, LBAF's 146 by default, not the replay's);
- ``metis`` partitions the migratable objects' communication graph (bytes as edge weights, loads as vertex
  weights) from scratch into parts sized for each rank's fair share less what stays on it, relabelled to keep
  the most load in place; ``scotch`` remaps it with Scotch;
- ``none`` leaves the assignment as it is.

Objects that are not migratable stay put whatever the algorithm. Per phase the figures of
:func:`hermes.trace.workmodel.phase_figures` are computed before and after (:class:`ReplayResult`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.bounds import BIG, MAX_PHASES, MAX_SEED, MAX_TRACE_TASKS, NumberRange, shown
from hermes.errors import BalancerError, GraphError
from hermes.progress import Progress, quiet
from hermes.trace.trace_phase import Trace, TracePhase
from hermes.trace.workmodel import FIGURES, WorkModel, phase_figures

__all__ = ["ReplayResult", "ReplayTable", "replay", "replay_trace", "replay_phase", "check_options", "check_params",
           "realise_flow_on_objects", "processor_graph", "object_graph", "REPLAY_SPECIAL", "replay_algorithms"]

#: the most ranks a flow balancer's serial reference is given (the offline lab's limit, hermes.lab.flow_lab: their
#: set-up grows faster than p²)
MAX_FLOW_RANKS = 2048
#: a rank's relative speed (hermes' rule for numbers: positive, 1e-100 to 1e100), the largest at most SPREAD_MAX
#: times the smallest, as in the flow lab (hermes.lab.specs)
CAPACITY_RANGE = NumberRange(0, BIG, lo_open=True)
SPREAD_MAX = 1e12
#: balancer.trigger's range (hermes.sections.BalancerSpec)
TRIGGER_RANGE = NumberRange(1, 1e6)
#: the most phases one replay balances (``hermes trace replay``, a trace experiment's run): a run's bound on phases
#: (hermes.bounds.MAX_PHASES), as a replay writes a row per phase and algorithm
MAX_REPLAY_PHASES = MAX_PHASES
#: the most tasks of a phase a replay balances: as many as hermes writes into a trace of a run
#: (hermes.bounds.MAX_TRACE_TASKS); realising a flow by choosing objects costs a pass over the rank's objects per
#: object moved (10⁵ tasks on 8 ranks: 3 s for pcg)
MAX_REPLAY_TASKS = MAX_TRACE_TASKS
#: what follows a balancer under a memory limit (:mod:`hermes.trace.memorybound`): the repair and the refinement,
#: the repair only, or nothing (the balancer's assignment as it is, the ranks above the limit counted)
MEMORY_STEPS = ("refine", "repair", "off")
#: algorithms replayed by their own serial code rather than a flow
REPLAY_SPECIAL = ("none", "grapevine", "metis", "scotch", "informandtransfer")


def replay_algorithms() -> list[str]:
    """The registry's balancers ``hermes trace replay`` runs: those with a serial reference and
    :data:`REPLAY_SPECIAL`."""
    from hermes.balance.registry import all_balancers

    return sorted(n for n, info in all_balancers().items() if info.serial is not None or n in REPLAY_SPECIAL)


# -- graphs ---------------------------------------------------------------------------------------------------
def object_graph(ph: TracePhase) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The symmetric CSR graph of the phase's tasks (positions in ``ph.ids``) whose edges are their
    communications, weighted by the bytes both ways (communications with an endpoint that is not a task, and
    an object's messages to itself, are left out)."""
    n = ph.n_tasks
    if n == 0 or ph.comm_from.size == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    a, a_ok, b, b_ok = ph.endpoints()
    keep = a_ok & b_ok & (a != b)
    a, b, w = a[keep], b[keep], ph.comm_bytes[keep]
    from scipy.sparse import coo_matrix

    m = coo_matrix((np.concatenate([w, w]), (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data.astype(np.float64)


def processor_graph(ph: TracePhase, kind: str = "auto") -> tuple[NDArray[np.int64], str]:
    """Edges (i < j, sorted) of the processor graph and the kind used: ``comm`` (ranks whose tasks exchange
    messages in the phase; a communication with an endpoint that is no task of the phase joins no ranks, as it
    counts in no figure), ``full`` (every pair) or ``auto`` (comm when connected, else full)."""
    p = ph.n_ranks
    if kind not in ("auto", "comm", "full"):
        raise GraphError(f"--graph {kind!r}: expected auto, comm or full")
    iu = np.triu_indices(p, 1)
    full = np.stack([iu[0], iu[1]], axis=1).astype(np.int64)
    if kind == "full":
        return full, "full"
    _, a_ok, _, b_ok = ph.endpoints()  # communications between tasks of the phase (LBAF's model)
    fr, tr = ph.comm_from_rank[a_ok & b_ok], ph.comm_to_rank[a_ok & b_ok]
    off = fr != tr
    pairs = np.unique(np.sort(np.stack([fr[off], tr[off]], axis=1), axis=1), axis=0) if off.any() else \
        np.zeros((0, 2), dtype=np.int64)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    adj = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(p, p)) if len(pairs) else \
        coo_matrix((p, p))
    ncomp = connected_components(adj, directed=False)[0] if p else 0
    if ncomp <= 1:
        return pairs.astype(np.int64), "comm"
    if kind == "comm":
        raise GraphError(f"phase {ph.phase}: the ranks' communication graph has {ncomp} components (a flow cannot "
                         f"cross between them); replay with --graph full or auto")
    return full, "full"


# -- realising a flow by choosing objects -------------------------------------------------------------------------
def _flow_order(p: int, edges: NDArray[np.int64], flow: NDArray[np.float64]) -> list[int]:
    """The ranks in a topological order of the directed flow (a cycle, which a potential flow does not have, is
    broken at the rank with the least inflow still to come)."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(p)]
    indeg = np.zeros(p, dtype=np.int64)
    for (i, j), f in zip(edges.tolist(), flow.tolist()):
        if f > 0:
            out[i].append((j, f))
            indeg[j] += 1
        elif f < 0:
            out[j].append((i, -f))
            indeg[i] += 1
    done = np.zeros(p, dtype=bool)
    order: list[int] = []
    ready = [r for r in range(p) if indeg[r] == 0]
    while len(order) < p:
        if not ready:
            rest = np.flatnonzero(~done)
            ready = [int(rest[np.argmin(indeg[rest])])]
        r = ready.pop(0)
        if done[r]:
            continue
        done[r] = True
        order.append(r)
        for j, _ in out[r]:
            indeg[j] -= 1
            if indeg[j] == 0 and not done[j]:
                ready.append(j)
    return order


def _affinity(cand: NDArray[np.int64], j: int, i: int, r: NDArray[np.int64], xadj: NDArray[np.int64],
              adjncy: NDArray[np.int64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Bytes each candidate exchanges with objects on rank ``j`` minus those with objects on rank ``i``."""
    if adjncy.size == 0:
        return np.zeros(cand.size)
    starts, ends = xadj[cand], xadj[cand + 1]
    counts = ends - starts
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
    nb_rank = r[adjncy[idx]]
    sign = np.where(nb_rank == j, 1.0, np.where(nb_rank == i, -1.0, 0.0)) * w[idx]
    owner = np.repeat(np.arange(cand.size), counts)
    return np.bincount(owner, weights=sign, minlength=cand.size)


def _best(mask: NDArray[np.bool_], gain: NDArray[np.float64]) -> int:
    """The position of the largest ``gain`` where ``mask`` (the first among equals): the first of the masked
    positions stably sorted by decreasing gain."""
    g = np.where(mask, gain, -np.inf)
    return int(np.flatnonzero(mask & (g == g.max()))[0])


class _Gains:
    """The affinity (:func:`_affinity`) of every object of a rank's pool to each target the realisation asks
    for, kept up to date as objects leave: a move changes only its neighbours' affinities, which are computed
    again — each from scratch, as one :func:`_affinity` call over the whole pool would, so the values are the
    same to the last bit — when their target is next asked for. At most ``keep`` targets are kept."""

    def __init__(self, pool: NDArray[np.int64], i: int, r: NDArray[np.int64],
                 graph: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]], keep: int = 16) -> None:
        self.pool, self.i, self.r, self.graph, self.keep = pool, i, r, graph, keep
        self.order = np.argsort(pool, kind="stable")
        self.cache: dict[int, NDArray[np.float64]] = {}
        self.stale: dict[int, list[NDArray[np.int64]]] = {}

    def to(self, j: int) -> NDArray[np.float64]:
        xadj, adjncy, w = self.graph
        if adjncy.size == 0:
            return np.zeros(self.pool.size)
        if j in self.cache:
            g = self.cache.pop(j)
            parts = self.stale.pop(j)
            if parts:
                idx = np.unique(np.concatenate(parts))
                g[idx] = _affinity(self.pool[idx], j, self.i, self.r, xadj, adjncy, w)
        else:
            g = _affinity(self.pool, j, self.i, self.r, xadj, adjncy, w)
            if len(self.cache) >= self.keep:
                oldest = next(iter(self.cache))
                del self.cache[oldest], self.stale[oldest]
        self.cache[j], self.stale[j] = g, []  # the most recent last
        return g

    def moved(self, v: int) -> None:
        """Object ``v`` changed rank: its neighbours in the pool are stale for every kept target."""
        xadj, adjncy, _ = self.graph
        if not self.cache or adjncy.size == 0:
            return
        nb = adjncy[xadj[v]:xadj[v + 1]]
        sp = self.pool[self.order]
        k = np.minimum(np.searchsorted(sp, nb), sp.size - 1)
        pos = self.order[k[sp[k] == nb]]
        if pos.size:
            for parts in self.stale.values():
                parts.append(pos)


def realise_flow_on_objects(ph: TracePhase, edges: NDArray[np.int64], flow: NDArray[np.float64],
                            ranks: ArrayLike | None = None,
                            graph: tuple[NDArray, NDArray, NDArray] | None = None, *,
                            memory_limit: float | None = None) -> NDArray[np.int64]:
    """New ranks of the phase's tasks realising ``flow`` on ``edges`` by choosing objects.

    Ranks are taken in a topological order of the flow, so what arrives at a rank can be passed on. A rank
    sends to the target with the largest remaining outflow, one object at a time: among its migratable objects
    (those that arrived included), by decreasing affinity to the target (bytes exchanged with objects there minus
    bytes with objects staying), then heavier first, the first that brings the edge's remainder closer to zero
    (its load below twice the remainder); if none does — objects coarser than the flow of one edge, as on a
    complete graph — the lightest that brings the rank's whole remaining outflow closer to zero. With
    ``memory_limit`` an object goes only where the target's memory stays within the limit (LBAF's constraint).
    Load is conserved: objects only change ranks.
    """
    r = (ph.ranks if ranks is None else np.asarray(ranks, dtype=np.int64)).copy()
    p = ph.n_ranks
    xadj, adjncy, w = object_graph(ph) if graph is None else graph
    loads = ph.loads
    mig = ph.migratable
    if memory_limit is not None:
        from hermes.trace.memorybound import BlockState

        mem = BlockState(ph, r, None, memory_limit)
    else:
        mem = None
    order = _flow_order(p, edges, flow)
    out: list[list[tuple[int, float]]] = [[] for _ in range(p)]
    for (i, j), f in zip(edges.tolist(), flow.tolist()):
        if f > 0:
            out[i].append((j, f))
        elif f < 0:
            out[j].append((i, -f))
    # each rank's migratable objects, kept up to date as objects arrive (a rank's pool is looked at only when its
    # turn comes, after everything that flows into it)
    movable = np.flatnonzero(mig)
    members: list[list[int]] = [[] for _ in range(p)]
    for v, rv in zip(movable.tolist(), r[movable].tolist()):
        members[rv].append(v)
    for i in order:
        demand = {j: f for j, f in out[i] if f > 0}
        if not demand or not members[i]:
            continue
        pool = np.array(sorted(members[i]), dtype=np.int64)
        pool = pool[np.lexsort((pool, -loads[pool]))]  # heavier first, then id
        alive = np.ones(pool.size, dtype=bool)
        pl = loads[pool]
        over = 0.0  # sent beyond the flow of the edges it went along: owed by the rank's other edges
        gain = _Gains(pool, i, r, (xadj, adjncy, w))
        while demand and alive.any():
            j = max(demand, key=lambda t: (demand[t], -t))  # the largest remaining outflow first
            total = sum(demand.values()) - over
            if total <= 0:
                break
            g = gain.to(j)  # by affinity to j first, then heavier first, then id (the pool's order)
            fits = alive & (pl < 2.0 * demand[j])
            if mem is None and fits.any():
                chosen = _best(fits, g)
            elif fits.any():
                cand = np.flatnonzero(fits)
                cand = cand[np.argsort(-g[cand], kind="stable")]
                cand = cand[mem.fits_each(pool[cand], j)]
                chosen = int(cand[0]) if cand.size else None
            else:  # no object fits this edge's flow: one that fits the rank's whole outflow, the lightest
                light = alive & (pl < 2.0 * total)
                chosen = _best(light & (pl == pl[light].min()), g) if light.any() else None
                if chosen is not None and mem is not None and not mem.fits_each(pool[[chosen]], j)[0]:
                    chosen = None
            if chosen is None:
                del demand[j]  # nothing more can go to j
                continue
            v = int(pool[chosen])
            if mem is not None:
                mem.move(np.array([v], dtype=np.int64), j)
            alive[chosen] = False
            r[v] = j
            gain.moved(v)
            members[j].append(v)
            demand[j] -= loads[v]
            if demand[j] <= 0:
                over -= demand[j]
                del demand[j]
        members[i] = pool[alive].tolist()
    return r


# -- one phase --------------------------------------------------------------------------------------------------
@dataclass
class ReplayResult:
    """One algorithm on one phase: the new ranks, the figures before and after, the balancer's own figures."""

    phase: int
    algorithm: str
    ranks: NDArray[np.int64]
    before: dict[str, float]
    after: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The tidy row of ``replay.csv``: phase, algorithm, every figure before and after, the balancer's."""
        out: dict[str, Any] = {"phase": self.phase, "algorithm": self.algorithm}
        for k, v in self.before.items():
            out[f"{k}_before"] = v
        for k, v in self.after.items():
            out[f"{k}_after"] = v
        out.update(self.info)
        return out


def trace_capacities(ph: TracePhase) -> NDArray[np.float64] | None:
    """The capacities a hermes-written phase records (``user_defined.hermes_capacity`` of every rank), else None."""
    c = ph.rank_user.get("hermes_capacity")
    if c is None or not np.all(np.isfinite(c)) or np.any(c <= 0):
        return None
    return c / c.sum()


def _capacities(caps: ArrayLike | None, p: int, ph: TracePhase | None = None) -> NDArray[np.float64]:
    if caps is None:
        found = None if ph is None else trace_capacities(ph)
        return np.full(p, 1.0 / p) if found is None else found
    c = np.asarray(caps, dtype=np.float64).ravel()
    if c.shape != (p,):
        raise GraphError(f"capacities: need {p} positive numbers, one per rank of the trace, got {c.size}")
    bad = next((k for k, x in enumerate(c.tolist()) if CAPACITY_RANGE.problem(x) is not None), None)
    if bad is not None:
        raise GraphError(f"capacities: value {bad} must be {CAPACITY_RANGE.describe()}, got {shown(c[bad])}")
    if c.max() > SPREAD_MAX * c.min():
        raise GraphError(f"capacities: the values span {c.max() / c.min():.3g}, more than {SPREAD_MAX:g} (the flow "
                         f"balancers' weighted Laplacian would be numerically singular)")
    return c / c.sum()


def has_centroids(ph: TracePhase) -> bool:
    """Whether the phase's tasks carry centroids (``user_defined`` x and y, as hermes writes them)."""
    return all(k in ph.user and np.all(np.isfinite(ph.user[k])) for k in ("x", "y"))


def _flow_rounds(ph: TracePhase, info_entry, params: dict[str, Any], caps: NDArray[np.float64], graph: str,
                 rounds: int, trigger: float, realisation: str,
                 memory_limit: float | None = None) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """The balancing rounds of a flow balancer, as ``hermes run`` runs its first ``balancer.min_rounds``: a round
    while rounds remain, the last one moved objects and changed the imbalance, and the imbalance exceeds the trigger
    (and rounding noise); ``rounds`` is a fixed number here (run may add rounds while the imbalance exceeds its
    ``balancer.imbalance_tolerance``, up to ``balancer.rounds``).
    Each round computes the flow on the processor graph of the current assignment and realises it by choosing
    objects, or with hermes' own cell selection (``realisation: cells``; ``auto``: when the tasks have centroids)."""
    from hermes.balance.model import Model
    from hermes.balance.realisation.realise import RealiseOptions, SubdomainFlow, simulate_realisation
    from hermes.metrics import imbalance

    p = ph.n_ranks
    if p > MAX_FLOW_RANKS:
        raise GraphError(f"phase {ph.phase}: {p} ranks, more than the {MAX_FLOW_RANKS} the flow balancers' serial "
                         f"references take (their set-up grows faster than p²); grapevine, metis and scotch replay "
                         f"any number")
    # hermes' cell selection knows no memory limit: with one, objects are chosen (and the limit kept)
    cells = realisation == "cells" or (realisation == "auto" and has_centroids(ph) and memory_limit is None)
    if cells and not has_centroids(ph):
        raise GraphError(f"phase {ph.phase}: realisation 'cells' needs the tasks' centroids (user_defined x and y, as "
                         f"hermes writes them); use objects")
    graph_csr = object_graph(ph)
    coords = np.stack([ph.user["x"], ph.user["y"]], axis=1) if cells else None
    cur = ph.ranks.copy()
    last, done, its, kinds, total_flow = math.inf, 0, 0, [], 0.0
    moved = True
    while done < rounds and moved:
        loads = np.bincount(cur, weights=ph.loads, minlength=p)
        imb = imbalance(loads, caps)
        if not (1 + 1e-9 < imb != last and imb > trigger):
            break
        sub = ph.with_ranks(cur)
        edges, kind = processor_graph(sub, graph)
        model = Model.create(p, edges, loads, caps)
        res = info_entry.flow(model, **params)
        if cells:
            new, _ = simulate_realisation(graph_csr[0], graph_csr[1], coords, ph.loads, cur,
                                          SubdomainFlow(model.edges, res.flow), RealiseOptions("gain", adaptive=True))
            new = np.where(ph.migratable, new, cur)
        else:
            new = realise_flow_on_objects(sub, model.edges, res.flow, cur, graph_csr, memory_limit=memory_limit)
        moved = bool(np.any(new != cur))
        last, cur = imb, np.asarray(new, dtype=np.int64)
        done += 1
        its += int(res.iterations)
        kinds.append(kind)
        total_flow += float(np.abs(res.flow).sum())
    return cur, {"iterations": its, "rounds_done": done, "graph_used": "/".join(dict.fromkeys(kinds)) or "",
                 "realisation_used": "cells" if cells else "objects", "flow_total": total_flow}


def _balance(ph: TracePhase, algorithm: str, info_entry, checked: dict[str, Any], caps: NDArray[np.float64], *,
             graph: str, seed: int, rounds: int, trigger: float, realisation: str,
             memory_limit: float | None, memory_step: str = "refine") -> tuple[NDArray[np.int64], dict[str, Any]]:
    """The new ranks of the phase's tasks under ``algorithm`` (its parameters checked), and the balancer's own
    figures (iterations, the graph used, ...). Under a memory limit the balancer's assignment is then repaired
    and refined under it (``memory_step``: refine, repair or off; :mod:`hermes.trace.memorybound`)."""
    new, info = _balance_raw(ph, algorithm, info_entry, checked, caps, graph=graph, seed=seed, rounds=rounds,
                             trigger=trigger, realisation=realisation, memory_limit=memory_limit)
    if memory_limit is not None and memory_step != "off" and algorithm != "none" and ph.n_tasks and ph.n_ranks > 1:
        from hermes.trace.memorybound import bound_assignment

        got = bound_assignment(ph, new, caps, memory_limit, refinement=memory_step == "refine")
        new = got.ranks
        info.update(got.info)
    return new, info


def _balance_raw(ph: TracePhase, algorithm: str, info_entry, checked: dict[str, Any], caps: NDArray[np.float64], *,
                 graph: str, seed: int, rounds: int, trigger: float, realisation: str,
                 memory_limit: float | None) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """The balancer's own assignment (:func:`_balance` before the memory step)."""
    info: dict[str, Any] = {}
    p = ph.n_ranks
    if ph.n_tasks == 0 or p == 1 or algorithm == "none":
        new = ph.ranks.copy()
    elif algorithm == "grapevine":
        from hermes.balance.gossip.grapevine_serial import GrapevineParams, grapevine

        res = grapevine(ph.loads, ph.ranks, p, GrapevineParams.of(checked),
                        seed=seed if checked["seed"] is None else checked["seed"], speeds=caps * p,
                        migratable=ph.migratable)
        new = res.object_rank
        info.update(iterations=res.iterations, graph_used="full")
    elif algorithm == "informandtransfer":
        from hermes.trace.informandtransfer import inform_and_transfer

        if np.ptp(caps) > 0:
            raise BalancerError("informandtransfer balances ranks of equal speed (LBAF's model has no capacities): "
                                "replay it without --capacities")
        res = inform_and_transfer(ph, checked, memory_limit=memory_limit)
        new = res.ranks
        info.update(iterations=len(res.max_work), graph_used="gossip", transfers=res.transfers,
                    cluster_swaps=res.swaps, subcluster_transfers=res.subcluster_transfers,
                    max_work_per_iteration=" ".join(f"{w:.6g}" for w in res.max_work))
    elif algorithm in ("metis", "scotch"):
        new = _partition(ph, algorithm, checked, caps, seed)
        info["graph_used"] = "objects"
    else:
        if info_entry.serial is None:
            raise BalancerError(f"balancer {algorithm!r} has no serial reference, so hermes trace replay cannot run it "
                                f"(replay runs: {', '.join(replay_algorithms())})")
        new, flow_info = _flow_rounds(ph, info_entry, checked, caps, graph, rounds, trigger, realisation,
                                      memory_limit)
        info.update(flow_info)
    return np.asarray(new, dtype=np.int64), info


def _check_port_model(algorithms: list[str], work_model: WorkModel | None) -> None:
    """informandtransfer reads α·load and the memory limit of the work model (docs/WORKMODEL.md); a β, γ or δ it
    would ignore is refused in one line."""
    wm = work_model or WorkModel()
    if "informandtransfer" in algorithms and (wm.beta or wm.gamma or wm.delta):
        raise BalancerError("informandtransfer: the port prices a rank by α·load under the memory limit (LBAF's "
                            "configurations use β = γ = δ = 0); replay it with --beta, --gamma and --delta 0")


def replay_phase(ph: TracePhase, algorithm: str, params: dict[str, Any] | None = None, *, graph: str = "auto",
                 capacities: ArrayLike | None = None, work_model: WorkModel | None = None, seed: int = 0,
                 rounds: int = 3, trigger: float = 1.0, realisation: str = "auto",
                 memory_step: str = "refine") -> ReplayResult:
    """Balance one phase with ``algorithm`` (module docstring); the figures before and after.

    ``rounds`` and ``trigger`` are the scenario's ``balancer.min_rounds`` and ``balancer.trigger`` (defaults 3 and
    1.0, hermes run's); ``realisation``: ``objects`` (:func:`realise_flow_on_objects`), ``cells`` (hermes'
    gain selection on the tasks' centroids, :func:`hermes.balance.realisation.realise.simulate_realisation`) or
    ``auto`` (cells when the tasks have centroids: a trace hermes wrote).

    Raises
    ------
    BalancerError
        An unknown algorithm, one without a serial reference, or bad parameters (one line).
    GraphError
        ``graph: comm`` on a disconnected communication graph; bad capacities.
    """
    from hermes.balance.registry import get_balancer

    info_entry = get_balancer(algorithm)
    checked = info_entry.check(params or {}, prefix=f"{algorithm}.")
    _check_port_model([algorithm], work_model)
    wm = work_model or WorkModel()
    wm.check(ph)  # the work figures stay finite under any assignment (one line naming the weights)
    p = ph.n_ranks
    caps = _capacities(capacities, p, ph)
    before = phase_figures(ph, ph.ranks, wm, caps)
    t0 = time.perf_counter()
    new, info = _balance(ph, algorithm, info_entry, checked, caps, graph=graph, seed=seed, rounds=rounds,
                         trigger=trigger, realisation=realisation, memory_limit=wm.memory_limit,
                         memory_step=memory_step)
    info["seconds"] = time.perf_counter() - t0
    after = phase_figures(ph, new, wm, caps)
    moved = new != ph.ranks
    info.update(objects_moved=int(moved.sum()), load_moved=float(ph.loads[moved].sum()))
    return ReplayResult(ph.phase, algorithm, new, before, after, info)


def _induced(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], w: NDArray[np.float64],
             keep: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The CSR subgraph induced by the vertices ``keep`` (renumbered in order)."""
    new_id = np.cumsum(keep) - 1
    rows = np.repeat(np.arange(keep.size), np.diff(xadj))
    e = keep[rows] & keep[adjncy] if adjncy.size else np.zeros(0, dtype=bool)
    r, c, ww = new_id[rows[e]], new_id[adjncy[e]], w[e]
    n = int(keep.sum())
    x = np.zeros(n + 1, dtype=np.int64)
    np.add.at(x, r + 1, 1)
    return np.cumsum(x), c.astype(np.int64), ww


def _partition(ph: TracePhase, algorithm: str, params: dict[str, Any], caps: NDArray[np.float64],
               seed: int) -> NDArray[np.int64]:
    """METIS from scratch and relabelled, or Scotch's remap, of the migratable objects' communication graph.

    The objects that cannot move stay; each rank's part is sized for its fair share less what stays on it
    (the partitioners' target fractions), so the whole is balanced, not only what moves."""
    from hermes.data.partition import metis_partition, remap

    p = ph.n_ranks
    mig = ph.migratable
    if int(mig.sum()) < p:
        raise GraphError(f"phase {ph.phase}: {int(mig.sum())} migratable objects for {p} ranks: {algorithm} needs "
                         f"at least one per rank")
    xadj, adjncy, w = _induced(*object_graph(ph), mig)
    loads = ph.loads[mig]
    total = float(ph.loads.sum())
    pos = loads[loads > 0]
    weights = np.where(loads > 0, loads, pos.min() if pos.size else 1.0)  # a zero load weighs as the lightest
    fixed = np.bincount(ph.ranks[~mig], weights=ph.loads[~mig], minlength=p)
    fair = caps * total if params.get("targets", "fair") == "fair" else np.full(p, total / p)
    room = np.maximum(fair - fixed, 0.0)
    targets = np.maximum(room, 1e-6 * max(total, 1e-300)) if room.sum() > 0 else np.full(p, 1.0 / p)
    targets = targets / targets.sum()
    old = ph.ranks[mig]
    ew = w if w.size else None
    if algorithm == "metis":
        part = metis_partition(xadj, adjncy, weights, p, targets=targets, seed=seed, ufactor=params["ufactor"],
                               edge_weights=ew)
        part = remap(old, part, weights, p, targets=targets)
    else:
        from hermes.balance.repartition.scotch import ScotchParams, scotch_remap

        part = scotch_remap(xadj, adjncy, weights, old, p, ScotchParams.of(params), targets=targets, seed=seed)
    new = ph.ranks.copy()
    new[mig] = part
    return new


def check_options(*, graph: str = "auto", capacities: ArrayLike | None = None, seed: int = 0, rounds: int = 3,
                  trigger: float = 1.0, realisation: str = "auto", memory_step: str = "refine") -> None:
    """The replay options checked before any phase is balanced (those of ``hermes trace replay``, a trace experiment's
    runs): each in its documented range, numbers within hermes' rule (:mod:`hermes.bounds`): ``rounds`` 1..1000,
    ``trigger`` in [1, 1e6], ``seed`` 0..MAX_SEED, ``capacities`` positive numbers spanning at most SPREAD_MAX
    (their count is checked against the trace's ranks when a phase is replayed).

    Raises
    ------
    GraphError
        One line naming the option.
    """
    if graph not in ("auto", "comm", "full"):
        raise GraphError(f"graph {graph!r}: expected auto, comm or full")
    if realisation not in ("auto", "objects", "cells"):
        raise GraphError(f"realisation {realisation!r}: expected auto, objects or cells")
    if memory_step not in MEMORY_STEPS:
        raise GraphError(f"memory_step {memory_step!r}: expected {', '.join(MEMORY_STEPS[:-1])} or {MEMORY_STEPS[-1]}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or not 1 <= rounds <= 1000:
        raise GraphError(f"rounds must be an integer in 1..1000, got {rounds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise GraphError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")
    if isinstance(trigger, bool) or not isinstance(trigger, (int, float)) or TRIGGER_RANGE.problem(trigger):
        raise GraphError(f"trigger must be {TRIGGER_RANGE.describe()}, got {trigger!r}")
    if capacities is not None:
        try:
            c = np.asarray(capacities, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise GraphError(f"capacities: expected numbers, one per rank, got {capacities!r}") from None
        _capacities(c, c.size)


@dataclass
class ReplayTable:
    """Every algorithm on every phase of a trace, by columns (:func:`replay_trace`).

    Attributes
    ----------
    trace : Trace
    algorithms : list of str
    before : dict of str to array (phases,)
        :func:`~hermes.trace.workmodel.trace_figures` of the trace's assignment.
    after : dict of str to (dict of str to array (phases,))
        The same per algorithm, of its assignment.
    ranks : dict of str to int64 array (tasks,)
        Per algorithm, the new rank of every task of the trace's :class:`~hermes.trace.trace_phase.FlatTrace`.
    info : dict of str to list of dict
        Per algorithm and data block of the flat trace, the balancer's own figures (iterations, the graph
        used, seconds, ...); empty for a block left as it is (no task, one rank, ``none``).
    """

    trace: Trace
    algorithms: list[str]
    before: dict[str, NDArray]
    after: dict[str, dict[str, NDArray]]
    ranks: dict[str, NDArray[np.int64]]
    info: dict[str, list[dict[str, Any]]]

    def moved(self, algorithm: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """(objects moved, load moved) per phase by ``algorithm``."""
        flat = self.trace.flat
        m = self.ranks[algorithm] != flat.ranks
        nb = flat.n_blocks
        objects = np.bincount(flat.task_block[m], minlength=nb).astype(np.int64)
        load = np.bincount(flat.task_block[m], weights=flat.loads[m], minlength=nb)
        return objects[flat.block], load[flat.block]

    def iter_rows(self, chunk: int = 4096) -> Iterator[dict[str, Any]]:
        """The tidy rows of ``replay.csv`` one by one: per phase, per algorithm (in the order given), every
        figure before and after, the balancer's own, the objects and load moved, the tasks and the imbalance
        floor. The columns become Python numbers ``chunk`` phases at a time, so writing 10⁵ phases' rows holds
        no more than a few thousand of them."""
        flat = self.trace.flat
        moved = {a: self.moved(a) for a in self.algorithms}
        for k0 in range(0, flat.n_phases, chunk):
            s = slice(k0, k0 + chunk)
            before = {f: self.before[f][s].tolist() for f in FIGURES}
            after = {a: {f: self.after[a][f][s].tolist() for f in FIGURES} for a in self.algorithms}
            objects = {a: moved[a][0][s].tolist() for a in self.algorithms}
            load = {a: moved[a][1][s].tolist() for a in self.algorithms}
            tasks, floor = self.before["tasks"][s].tolist(), self.before["imbalance_floor"][s].tolist()
            for k, (pid, b) in enumerate(zip(flat.phase_ids[s].tolist(), flat.block[s].tolist())):
                for a in self.algorithms:
                    row: dict[str, Any] = {"phase": pid, "algorithm": a}
                    row.update({f"{f}_before": before[f][k] for f in FIGURES})
                    row.update({f"{f}_after": after[a][f][k] for f in FIGURES})
                    row.update(self.info[a][b] or {"seconds": 0.0})
                    row.update(objects_moved=objects[a][k], load_moved=load[a][k], tasks=tasks[k],
                               imbalance_floor=floor[k])
                    row.setdefault("iterations", 0)
                    row.setdefault("graph_used", "")
                    yield row

    def rows(self) -> list[dict[str, Any]]:
        """:meth:`iter_rows` as a list."""
        return list(self.iter_rows())

    def keys(self) -> set[str]:
        """Every key of the rows."""
        extra = {k for a in self.algorithms for info in self.info[a] for k in info}
        return ({"phase", "algorithm", "seconds", "objects_moved", "load_moved", "tasks", "imbalance_floor",
                 "iterations", "graph_used"} | {f"{f}_{w}" for f in FIGURES for w in ("before", "after")} | extra)

    def results(self) -> list[ReplayResult]:
        """The same as one :class:`ReplayResult` per phase and algorithm."""
        flat = self.trace.flat
        out = []
        for row, (k, a) in zip(self.rows(), [(k, a) for k in range(flat.n_phases) for a in self.algorithms]):
            s = flat.tasks_of(int(flat.block[k]))
            info = {key: v for key, v in row.items() if key not in ("phase", "algorithm", "tasks", "imbalance_floor")
                    and not key.endswith(("_before", "_after"))}
            out.append(ReplayResult(row["phase"], a, self.ranks[a][s].copy(),
                                    {f: row[f"{f}_before"] for f in FIGURES},
                                    {f: row[f"{f}_after"] for f in FIGURES}, info))
        return out


def replay_trace(trace: Trace, algorithms: list[str], params: dict[str, dict[str, Any]] | None = None, *,
                 graph: str = "auto", capacities: ArrayLike | None = None, work_model: WorkModel | None = None,
                 seed: int = 0, rounds: int = 3, trigger: float = 1.0, realisation: str = "auto",
                 memory_step: str = "refine", progress: Progress | None = None) -> ReplayTable:
    """Every algorithm on every phase of ``trace``, by columns: the figures before and after of every phase
    at once (:func:`~hermes.trace.workmodel.trace_figures`, the function ``hermes trace info`` uses), and the
    balancers run on each data block that has tasks on more than one rank (a phase marked identical to the
    previous one is its predecessor's block, balanced once), so an empty phase costs no Python.

    ``progress`` (a :class:`~hermes.progress.Progress`, or anything with its ``status`` method) is told the step
    in progress — ``phase 3 (4/10): pcg (2/3)``: the phase's id, its place among the phases balanced, the balancer
    and its place among the algorithms — and repeats it while it lasts; it never enters the table.

    Raises
    ------
    GraphError
        A bad option (:func:`check_options`); more than :data:`MAX_REPLAY_PHASES` phases or a phase of more than
        :data:`MAX_REPLAY_TASKS` tasks; what
        :func:`replay_phase` raises.
    BalancerError
        An unknown algorithm or bad parameters.
    """
    from hermes.balance.registry import get_balancer
    from hermes.trace.workmodel import trace_figures

    check_options(graph=graph, capacities=capacities, seed=seed, rounds=rounds, trigger=trigger,
                  realisation=realisation, memory_step=memory_step)
    _check_port_model(algorithms, work_model)
    flat = trace.flat
    if flat.n_phases > MAX_REPLAY_PHASES:
        raise GraphError(f"{trace.stem or 'the trace'}: {flat.n_phases:,} phases, more than hermes replays at once "
                         f"(limit {MAX_REPLAY_PHASES:,}): choose some with --phase")
    most = int(flat.phase_tasks.max(initial=0))
    if most > MAX_REPLAY_TASKS:
        k = int(np.argmax(flat.phase_tasks))
        raise GraphError(f"{trace.stem or 'the trace'}: phase {int(flat.phase_ids[k])} has {most:,} tasks, more than "
                         f"hermes replays (limit {MAX_REPLAY_TASKS:,} per phase; hermes trace info reads it)")
    entries = []
    for name in algorithms:
        entry = get_balancer(name)
        entries.append((name, entry, entry.check((params or {}).get(name) or {}, prefix=f"{name}.")))
    wm = work_model or WorkModel()
    wm.check(flat)  # the work figures stay finite under any assignment (one line naming the weights)
    p, nb = flat.n_ranks, flat.n_blocks
    given = None if capacities is None else _capacities(capacities, p)
    shown = progress if progress is not None else quiet()
    shown.status(f"figures of {flat.n_phases:,} phase{'s' * (flat.n_phases != 1)} before balancing")
    before = trace_figures(flat, None, wm, given)
    ranks = {name: flat.ranks.copy() for name in algorithms}
    info: dict[str, list[dict[str, Any]]] = {name: [{}] * nb for name in algorithms}
    first = np.full(nb, -1, dtype=np.int64)  # the first phase of each block: its id names the block in errors
    first[flat.block[::-1]] = np.arange(flat.n_phases - 1, -1, -1)
    busy = (np.diff(flat.task_start) > 0) | (np.diff(flat.comm_start) > 0)
    blocks = np.flatnonzero(busy & (first >= 0))[np.argsort(first[busy & (first >= 0)], kind="stable")].tolist()
    balanced = [name for name in algorithms if name != "none"]
    for k, b in enumerate(blocks, 1):
        ph = flat.phase(int(first[b]))
        if ph.n_tasks == 0 or p == 1:
            continue
        caps = _capacities(capacities, p, ph)
        s = flat.tasks_of(b)
        for name, entry, checked in entries:
            if name == "none":
                continue
            shown.status(f"phase {int(flat.phase_ids[first[b]])} ({k}/{len(blocks)}): {name}",
                         balanced.index(name) + 1, len(balanced))
            t0 = time.perf_counter()
            new, got = _balance(ph, name, entry, checked, caps, graph=graph, seed=seed, rounds=rounds,
                                trigger=trigger, realisation=realisation, memory_limit=wm.memory_limit,
                                memory_step=memory_step)
            got["seconds"] = time.perf_counter() - t0
            ranks[name][s] = new
            info[name][b] = got
    after = {}
    for name in algorithms:
        shown.status(f"figures after balancing: {name}")
        after[name] = trace_figures(flat, ranks[name], wm, given)
    shown.status(None)
    return ReplayTable(trace, list(algorithms), before, after, ranks, info)


def check_params(algorithms: list[str], params: dict[str, dict[str, Any]] | None = None) -> None:
    """Every algorithm's parameters checked by its model before any phase is read or balanced (BalancerError in
    one line: ``sos.omega: must be greater than or equal to 0.01, got 5e-324``)."""
    from hermes.balance.registry import get_balancer

    for name in algorithms:
        get_balancer(name).check((params or {}).get(name) or {}, prefix=f"{name}.")


def replay(trace: Trace, algorithms: list[str], params: dict[str, dict[str, Any]] | None = None, *,
           graph: str = "auto", capacities: ArrayLike | None = None, work_model: WorkModel | None = None,
           seed: int = 0, rounds: int = 3, trigger: float = 1.0, realisation: str = "auto",
           memory_step: str = "refine") -> list[ReplayResult]:
    """Every algorithm on every phase of ``trace`` (phases in order, algorithms in the order given;
    :func:`replay_phase`; :func:`replay_trace` by columns), the options and the parameters checked first
    (:func:`check_options`, :func:`check_params`)."""
    check_options(graph=graph, capacities=capacities, seed=seed, rounds=rounds, trigger=trigger,
                  realisation=realisation, memory_step=memory_step)
    check_params(algorithms, params)
    return replay_trace(trace, algorithms, params, graph=graph, capacities=capacities, work_model=work_model,
                        seed=seed, rounds=rounds, trigger=trigger, realisation=realisation,
                        memory_step=memory_step).results()


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
