"""The simulated parallel solver: thesis Algorithm 2 / Fig. 10.5.

Each iteration: a local computation whose work is ``work_per_weight × Σ weights`` of the rank's
cells (scaled by its capacity through the clock), an exchange with every neighbouring subdomain of
the cells' values whose modelled size is ``bytes_per_edge × shared boundary edges``, and a global
reduction (the norm a real solver needs for its error estimate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from hermes.app.mesh.simulate_bulk import BulkPart, bankable, solve_phase_bulk
from hermes.app.mesh.kernels import jacobi_sweep
from hermes.runtime.comm import NeighbourComm
from hermes.data.distributed import LocalDomain, halo_plan

__all__ = ["LoopStats", "solve_phase", "ghost_layout", "jacobi_step"]


@dataclass
class LoopStats:
    """This rank's figures for one compute loop."""

    iterations: int
    work: float
    bytes_sent: float
    messages: int
    residual: float


def ghost_layout(plan) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The permutation that sorts the received ghosts (concatenated in ``plan.ranks`` order) by global id, and
    the sorted ids (:func:`hermes.app.mesh.kernels.jacobi_sweep` looks ghosts up in them)."""
    ghost_gid = np.concatenate(plan.recv_gid) if plan.recv_gid else np.zeros(0, np.int64)
    order = np.argsort(ghost_gid, kind="stable")
    return order, ghost_gid[order]


def jacobi_step(dom: LocalDomain, u: NDArray[np.float64], recv: list[NDArray[np.float64]],
                order: NDArray[np.int64], ghost_sorted: NDArray[np.int64], clock) -> tuple[NDArray[np.float64], float]:
    """One Jacobi sweep with the ghosts ``recv`` (one array per neighbour, :func:`ghost_layout` order): the new
    values and the local residual ``Σ (u_new − u)²`` (the sweep's real arithmetic is charged to ``compute``)."""
    ghost_u = np.concatenate(recv)[order] if recv else np.zeros(0)
    with clock.measure("compute"):
        new_u = jacobi_sweep(dom, u, ghost_sorted, ghost_u)
    return new_u, float(np.sum((new_u - u) ** 2))


def solve_phase(comm, dom: LocalDomain, clock, *, kernel: str, iterations: int, work_per_weight: float,
                bytes_per_edge: float, bulk: str = "off") -> tuple[LocalDomain, LoopStats]:
    """Run ``iterations`` solver iterations on the current distribution (collective).

    ``bulk``: ``auto`` runs them once per MPI process for all the processors it hosts
    (:func:`hermes.app.mesh.simulate_bulk.solve_phase_bulk`: the same bits, the Python paid per process) when the clock
    allows it — virtual, without an extra load; ``off``: each processor runs its own loop, as below."""
    plan = halo_plan(dom)
    model_bytes = bytes_per_edge * plan.cut_edges.astype(np.float64)
    if bulk == "auto" and bankable(clock):
        part = BulkPart(dom, clock, plan, kernel, iterations, work_per_weight * dom.load, model_bytes)
        u, nbytes, messages, residual = comm.bulk("solve_phase", part, solve_phase_bulk)
        if kernel == "jacobi":
            dom = replace(dom, fields={**dom.fields, "u": u})
        return dom, LoopStats(iterations=iterations, work=part.work * iterations, bytes_sent=nbytes,
                              messages=messages, residual=residual)
    if bulk not in ("auto", "off"):
        raise ValueError(f"bulk: {bulk!r}, expected 'auto' or 'off'")
    nb = NeighbourComm(comm, plan.ranks, clock)
    order, ghost_sorted = ghost_layout(plan)
    recv_sizes = np.array([g.size for g in plan.recv_gid], dtype=np.int64)
    work = work_per_weight * dom.load
    u = dom.fields.get("u")
    residual = 0.0
    for _ in range(iterations):
        clock.compute(work)
        send = [u[idx] if u is not None else np.zeros(idx.size) for idx in plan.send_idx]
        recv = nb.exchange(send, model_bytes=model_bytes, recv_sizes=recv_sizes)
        if kernel == "jacobi":
            u, local = jacobi_step(dom, u, recv, order, ghost_sorted, clock)
        else:
            local = work
        residual = nb.allreduce(local)
    if kernel == "jacobi":
        dom = replace(dom, fields={**dom.fields, "u": u})
    c = nb.counters
    return dom, LoopStats(iterations=iterations, work=work * iterations, bytes_sent=float(c.bytes),
                          messages=c.messages, residual=float(residual))
