"""Checks for the exercises of the chapter "Beyond the paper: the interpretability window"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from ..engine import StackConfig
from . import Case, check_function

__all__ = ["check_told_apart", "check_decay_in_epoch", "check_seeds_for_power"]


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

    def touching(c: Case) -> int:  # ranges that touch taken as apart (>= and <=)
        a, b = c.args
        return 1 if min(a) >= max(b) else -1 if max(a) <= min(b) else 0

    hints = [
        (
            lambda got, c: got == np.sign(np.mean(c.args[0]) - np.mean(c.args[1])) and got != touching(c),
            "comparing means is not enough "
            "with three seeds: compare the ranges (smallest of one against largest of the other).",
        ),
        (
            lambda got, c: got == touching(c),
            "ranges that touch share a value, so they are not apart: compare with > and <, not >= and <=.",
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


def _decay(done: int, branch: int, ramp: int, wd: float) -> float:
    """The weight decay of the epoch after ``done`` epochs of an arm annealed from ``wd`` at
    ``branch`` to zero over ``ramp`` epochs, as the training engine schedules it
    (:meth:`corelib.engine.StackConfig.decay_at`); ``ramp`` 0: zero from the branch on."""
    if ramp == 0:
        return wd if done < branch else 0.0
    knots = ((branch, wd), (branch + ramp, 0.0))
    return StackConfig(epochs=branch + ramp, decay_knots=knots).decay_at(done, 1)[0]


def check_decay_in_epoch(decay_in_epoch: Callable) -> bool:
    """Check ``decay_in_epoch(done, branch, ramp, wd)``: the weight decay of the epoch after
    ``done`` epochs of an arm whose decay falls linearly from ``wd`` at ``branch`` to zero over
    ``ramp`` epochs (full in the first epoch after the branch; ``ramp`` 0: removed at once)."""
    inputs = [
        ((900, 800, 500, 1.0), "100 epochs into the paper clock's short ramp"),
        ((800, 800, 500, 1.0), "the first epoch after the branch"),
        ((1299, 800, 500, 1.0), "the last epoch of the ramp"),
        ((1300, 800, 500, 1.0), "the end of the ramp"),
        ((5000, 800, 2000, 1.0), "long after the ramp"),
        ((100, 800, 500, 1.0), "before the branch"),
        ((800, 800, 0, 1.0), "removed at once (ramp 0): the first epoch after the branch"),
        ((799, 800, 0, 2.0), "removed at once: the last epoch before the branch"),
        ((150, 100, 83, 2.0), "a fast clock's ramp of 83 epochs"),
    ]
    cases = [Case(args, _decay(*args), what) for args, what in inputs]

    def one_early(got, c: Case) -> bool:
        done, branch, ramp, wd = c.args
        return ramp > 0 and done >= branch and np.isclose(got, wd * min(1.0, max(0.0, 1 - (done - branch + 1) / ramp)))

    hints = [
        (one_early, "the first epoch after the branch (done = branch) still trains at the full decay: count the "
         "epochs done since the branch."),
        (lambda got, c: got < 0, "after the ramp the decay stays at zero; it does not turn negative."),
        (lambda got, c: c.args[2] == 0 and c.args[0] >= c.args[1] and np.isclose(got, c.args[3]),
         "with ramp = 0 the decay is removed at once: the first epoch after the branch already trains without it."),
        (lambda got, c: c.args[0] < c.args[1] and not np.isclose(got, c.args[3]),
         "before the branch the run keeps its full decay."),
    ]  # fmt: skip
    return check_function(decay_in_epoch, cases, name="decay_in_epoch", hints=hints, rtol=1e-9, atol=1e-12)
