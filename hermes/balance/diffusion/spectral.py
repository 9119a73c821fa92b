"""Graph and spectral quantities of the diffusion schemes: e(G), ε₀, α of M⁶ and λ_M.

What needs the processor graph or the spectrum of a matrix but no edge rates: the edge connectivity
e(G) and the ε₀ of thesis Cor. 2, the step α = 2/(μ₂(𝓛) + μ_p(𝓛)) of M⁶
(eq. 5.6.6) and the convergence factor λ_M of a generalized diffusion matrix (Th. 3). Eigenvalues are
computed densely up to ``DENSE_LIMIT`` processors, by Lanczos above.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from hermes.balance.flow import validate_model
from hermes.balance.model import Model

__all__ = ["DENSE_LIMIT", "edge_connectivity", "epsilon0", "elsasser_alpha", "convergence_factor"]

#: largest p for which eigenvalues are computed densely
DENSE_LIMIT = 2000


# -- graph quantities ---------------------------------------------------------------------------
def edge_connectivity(model: Model) -> int:
    """Edge connectivity e(G): fewest edges whose removal disconnects G (0 for one processor)."""
    if model.p < 2:
        return 0
    import networkx as nx  # lazy: heavy import, only needed for ε₀ and the bounds

    g = nx.Graph()
    g.add_nodes_from(range(model.p))
    g.add_edges_from(model.edges.tolist())
    return int(nx.edge_connectivity(g))


def epsilon0(model: Model) -> float:
    """``ε₀ = 2 e(G) w_min (c_min / c_max) sin²(π / (2p))`` (thesis Cor. 2, JPDC Cor. 12).

    Notes
    -----
    ε₀ minimises the bound (5.5.6) on the convergence factor of M¹(ε) over ``ε ≥ ε₀``: below it the
    most negative eigenvalue may dominate (Lemma 10). Returns 0 for a single processor.
    """
    validate_model(model)
    if model.p < 2:
        return 0.0
    c = model.capacities
    return float(2.0 * edge_connectivity(model) * model.weights.min() * (c.min() / c.max())
                 * math.sin(math.pi / (2 * model.p)) ** 2)


# -- spectrum -----------------------------------------------------------------------------------
def elsasser_alpha(model: Model) -> float:
    """α = 2 / (μ₂(𝓛) + μ_p(𝓛)) of M⁶, 𝓛 = D^{-1/2} A W Aᵀ D^{-1/2} (thesis eq. 5.6.6, JPDC eq. 4.6).

    Notes
    -----
    The thesis' second statement of the rule, ``2/(μ₂(𝓛) + μ₂(𝓛))`` (§5.6, before the star
    counter-example), is a typo for this one. With it M⁶ has the eigenvalues ``1 − α μ_k``, so
    ``λ_{M⁶} = (μ_p − μ₂)/(μ_p + μ₂) < 1`` even where M⁶ has negative entries. Dense ``eigvalsh``
    up to p = 2000, Lanczos above. Returns 0 for a single processor.
    """
    validate_model(model)
    p = model.p
    if p < 2:
        return 0.0
    r = 1.0 / np.sqrt(model.capacities)
    if p <= DENSE_LIMIT:
        lap = model.laplacian.toarray() * r[:, None] * r[None, :]
        mu = np.linalg.eigvalsh(0.5 * (lap + lap.T))
        return float(2.0 / (mu[1] + mu[-1]))
    import scipy.sparse.linalg as spla

    lap = sp.diags_array(r) @ model.laplacian @ sp.diags_array(r)
    mu_p = float(spla.eigsh(lap, k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0])
    v = np.sqrt(model.capacities)
    v = v / np.linalg.norm(v)
    shifted = spla.LinearOperator((p, p), dtype=np.float64,
                                  matvec=lambda x: mu_p * x - lap @ x - mu_p * v * (v @ x))
    top = float(spla.eigsh(shifted, k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0])
    return float(2.0 / ((mu_p - top) + mu_p))


def convergence_factor(M, c: NDArray[np.float64]) -> float:
    """Second largest eigenvalue modulus λ_M of a GDM with Perron vector ``c``.

    Parameters
    ----------
    M : scipy sparse matrix or ndarray, shape (p, p)
    c : ndarray, shape (p,)
        Capacities (the Perron vector of M, Lemma 1).

    Returns
    -------
    float
        ``max{|λ| : λ eigenvalue of M other than the Perron eigenvalue 1}`` (0 for p = 1).

    Notes
    -----
    M is similar to the symmetric ``S = D^{-1/2} M D^{1/2}`` (Th. 3), whose Perron eigenvector is
    ``c^{1/2}``; deflating it gives ``λ_M = ρ(S − v vᵀ)``, ``v = c^{1/2} / ‖c^{1/2}‖``. This holds for
    any ``M = I − A U Aᵀ D⁻¹`` (also M⁶ with negative entries). Dense ``eigvalsh`` up to p = 2000,
    Lanczos (``eigsh``) above.
    """
    c = np.asarray(c, dtype=np.float64)
    p = c.size
    if p < 2:
        return 0.0
    r = np.sqrt(c)
    v = r / np.linalg.norm(r)
    if p <= DENSE_LIMIT:
        m = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=np.float64)
        s = m * r[None, :] / r[:, None]
        s = 0.5 * (s + s.T) - np.outer(v, v)
        lam = np.linalg.eigvalsh(s)
        return float(np.max(np.abs(lam)))
    import scipy.sparse.linalg as spla

    ms = sp.csr_array(M)
    s = sp.diags_array(1.0 / r) @ ms @ sp.diags_array(r)
    s = 0.5 * (s + s.T)
    op = spla.LinearOperator((p, p), matvec=lambda x: s @ x - v * (v @ x), dtype=np.float64)
    lam = spla.eigsh(op, k=1, which="LM", return_eigenvectors=False, tol=1e-10)
    return float(np.max(np.abs(lam)))
