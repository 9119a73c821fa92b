"""Tolerances derived from rounding-error bounds, for tests that compare floats against a reference.

A test that compares a computed number with a reference asserts ``|computed − reference| ≤ bound``, where
the bound is machine epsilon times a size or condition factor of *that* quantity, stated here once
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002: §3.1 sums and products, §3.5
matrix products, §7.2 linear systems; Weyl's inequality for symmetric eigenvalues, Golub & Van Loan
§8.1). Every bound holds for any correct BLAS/LAPACK (any summation order, with or without FMA), because
it bounds the worst case of the algorithm, not the rounding of the build it was first run on; and each
is still far below the size of a real defect (a wrong coefficient, a wrong sign, a missing term): the
tests were checked to fail on perturbed results (a coefficient or a flow component off by 1e-6, a load
off by 1e-9).

Conventions: ``u = EPS / 2`` is the unit roundoff, ``γ_n = n u / (1 − n u)`` (Higham eq. 3.8) bounds the
relative error of n successive roundings; bounds are first order (terms in u² dropped). Quantities that
are exact in floating point (integers, counters, bit-for-bit agreements of forms that accumulate in the
same order) are compared with ``==`` in the tests, not here. Two helpers are estimates rather than
bounds, and say so: :func:`mpa_coefficient_tol` / :func:`mpa_flow_tol` (Berlekamp–Massey is not
backward stable), paired in the tests with the rigorous :func:`potential_flow_tol`.

``pytest.approx`` / ``np.allclose`` with their defaults (relative 1e-6 / 1e-5) are kept only for O(1)
values of a few flops with no cancellation, where any correct evaluation is within a few ulps, so the
default holds for every BLAS and still rejects any wrong formula; never for a quantity whose
conditioning depends on the data.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["EPS", "gamma", "flops", "sum_tol", "matvec_tol", "eig_tol", "laplacian_condition", "flow_tol",
           "flow_map_condition", "balancing_floor", "potential_flow_tol", "balancing_tol", "stopped_flow_tol",
           "converged_flow_tol", "conservation_tol", "area_tol", "jacobi_replay_tol", "charpoly_exact",
           "charpoly_tol", "monomial_tol", "polynomial_flow_tol", "operator_flow_bound", "mpa_coefficient_tol",
           "mpa_flow_tol"]

#: machine epsilon of float64 (2⁻⁵²); the unit roundoff is EPS / 2
EPS = float(np.finfo(np.float64).eps)


def gamma(n: int) -> float:
    """``γ_n = n u / (1 − n u)``, u = EPS/2: the relative error bound of n successive roundings (Higham eq. 3.8).

    A sum or dot product of n terms in any order satisfies ``|fl(Σ x_i) − Σ x_i| ≤ γ_{n−1} Σ |x_i|``.
    """
    nu = n * EPS / 2
    return nu / (1 - nu)


def flops(k: int) -> float:
    """Relative error bound ``γ_k`` of a formula of k rounded operations on exact inputs with no cancellation.

    Use for a closed form (a product, a quotient, a square root, a sum of same-sign terms) compared with
    the same quantity evaluated differently: both sides are within ``γ_k`` of the exact value, so use
    ``2 · flops(k)`` when both sides are rounded (or count both sides' operations in k).
    """
    return gamma(k)


def sum_tol(terms: ArrayLike, axis: int | None = None) -> NDArray[np.float64] | float:
    """Absolute error bound ``γ_n Σ |x_i|`` of summing the n terms in any order (Higham eq. 3.5).

    With ``axis``: one bound per sum along that axis (for row or column sums of a matrix).
    """
    x = np.abs(np.asarray(terms, dtype=np.float64))
    n = x.size if axis is None else x.shape[axis]
    return gamma(max(n, 1)) * x.sum(axis=axis)


def matvec_tol(a: ArrayLike, x: ArrayLike) -> NDArray[np.float64]:
    """Componentwise bound ``γ_n |A| |x|`` on ``fl(A x) − A x`` for any summation order (Higham eq. 3.12).

    ``a`` may be dense or a scipy sparse matrix (n is then its number of columns, an over-estimate of the
    terms per row).
    """
    absa = abs(a) if hasattr(a, "tocsr") else np.abs(np.asarray(a, dtype=np.float64))
    return gamma(int(absa.shape[1])) * np.asarray(absa @ np.abs(np.asarray(x, dtype=np.float64)))


def eig_tol(m: ArrayLike) -> float:
    """Absolute error bound on every eigenvalue of a symmetric (or symmetrizable) m computed by LAPACK.

    A backward-stable symmetric eigensolver returns the exact eigenvalues of ``M + E`` with
    ``‖E‖₂ ≤ p(n) u ‖M‖₂``; by Weyl's theorem each eigenvalue moves by at most ``‖E‖₂``. LAPACK's p(n) is
    "a modestly growing function of n": we take ``p(n) = 4 n`` (observed errors are below ``n u ‖M‖``),
    plus the ``γ_n`` of forming a symmetrized M from the stored one (both are in the bound below).
    """
    a = np.asarray(m.toarray() if hasattr(m, "toarray") else m, dtype=np.float64)
    n = a.shape[0]
    return (4 * n * EPS / 2 + gamma(n)) * float(np.linalg.norm(a, 2))


def laplacian_condition(weights_model) -> float:
    """Effective condition number ``κ = λ_max / λ_2`` of the weighted Laplacian ``L = A W Aᵀ`` of a model.

    λ_2 is the smallest eigenvalue on ``1^⊥``, the space the balancing problems live in (L is singular on 1).
    """
    lam = np.linalg.eigvalsh(weights_model.laplacian.toarray())
    return float(lam[-1] / lam[1]) if lam.size > 1 else 1.0


def flow_tol(model) -> float:
    """Bound on ``flow_error`` between two backward-stable computations of the minimal flow ``W Aᵀ L⁺ (l − l̄)``.

    A backward-stable solve of the grounded Laplacian system has relative forward error
    ``≤ c n u κ(L)`` (Higham Th. 7.2 with the usual ``c n`` growth of LU/Cholesky, n = p); forming the
    right-hand side and ``W Aᵀ y`` adds ``γ_{2 q}``. Each of the two flows compared is within that of the
    exact one, hence the factor 2; we take ``c = 4``.
    """
    p = model.p
    return 2 * (4 * p * EPS / 2 * laplacian_condition(model) + gamma(2 * model.q))


def flow_map_condition(model) -> float:
    """Condition of the flow map ``r ↦ f = W Aᵀ L⁺ r`` on ``1^⊥``: ``√(κ(L) w_max / w_min)``.

    ``‖W Aᵀ L⁺ r‖² = rᵀ L⁺ A W² Aᵀ L⁺ r`` lies between ``w_min rᵀ L⁺ r`` and ``w_max rᵀ L⁺ r``, and
    ``rᵀ L⁺ r`` between ``‖r‖²/λ_max`` and ``‖r‖²/λ_2``; the ratio of the extremes is the square of the value.
    """
    w = model.weights
    return float(np.sqrt(laplacian_condition(model) * w.max() / w.min())) if w.size else 1.0


def balancing_floor(model, flow: ArrayLike) -> float:
    """Round-off level of the relative balancing defect ``‖A f − b‖ / ‖b‖`` (``check_balancing``) of a flow f.

    Evaluating ``A f − b`` (b = l − l̄) errs by ``γ_2 |A| |f| + γ_{p+1} (|l| + c Σ|l|)``, and f itself
    is only known to ``γ_2 |f|`` (one subtraction and one product per edge), which A maps to
    ``‖A‖₂ γ_2 ‖f‖``. No computed flow can be more balancing than this: it is the fixed point of
    iterative refinement (LPS/LPA ``refine``, ``minimal_flow``).
    """
    f = np.asarray(flow, dtype=np.float64)
    loads, c = np.asarray(model.loads, dtype=np.float64), model.capacities
    nb = float(np.linalg.norm(loads - model.fair_loads))
    if nb == 0:
        return 0.0
    inc = model.incidence
    err = float(np.linalg.norm(matvec_tol(inc, f))) + gamma(model.p + 1) * float(
        np.linalg.norm(np.abs(loads) + c * np.abs(loads).sum()))
    return (err + float(np.linalg.norm(inc.toarray(), 2)) * gamma(2) * float(np.linalg.norm(f))) / nb


def potential_flow_tol(model, flow: ArrayLike) -> float:
    """A posteriori bound on ``flow_error`` of a potential flow ``f_ij = −w_ij (y_i − y_j)`` from its balancing defect.

    A potential flow lies in ``range(W Aᵀ)``, where the balancing flow is unique, so ``f − f* =
    W Aᵀ L⁺ (A f − b)`` (b = l − l̄) and ``‖f − f*‖ / ‖f*‖ ≤ cond ‖A f − b‖ / ‖b‖``, cond =
    :func:`flow_map_condition`. Rounding: f is within ``γ_2 |f|`` of an exact potential flow, and
    ``A f − b`` is evaluated within ``γ_2 |A| |f| + γ_{p+1} (|l| + c Σ|l|)``; plus :func:`flow_tol` for
    the reference f*. Exact arithmetic aside, this bound is rigorous; it is tight for any flow that
    balances to round-off, and it fails for a balancing flow that is not the minimal one.
    """
    from hermes.balance.flow import minimal_flow

    f = np.asarray(flow, dtype=np.float64)
    b = np.asarray(model.loads, dtype=np.float64) - model.fair_loads
    nb = float(np.linalg.norm(b))
    ref = float(np.linalg.norm(minimal_flow(model)))
    if nb == 0 or ref == 0:
        return flow_tol(model)
    defect = float(np.linalg.norm(model.incidence @ f - b)) / nb + balancing_floor(model, f)
    return flow_map_condition(model) * defect + gamma(2) * float(np.linalg.norm(f)) / ref + flow_tol(model)


def balancing_tol(model, flow_rel_tol: float) -> float:
    """Bound on ``check_balancing`` of a flow within relative ``flow_rel_tol`` of the minimal flow f*.

    ``A f − b = A (f − f*) + (A f* − b)``: ``‖A‖₂ flow_rel_tol ‖f*‖ / ‖b‖`` plus the round-off level
    :func:`balancing_floor` of f*.
    """
    from hermes.balance.flow import minimal_flow

    ref = minimal_flow(model)
    nb = float(np.linalg.norm(model.loads - model.fair_loads))
    if nb == 0:
        return 0.0
    norm_a = float(np.linalg.norm(model.incidence.toarray(), 2))
    return norm_a * flow_rel_tol * float(np.linalg.norm(ref)) / nb + balancing_floor(model, ref)


def stopped_flow_tol(conductance_model, loads_start: ArrayLike, loads_end: ArrayLike) -> float:
    """Bound on the relative distance of an iteration's flow to its limit, from the imbalance left when it stopped.

    For GDA, SOS and the implicit scheme every flow increment lies in ``range(U Aᵀ)`` (U the edge rates),
    so the flow still to come is the U-minimal flow of the remaining imbalance: ``f_∞ − f_k =
    U Aᵀ L_U⁺ (l_k − l̄)`` while ``f_∞ = U Aᵀ L_U⁺ (l_0 − l̄)``. Hence
    ``‖f_k − f_∞‖ / ‖f_∞‖ ≤ cond · ‖l_k − l̄‖ / ‖l_0 − l̄‖`` with cond = :func:`flow_map_condition` of the
    model whose weights are U (``conductance_model``), and l̄ = c Σ l_0. Add :func:`flow_tol` when f_∞
    is itself computed (``minimal_flow``).
    """
    l0 = np.asarray(loads_start, dtype=np.float64)
    fair = conductance_model.capacities * l0.sum()
    r0 = float(np.linalg.norm(l0 - fair))
    rk = float(np.linalg.norm(np.asarray(loads_end, dtype=np.float64) - fair))
    return flow_map_condition(conductance_model) * rk / r0 if r0 > 0 else 0.0


def converged_flow_tol(model, rates: ArrayLike, final_loads: ArrayLike) -> float:
    """Bound on the relative distance of a stopped diffusion-type flow to ``minimal_flow`` with conductances ``rates``.

    :func:`stopped_flow_tol` (the flow still to come, from the imbalance left) plus :func:`flow_tol`
    (the reference's own rounding), for the model whose edge weights are the rates U.
    """
    from hermes.balance.model import Model

    conductance = Model(model.p, model.edges, model.loads, model.capacities, np.asarray(rates, dtype=np.float64))
    return stopped_flow_tol(conductance, model.loads, final_loads) + flow_tol(conductance)


def conservation_tol(model, flow: ArrayLike, iterations: int, growth: float = 2.0) -> NDArray[np.float64]:
    """Componentwise bound on ``|apply_flow(f) − l_k|`` after k sweeps ``l ← l − A x, f ← f + x``.

    Exact arithmetic conserves ``l_k = l_0 − A f_k``; each sweep rounds a rank's update of
    ``≤ δ + 1`` terms (δ = max degree) by ``γ_{δ+2}`` times their magnitude, which stays below
    ``growth · ‖l_0‖_∞`` (a load plus what it sends: 2 for diffusion, more for over-relaxation), and
    ``apply_flow`` itself rounds by ``γ_{δ+1} (|l_0| + |A| |f|)``. Linear in the number of sweeps: the
    worst case of the rounding drift, not its typical √k growth.
    """
    f = np.abs(np.asarray(flow, dtype=np.float64))
    delta = int(np.max(model.degree)) if model.q else 0
    loads = np.abs(np.asarray(model.loads, dtype=np.float64))
    return ((iterations + 1) * gamma(delta + 2) * growth * loads.max()
            + gamma(delta + 1) * (loads + abs(model.incidence) @ f))


def area_tol(corners: ArrayLike) -> float:
    """Bound on ``|Σ_i fl(A_i) − Σ_i A_i|`` for polygon areas by the shoelace formula or by edge-vector cross products.

    ``corners`` has shape (n, k, 2). A polygon's area is ``½ Σ_j (x_j y_{j+1} − x_{j+1} y_j)``; each term
    and the sum carry ``γ_{2k+2}`` relative to ``Σ_j (|x_j y_{j+1}| + |x_{j+1} y_j|)`` (the edge-vector
    form ``½ (d1 × d2)`` is bounded by the same sum with absolute coordinates, since every difference
    is at most twice the largest coordinate, hence the factor 4), and the corners themselves — midpoints
    of refinement or coordinates read from a file — lie within ``u |x|`` of the exact ones, which moves
    a polygon's area by at most ``u X`` times its perimeter (X the largest coordinate). Summing the n
    areas adds ``γ_n Σ |A_i|``.
    """
    c = np.asarray(corners, dtype=np.float64)
    x, y = c[..., 0], c[..., 1]
    xn, yn = np.roll(x, -1, axis=1), np.roll(y, -1, axis=1)
    k = c.shape[1]
    terms = 0.5 * np.sum(np.abs(x * yn) + np.abs(xn * y), axis=1)
    area = 0.5 * np.abs(np.sum(x * yn - xn * y, axis=1))
    perimeter = np.sum(np.hypot(xn - x, yn - y), axis=1)
    big = float(np.max(np.abs(c))) if c.size else 0.0
    return float(4 * gamma(2 * k + 2) * terms.sum() + EPS / 2 * big * perimeter.sum()
                 + gamma(max(len(c), 1)) * area.sum())


def jacobi_replay_tol(phases: int, max_degree: int, sigma: float) -> float:
    """Bound on ``jacobi_max_rel_error`` of a refined run: distributed Jacobi against the serial replay.

    Both sum every row left to right, so on the same mesh they agree bit for bit (an unrefined run checks
    ``== 0``). Refinement copies values and coarsening averages two children, possibly in another order;
    once the inputs differ, a sweep ``(f + Σ u_j)/(σ + δ)`` may round differently by ``γ_{δ+2}`` on each
    side, and the sweeps contract a persistent difference with ``‖J‖_∞ = δ/(σ + δ)``, i.e. amplify it by
    at most ``1/(1 − ‖J‖_∞) = (σ + δ)/σ``. Per phase and side: ``γ_{δ+2}``, relative to max |u|.
    """
    return 2 * (phases + 1) * gamma(max_degree + 2) * (sigma + max_degree) / sigma


# -- characteristic polynomial (thesis §8.2) --------------------------------------------------------------
def charpoly_exact(a: ArrayLike) -> NDArray[np.float64]:
    """``[1, a_1, …, a_n]`` of ``det(μI − a)`` for the stored float matrix, in exact rational arithmetic.

    Newton's identities over :class:`fractions.Fraction` (every float is a dyadic rational, so nothing is
    rounded until the final conversion to float64, which is correctly rounded): a reference whose own
    error is at most u relative, independent of any BLAS. Costs O(n⁴) rational operations: for n ≤ 12.
    """
    mat = np.ascontiguousarray(a, dtype=np.float64)
    return np.array(_charpoly_exact(mat.tobytes(), mat.shape[0]))


@lru_cache(maxsize=256)
def _charpoly_exact(data: bytes, n: int) -> tuple[float, ...]:
    m = np.array([[Fraction(float(v)) for v in row] for row in np.frombuffer(data).reshape(n, n)], dtype=object)
    power, s = np.identity(n, dtype=object) * Fraction(1), [Fraction(0)] * (n + 1)
    for k in range(1, n + 1):
        power = power.dot(m)
        s[k] = sum(power[i, i] for i in range(n))
    coef = [Fraction(1)] + [Fraction(0)] * n
    for k in range(1, n + 1):
        coef[k] = -(s[k] + sum(coef[i] * s[k - i] for i in range(1, k))) / k
    return tuple(float(c) for c in coef)


def charpoly_tol(a: ArrayLike) -> NDArray[np.float64]:
    """First-order forward error bound ``E_k`` of the characteristic-polynomial coefficients from power sums.

    Newton's identities ``k a_k = −(s_k + a_1 s_{k−1} + … + a_{k−1} s_1)`` with ``s_j = tr(Aʲ)`` from
    j − 1 matrix products: ``|fl(s_j) − s_j| ≤ γ_{jn} S_j`` with ``S_j = tr(|A|ʲ)`` (Higham §3.5), and
    the recurrence propagates the errors of the earlier coefficients through the power sums:

        E_k = [γ_{kn} S_k + Σ_{i<k} (E_i S_{k−i} + |a_i| γ_{(k−i)n} S_{k−i})
               + γ_{k+1} (S_k + Σ_{i<k} |a_i| S_{k−i})] / k.

    The error grows with the power sums' magnitude S_j, i.e. like ``‖A‖ʲ`` against coefficients that
    are elementary symmetric functions of the eigenvalues: this is why a_p (= μ_1 ⋯ μ_p = 0 for a
    Laplacian) carries an absolute error of order ``u ‖A‖ᵖ``, not ``u max|a_k|``. Faddeev–LeVerrier
    computes the same traces ``tr(Σ_i a_i A^{k−i})`` and has the same first-order bound; Berkowitz
    (division-free) stays well inside it. |a_i| are taken from :func:`charpoly_exact`.
    """
    mat = np.asarray(a, dtype=np.float64)
    n = mat.shape[0]
    absa, power = np.abs(mat), np.eye(n)
    big_s = np.zeros(n + 1)
    for k in range(1, n + 1):
        power = power @ absa
        big_s[k] = np.trace(power)
    coef = np.abs(charpoly_exact(mat))
    err = np.zeros(n + 1)
    for k in range(1, n + 1):
        i = np.arange(1, k)
        conv = coef[i] @ big_s[k - i] if k > 1 else 0.0
        err[k] = (gamma(k * n) * big_s[k] + (err[i] @ big_s[k - i] if k > 1 else 0.0)
                  + sum(coef[j] * gamma((k - j) * n) * big_s[k - j] for j in range(1, k))
                  + gamma(k + 1) * (big_s[k] + conv)) / k
    return err


def monomial_tol(amat: ArrayLike, coef: ArrayLike, coef_err: ArrayLike, x: ArrayLike
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``v = Σ_t coef[t] Aᵗ x`` by Krylov products, and a componentwise bound on its rounding error.

    ``Aᵗ x`` from t products has error ``≤ γ_{tn} |A|ᵗ |x|`` (Higham §3.5), the multiply-add one more
    rounding each, and an error ``coef_err[t]`` in the coefficient adds ``coef_err[t] |Aᵗ x|``:

        |δv| ≤ Σ_t (γ_{(t+1)n + t} |coef_t| |A|ᵗ |x| + coef_err_t |Aᵗ x|).

    The sum is dominated by the largest ``|coef_t| ‖A‖ᵗ``: the condition of the monomial basis, which
    grows exponentially with the degree. ``x`` may be a vector or a matrix (the identity gives the
    polynomial's matrix).
    """
    a = np.asarray(amat, dtype=np.float64)
    n = a.shape[0]
    x = np.asarray(x, dtype=np.float64)
    ax, absa = np.abs(x), np.abs(a)
    val, bound = np.zeros_like(x), np.zeros_like(x)
    for t, (ct, et) in enumerate(zip(coef, coef_err)):
        val += ct * x
        bound += gamma((t + 1) * n + t) * abs(ct) * ax + et * np.abs(x)
        x, ax = a @ x, absa @ ax
    return val, bound


def polynomial_flow_tol(model, coef: ArrayLike | None = None, coef_err: ArrayLike | None = None, *,
                        scale: float = 1.0) -> float:
    """Bound on ``flow_error`` of a flow from a polynomial of ``A = L D⁻¹`` in the monomial basis (Alg. 9–15).

    The potential is ``y = Σ_t a_{d−1−t} Aᵗ l / (a_{d−1} c)`` (thesis eq. 8.2.4 with the characteristic
    polynomial, d = p; §8.5 with the minimal one) and the flow ``f = −W Aᵀ y``. With
    :func:`monomial_tol` for the sum and ``coef_err[d−1] / |a_{d−1}|`` relative for the division,
    ``‖δf‖ ≤ ‖W |Aᵀ|‖₂ ‖δy‖``; relative to ``‖f*‖`` and plus :func:`flow_tol` for the reference.
    By default ``coef`` is the characteristic polynomial of 𝓛 (similar to A; :func:`charpoly_exact`)
    with the error bound of :func:`charpoly_tol`; MPA's polynomial is in ``A / scale``
    (:func:`mpa_coefficient_tol`).
    """
    from hermes.balance.polynomial.charpoly import generalized_laplacian
    from hermes.balance.flow import minimal_flow

    p, c = model.p, model.capacities
    if p < 2:
        return 0.0
    if coef is None:
        gl = generalized_laplacian(model)
        coef, coef_err = charpoly_exact(gl), charpoly_tol(gl)
    coef, coef_err = np.asarray(coef, dtype=np.float64), np.asarray(coef_err, dtype=np.float64)
    d = len(coef) - 1
    amat = model.laplacian.toarray() / c[None, :] / scale
    y, dy = monomial_tol(amat, coef[d - 2::-1][:d - 1], coef_err[d - 2::-1][:d - 1], model.loads)
    an = abs(coef[d - 1]) * scale
    dy = (dy + np.abs(y) * coef_err[d - 1] * scale / an) / (an * c)
    wat = np.abs(model.incidence.T.toarray()) * model.weights[:, None]
    ref = float(np.linalg.norm(minimal_flow(model)))
    return (float(np.linalg.norm(wat, 2)) * float(np.linalg.norm(dy)) / ref if ref > 0 else 0.0) + flow_tol(model)


def operator_flow_bound(model, v_abs: ArrayLike) -> float:
    """Bound on ``‖δf‖₂`` of a flow ``f = Θ v`` from the LPA/AdA operator ``Θ = −W Aᵀ Y`` (thesis Th. 24, ch. 9).

    The rows ``Y = Σ_t a_{p−2−t} Aᵗ / (a_{p−1} c)`` (A = L D⁻¹, Faddeev's operator rows) carry the
    componentwise bound ``Y_tol`` of :func:`monomial_tol` on the identity plus ``E_{p−1}/|a_{p−1}|``
    relative for the divisor (coefficients of :func:`charpoly_tol`); then
    ``|δf| ≤ W |Aᵀ| (Y_tol + γ_{p+2} |Y|) |v|``. ``v_abs`` bounds |v| componentwise (for an update
    ``φ + Θ Δ``, the old loads plus |Δ|). The operator is that of ``model`` (its graph and capacities).
    """
    p, c = model.p, model.capacities
    if p < 2:
        return 0.0
    mat = model.laplacian.toarray() / c[None, :]
    coef, err = charpoly_exact(mat), charpoly_tol(mat)
    u, u_tol = monomial_tol(mat, coef[p - 2::-1], err[p - 2::-1], np.eye(p))
    an = abs(coef[p - 1])
    rows_tol = (u_tol + np.abs(u) * err[p - 1] / an) / an / c[:, None]
    rows = np.abs(u) / an / c[:, None]
    wat = model.weights[:, None] * np.abs(model.incidence.T.toarray())
    return float(np.linalg.norm(wat @ ((rows_tol + gamma(p + 2) * rows) @ np.abs(np.asarray(v_abs)))))


def mpa_coefficient_tol(model, alpha: ArrayLike, seed: int, steps: int, scale: float) -> NDArray[np.float64]:
    """Error estimate of MPA's minimal-polynomial coefficients ``α`` (thesis Alg. 14–15), from their Hankel system.

    MPA projects the Krylov vectors ``b_k = (A/s)ᵏ l`` on a standard normal ``u`` (drawn from ``seed``):
    ``S_k = uᵀ b_k`` with ``|δS_k| ≤ γ_{(k+1)n} |u|ᵀ |A/s|ᵏ |l|``. Berlekamp–Massey returns the α with
    ``Σ_{i=0}^{d} α_i S_{m−i} = 0`` (m = d..2d−1), i.e. ``H α' = −S'`` with the Hankel matrix
    ``H_{mi} = S_{m−i}``; to first order ``|δα'| ≤ |H⁻¹| (|δS'| + |δH| |α'|)``, and the recursion's own
    rounding adds a backward error ``γ_{2d} |H| |α'|`` (counted the same way). ``κ(H)`` is the
    condition estimate: it grows as eigenvalues of 𝓛 cluster.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    d, n = len(alpha) - 1, model.p
    amat = model.laplacian.toarray() / model.capacities[None, :] / scale
    u = np.random.default_rng(seed).standard_normal(n)
    x, ax = np.asarray(model.loads, dtype=np.float64), np.abs(model.loads)
    seq, dseq = np.zeros(steps + 1), np.zeros(steps + 1)
    for k in range(steps + 1):
        seq[k], dseq[k] = u @ x, gamma((k + 1) * n) * (np.abs(u) @ ax)
        x, ax = amat @ x, np.abs(amat) @ ax
    if d < 1:
        return np.zeros(1)
    rows, cols = np.arange(d, 2 * d)[:, None], np.arange(1, d + 1)[None, :]
    hank, dhank = seq[rows - cols], dseq[rows - cols]
    inv = np.abs(np.linalg.pinv(hank))
    rhs = dseq[d:2 * d] + (dhank + gamma(2 * d) * np.abs(hank)) @ np.abs(alpha[1:])
    return np.concatenate([[0.0], inv @ rhs])


def mpa_flow_tol(model, result, seed: int) -> float:
    """First-order estimate, times 10, of ``flow_error`` of an MPA flow (thesis Alg. 15).

    :func:`polynomial_flow_tol` with MPA's own polynomial ``result.extra["alpha"]`` in ``A / s``
    (s = :func:`~hermes.balance.polynomial.lps.mpa_scale`) and its coefficient bound
    :func:`mpa_coefficient_tol` over the ``result.iterations`` Krylov steps. Berlekamp–Massey is not
    backward stable, so this is an estimate (eps times the Hankel and monomial-basis conditions), not a
    bound: the factor 10 covers the largest ratio seen (0.9 of the estimate, a 3-star). Pair it with
    the rigorous :func:`potential_flow_tol`.
    """
    from hermes.balance.polynomial.mpa import mpa_scale

    alpha, s = result.extra["alpha"], mpa_scale(model)
    err = mpa_coefficient_tol(model, alpha, seed, result.iterations, s)
    return 10 * polynomial_flow_tol(model, alpha, err, scale=s)
