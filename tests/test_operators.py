"""Known-answer tests for corelib.operators: fitted dynamics and the oracle R^2 of a Markov chain."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from corelib.operators import fit_dynamics, oracle_r2
from corelib.tasks.markov import (
    chain_eigenvalues,
    sample_sequences,
    stationary_distribution,
    transition_matrix,
)

# A real 4x4 operator with eigenvalues 0.9 e^{+-0.3i}, 0.5, -0.2, in a non-orthogonal basis.
_RHO, _PHI = 0.9, 0.3
_EIGS = np.array([_RHO * np.exp(1j * _PHI), _RHO * np.exp(-1j * _PHI), 0.5, -0.2])


def _known_operator(seed: int = 0) -> np.ndarray:
    block = np.zeros((4, 4))
    block[:2, :2] = _RHO * np.array([[np.cos(_PHI), -np.sin(_PHI)], [np.sin(_PHI), np.cos(_PHI)]])
    block[2, 2], block[3, 3] = 0.5, -0.2
    v = np.eye(4) + 0.3 * np.random.default_rng(seed).standard_normal((4, 4))
    return v @ block @ np.linalg.inv(v)


def _sorted_eigs(w: np.ndarray) -> np.ndarray:
    return w[np.lexsort((-w.imag, -np.abs(w)))]


def test_fit_dynamics_recovers_operator_from_noise_free_trajectories():
    a = _known_operator()
    rng = np.random.default_rng(1)
    z = [rng.standard_normal((200, 4))]  # 200 trajectories of 6 steps from random starts
    for _ in range(6):
        z.append(z[-1] @ a.T)
    z_t = np.concatenate(z[:-1])
    z_next = np.concatenate(z[1:])
    a_fit, eig, r2 = fit_dynamics(z_t, z_next, center=False)
    np.testing.assert_allclose(a_fit, a, atol=1e-10)
    np.testing.assert_allclose(eig, _sorted_eigs(_EIGS), atol=1e-10)
    assert r2 == pytest.approx(1.0, abs=1e-12)
    # Centring does not change a linear map's fit either (z_next - mean = A (z_t - mean)).
    a_c, _, r2_c = fit_dynamics(z_t, z_next)
    np.testing.assert_allclose(a_c, a, atol=1e-10)
    assert r2_c == pytest.approx(1.0, abs=1e-12)


def test_fit_dynamics_with_noise_matches_theoretical_r2():
    """z_{t+1} = A z_t + w, w ~ N(0, s^2 I): R^2_j = 1 - s^2 / Sigma_jj with Sigma the stationary covariance."""
    a = _known_operator(seed=2)
    s = 0.5
    sigma = scipy.linalg.solve_discrete_lyapunov(a, s**2 * np.eye(4))
    r2_theory = float(np.mean(1.0 - s**2 / np.diag(sigma)))
    rng = np.random.default_rng(3)
    n = 100_000
    noise = s * rng.standard_normal((n + 1, 4))
    z = np.empty((n + 1, 4))
    z[0] = rng.multivariate_normal(np.zeros(4), sigma)  # start in stationarity
    for t in range(n):
        z[t + 1] = a @ z[t] + noise[t + 1]
    a_fit, eig, r2 = fit_dynamics(z[:-1], z[1:])
    assert 0.3 < r2_theory < 0.95  # the noise is neither negligible nor dominant
    assert r2 == pytest.approx(r2_theory, abs=0.01)
    np.testing.assert_allclose(eig, _sorted_eigs(_EIGS), atol=0.02)
    np.testing.assert_allclose(a_fit, a, atol=0.03)


def test_fit_dynamics_rejects_bad_input():
    z = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(ValueError, match="same shape"):
        fit_dynamics(z, z[:9])
    with pytest.raises(ValueError, match="more transitions"):
        fit_dynamics(z[:3], z[:3])
    bad = z.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN/Inf"):
        fit_dynamics(bad, z)


# --------------------------------------------------------------------------- oracle R^2


def _monte_carlo_r2(t: np.ndarray, seed: int, n_seq=2000, length=130, burn_in=30) -> float:
    """R^2 of the Bayes-optimal predictor E[onehot(x_{t+1}) | x_t] = T[x_t], averaged over tokens.

    The sampler starts uniformly, so the first ``burn_in`` positions are dropped to reach the
    stationary distribution (needed for a non-uniform pi).
    """
    seq = sample_sequences(t, n_seq, length, seed=seed)[:, burn_in:]
    cur, nxt = seq[:, :-1].ravel(), seq[:, 1:].ravel()
    y = np.eye(len(t))[nxt]
    pred = t[cur]
    ss_res = ((y - pred) ** 2).sum(axis=0)
    ss_tot = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(1.0 - ss_res / ss_tot))


_NON_UNIFORM = np.array([[0.8, 0.15, 0.05], [0.3, 0.4, 0.3], [0.1, 0.2, 0.7]])


def test_oracle_r2_of_the_paper_chain_is_one_half_and_matches_monte_carlo():
    t = transition_matrix(0.75, 0.25, 4)
    # m_j = 1/4 * (0.75*0.25 + 0.25*0.75) = 3/32 and v_j = 3/16 for every token: R^2 = 1/2.
    assert oracle_r2(t) == pytest.approx(0.5, abs=1e-12)
    # Monte-Carlo sd with 200k transitions is ~0.001.
    assert _monte_carlo_r2(t, seed=0) == pytest.approx(oracle_r2(t), abs=0.005)


def test_oracle_r2_of_a_non_uniform_chain_matches_monte_carlo():
    t = _NON_UNIFORM
    pi = stationary_distribution(t)
    assert np.ptp(pi) > 0.2  # genuinely non-uniform
    mc = _monte_carlo_r2(t, seed=1)
    assert mc == pytest.approx(oracle_r2(t), abs=0.005)
    # The paper's printed formula m = diag(pi) (T * (1 - T))^T 1 weights by pi_j instead of pi_i;
    # it only agrees for uniform pi, and here it is off by ~0.018 (more than 10 Monte-Carlo sd).
    paper = 1.0 - np.mean(pi * (t * (1 - t)).sum(axis=0) / (pi * (1 - pi)))
    assert abs(paper - mc) > 0.01


@pytest.mark.parametrize("t", [transition_matrix(0.75, 0.25, 4), _NON_UNIFORM], ids=["paper", "non-uniform"])
def test_fit_dynamics_on_one_hot_chain_reaches_oracle_and_chain_spectrum(t):
    """A linear map of the one-hot state *is* the Bayes predictor, so the fit attains the oracle.

    Centred one-hots live in the sum-zero subspace, which T^T maps into itself; the fitted
    operator has the non-Perron eigenvalues of T there, and 0 along the all-ones direction.
    """
    seq = sample_sequences(t, 2000, 130, seed=5)[:, 30:]
    n = len(t)
    x = np.eye(n)[seq[:, :-1].ravel()]
    y = np.eye(n)[seq[:, 1:].ravel()]
    _, eig, r2 = fit_dynamics(x, y)
    assert r2 == pytest.approx(oracle_r2(t), abs=0.005)
    expected = chain_eigenvalues(t)
    got = eig[np.abs(eig) > 0.05]
    assert len(got) == len(expected)
    np.testing.assert_allclose(_sorted_eigs(got), expected, atol=0.02)
