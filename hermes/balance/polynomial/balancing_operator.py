"""The balancing operator Θ = −W Aᵀ Y of the Laplacian polynomial, row by row (thesis Th. 23, 25).

With ``A = L D⁻¹`` and its characteristic polynomial ``Σ_k a_k μ^{p−k}``, the minimal flow is ``φ = Θ l``
with ``Y = D⁻¹ U``, ``U = M_{p−1} / a_{p−1}``, where ``M_1 = I``, ``M_{k+1} = A M_k + a_k I`` and
``a_k = −tr(A M_k)/k`` (Faddeev–LeVerrier). Rank r computes and keeps the row ``Y_r`` (LPA's parallel
Faddeev–LeVerrier, thesis Alg. 12); with its neighbours' rows it knows Θ on its edges,
``φ_rj = −w_rj (Y_r − Y_j) · l``. Shared by LPA (:mod:`hermes.balance.polynomial.lps`, which re-exports the
public names here) and AdA (:mod:`hermes.balance.polynomial.ada`, which reuses Θ across phases).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from hermes.balance.flow import ordered_total
from hermes.balance.model import Model
from hermes.balance.polynomial.charpoly import NeighbourTables, checked_divisor, neighbour_step, ordered_dot
from hermes.runtime.comm import NeighbourComm, ordered_sum

__all__ = ["operator_rows", "operator_row_distributed"]


def operator_rows(model: Model, coefficients=None) -> Iterator[tuple[int, float, NDArray[np.float64] | None]]:
    """LPA's parallel Faddeev–LeVerrier, serially: yields (k, a_k, None) per step, finally (p−1, a_{p−1}, Y).

    ``Y = D⁻¹ U`` (row i: what rank i holds), so that the balancing operator is ``Θ = −W Aᵀ Y`` (Th. 23, 25).
    Given ``coefficients`` ``[1, a_1, …]`` replace the traces. See :func:`operator_row_distributed`.
    """
    p, c, g = model.p, model.capacities, NeighbourTables(model)
    x = np.eye(p)
    saved, a_k = x, 1.0
    for k in range(1, p):
        saved = x
        ax = g.apply(x / c[:, None])
        a_k = -ordered_total(np.diagonal(ax)) / k if coefficients is None else float(coefficients[k])
        x = ax
        x[np.arange(p), np.arange(p)] += a_k
        yield k, a_k, None
    yield p - 1, a_k, saved / checked_divisor(a_k, "a_{p−1}") / c[:, None]


def operator_row_distributed(nb: NeighbourComm, capacity: float, weights, coefficients=None) -> NDArray[np.float64]:
    """Row ``Y_r = U_r / c_r`` of the balancing operator on rank r (LPA's loop, thesis Alg. 12 / Function 22).

    Notes
    -----
    Faddeev–LeVerrier ``M_1 = I``, ``a_k = −tr(A M_k)/k``, ``M_{k+1} = A M_k + a_k I`` with rank r holding row
    r: step k sends ``M_k[r] / c_r`` (p words), forms ``(A M_k)[r] = Σ_j w_rj (M_k[r]/c_r − M_k[j]/c_j)``
    and allreduces its diagonal entry (``T = tr(A M_k)``); after p−1 steps
    ``Y_r = M_{p−1}[r] / a_{p−1} / c_r``. Fixes of the printed Alg. 12: the product replaces the row (the
    printed ``arr[i] = arr[i] + …`` adds the old row); the loop has p−1 steps (the printed p-th computes
    ``T = tr(A M_p) = −p a_p = 0`` and divides by it); ``U = M_{p−1} / a_{p−1}``, i.e. the kept row times
    ``−(p−1)/T_{p−1}``, and the potentials ``U l / c`` (the printed ``arrS / (T · Cap)`` drops the factor
    ``−(p−1)``); ``M_k[j] / c_j`` is sent instead of dividing by the neighbours' capacities on receipt.
    With ``coefficients`` given the allreduces are skipped.
    """
    p, r = nb.size, nb.rank
    x = np.zeros(p)
    x[r] = 1.0
    saved, a_k = x, 1.0
    for k in range(1, p):
        saved = x
        ax = neighbour_step(nb, x / capacity, weights)
        a_k = -nb.allreduce(float(ax[r])) / k if coefficients is None else float(coefficients[k])
        x = ax.copy()
        x[r] += a_k
    return saved / checked_divisor(a_k, "a_{p−1}") / capacity


def row_flows(w, row, rows, x) -> NDArray[np.float64]:
    return np.array([-w[k] * ordered_dot(row - rows[k], x) for k in range(len(w))])


def refine_rows(nb, flows, w, row, rows, b: float, refine: int):
    for _ in range(refine):
        flows = flows + row_flows(w, row, rows, nb.allgather_rows(b - ordered_sum(flows))[:, 0])
    return flows
