"""Known-answer tests for corelib.linear (the LTI reference that checks ACE)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from corelib.linear import (
    balanced_truncation,
    gramians,
    hankel_singular_values,
    observability_matrix,
    pca_basis,
    random_stable_system,
    simulate_states,
    spectral_radius,
)


def _transfer(a, b, c, z):
    """G(z) = C (z I - A)^{-1} B."""
    return c @ np.linalg.solve(z * np.eye(a.shape[0]) - a, b)


def test_random_stable_system_is_seeded_and_has_the_requested_radius():
    a, b, c = random_stable_system(7, 2, 3, seed=11, spectral_radius=0.8)
    assert a.shape == (7, 7) and b.shape == (7, 2) and c.shape == (3, 7)
    assert spectral_radius(a) == pytest.approx(0.8, rel=1e-12)
    a2, b2, c2 = random_stable_system(7, 2, 3, seed=11, spectral_radius=0.8)
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, random_stable_system(7, 2, 3, seed=12)[0])


def test_gramians_solve_the_lyapunov_equations_and_equal_the_series():
    a, b, c = random_stable_system(6, 2, 2, seed=0, spectral_radius=0.7)
    wc, wo = gramians(a, b, c)
    np.testing.assert_allclose(a @ wc @ a.T - wc + b @ b.T, 0.0, atol=1e-12)
    np.testing.assert_allclose(a.T @ wo @ a - wo + c.T @ c, 0.0, atol=1e-12)
    series_c = sum(np.linalg.matrix_power(a, k) @ b @ b.T @ np.linalg.matrix_power(a, k).T for k in range(200))
    np.testing.assert_allclose(wc, series_c, rtol=1e-10, atol=1e-12)
    o = observability_matrix(a, c, 200)
    np.testing.assert_allclose(wo, o.T @ o, rtol=1e-10, atol=1e-12)


def test_balanced_truncation_balances_and_bounds_the_error():
    a, b, c = random_stable_system(10, 2, 2, seed=1)
    r = 4
    bt = balanced_truncation(a, b, c, r)
    wc, wo = gramians(a, b, c)
    hsv = bt.hsv
    np.testing.assert_allclose(bt.T @ bt.T_inv, np.eye(10), atol=1e-9)
    np.testing.assert_allclose(bt.T @ wc @ bt.T.T, np.diag(hsv), atol=1e-10)
    np.testing.assert_allclose(bt.T_inv.T @ wo @ bt.T_inv, np.diag(hsv), atol=1e-10)
    np.testing.assert_allclose(hsv**2, np.sort(np.linalg.eigvals(wc @ wo).real)[::-1], rtol=1e-6)
    np.testing.assert_allclose(hankel_singular_values(a, b, c), hsv, rtol=1e-14)
    np.testing.assert_allclose(bt.basis.T @ bt.basis, np.eye(r), atol=1e-12)
    assert bt.rank == r
    # Classical bound: sup_|z|=1 ||G(z) - G_r(z)||_2 <= 2 * (sum of discarded HSVs).
    bound = 2 * hsv[r:].sum()
    errors = [
        np.linalg.norm(_transfer(a, b, c, z) - _transfer(bt.A_r, bt.B_r, bt.C_r, z), 2)
        for z in np.exp(1j * np.linspace(0, np.pi, 400))
    ]
    assert max(errors) <= bound
    assert max(errors) >= hsv[r] * 0.5  # and the bound is not vacuous: error ~ sigma_{r+1}
    assert spectral_radius(bt.A_r) < 1  # truncation preserves stability


def test_simulated_state_covariance_approaches_the_reachability_gramian():
    a, b, _ = random_stable_system(4, 2, 1, seed=3, spectral_radius=0.6)
    wc, _ = gramians(a, b, np.ones((1, 4)))
    x = simulate_states(a, b, 100_000, seed=0)
    assert x.shape == (100_000, 4)
    cov = np.cov(x.T)
    assert np.linalg.norm(cov - wc) / np.linalg.norm(wc) < 0.03


def test_pca_basis_finds_the_high_variance_axes():
    rng = np.random.default_rng(0)
    rot, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    h = (rng.standard_normal((20000, 5)) * np.array([5.0, 3.0, 1.0, 0.5, 0.1])) @ rot.T + 2.0
    q = pca_basis(h, 2)
    assert np.max(scipy.linalg.subspace_angles(q, rot[:, :2])) < 0.02
    np.testing.assert_allclose(q.T @ q, np.eye(2), atol=1e-12)
    assert np.all(q[np.argmax(np.abs(q), axis=0), [0, 1]] > 0)  # sign convention


def test_linear_errors_name_the_problem():
    a, b, c = random_stable_system(4, 1, 1, seed=0)
    with pytest.raises(ValueError, match="not stable"):
        gramians(2.0 * a / spectral_radius(a), b, c)
    with pytest.raises(ValueError, match="B must have n = 4 rows"):
        gramians(a, np.ones((3, 1)), c)
    with pytest.raises(ValueError, match="C must have n = 4 columns"):
        gramians(a, b, np.ones((1, 5)))
    with pytest.raises(ValueError, match="square"):
        gramians(np.ones((4, 3)), b, c)
    with pytest.raises(ValueError, match="NaN/Inf"):
        gramians(np.full((4, 4), np.nan), b, c)
    with pytest.raises(ValueError, match="r must be an integer in"):
        balanced_truncation(a, b, c, 5)
    with pytest.raises(ValueError, match="spectral_radius"):
        random_stable_system(3, 1, 1, seed=0, spectral_radius=1.0)
    with pytest.raises(ValueError, match="positive integer"):
        random_stable_system(0, 1, 1, seed=0)
    # A state that the input never reaches makes the system non-minimal.
    a_nm = np.diag([0.5, 0.3])
    with pytest.raises(ValueError, match="not minimal"):
        balanced_truncation(a_nm, np.array([[1.0], [0.0]]), np.ones((1, 2)), 1)
    with pytest.raises(ValueError, match="r must be"):
        pca_basis(np.ones((3, 2)) + np.arange(3)[:, None], 3)
    with pytest.raises(ValueError, match="horizon"):
        observability_matrix(a, c, 0)
