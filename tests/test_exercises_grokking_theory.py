"""The checked exercises of the chapter "Why weight decay inflates cores, and when grokking
happens": the solutions printed in ``book/solutions/grokking_theory.md`` pass their checks and
agree with ``corelib.theory``, and the checks reject the usual mistakes with a message that names
them. (The power-law exercise's solution is tested in ``tests/test_exercises.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

from corelib.theory import grok_time as library_grok_time
from corelib.theory import psi as library_psi
from corelib.theory import psi_norm_sq_closed_form
from exercise_support import run_solution


def test_the_psi_solution_passes_its_check_and_gives_the_norm_identity(capsys):
    from corelib.exercises import grokking_theory as ex

    fn = run_solution("grokking_theory", "grok-ex-psi")["psi"]
    assert ex.check_psi(fn) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    for p in range(2, 200):
        assert np.allclose(fn(p), library_psi(p), atol=1e-14)
        assert fn(p) @ fn(p) == pytest.approx(psi_norm_sq_closed_form(p), rel=1e-12)


def _modes(p, ks):
    return 1 - np.cos(2 * np.pi * ks / p)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda p: _modes(p, np.arange(0, p // 2)), "mode 0 is the constant"),
        (lambda p: _modes(p, np.arange(1, (p - 1) // 2 + 1)), "you left out the last mode k = p/2"),
        (lambda p: _modes(p, np.arange(1, p)), "count each once"),
        (lambda p: 1 - _modes(p, np.arange(1, p // 2 + 1)), "the margin contribution is 1 minus it"),
    ],
)
def test_the_psi_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import grokking_theory as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_psi(wrong)


def test_the_grok_time_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import grokking_theory as ex

    fn = run_solution("grokking_theory", "grok-ex-tau")["grok_time"]
    assert ex.check_grok_time(fn) is True
    assert "all 7 cases pass" in capsys.readouterr().out
    p = np.arange(24, 400)
    assert np.allclose(fn(p, 2770.0, 23.0), library_grok_time(p, 2770.0, 23.0), rtol=1e-12)
    assert fn(53, 2770.0, 23.0) == pytest.approx(1576.39, abs=0.01)
    assert np.all(np.isinf(fn(np.arange(2, 24), 2770.0, 23.0)))


def _above(p, p_crit):
    return np.asarray(p, dtype=float) > p_crit


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda p, om, pc: -om * np.log(1 - pc / np.asarray(p, dtype=float)), "its log is NaN"),
        (
            lambda p, om, pc: np.where(_above(p, pc), om * np.log(np.abs(1 - pc / np.asarray(p, float))), np.inf),
            "your delays are negative",
        ),
        (lambda p, om, pc: np.where(_above(p, pc), om * pc / np.asarray(p, float), np.inf), "large-p asymptote"),
        (
            lambda p, om, pc: np.where(_above(p, pc), -om * np.log10(np.abs(1 - pc / np.asarray(p, float))), np.inf),
            "you used log10",
        ),
    ],
)
def test_the_grok_time_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import grokking_theory as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_grok_time(wrong)


def test_unfilled_stubs_are_reported_as_not_done_yet(capsys):
    from corelib.exercises import grokking_theory as ex

    def stub(*args):
        raise NotImplementedError

    assert ex.check_psi(stub) is False
    assert ex.check_grok_time(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 2
