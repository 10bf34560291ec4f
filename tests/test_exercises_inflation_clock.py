"""The clock chapter's checked exercises: the solutions pass, typical mistakes are caught."""

from __future__ import annotations

import math

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


def test_the_spread_solution_passes_and_gives_the_chapters_ratio(capsys):
    spread = run_solution("inflation_clock", "ex-clock-spread")["spread"]
    assert ex.check_spread(spread) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(3)
    for _ in range(5):  # the library's measure on random curves
        xs = [np.sort(rng.uniform(0, 10, n)) for n in rng.integers(3, 30, size=rng.integers(2, 5))]
        ys = [rng.normal(size=x.size) for x in xs]
        assert spread(xs, ys) == pytest.approx(inflation_clock.spread(xs, ys), rel=1e-9, nan_ok=True)


def _spread_of(ddof=1, rms=True, common=True):
    def spread(xs, ys, n_grid=64):
        starts, ends = [min(x) for x in xs], [max(x) for x in xs]
        lo, hi = (max(starts), min(ends)) if common else (min(starts), max(ends))
        grid = np.linspace(lo, hi, n_grid)
        stacked = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys)])
        if rms:
            return float(np.sqrt(np.mean(np.var(stacked, axis=0, ddof=ddof))))
        return float(np.mean(np.std(stacked, axis=0, ddof=ddof)))

    return spread


@pytest.mark.parametrize(
    ("wrong", "says", "not_says"),
    [
        (_spread_of(ddof=0), r"sample standard deviation across the curves \(ddof=1\)", "root mean square"),
        (_spread_of(rms=False), "take the root mean square", "ddof=1"),
        (_spread_of(common=False), "only where every curve has values", "ddof=1"),
    ],
)
def test_the_spread_check_names_the_usual_mistakes_and_only_those(wrong, says, not_says):
    with pytest.raises(AssertionError, match=says) as caught:
        ex.check_spread(wrong)
    message = str(caught.value)
    assert not_says not in message
    assert "array(" not in message and len(message.splitlines()) <= 4  # a few lines, never the curves' values


def test_the_gap_solution_passes_and_gives_the_chapters_finding():
    from acebook.runner import chapter_parameters
    from corelib.experiments import modular_runs, paper_scale

    gap_at_same_tau = run_solution("inflation_clock", "ex-clock-same-tau")["gap_at_same_tau"]
    assert ex.check_gap_at_same_tau(gap_at_same_tau) is True
    params = inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))
    record, recorded = paper_scale.recorded_clock(params), paper_scale.recorded_inflation()
    if record is None or recorded is None:
        pytest.skip("no recorded book-profile clock run in this checkout")
    clock = inflation_clock.clock_summary(params, record["runs"], recorded)
    paper = recorded["arms"]["wd"]
    epochs, dims = modular_runs.epochs_of(paper), modular_runs.series(paper, "core_dim")
    rate = recorded["params"].lr * recorded["params"].weight_decay * inflation_clock.steps_per_epoch(recorded["params"])
    gaps = [
        gap_at_same_tau(epochs, dims, rate, run.tau_end, [run.core_dim_min, run.core_dim_max])
        for label, run in clock.pairs.items()
        if label in clock.recorded.at_pair_ends
    ]
    assert min(gaps) == pytest.approx(inflation_clock.clock_finding_values(clock)["clock.smaller_at_equal_tau"])


def _gap_of(kind):
    def gap(epochs, dims, tau_per_epoch, tau_end, run_dims):
        taus = tau_per_epoch * np.asarray(epochs, float)
        i = int(np.argmin(np.abs(taus - tau_end)))
        if kind == "after":
            later = np.flatnonzero(taus >= tau_end)
            i = int(later[0]) if later.size else len(taus) - 1
        paper, run = np.asarray(dims, float)[i], np.asarray(run_dims, float)
        if kind == "means":
            return float(np.nanmean(paper) - np.nanmean(run))
        if kind == "swapped":
            return float(np.nanmax(paper) - np.nanmin(run))
        if kind == "nan":
            return float(np.min(paper) - np.max(run))
        return float(np.nanmin(paper) - np.nanmax(run))

    return gap


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("means", "compare the ranges, not the means"),
        ("swapped", "take the smallest core of the paper run and the largest"),
        ("after", "which may lie before it"),
        ("nan", r"leave it out \(np.nanmin"),
    ],
)
def test_the_gap_check_names_the_usual_mistakes(kind, says):
    with pytest.raises(AssertionError, match=says) as caught:
        ex.check_gap_at_same_tau(_gap_of(kind))
    assert "array(" not in str(caught.value)  # never the paper run's snapshots
    assert str(caught.value).count("Hint:") == 1  # that mistake alone


def test_a_gap_that_raises_shows_the_paper_run_by_its_shape():
    def broken(epochs, dims, tau_per_epoch, tau_end, run_dims):
        raise ValueError("no")

    with pytest.raises(AssertionError, match=r"a \(41, 3\) array") as caught:
        ex.check_gap_at_same_tau(broken)
    assert "array(" not in str(caught.value)
