"""The solver's iterations run in bulk: once per MPI process over the processors it hosts
(:meth:`hermes.runtime.communicator.Communicator.bulk`), the same results as
:func:`hermes.app.mesh.simulate.solve_phase`'s per-processor loop, bit for bit.

The process' cells are laid end to end in rank order (each processor's block in its own gid order) and followed by
a ghost buffer for the cells of other processes. One CSR matrix of ones holds every row of every processor, its
entries in each cell's own adjacency order, pointing at the process' cells (a neighbour of the same processor or
of a co-hosted one: the halo exchange between them becomes an index) or at the ghost buffer. One sweep of all the
process' processors is then one mat-vec, whose row sums scipy adds left to right from 0 — what
:func:`hermes.app.mesh.kernels.jacobi_sweep` adds for each processor
(:func:`hermes.app.mesh.kernels.neighbour_sum_matrix`).

What crosses processes travels as one message per pair of processes per iteration: for every pair of processors
(sender s there, receiver t here), sorted by (t, s) on both sides, the sender's time stamp, then the values of the
cells s sends t (its halo plan's, gid order). Both sides derive the order from their own halo plans, so no index
ever travels.

The clocks are charged through a :class:`~hermes.runtime.clock.ClockBank`: per iteration the compute, each
processor's sends (the longest of its messages), its wait for the last arrival (the neighbour's stamp plus the
message's cost), and the allreduce of the residual (the latest stamp of all, one process-level allgather, then the
collective's cost) — the operations :class:`~hermes.runtime.comm.NeighbourComm` and
:func:`~hermes.runtime.comm.allreduce` perform for one processor, in the same order. The residual is summed in
rank order from 0.0 over every processor's ``Σ (u_new − u)²`` of the last iteration, each computed on its own
cells as the processor computes it (numpy's pairwise sum on a fresh array of its own length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.app.mesh.kernels import SIGMA
from hermes.data.distributed import HaloPlan, LocalDomain
from hermes.runtime.clock import ClockBank

__all__ = ["BulkPart", "bankable", "solve_phase_bulk"]


@dataclass
class BulkPart:
    """One processor's share of a bulk solve: what :func:`hermes.app.mesh.simulate.solve_phase` computed for it."""

    dom: LocalDomain
    clock: Any
    plan: HaloPlan
    kernel: str
    iterations: int
    work: float
    model_bytes: NDArray[np.float64]


def bankable(clock) -> bool:
    """Whether a processor's clock allows the bulk form: virtual, without an extra load (the same for every
    processor of a run: the clock kind and the extra-load section are the scenario's)."""
    return clock.kind == "virtual" and getattr(clock, "load", None) is None


def _costs(clock, rank: int, nbrs: NDArray[np.int64], nbytes: NDArray[np.float64], sending: bool):
    """``Links.cost`` of each message (``sending``: rank → nbrs[k], else nbrs[k] → rank), as the clock computes
    them one by one: ``α + b / bandwidth``."""
    links = clock.links
    if not links.overrides:
        return links.latency + nbytes / links.bandwidth
    if sending:
        return np.array([links.cost(rank, int(j), b) for j, b in zip(nbrs, nbytes)], dtype=np.float64)
    return np.array([links.cost(int(j), rank, b) for j, b in zip(nbrs, nbytes)], dtype=np.float64)


class _Layout:
    """The process' arrays for one phase (module docstring)."""

    def __init__(self, group, parts: list[BulkPart], jacobi: bool) -> None:
        lo, L = group.lo, len(parts)
        self.L = L
        doms = [pt.dom for pt in parts]
        plans = [pt.plan for pt in parts]
        n = np.array([d.n for d in doms], dtype=np.int64)
        self.cell_ptr = np.concatenate(([0], np.cumsum(n)))
        self.n_proc = int(self.cell_ptr[-1])
        deg = np.array([len(p.ranks) for p in plans], dtype=np.int64)
        self.pair_ptr = np.concatenate(([0], np.cumsum(deg)))
        self.has_nbrs = deg > 0
        self.nz_starts = self.pair_ptr[:-1][self.has_nbrs]
        npairs = int(self.pair_ptr[-1])
        pair_rank = np.concatenate([np.asarray(p.ranks, dtype=np.int64) for p in plans]) if L else np.zeros(0, int)
        pair_owner = np.repeat(np.arange(L, dtype=np.int64), deg)  # the local processor of each pair
        # the costs and the longest send of each processor, as its clock computes them
        self.own = np.zeros(L)
        recv_cost = []
        for ii, pt in enumerate(parts):
            if deg[ii]:
                rank = lo + ii
                send = _costs(pt.clock, rank, plans[ii].ranks, pt.model_bytes, True)
                self.own[ii] = float(np.max(send))
                recv_cost.append(_costs(pt.clock, rank, plans[ii].ranks, pt.model_bytes, False))
        self.recv_cost = np.concatenate(recv_cost) if recv_cost else np.zeros(0)
        # pairs whose neighbour is on another process: received in (process, receiver, sender) order
        pq = group.process_of(pair_rank)
        remote = np.flatnonzero(pq != group.pid)
        order = remote[np.argsort(pq[remote], kind="stable")]
        self.stamp_src = np.where(pq == group.pid, pair_rank - lo, -1)
        self.stamp_src[order] = L + np.arange(order.size)
        self.procs = [int(q) for q in np.unique(pq[remote])]
        self.recv_pairs = {q: int(np.count_nonzero(pq[remote] == q)) for q in self.procs}
        # what this process sends to each process: per pair (sender here, receiver there) sorted by (receiver,
        # sender), the sender's stamp, then its send cells' values (pair order)
        self.send_stamps: dict[int, NDArray[np.int64]] = {}
        self.send_cells: dict[int, NDArray[np.int64]] = {}
        self.jacobi = jacobi
        self.ghost_size: dict[int, int] = {}
        if jacobi:
            self._matrix(group, doms, plans, pair_rank, pair_owner, pq, order)
        for q in self.procs:
            idx = np.flatnonzero(pq == q)
            idx = idx[np.lexsort((pair_owner[idx], pair_rank[idx]))]
            self.send_stamps[q] = pair_owner[idx]
            if jacobi:
                k_of = idx - self.pair_ptr[pair_owner[idx]]
                cells = [self.cell_ptr[o] + plans[o].send_idx[k] for o, k in zip(pair_owner[idx], k_of)]
                self.send_cells[q] = np.concatenate(cells) if cells else np.zeros(0, np.int64)
        self.messages = deg
        self.sent_bytes = np.array([int(pt.model_bytes.sum()) for pt in parts], dtype=np.int64)

    def _matrix(self, group, doms, plans, pair_rank, pair_owner, pq, order) -> None:
        """The CSR of every row of the process (module docstring) and the ghost buffer's layout."""
        from scipy.sparse import csr_array

        L = self.L
        # the ghost buffer: the received blocks of the remote pairs, in receiving order
        sizes = np.zeros(pair_rank.size, dtype=np.int64)
        for ii, p in enumerate(plans):
            sizes[self.pair_ptr[ii]:self.pair_ptr[ii + 1]] = [g.size for g in p.recv_gid]
        ghost_off = np.full(pair_rank.size, -1, dtype=np.int64)
        off = np.concatenate(([0], np.cumsum(sizes[order])))
        ghost_off[order] = off[:-1]
        self.n_ghost = int(off[-1])
        for q in self.procs:
            self.ghost_size[q] = int(sizes[pq == q].sum())
        gids = np.concatenate([d.gid for d in doms]) if L else np.zeros(0, np.int64)
        by_gid = np.argsort(gids, kind="stable")
        sorted_gid = gids[by_gid]
        cols, indptr, nnz = [], [np.zeros(1, dtype=np.int64)], 0
        for ii, (d, p) in enumerate(zip(doms, plans)):
            adj = d.adjncy
            pos = np.minimum(np.searchsorted(sorted_gid, adj), max(sorted_gid.size - 1, 0))
            here = sorted_gid[pos] == adj if sorted_gid.size else np.zeros(adj.size, bool)
            col = np.empty(adj.size, dtype=np.int64)
            col[here] = by_gid[pos[here]]
            far = ~here
            if far.any():
                recv = np.concatenate(p.recv_gid)
                rorder = np.argsort(recv, kind="stable")
                at = rorder[np.searchsorted(recv[rorder], adj[far])]  # position in the plan's received blocks
                rptr = np.concatenate(([0], np.cumsum([g.size for g in p.recv_gid])))
                k = np.searchsorted(rptr, at, side="right") - 1
                slot = ghost_off[self.pair_ptr[ii] + k]
                if np.any(slot < 0):
                    raise ValueError(f"processor {group.lo + ii}: a neighbour cell neither in its process nor "
                                     f"received from another (a defect)")
                col[far] = self.n_proc + slot + (at - rptr[k])
            cols.append(col)
            indptr.append(d.xadj[1:] - d.xadj[0] + nnz)
            nnz += adj.size
        nnz_cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        self.A = csr_array((np.ones(nnz_cols.size), nnz_cols, np.concatenate(indptr)),
                           shape=(self.n_proc, self.n_proc + self.n_ghost))
        self.F = np.concatenate([d.fields["f"] for d in doms]) if L else np.zeros(0)
        self.denom = SIGMA + np.concatenate([np.diff(d.xadj) for d in doms]) if L else np.zeros(0)
        self.U = np.concatenate([d.fields["u"] for d in doms]) if L else np.zeros(0)


def solve_phase_bulk(group, parts: list[BulkPart]) -> list[tuple[NDArray[np.float64] | None, float, int, float]]:
    """:func:`hermes.app.mesh.simulate.solve_phase` for every processor of ``parts`` (rank order, one process' share,
    all with :func:`bankable` clocks): each processor's new ``u`` (None for the synthetic kernel), the bytes and
    messages it sent, and the loop's residual (its :class:`~hermes.app.mesh.simulate.LoopStats`)."""
    L = len(parts)
    kernel, iterations = parts[0].kernel, parts[0].iterations
    if any((pt.kernel, pt.iterations) != (kernel, iterations) for pt in parts):
        raise ValueError("bulk solve: the processors of a process run different loops (a defect)")
    jacobi = kernel == "jacobi"
    clocks = [pt.clock for pt in parts]
    bank = ClockBank(clocks)
    lay = _Layout(group, parts, jacobi)
    works = [float(pt.work) for pt in parts]
    dt = np.array([float(w) / c.rate if w > 0 else 0.0 for w, c in zip(works, clocks)], dtype=np.float64)
    wk = np.array([max(w, 0.0) for w in works], dtype=np.float64)
    coll = clocks[0].links.collective_cost(group.size, 8.0) if L else 0.0
    if any(c.links.collective_cost(group.size, 8.0) != coll for c in clocks):
        raise ValueError("bulk solve: the processors' links differ (a defect)")
    V = np.zeros(lay.n_proc + lay.n_ghost) if jacobi else None
    U = lay.U if jacobi else None
    locals_: list[float] = [0.0] * L
    residual = 0.0
    for t in range(iterations):
        bank.compute(dt, wk)
        stamps = bank.now.copy()
        out = {}
        for q in lay.procs:
            msg = stamps[lay.send_stamps[q]]
            out[q] = np.concatenate((msg, U[lay.send_cells[q]])) if jacobi else msg
        got = group.exchange(out)  # every process calls it, with messages or none: the group's calls stay aligned
        bank.charge(lay.own, "comm")
        if lay.nz_starts.size:
            remote = [got[q][:lay.recv_pairs[q]] for q in lay.procs]
            every = np.concatenate((stamps, *remote)) if remote else stamps
            arrivals = every[lay.stamp_src] + lay.recv_cost
            last = bank.now.copy()
            last[lay.has_nbrs] = np.maximum.reduceat(arrivals, lay.nz_starts)
            bank.wait_until(last)
        if jacobi:
            V[:lay.n_proc] = U
            at = lay.n_proc
            for q in lay.procs:
                vals = got[q][lay.recv_pairs[q]:]
                if vals.size != lay.ghost_size[q]:
                    raise ValueError(f"bulk solve: {vals.size} values from process {q}, {lay.ghost_size[q]} "
                                     f"expected (a defect)")
                V[at:at + vals.size] = vals
                at += vals.size
            new = (lay.F + lay.A @ V) / lay.denom
            if t == iterations - 1:
                cp = lay.cell_ptr
                locals_ = [float(np.sum((new[cp[i]:cp[i + 1]] - U[cp[i]:cp[i + 1]]) ** 2)) for i in range(L)]
            U = new
        else:
            locals_ = works
        # the residual's allreduce: every processor waits for the latest stamp, then pays the collective
        latest = float(np.max(group.allgather(np.array([np.max(bank.now)]))))
        bank.wait_until(np.full(L, latest))
        bank.charge(coll, "comm")
        if t == iterations - 1:
            acc = np.zeros(1)
            for row in group.allgather_var(np.array(locals_, dtype=np.float64)):
                for v in row:
                    acc += v
            residual = float(acc[0])
    bank.store(clocks)
    out = []
    for i in range(L):
        u = U[lay.cell_ptr[i]:lay.cell_ptr[i + 1]].copy() if jacobi else None
        nbytes = iterations * (int(lay.sent_bytes[i]) + 8)
        out.append((u, float(nbytes), int(lay.messages[i]) * iterations, residual))
    return out
