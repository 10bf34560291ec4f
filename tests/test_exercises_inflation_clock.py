"""The clock chapter's checked exercises: the solutions pass, typical mistakes are caught."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from corelib.exercises import inflation_clock as ex
from corelib.experiments import inflation_clock
from exercise_support import run_solution


def test_the_epochs_solution_passes_and_agrees_with_the_chapters_clock(capsys):
    ns = run_solution("inflation_clock", "ex-clock-epochs")
    assert ex.check_epochs_to_tau(ns["epochs_to_tau"]) is True
    assert "all 5 cases pass" in capsys.readouterr().out
    params = inflation_clock.ClockParams()
    assert ns["fast"] == pytest.approx(inflation_clock.epochs_for(params, 3e-3, 2.0, 60.0), rel=1e-12)
    assert ns["slow"] == pytest.approx(inflation_clock.epochs_for(params, 1e-3, 3.0, 60.0), rel=1e-12)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda tau, lr, wd, n, b: tau / (lr * wd * (n // b)), r"ceil\(n / B\)"),
        (lambda tau, lr, wd, n, b: tau / (lr * math.ceil(n / b)), "divide by lr \\* wd"),
        (lambda tau, lr, wd, n, b: tau / (lr * wd), "that is in steps"),
    ],
)
def test_the_epochs_check_names_the_usual_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_epochs_to_tau(wrong)


def test_the_told_apart_solution_passes_and_matches_the_chapters_rule(capsys):
    told_apart = run_solution("inflation_clock", "ex-clock-apart")["told_apart"]
    assert ex.check_told_apart(told_apart) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    for a, b in (([13, 15], [16, 20]), ([20, 30], [16, 20]), ([5, 9], [1, 2])):
        rows = [SimpleNamespace(core_dim_min=min(x), core_dim_max=max(x)) for x in (a, b)]
        assert told_apart(a, b) == inflation_clock._apart(*rows)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda a, b: (sum(a) > sum(b)) - (sum(a) < sum(b)), "comparing means is not enough"),
        (lambda a, b: 1 if min(a) >= max(b) else -1 if max(a) <= min(b) else 0, "ranges that touch"),
    ],
)
def test_the_told_apart_check_catches_means_and_touching_ranges(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_told_apart(wrong)


def test_the_seeds_solution_passes_and_agrees_with_the_chapters_count(capsys):
    from corelib.experiments import inflation_clock_window
    from test_inflation_clock_window import _recorded

    seeds_for_power = run_solution("inflation_clock", "ex-clock-seeds")["seeds_for_power"]
    assert ex.check_seeds_for_power(seeds_for_power) is True
    assert "all 5 cases pass" in capsys.readouterr().out
    pw = inflation_clock_window.show(_recorded(), sample_epochs=0)
    for arm in ("restarted", "anneal_short", "anneal_long"):
        ends = [inflation_clock_window._end_values(pw, name, "core_dim") for name in (arm, "kept")]
        z_count, t_count = seeds_for_power(*ends), inflation_clock_window.seeds_needed(pw, arm)
        assert z_count <= t_count <= z_count + 2  # the chapter's t-test asks for a seed or two more


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (
            lambda a, b: max(
                2, math.ceil(2 * 2.8016**2 * ((np.var(a) + np.var(b)) / 2) / (np.mean(a) - np.mean(b)) ** 2)
            ),
            "sample variance over seeds",
        ),
        (lambda a, b: 2 * 2.8016**2 * np.var(a + b, ddof=1) / (np.mean(a) - np.mean(b)) ** 2, "round up"),
        (
            lambda a, b: max(
                2,
                math.ceil(2 * 2.8016**2 * (np.var(a, ddof=1) + np.var(b, ddof=1)) / 2 / (np.mean(a) - np.mean(b)) ** 2),
            ),
            "weight each arm's variance by its degrees of freedom",
        ),
    ],
)
def test_the_seeds_check_names_an_unpooled_spread_and_a_fraction_of_a_seed(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_seeds_for_power(wrong)
