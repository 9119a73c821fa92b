"""The per-rank figures of a trace's phase under an assignment: load, communication, memory, work.

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

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import GraphError

__all__ = ["WorkModel", "RankFigures", "rank_figures", "phase_figures", "shared_blocks"]


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
        for name in ("alpha", "beta", "gamma", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise GraphError(f"work model: {name} must be a finite number, got {v!r}")
        if self.memory_limit is not None and not (self.memory_limit > 0 and math.isfinite(self.memory_limit)):
            raise GraphError(f"work model: the memory limit must be a positive number of bytes, got "
                             f"{self.memory_limit!r}")


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


def _user(ph, key: str) -> NDArray[np.float64] | None:
    v = ph.user.get(key)
    return None if v is None else np.nan_to_num(v, nan=0.0)


def shared_blocks(ph) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """(block of every task, −1 for none; block sizes; block homes): a block is a (home rank, shared_id) pair,
    its home the rank whose file lists the task in the trace, its size the task's ``shared_bytes``."""
    sid = ph.user.get("shared_id")
    n = ph.n_tasks
    if sid is None or n == 0:
        return np.full(n, -1, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    has = np.isfinite(sid) & (sid > -1)
    key = np.where(has, ph.ranks.astype(np.float64) * 2.0**32 + np.where(has, sid, 0), np.nan)
    uniq, inv = np.unique(key[has], return_inverse=True)
    block = np.full(n, -1, dtype=np.int64)
    block[has] = inv
    size_key = ph.user.get("shared_bytes")
    sizes = np.zeros(uniq.size)
    if size_key is not None:
        s = np.nan_to_num(size_key[has], nan=0.0)
        np.maximum.at(sizes, inv, s)
    homes = np.zeros(uniq.size, dtype=np.int64)
    homes[inv] = ph.ranks[has]
    return block, sizes, homes


def rank_figures(ph, ranks: ArrayLike, model: WorkModel | None = None) -> RankFigures:
    """Every per-rank figure of the module docstring for the phase ``ph`` with its tasks on ``ranks``."""
    wm = model or WorkModel()
    r = np.asarray(ranks, dtype=np.int64)
    p = ph.n_ranks
    load = np.bincount(r, weights=ph.loads, minlength=p).astype(np.float64)
    # communications between tasks (positions in ph.ids), endpoints on their current ranks
    n = ph.n_tasks
    sent = np.zeros(p)
    received = np.zeros(p)
    local = offrank = 0.0
    pair_volumes = np.zeros(0)
    if n and ph.comm_from.size:
        a, a_ok, b, b_ok = ph.endpoints()
        ok = a_ok & b_ok
        a, b, w = a[ok], b[ok], ph.comm_bytes[ok]
        ra, rb = r[a], r[b]
        off = ra != rb
        sent = np.bincount(ra[off], weights=w[off], minlength=p).astype(np.float64)
        received = np.bincount(rb[off], weights=w[off], minlength=p).astype(np.float64)
        local, offrank = float(w[~off].sum()), float(w[off].sum())
        if off.any():
            directed = np.bincount(ra[off] * p + rb[off], weights=w[off], minlength=p * p).reshape(p, p)
            both = np.maximum(directed, directed.T)
            iu = np.triu_indices(p, 1)
            v = both[iu]
            pair_volumes = v[v > 0]
    # memory and homing
    block, sizes, homes = shared_blocks(ph)
    shared = np.zeros(p)
    homing = np.zeros(p)
    if sizes.size:
        used = np.unique(np.stack([r[block >= 0], block[block >= 0]], axis=1), axis=0)
        np.add.at(shared, used[:, 0], sizes[used[:, 1]])
        away = homes[used[:, 1]] != used[:, 0]
        np.add.at(homing, used[away, 0], sizes[used[away, 1]])
    foot = _user(ph, "task_footprint_bytes")
    working = _user(ph, "task_working_bytes")
    memory = shared + (ph.rank_working if ph.rank_working is not None else 0.0)
    if foot is not None:
        memory = memory + np.bincount(r, weights=foot, minlength=p)
    if working is not None and n:
        top = np.zeros(p)
        np.maximum.at(top, r, working)
        memory = memory + top
    alpha = wm.alpha * ph.rank_user.get("rank_alpha", np.ones(p))  # LBAF's metadata.rank_alpha (default 1)
    work = alpha * load + wm.beta * np.maximum(sent, received) + wm.gamma + wm.delta * homing
    if wm.memory_limit is not None:
        work = np.where(memory > wm.memory_limit, np.inf, work)
    return RankFigures(load, sent, received, np.asarray(memory, dtype=np.float64) * np.ones(p), shared, homing, work,
                       local, offrank, pair_volumes)


def _imbalance(x: NDArray[np.float64], caps: NDArray[np.float64]) -> float:
    """max / mean of ``x`` relative to the capacities (1.0 when everything is 0)."""
    share = x.sum() * caps
    if x.sum() <= 0:
        return 1.0
    return float(np.max(x / share))


def phase_figures(ph, ranks: ArrayLike, model: WorkModel | None = None,
                  capacities: ArrayLike | None = None) -> dict[str, float]:
    """The summary figures of one assignment: loads (max, mean, imbalance; LBAF's max/mean − 1), the
    off-rank communication volume, the largest inter-rank pair volume, the largest sent/received, memory (max;
    ranks above the limit), work (max, mean, LBAF's imbalance of the work)."""
    f = rank_figures(ph, ranks, model)
    p = ph.n_ranks
    caps = np.full(p, 1.0 / p) if capacities is None else np.asarray(capacities, dtype=np.float64) / np.sum(capacities)
    mean = float(f.load.mean()) if p else 0.0
    finite = np.isfinite(f.work)
    wmean = float(f.work.mean()) if finite.all() else math.inf
    wm = model or WorkModel()
    return {
        "load_max": float(f.load.max()) if p else 0.0,
        "load_mean": mean,
        "imbalance": _imbalance(f.load, caps),
        "lbaf_imbalance": float(f.load.max() / mean - 1.0) if mean > 0 else math.nan,
        "offrank_bytes": f.offrank_volume,
        "local_bytes": f.local_volume,
        "pair_volume_max": float(f.pair_volumes.max()) if f.pair_volumes.size else 0.0,
        "comm_max": float(np.maximum(f.sent, f.received).max()) if p else 0.0,
        "memory_max": float(f.memory.max()) if p else 0.0,
        "memory_over": int(np.sum(f.memory > wm.memory_limit)) if wm.memory_limit is not None else 0,
        "homing": float(f.homing.sum()),
        "work_max": float(f.work.max()) if p else 0.0,
        "work_mean": wmean,
        "work_lbaf_imbalance": float(f.work.max() / wmean - 1.0) if math.isfinite(wmean) and wmean > 0 else math.nan,
    }
