"""The grokking model of corelib.theory against closed forms and independent scipy solutions."""

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

from corelib import theory as T

PAPER_PRIMES = np.array([31, 43, 53, 61, 79, 89, 101], dtype=float)


# --------------------------------------------------------------------------- psi


def test_psi_entries():
    v = T.psi(7)
    assert v.shape == (3,)
    np.testing.assert_allclose(v, 1 - np.cos(2 * np.pi * np.arange(1, 4) / 7), rtol=0, atol=1e-15)
    assert np.all(v > 0)
    np.testing.assert_allclose(T.psi(4), [1.0, 2.0], atol=1e-15)  # 90 degrees, then the reflection
    assert T.psi(53).size == 26  # the paper's floor(p/2) = 26 modes


@pytest.mark.parametrize("p", list(range(3, 402, 2)))
def test_psi_norm_sq_is_three_quarters_p_for_odd_p(p):
    assert T.psi_norm_sq(p) == pytest.approx(0.75 * p, rel=1e-9)


@pytest.mark.parametrize("p", list(range(4, 403, 2)))
def test_psi_norm_sq_for_even_p_has_the_extra_reflection_mode(p):
    assert T.psi_norm_sq(p) == pytest.approx(0.75 * p + 2.0, rel=1e-9)
    # without the mode k = p/2 (psi = 2) the even case is 3p/4 - 2
    assert float(np.sum(T.psi(p)[:-1] ** 2)) == pytest.approx(0.75 * p - 2.0, rel=1e-9, abs=1e-12)


def test_closed_form_matches_the_vector_for_every_p():
    for p in range(2, 300):
        assert T.psi_norm_sq_closed_form(p) == pytest.approx(T.psi_norm_sq(p), rel=1e-9), p
    assert T.psi_norm_sq(2) == pytest.approx(4.0)


@pytest.mark.parametrize("bad", [1, 0, -5, 2.5, True, "53"])
def test_psi_rejects_bad_moduli(bad):
    with pytest.raises(ValueError, match="p must be an integer modulus"):
        T.psi(bad)


def test_psi_accepts_integral_floats_and_numpy_ints():
    np.testing.assert_array_equal(T.psi(53.0), T.psi(np.int64(53)))


# --------------------------------------------------------------------------- minimum norm


def _slsqp_min_norm(v, seed):
    """Independent of corelib: generic constrained minimisation (margin 1) from a random feasible start."""
    x0 = np.abs(np.random.default_rng(seed).standard_normal(v.size))
    x0 *= 2 / (x0 @ v)
    res = scipy.optimize.minimize(
        lambda a: a @ a,
        x0,
        jac=lambda a: 2 * a,
        method="SLSQP",
        bounds=[(0, None)] * v.size,
        constraints=[{"type": "ineq", "fun": lambda a: a @ v - 1, "jac": lambda a: v}],
        options={"ftol": 1e-14, "maxiter": 2000},
    )
    assert res.success, res.message
    return res.x


def _kkt_min_norm(v, delta):
    """Stationarity 2 a = lambda v with the margin constraint active, as one linear solve."""
    n = v.size
    kkt = np.block([[2 * np.eye(n), -v[:, None]], [v[None, :], np.zeros((1, 1))]])
    rhs = np.concatenate([np.zeros(n), [delta]])
    return np.linalg.solve(kkt, rhs)[:n]


@pytest.mark.parametrize("p, delta", [(5, 0.3), (12, 2.0), (53, 1.0), (101, 7.5), (200, 1e4)])
def test_min_norm_amplitudes_solve_the_constrained_problem(p, delta):
    a_star = T.min_norm_amplitudes(p, delta)
    v = T.psi(p)
    for seed in range(3):  # the problem is homogeneous in delta: solve it for margin 1
        np.testing.assert_allclose(a_star / delta, _slsqp_min_norm(v, seed), rtol=0, atol=1e-6)
    np.testing.assert_allclose(a_star, _kkt_min_norm(v, delta), rtol=0, atol=1e-12)
    np.testing.assert_allclose(a_star, T.min_norm_amplitudes_numeric(p, delta), rtol=0, atol=1e-6)
    assert a_star @ v == pytest.approx(delta, rel=1e-12)
    assert a_star @ a_star == pytest.approx(delta**2 / T.psi_norm_sq(p), rel=1e-12)
    # every other feasible point costs more: single modes and random directions scaled to the margin
    rng = np.random.default_rng(p)
    for a in [np.eye(v.size)[k] * delta / v[k] for k in range(v.size)] + [
        np.abs(rng.standard_normal(v.size)) for _ in range(20)
    ]:
        a = a * delta / (a @ v)
        assert a @ a >= a_star @ a_star * (1 - 1e-12)


def test_min_norm_uses_every_mode_with_participation_p_over_3():
    for p in (31, 53, 101):
        a = T.min_norm_amplitudes(p, 1.0)
        assert np.all(a > 0)
        assert T.participation_ratio(a) == pytest.approx(p / 3, rel=1e-9)
    assert T.participation_ratio([0, 0, 2.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="non-negative"):
        T.participation_ratio([1.0, -1.0])


def test_min_norm_rejects_a_non_positive_margin():
    with pytest.raises(ValueError, match="delta must be a positive"):
        T.min_norm_amplitudes(53, 0.0)


# --------------------------------------------------------------------------- margin dynamics


@pytest.mark.parametrize("omega, m_star, m0", [(1.0, 2.3, 0.0), (0.3, 10.0, 0.0), (3.0, 0.5, 1.2)])
def test_margin_ode_matches_closed_form(omega, m_star, m0):
    t = np.linspace(0, 8 / omega, 200)
    sol = scipy.integrate.solve_ivp(
        lambda _t, m: -omega * m + omega * m_star, (0, t[-1]), [m0], t_eval=t, rtol=1e-12, atol=1e-12, method="DOP853"
    )
    closed = T.margin_trajectory(t, omega, m_star, m0)
    np.testing.assert_allclose(closed, sol.y[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(T.integrate_margin(t[::-1], omega, m_star, m0), closed[::-1], rtol=0, atol=1e-6)
    if m0 == 0:
        np.testing.assert_allclose(closed, m_star * (1 - np.exp(-omega * t)), rtol=1e-14, atol=1e-14)
    assert isinstance(T.margin_trajectory(1.0, omega, m_star), float)


def test_hitting_time_of_the_ode_is_grok_time_with_the_derived_constants():
    omega, delta, kappa = 0.7, 1.3, 0.05
    Omega, p_crit = T.grok_constants(omega, delta, kappa)
    assert (Omega, p_crit) == pytest.approx((1 / omega, delta / kappa))
    for p in (27, 31, 53, 101, 1000):
        tau = T.grok_time(p, Omega, p_crit)
        assert T.hitting_time_numeric(omega, kappa * p, delta) == pytest.approx(tau, rel=1e-8)
        assert T.margin_trajectory(tau, omega, kappa * p) == pytest.approx(delta, rel=1e-12)
    with pytest.raises(ValueError, match="never reaches"):
        T.hitting_time_numeric(omega, kappa * 20, delta)  # p = 20 < p_crit = 26


# --------------------------------------------------------------------------- grokking time


def test_grok_time_is_vectorised_and_decreasing():
    tau = T.grok_time(PAPER_PRIMES, 2770.0, 23.0)
    assert tau.shape == PAPER_PRIMES.shape and np.all(np.diff(tau) < 0)
    assert isinstance(T.grok_time(53, 2770.0, 23.0), float)
    assert T.grok_time(53, 2770.0, 23.0) == pytest.approx(-2770 * np.log(1 - 23 / 53), rel=1e-14)


@pytest.mark.parametrize("p", [23.0, 10.0, [31, 43, 22]])
def test_grok_time_refuses_p_at_or_below_p_crit(p):
    with pytest.raises(ValueError, match=r"needs p > p_crit"):
        T.grok_time(p, 2770.0, 23.0)


def test_grok_time_refuses_bad_constants():
    with pytest.raises(ValueError, match="Omega must be a positive"):
        T.grok_time(53, -1.0, 23.0)
    with pytest.raises(ValueError, match="p_crit must be a positive"):
        T.grok_time(53, 1.0, 0.0)


def test_large_p_asymptote_is_inverse_p():
    Omega, p_crit = 2770.0, 23.0
    p = np.geomspace(50 * p_crit, 1e6 * p_crit, 40)
    tau = T.grok_time(p, Omega, p_crit)
    x = p_crit / p
    ratio = tau / (Omega * p_crit / p)
    np.testing.assert_array_less(np.abs(ratio - 1 - x / 2), x**2)  # -log(1-x)/x = 1 + x/2 + x^2/3 + ...
    assert ratio[-1] == pytest.approx(1.0, abs=1e-6)
    far = T.fit_power_law(p[-10:], tau[-10:])
    assert far.exponent == pytest.approx(-1.0, abs=1e-5)
    assert far.prefactor == pytest.approx(Omega * p_crit, rel=1e-4)
    # near p_crit the curve is steeper than 1/p: a power law over the paper's primes is not -1
    near = T.fit_power_law(PAPER_PRIMES, T.grok_time(PAPER_PRIMES, Omega, p_crit))
    assert near.exponent < -1.2


def test_tau_is_inverse_in_weight_decay():
    omegas = np.array([0.3, 0.5, 1, 1.5, 2, 3])
    tau = [T.grok_time(53, *T.grok_constants(w, 1.0, 1 / 23)) for w in omegas]
    fit = T.fit_power_law(omegas, tau)
    assert fit.exponent == pytest.approx(-1.0, abs=1e-12)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)


# --------------------------------------------------------------------------- fits


@pytest.mark.parametrize(
    "Omega, p_crit, p",
    [
        (2770.0, 23.0, PAPER_PRIMES),
        (1000.0, 5.5, np.arange(6.0, 40.0, 3.0)),
        (37.0, 90.0, np.array([91.0, 95.0, 120.0, 200.0, 500.0])),
    ],
)
def test_fit_grok_time_recovers_planted_constants(Omega, p_crit, p):
    fit = T.fit_grok_time(p, T.grok_time(p, Omega, p_crit))
    assert fit.Omega == pytest.approx(Omega, rel=1e-6)
    assert fit.p_crit == pytest.approx(p_crit, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-10)
    assert fit.Omega_se < 1e-6 * Omega and fit.p_crit_se < 1e-6 * p_crit
    np.testing.assert_allclose(fit.predict(p), T.grok_time(p, Omega, p_crit), rtol=1e-6)


def test_fit_grok_time_with_noise_and_seeds():
    rng = np.random.default_rng(0)
    p = np.repeat(PAPER_PRIMES, 12)
    truth = T.grok_time(p, 2770.0, 23.0)
    tau = truth * (1 + 0.05 * rng.standard_normal(p.size))
    fit = T.fit_grok_time(p, tau)
    assert abs(fit.Omega - 2770) < 4 * fit.Omega_se and abs(fit.p_crit - 23) < 4 * fit.p_crit_se
    assert 0 < fit.p_crit_se < 2 and fit.r2 > 0.95
    # per-point standard deviations are accepted and change the weights
    fit_w = T.fit_grok_time(p, tau, sigma=0.05 * truth)
    assert fit_w.Omega != fit.Omega and abs(fit_w.p_crit - 23) < 4 * fit_w.p_crit_se


def test_fit_grok_time_input_errors():
    with pytest.raises(ValueError, match="at least 3"):
        T.fit_grok_time([31, 43], [100, 50])
    with pytest.raises(ValueError, match="at least 3"):
        T.fit_grok_time([31, 31, 31], [100, 90, 110])
    with pytest.raises(ValueError, match="tau must be strictly positive"):
        T.fit_grok_time([31, 43, 53], [100, 0, 10])
    with pytest.raises(ValueError, match="same length"):
        T.fit_grok_time([31, 43, 53], [100, 50])
    with pytest.raises(ValueError, match="NaN"):
        T.fit_grok_time([31, 43, 53], [100, np.nan, 10])


def test_fit_power_law_recovers_planted_exponent():
    x = np.array([0.3, 0.5, 1, 1.5, 2, 3])
    fit = T.fit_power_law(x, 5e3 * x**-1.02)
    assert fit.exponent == pytest.approx(-1.02, rel=1e-12)
    assert fit.prefactor == pytest.approx(5e3, rel=1e-12)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(1)
    x = np.geomspace(1, 100, 50)
    noisy = T.fit_power_law(x, 2.0 * x**0.5 * np.exp(0.05 * rng.standard_normal(50)))
    assert abs(noisy.exponent - 0.5) < 4 * noisy.exponent_se and noisy.exponent_se < 0.01
    assert np.isnan(T.fit_power_law([1, 2], [1, 4]).exponent_se)


@pytest.mark.parametrize("x, y", [([1, 0, 2], [1, 2, 3]), ([1, 2, 3], [1, -2, 3])])
def test_fit_power_law_rejects_non_positive_values(x, y):
    with pytest.raises(ValueError, match="strictly positive"):
        T.fit_power_law(x, y)
