"""Error indicator of the real kernel: the jump of the solution across cell faces, and marking from it.

An adaptive CFD code refines where its error estimator is large. For hermes' cell-centred Jacobi
solution ``u`` (:mod:`hermes.app.mesh.kernels`) the indicator of cell i is the largest jump of ``u`` across
its faces,

    η_i = max_{j ~ i} |u_j − u_i|,

the discrete counterpart of the gradient-jump estimator |∇u|·h (cells across a face are one cell
size apart): it is large where ``u`` varies fast on the scale of the mesh and shrinks where the mesh
is refined, so the marking moves on as the mesh adapts. Marking follows the *maximum strategy*
(Babuška–Rheinboldt, as in deal.II's ``refine_and_coarsen_fixed_fraction`` family): a cell is marked
for refinement when ``η_i ≥ θ_r max η`` and for coarsening when ``η_i < θ_c max η`` (θ_c < θ_r leaves
a band in between that does neither, so cells do not flip back and forth). The maximum is global (one
allreduce), so the marking of a cell does not depend on which rank holds it.

The indicator is computed from the solution of the previous phase (solve → estimate → mark →
refine); before the first solve ``u`` is zero and nothing is marked.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hermes.app.mesh.kernels import neighbour_values
from hermes.runtime.comm import NeighbourComm, allreduce
from hermes.data.distributed import LocalDomain, halo_plan

__all__ = ["jump_indicator", "jump_indicator_serial", "gradient_jump", "mark_max_strategy"]


def jump_indicator(xadj: NDArray[np.int64], u: NDArray[np.float64], u_nbr: NDArray[np.float64]) -> NDArray[np.float64]:
    """η_i = max over row i of |u_nbr − u_i| (CSR rows of ``xadj``; 0 for a cell without neighbours).

    ``u_nbr`` holds the neighbour values in adjacency order (one per entry of the adjacency).
    """
    u = np.asarray(u, dtype=np.float64)
    n = xadj.size - 1
    deg = np.diff(xadj)
    out = np.zeros(n)
    if u_nbr.size == 0:
        return out
    jumps = np.abs(np.asarray(u_nbr, dtype=np.float64) - np.repeat(u, deg))
    has = deg > 0
    out[has] = np.maximum.reduceat(jumps, xadj[:-1][has])
    return out


def jump_indicator_serial(xadj: NDArray[np.int64], adjncy: NDArray[np.int64], u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The indicator on a whole mesh (the serial reference of :func:`gradient_jump`)."""
    return jump_indicator(xadj, u, np.asarray(u)[adjncy])


def gradient_jump(comm, dom: LocalDomain, clock, field: str = "u") -> NDArray[np.float64]:
    """The indicator of this rank's cells from ``dom.fields[field]`` (collective: one ghost exchange,
    charged to ``clock`` like the solver's own halo exchange)."""
    u = dom.fields[field]
    plan = halo_plan(dom)
    nb = NeighbourComm(comm, plan.ranks, clock)
    recv = nb.exchange([u[idx] for idx in plan.send_idx],
                       recv_sizes=np.array([g.size for g in plan.recv_gid], dtype=np.int64))
    ghost_gid = np.concatenate(plan.recv_gid) if plan.recv_gid else np.zeros(0, np.int64)
    ghost_u = np.concatenate(recv) if recv else np.zeros(0)
    o = np.argsort(ghost_gid, kind="stable")
    return jump_indicator(dom.xadj, u, neighbour_values(dom, u, ghost_gid[o], ghost_u[o]))


def mark_max_strategy(comm, eta: NDArray[np.float64], refine_fraction: float, coarsen_fraction: float,
                      clock=None) -> tuple[NDArray[np.bool_], NDArray[np.bool_], float]:
    """Refine ``η ≥ θ_r max η``, coarsen ``η < θ_c max η`` with the global maximum (collective).

    Returns (refine mask, coarsen mask, max η). With ``max η = 0`` (a flat solution) nothing is marked
    for refinement and nothing for coarsening.
    """
    if not 0.0 <= coarsen_fraction < refine_fraction <= 1.0:
        raise ValueError(f"need 0 <= coarsen fraction < refine fraction <= 1, got {coarsen_fraction}, "
                         f"{refine_fraction}")
    top = float(allreduce(comm, float(eta.max(initial=0.0)), clock, op="max"))
    if top <= 0.0:
        none = np.zeros(eta.size, dtype=bool)
        return none, none.copy(), 0.0
    return eta >= refine_fraction * top, eta < coarsen_fraction * top, top
