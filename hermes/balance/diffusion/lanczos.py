"""Spectral bounds of the balancing operator by Lanczos, distributed: chebyshev's ``bounds: lanczos``.

Chebyshev diffusion (:mod:`hermes.balance.diffusion.chebyshev`) needs an interval ``[a, b]`` holding the non-zero
eigenvalues of 𝓛 = C^{-1/2} L C^{-1/2} (L the weighted Laplacian of the processor graph, C the capacities). The
dense eigensolve of ``bounds: exact`` costs 4/3 p³ flops on one processor (56 s of virtual time per round at
1,024 processors on the study's platform); this is the O(edges)-per-step alternative (docs/design/depth.md §4).

``m`` steps of the symmetric Lanczos recurrence on 𝓛 (Golub & Van Loan, Matrix Computations, 4th ed., Alg.
10.1.1) from ``y₀ = C^{-1/2} x₀``, ``x₀ = l − c Σ l`` the imbalance to be balanced (orthogonal to 𝓛's null vector
``n = C^{1/2} 1``, whose norm is 1: the capacities sum to 1)::

    v = y₀ / ‖y₀‖;  repeat:  u = v / √c  (one neighbour exchange of u_i)
        w = C^{-1/2} L u − β v_prev;  (α, γ, σ) = (w·v, w·n, v·n)  (one allreduce of three words)
        w ← w − α v − (γ − α σ) n;  β = ‖w‖  (one allreduce of one word);  v_prev, v = v, w / β

The null-space term is that of ``w − α v`` (γ − ασ): subtracting ``w``'s own (γ) would leave ``−α σ``, and the
null component would grow by ``α/β`` (about 2 on a grid) every step.

Every rank holds its component of each vector; the reductions are the only collectives. The tridiagonal
``T_m`` (diagonal α, off-diagonal β) has Ritz values θ₁ ≤ … ≤ θ_m, each with an eigenvalue of 𝓛 within its
residual ``r_j = β_m |s_{mj}|`` (Kahan–Parlett; ``s_j`` the Ritz vector in the Krylov basis). The bounds:
``b = θ_m + r_m`` and ``a = θ₁ − r₁`` (at least θ₁ / 2). Lanczos stops early, on every rank alike (the α and β
are the same everywhere), once both extreme residuals are within ``1e-3`` of their Ritz values, or when β
vanishes (an invariant subspace: T's eigenvalues are eigenvalues of 𝓛).

What this does not guarantee: ``a ≤ μ₂``. θ₁ ≥ μ₂ always (interlacing), and ``θ₁ − r₁`` is below *some*
eigenvalue's neighbourhood, not necessarily μ₂'s. Components of x₀ along eigenvalues below ``a`` are damped
less than the step count plans (not amplified: the Chebyshev polynomial stays within [0, 1] there); the
Krylov space is that of x₀ itself, so such components are those x₀ barely holds. The flow's error is then
what the result's ``residual`` reports, and the phase's next round balances what is left.

The serial form (:func:`lanczos_bounds`) and the distributed one (:func:`lanczos_distributed`) do the same
arithmetic in the same order (neighbour sums over the sorted neighbours, reductions folded in rank order): their
bounds agree bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.balance.flow import ordered_total, validate_model
from hermes.balance.model import Model
from hermes.balance.polynomial.charpoly import NeighbourTables
from hermes.runtime.comm import NeighbourComm

__all__ = ["LanczosBounds", "lanczos_bounds", "lanczos_distributed", "lanczos_bulk", "bounds_of", "LANCZOS_RTOL"]

#: Lanczos stops once both extreme Ritz residuals are within this fraction of their Ritz values
LANCZOS_RTOL = 1e-3


@dataclass(frozen=True)
class LanczosBounds:
    """``[a, b]`` from ``steps`` Lanczos steps, the extreme Ritz values and their residuals."""

    a: float
    b: float
    steps: int
    ritz: tuple[float, float]
    residuals: tuple[float, float]


def bounds_of(alphas: list[float], betas: list[float]) -> LanczosBounds:
    """The bounds of the tridiagonal with diagonal ``alphas`` and off-diagonal ``betas[:-1]``, ``betas[-1]`` the
    last β (the residuals' factor). The same on every rank: the same α and β."""
    from scipy.linalg import eigh_tridiagonal

    m = len(alphas)
    theta, s = eigh_tridiagonal(np.array(alphas), np.array(betas[:m - 1]))
    r = np.abs(betas[m - 1] * s[m - 1, :]) if len(betas) >= m else np.zeros(m)
    lo, hi = float(theta[0]), float(theta[-1])
    a = max(lo - float(r[0]), 0.5 * lo)
    return LanczosBounds(a=a, b=hi + float(r[-1]), steps=m, ritz=(lo, hi), residuals=(float(r[0]), float(r[-1])))


def _converged(alphas: list[float], betas: list[float]) -> bool:
    bd = bounds_of(alphas, betas)
    return bd.residuals[0] <= LANCZOS_RTOL * bd.ritz[0] and bd.residuals[1] <= LANCZOS_RTOL * bd.ritz[1]


def _recurrence(y, s, laplacian, sums, steps: int, alone: bool) -> LanczosBounds | None:
    """The Lanczos steps of the module docstring, one code for every form: ``y`` and ``s`` (C^{-1/2} x₀ and √c) are
    the caller's components — a rank's scalars, a process's vectors or the whole vectors —, ``laplacian(u)`` its
    components of ``L u`` (summed over the sorted neighbours: the one neighbour exchange), ``sums(*columns)`` the
    totals of its columns over all ranks, folded in rank order (the reductions). None if ``y`` is zero everywhere
    or ``alone`` (one processor: nothing to bound)."""
    (norm2,) = sums(y * y)
    norm = math.sqrt(norm2)
    if not norm > 0 or alone:
        return None
    v, v_prev, beta = y / norm, 0.0 * y, 0.0
    alphas: list[float] = []
    betas: list[float] = []
    for _ in range(steps):
        w = laplacian(v / s) / s - beta * v_prev
        alpha, gamma, sigma = sums(w * v, w * s, v * s)
        w = w - alpha * v - (gamma - alpha * sigma) * s
        (b2,) = sums(w * w)
        beta = math.sqrt(b2)
        alphas.append(float(alpha))
        betas.append(beta)
        if not beta > 1e-12 * abs(alpha) or _converged(alphas, betas):
            break
        v_prev, v = v, w / beta
    return bounds_of(alphas, betas)


def lanczos_bounds(model: Model, steps: int) -> LanczosBounds | None:
    """Serial reference: the bounds from at most ``steps`` Lanczos steps started at the model's imbalance (module
    docstring); None if the loads are balanced (nothing to bound)."""
    validate_model(model)
    g, c = NeighbourTables(model), model.capacities
    s = np.sqrt(c)
    x = model.loads - c * ordered_total(model.loads)
    return _recurrence(x / s, s, g.apply, lambda *cols: tuple(ordered_total(col) for col in cols), steps,
                       model.p < 2)


def lanczos_distributed(nb: NeighbourComm, load: float, capacity: float, weights, total: float,
                        steps: int) -> LanczosBounds | None:
    """Rank i's part of :func:`lanczos_bounds` (SPMD: every rank of ``nb.comm`` calls it with the same ``total``,
    the loads' sum, and ``steps``): per step one exchange of a scalar and two allreduces, all charged to the
    rank's clock through ``nb``. The same bounds on every rank, bit for bit those of the serial form."""
    w_edges = np.asarray(weights, dtype=np.float64).ravel()
    s = math.sqrt(float(capacity))

    def laplacian(u: float) -> float:
        uj = nb.exchange_scalar(u)
        acc = 0.0
        for t in range(len(uj)):
            acc = acc + w_edges[t] * (u - uj[t])
        return acc

    return _recurrence((float(load) - float(capacity) * total) / s, s, laplacian,
                       lambda *cols: tuple(nb.allreduce(np.array(cols))), steps, nb.size < 2)


def lanczos_bulk(nb: NeighbourComm, load: float, capacity: float, weights, total: float,
                 steps: int) -> LanczosBounds | None:
    """:func:`lanczos_distributed` run once per MPI process for all the processors it hosts (``run.bulk: auto``):
    the same steps, bounds, clocks and counters, bit for bit — each processor's scalars as a vector, its exchanges
    and reductions through :class:`~hermes.runtime.bulk.BankedNeighbours`. Collective; virtual clocks without an
    extra load."""
    part = (nb, float(load), float(capacity), np.asarray(weights, dtype=np.float64).ravel(), float(total),
            int(steps))
    return nb.comm.bulk("lanczos", part, _lanczos_kernel)


def _lanczos_kernel(group, parts: list) -> list:
    from hermes.runtime.bulk import BankedNeighbours

    total, steps = parts[0][4], parts[0][5]
    bn = BankedNeighbours(group, [pt[0] for pt in parts])
    loads = np.array([pt[1] for pt in parts])
    caps = np.array([pt[2] for pt in parts])
    w_edges = np.concatenate([pt[3] for pt in parts]) if parts else np.zeros(0)
    s = np.sqrt(caps)
    try:
        bd = _recurrence((loads - caps * total) / s, s,
                         lambda u: bn.ordered_sums(w_edges * (u[bn.owner] - bn.exchange_scalar(u))),
                         lambda *cols: tuple(bn.allreduce(np.column_stack(cols))), steps, group.size < 2)
    finally:
        bn.store()
    return [bd] * len(parts)
