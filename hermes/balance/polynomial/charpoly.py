"""Characteristic polynomial of the generalized Laplacian, Berlekamp–Massey, and the Krylov kernels of §8.2–8.5.

The coefficients ``[1, a_1, …, a_p]`` of ``χ(μ) = det(μI − 𝓛)`` (𝓛 = D^{-1/2} L D^{-1/2}, similar to
``A = L D⁻¹``) by Faddeev–LeVerrier (thesis Alg. 11), Newton's identities (Alg. 10) or Berkowitz's
division-free algorithm (§8.2.1); the minimal generating polynomial of a scalar sequence by
Berlekamp–Massey (Alg. 14); and the neighbour-step kernels shared by LPS, LPA, MPA
(:mod:`hermes.balance.polynomial.lps`) and AdA (:mod:`hermes.balance.polynomial.ada`), which evaluate
polynomials of A serially (one rank's arithmetic, in the same order, for every rank) and on one rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.flow import (
    FlowResult,
    LocalFlowResult,
    alpha_beta_time,
    neighbour_table,
    ordered_total,
    validate_model,
)
from hermes.balance.model import Model
from hermes.runtime.comm import Counters, NeighbourComm
from hermes.errors import BalancerError

__all__ = ["COEFFICIENT_METHODS", "generalized_laplacian", "charpoly_faddeev", "charpoly_newton",
           "charpoly_berkowitz", "laplacian_polynomial", "berlekamp_massey", "schedule_counters", "PolyState"]
COEFFICIENT_METHODS = ("faddeev", "newton", "berkowitz")


# -- coefficients of the characteristic polynomial (thesis §8.2.1, Alg. 10, 11) -----------------------
def charpoly_faddeev(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[1, a_1, …, a_p]`` of ``det(μI − a)`` by Faddeev–LeVerrier (thesis Alg. 11).

    Notes
    -----
    ``P¹ = a``; for i = 1..p: ``a_i = −tr(Pⁱ)/i``, ``P^{i+1} = (Pⁱ + a_i I) a``.
    """
    a = np.asarray(a, dtype=np.float64)
    p = len(a)
    out = np.ones(p + 1)
    pk = a.copy()
    for i in range(1, p + 1):
        out[i] = -np.trace(pk) / i
        pk = (pk + out[i] * np.eye(p)) @ a
    return out


def charpoly_newton(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[1, a_1, …, a_p]`` from the power sums ``s_k = tr(aᵏ)`` by Newton's identities (thesis eq. 8.2.5, Alg. 10).

    Notes
    -----
    ``k a_k = −(s_k + a_1 s_{k−1} + … + a_{k−1} s_1)``, a lower-triangular system in ``a_1..a_p``
    solved by forward substitution (the printed matrix lists the unknowns in reverse order).
    """
    a = np.asarray(a, dtype=np.float64)
    p = len(a)
    s = np.zeros(p + 1)
    pk = np.eye(p)
    for k in range(1, p + 1):
        pk = pk @ a
        s[k] = np.trace(pk)
    out = np.ones(p + 1)
    for k in range(1, p + 1):
        out[k] = -(s[k] + np.dot(out[1:k], s[k - 1:0:-1])) / k
    return out


def charpoly_berkowitz(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[1, a_1, …, a_p]`` by Berkowitz's division-free algorithm (thesis eq. 8.2.8–8.2.11, Samuelson's identity).

    Notes
    -----
    ``χ = C_1 C_2 ⋯ C_p`` with ``C_j`` the (p+2−j)×(p+1−j) lower-triangular Toeplitz matrix whose first
    column is ``(1, −a_jj, −u_jᵀ v_j, −u_jᵀ M_j v_j, …)``, ``M_j = a[j+1:, j+1:]``, ``u_jᵀ = a[j, j+1:]``,
    ``v_j = a[j+1:, j]``; evaluated right to left. Only products and sums.
    """
    from scipy.linalg import toeplitz

    a = np.asarray(a, dtype=np.float64)
    p = len(a)
    vec = np.array([1.0, -a[p - 1, p - 1]])
    for j in range(p - 2, -1, -1):
        m = p - j
        mat, u, x = a[j + 1:, j + 1:], a[j, j + 1:], a[j + 1:, j].copy()
        col = np.empty(m + 1)
        col[0], col[1] = 1.0, -a[j, j]
        for i in range(2, m + 1):
            col[i] = -(u @ x)
            x = mat @ x
        vec = toeplitz(col, np.eye(1, m).ravel()) @ vec
    return vec


_METHODS = {"faddeev": charpoly_faddeev, "newton": charpoly_newton, "berkowitz": charpoly_berkowitz}


def generalized_laplacian(model: Model) -> NDArray[np.float64]:
    """Dense ``𝓛 = D^{-1/2} A W Aᵀ D^{-1/2}`` (thesis §8.1)."""
    r = 1.0 / np.sqrt(model.capacities)
    return model.laplacian.toarray() * r[:, None] * r[None, :]


def check_method(method: str, name: str = "coefficients") -> None:
    if method not in _METHODS:
        raise BalancerError(f"{name} must be one of {', '.join(COEFFICIENT_METHODS)}, got {method!r}")


def laplacian_polynomial(model: Model, method: str = "faddeev") -> NDArray[np.float64]:
    """Coefficients ``[1, a_1, …, a_p]`` of the Laplacian polynomial ``det(μI − 𝓛)`` (thesis §8.2).

    Raises
    ------
    BalancerError
        Unknown ``method`` (faddeev | newton | berkowitz).
    """
    check_method(method)
    validate_model(model)
    return _METHODS[method](generalized_laplacian(model))


# -- Berlekamp–Massey (thesis Alg. 14) ------------------------------------------------------------------
def berlekamp_massey(s, tol: float = 0.0, stop_after: int = 0) -> NDArray[np.float64]:
    """Minimal generating polynomial ``[α_0 = 1, α_1, …, α_d]`` of the sequence ``s`` (thesis Alg. 14).

    ``Σ_i α_i s_{n−i} = 0`` for all ``d ≤ n < len(s)`` (up to ``tol``).

    Parameters
    ----------
    s : sequence of float
    tol : float
        A discrepancy ``d = Σ_i α_i s_{n−i}`` (exactly rounded sum) counts as zero when
        ``|d| ≤ tol Σ_i |α_i s_{n−i}|`` (0: exact test).
    stop_after : int
        Early termination: stop once ``stop_after`` consecutive discrepancies were zero and at least 2d
        terms were used (0: use the whole sequence).

    Notes
    -----
    Massey's form with ``B(x) = 1`` initially (the printed ``β(X) = 0`` makes the first correction vanish,
    and the printed ``δ⁻¹`` is the last non-zero discrepancy ``b⁻¹``), S indexed from 0. In floating point
    the late terms of a Krylov sequence carry mostly rounding noise, which makes the exact algorithm raise
    the degree; MPA stops after two confirmed terms.
    """
    s = np.asarray(s, dtype=np.float64)
    n_s = len(s)
    c, b = np.zeros(n_s + 1), np.zeros(n_s + 1)
    c[0] = b[0] = 1.0
    deg, m, last, zeros = 0, 1, 1.0, 0
    for n in range(n_s):
        prods = c[:deg + 1] * s[n::-1][:deg + 1]
        d = math.fsum(prods)
        if abs(d) <= tol * math.fsum(np.abs(prods)):
            m, zeros = m + 1, zeros + 1
            if stop_after and deg and zeros >= stop_after and n + 1 >= 2 * deg:
                break
            continue
        zeros = 0
        old = c.copy()
        c[m:] -= (d / last) * b[:n_s + 1 - m]
        if 2 * deg <= n:
            deg, b, last, m = n + 1 - deg, old, d, 1
        else:
            m += 1
    return c[:deg + 1].copy()



# -- Krylov kernels: the serial forms do one rank's arithmetic, in the same order, for every rank ---------
class NeighbourTables:
    """A model's padded neighbour tables (sorted neighbours: the order of NeighbourComm)."""

    def __init__(self, model: Model):
        self.model = model
        self.nbr, self.edge, self.sign = neighbour_table(model)
        self.mask = self.sign != 0
        self.wt = np.where(self.mask, model.weights[self.edge], 0.0)

    def apply(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Σ_j w_ij (z_i − z_j)`` for every row i (z of shape (p,) or (p, m)), in neighbour order."""
        ex = (slice(None),) + (None,) * (z.ndim - 1)
        acc = np.zeros(z.shape)
        for t in range(self.nbr.shape[1]):
            col = self.wt[:, t][ex] * (z - z[self.nbr[:, t]])
            acc = acc + np.where(self.mask[:, t][ex], col, 0.0)
        return acc

    def krylov(self, x0, steps: int, scale: float = 1.0) -> list[NDArray[np.float64]]:
        """``[x0, A x0 / s, …]`` with ``A = L D⁻¹``: ``steps`` neighbour steps."""
        xs = [x0]
        for _ in range(steps):
            xs.append(self.apply(xs[-1] / self.model.capacities) / scale)
        return xs

    def defect(self, flow: NDArray[np.float64]) -> NDArray[np.float64]:
        """Local balance defects ``l_i − c_i Σl − Σ_j f_ij`` (Σ_j in neighbour order)."""
        m = self.model
        acc = np.zeros(m.p)
        for t in range(self.nbr.shape[1]):
            acc = acc + np.where(self.mask[:, t], self.sign[:, t] * flow[self.edge[:, t]], 0.0)
        return (m.loads - m.capacities * ordered_total(m.loads)) - acc

    def potential_flow(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        e = self.model.edges
        return -self.model.weights * (y[e[:, 0]] - y[e[:, 1]])

    def operator_flow(self, rows: NDArray[np.float64], x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``−w_ij Σ_k (Y_ik − Y_jk) x_k`` on every edge (sum over k in order)."""
        e = self.model.edges
        return -self.model.weights * np.cumsum((rows[e[:, 0]] - rows[e[:, 1]]) * x, axis=1)[:, -1]


def checked_divisor(value: float, what: str) -> float:
    """The divisor of a polynomial scheme; raise if rounding made it 0 or overflowed (same on every rank)."""
    if value == 0 or not math.isfinite(value):
        raise BalancerError(f"{what} = {float(value)!r} in double precision: the polynomial is numerically unusable "
                            f"for this graph (too many processors or distinct eigenvalues)")
    return float(value)


def polynomial_potential(coef, xs, divisor: float, c):
    """``y = Σ_t coef[t] xs[t] / divisor / c`` (0 without terms)."""
    if len(coef) == 0:
        return 0.0 * c
    checked_divisor(divisor, "the leading divisor (a_{p−1} or α_{d−1})")
    acc = coef[0] * xs[0]
    for t in range(1, len(coef)):
        acc = acc + coef[t] * xs[t]
    return acc / divisor / c


def ordered_dot(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    return float(np.cumsum(x * y)[-1]) if len(x) else 0.0


def neighbour_step(nb: NeighbourComm, z, w: NDArray[np.float64]):
    """One neighbour step on a rank: send z (scalar or row), return ``Σ_j w_j (z − z_j)``."""
    if np.ndim(z) == 0:
        zj, acc = nb.exchange_scalar(float(z)), 0.0
    else:
        zj, acc = nb.exchange([z] * len(w), recv_sizes=np.full(len(w), len(z))), np.zeros(len(z))
    for k in range(len(zj)):
        acc = acc + w[k] * (z - zj[k])
    return acc


def neighbour_krylov(nb: NeighbourComm, x0: float, steps: int, capacity: float, w, scale: float = 1.0) -> list[float]:
    xs = [x0]
    for _ in range(steps):
        xs.append(neighbour_step(nb, xs[-1] / capacity, w) / scale)
    return xs


# -- counters of a known communication schedule (shared by the polynomial schemes) -------------------------
def schedule_counters(model: Model, iterations: int, schedule: list, links=None) -> tuple[Counters, Any]:
    """Counters of a communication ``schedule`` ``[(repeat, [(kind, words), …]), …]`` and per-rank α-β times.

    ``kind`` is ``exchange`` (one message of ``words`` float64 per edge direction) or a collective
    (``allreduce``, ``allgather``: ``words`` per rank). Messages and bytes are summed over the ranks.
    """
    p, q = model.p, model.q
    cnt = Counters(iterations=int(iterations))
    for repeat, block in schedule:
        for kind, words in block:
            if kind == "exchange":
                cnt.exchange_rounds += repeat
                cnt.messages += 2 * q * repeat
                cnt.bytes += 16 * q * words * repeat
            else:
                cnt.collectives[kind] = cnt.collectives.get(kind, 0) + repeat
                cnt.bytes += 8 * p * words * repeat
    cnt.collectives = {k: v for k, v in cnt.collectives.items() if v}
    times = alpha_beta_time(model, links, schedule) if links is not None else None
    cnt.time = float(np.max(times)) if times is not None else 0.0
    return cnt, times


def check_refine(refine, name: str = "refine") -> int:
    if isinstance(refine, bool) or not isinstance(refine, (int, np.integer)) or not 0 <= refine <= 20:
        raise BalancerError(f"{name} must be an integer in 0..20, got {refine!r}")
    return int(refine)


# -- what the polynomial schemes share: the generator state and the result builders -----------------------
@dataclass
class PolyState:
    """One step of a polynomial scheme's serial generator.

    ``iteration`` counts neighbour steps; ``value`` is the Krylov vector ``b_k`` (LPS, MPA), the
    coefficients ``a_0..a_k`` found so far (LPA), the remaining imbalance (eigen forms of LPS and MPA) or
    the nodes taken so far (eigen LPA). ``flow`` is set on the last state only.
    """

    iteration: int
    value: NDArray[np.float64]
    flow: NDArray[np.float64] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def check_eigen_refine(refine, name: str = "refine"):
    """``refine``: an integer 0..20, or ``"auto"`` (eigen forms:
    :func:`hermes.balance.polynomial.leja.resolve_refine`)."""
    return refine if refine == "auto" else check_refine(refine, name)


def literal_refine(refine) -> int:
    """The thesis' monomial forms take ``refine: auto`` as 0 (the literal algorithm, no refinement)."""
    return 0 if refine == "auto" else check_refine(refine)


def poly_result(model, flow, iterations, schedule, links, **extra) -> FlowResult:
    """``converged``: the flow is finite and, for the eigen forms, its predicted error is below 1."""
    cnt, times = schedule_counters(model, iterations, schedule, links)
    ok = bool(np.all(np.isfinite(flow))) and extra.get("predicted_error", 0.0) < 1.0
    return FlowResult(flow=flow, iterations=iterations, converged=ok, counters=cnt,
                      extra={**extra, "rank_times": times})


def poly_local_result(nb, flows, iterations, **extra) -> LocalFlowResult:
    nb.counters.iterations = iterations
    return LocalFlowResult(flows=np.asarray(flows, dtype=np.float64), iterations=iterations,
                           converged=bool(np.all(np.isfinite(flows))), counters=nb.counters, extra=extra)
