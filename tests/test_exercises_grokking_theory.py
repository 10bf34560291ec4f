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


def test_the_amplitudes_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import grokking_theory as ex
    from corelib.theory import min_norm_amplitudes, participation_ratio

    ns = run_solution("grokking_theory", "grok-ex-amplitudes")
    assert ex.check_min_norm_amplitudes(ns["min_norm_amplitudes"]) is True
    assert "all 9 cases pass" in capsys.readouterr().out
    for p in range(2, 120):
        alpha = ns["min_norm_amplitudes"](p, 0.8)
        assert np.allclose(alpha, min_norm_amplitudes(p, 0.8), rtol=1e-12)
        assert ns["participation_ratio"](alpha) == pytest.approx(participation_ratio(alpha))
    assert ns["participation_ratio"](ns["min_norm_amplitudes"](53, 1.0)) == pytest.approx(53 / 3)


def _best_mode_only(p, delta):
    v = library_psi(p)
    out = np.zeros_like(v)
    out[np.argmax(v)] = delta / v.max()
    return out


def _without_the_reflection(p, delta):
    v = _modes(p, np.arange(1, (p - 1) // 2 + 1))  # for even p, the mode k = p/2 is left out
    return delta * v / (v @ v)


@pytest.mark.parametrize(
    ("wrong", "says", "not_says"),
    [
        (lambda p, d: d * library_psi(p) / np.linalg.norm(library_psi(p)), "divide by its square", "3p/4"),
        (lambda p, d: library_psi(p) / (library_psi(p) @ library_psi(p)), "proportional to delta", "square"),
        (_best_mode_only, "all the weight on the best mode", "is not delta"),
        (lambda p, d: np.full(p // 2, d / library_psi(p).sum()), "equal amplitudes", "is not delta"),
        (lambda p, d: d * library_psi(p) / (3 * p / 4), "holds only for odd p", "square"),
        (lambda p, d: d * library_psi(p), "is not delta", "best mode"),
        (_without_the_reflection, "one amplitude per mode", "best mode"),
    ],
)
def test_the_amplitudes_check_names_each_typical_mistake(wrong, says, not_says):
    from corelib.exercises import grokking_theory as ex

    with pytest.raises(AssertionError, match=says) as err:
        ex.check_min_norm_amplitudes(wrong)
    assert not_says not in str(err.value)


def test_the_amplitudes_stub_is_reported_as_not_done_yet(capsys):
    from corelib.exercises import grokking_theory as ex

    def stub(p, delta):
        raise NotImplementedError

    assert ex.check_min_norm_amplitudes(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
