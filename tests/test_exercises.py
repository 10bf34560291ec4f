"""The exercises: their solutions run as printed, and their checks accept them and reject wrong answers.

A chapter's exercise shows a stub and a check (``corelib.exercises.<chapter>``); its solution is
out of sight in Jupyter, in ``book/solutions/<chapter>.md`` between ``<!-- label -->`` and
``<!-- end label -->``, and the site shows it in a dropdown with ``{include}``. These tests cut
the solution's Python blocks out of that file (so the book can never show a solution that does
not run), check what it computes against an independent answer, and run each check on the
solution (accepted) and on typical wrong answers (rejected, with a message that helps).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from exercise_support import run_solution, solution_code


def test_the_chain_spectrum_solution_passes_its_check_and_matches_the_chain(capsys):
    from corelib.exercises import markov_chain as ex
    from corelib.tasks.markov import chain_eigenvalues, transition_matrix

    fn = run_solution("markov_chain", "ex-markov-spectrum")["chain_spectrum"]
    assert np.allclose(
        np.sort_complex(fn(0.6, 0.4, 5)), np.sort_complex(chain_eigenvalues(transition_matrix(0.6, 0.4, 5))), atol=1e-12
    )
    assert ex.check_chain_spectrum(fn) is True
    assert "all 5 cases pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda a, b, n: a + b * np.exp(2j * np.pi * np.arange(n) / n), "leave out the trivial one"),
        (lambda a, b, n: b * np.exp(2j * np.pi * np.arange(1, n) / n), "add alpha"),
        (lambda a, b, n: a + b * np.cos(2 * np.pi * np.arange(1, n) / n), "is wrong on case"),
    ],
)
def test_the_chain_spectrum_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import markov_chain as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_chain_spectrum(wrong)


def test_the_oracle_solution_passes_its_check_and_matches_a_simulation(capsys):
    from corelib.exercises import markov_chain as ex
    from corelib.tasks.markov import sample_sequences, transition_matrix

    fn = run_solution("markov_chain", "ex-markov-oracle")["oracle_r2"]
    assert ex.check_oracle_r2(fn) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    t = transition_matrix()
    seq = sample_sequences(t, 2000, 64, seed=1)  # the ceiling, estimated by simulation
    y, pred = np.eye(4)[seq[:, 1:].ravel()], t[seq[:, :-1].ravel()]
    r2 = 1 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)
    assert abs(r2.mean() - fn(t)) < 0.01


def _uniform_pi_oracle(t):
    t = np.asarray(t)
    pi = np.full(len(t), 1 / len(t))
    return 1 - np.mean((pi[:, None] * t * (1 - t)).sum(0) / (pi * (1 - pi)))


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_uniform_pi_oracle, "weight the rows by the stationary distribution"),
        (lambda t: 1 - _uniform_pi_oracle(t), "1 minus it"),
        (lambda t: "0.5", "is wrong on case 1"),
    ],
)
def test_the_oracle_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import markov_chain as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_oracle_r2(wrong)


def test_a_stub_is_reported_as_not_done_yet(capsys):
    from corelib.exercises import markov_chain as ex

    def stub(T):
        raise NotImplementedError

    assert ex.check_oracle_r2(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_an_error_in_the_students_code_names_the_case():
    from corelib.exercises import markov_chain as ex

    with pytest.raises(AssertionError, match=r"(?s)raised ZeroDivisionError.*case 1 \(the book's chain\)"):
        ex.check_oracle_r2(lambda t: 1 / 0)


def test_planted_clock_has_one_mode_per_frequency_pair():
    ns = run_solution("modular_addition", "ex-modular-modes")
    assert ns["planted_modes"]().tolist() == [3]  # 50 = 53 - 3: the same rotation
    assert ns["planted_modes"](freqs=(3, 7)).tolist() == [3, 7]
    assert ns["planted_modes"](freqs=(5,)).tolist() == [5]


def test_redundant_copies_raise_the_necessary_rank_only():
    ns = run_solution("core_inflation", "ex-inflation-ranks")
    assert [ns["redundancy_ranks"](m) for m in range(1, 6)] == [(m, 1) for m in range(1, 6)]


def test_a_rectified_rotation_needs_its_first_harmonic_too():
    ns = run_solution("core_inflation", "ex-inflation-harmonics")
    assert ns["n"] == 2 and ns["largest"].tolist() == [3, 6]
    var = 0.5 - 2 / math.pi**2  # sum of the squared Fourier coefficients of max(0, cos), without the mean
    assert ns["shares"][2] == pytest.approx(0.25 / var, abs=2e-3)  # the sampling aliases a little
    assert ns["shares"][5] == pytest.approx((2 / (3 * math.pi)) ** 2 / var, abs=2e-3)
    assert ns["rectified_spectrum"](k=5, p=61).argmax() + 1 == 5


def test_power_law_exponent_of_the_ode_curve():
    ns = run_solution("grokking_theory", "grok-ex-exponent")
    # local slope -(1 + x/2 + ...): steeper than -1 near p_crit, -1 far from it
    assert ns["near_exponent"] < -1.3
    assert abs(ns["far_exponent"] + 1) < 0.05
    x = 23 / np.geomspace(300, 3000, 10)
    assert ns["far_exponent"] == pytest.approx(-np.mean(1 + x / 2), abs=0.01)


def test_a_missing_solution_is_reported():
    with pytest.raises(AssertionError, match="no solution 'nope'"):
        solution_code("markov_chain", "nope")
