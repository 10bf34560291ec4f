"""Checks for the exercises of the chapter "Beyond the paper: the clock of core inflation"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from . import Case, check_function

__all__ = ["check_epochs_to_tau", "check_told_apart", "check_seeds_for_power"]


def _epochs(tau: float, lr: float, wd: float, n_train: int, batch_size: int) -> float:
    steps = -(-n_train // batch_size)  # the last, partial batch is a step too
    return tau / (lr * wd * steps)


def check_epochs_to_tau(epochs_to_tau: Callable) -> bool:
    """Check ``epochs_to_tau(tau, lr, wd, n_train, batch_size)``: the epochs a run needs to reach
    the rescaled time ``tau = lr * wd * optimizer steps``, batches of ``batch_size`` keeping the
    last partial one."""
    params = [
        (60.0, 1e-3, 1.0, 1404, 512, "the paper's run to epoch 20 000"),
        (60.0, 3e-3, 2.0, 1404, 512, "six times the paper's lr x wd"),
        (12.0, 2e-3, 3.0, 1404, 512, "the window's horizon on a fast clock"),
        (1.0, 1e-3, 1.0, 1024, 512, "batches that divide the training set"),
        (5.0, 1e-2, 0.5, 1404, 2000, "one batch holds everything"),
    ]
    cases = [Case(args[:5], _epochs(*args[:5]), args[5]) for args in params]

    def floor_steps(c: Case) -> float:
        tau, lr, wd, n, b = c.args
        return tau / (lr * wd * max(1, n // b))

    hints = [
        (lambda got, c: np.isclose(got, floor_steps(c)), "count the last, partial batch as a step: ceil(n / B)."),
        (lambda got, c: np.isclose(got, c.expected * c.args[2]), "tau counts weight decay too: divide by lr * wd."),
        (
            lambda got, c: np.isclose(got, c.args[0] / (c.args[1] * c.args[2])),
            "that is in steps; divide by the steps per epoch.",
        ),
    ]
    return check_function(epochs_to_tau, cases, name="epochs_to_tau", hints=hints, rtol=1e-9)


def _apart(a, b) -> int:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return 1 if a.min() > b.max() else -1 if a.max() < b.min() else 0


def check_told_apart(told_apart: Callable) -> bool:
    """Check ``told_apart(a, b)``: +1 when every seed's value in ``a`` exceeds every one in ``b``,
    -1 when every one is below, 0 when the seed ranges overlap (or touch)."""
    pairs = [
        ([31.0, 22.0, 37.0], [14.0, 13.0, 15.0], "the fast clock's annealed arm against the kept one"),
        ([13.0, 15.0, 14.0], [18.0, 20.0, 18.0], "kept against restarted"),
        ([17.0, 71.0, 67.0], [13.0, 15.0, 14.0], "a wide range that still clears the other"),
        ([12.0, 16.0, 14.0], [15.0, 18.0, 20.0], "overlapping ranges"),
        ([15.0, 16.0], [14.0, 15.0], "ranges that touch at 15"),
        ([5.0], [5.0], "one seed each, equal"),
    ]
    cases = [Case((a, b), _apart(a, b), what) for a, b, what in pairs]
    hints = [
        (
            lambda got, c: got == np.sign(np.mean(c.args[0]) - np.mean(c.args[1])),
            "comparing means is not enough "
            "with three seeds: compare the ranges (smallest of one against largest of the other).",
        ),
    ]
    return check_function(told_apart, cases, name="told_apart", hints=hints)


def _power(d: float, s: float, n: int) -> float:
    """The power of a two-sided z-test at the 5 % level of a difference ``d`` of two means of ``n``
    seeds each with spread ``s`` (the far tail left out, as the normal approximation does)."""
    return float(stats.norm.cdf(abs(d) / (s * np.sqrt(2 / n)) - stats.norm.ppf(0.975)))


def _seeds_by_search(a, b) -> int:
    """The fewest seeds per arm (at least 2) with 80 % power, found by trying n = 2, 3, ...: an
    independent way to the closed form the exercise asks for."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a.mean() - b.mean()
    s = np.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    n = 2
    while _power(d, s, n) < 0.8:
        n += 1
    return n


def check_seeds_for_power(seeds_for_power: Callable) -> bool:
    """Check ``seeds_for_power(a, b)``: the seeds per arm a two-sided z-test at the 5 % level needs
    to tell the means of ``a`` and ``b`` (per-seed values, with different means) apart with 80 %
    power, taking their difference and pooled spread as measured; at least 2."""
    pairs = [
        ([31.0, 22.0, 37.0], [14.0, 13.0, 15.0], "the fast clock's annealed arm against the kept one"),
        ([17.0, 71.0, 67.0], [13.0, 15.0, 14.0], "a wide range far from the other"),
        ([13.0, 15.0, 14.0], [18.0, 20.0, 18.0], "kept against restarted"),
        ([40.0, 52.0, 61.0], [36.0, 38.0, 42.0], "a small difference, a wide spread"),
        ([12.0, 16.0, 14.0, 15.0], [15.0, 18.0, 20.0], "four seeds against three"),
    ]
    cases = [Case((a, b), _seeds_by_search(a, b), what) for a, b, what in pairs]

    def without_pooling(c: Case) -> int:
        a, b = (np.asarray(x, float) for x in c.args)
        z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
        return max(2, int(np.ceil(2 * z**2 * (a.var() + b.var()) / 2 / (a.mean() - b.mean()) ** 2)))

    def unweighted(c: Case) -> int:
        a, b = (np.asarray(x, float) for x in c.args)
        z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
        pooled = (a.var(ddof=1) + b.var(ddof=1)) / 2
        return max(2, int(np.ceil(2 * z**2 * pooled / (a.mean() - b.mean()) ** 2)))

    hints = [
        (
            lambda got, c: got == without_pooling(c),
            "use the sample variance over seeds (ddof=1), pooled over both arms.",
        ),
        (lambda got, c: isinstance(got, float) and not float(got).is_integer(), "round up to a whole seed."),
        (
            lambda got, c: got == unweighted(c),
            "weight each arm's variance by its degrees of freedom, n - 1, when the arms have different seeds.",
        ),
    ]
    return check_function(seeds_for_power, cases, name="seeds_for_power", hints=hints, rtol=0, atol=0)
