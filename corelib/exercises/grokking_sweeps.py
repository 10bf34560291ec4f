"""Checks for the exercises of the chapter "Grokking sweeps: how the delay scales with weight decay
and modulus"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tasks.sweeps import min_correct
from ..theory import fit_power_law, grok_time
from . import Case, check_function

__all__ = [
    "check_early_exit",
    "check_grok_times",
    "check_power_law",
    "early_exit_reference",
    "example_answers",
    "example_curves",
    "grok_times_of_counts",
]

NEVER = -1
"""How a time that was never reached (None) is shown in the checks' messages."""


def _curve(n: int, t_rise: float, width: float, steps: int, rng: np.random.Generator, floor: float) -> np.ndarray:
    """Counts of correct answers out of ``n`` after steps 1..steps: a noisy logistic rise from
    ``floor`` to 1 around step ``t_rise``."""
    t = np.arange(1, steps + 1)
    mean = floor + (1 - floor) / (1 + np.exp(-(t - t_rise) / width))
    return rng.binomial(n, np.clip(mean, 0, 1))


def example_curves(
    seed: int = 0, steps: int = 3000, n_train: int = 1404, n_test: int = 1405
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic per-step accuracies of one seed at p = 53 (1404 training and 1405 test pairs):
    training accuracy rises around step 400, test accuracy around step 1700, both noisy.
    Element ``k`` is the accuracy after optimizer step ``k + 1``."""
    rng = np.random.default_rng(seed)
    train = _curve(n_train, 400, 40, steps, rng, 1 / 53) / n_train
    test = _curve(n_test, 1700, 120, steps, rng, 1 / 53) / n_test
    return train, test


def grok_times_of_counts(
    train_correct: np.ndarray, n_train: int, test_correct: np.ndarray, n_test: int, threshold: float = 0.99
) -> tuple[int | None, int | None, int | None]:
    """(t_mem, t_gen, delay) from counts of correct answers after steps 1, 2, ...: the first step
    whose count reaches :func:`corelib.tasks.sweeps.min_correct`, and the delay only when both times
    exist and ``t_gen > t_mem`` (:func:`corelib.tasks.sweeps.usable_delays`)."""

    def first(counts: np.ndarray, n: int) -> int | None:
        hit = np.flatnonzero(np.asarray(counts) >= min_correct(n, threshold))
        return int(hit[0]) + 1 if hit.size else None

    t_mem, t_gen = first(train_correct, n_train), first(test_correct, n_test)
    delay = t_gen - t_mem if t_mem is not None and t_gen is not None and t_gen > t_mem else None
    return t_mem, t_gen, delay


def _grok_cases() -> list[Case]:
    rng = np.random.default_rng(7)
    train, test = example_curves()
    rows = [(np.rint(train * 1404), 1404, np.rint(test * 1405), 1405, "the chapter's example curves at p = 53")]
    for k, (n_tr, n_te, t1, t2) in enumerate([(684, 685, 150, 900), (1860, 1861, 800, 2400)]):
        tr, te = _curve(n_tr, t1, 30, 3000, rng, 0.05), _curve(n_te, t2, 90, 3000, rng, 0.05)
        rows.append((tr, n_tr, te, n_te, f"random curves {k + 1} ({n_tr} training, {n_te} test pairs)"))
    rows += [
        ([90, 97, 99, 100, 100], 100, [10, 50, 98, 99, 100], 100, "accuracy exactly 0.99 at a step"),
        ([50, 99, 97, 99, 100, 100], 100, [10, 20, 60, 99, 95, 100], 100, "accuracies that dip again"),
        ([50, 99, 100, 100], 100, [10, 20, 40, 60], 100, "a seed that never generalised"),
        ([10, 50, 99, 100], 100, [99, 99, 99, 100], 100, "generalised before it memorised"),
        ([10, 99, 100], 100, [10, 99, 100], 100, "memorised and generalised on the same step"),
        ([100, 100, 100, 100], 100, [5, 50, 99, 100], 100, "memorised after the first step"),
    ]
    cases = []
    for tr, n_tr, te, n_te, what in rows:
        tr, te = np.asarray(tr, dtype=int), np.asarray(te, dtype=int)
        expected = grok_times_of_counts(tr, n_tr, te, n_te)
        cases.append(Case((tr / n_tr, te / n_te, 0.99), _shown_times(expected), what))
    return cases


def _shown_times(times) -> np.ndarray:
    """The three times as numbers, None as :data:`NEVER`; NaN stays NaN (so a NaN is seen)."""
    return np.array([NEVER if t is None else float(t) for t in times], dtype=float)


def _variant(c: Case, *, strict: bool = False, last: bool = False, from_zero: bool = False, any_delay: bool = False):
    """The times a typical mistake gives on case ``c`` (for the hints)."""
    train, test, threshold = c.args

    def first(acc):
        ok = acc > threshold if strict else acc >= threshold
        if last:  # the step after which it stays above
            below = np.flatnonzero(~ok)
            k = 0 if below.size == 0 else below[-1] + 1
            return None if k >= len(acc) else int(k) + (0 if from_zero else 1)
        hit = np.flatnonzero(ok)
        return int(hit[0]) + (0 if from_zero else 1) if hit.size else None

    t_mem, t_gen = first(np.asarray(train)), first(np.asarray(test))
    both = t_mem is not None and t_gen is not None
    delay = t_gen - t_mem if both and (any_delay or t_gen > t_mem) else None
    return _shown_times((t_mem, t_gen, delay))


def check_grok_times(grok_times: Callable) -> bool:
    """Check ``grok_times(train_acc, test_acc, threshold)``: the memorisation step, the
    generalisation step and the delay, from accuracies after steps 1, 2, ... (element ``k`` is the
    accuracy after step ``k + 1``); None for a time never reached and for a delay that does not
    exist (a time missing, or ``t_gen <= t_mem``)."""

    def as_numbers(train_acc, test_acc, threshold):
        got = grok_times(train_acc, test_acc, threshold)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            return got
        try:
            return _shown_times(got)
        except (TypeError, ValueError):
            return got

    def same(got, want) -> bool:
        return bool(np.array_equal(np.asarray(got, dtype=float), want, equal_nan=True))

    hints = [
        (lambda got, c: True, f"in these messages {NEVER} stands for None (never reached, or no delay)."),
        (
            lambda got, c: np.isnan(np.asarray(got, dtype=float)).any(),
            "return None, not NaN, for a time never reached or a delay that does not exist.",
        ),
        (
            lambda got, c: same(got, _variant(c, from_zero=True)),
            "steps count from 1: element k of the array is the accuracy after step k + 1.",
        ),
        (
            lambda got, c: same(got, _variant(c, any_delay=True)),
            "a seed that generalised no later than it memorised (t_gen <= t_mem) has no delay: return None.",
        ),
        (
            lambda got, c: c.expected[2] > 0 and got[2] == -c.expected[2],
            "the delay is t_gen - t_mem (generalisation comes later).",
        ),
        (
            lambda got, c: same(got, _variant(c, strict=True)),
            "'at least the threshold' includes equality: compare with >=, not >.",
        ),
        (
            lambda got, c: same(got, _variant(c, last=True)),
            "take the first step at or above the threshold, even if the accuracy dips below it again later.",
        ),
    ]
    return check_function(as_numbers, _grok_cases(), name="grok_times", hints=hints, atol=0)


def _power_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    omegas = np.array([0.3, 0.5, 1.0, 1.5, 2.0, 3.0])
    rows = [
        (omegas, 1600 * omegas**-1.0, "an exact law tau = 1600 / omega"),
        (omegas, 1600 * omegas**-1.0 * np.exp(rng.normal(0, 0.1, omegas.size)), "tau = 1600 / omega with noise"),
        (
            np.array([31.0, 43, 53, 61, 79, 89, 101]),
            grok_time(np.array([31.0, 43, 53, 61, 79, 89, 101]), 2770, 23),
            "the paper's ODE curve over its moduli (not a power law)",
        ),
        (np.array([1.0, 2.0]), np.array([900.0, 500.0]), "two points"),
        (
            np.array([1.0, 1.0, 2.0, 2.0, 3.0]),
            np.array([1000.0, 1200, 600, 500, 300]),
            "repeated x (one point per seed)",
        ),
        (np.geomspace(0.1, 10, 9), 5.0 * np.geomspace(0.1, 10, 9) ** 0.5, "a rising law with exponent 1/2"),
    ]
    cases = []
    for x, y, what in rows:
        fit = fit_power_law(x, y)
        cases.append(Case((x, y), np.array([fit.exponent, fit.prefactor]), what))
    return cases


def check_power_law(power_law: Callable) -> bool:
    """Check ``power_law(x, y)``: the exponent ``beta`` and prefactor ``C`` of ``y = C x^beta``
    fitted by least squares of ``log y`` on ``log x`` (as :func:`corelib.theory.fit_power_law`)."""

    def as_numbers(x, y):
        got = power_law(np.array(x, dtype=float), np.array(y, dtype=float))
        try:
            return np.array([float(v) for v in got])
        except (TypeError, ValueError):
            return got

    def slope_reversed(got, c):
        lx, ly = np.log(c.args[0]), np.log(c.args[1])
        reversed_slope = 1 / np.polyfit(ly, lx, 1)[0]
        return not np.isclose(reversed_slope, c.expected[0]) and np.isclose(got[0], reversed_slope, rtol=1e-6)

    def linear_fit(got, c):
        return np.isclose(got[0], np.polyfit(c.args[0], c.args[1], 1)[0], rtol=1e-6)

    def exponent_only(got, c):
        return np.isclose(got[0], c.expected[0]) and not np.isclose(got[1], c.expected[1])

    hints = [
        (slope_reversed, "you regressed log x on log y; regress log y on log x (tau is the response)."),
        (linear_fit, "fit a straight line to the logarithms, not to x and y themselves."),
        (
            lambda got, c: exponent_only(got, c) and np.isclose(got[1], np.log(c.expected[1])),
            "you returned log C; the prefactor is C = exp(intercept).",
        ),
        (
            lambda got, c: exponent_only(got, c) and np.isclose(got[1], 10 ** np.log(c.expected[1])),
            "the exponent is right, the prefactor is not: with natural logs the prefactor is exp(intercept), "
            "not 10**intercept.",
        ),
        (
            lambda got, c: (
                exponent_only(got, c)
                and not np.isclose(got[1], np.log(c.expected[1]))
                and not np.isclose(got[1], 10 ** np.log(c.expected[1]))
            ),
            "the exponent is right, the prefactor is not.",
        ),
        (
            lambda got, c: np.isclose(got[0], np.log(c.expected[1])) and np.isclose(got[1], np.exp(c.expected[0])),
            "return (exponent, prefactor): the slope first, then C = exp(intercept).",
        ),
    ]
    return check_function(as_numbers, _power_cases(), name="power_law", hints=hints, rtol=1e-6, atol=1e-9)


def early_exit_reference(correct, threshold: float = 0.99, budget_shift: int = 0) -> tuple[bool, int]:
    """``(passed, n_checked)`` of the early-exit accuracy check, one answer at a time: the answers
    ``correct`` (booleans, in the order the check visits them) pass when ``(n - errors) / n >=
    threshold`` (:func:`corelib.tasks.sweeps.min_correct`); the check stops at the first answer that makes
    the errors exceed the budget ``n - min_correct(n, threshold)`` (shifted by ``budget_shift``, for
    the hints), and reads every answer of a model that passes. (The library's check visits them in
    chunks, :class:`corelib.tasks.stopping_rules._ThresholdTest`; the decision is the same.)"""
    correct = np.asarray(correct, dtype=bool).ravel()
    n = correct.size
    budget = n - min_correct(n, threshold) + budget_shift
    over = np.flatnonzero(np.cumsum(~correct) > budget)
    return (False, int(over[0]) + 1) if over.size else (True, n)


def _answers(n: int, n_wrong: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` answers with exactly ``n_wrong`` wrong ones at random places."""
    correct = np.ones(n, dtype=bool)
    correct[rng.choice(n, size=n_wrong, replace=False)] = False
    return correct


def example_answers(seed: int = 0, n: int = 1404) -> dict[str, np.ndarray]:
    """One seed's answers on the 1404 training pairs at p = 53, in the order the check visits them,
    at three moments (synthetic): ``"chance"`` (each answer right with probability 1/53),
    ``"nearly"`` (21 wrong, an accuracy of 98.5 %, just short of 99 %) and ``"memorised"`` (7
    wrong, 99.5 %)."""
    rng = np.random.default_rng(seed)
    return {
        "chance": rng.random(n) < 1 / 53,
        "nearly": _answers(n, 21, rng),
        "memorised": _answers(n, 7, rng),
    }


def _early_exit_cases() -> list[Case]:
    rng = np.random.default_rng(5)
    book = example_answers()
    rows = [(book[k], 0.99, f"the example answers '{k}' at p = 53") for k in ("chance", "nearly", "memorised")]
    for n, threshold in ((700, 0.95), (2500, 0.9)):
        budget = n - min_correct(n, threshold)
        for shift in (0, 1):
            what = f"{n} random answers, {budget + shift} wrong, threshold {threshold}"
            rows.append((_answers(n, budget + shift, rng), threshold, what))
    last_wrong = np.ones(100, dtype=bool)
    last_wrong[[10, 99]] = False
    rows += [
        (np.r_[np.ones(99, dtype=bool), False], 0.99, "100 answers, one wrong: accuracy exactly 0.99"),
        (last_wrong, 0.99, "100 answers, the second error on the last one"),
        (np.array([False]), 0.99, "a single answer, wrong"),
        (np.array([True]), 0.99, "a single answer, right"),
        (_answers(50, 3, rng), 1.0, "threshold 1: the first error fails"),
        (np.zeros(20, dtype=bool), 0.0, "threshold 0: every model passes"),
        (_answers(100, 93, rng), 0.07, "threshold 0.07 on 100 answers, 93 of them wrong"),
    ]
    return [Case((c, t), early_exit_reference(c, t), what) for c, t, what in rows]


def check_early_exit(early_exit: Callable) -> bool:
    """Check ``early_exit(correct, threshold)``: ``(passed, n_checked)``, whether the answers reach an
    accuracy of at least ``threshold`` and how many of them the check reads, stopping at the first
    error too many (:func:`early_exit_reference`)."""

    def as_pair(correct, threshold):
        got = early_exit(np.array(correct), threshold)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return got
        passed, n_checked = got
        if isinstance(passed, (bool, np.bool_)):
            passed = bool(passed)
        if isinstance(n_checked, (int, np.integer)) and not isinstance(n_checked, (bool, np.bool_)):
            n_checked = int(n_checked)
        return passed, n_checked

    def shifted(got, c, shift):
        return tuple(got) == early_exit_reference(*c.args, budget_shift=shift) != c.expected

    def float_case(c):
        return c.args[1] == 0.07

    def one_short(got, c):
        return not c.expected[0] and tuple(got) == (False, c.expected[1] - 1)

    hints = [
        (
            one_short,
            "n_checked is one too small: the check stops at the answer that takes the errors past what "
            "the threshold allows, and counts it among the answers read.",
        ),
        (
            lambda got, c: shifted(got, c, -1) and not float_case(c) and not one_short(got, c),
            "you stopped one error too early: a model may make exactly as many errors as the threshold "
            "allows and still pass (its accuracy is then at least the threshold).",
        ),
        (
            lambda got, c: shifted(got, c, -1) and float_case(c),
            "the errors allowed are one too few here: in floating point 0.07 * 100 = 7.000000000000001, "
            "just above 7. Count them with the comparison (n - errors) / n >= threshold itself.",
        ),
        (
            lambda got, c: shifted(got, c, 1),
            "you allowed one error too many: with that many errors the accuracy is below the threshold.",
        ),
        (
            lambda got, c: c.expected[0] and got[0] is True and got[1] != c.expected[1],
            "a model that passes has been read to the end: n_checked is then the number of answers.",
        ),
    ]
    return check_function(as_pair, _early_exit_cases(), name="early_exit", hints=hints, atol=0)
