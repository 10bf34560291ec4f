"""Checks for the exercises of the chapter "Beyond the paper: the clock of core inflation"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import Case, check_function

__all__ = ["check_epochs_to_tau", "check_spread", "check_gap_at_same_tau"]


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


class _Curves(list):
    """Curves as a check passes them: a list, shown in a message by its size, never its values."""

    def __repr__(self) -> str:
        return f"{len(self)} curves of {', '.join(str(len(c)) for c in self)} points"


def _spread_variant(xs, ys, n_grid: int = 64, *, common: bool = True, ddof: int = 1, rms: bool = True) -> float:
    """The spread of :func:`corelib.experiments.inflation_clock.spread`, or one of its usual
    misreadings: the union of the x ranges (``common=False``), the population standard deviation
    (``ddof=0``), the mean of the standard deviations (``rms=False``)."""
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(xs, ys)]
    starts, ends = [x.min() for x, _ in pairs], [x.max() for x, _ in pairs]
    lo, hi = (max(starts), min(ends)) if common else (min(starts), max(ends))
    grid = np.linspace(lo, hi, n_grid)
    stacked = np.stack([np.interp(grid, x, y) for x, y in pairs])
    if rms:
        return float(np.sqrt(np.mean(np.var(stacked, axis=0, ddof=ddof))))
    return float(np.mean(np.std(stacked, axis=0, ddof=ddof)))


def _spread_cases() -> list[Case]:
    from ..experiments.inflation_clock import spread

    rng = np.random.default_rng(7)
    x = np.linspace(0.0, 10.0, 11)
    growth = [np.linspace(0, 60, n) for n in (40, 57, 33)]
    inputs = [
        ((_Curves([x, x]), _Curves([np.sin(x), np.sin(x)])), "two curves that coincide"),
        ((_Curves([x, np.linspace(0, 10, 6)]), _Curves([3 + 0 * x, np.full(6, 7.0)])), "two constant curves"),
        (
            (_Curves([x, x + 2, np.linspace(1, 8, 15)]), _Curves([x, 2 * x, 30 - np.linspace(1, 8, 15)])),
            "three curves on different x ranges: only the overlap counts",
        ),
        (
            (_Curves(growth), _Curves([k * np.log1p(t) + rng.normal(0, 1, t.size) for k, t in zip((4, 5, 6), growth)])),
            "seed means against tau, on unequal grids",
        ),
        (
            (_Curves([x] * 4), _Curves([x**2 / 10 + k for k in range(4)]), 5),
            "four shifted curves on a coarse grid (n_grid = 5)",
        ),
        (
            (
                _Curves([np.linspace(0, 4, 5), np.linspace(-1, 6, 30)]),
                _Curves([np.array([0, 1, 4, 9, 16.0]), np.linspace(-1, 6, 30) ** 2]),
            ),
            "a curve known at a few points against a finely sampled one",
        ),
    ]
    return [Case(args, spread(*args), what) for args, what in inputs]


def check_spread(spread: Callable) -> bool:
    """Check ``spread(xs, ys, n_grid=64)``: the root mean square, over ``n_grid`` points evenly
    spaced on the x range every curve covers, of the sample standard deviation across the curves
    (each linearly interpolated), as :func:`corelib.experiments.inflation_clock.spread` measures it."""
    hints = [
        (
            lambda got, c: np.isclose(got, _spread_variant(*c.args, ddof=0)),
            "use the sample standard deviation across the curves (ddof=1).",
        ),
        (
            lambda got, c: np.isclose(got, _spread_variant(*c.args, rms=False)),
            "take the root mean square: average the variances over the grid, then take the square root.",
        ),
        (
            lambda got, c: np.isclose(got, _spread_variant(*c.args, common=False)),
            "interpolate only where every curve has values: from the largest first x to the smallest last x.",
        ),
    ]
    return check_function(spread, _spread_cases(), name="spread", hints=hints, rtol=1e-9, atol=1e-12)


def _nearest(epochs, tau_per_epoch: float, tau_end: float) -> int:
    return int(np.argmin(np.abs(tau_per_epoch * np.asarray(epochs, float) - tau_end)))


def _gap(epochs, dims, tau_per_epoch: float, tau_end: float, run_dims) -> float:
    at = np.asarray(dims, float)[_nearest(epochs, tau_per_epoch, tau_end)]
    return float(np.nanmin(at) - np.nanmax(np.asarray(run_dims, float)))


def _gap_cases() -> list[Case]:
    epochs = np.arange(0, 20001, 500)
    dims = np.round(12 + 40 * epochs[:, None] / 20000 + np.array([-3.0, 0.0, 5.0]))
    holed = dims.copy()
    holed[20, 0] = np.nan  # epoch 10000: one seed without a core
    rate = 1e-3 * 1.0 * 3  # the paper's lr x wd x steps per epoch
    inputs = [
        ((epochs, dims, rate, 61.2, [13.0, 18.0, 16.0]), "a faster run ending at tau 61.2, past the paper run's end"),
        ((epochs, dims, rate, 30.0, [14.0, 20.0, 17.0]), "a run ending at tau 30, on a paper snapshot"),
        ((epochs, dims, rate, 32.1, [14.0, 20.0, 17.0]), "tau 32.1: the nearest paper snapshot lies before it"),
        ((epochs, holed, rate, 30.0, [14.0, 20.0, 17.0]), "a paper seed without a core (NaN) there"),
        ((epochs, dims, rate, 30.0, [14.0, np.nan, 17.0]), "a seed of the faster run without a core (NaN)"),
        ((epochs, dims, rate, 12.0, [40.0, 45.0, 50.0]), "a run larger than the paper run: a negative gap"),
    ]
    return [Case(args, _gap(*args), what) for args, what in inputs]


def check_gap_at_same_tau(gap_at_same_tau: Callable) -> bool:
    """Check ``gap_at_same_tau(epochs, dims, tau_per_epoch, tau_end, run_dims)``: the smallest core
    of the paper run's seeds at its snapshot nearest ``tau_end`` (``tau = tau_per_epoch * epoch``)
    minus the largest core of the faster run's seeds, seeds without a core (NaN) left out: the
    quantity the finding ``clock.smaller_at_equal_tau`` takes the least of over the runs."""

    def means(c: Case) -> float:
        epochs, dims, rate, tau_end, run = c.args
        at = np.asarray(dims, float)[_nearest(epochs, rate, tau_end)]
        return float(np.nanmean(at) - np.nanmean(np.asarray(run, float)))

    def swapped(c: Case) -> float:
        epochs, dims, rate, tau_end, run = c.args
        at = np.asarray(dims, float)[_nearest(epochs, rate, tau_end)]
        return float(np.nanmax(at) - np.nanmin(np.asarray(run, float)))

    def at_or_after(c: Case) -> float:
        epochs, dims, rate, tau_end, run = c.args
        later = np.flatnonzero(rate * np.asarray(epochs, float) >= tau_end)
        i = int(later[0]) if later.size else len(epochs) - 1
        return float(np.nanmin(np.asarray(dims, float)[i]) - np.nanmax(np.asarray(run, float)))

    def has_nan(c: Case) -> bool:
        return bool(np.isnan(np.asarray(c.args[1], float)).any() or np.isnan(np.asarray(c.args[4], float)).any())

    hints = [
        (lambda got, c: np.isclose(got, means(c)), "compare the ranges, not the means: the smallest paper seed "
         "minus the largest seed of the faster run."),
        (lambda got, c: np.isclose(got, swapped(c)), "take the smallest core of the paper run and the largest of "
         "the faster run: the gap is positive only where the two ranges do not overlap."),
        (lambda got, c: np.isclose(got, at_or_after(c)), "take the snapshot nearest tau_end, which may lie before it."),
        (lambda got, c: np.isnan(got) and has_nan(c), "a seed without a core is NaN: leave it out (np.nanmin, "
         "np.nanmax)."),
    ]  # fmt: skip
    return check_function(gap_at_same_tau, _gap_cases(), name="gap_at_same_tau", hints=hints, rtol=1e-9)
