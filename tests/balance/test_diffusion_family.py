"""The diffusion matrices M¹ … M⁶ (thesis §5.6), their GDA flows and bounds, and the family's registry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.gda import StopParams, gda, gda_counters
from hermes.balance.diffusion.matrices import (diffusion_bounds, diffusion_flow, diffusion_matrix, edge_rates,
                                               gdm_defects)
from hermes.balance.diffusion.spectral import convergence_factor, elsasser_alpha, epsilon0
from hermes.balance.flow import check_balancing, flow_error, minimal_flow
from hermes.balance.model import Model
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import Links
from hermes.errors import BalancerError
from tests.balance.graphs import KINDS, random_model
from tests.tolerances import (
    balancing_floor,
    conservation_tol,
    converged_flow_tol,
    eig_tol,
    flops,
    gamma,
    matvec_tol,
    sum_tol,
)

#: the balancers this family registers
REGISTRY = {name: BALANCERS[name] for name in
            ("gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit", "implicit_watts")}

SMALL = [(k, p, s) for k in KINDS for p, s in [(5, 1), (12, 3)]]


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def gdm_tol(M: np.ndarray, c: np.ndarray) -> tuple[float, float]:
    """Bounds on gdm_defects' ``column_sum`` (the diagonal is 1 − Σ of the column: twice the summation
    bound) and ``balance`` (m_ij c_j = u_k on both sides: a product and a quotient each)."""
    return float(np.max(2 * sum_tol(M, axis=0))), float(2 * flops(2) * np.max(np.abs(M * c[None, :])))


def thesis_matrix(m: Model, kind: int, eps: float) -> np.ndarray:
    """M^kind written entry by entry from thesis eq. (5.6.1)–(5.6.5) (independent of hermes' rates)."""
    c, d = m.capacities, m.weighted_degree
    cmin, cmax, dmax = c.min(), c.max(), d.max()
    M = np.zeros((m.p, m.p))
    for (i, j), w in zip(m.edges.tolist(), m.weights):
        for a, b in ((i, j), (j, i)):  # m_ab, divided by the sender's capacity c_b
            M[a, b] = {1: min(c[a] / (d[a] + eps), c[b] / (d[b] + eps)) * w / c[b],
                       2: cmin / c[b] * w / (dmax + eps),
                       3: math.sqrt(cmin / cmax) * math.sqrt(c[a] / c[b]) * w / (dmax + eps),
                       4: c[a] / cmax * w / (dmax + eps),
                       5: c[a]}[kind]
    M[np.diag_indices(m.p)] = 1.0 - M.sum(axis=0)
    return M


def mesh_edges(r: int, s: int) -> list[tuple[int, int]]:
    idx = np.arange(r * s).reshape(r, s)
    return ([(int(a), int(b)) for a, b in zip(idx[:, :-1].ravel(), idx[:, 1:].ravel())]
            + [(int(a), int(b)) for a, b in zip(idx[:-1].ravel(), idx[1:].ravel())])


# -- the matrices are GDMs --------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("mk", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("eps", ["eps0", 1.0, 0.0])
def test_matrices_one_to_five_are_gdms(kind, p, seed, mk, eps):
    m = random_model(kind, p, seed)
    e = epsilon0(m) if eps == "eps0" else eps
    M = diffusion_matrix(m, eps, mk).toarray()
    thesis = thesis_matrix(m, mk, e)  # eq. 5.6.1–5.6.5
    # an entry is ≤ 8 flops from c, w, ε and the weighted degrees (sums of ≤ δ terms), on each side; the
    # diagonal is 1 − Σ of the column, which also sums the off-diagonal errors
    entry = 2 * flops(8 + int(m.degree.max())) * np.abs(thesis)
    entry[np.diag_indices(p)] += entry.sum(axis=0) + 2 * sum_tol(thesis, axis=0)
    assert np.all(np.abs(M - thesis) <= entry)
    c = m.capacities
    d = gdm_defects(M, c)
    column_tol, balance_tol = gdm_tol(M, c)
    assert d["min_entry"] >= 0 and d["column_sum"] <= column_tol and d["balance"] <= balance_tol  # eq. 5.0.1
    assert np.all(np.abs(M @ c - c) <= matvec_tol(M, c) + gamma(p + 4) * c)  # Lemma 1 (see test_diffusion)
    adj = np.zeros((p, p), dtype=bool)
    adj[m.edges[:, 0], m.edges[:, 1]] = adj[m.edges[:, 1], m.edges[:, 0]] = True
    off = ~np.eye(p, dtype=bool)
    assert np.all((M[off] > 0) == adj[off])
    assert np.all(np.diag(M) > 0) or e == 0.0
    lazy = diffusion_matrix(m, eps, mk, lazy=True).toarray()  # thesis ch. 6: ½(I + M)
    # off the diagonal halving is exact up to the rates' own rounding; each diagonal is 1 − Σ of its column
    lazy_tol = flops(2) * np.abs(lazy) + np.diag(2 * sum_tol(lazy, axis=0) + sum_tol(M, axis=0))
    assert np.all(np.abs(lazy - 0.5 * (np.eye(p) + M)) <= lazy_tol)
    assert gdm_defects(lazy, c)["min_entry"] >= 0


def test_matrices_validate_their_arguments():
    m = random_model("ring", 6, 0)
    for bad in (0, 7, "M1", True):
        with pytest.raises(BalancerError, match="kind"):
            diffusion_matrix(m, "eps0", bad)
    with pytest.raises(BalancerError, match="lazy"):
        diffusion_matrix(m, "eps0", 2, lazy="yes")
    with pytest.raises(BalancerError, match="α"):
        diffusion_matrix(m, 0.0, 6, alpha=-1.0)
    with pytest.raises(BalancerError):
        diffusion_matrix(m, -1.0, 3)


# -- M⁶ (Elsässer et al.) ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
def test_m6_alpha_and_spectrum(kind, p, seed):
    m = random_model(kind, p, seed)
    D = np.diag(1 / np.sqrt(m.capacities))
    mu = np.linalg.eigvalsh(D @ m.laplacian.toarray() @ D)
    alpha = elsasser_alpha(m)
    # eq. 5.6.6: 2/(μ₂ + μ_p) with each μ within eig_tol (two computations of 𝓛: twice); relative error of
    # the quotient = that of the sum
    mu_tol = 2 * eig_tol(D @ m.laplacian.toarray() @ D)
    assert alpha == pytest.approx(2 / (mu[1] + mu[-1]), rel=2 * mu_tol / (mu[1] + mu[-1]) + flops(3))
    M = diffusion_matrix(m, 0.0, 6)
    d = gdm_defects(M, m.capacities)
    column_tol, balance_tol = gdm_tol(M.toarray(), m.capacities)
    assert d["column_sum"] <= column_tol and d["balance"] <= balance_tol  # conservative and balanced ...
    factor = (mu[-1] - mu[1]) / (mu[-1] + mu[1])
    # ... and convergent: an eigenvalue of M within eig_tol(M), against the closed form whose μ are within
    # mu_tol: ∂/∂μ of (μ_p − μ₂)/(μ_p + μ₂) is at most 2/(μ₂ + μ_p) in modulus
    assert convergence_factor(M, m.capacities) == pytest.approx(
        factor, abs=eig_tol(M) + 2 * 2 * mu_tol / (mu[1] + mu[-1]) + flops(4))
    nonneg = d["min_entry"] >= 0
    res = gda(m, kind=6, stop=StopParams.of(tolerance=1e-9))
    assert res.converged and res.extra["nonnegative"] == nonneg and res.extra["alpha"] == alpha
    # u = α w ∝ w: the minimal flow of Th. 20
    assert rel(res.flow, minimal_flow(m)) <= converged_flow_tol(m, alpha * m.weights, res.extra["loads"])


def test_m6_star_counter_example():
    # thesis §5.6: star with 4 vertices, w = 1, c = 1/4: 𝓛 has eigenvalues {0, 4, 4, 16}, α = 1/10
    star = Model.create(4, [(0, 1), (0, 2), (0, 3)], [9.0, 1.0, 1.0, 1.0], np.ones(4))
    lap = 4 * star.laplacian.toarray()  # 𝓛 = L / c with c = 1/4; eigenvalues 0, 4, 4, 16 within eig_tol
    assert elsasser_alpha(star) == pytest.approx(0.1, abs=0.1 * 2 * eig_tol(lap) / 20 + flops(3))
    expect = np.array([[-0.2, 0.4, 0.4, 0.4], [0.4, 0.6, 0, 0], [0.4, 0, 0.6, 0], [0.4, 0, 0, 0.6]])
    M = diffusion_matrix(star, kind=6).toarray()
    # m_ij = α w c_i / c_i …: α's error (above) times the weighted degree ≤ 3, plus a few flops
    assert np.all(np.abs(M - expect) <= 3 * (0.1 * 2 * eig_tol(lap) / 20 + flops(3)) + flops(4))
    assert gdm_defects(M, star.capacities)["min_entry"] == pytest.approx(-0.2)
    res = gda(star, kind=6, stop=StopParams.of(tolerance=1e-10))
    assert res.converged and not res.extra["nonnegative"]
    assert res.extra["min_diagonal"] == pytest.approx(-0.2)
    assert res.convergence_factor == pytest.approx(0.6, abs=eig_tol(M) + 4 * eig_tol(lap) / 20)  # (16 − 4)/(16 + 4)
    assert res.extra["bounds"]["lambda_p"] > 1  # Gershgorin gives no bound on a negative diagonal
    lazy = gda(star, kind=6, stop=StopParams.of(lazy=True, tolerance=1e-10))  # ½(I + M⁶) is non-negative again
    assert lazy.extra["nonnegative"]
    assert lazy.convergence_factor == pytest.approx(0.8, abs=eig_tol(M) + 4 * eig_tol(lap) / 20)
    info = REGISTRY["gda6"].serial(star, tolerance=1e-8)
    assert not info.extra["nonnegative"]


def test_table_5_3_ordering_on_heterogeneous_paths():
    # thesis Table 5.3: paths, speeds r mod 4 + 1, weights k mod 2 + 1: λ(GDA6) < λ(GDA0) < λ(GDA1),
    # values 0.99888…0.99948 (the exact set-up is not given; hermes' values are within 1.5e-4)
    table6 = [0.998885, 0.998935, 0.998996, 0.999008, 0.999036, 0.999075, 0.999123]
    table0 = [0.999017, 0.99906, 0.999112, 0.999125, 0.999149, 0.999184, 0.999227]
    for p, t6, t0 in zip(range(54, 61), table6, table0):
        m = Model.create(p, [(i, i + 1) for i in range(p - 1)], np.ones(p), np.arange(p) % 4 + 1.0,
                         np.arange(p - 1) % 2 + 1.0)
        g6, g0, g1 = (convergence_factor(diffusion_matrix(m, e, k), m.capacities)
                      for e, k in ((0.0, 6), ("eps0", 1), (1.0, 1)))
        assert g6 < g0 < g1
        assert abs(g6 - t6) < 1.5e-4 and abs(g0 - t0) < 1.5e-4


# -- GDA with every matrix ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,p,seed", SMALL)
@pytest.mark.parametrize("mk", [2, 3, 4, 5])
def test_gda_converges_to_the_flow_of_its_matrix(kind, p, seed, mk):
    # Lemma 7 / Th. 14: the flow minimising Σ f² / u_k with u_k = m_ij c_j
    m = random_model(kind, p, seed)
    res = gda(m, "eps0", StopParams.of(tolerance=1e-10), kind=mk)
    assert res.converged and res.extra["nonnegative"]
    ref = diffusion_flow(m, "eps0", mk)
    u = edge_rates(m, "eps0", mk)
    tol = converged_flow_tol(m, u, res.extra["loads"])  # the flow still to come, from the imbalance left
    assert rel(res.flow, ref) <= tol
    left = np.linalg.norm(res.extra["loads"] - m.fair_loads) / np.linalg.norm(m.loads - m.fair_loads)
    assert check_balancing(m, res.flow) <= left + balancing_floor(m, res.flow)
    assert np.all(np.abs(m.apply_flow(res.flow) - res.extra["loads"]) <= conservation_tol(m, res.flow, res.iterations))
    if mk == 2 or kind in ("tree", "path", "star"):  # u ∝ w, or a single balancing flow
        assert flow_error(m, res.flow) <= tol
    if mk == 5:  # u = c_i c_j, the weights play no role
        mc = Model(m.p, m.edges, m.loads, m.capacities, m.capacities[m.edges[:, 0]] * m.capacities[m.edges[:, 1]])
        assert rel(res.flow, minimal_flow(mc)) <= tol
    assert np.all(u > 0)
    # the lazy matrix ½(I + M): the same flow, λ = ½(1 + λ₂(M)), more iterations
    lazy = gda(m, "eps0", StopParams.of(lazy=True, tolerance=1e-10), kind=mk)
    assert rel(lazy.flow, ref) <= converged_flow_tol(m, u, lazy.extra["loads"]) and lazy.iterations > res.iterations
    S = diffusion_matrix(m, "eps0", mk).toarray() * np.sqrt(m.capacities)[None, :] / np.sqrt(m.capacities)[:, None]
    lam2 = np.sort(np.linalg.eigvalsh(0.5 * (S + S.T)))[-2]
    assert lazy.convergence_factor == pytest.approx(0.5 * (1 + lam2), abs=2 * (eig_tol(S) + gamma(p + 4)))


@pytest.mark.parametrize("kind,p,seed", SMALL + [("mesh", 36, 10)])
@pytest.mark.parametrize("mk", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("lazy", [False, True])
def test_bounds_of_section_5_2_hold_for_every_matrix(kind, p, seed, mk, lazy):
    m = random_model(kind, p, seed)
    M = diffusion_matrix(m, "eps0", mk, lazy=lazy).toarray()
    S = M * np.sqrt(m.capacities)[None, :] / np.sqrt(m.capacities)[:, None]
    lam = np.sort(np.linalg.eigvalsh(0.5 * (S + S.T)))
    b = diffusion_bounds(m, "eps0", mk, lazy=lazy)
    assert b["theta"] == np.min(edge_rates(m, "eps0", mk, lazy=lazy))
    # computed eigenvalues of the rounded S (entries of a few flops) against bounds of ≤ 16 flops
    tol = eig_tol(S) + gamma(p + 4) + flops(16)
    assert lam[-2] <= b["cor1"] + tol and lam[-2] <= b["th11"] + tol  # Cor. 1, Th. 11
    assert b["lambda2"] == min(b["cor1"], b["th11"])
    if lam[0] < 0:
        assert -lam[0] <= b["lambda_p"] + tol  # Lemma 10 / its Gershgorin argument
    assert max(lam[-2], -lam[0]) <= b["factor"] + tol
    if lazy and mk <= 5:  # ½(I + M) of a GDM: all eigenvalues ≥ 0 and Gershgorin says so
        assert lam[0] >= -tol and b["lambda_p"] == 0.0
    if mk <= 5:
        assert b["factor"] < 1


THESIS_TOPOLOGIES = {"path16": (16, [(i, i + 1) for i in range(15)]), "mesh4x8": (32, mesh_edges(4, 8)),
                     "bintree15": (15, [((i - 1) // 2, i) for i in range(1, 15)])}


@pytest.mark.parametrize("topology", sorted(THESIS_TOPOLOGIES))
@pytest.mark.parametrize("ratio", [2, 5, 10])
def test_m5_is_the_bad_example(topology, ratio):
    # thesis Tables 5.1–5.2, JPDC Tables 1–2: capacities with c_max/c_min = ratio, w = 1; M¹(ε₀) needs
    # the fewest iterations and M⁵ the most; ε₀ beats ε = 1 for M¹ … M⁴
    p, edges = THESIS_TOPOLOGIES[topology]
    rng = np.random.default_rng(ratio)
    caps = rng.uniform(1, ratio, p)
    caps[0], caps[-1] = 1.0, ratio
    m = Model.create(p, edges, rng.uniform(0, 10, p), caps)
    stop = StopParams.of(tolerance=1e-4)
    its = [gda(m, "eps0", stop, kind=k, compute_factor=False).iterations for k in (1, 2, 3, 4, 5)]
    assert its[0] == min(its) and its[4] == max(its) and its[4] > its[0]
    one = [gda(m, 1.0, StopParams.of(tolerance=1e-4), kind=k, compute_factor=False).iterations for k in (1, 2, 3, 4)]
    assert all(a < b for a, b in zip(its, one))


def test_m5_is_fastest_on_a_star():
    # thesis Tables 5.5/5.6, row "Star": M⁵ needs the fewest iterations (u = c_i c_j does not shrink with Δ)
    rng = np.random.default_rng(2)
    m = Model.create(16, [(0, i) for i in range(1, 16)], rng.uniform(0, 10, 16), rng.uniform(1, 5, 16))
    stop = StopParams.of(tolerance=1e-4)
    its = [gda(m, "eps0", stop, kind=k, compute_factor=False).iterations for k in (1, 2, 3, 4, 5)]
    assert its[4] == min(its) and its[4] < its[0]


def test_counters_of_global_kinds():
    m = random_model("tree+", 10, 5)
    links = Links(latency=1e-4, bandwidth=1e8)
    for mk in (1, 2, 5, 6):
        res = gda(m, "eps0", StopParams.of(tolerance=1e-4, check_every=3), kind=mk, links=links, compute_factor=False)
        n, g = res.iterations, 1 if mk in (2, 3, 4) else 0
        checks = 1 + -(-n // 3)
        cnt = res.counters
        assert cnt.exchange_rounds == 1 + n and cnt.messages == 2 * m.q * (1 + n)
        assert cnt.collectives == {"allreduce": 1 + g + checks}
        assert cnt.bytes == 16 * m.p + 32 * m.q + 24 * m.p * g + 16 * m.q * n + 8 * m.p * checks
        # the same α-β terms summed in a different grouping: γ of their number on each side
        tol = 2 * flops(3 * (n + checks + 3))
        assert cnt.time == pytest.approx(gda_counters(m, n, 3, links, kind=mk).time, rel=tol)
        assert cnt.time == pytest.approx(float(np.max(res.extra["rank_times"])), rel=tol)


# -- registry -------------------------------------------------------------------------------------------
def params(name: str, **over) -> dict:
    info = REGISTRY[name]
    out = {**info.defaults, **over}
    info.check(out)
    return out


def test_registry_entries():
    expect = {"gda2", "gda3", "gda4", "gda5", "gda6", "sos", "sos_opt", "implicit", "implicit_watts"}
    assert set(REGISTRY) == expect
    for name, info in REGISTRY.items():
        assert info.name == name and callable(info.run) and callable(info.serial) and info.doc
        assert {"tolerance", "max_iterations", "check_every", "lazy"} <= set(info.defaults)
    assert "omega" in REGISTRY["sos"].defaults and "omega" not in REGISTRY["sos_opt"].defaults
    assert "eps" in REGISTRY["implicit"].defaults and "eps" not in REGISTRY["implicit_watts"].defaults


@pytest.mark.parametrize("name,key,bad", [
    ("gda2", "lazy", "yes"), ("gda6", "lazy", 1), ("sos", "omega", 2.0), ("sos", "omega", 0.0),
    ("sos", "omega", "fast"), ("sos_opt", "eps", -1.0), ("sos", "eps", "eps1"), ("implicit", "alpha", 0.0),
    ("implicit", "inner_tolerance", 1.0), ("implicit_watts", "alpha", float("inf")),
    ("implicit_watts", "inner_tolerance", 0), ("implicit", "sweeps", -1), ("implicit_watts", "sweeps", 2.0)])

def test_registry_rejects_bad_parameters(name, key, bad):
    with pytest.raises(BalancerError, match=f"balancer.{key}"):
        params(name, **{key: bad})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registry_serial_forms_reach_their_flows(name):
    m = random_model("mesh", 12, 2)
    res = REGISTRY[name].serial(m, **params(name, tolerance=1e-9))
    assert res.converged and res.convergence_factor is not None and 0 < res.convergence_factor < 1
    if name == "implicit_watts":
        u = m.capacities[m.edges[:, 0]] * m.capacities[m.edges[:, 1]] / (m.capacities[m.edges[:, 0]]
                                                                        + m.capacities[m.edges[:, 1]])
        ref = minimal_flow(Model(m.p, m.edges, m.loads, m.capacities, u))
    elif name.startswith("gda"):
        u = edge_rates(m, "eps0", int(name[3]))
        ref = diffusion_flow(m, "eps0", int(name[3]))
    else:
        u = edge_rates(m, "eps0")
        ref = diffusion_flow(m, "eps0")
    assert rel(res.flow, ref) <= converged_flow_tol(m, u, res.extra["loads"])
