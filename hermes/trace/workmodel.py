"""The per-rank figures of a trace's phase under an assignment: load, communication, memory, work (the work model
stated once for replay, compare and the run's cost model: docs/WORKMODEL.md).

The definitions are LBAF's (LB-analysis-framework 1.6.0, commit 9615e7ab; docs/TRACES.md records the figures both
tools print on the same files), so a replay's figures compare with LBAF's:

- **load** of a rank: the sum of its tasks' times; **imbalance** (hermes): max / mean of the loads (divided by
  the capacities when they differ) — LBAF prints max / mean − 1;
- **sent / received** of a rank: the bytes its tasks send to / receive from tasks on other ranks (traffic
  between tasks of one rank costs nothing; communications with an endpoint that is not a task of the phase do
  not count);
- **inter-rank volume** of a pair of ranks: the larger of the two directions' bytes (LBAF's "inter-rank sent
  volumes");
- **memory** of a rank (vt's ``user_defined`` keys): ``rank_working_bytes`` (the value given with the last task
  the rank's file lists) + the sizes of the distinct shared blocks its tasks use + the sum of its tasks'
  ``task_footprint_bytes`` + the largest ``task_working_bytes`` among them. A shared block is identified by
  its ``shared_id`` *and* the rank whose file lists the task (its home): a block used by tasks now on other
  ranks counts on each of them;
- **homing** of a rank: the sizes of the blocks its tasks use whose home is another rank;
- **work** (LBAF's ``AffineCombination`` model): α·load + β·max(sent, received) + γ + δ·homing (α times the
  rank's ``metadata.rank_alpha`` when the trace gives one, as LBAF takes α), infinite when
  the rank's memory exceeds the memory limit (the constraint LBAF calls ``upper_bounds.max_memory_usage``).
  ``LoadOnly`` is α = 1, β = γ = δ = 0 without a limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.bounds import BIG, NumberRange, shown
from hermes.errors import GraphError

__all__ = ["WorkModel", "RankFigures", "rank_figures", "rank_rows", "trace_figures", "phase_figures", "shared_blocks",
           "block_capacities", "FIGURES"]


#: the documented ranges of the work model's weights (hermes' rule for numbers within them): α > 0 (the work is
#: at least proportional to the load: α = −1 gave negative works and a NaN imbalance), β, γ, δ ≥ 0, the memory
#: limit > 0; each at most BIG, so that with the trace's amounts (at most BIG each) every product is finite
WORK_RANGES = {"alpha": NumberRange(0, BIG, lo_open=True), "beta": NumberRange(0, BIG), "gamma": NumberRange(0, BIG),
               "delta": NumberRange(0, BIG), "memory_limit": NumberRange(0, BIG, lo_open=True)}
#: the largest sum of the ranks' works the figures may form (:meth:`WorkModel.check`)
MAX_WORK = 1e300


@dataclass(frozen=True)
class WorkModel:
    """LBAF's affine work model: α·load + β·max(sent, received) + γ + δ·homing; ``memory_limit`` (bytes, None:
    none) makes a rank above it infinitely costly."""

    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.0
    delta: float = 0.0
    memory_limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma", "delta", "memory_limit"):
            v = getattr(self, name)
            if v is None and name == "memory_limit":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise GraphError(f"work model: {name} must be a number, got {v!r}")
            if WORK_RANGES[name].problem(float(v)) is not None:
                raise GraphError(f"work model: {name} must be {WORK_RANGES[name].describe()}, got {shown(v)}")

    def bound(self, loads: NDArray[np.float64], comm_bytes: NDArray[np.float64], shared: NDArray[np.float64],
              rank_alpha: NDArray[np.float64] | None = None) -> float:
        """An upper bound on any rank's work under any assignment of the tasks whose loads, message bytes and shared
        blocks' sizes these are — all of them on one rank: ``α · max(1, rank_alpha) · Σ loads + β · Σ bytes + γ +
        δ · Σ shared`` (inf if it overflows; NaN entries, no value given, count 0)."""
        ra = 1.0 if rank_alpha is None or not np.size(rank_alpha) else max(1.0, float(np.nanmax(np.abs(rank_alpha))))
        with np.errstate(over="ignore", invalid="ignore"):
            return float(self.alpha * ra * np.nansum(loads) + self.beta * np.nansum(comm_bytes) + self.gamma
                         + self.delta * np.nansum(shared))

    def check(self, data) -> None:
        """GraphError (one line) unless the work figures stay finite under any assignment: ``p`` times
        :meth:`bound` (a sum of the ranks' works) at most :data:`MAX_WORK`, for one phase (a
        :class:`~hermes.trace.trace_phase.TracePhase`) or every phase of a :class:`~hermes.trace.trace_phase.FlatTrace`
        at once (their tasks together: a bound of each phase's), checked before any figure is computed."""
        from hermes.trace.trace_phase import FlatTrace

        if isinstance(data, FlatTrace):
            key = data.user_keys.index("shared_bytes") if "shared_bytes" in data.user_keys else -1
            shared = data.user_value[data.user_key == key]
            b, where = self.bound(data.loads, data.comm_bytes, shared, data.rank_alpha), "the trace's phases"
        else:
            _, shared, _ = shared_blocks(data)
            b = self.bound(data.loads, data.comm_bytes, shared, data.rank_user.get("rank_alpha"))
            where = f"phase {data.phase}"
        if not (math.isfinite(b) and b * max(data.n_ranks, 1) <= MAX_WORK):
            raise GraphError(f"work model: a rank's work α·load + β·bytes + γ + δ·shared can reach {b:.3g} on "
                             f"{where} (α {shown(self.alpha)}, β {shown(self.beta)}, γ {shown(self.gamma)}, "
                             f"δ {shown(self.delta)}), and {data.n_ranks} ranks' sum beyond {MAX_WORK:g}: the "
                             f"figures would overflow; take smaller weights")

@dataclass(frozen=True)
class RankFigures:
    """Per-rank arrays of one assignment (module docstring)."""

    load: NDArray[np.float64]
    sent: NDArray[np.float64]
    received: NDArray[np.float64]
    memory: NDArray[np.float64]
    #: the sizes of the distinct shared blocks each rank's tasks use (part of ``memory``)
    shared: NDArray[np.float64]
    homing: NDArray[np.float64]
    work: NDArray[np.float64]
    #: bytes between tasks of the same rank, and between tasks of different ranks (all pairs)
    local_volume: float
    offrank_volume: float
    #: rank pairs exchanging bytes, and the larger direction's bytes per pair
    pair_volumes: NDArray[np.float64]


def shared_blocks(ph) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """(block of every task, −1 for none; block sizes; block homes): a block is a (home rank, shared_id) pair,
    its home the rank whose file lists the task in the trace, its size the task's ``shared_bytes``."""
    block, sizes, homes = _blocks(np.zeros(ph.n_tasks, dtype=np.int64), ph.ranks, ph.user.get("shared_id"),
                                  ph.user.get("shared_bytes"))
    return block, sizes, homes


def _blocks(group: NDArray[np.int64], ranks: NDArray[np.int64], sid: NDArray[np.float64] | None,
            size: NDArray[np.float64] | None) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """:func:`shared_blocks` of tasks in groups (phases): a block is a (group, home rank, shared_id) triple."""
    n = ranks.size
    if sid is None or n == 0:
        return np.full(n, -1, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    has = np.isfinite(sid) & (sid > -1)
    key = np.stack([group[has].astype(np.float64), ranks[has].astype(np.float64), sid[has]], axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    block = np.full(n, -1, dtype=np.int64)
    block[has] = inv
    sizes = np.zeros(first.size)
    if size is not None:
        np.maximum.at(sizes, inv, np.nan_to_num(size[has], nan=0.0))
    return block, sizes, ranks[has][first].astype(np.int64)


def _user_flat(flat, key: str) -> NDArray[np.float64] | None:
    """The ``user_defined`` number ``key`` of every task of a flat trace (NaN where none), None if no task has it."""
    if key not in flat.user_keys:
        return None
    sel = flat.user_key == flat.user_keys.index(key)
    out = np.full(flat.ids.size, np.nan)
    out[flat.user_task[sel]] = flat.user_value[sel]
    return out


def _rank_value(flat, key: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(block · P + rank, value) of a rank's phase-level ``user_defined`` number ``key``, sorted."""
    if key not in flat.rank_keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    sel = flat.rank_key == flat.rank_keys.index(key)
    return flat.rank_block[sel] * flat.n_ranks + flat.rank_rank[sel], flat.rank_value[sel]


def _lookup(keys: NDArray[np.int64], table_keys: NDArray[np.int64], values: NDArray[np.float64],
            default: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """``values`` at ``keys`` in the sorted ``table_keys``, ``default`` where absent."""
    out = np.broadcast_to(np.asarray(default, dtype=np.float64), keys.shape).copy()
    if table_keys.size and keys.size:
        pos = np.minimum(np.searchsorted(table_keys, keys), table_keys.size - 1)
        hit = table_keys[pos] == keys
        out[hit] = values[pos[hit]]
    return out


def block_capacities(flat, capacities: ArrayLike | None = None) -> tuple[NDArray[np.bool_], NDArray[np.int64],
                                                                         NDArray[np.float64]]:
    """The relative capacities of every block's ranks: ``capacities`` (normalised) when given, else the
    ``hermes_capacity`` a hermes-written trace records for every rank of a block (finite, positive), else
    equal. As (blocks that record theirs, their sorted keys block · P + rank, the capacities there)."""
    p, nb = flat.n_ranks, flat.n_blocks
    own = np.zeros(nb, dtype=bool)
    if capacities is not None:
        return own, np.zeros(0, dtype=np.int64), np.zeros(0)
    keys, vals = _rank_value(flat, "hermes_capacity")
    b = keys // p
    good = np.bincount(b, weights=(np.isfinite(vals) & (vals > 0)).astype(np.float64), minlength=nb) == p
    good &= np.bincount(b, minlength=nb) == p
    keep = good[b]
    keys, vals, b = keys[keep], vals[keep], b[keep]
    total = np.bincount(b, weights=vals, minlength=nb)
    return good, keys, vals / total[b] if vals.size else vals


def rank_rows(flat, ranks: ArrayLike | None = None, model: WorkModel | None = None) -> dict[str, Any]:
    """Every per-rank figure of the module docstring for every block of the flat trace ``flat`` with its tasks
    on ``ranks`` (default: the trace's), as sparse rows: one per (block, rank) that holds a task, exchanges a
    message with another rank or has a ``rank_working_bytes`` (every other rank of a block has load, traffic,
    memory and homing 0 and work γ), sorted by (block, rank)."""
    from hermes.trace.trace_phase import unique_sorted

    wm = model or WorkModel()
    p, nb = flat.n_ranks, flat.n_blocks
    r = flat.ranks if ranks is None else np.asarray(ranks, dtype=np.int64)
    tb = flat.task_block
    a, b, ok = flat.comm_tasks
    cb = flat.comm_block[ok]
    ra, rb, w = r[a[ok]], r[b[ok]], flat.comm_bytes[ok]
    off = ra != rb
    t_key = tb * p + r
    w_key = flat.working_block * p + flat.working_rank
    keys = unique_sorted(np.concatenate([t_key, cb[off] * p + ra[off], cb[off] * p + rb[off], w_key]))
    nr = keys.size
    row = np.searchsorted(keys, t_key)
    load = np.bincount(row, weights=flat.loads, minlength=nr)
    sent = np.bincount(np.searchsorted(keys, cb[off] * p + ra[off]), weights=w[off], minlength=nr)
    received = np.bincount(np.searchsorted(keys, cb[off] * p + rb[off]), weights=w[off], minlength=nr)
    local = np.bincount(cb[~off], weights=w[~off], minlength=nb)
    offrank = np.bincount(cb[off], weights=w[off], minlength=nb)
    # inter-rank volume of a pair: the larger direction's bytes
    d_key, d_inv = np.unique((cb[off] * p + ra[off]) * p + rb[off], return_inverse=True)
    d_sum = np.bincount(d_inv.ravel(), weights=w[off], minlength=d_key.size)
    d_blk, d_a, d_b = d_key // (p * p), (d_key // p) % p, d_key % p
    u_key, u_inv = np.unique((d_blk * p + np.minimum(d_a, d_b)) * p + np.maximum(d_a, d_b), return_inverse=True)
    pair = np.zeros(u_key.size)
    np.maximum.at(pair, u_inv.ravel(), d_sum)
    pos = pair > 0
    pair_key, pair = u_key[pos], pair[pos]
    # memory and homing: shared blocks are (block, trace rank, shared_id)
    sblock, sizes, homes = _blocks(tb, flat.ranks, _user_flat(flat, "shared_id"), _user_flat(flat, "shared_bytes"))
    shared = np.zeros(nr)
    homing = np.zeros(nr)
    if sizes.size:
        used = np.unique(np.stack([row[sblock >= 0], sblock[sblock >= 0]], axis=1), axis=0)
        np.add.at(shared, used[:, 0], sizes[used[:, 1]])
        away = homes[used[:, 1]] != keys[used[:, 0]] % p
        np.add.at(homing, used[away, 0], sizes[used[away, 1]])
    memory = shared.copy()
    memory[np.searchsorted(keys, w_key)] += flat.working_value
    foot = _user_flat(flat, "task_footprint_bytes")
    if foot is not None:
        memory += np.bincount(row, weights=np.nan_to_num(foot, nan=0.0), minlength=nr)
    working = _user_flat(flat, "task_working_bytes")
    if working is not None:
        top = np.zeros(nr)
        np.maximum.at(top, row, np.nan_to_num(working, nan=0.0))
        memory += top
    r_block, r_rank = keys // p, keys % p
    alpha = np.full(nr, wm.alpha)
    if flat.rank_alpha is not None:
        alpha *= flat.rank_alpha[r_rank]
    ak, av = _rank_value(flat, "rank_alpha")  # a trace built from phases that carry their own α
    alpha = np.where(np.isin(keys, ak), wm.alpha * _lookup(keys, ak, av, 1.0), alpha)
    work = alpha * load + wm.beta * np.maximum(sent, received) + wm.gamma + wm.delta * homing
    if wm.memory_limit is not None:
        work = np.where(memory > wm.memory_limit, np.inf, work)
    return {"block": r_block, "rank": r_rank, "load": load, "sent": sent, "received": received, "memory": memory,
            "shared": shared, "homing": homing, "work": work, "local": local, "offrank": offrank,
            "pair_key": pair_key, "pair": pair, "absent": p - np.bincount(r_block, minlength=nb)}


def rank_figures(ph, ranks: ArrayLike, model: WorkModel | None = None) -> RankFigures:
    """Every per-rank figure of the module docstring for the phase ``ph`` with its tasks on ``ranks``
    (:func:`rank_rows` of the phase alone, every rank)."""
    from hermes.trace.trace_phase import FlatTrace

    wm = model or WorkModel()
    p = ph.n_ranks
    f = rank_rows(FlatTrace.of([ph], p), ranks, wm)
    dense = {}
    for key in ("load", "sent", "received", "memory", "shared", "homing", "work"):
        col = np.full(p, wm.gamma if key == "work" else 0.0)
        col[f["rank"]] = f[key]
        dense[key] = col
    return RankFigures(**dense, local_volume=float(f["local"][0]), offrank_volume=float(f["offrank"][0]),
                       pair_volumes=f["pair"])


def _per_block(block: NDArray[np.int64], values: NDArray[np.float64], nb: int, absent: NDArray[np.int64],
               fill: float, how: str) -> NDArray[np.float64]:
    """max or min over each block's rows, ``fill`` counted where the block has absent ranks."""
    ufunc = np.maximum if how == "max" else np.minimum
    out = np.full(nb, -np.inf if how == "max" else np.inf)
    ufunc.at(out, block, values)
    return np.where(absent > 0, ufunc(out, fill), out)


def trace_figures(flat, ranks: ArrayLike | None = None, model: WorkModel | None = None,
                  capacities: ArrayLike | None = None) -> dict[str, NDArray]:
    """The per-phase figures of a trace under an assignment: what ``hermes trace info`` and ``hermes trace replay``
    print, computed here only.

    Parameters
    ----------
    flat : FlatTrace
        The trace (``Trace.flat``).
    ranks : int array (tasks,), optional
        The rank of every task of every block (default: the trace's).
    model : WorkModel, optional
    capacities : array (n_ranks,), optional
        Relative capacities of the ranks; default those a hermes-written phase records
        (``hermes_capacity``), else equal (:func:`block_capacities`).

    Returns
    -------
    dict of str to array (phases,)
        Per phase: ``tasks``, ``migratable``, ``communications`` (between tasks of the phase: the ones LBAF's
        model takes), ``other_communications`` (kept, with an endpoint that is no task of the phase: in no
        figure), ``load_sum``, ``load_min``, ``load_mean``, ``load_max``, ``imbalance`` (max of load / (sum ·
        capacity): max / mean with equal capacities), ``lbaf_imbalance`` (max / mean − 1, NaN for no load),
        ``imbalance_floor`` (the heaviest migratable object and what cannot move against the fair share),
        ``offrank_bytes``, ``local_bytes``, ``pairs``, ``pair_volume_max``, ``comm_max`` (largest
        max(sent, received)), ``memory_max``, ``memory_over`` (ranks above the limit), ``homing``, ``work_max``,
        ``work_mean``, ``work_lbaf_imbalance``.
    """
    wm = model or WorkModel()
    p, nb = flat.n_ranks, flat.n_blocks
    f = rank_rows(flat, ranks, wm)
    blk, absent = f["block"], f["absent"]
    n_tasks = np.diff(flat.task_start)
    ok = flat.comm_tasks[2]
    n_comm = np.bincount(flat.comm_block[ok], minlength=nb)
    load_sum = np.bincount(blk, weights=f["load"], minlength=nb)
    load_max = _per_block(blk, f["load"], nb, absent, 0.0, "max")
    load_min = _per_block(blk, f["load"], nb, absent, 0.0, "min")
    mean = load_sum / p
    # capacities: each rank's fair share of its block's load
    if capacities is not None:
        c = np.asarray(capacities, dtype=np.float64).ravel()
        c = c / c.sum()
        cap_of = lambda key: c[key % p]  # noqa: E731
        cap_max = np.full(nb, c.max())
    else:
        _, ck, cv = block_capacities(flat)
        cap_of = lambda key: _lookup(key, ck, cv, 1.0 / p)  # noqa: E731
        cap_max = np.full(nb, 1.0 / p)  # capacities that sum to 1 have their largest ≥ 1/p
        np.maximum.at(cap_max, ck // p, cv)
    cap_row = cap_of(blk * p + f["rank"])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = f["load"] / (load_sum[blk] * cap_row)
        imbalance = np.where(load_sum > 0, _per_block(blk, np.nan_to_num(share, nan=0.0), nb, absent, 0.0, "max"),
                             1.0)
        lbaf = np.where(mean > 0, load_max / mean - 1.0, np.nan)
        # the floor: objects that cannot move (on their trace ranks) and the heaviest that can
        tb = flat.task_block
        fixed_key = tb[~flat.migratable] * p + flat.ranks[~flat.migratable]
        fk, finv = np.unique(fixed_key, return_inverse=True)
        fixed = np.bincount(finv.ravel(), weights=flat.loads[~flat.migratable], minlength=fk.size)
        fixed_share = np.zeros(nb)
        np.maximum.at(fixed_share, fk // p, fixed / (load_sum[fk // p] * cap_of(fk)))
        heavy = np.zeros(nb)
        np.maximum.at(heavy, tb[flat.migratable], flat.loads[flat.migratable])
        floor = np.where(load_sum > 0, np.maximum(1.0, np.maximum(np.nan_to_num(fixed_share, nan=0.0),
                                                                  heavy / (load_sum * cap_max))), 1.0)
        pair_blk = f["pair_key"] // (p * p)
        pair_max = np.zeros(nb)
        np.maximum.at(pair_max, pair_blk, f["pair"])
        comm = np.maximum(f["sent"], f["received"])
        work_sum = np.bincount(blk, weights=np.where(np.isfinite(f["work"]), f["work"], 0.0), minlength=nb)
        work_inf = np.bincount(blk, weights=(~np.isfinite(f["work"])).astype(np.float64), minlength=nb) > 0
        work_mean = np.where(work_inf, np.inf, (work_sum + wm.gamma * absent) / p)
        work_max = _per_block(blk, f["work"], nb, absent, wm.gamma, "max")
        work_lbaf = np.where(np.isfinite(work_mean) & (work_mean > 0), work_max / work_mean - 1.0, np.nan)
    out = {
        "tasks": n_tasks,
        "migratable": np.bincount(tb, weights=flat.migratable.astype(np.float64), minlength=nb).astype(np.int64),
        "communications": n_comm,
        "other_communications": np.diff(flat.comm_start) - n_comm,
        "load_sum": load_sum, "load_min": load_min, "load_mean": mean, "load_max": load_max,
        "imbalance": imbalance, "lbaf_imbalance": lbaf, "imbalance_floor": floor,
        "offrank_bytes": f["offrank"], "local_bytes": f["local"],
        "pairs": np.bincount(pair_blk, minlength=nb), "pair_volume_max": pair_max,
        "comm_max": _per_block(blk, comm, nb, absent, 0.0, "max"),
        "memory_max": _per_block(blk, f["memory"], nb, absent, 0.0, "max"),
        "memory_over": (np.bincount(blk, weights=(f["memory"] > wm.memory_limit).astype(np.float64), minlength=nb)
                        if wm.memory_limit is not None else np.zeros(nb)).astype(np.int64),
        "homing": np.bincount(blk, weights=f["homing"], minlength=nb),
        "work_max": work_max, "work_mean": work_mean, "work_lbaf_imbalance": work_lbaf,
    }
    return {k: v[flat.block] for k, v in out.items()}


#: the figures of :func:`trace_figures` that ``hermes trace replay`` records before and after balancing
FIGURES = ("load_max", "load_mean", "imbalance", "lbaf_imbalance", "offrank_bytes", "local_bytes", "pair_volume_max",
           "comm_max", "memory_max", "memory_over", "homing", "work_max", "work_mean", "work_lbaf_imbalance")


def phase_figures(ph, ranks: ArrayLike, model: WorkModel | None = None,
                  capacities: ArrayLike | None = None) -> dict[str, float]:
    """The summary figures of one assignment of one phase (:func:`trace_figures` of the phase alone)."""
    from hermes.trace.trace_phase import FlatTrace

    caps = np.full(ph.n_ranks, 1.0 / ph.n_ranks) if capacities is None else capacities
    f = trace_figures(FlatTrace.of([ph], ph.n_ranks), np.asarray(ranks, dtype=np.int64), model, caps)
    return {k: (int(f[k][0]) if k == "memory_over" else float(f[k][0])) for k in FIGURES}
