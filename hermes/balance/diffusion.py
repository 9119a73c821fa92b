"""Generalized diffusion (GDA) with the matrix M¹(ε): serial reference and distributed form.

The generalized diffusion algorithm (thesis Alg. 3, ch. 5; JPDC Alg. 1, §3) iterates
``l ← M l`` with a generalized diffusion matrix (GDM, eq. 5.0.1): non-negative, ``m_ij > 0`` only on
edges and the diagonal, columns summing to 1 and ``m_ij c_j = m_ji c_i``. hermes uses the family
M¹(ε) of eq. (5.5.2)/(5.6.1), for edge ``e_k = {i, j}``

    s_k(ε) = min{ c_i / (δ_i^w + ε), c_j / (δ_j^w + ε) },   m_ij = s_k w_k / c_j,
    m_jj = 1 − Σ_{i ≠ j} m_ij,

with two standard choices: GDA0 (``ε = ε₀`` of Cor. 2) and GDA1 (``ε = 1``, Boillat's diffusion in the
homogeneous case). In flow form one iteration moves ``s_k w_k (l_i/c_i − l_j/c_j)`` from i to j on
every edge. The accumulated flow is a balancing flow (Th. 13) that is minimal in the norm
``‖·‖_{2,U^{-1/2}}`` with ``U = diag(s_k w_k)`` (Th. 14): :func:`diffusion_flow`. It is the minimal
flow for the weights w (Th. 20, computed by PCG) only when s_k(ε) is constant on every 2-edge-connected
component (trees, homogeneous regular graphs); otherwise it differs, by tens of per cent on
heterogeneous graphs with cycles.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from numpy.typing import NDArray

from hermes.balance.flow import (
    FlowResult,
    LocalFlowResult,
    agree_local_inputs,
    alpha_beta_time,
    minimal_flow,
    neighbour_table,
    ordered_row_sums,
    ordered_total,
    validate_model,
)
from hermes.balance.model import Model
from hermes.comm import Counters, NeighbourComm
from hermes.errors import BalancerError

__all__ = [
    "GDAState",
    "edge_connectivity",
    "epsilon0",
    "diffusion_scalars",
    "diffusion_matrix",
    "diffusion_flow",
    "convergence_factor",
    "second_eigenvalue_bound",
    "convergence_factor_bound",
    "gda_iter",
    "gda",
    "gda_counters",
    "gda_distributed",
]

#: largest p for which eigenvalues are computed densely
DENSE_LIMIT = 2000


# -- the matrix and its spectrum ---------------------------------------------------------------
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


def _resolve_eps(model: Model, eps: str | float) -> float:
    if isinstance(eps, str):
        if eps == "eps0":
            return epsilon0(model)
        raise BalancerError(f"unknown ε {eps!r}: expected 'eps0' or a number ≥ 0")
    return _check_eps(eps)


def _check_eps(eps) -> float:
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise BalancerError(f"ε must be a number ≥ 0 (or 'eps0' for the serial form), got {eps!r}") from None
    if not math.isfinite(value) or value < 0:
        raise BalancerError(f"ε must be a finite number ≥ 0, got {eps!r}")
    return value


def _check_stopping(tol: float, max_iter: int, check_every: int) -> None:
    if not (math.isfinite(float(tol)) and tol >= 0):
        raise BalancerError(f"tol must be ≥ 0, got {tol!r}")
    if int(max_iter) != max_iter or max_iter < 0:
        raise BalancerError(f"max_iter must be a non-negative integer, got {max_iter!r}")
    if int(check_every) != check_every or check_every < 1:
        raise BalancerError(f"check_every must be a positive integer, got {check_every!r}")


def _edge_rates(model: Model, eps: float, degw: NDArray[np.float64]) -> NDArray[np.float64]:
    """``s_k(ε) w_k`` on every edge, from the weighted degrees ``degw``."""
    c, e = model.capacities, model.edges
    s = np.minimum(c[e[:, 0]] / (degw[e[:, 0]] + eps), c[e[:, 1]] / (degw[e[:, 1]] + eps))
    return s * model.weights


def diffusion_scalars(model: Model, eps: str | float) -> NDArray[np.float64]:
    """``s_k(ε) = min{c_i/(δ_i^w + ε), c_j/(δ_j^w + ε)}`` for every edge (thesis eq. 5.5.2).

    Raises
    ------
    BalancerError
        If ``eps`` is negative or not a number.
    """
    validate_model(model)
    eps = _resolve_eps(model, eps)
    c, e, d = model.capacities, model.edges, model.weighted_degree
    return np.minimum(c[e[:, 0]] / (d[e[:, 0]] + eps), c[e[:, 1]] / (d[e[:, 1]] + eps))


def diffusion_matrix(model: Model, eps: str | float) -> sp.csr_array:
    """The generalized diffusion matrix M¹(ε) of thesis eq. (5.6.1) as a sparse p×p matrix.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0

    Returns
    -------
    scipy.sparse.csr_array
        ``m_ij = s_k w_k / c_j`` for ``e_k = {i, j}``, ``m_jj = 1 − Σ_{i≠j} m_ij``.

    Raises
    ------
    BalancerError
        If ``eps`` is negative. GraphError for a model the algorithms cannot use.

    Notes
    -----
    Equivalently ``M = I − A S W Aᵀ D⁻¹`` with ``S = diag(s)``, ``D = diag(c)`` (thesis §5.5).
    """
    sw = diffusion_scalars(model, eps) * model.weights
    c, e, p = model.capacities, model.edges, model.p
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    vals = np.concatenate([sw / c[e[:, 1]], sw / c[e[:, 0]]])
    off = sp.csr_array((vals, (rows, cols)), shape=(p, p))
    # Σ_i m_ij ≤ 1 exactly; clip the round-off below 0 (possible for ε = 0)
    diag = np.maximum(1.0 - np.asarray(off.sum(axis=0)).ravel(), 0.0)
    return (off + sp.diags_array(diag)).tocsr()


def diffusion_flow(model: Model, eps: str | float) -> NDArray[np.float64]:
    """The balancing flow GDA with M¹(ε) converges to (thesis Lemma 7, Th. 14).

    Returns
    -------
    ndarray of float64, shape (q,)
        The balancing flow minimising ``Σ_k f_k² / (s_k(ε) w_k)``.

    Notes
    -----
    The GDA flow is ``f = U Aᵀ D⁻¹ (I − B)⁻¹ l`` with ``U = S W = diag(s_k w_k)`` (Lemma 7), a scaled
    projection of every balancing flow (Th. 14): it is minimal in ``‖·‖_{2,U^{-1/2}}``, i.e. it is
    :func:`~hermes.balance.flow.minimal_flow` of the model with conductances ``s_k w_k``. It equals
    the minimal flow for the weights w (``‖·‖_{2,W^{-1/2}}``, Th. 20) only when ``s_k(ε)`` is constant
    on every 2-edge-connected component, e.g. on trees (one balancing flow) or when all ``s_k`` are
    equal (homogeneous regular graphs, GDA6 with ``S = αI``).
    """
    s = diffusion_scalars(model, eps)
    return minimal_flow(Model(model.p, model.edges, model.loads, model.capacities, s * model.weights))


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
    ``c^{1/2}``; deflating it gives ``λ_M = ρ(S − v vᵀ)``, ``v = c^{1/2} / ‖c^{1/2}‖``. Dense
    ``eigvalsh`` up to p = 2000, Lanczos (``eigsh``) above.
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


def _diameter(model: Model) -> int:
    if model.p < 2:
        return 0
    e = model.edges
    adj = sp.csr_array((np.ones(model.q), (e[:, 0], e[:, 1])), shape=(model.p, model.p))
    dist = csgraph.shortest_path(adj, method="D", directed=False, unweighted=True)
    return int(np.max(dist))


def second_eigenvalue_bound(model: Model, eps: str | float) -> float:
    """Upper bound on the second largest eigenvalue λ₂ of M¹(ε) (thesis Cor. 1 and Th. 11).

    Notes
    -----
    With ``θ(M) = min_{(i,j)∈E} m_ij c_j = min_k s_k(ε) w_k``:

    * Cor. 1, eq. (5.2.7): ``λ₂ ≤ 1 − 4 e(G) θ(M) / c_max · sin²(π / 2p)``;
    * Th. 11, eq. (5.2.8): ``λ₂ ≤ 1 − θ(M) / diam(G)``.

    The smaller of the two is returned. With ``θ ≥ c_min w_min / (Δ^w + ε)`` Cor. 1 gives (5.5.3).
    """
    validate_model(model)
    if model.p < 2:
        return 0.0
    theta = float(np.min(diffusion_scalars(model, eps) * model.weights))
    p = model.p
    cor1 = 1.0 - 4.0 * edge_connectivity(model) * theta / model.capacities.max() * math.sin(math.pi / (2 * p)) ** 2
    th11 = 1.0 - theta / _diameter(model)
    return float(min(cor1, th11))


def convergence_factor_bound(model: Model, eps: str | float) -> float:
    """Upper bound on the convergence factor λ_M of M¹(ε) (thesis Cor. 2 for ε ≥ ε₀, any ε ≥ 0 here).

    Notes
    -----
    ``λ_M = max(λ₂, |λ_p|)``. λ₂ is bounded by :func:`second_eigenvalue_bound` (Cor. 1 / Th. 11);
    a negative λ_p satisfies ``|λ_p| ≤ 1 − 2ε / (Δ^w + ε)`` (Lemma 10, eq. 5.5.4). The maximum of
    the two bounds is returned. For ``ε ≥ ε₀`` it is at most the right-hand side of Cor. 2,
    eq. (5.5.6): ``1 − 4 e(G) w_min / (Δ^w + ε) · (c_min / c_max) sin²(π / 2p)``. For ε = 0 the
    bound is 1 (M¹(0) may be periodic, e.g. on a bipartite homogeneous graph).
    """
    validate_model(model)
    if model.p < 2:
        return 0.0
    e = _resolve_eps(model, eps)
    dmax = float(model.weighted_degree.max())
    lemma10 = 1.0 - 2.0 * e / (dmax + e)
    return float(max(second_eigenvalue_bound(model, e), lemma10))


# -- serial reference ----------------------------------------------------------------------------
@dataclass
class GDAState:
    """One step of :func:`gda_iter`.

    Attributes
    ----------
    iteration : int
        Number of sweeps ``l ← M l`` done so far (0 = initial state).
    loads : ndarray, shape (p,)
    flow : ndarray, shape (q,)
        Accumulated flow on ``model.edges``.
    residual : float
        ``max_i |l_i − l̄_i| / l̄_i`` of ``loads``.
    checked : bool
        Whether the stopping rule was evaluated here (every ``check_every`` sweeps, at 0 and at
        ``max_iter``): only then does the distributed form know the residual.
    """

    iteration: int
    loads: NDArray[np.float64]
    flow: NDArray[np.float64]
    residual: float
    checked: bool


def _residual(loads: NDArray[np.float64], fair: NDArray[np.float64]) -> float:
    if not np.all(fair > 0):  # zero total load: nothing to balance
        return 0.0
    return float(np.max(np.abs(loads - fair) / fair))


def gda_iter(model: Model, eps: str | float = "eps0", *, tol: float = 1e-3, max_iter: int = 100000,
             check_every: int = 1) -> Iterator[GDAState]:
    """Run GDA with M¹(ε) serially, yielding the state after every sweep.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
    tol : float
        Stop when ``max_i |l_i − l̄_i| / l̄_i ≤ tol`` at a check.
    max_iter : int
    check_every : int
        The residual is checked before the first sweep, after every ``check_every`` sweeps and
        after sweep ``max_iter``.

    Yields
    ------
    GDAState
        Starting with iteration 0; the last one yielded is the final state.

    Raises
    ------
    BalancerError
        Bad ε, tol, max_iter or check_every. GraphError for an unusable model.

    Notes
    -----
    Thesis Alg. 3 with the loop nesting fixed (one synchronous sweep per iteration):
    ``x_k = s_k w_k (l_i/c_i − l_j/c_j)`` on every edge ``e_k = {i, j}``, ``l ← l − A x`` (i.e.
    ``l ← M¹(ε) l``, eq. 5.6.1) and ``f ← f + x``. Per-rank sums run over the neighbours in sorted
    order and ``Σ l`` in rank order, so the result matches :func:`gda_distributed` bit for bit.
    """
    validate_model(model)
    eps = _resolve_eps(model, eps)
    _check_stopping(tol, max_iter, check_every)
    nbr, edge, sign = neighbour_table(model)
    mask = sign != 0
    degw = ordered_row_sums(np.where(mask, model.weights[edge], 0.0))
    sw = _edge_rates(model, eps, degw)
    c, e = model.capacities, model.edges
    fair = c * ordered_total(model.loads)
    loads = model.loads.copy()
    flow = np.zeros(model.q)
    n = 0
    r = _residual(loads, fair)
    yield GDAState(0, loads, flow, r, True)
    if r <= tol:
        return
    while n < max_iter:
        u = loads / c
        x = sw * (u[e[:, 0]] - u[e[:, 1]])
        out = ordered_row_sums(np.where(mask, sign * x[edge], 0.0))
        loads = loads - out
        flow = flow + x
        n += 1
        checked = n % check_every == 0 or n == max_iter
        r = _residual(loads, fair)
        yield GDAState(n, loads, flow, r, checked)
        if checked and r <= tol:
            return


def _gda_times(model: Model, n: int, ce: int, links) -> NDArray[np.float64] | None:
    """Per-rank α-β time of the GDA schedule (None without links)."""
    if links is None:
        return None
    schedule = [(1, [("allreduce", 2), ("exchange", 2), ("allreduce", 1)]),
                (n // ce, [("exchange", 1)] * ce + [("allreduce", 1)])]
    if n % ce:
        schedule.append((1, [("exchange", 1)] * (n % ce) + [("allreduce", 1)]))
    return alpha_beta_time(model, links, schedule)


def gda_counters(model: Model, iterations: int, check_every: int = 1, links=None) -> Counters:
    """Counters of :func:`gda_distributed` after ``iterations`` sweeps, computed analytically.

    Notes
    -----
    With n sweeps, ``C = 1 + ⌈n / check_every⌉`` residual checks, p ranks and q edges:

    * ``exchange_rounds = 1 + n`` (the (c_i, δ_i^w) exchange, then one per sweep);
    * ``collectives = {"allreduce": 1 + C}`` (total load, then the residual checks);
    * ``messages = 2q (1 + n)`` summed over the ranks (one per edge direction and round);
    * ``bytes = 16 p + 32 q + 16 q n + 8 p C`` summed over the ranks: the first allreduce carries
      (load, error flag), the first exchange two words per message, the sweeps one word per message
      and each check one word per rank;
    * ``time``: the largest per-rank virtual time of this schedule under ``links``
      (:func:`~hermes.balance.flow.alpha_beta_time`), 0 if ``links`` is None.
    """
    n, ce = int(iterations), int(check_every)
    checks = 1 + -(-n // ce)
    p, q = model.p, model.q
    times = _gda_times(model, n, ce, links)
    return Counters(iterations=n, exchange_rounds=1 + n, collectives={"allreduce": 1 + checks},
                    messages=2 * q * (1 + n), bytes=16 * p + 32 * q + 16 * q * n + 8 * p * checks,
                    time=float(np.max(times)) if times is not None else 0.0)


def gda(model: Model, eps: str | float = "eps0", *, tol: float = 1e-3, max_iter: int = 100000,
        check_every: int = 1, links=None, compute_factor: bool = True) -> FlowResult:
    """Generalized diffusion with M¹(ε) (thesis Alg. 3, eq. 5.6.1): serial reference of :func:`gda_distributed`.

    Parameters
    ----------
    model : Model
    eps : "eps0" or float ≥ 0
        ``"eps0"`` is ε₀ of thesis Cor. 2 (GDA0); 1.0 gives GDA1.
    tol, max_iter, check_every
        Stopping rule, see :func:`gda_iter`.
    links : hermes.clock.Links, optional
        If given, ``counters.time`` is the α-β time the distributed form would be charged.
    compute_factor : bool
        Also compute the convergence factor λ_M of M¹(ε) (an eigenvalue problem).

    Returns
    -------
    FlowResult
        ``extra`` holds ``eps``, ``residual``, ``loads`` (final) and ``rank_times``.

    Raises
    ------
    BalancerError
        ``eps < 0`` or bad stopping parameters.
    GraphError
        Disconnected graph, non-positive capacity or weight.

    Notes
    -----
    See :func:`gda_iter` for the update rule and :func:`gda_counters` for the counters.
    """
    validate_model(model)
    eps_value = _resolve_eps(model, eps)
    state = None
    for state in gda_iter(model, eps_value, tol=tol, max_iter=max_iter, check_every=check_every):
        pass
    assert state is not None
    counters = gda_counters(model, state.iteration, check_every)
    factor = convergence_factor(diffusion_matrix(model, eps_value), model.capacities) if compute_factor else None
    times = _gda_times(model, state.iteration, check_every, links)
    counters.time = float(np.max(times)) if times is not None else 0.0
    return FlowResult(flow=state.flow, iterations=state.iteration, converged=state.residual <= tol,
                      counters=counters, convergence_factor=factor,
                      extra={"eps": eps_value, "residual": state.residual, "loads": state.loads,
                             "rank_times": times})


# -- distributed form -----------------------------------------------------------------------------
def _ordered_sum(values) -> float:
    acc = 0.0
    for v in values:
        acc = acc + float(v)
    return acc


def gda_distributed(nb: NeighbourComm, load: float, capacity: float, weights: NDArray[np.float64], eps: float,
                    *, tol: float = 1e-3, max_iter: int = 100000, check_every: int = 1) -> LocalFlowResult:
    """GDA with M¹(ε) on one rank (SPMD; every rank of ``nb.comm`` must call it).

    Parameters
    ----------
    nb : NeighbourComm
        This rank's neighbours (sorted) and clock; its counters are updated.
    load : float
        This rank's load l_i.
    capacity : float
        This rank's capacity c_i, normalised so that the capacities of all ranks sum to 1.
    weights : ndarray, shape (len(nb.neighbours),)
        Weight of the edge to each neighbour.
    eps : float
        ε ≥ 0 (the caller computes ε₀ from the global graph, e.g. with :func:`epsilon0`).
    tol, max_iter, check_every
        Same stopping rule as :func:`gda_iter`.

    Returns
    -------
    LocalFlowResult
        ``flows[t] > 0``: this rank sends that much to ``nb.neighbours[t]``. ``extra`` holds the
        final ``load`` and ``residual``.

    Raises
    ------
    BalancerError, GraphError
        On every rank, if any rank has a bad ε, ``tol``, ``max_iter``, ``check_every``, load,
        capacity or edge weight (agreed collectively by :func:`agree_local_inputs`).

    Notes
    -----
    Thesis Alg. 3 with one synchronous sweep per iteration. Communication: one allreduce of
    (l_i, error flag) for ``Σ l`` (and collective validation), one exchange of (c_i, δ_i^w), then per
    sweep one exchange of l_i and ``x_ij = s_ij w_ij (l_i/c_i − l_j/c_j)``, ``l_i ← l_i − Σ_j x_ij``,
    ``f_ij ← f_ij + x_ij``; every ``check_every`` sweeps (and at 0 and ``max_iter``) one
    allreduce(max) of ``|l_i − l̄_i| / l̄_i``. Counters: :func:`gda_counters`.
    """
    nbrs = nb.neighbours
    w = np.asarray(weights, dtype=np.float64).ravel()

    def check_parameters() -> None:
        _check_eps(eps)
        _check_stopping(tol, max_iter, check_every)

    total = agree_local_inputs(nb, load, capacity, w, extra_checks=check_parameters)
    eps = _check_eps(eps)  # valid on every rank now
    capacity, load = float(capacity), float(load)
    degw = _ordered_sum(w)
    peer = nb.exchange([np.array([capacity, degw])] * len(nbrs))
    cj = np.array([x[0] for x in peer], dtype=np.float64)
    dj = np.array([x[1] for x in peer], dtype=np.float64)
    sw = np.minimum(capacity / (degw + eps), cj / (dj + eps)) * w
    fair = capacity * total
    flows = np.zeros(len(nbrs))

    def residual() -> float:
        local = abs(load - fair) / fair if fair > 0 else 0.0
        return float(nb.allreduce(local, op="max"))

    n = 0
    r = residual()
    while r > tol and n < max_iter:
        lj = nb.exchange_scalar(load)
        x = sw * (load / capacity - lj / cj)
        load = load - _ordered_sum(x)
        flows = flows + x
        n += 1
        if n % check_every == 0 or n == max_iter:
            r = residual()
    nb.counters.iterations = n
    return LocalFlowResult(flows=flows, iterations=n, converged=r <= tol, counters=nb.counters,
                           extra={"load": load, "residual": r})
