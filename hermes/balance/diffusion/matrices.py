"""The generalized diffusion matrices M¹(ε) … M⁶ of thesis §5.6: edge rates, matrices, spectrum and bounds.

A generalized diffusion matrix (GDM, thesis eq. 5.0.1) is non-negative, has ``m_ij > 0`` only on
edges and the diagonal, columns summing to 1 and ``m_ij c_j = m_ji c_i``. Every matrix here has the
form ``M = I − A U Aᵀ D⁻¹`` (thesis §5.4) with edge rates ``u_k = m_ij c_j`` for ``e_k = {i, j}``
(``m_ij = u_k / c_j``, ``m_jj = 1 − Σ_i m_ij``):

* kind 1, ``min{c_i/(δ_i^w+ε), c_j/(δ_j^w+ε)} w_k`` — thesis eq. 5.6.1, JPDC 4.1 (Boillat generalized);
* kind 2, ``c_min w_k / (Δ^w+ε)`` — eq. 5.6.2 / 4.2;
* kind 3, ``√(c_min/c_max) √(c_i c_j) w_k / (Δ^w+ε)`` — JPDC 4.3; the thesis' eq. 5.6.3 extends the
  square root over ``w_k/(Δ^w+ε)``, which is not a GDM in general (Δ = 4, w = 1, equal capacities:
  a column sums to 4/√5 > 1), so the JPDC form is used;
* kind 4, ``c_i c_j w_k / (c_max (Δ^w+ε))`` — eq. 5.6.4 / 4.4;
* kind 5, ``c_i c_j`` — eq. 5.6.5 / 4.5, the "bad example" (weights and ε play no role);
* kind 6, ``α w_k`` with ``α = 2/(μ₂(𝓛)+μ_p(𝓛))``, ``𝓛 = D^{-1/2} A W Aᵀ D^{-1/2}`` — eq. 5.6.6 / 4.6
  (Elsässer et al.).

M¹ … M⁵ are GDMs for every ε ≥ 0 (columns of the off-diagonal part sum to at most
``δ_j^w/(Δ^w+ε) ≤ 1``, resp. ``Σ_{i∈N(j)} c_i < 1``); M⁶ may have a negative diagonal (the star of
thesis §5.6) — :func:`gdm_defects` detects it and :func:`diagonal_report` reports it. ``lazy=True``
uses ½(I + M) = I − A (U/2) Aᵀ D⁻¹ (thesis ch. 6, Sinclair): all eigenvalues ≥ 0, λ = ½(1 + λ₂(M)).

This module holds what depends on the matrix alone: the edge rates (serial, and per rank for the
distributed forms), the matrix itself, the flow GDA converges to, the bounds of §5.2/§5.5, and the
parameter checks shared by the diffusion-type schemes; the graph and spectral quantities e(G), ε₀
(Cor. 2), α of M⁶ and λ_M are in :mod:`hermes.balance.diffusion.spectral`. The iterations using these matrices
are in :mod:`hermes.balance.diffusion.gda` (GDA), :mod:`hermes.balance.diffusion.sos` (SOS) and
:mod:`hermes.balance.diffusion.implicit`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.balance.diffusion.spectral import (
    edge_connectivity,
    elsasser_alpha,
    epsilon0,
)
from hermes.balance.flow import (
    minimal_flow,
    neighbour_table,
    ordered_row_sums,
    ordered_total,
    validate_model,
)
from hermes.balance.model import Model
from hermes.runtime.comm import NeighbourComm
from hermes.errors import BalancerError

__all__ = ["MATRIX_KINDS", "GLOBAL_KINDS", "check_eps", "resolve_eps", "check_positive", "check_matrix",
           "diffusion_scalars", "Setup", "setup", "edge_rates", "local_edge_rates", "diffusion_matrix", "gdm_defects",
           "diagonal_report", "diffusion_flow", "diffusion_bounds", "second_eigenvalue_bound",
           "convergence_factor_bound"]

logger = logging.getLogger(__name__)

#: the diffusion matrices of thesis §5.6 (eq. 5.6.1–5.6.6)
MATRIX_KINDS = (1, 2, 3, 4, 5, 6)
#: kinds whose rates need the global (c_min, c_max, Δ^w): one allreduce in the distributed form
GLOBAL_KINDS = (2, 3, 4)


# -- parameter checks ---------------------------------------------------------------------------
def resolve_eps(model: Model, eps: str | float) -> float:
    """ε as a float: ``"eps0"`` becomes :func:`epsilon0` of the model, a number is checked by :func:`check_eps`.

    Raises
    ------
    BalancerError
        Another string, or a number that :func:`check_eps` rejects.
    """
    if isinstance(eps, str):
        if eps == "eps0":
            return epsilon0(model)
        raise BalancerError(f"unknown ε {eps!r}: expected 'eps0' or a number ≥ 0")
    return check_eps(eps)


def check_eps(eps) -> float:
    """Return ε as a float; BalancerError unless it is a finite number ≥ 0 (the distributed forms take no "eps0")."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise BalancerError(f"ε must be a number ≥ 0 (or 'eps0' for the serial form), got {eps!r}") from None
    if not math.isfinite(value) or value < 0:
        raise BalancerError(f"ε must be a finite number ≥ 0, got {eps!r}")
    return value


def check_positive(value, what: str) -> float:
    """Return ``value`` as a float; BalancerError "``what`` must be a finite number > 0" otherwise."""
    try:
        ok = math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise BalancerError(f"{what} must be a finite number > 0, got {value!r}")
    return float(value)


def check_matrix(kind, lazy, alpha, *, need_alpha: bool) -> None:
    """Validate the matrix choice (kind 1–6, lazy flag, α of M⁶ when the caller must give it)."""
    if isinstance(kind, bool) or kind not in MATRIX_KINDS:
        raise BalancerError(f"unknown diffusion matrix kind {kind!r}: expected one of 1, 2, 3, 4, 5, 6")
    if not isinstance(lazy, (bool, np.bool_)):
        raise BalancerError(f"lazy must be true or false, got {lazy!r}")
    if kind == 6 and (alpha is not None or need_alpha):
        check_positive(alpha, "α of M⁶")


# -- the matrices -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ends:
    """What the rates of edges {i, j} read at their endpoints: capacities ``ci``, ``cj``, weighted degrees
    ``di``, ``dj`` (δ^w) and the edge weights ``w`` (scalars or arrays, broadcast together)."""

    ci: float | NDArray[np.float64]
    cj: float | NDArray[np.float64]
    di: float | NDArray[np.float64]
    dj: float | NDArray[np.float64]
    w: NDArray[np.float64]


def _rates(kind: int, ends: _Ends, eps: float, glob, alpha, lazy: bool):
    """``u = m_ij c_j`` on edges {i, j} from endpoint data (vectorised).

    Symmetric in (i, j) bit for bit, so both endpoints of an edge compute the same rate: the
    distributed form calls it with i = this rank, the serial form with i = ``edges[k, 0]``.
    ``glob`` is (c_min, c_max, Δ^w) for kinds 2–4.
    """
    ci, cj, di, dj, w = ends.ci, ends.cj, ends.di, ends.dj, ends.w
    if kind == 1:
        u = np.minimum(ci / (di + eps), cj / (dj + eps)) * w
    elif kind == 2:
        u = glob[0] * w / (glob[2] + eps)
    elif kind == 3:
        u = math.sqrt(glob[0] / glob[1]) * np.sqrt(ci * cj) * w / (glob[2] + eps)
    elif kind == 4:
        u = ci * cj * w / (glob[1] * (glob[2] + eps))
    elif kind == 5:
        u = ci * cj
    else:
        u = float(alpha) * w
    return 0.5 * u if lazy else u


def diffusion_scalars(model: Model, eps: str | float) -> NDArray[np.float64]:
    """``s_k(ε) = min{c_i/(δ_i^w + ε), c_j/(δ_j^w + ε)}`` for every edge (thesis eq. 5.5.2).

    Raises
    ------
    BalancerError
        If ``eps`` is negative or not a number.
    """
    validate_model(model)
    eps = resolve_eps(model, eps)
    c, e, d = model.capacities, model.edges, model.weighted_degree
    return np.minimum(c[e[:, 0]] / (d[e[:, 0]] + eps), c[e[:, 1]] / (d[e[:, 1]] + eps))


@dataclass
class Setup:
    """What the serial forms precompute (:func:`setup`): resolved parameters, neighbour tables and edge rates.

    Attributes
    ----------
    eps : float
        The resolved ε (0 or the given number for M⁵, M⁶, which ignore it).
    alpha : float or None
        α of M⁶ (None for the other kinds).
    edge, sign : ndarray, shape (p, Δ)
        Edge index and orientation per neighbour slot (:func:`~hermes.balance.flow.neighbour_table`).
    mask : ndarray of bool, shape (p, Δ)
        True on real neighbour slots, False on padding.
    u : ndarray, shape (q,)
        Edge rates ``u_k = m_ij c_j`` (bit for bit those of :func:`local_edge_rates`).
    """

    eps: float
    alpha: float | None
    edge: NDArray[np.int64]
    sign: NDArray[np.float64]
    mask: NDArray[np.bool_]
    u: NDArray[np.float64]

    def outflow(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``(A x)_i`` summed over i's neighbours in sorted order (as a rank does)."""
        return ordered_row_sums(np.where(self.mask, self.sign * x[self.edge], 0.0))


def setup(model: Model, eps, kind, lazy, alpha) -> Setup:
    """Validate, resolve ε (not needed by M⁵, M⁶) and α (M⁶), and compute the edge rates u.

    The shared first step of the serial forms of GDA, SOS and the implicit schemes.

    Raises
    ------
    BalancerError
        Bad ε, kind, lazy or α (:func:`check_matrix`). GraphError for an unusable model.
    """
    validate_model(model)
    check_matrix(kind, lazy, alpha, need_alpha=False)
    eps_value = resolve_eps(model, eps) if kind <= 4 else check_eps(0.0 if isinstance(eps, str) else eps)
    if kind == 6 and alpha is None:
        alpha = elsasser_alpha(model)
    _, edge, sign = neighbour_table(model)
    mask = sign != 0
    degw = ordered_row_sums(np.where(mask, model.weights[edge], 0.0))
    c, e = model.capacities, model.edges
    glob = (float(c.min()), float(c.max()), float(degw.max())) if model.q else (1.0, 1.0, 1.0)
    u = _rates(kind, _Ends(c[e[:, 0]], c[e[:, 1]], degw[e[:, 0]], degw[e[:, 1]], model.weights), eps_value, glob,
               alpha, bool(lazy))
    return Setup(eps_value, None if alpha is None else float(alpha), edge, sign, mask,
                  np.asarray(u, dtype=np.float64))


def edge_rates(model: Model, eps: str | float = "eps0", kind: int = 1, *, lazy: bool = False,
               alpha: float | None = None) -> NDArray[np.float64]:
    """Edge rates ``u_k = m_ij c_j`` of the diffusion matrix ``kind`` (table in the module docstring).

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ε of M¹ … M⁴ (ignored by M⁵ and M⁶).
    kind : int in 1..6
    lazy : bool
        Rates of ½(I + M), i.e. u/2.
    alpha : float, optional
        α of M⁶; default :func:`elsasser_alpha`.

    Returns
    -------
    ndarray of float64, shape (q,)
        Computed with the same arithmetic as :func:`local_edge_rates` (bit-identical).
    """
    return setup(model, eps, kind, lazy, alpha).u


def local_edge_rates(nb: NeighbourComm, capacity: float, weights: NDArray[np.float64], eps: float, kind: int = 1,
                     *, lazy: bool = False, alpha: float | None = None) -> tuple[NDArray, NDArray]:
    """This rank's edge rates ``u_ij`` and its neighbours' capacities (collective, after input agreement).

    Notes
    -----
    One exchange of (c_i, δ_i^w) with the neighbours; for M², M³, M⁴ also one allreduce(max) of
    (−c_i, c_i, δ_i^w) for (c_min, c_max, Δ^w). The rates are those of :func:`edge_rates`, bit for
    bit. Validated inputs are assumed (see :func:`~hermes.balance.diffusion.gda.gda_distributed`).
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    capacity = float(capacity)
    degw = ordered_total(w)
    peer = nb.exchange([np.array([capacity, degw])] * len(nb.neighbours))
    cj = np.array([x[0] for x in peer], dtype=np.float64)
    dj = np.array([x[1] for x in peer], dtype=np.float64)
    glob = None
    if kind in GLOBAL_KINDS:
        g = nb.allreduce(np.array([-capacity, capacity, degw]), op="max")
        glob = (-float(g[0]), float(g[1]), float(g[2]))
    u = _rates(kind, _Ends(capacity, cj, degw, dj, w), float(eps), glob, alpha, bool(lazy))
    return np.asarray(u, dtype=np.float64), cj


def diffusion_matrix(model: Model, eps: str | float = "eps0", kind: int = 1, *, lazy: bool = False,
                     alpha: float | None = None) -> sp.csr_array:
    """The diffusion matrix M^kind(ε) of thesis eq. (5.6.1)–(5.6.6) as a sparse p×p matrix.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
    kind : int in 1..6
    lazy : bool
        Return ½(I + M) (thesis ch. 6).
    alpha : float, optional
        α of M⁶ (default :func:`elsasser_alpha`).

    Returns
    -------
    scipy.sparse.csr_array
        ``m_ij = u_k / c_j`` for ``e_k = {i, j}``, ``m_jj = 1 − Σ_{i≠j} m_ij``.

    Raises
    ------
    BalancerError
        Negative ε, unknown kind, bad α. GraphError for a model the algorithms cannot use.

    Notes
    -----
    ``M = I − A U Aᵀ D⁻¹`` with ``D = diag(c)`` (thesis §5.4). For kinds 1–5 the diagonal is ≥ 0 in
    exact arithmetic and round-off below 0 (possible for ε = 0) is clipped; M⁶'s diagonal
    ``1 − α δ_j^w / c_j`` is returned as is, negative or not (see :func:`gdm_defects`).
    """
    s = setup(model, eps, kind, lazy, alpha)
    c, e, p = model.capacities, model.edges, model.p
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    vals = np.concatenate([s.u / c[e[:, 1]], s.u / c[e[:, 0]]])
    off = sp.csr_array((vals, (rows, cols)), shape=(p, p))
    diag = 1.0 - np.asarray(off.sum(axis=0)).ravel()
    if kind != 6:
        diag = np.maximum(diag, 0.0)
    return (off + sp.diags_array(diag)).tocsr()


def gdm_defects(M, c: NDArray[np.float64]) -> dict[str, float]:
    """How far M is from a generalized diffusion matrix with Perron vector c (thesis eq. 5.0.1).

    Returns
    -------
    dict
        ``min_entry`` (negative: M violates non-negativity, e.g. M⁶ on the star of thesis §5.6),
        ``column_sum`` = ``max_j |Σ_i m_ij − 1|``, ``balance`` = ``max |m_ij c_j − m_ji c_i|``.
        A GDM has ``min_entry ≥ 0`` and the other two at round-off level.
    """
    m = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=np.float64)
    mc = m * np.asarray(c, dtype=np.float64)[None, :]
    return {"min_entry": float(m.min()), "column_sum": float(np.max(np.abs(m.sum(axis=0) - 1.0))),
            "balance": float(np.max(np.abs(mc - mc.T)))}


def diagonal_report(model: Model, s: Setup, kind: int) -> dict:
    """``min_diagonal`` of M (``1 − δ_i^u / c_i``) and whether M is non-negative, for a result's ``extra``.

    When M is not a GDM (M⁶ on graphs like the star of thesis §5.6) the result says so
    (``nonnegative: False``) and an info-level log line records it.
    """
    if model.q == 0:
        return {"min_diagonal": 1.0, "nonnegative": True}
    degu = ordered_row_sums(np.where(s.mask, s.u[s.edge], 0.0))
    low = float(np.min(1.0 - degu / model.capacities))
    ok = low >= -1e-12
    if not ok:
        logger.info("M%d has a negative diagonal entry %.3g: not a generalized diffusion matrix "
                       "(thesis §5.6, star counter-example)", kind, low)
    return {"min_diagonal": low, "nonnegative": ok}


def diffusion_flow(model: Model, eps: str | float = "eps0", kind: int = 1, *,
                   alpha: float | None = None) -> NDArray[np.float64]:
    """The balancing flow GDA with M^kind(ε) converges to (thesis Lemma 7, Th. 14).

    Returns
    -------
    ndarray of float64, shape (q,)
        The balancing flow minimising ``Σ_k f_k² / u_k``.

    Notes
    -----
    The GDA flow is ``f = U Aᵀ D⁻¹ (I − B)⁻¹ l`` (Lemma 7), a scaled projection of every balancing
    flow (Th. 14): it is minimal in ``‖·‖_{2,U^{-1/2}}``, i.e. it is
    :func:`~hermes.balance.flow.minimal_flow` of the model with conductances u. It equals the
    minimal flow for the weights w (Th. 20) when u ∝ w on every 2-edge-connected component: M², M⁶,
    M¹ with equal s_k (homogeneous regular graphs) and any matrix on a tree. Scaling u (lazy
    variant, implicit step α) does not change it. For M¹ the rates use the bincount degrees of
    :func:`diffusion_scalars` (as before this module grew the other kinds).
    """
    if kind == 1:
        u = diffusion_scalars(model, eps) * model.weights
    else:
        u = edge_rates(model, eps, kind, alpha=alpha)
    return minimal_flow(Model(model.p, model.edges, model.loads, model.capacities, u))


# -- bounds on the spectrum ---------------------------------------------------------------------
def diffusion_bounds(model: Model, eps: str | float = "eps0", kind: int = 1, *, lazy: bool = False,
                     alpha: float | None = None) -> dict[str, float]:
    """Bounds of thesis §5.2/§5.5 on the spectrum of M^kind(ε) (or of ½(I + M) if ``lazy``).

    Returns
    -------
    dict
        ``theta`` = θ(M) = ``min_k u_k``; ``cor1`` (Cor. 1, eq. 5.2.7)
        ``1 − 4 e(G) θ / c_max · sin²(π/2p)`` and ``th11`` (Th. 11, eq. 5.2.8) ``1 − θ / diam(G)``,
        both upper bounds on λ₂; ``lambda2`` their minimum; ``lambda_p`` a bound on ``|λ_p|`` when
        λ_p < 0; ``factor`` = ``max(lambda2, lambda_p)`` ≥ λ_M.

    Notes
    -----
    Cor. 1 and Th. 11 hold for every ``M = I − A U Aᵀ D⁻¹`` with u > 0 (Fiedler's bound scales with
    the smallest weight, and Th. 11's Rayleigh-quotient argument does not use non-negativity), so
    they apply to all six kinds and to the lazy matrices (θ halves, which gives exactly
    ½(1 + bound)). ``lambda_p``: for M¹(ε) Lemma 10, eq. (5.5.4), ``1 − 2ε/(Δ^w + ε)``; for the other
    kinds the Gershgorin argument of its proof, ``1 − 2 min_i m_ii`` (≥ 1 for M⁶ with a negative
    diagonal: no bound), which is 0 for the lazy form of a GDM (all its eigenvalues are ≥ 0). For M¹ with ε ≥ ε₀,
    ``factor`` is at most Cor. 2, eq. (5.5.6). For ε = 0 the bound may be 1 (periodic M¹(0)).
    """
    s = setup(model, eps, kind, lazy, alpha)
    if model.p < 2:
        return {"theta": 0.0, "cor1": 0.0, "th11": 0.0, "lambda2": 0.0, "lambda_p": 0.0, "factor": 0.0}
    theta = float(np.min(s.u))
    p = model.p
    cor1 = 1.0 - 4.0 * edge_connectivity(model) * theta / model.capacities.max() * math.sin(math.pi / (2 * p)) ** 2
    th11 = 1.0 - theta / model.diameter
    if kind == 1 and not lazy:
        dmax = float(model.weighted_degree.max())
        lam_p = 1.0 - 2.0 * s.eps / (dmax + s.eps)
    else:
        degu = ordered_row_sums(np.where(s.mask, s.u[s.edge], 0.0))  # δ_i^u, so m_ii = 1 − δ_i^u / c_i
        lam_p = max(1.0 - 2.0 * float(np.min(1.0 - degu / model.capacities)), 0.0)
    lam2 = min(cor1, th11)
    return {"theta": theta, "cor1": float(cor1), "th11": float(th11), "lambda2": float(lam2),
            "lambda_p": float(lam_p), "factor": float(max(lam2, lam_p))}


def second_eigenvalue_bound(model: Model, eps: str | float, kind: int = 1, *, lazy: bool = False,
                            alpha: float | None = None) -> float:
    """Upper bound on λ₂ of M^kind(ε): the smaller of Cor. 1 and Th. 11 (see :func:`diffusion_bounds`).

    Notes
    -----
    With ``θ(M) = min_{(i,j)∈E} m_ij c_j = min_k u_k``: Cor. 1, eq. (5.2.7),
    ``λ₂ ≤ 1 − 4 e(G) θ(M) / c_max · sin²(π / 2p)``; Th. 11, eq. (5.2.8), ``λ₂ ≤ 1 − θ(M) / diam(G)``.
    For M¹(ε), ``θ ≥ c_min w_min / (Δ^w + ε)`` and Cor. 1 gives (5.5.3).
    """
    return diffusion_bounds(model, eps, kind, lazy=lazy, alpha=alpha)["lambda2"]


def convergence_factor_bound(model: Model, eps: str | float, kind: int = 1, *, lazy: bool = False,
                             alpha: float | None = None) -> float:
    """Upper bound on the convergence factor λ_M of M^kind(ε) (thesis Cor. 2 for M¹ and ε ≥ ε₀).

    Notes
    -----
    ``λ_M = max(λ₂, |λ_p|)``: λ₂ by :func:`second_eigenvalue_bound` (Cor. 1 / Th. 11), a negative
    λ_p by Lemma 10 (M¹) or its Gershgorin argument (other kinds); see :func:`diffusion_bounds`.
    For M¹ with ``ε ≥ ε₀`` it is at most the right-hand side of Cor. 2, eq. (5.5.6):
    ``1 − 4 e(G) w_min / (Δ^w + ε) · (c_min / c_max) sin²(π / 2p)``.
    """
    return diffusion_bounds(model, eps, kind, lazy=lazy, alpha=alpha)["factor"]

