"""Known-answer tests for corelib.operators: fitted dynamics (against the Markov oracle R^2), spectra, shift fits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from corelib.operators import fit_dynamics
from corelib.tasks.markov import (
    chain_eigenvalues,
    oracle_r2,
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


# --------------------------------------------------------------------------- modular addition: shift operator

from corelib.operators import (  # noqa: E402
    class_centroids,
    cycle_spectrum,
    fit_shift_operator,
    frequency_count,
    holdout_block,
    mode_count,
    near_unit_circle,
    rotational_modes,
    spectrum_distance,
    unit_circle_fraction,
)

_P = 53


def _fourier_features(p: int, ks, amps=None) -> np.ndarray:
    """(p, 2K) rows [a_k cos(2 pi k c / p), a_k sin(2 pi k c / p)] over the frequencies ks."""
    c = np.arange(p)
    amps = np.ones(len(ks)) if amps is None else np.asarray(amps, dtype=float)
    cols = [a * f(2 * np.pi * k * c / p) for k, a in zip(ks, amps) for f in (np.cos, np.sin)]
    return np.stack(cols, axis=1)


def _planted_centroids(p, ks, *, amps=None, extra=4, noise=1e-12, seed=0) -> np.ndarray:
    """Fourier features mixed by a random invertible matrix, padded with ``extra`` dimensions
    (zero plus ``noise``) and rotated so that the planted subspace is not axis-aligned."""
    rng = np.random.default_rng(seed)
    f = _fourier_features(p, ks, amps)
    d = f.shape[1]
    mix = np.eye(d) + 0.5 * rng.standard_normal((d, d))
    assert np.linalg.cond(mix) < 1e3
    z = np.concatenate([f @ mix.T, np.zeros((p, extra))], axis=1)
    q, _ = np.linalg.qr(rng.standard_normal((d + extra, d + extra)))
    return z @ q.T + noise * rng.standard_normal(z.shape)


def _roots(p, ks) -> np.ndarray:
    k = np.asarray(ks, dtype=float)
    return np.concatenate([np.exp(2j * np.pi * k / p), np.exp(-2j * np.pi * k / p)])


def test_class_centroids_are_per_class_means():
    coords = np.array([[1.0, 0.0], [3.0, 2.0], [10.0, -1.0], [-4.0, 4.0], [0.0, 0.0], [2.0, 2.0]])
    labels = np.array([0, 0, 2, 1, 1, 1])
    expected = np.array([[2.0, 1.0], [-2.0 / 3.0, 2.0], [10.0, -1.0]])
    np.testing.assert_allclose(class_centroids(coords, labels, 3), expected, atol=1e-15)
    # Order of the examples does not matter; float labels holding integers are accepted.
    perm = np.random.default_rng(0).permutation(6)
    np.testing.assert_allclose(class_centroids(coords[perm], labels[perm].astype(float), 3), expected)


def test_class_centroids_rejects_bad_input():
    coords = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"2 class\(es\) have no examples: 1, 3"):
        class_centroids(coords, [0, 0, 2, 2], 4)
    with pytest.raises(ValueError, match="one entry per row"):
        class_centroids(coords, [0, 1, 2], 3)
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
        class_centroids(coords, [0, 1, 2, 3], 3)
    with pytest.raises(ValueError, match="integer class indices"):
        class_centroids(coords, [0, 1, 2, 1.5], 3)
    bad = coords.copy()
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN/Inf"):
        class_centroids(bad, [0, 1, 2, 2], 3)
    with pytest.raises(ValueError, match="2 dimensions"):
        class_centroids(np.ones(4), [0, 1, 2, 2], 3)


@pytest.mark.parametrize(
    "ks, modes",
    [([1], [1]), ([3, 11, 20], [3, 11, 20]), ([_P - 3, 10], [3, 10]), ([26, 4, 17, 8], [4, 8, 17, 26])],
    ids=["k1", "k3-11-20", "fold-p-3", "k26-4-17-8"],
)
def test_planted_fourier_centroids_give_exact_roots_of_unity(ks, modes):
    amps = 1.0 + 0.5 * np.arange(len(ks))
    cents = _planted_centroids(_P, ks, amps=amps)
    fit = fit_shift_operator(cents)
    assert fit.n_components == 2 * len(ks)  # the 4 padding dimensions (noise 1e-12) are dropped
    assert fit.A.shape == (2 * len(ks), 2 * len(ks)) and fit.basis.shape == (cents.shape[1], 2 * len(ks))
    np.testing.assert_allclose(fit.basis.T @ fit.basis, np.eye(fit.n_components), atol=1e-12)
    assert spectrum_distance(fit.eigenvalues, _roots(_P, ks)) < 1e-8
    np.testing.assert_allclose(np.abs(fit.eigenvalues), 1.0, atol=1e-8)
    assert fit.r2 == pytest.approx(1.0, abs=1e-10)
    assert fit.r2_heldout is None
    assert rotational_modes(fit.eigenvalues, _P).tolist() == modes
    assert mode_count(fit.eigenvalues, _P) == len(modes)
    assert unit_circle_fraction(fit.eigenvalues, _P) == 1.0
    # Eigenvalues are listed by descending modulus, then ascending angle.
    eig = fit.eigenvalues
    assert np.all(np.diff(np.round(np.abs(eig), 12)) <= 0)
    # The fitted operator maps each centred centroid to the next one, in the full space.
    cc = cents - fit.center
    full_map = fit.basis @ fit.A.T @ fit.basis.T  # row-vector convention: r_{c+1} = r_c @ full_map
    np.testing.assert_allclose(np.roll(cc, -1, axis=0), cc @ full_map, atol=1e-9)

    # Held-out evaluation: a contiguous block (here also one wrapping round 0) is predicted from
    # the rest. Without an intercept (the reference's fit), centring on the fitting inputs' mean
    # leaves a small offset that a linear map cannot absorb: close to, not exactly, a perfect fit.
    for block in [holdout_block(_P), (50, 8)]:
        held = fit_shift_operator(cents, holdout=block)
        assert 0.9 < held.r2_heldout < 1.0 and 0.9 < held.r2 < 1.0
        assert spectrum_distance(held.eigenvalues, _roots(_P, ks)) < 0.1


def test_fit_matches_full_space_min_norm_lstsq():
    """Without truncation the reduced fit is the minimum-norm least-squares map of the full space."""
    rng = np.random.default_rng(7)
    p, r = 11, 30
    cents = rng.standard_normal((p, r))
    fit = fit_shift_operator(cents, rel_tol=1e-10)
    assert fit.n_components == p - 1  # rank of p centred points
    x = cents - cents.mean(axis=0)
    y = np.roll(x, -1, axis=0)
    w, *_ = scipy.linalg.lstsq(x, y)  # y ~ x @ w
    np.testing.assert_allclose(fit.basis @ fit.A.T @ fit.basis.T, w, atol=1e-10)
    r2 = 1.0 - ((y - x @ w) ** 2).sum() / (y**2).sum()
    assert fit.r2 == pytest.approx(r2, abs=1e-10)
    # Non-zero eigenvalues of the full-space map are those of A.
    ew = np.linalg.eigvals(w)
    ew = ew[np.abs(ew) > 1e-8]
    assert spectrum_distance(fit.eigenvalues, ew) < 1e-8


def test_holdout_matches_hand_computation_and_ignores_heldout_centroids():
    rng = np.random.default_rng(11)
    p, r = 23, 5
    cents = rng.standard_normal((p, r)) + np.arange(p)[:, None] * 0.1
    block = (20, 4)  # classes 20, 21, 22, 0 (wraps around)
    fit = fit_shift_operator(cents, holdout=block, rel_tol=1e-12)
    assert fit.n_components == r
    # By hand, the reference's way: centre everything on the mean of the fitting inputs
    # (transitions 1->2, ..., 18->19), fit without intercept, score 20->21, 21->22, 22->0 with an
    # R^2 against the held-out targets' own mean.
    src = np.arange(1, 19)
    mu = cents[src].mean(axis=0)
    x, y = cents[src] - mu, cents[src + 1] - mu
    w, *_ = scipy.linalg.lstsq(x, y)
    ev = np.array([20, 21, 22])
    xe, ye = cents[ev] - mu, cents[(ev + 1) % p] - mu
    r2_h = 1.0 - ((ye - xe @ w) ** 2).sum() / ((ye - ye.mean(axis=0)) ** 2).sum()
    r2_in = 1.0 - ((y - x @ w) ** 2).sum() / ((y - y.mean(axis=0)) ** 2).sum()
    assert fit.r2_heldout == pytest.approx(r2_h, abs=1e-10)
    assert fit.r2 == pytest.approx(r2_in, abs=1e-10)
    np.testing.assert_allclose(fit.center, mu, atol=1e-12)
    assert spectrum_distance(fit.eigenvalues, np.linalg.eigvals(w.T)) < 1e-10
    # Changing the held-out centroids changes only the held-out score, never the fit.
    moved = cents.copy()
    moved[[20, 21, 22, 0]] += 5.0 * rng.standard_normal((4, r))
    fit2 = fit_shift_operator(moved, holdout=block, rel_tol=1e-12)
    np.testing.assert_allclose(fit2.A, fit.A, atol=1e-12)
    np.testing.assert_allclose(fit2.eigenvalues, fit.eigenvalues, atol=1e-12)
    assert fit2.r2 == pytest.approx(fit.r2, abs=1e-12)
    assert fit2.r2_heldout != pytest.approx(fit.r2_heldout, abs=1e-3)


def test_heldout_r2_is_low_for_structureless_centroids():
    """Random centroids have no cycle structure: the descriptive fit explains something (k free
    parameters per output), but the held-out block is not predicted better than its mean."""
    scores = []
    for seed in range(5):
        cents = np.random.default_rng(100 + seed).standard_normal((_P, 20))
        fit = fit_shift_operator(cents, holdout=holdout_block(_P))
        assert fit.r2_heldout < 0.2
        assert 0.1 < fit.r2 < 0.8
        scores.append(fit.r2_heldout)
    assert np.mean(scores) < 0.0


def test_ridge_shrinks_rotations_by_the_known_factor():
    """Orthonormal embedding: the centred centroid matrix has singular values s_k = a_k sqrt(p/2)
    (twice each), and the ridge solution is a rotation by 2 pi k / p scaled by
    s_k^2 / (s_k^2 + ridge)."""
    ks, amps = [2, 9, 15], np.array([1.0, 2.0, 3.0])
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((10, 6)))
    cents = _fourier_features(_P, ks, amps) @ q.T
    s2 = amps**2 * _P / 2
    sv = fit_shift_operator(cents).singular_values[:6]
    np.testing.assert_allclose(np.sort(sv**2), np.repeat(s2, 2), rtol=1e-12)
    for ridge in [0.0, 1.0, 30.0, 500.0]:
        fit = fit_shift_operator(cents, ridge=ridge)
        shrink = s2 / (s2 + ridge)
        expected = np.concatenate([shrink, shrink]) * _roots(_P, ks)
        assert spectrum_distance(fit.eigenvalues, expected) < 1e-10


def test_ridge_shrinkage_is_monotone_for_mixed_centroids():
    cents = _planted_centroids(_P, [4, 13, 22], amps=[1.0, 0.6, 1.7], seed=5)
    ridges = [0.0, 0.3, 3.0, 30.0, 300.0]
    eigs = [fit_shift_operator(cents, ridge=lam).eigenvalues for lam in ridges]
    moduli = np.array([np.sort(np.abs(e)) for e in eigs])
    np.testing.assert_allclose(moduli[0], 1.0, atol=1e-8)
    assert np.all(np.diff(moduli, axis=0) < 0)  # every sorted modulus decreases with the ridge
    fracs = [unit_circle_fraction(e, _P) for e in eigs]
    assert fracs[0] == 1.0 and fracs[-1] == 0.0


def test_rel_tol_and_max_components_set_the_dimension():
    ks = [5, 12]
    cents = _planted_centroids(_P, ks, extra=10, noise=1e-9, seed=2)
    assert fit_shift_operator(cents).n_components == 4  # noise dims at ~1e-8 relative are dropped
    assert fit_shift_operator(cents, rel_tol=0.0).n_components == 14  # everything is kept
    assert fit_shift_operator(cents, rel_tol=0.0, max_components=6).n_components == 6
    assert fit_shift_operator(cents, max_components=2).n_components == 2
    # With p - 1 < r the default cap is p - 1.
    wide = np.random.default_rng(0).standard_normal((7, 40))
    assert fit_shift_operator(wide, rel_tol=0.0).n_components == 6


def test_shift_fit_from_noisy_examples_recovers_the_modes():
    """End to end: noisy examples -> class centroids -> shift operator -> frequency bins."""
    ks = [7, 19]
    cents = _planted_centroids(_P, ks, extra=6, noise=0.0, seed=9)
    rng = np.random.default_rng(9)
    labels = np.repeat(np.arange(_P), 40)
    coords = cents[labels] + 0.3 * rng.standard_normal((labels.size, cents.shape[1]))
    est = class_centroids(coords, labels, _P)
    fit = fit_shift_operator(est, rel_tol=0.05)
    assert fit.n_components == 4
    assert rotational_modes(fit.eigenvalues, _P).tolist() == [7, 19]
    assert fit.r2 > 0.95


def test_contraction_has_no_rotational_modes():
    p = 31
    eig = 0.5 * np.exp(2j * np.pi * np.array([0, 3, -3, 8, -8]) / p)
    assert unit_circle_fraction(eig, p) == 0.0
    assert rotational_modes(eig, p).size == 0 and mode_count(eig, p) == 0
    # A contraction (0.5 times rotations by 2 pi k / p, in a skewed basis) fitted from its orbits.
    rng = np.random.default_rng(4)
    angles = 2 * np.pi * np.array([3, 8]) / p
    blocks = [0.5 * np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) for t in angles]
    v = np.eye(4) + 0.3 * rng.standard_normal((4, 4))
    a = v @ scipy.linalg.block_diag(*blocks) @ np.linalg.inv(v)
    z0 = rng.standard_normal((300, 4))
    _, eig_fit, _ = fit_dynamics(z0, z0 @ a.T, center=False)
    np.testing.assert_allclose(np.abs(eig_fit), 0.5, atol=1e-10)
    assert unit_circle_fraction(eig_fit, p) == 0.0 and mode_count(eig_fit, p) == 0


def test_near_unit_circle_uses_half_the_root_spacing():
    p = 53
    tol = np.sin(np.pi / p)
    moduli = np.array([1.0, 1 + 0.99 * tol, 1 - 0.99 * tol, 1 + 1.01 * tol, 1 - 1.01 * tol, 0.0])
    eig = moduli * np.exp(0.7j)
    assert near_unit_circle(eig, p).tolist() == [True, True, True, False, False, False]
    assert unit_circle_fraction(eig, p) == pytest.approx(0.5)
    assert near_unit_circle([], p).size == 0


def test_rotational_modes_bins_and_folds():
    p = 53
    # Angles in units of 2 pi / p; bins round to the nearest integer, k and p - k fold together.
    units = np.array([0.2, 3.4, 49.8, 26.0, 27.0, 10.6, -10.4, 5.0])
    eig = np.exp(2j * np.pi * units / p)
    eig[-1] *= 0.5  # off the circle: not a mode
    # 0.2 -> 0 (dropped); 3.4 -> 3; 49.8 -> 50 -> 3; 26 -> 26; 27 -> 26; 10.6 -> 11; -10.4 -> 43 -> 10.
    assert rotational_modes(eig, p).tolist() == [3, 10, 11, 26]
    assert mode_count(eig, p) == 4
    assert rotational_modes(eig, p).dtype.kind == "i"
    # All p-th roots of unity occupy every non-zero folded bin: floor(p / 2) modes.
    roots = np.exp(2j * np.pi * np.arange(p) / p)
    assert rotational_modes(roots, p).tolist() == list(range(1, p // 2 + 1))
    assert mode_count(roots, p) == 26
    assert rotational_modes(np.array([], dtype=complex), p).size == 0


def test_holdout_block_sizes():
    assert holdout_block(53) == (np.random.RandomState(0).randint(53), 4)  # round(3.975)
    assert holdout_block(10) == (np.random.RandomState(0).randint(10), 3)  # round(0.75) = 1, raised to 3
    assert holdout_block(53, 0.2, seed=7) == (np.random.RandomState(7).randint(53), 11)  # round(10.6)
    assert len({holdout_block(53, seed=s)[0] for s in range(10)}) > 1
    with pytest.raises(ValueError, match="fraction"):
        holdout_block(53, 1.5)
    with pytest.raises(ValueError, match="p must be an integer >= 3"):
        holdout_block(2)


def test_shift_operator_and_spectrum_helpers_reject_bad_input():
    cents = _planted_centroids(_P, [3, 7])
    for size in (0, 1):
        with pytest.raises(ValueError, match="holdout size must be >= 3"):
            fit_shift_operator(cents, holdout=(5, size))
    with pytest.raises(ValueError, match="leaves 2 of p=53 classes"):
        fit_shift_operator(cents, holdout=(0, 51))
    with pytest.raises(ValueError, match="pair"):
        fit_shift_operator(cents, holdout=4)
    bad = cents.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN/Inf"):
        fit_shift_operator(bad)
    with pytest.raises(ValueError, match="at least 3 classes"):
        fit_shift_operator(cents[:2])
    with pytest.raises(ValueError, match="ridge"):
        fit_shift_operator(cents, ridge=-1.0)
    with pytest.raises(ValueError, match="rel_tol"):
        fit_shift_operator(cents, rel_tol=1.0)
    with pytest.raises(ValueError, match="max_components"):
        fit_shift_operator(cents, max_components=0)
    with pytest.raises(ValueError, match="identical"):
        fit_shift_operator(np.ones((5, 3)))
    with pytest.raises(ValueError, match="empty"):
        unit_circle_fraction([], 53)
    with pytest.raises(ValueError, match="NaN/Inf"):
        rotational_modes([1.0, np.nan], 53)
    with pytest.raises(ValueError, match="p must be an integer"):
        near_unit_circle([1.0], 1)


# --------------------------------------------------------------------------- cycle spectrum


def _projection_shares(r: np.ndarray) -> np.ndarray:
    """Shares by direct projection onto the real Fourier basis {cos, sin}(2 pi k c / p) of each k."""
    p = r.shape[0]
    rc = r - r.mean(axis=0)
    c = np.arange(p)
    out = []
    for k in range(1, p // 2 + 1):
        basis = np.stack([np.cos(2 * np.pi * k * c / p), np.sin(2 * np.pi * k * c / p)], axis=1)
        q, _ = np.linalg.qr(basis[:, : 1 if 2 * k == p else 2])  # sin vanishes at k = p/2
        out.append(((q.T @ rc) ** 2).sum())
    return np.array(out) / (rc**2).sum()


@pytest.mark.parametrize("p", [53, 12, 2, 3])
def test_cycle_spectrum_equals_projection_onto_the_fourier_basis(p):
    r = np.random.default_rng(p).standard_normal((p, 7))
    shares = cycle_spectrum(r)
    assert shares.shape == (p // 2,)
    np.testing.assert_allclose(shares, _projection_shares(r), rtol=0, atol=1e-12)
    assert shares.sum() == pytest.approx(1.0, abs=1e-12)


def test_cycle_spectrum_of_planted_features_is_their_squared_amplitudes():
    ks, amps = [3, 11, _P - 20], np.array([1.0, 2.0, 0.5])  # 53 - 20 folds to frequency 20
    rng = np.random.default_rng(1)
    f = np.concatenate([_fourier_features(_P, ks, amps), np.zeros((_P, 4))], axis=1) + 5.0  # an offset
    q, _ = np.linalg.qr(rng.standard_normal((f.shape[1], f.shape[1])))
    expected = np.zeros(_P // 2)
    expected[[2, 10, 19]] = amps**2 / (amps**2).sum()
    for r in (f, f @ q.T, np.roll(f @ q.T, 17, axis=0)):  # a rotation and a relabelling change nothing
        np.testing.assert_allclose(cycle_spectrum(r), expected, rtol=0, atol=1e-12)
    mixed = _planted_centroids(_P, ks, amps=amps)  # a non-orthogonal mix moves power between the ks only
    assert cycle_spectrum(mixed)[[2, 10, 19]].sum() == pytest.approx(1.0, abs=1e-12)
    assert frequency_count(cycle_spectrum(mixed), 0.999) == 3
    assert [frequency_count(cycle_spectrum(f), s) for s in (0.75, 0.95, 0.96)] == [1, 2, 3]  # 0.76, 0.95, 1


def test_frequency_count_known_answers_and_errors():
    shares = [0.2, 0.5, 0.3]
    assert [frequency_count(shares, s) for s in (0.4, 0.5, 0.8, 0.81, 1.0)] == [1, 1, 2, 3, 3]
    assert frequency_count(shares) == 3
    with pytest.raises(ValueError, match="sum to 1"):
        frequency_count([0.2, 0.5], 0.5)
    with pytest.raises(ValueError, match="non-negative"):
        frequency_count([1.5, -0.5], 0.5)
    with pytest.raises(ValueError, match=r"share must be in \(0, 1\]"):
        frequency_count(shares, 0.0)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        frequency_count([], 0.5)
    with pytest.raises(ValueError, match="no spread"):
        cycle_spectrum(np.ones((5, 3)))
    with pytest.raises(ValueError, match="at least 2 classes"):
        cycle_spectrum(np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN/Inf"):
        cycle_spectrum(np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 1.0]]))
