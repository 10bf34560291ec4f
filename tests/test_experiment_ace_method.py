"""The computations behind the ACE-method chapter, with known answers."""

import numpy as np
import pytest

from corelib.experiments.ace_method import decoy_activations, keep_r2, simulated_core_errors
from corelib.linear import balanced_truncation, random_stable_system


def test_decoy_activations_have_exactly_the_planned_covariance():
    h, axes = decoy_activations(5, 400, loud_std=4.0, quiet_std=0.5, seed=1)
    np.testing.assert_allclose(axes.T @ np.cov(h.T) @ axes, np.diag(np.geomspace(4.0, 0.5, 5) ** 2), atol=1e-10)
    noisy, _ = decoy_activations(5, 400, loud_std=4.0, quiet_std=0.5, seed=1, decorrelate=False)
    off = axes.T @ np.cov(noisy.T) @ axes
    assert np.abs(off - np.diag(np.diag(off))).max() > 1e-3  # only approximately diagonal
    with pytest.raises(ValueError, match="more samples"):
        decoy_activations(5, 5, loud_std=1, quiet_std=1, seed=0)


def test_keep_r2_is_one_for_the_read_direction_and_zero_for_an_orthogonal_one():
    h, axes = decoy_activations(4, 300, loud_std=3.0, quiet_std=0.3, seed=2)
    mu, w = h.mean(0), axes[:, -1]

    def f(x):
        return np.tanh((x - mu) @ w)

    assert keep_r2(f, h, w[:, None], mu) == pytest.approx(1.0, abs=1e-12)
    # Keeping an orthogonal direction maps every h to a point with f = 0: R^2 = -mean^2/var <= 0.
    assert keep_r2(f, h, axes[:, :1], mu) <= 1e-12


def test_simulated_errors_shrink_with_more_data():
    a, b, c = random_stable_system(6, 2, 2, seed=0, spectral_radius=0.8)
    bt = balanced_truncation(a, b, c, 2)
    errors, angles = simulated_core_errors(
        a,
        b,
        c,
        rank=2,
        reference_sv=bt.hsv,
        reference_basis=bt.basis,
        sim_steps=[200, 20000],
        n_runs=3,
        n_jacobians=4,
        seed=0,
        horizon=120,
    )
    assert errors[1] < errors[0] / 3 and angles[1] < angles[0] / 3
    assert errors[1] < 0.05 and angles[1] < 3.0
