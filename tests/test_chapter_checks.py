"""The numerical checks the "How ACE works" and "Grokking theory" chapters show, held to the
tolerances the chapters quote (the chapters report the differences; these tests own the limits)."""

import pytest

from corelib.experiments import ace_method
from corelib.experiments import grokking_theory as theory
from corelib.theory import psi


def test_ace_from_gramians_is_balanced_truncation():
    lti = ace_method.lti_comparison(ace_method.AceMethodParams())
    assert lti.hankel_rel_err <= ace_method.HANKEL_REL_TOL
    assert max(lti.angle_scipy, lti.angle_corelib) < ace_method.ANGLE_TOL_RAD


@pytest.fixture(scope="module")
def params():
    return theory.TheoryParams()


def test_psi_norm_identity(params):
    norms = theory.norm_identity(params)
    assert max(norms.rel_err_odd, norms.rel_err_even) <= theory.NORM_REL_TOL


def test_min_norm_amplitudes_match_slsqp_and_reach_the_margin(params):
    amplitudes = theory.amplitudes(params)
    assert amplitudes.error <= theory.AMPLITUDE_TOL
    assert abs(amplitudes.closed @ psi(params.p) - params.delta) <= 1e-12 * params.delta


def test_margin_and_hitting_time_match_solve_ivp(params):
    assert theory.margins(params).error <= theory.ODE_TOL
    assert theory.grokking_delays(params).error <= theory.ODE_TOL


def test_sweep_fits_recover_the_model(params):
    fits = theory.sweep_fits(theory.grokking_delays(params))
    assert abs(fits.omega_fit.exponent + 1) <= 1e-9  # tau proportional to 1/omega
    assert fits.fit_rel_err <= theory.FIT_REL_TOL


def test_too_few_primes_above_p_crit_is_an_error():
    with pytest.raises(ValueError, match="3 sweep primes"):
        theory.grokking_delays(theory.TheoryParams(kappa=0.001))
