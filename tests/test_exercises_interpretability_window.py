"""The window chapter's checked exercises: the solutions pass, typical mistakes are caught."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from corelib.exercises import interpretability_window as ex
from corelib.experiments import inflation_clock_pairs
from exercise_support import run_solution


def test_the_told_apart_solution_passes_and_matches_the_chapters_rule(capsys):
    told_apart = run_solution("interpretability_window", "ex-window-apart")["told_apart"]
    assert ex.check_told_apart(told_apart) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    for a, b in (([13, 15], [16, 20]), ([20, 30], [16, 20]), ([5, 9], [1, 2])):
        rows = [SimpleNamespace(core_dim_min=min(x), core_dim_max=max(x)) for x in (a, b)]
        assert told_apart(a, b) == inflation_clock_pairs.apart(*rows)


@pytest.mark.parametrize(
    ("wrong", "says", "not_says"),
    [
        (lambda a, b: (sum(a) > sum(b)) - (sum(a) < sum(b)), "comparing means is not enough", ">= and <="),
        (
            lambda a, b: 1 if min(a) >= max(b) else -1 if max(a) <= min(b) else 0,
            "ranges that touch share a value",
            "comparing means",
        ),
    ],
)
def test_the_told_apart_check_catches_means_and_touching_ranges(wrong, says, not_says):
    with pytest.raises(AssertionError, match=says) as caught:
        ex.check_told_apart(wrong)
    assert not_says not in str(caught.value)  # no cause the code did not have


def test_the_seeds_solution_passes_and_agrees_with_the_chapters_count(capsys):
    from corelib.experiments import inflation_clock_window
    from test_inflation_clock_window import _recorded

    seeds_for_power = run_solution("interpretability_window", "ex-window-seeds")["seeds_for_power"]
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


def test_the_decay_solution_passes_and_follows_the_engines_schedule(capsys):
    from corelib.experiments import modular_runs

    decay_in_epoch = run_solution("interpretability_window", "ex-window-decay")["decay_in_epoch"]
    assert ex.check_decay_in_epoch(decay_in_epoch) is True
    assert "all 9 cases pass" in capsys.readouterr().out
    # the annealed arm of the window's own settings, as the engine trains it after the branch
    arm = modular_runs.ModularParams(branch_epoch=800, branch_weight_decay=0.0, branch_anneal_epochs=500)
    schedule = arm.stack_config("no_wd", 2000)
    for done in (800, 801, 1000, 1299, 1300, 1600):
        assert decay_in_epoch(done, 800, 500, arm.weight_decay) == pytest.approx(schedule.decay_at(done, 1)[0])
    assert decay_in_epoch(900, 800, 500, 1.0) == pytest.approx(0.8)  # the expected result in words


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (
            lambda done, b, r, wd: (
                wd if r == 0 and done <= b else wd * min(1.0, max(0.0, 1 - (done - b + 1) / max(r, 1)))
            ),
            "still trains at the full decay",
        ),
        (
            lambda done, b, r, wd: wd if done <= b else (0.0 if r == 0 else wd * min(1.0, 1 - (done - b) / r)),
            "does not turn negative",
        ),
        (
            lambda done, b, r, wd: wd if done <= b else 0.0 if r == 0 else wd * max(0.0, 1 - (done - b) / r),
            "removed at once",
        ),
        (
            lambda done, b, r, wd: 0.0 if done < b or r == 0 else wd * min(1.0, max(0.0, 1 - (done - b) / r)),
            "keeps its full decay",
        ),
    ],
)
def test_the_decay_check_names_the_usual_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says) as caught:
        ex.check_decay_in_epoch(wrong)
    assert str(caught.value).count("Hint:") == 1  # that mistake alone


def test_a_ramp_of_zero_that_divides_is_reported_with_its_case():
    with pytest.raises(AssertionError, match=r"(?s)ZeroDivisionError.*removed at once \(ramp 0\)"):
        ex.check_decay_in_epoch(lambda done, b, r, wd: wd * min(1.0, max(0.0, 1 - (done - b) / r)))
