"""Chebyshev-accelerated diffusion (hermes.balance.diffusion.chebyshev).

The flow-error bound asserted is the method's own guarantee: after ``k`` steps the energy norm of the
remaining flow is at most ``1/T_k(σ)`` of the whole, and the Euclidean relative error at most
``√(w_max/w_min)`` times that; the step count makes this ≤ ``tolerance``. Rounding adds ``O(k ε κ)``,
far below the tolerances used here (κ ≤ 10⁵, k ≤ 10⁴: ≤ 1e-6 · tol is not asserted, the margin is).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hermes.balance.diffusion.chebyshev import chebyshev, chebyshev_iter, chebyshev_steps, spectral_bounds
from hermes.balance.diffusion.lanczos import lanczos_bounds
from hermes.balance.flow import flow_error
from hermes.balance.model import Model
from hermes.balance.polynomial.leja import laplacian_spectrum
from hermes.balance.registry import BALANCERS as REGISTRY
from hermes.balance.registry import check_params
from hermes.runtime.clock import Links
from hermes.errors import BalancerError, GraphError
from hermes.lab.specs import parse_model
from tests.balance.graphs import KINDS, random_model, unusable_models


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [2, 5, 12, 20])
def test_bounds_enclose_the_spectrum(kind, p):
    m = random_model(kind, p, 10 + p)
    mu = laplacian_spectrum(m)[1:]
    for kind_ in ("exact", "cheap"):
        a, b = spectral_bounds(m, kind_)
        assert 0 < a <= mu.min() and mu.max() <= b
    a_c, b_c = spectral_bounds(m, "cheap")
    a_e, b_e = spectral_bounds(m, "exact")
    assert b_c / a_c >= b_e / a_e * (1 - 1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [3, 9, 16])
@pytest.mark.parametrize("bounds", ["lanczos", "exact", "cheap"])
def test_flow_error_within_the_tolerance(kind, p, bounds):
    m = random_model(kind, p, 40 + p)
    for tol in (1e-4, 1e-10):
        res = chebyshev(m, tolerance=tol, bounds=bounds)
        assert res.converged and flow_error(m, res.flow) <= tol


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [5, 12, 20])
def test_lanczos_bounds_enclose_the_spectrum_once_the_krylov_space_is_whole(kind, p):
    """With more steps than eigenvalues, Lanczos from random loads stops on an invariant subspace or on its
    residual test: its Ritz values are eigenvalues, and [a, b] holds the spectrum within the residuals (the
    test's 10⁻⁶: the residual rule stops at 10⁻³ of the value, and a is θ₁ − r₁)."""
    m = random_model(kind, p, 70 + p)
    mu = laplacian_spectrum(m)[1:]
    bd = lanczos_bounds(m, 60)
    assert 0 < bd.a <= mu.min() * (1 + 1e-6) and mu.max() * (1 - 1e-6) <= bd.b
    assert bd.ritz[0] >= mu.min() * (1 - 1e-9) and bd.ritz[1] <= mu.max() * (1 + 1e-9)  # interlacing


def test_lanczos_keeps_the_null_space_out_on_a_grid():
    """16 × 16 processors, 60 steps: the Ritz values stay inside the spectrum and the bounds are μ₂ and μ_p within
    a percent. (Subtracting w's own null component instead of that of w − αv let it grow by α/β ≈ 2 per step:
    after 60 steps the lowest Ritz value was −770.)"""
    m = parse_model("mesh:16x16", "homo", "1", "one")
    m = m.with_loads(list(np.random.default_rng(3).uniform(1, 2, m.p)))
    mu = laplacian_spectrum(m)
    bd = lanczos_bounds(m, 60)
    assert mu[1] * 0.99 <= bd.a <= mu[1] * (1 + 1e-6) and mu[-1] * (1 - 1e-6) <= bd.b <= mu[-1] * 1.01
    assert lanczos_bounds(m.with_loads([1.0] * m.p), 60) is None  # balanced (exactly: c = 1/256): nothing to bound


def test_step_count_is_the_chebyshev_bound():
    a, b, tol = 1.0, 100.0, 1e-8
    k = chebyshev_steps(a, b, tol)
    sigma = (b + a) / (b - a)
    assert 1.0 / math.cosh(k * math.acosh(sigma)) <= tol < 1.0 / math.cosh((k - 1) * math.acosh(sigma))
    assert chebyshev_steps(a, b, tol, weight_ratio=4.0) == chebyshev_steps(a, b, tol / 2)
    assert chebyshev_steps(2.0, 2.0, tol) == 1
    # O(√κ): a 100 times larger κ needs about 10 times more steps
    assert 9 <= chebyshev_steps(1.0, 1e4, tol) / k <= 11
    with pytest.raises(BalancerError, match="bounds"):
        chebyshev_steps(0.0, 1.0, tol)


def test_one_eigenvalue_balances_in_one_step():
    m = Model.create(6, [(i, j) for i in range(6) for j in range(i + 1, 6)], np.arange(6.0), np.ones(6))
    # exact bounds widened by 1e-9: 1/T_1(σ) = δ/θ = 1e-9 ≤ 1e-6, and θ is the eigenvalue: exact in one step
    res = chebyshev(m, tolerance=1e-6)
    assert res.iterations == 1 and flow_error(m, res.flow) <= 1e-14


def test_generator_residual_and_counters():
    m = random_model("tree+", 10, 4)
    a, b = spectral_bounds(m, "exact")
    states = list(chebyshev_iter(m, a, b, 30))
    assert [s.iteration for s in states] == list(range(31))
    for s in states:  # the residual is the remaining imbalance
        assert np.allclose(s.residual, m.loads - m.fair_loads - m.incidence @ s.flow, atol=1e-10 * m.loads.sum())
    links = Links(latency=1e-4, bandwidth=1e8)
    res = chebyshev(m, tolerance=1e-6, bounds="exact", links=links, spectrum="free")  # its charge: test_precompute
    k, c = res.iterations, res.counters
    assert k == res.extra["planned_steps"] and (c.exchange_rounds, c.collectives) == (k, {"allreduce": 1})
    assert c.time == pytest.approx(math.ceil(math.log2(m.p)) * (1e-4 + 16 / 1e8) + k * (1e-4 + 8 / 1e8), rel=1e-12)
    charged = chebyshev(m, tolerance=1e-6, bounds="exact", links=links)  # the eigensolve of the exact bounds paid
    assert charged.counters.collectives == {"allreduce": 1, "gather": 1, "bcast": 1}
    assert charged.counters.time > c.time and charged.extra["spectrum_computed"] is True
    capped = chebyshev(m, tolerance=1e-6, bounds="exact", max_iterations=3)
    assert capped.iterations == 3 and not capped.converged


def test_steps_grow_like_the_square_root_of_kappa_on_paths():
    ks = [chebyshev(parse_model(f"path:{p}", "homo", "1", "one"), bounds="exact").iterations for p in (16, 64)]
    assert 3 <= ks[1] / ks[0] <= 5  # κ of a path grows like p², steps like p


@pytest.mark.parametrize("model,match", unusable_models())
def test_unusable_models(model, match):
    with pytest.raises(GraphError, match=match):
        chebyshev(model)


def test_bad_parameters_and_registry():
    m = random_model("ring", 6, 1)
    for kw, match in [({"tolerance": 0.0}, "tolerance"), ({"bounds": "gershgorin"}, "bounds"),
                      ({"max_iterations": 0}, "max_iterations")]:
        with pytest.raises(BalancerError, match=match):
            chebyshev(m, **kw)
    with pytest.raises(BalancerError, match="^balancer.bounds:"):
        check_params("chebyshev", {"bounds": "gershgorin"})
    full = check_params("chebyshev", {"bounds": "cheap"})
    assert np.array_equal(REGISTRY["chebyshev"].serial(m, **full).flow, chebyshev(m, bounds="cheap").flow)
