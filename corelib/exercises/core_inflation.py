"""Checks for the exercises of the chapter "Core inflation: does weight decay keep adding rotations?"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from ..ace import Core
from ..experiments.core_inflation_questions import seed_noise_p
from ..experiments.modular_runs import first_rank_at_or_below
from ..interventions import refine_rank
from ..recorded import is_recorded, load_recorded
from . import Case, check_function

__all__ = ["check_necessary_rank", "check_range_gap", "check_seed_noise_p", "check_sufficient_rank"]

NONE_SHOWN_AS = -1  # how the check shows an answer of None (the comparison needs a number)


def _library(remove: np.ndarray, energy_rank: int, level: float) -> int:
    curves = {"rank": np.arange(1, len(remove) + 1), "energy_rank": [energy_rank], "remove": [remove]}
    got = first_rank_at_or_below(curves, level)[0]
    return NONE_SHOWN_AS if got is None else got


def _removal_curve(d: int, bulk: int, residue: float, seed: int, p: int = 53) -> np.ndarray:
    """A curve like the trained models': accuracy falls over the first ``bulk`` removed directions,
    then hovers around ``residue`` (chance plus a thin remainder of the answer), with noise that
    lets it cross a threshold near ``residue`` more than once."""
    rng = np.random.default_rng(seed)
    r = np.arange(1, d + 1)
    fall = 1 / (1 + np.exp((r - bulk) / 1.5))
    noise = rng.normal(0, 0.006, d)
    return np.clip(fall * (1 - residue) + residue + noise, 0, 1)


def check_necessary_rank(necessary_rank: Callable) -> bool:
    """Check ``necessary_rank(remove, energy_rank, level)``: the smallest rank r >= ``energy_rank``
    whose removal leaves accuracy ``remove[r - 1] <= level`` (ranks count from 1), or None when no
    rank does. The check shows None as -1."""
    chance = 2 / 53
    bounce = np.array([0.9, 0.5, 0.2, 0.03, 0.05, 0.04, 0.02, 0.01])  # crosses 2/p at 4, rises, then stays
    early = np.array([0.01, 0.6, 0.3, 0.1, 0.02, 0.01])  # below the level at rank 1, under the energy rank
    exact = np.array([0.9, 0.4, 0.1, 0.05, 0.05, 0.01])
    inputs = [
        (bounce, 1, chance, "a curve that crosses 2/p at rank 4, rises above it, then falls again"),
        (early, 3, chance, "accuracy is low at rank 1, below the energy rank 3"),
        (exact, 1, 0.05, "accuracy exactly at the level at rank 4"),
        (np.linspace(1.0, 0.2, 10), 2, chance, "a curve that never gets to 2/p: None"),
        (np.array([0.01, 0.01, 0.01]), 1, chance, "removing one direction is enough"),
        (_removal_curve(128, 14, 0.045, 1), 12, chance, "a trained-model-like curve, 128 ranks"),
        (_removal_curve(128, 30, 0.04, 2), 25, 0.1, "a trained-model-like curve at the looser level 0.1"),
        (_removal_curve(128, 40, 0.038, 3), 10, chance, "a trained-model-like curve whose residue sits at 2/p"),
    ]
    cases = [Case((r, e, lv), _library(r, e, lv), what) for r, e, lv, what in inputs]

    def shown(remove, energy_rank, level):
        got = necessary_rank(np.array(remove), energy_rank, level)
        return NONE_SHOWN_AS if got is None else got

    def first(mask, offset=1):
        hits = np.flatnonzero(mask)
        return NONE_SHOWN_AS if not hits.size else int(hits[0]) + offset

    def from_where_it_stays(remove, energy_rank, level):
        above = np.flatnonzero(remove > level)
        r = (int(above[-1]) + 2) if above.size else 1
        return max(r, energy_rank) if r <= len(remove) else NONE_SHOWN_AS

    hints = [
        (
            lambda got, c: got == from_where_it_stays(*c.args),
            "take the first rank at or below the level, even if the curve rises above it again at a larger rank "
            "(the chapter's search stops at the first crossing).",
        ),
        (
            lambda got, c: got == first(c.args[0] <= c.args[2]),
            "start at the energy rank: the necessary rank is the smallest rank at least the energy rank.",
        ),
        (
            lambda got, c: got == first((c.args[0] < c.args[2]) & (np.arange(1, len(c.args[0]) + 1) >= c.args[1])),
            "'at or below': an accuracy equal to the level counts (<=, not <).",
        ),
        (
            lambda got, c: c.expected != NONE_SHOWN_AS and got == c.expected - 1,
            "ranks count from 1: remove[0] is the accuracy with one direction removed, so rank = index + 1.",
        ),
        (lambda got, c: c.expected == NONE_SHOWN_AS, "when no rank gets that low, return None."),
    ]
    return check_function(shown, cases, name="necessary_rank", hints=hints, atol=0)


def _library_sufficient(keep: np.ndarray, baseline: float, tolerance: float) -> int:
    """The chapter's own scan (:func:`corelib.interventions.refine_rank`) on a given keep curve."""
    d = len(keep)
    core = Core(np.eye(d), np.arange(d, 0, -1.0), np.zeros(d))

    def accuracy(c: Core, mode: str) -> float:  # what keeping (or removing) the leading c.rank directions leaves
        return float(keep[c.rank - 1]) if mode == "keep" else 0.0

    got = refine_rank(core, accuracy, baseline=baseline, chance_level=0.0, tolerance=tolerance)[1]
    return NONE_SHOWN_AS if got is None else got


def _keep_curve(d: int, bulk: int, baseline: float, seed: int, n_test: int = 1405) -> np.ndarray:
    """A keep curve like the trained models': core-only accuracy climbs from near chance to the
    model's over the first ``bulk`` directions, in steps of one test pair in ``n_test``, with a
    little noise that can take it across the tolerance and back."""
    rng = np.random.default_rng(seed)
    r = np.arange(1, d + 1)
    rise = 1 / (1 + np.exp(-(r - bulk) / 1.2))
    acc = 0.02 + (baseline - 0.02) * rise + rng.normal(0, 0.0007, d) * (r > bulk)
    return np.clip(np.round(acc * n_test) / n_test, 0, 1)


def _first(mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return NONE_SHOWN_AS if not hits.size else int(hits[0]) + 1


def _sufficient_variants(keep: np.ndarray, baseline: float, tolerance: float) -> dict[str, int]:
    """What the usual mistakes return (None shown as -1): each names the mistake."""
    keep = np.asarray(keep, dtype=float)
    low = baseline - tolerance
    below = np.flatnonzero(keep < low)
    if not below.size:
        stays = 1
    elif below[-1] == len(keep) - 1:  # the last rank is below: it never stays
        stays = NONE_SHOWN_AS
    else:
        stays = int(below[-1]) + 2  # the rank after the last one below
    return {
        "no_tolerance": _first(keep >= baseline),
        "strict": _first(keep > low),
        "absolute": _first(np.abs(keep - baseline) <= tolerance),
        "stays": stays,
    }


def check_sufficient_rank(sufficient_rank: Callable) -> bool:
    """Check ``sufficient_rank(keep, baseline, tolerance)``: the smallest rank r (from 1) whose
    core-only accuracy ``keep[r - 1]`` is at least ``baseline - tolerance``, or None when no rank's
    is. The check shows None as -1."""
    tol = 0.001
    rng = np.random.default_rng(7)
    dips = np.array([0.3, 0.7, 0.9995, 0.997, 0.998, 1.0, 1.0])  # reaches at 3, dips, back from 6
    above = np.array([0.5, 0.9, 0.9995, 0.99, 0.99])  # rank 3 is better than the model's own 0.99
    edge = np.array([0.25, 0.5, 0.75, 0.9, 1.0])  # baseline 1, tolerance 0.25: rank 3 is exactly at the edge
    short = np.array([0.9993, 0.9993, 1.0, 1.0])  # within the tolerance at rank 1, equal only at rank 3
    inputs = [
        (_keep_curve(128, 9, 1.0, 1), 1.0, tol, "a curve like a trained model's, 128 ranks, baseline 1"),
        (_keep_curve(128, 18, 0.9993, 2), 0.9993, tol, "a trained-model-like curve whose baseline is 0.9993"),
        (dips, 1.0, tol, "a curve that reaches the baseline at rank 3, dips below it, then comes back"),
        (above, 0.99, tol, "core-only accuracy above the model's own at rank 3"),
        (edge, 1.0, 0.25, "accuracy exactly at baseline - tolerance at rank 3"),
        (short, 1.0, tol, "within the tolerance from rank 1, equal to the baseline only from rank 3"),
        (np.linspace(0.1, 0.9, 12), 1.0, tol, "a curve that never gets within the tolerance: None"),
        (np.array([1.0]), 1.0, tol, "a single direction that keeps everything"),
    ]
    for k in range(2):  # random curves, random baselines and tolerances
        base = float(rng.uniform(0.9, 1.0))
        inputs.append(
            (_keep_curve(64, int(rng.integers(3, 30)), base, 10 + k), base, float(rng.choice([0.001, 0.01])),
             f"a random curve, 64 ranks (seed {10 + k})")
        )  # fmt: skip
    cases = [Case((c, b, t), _library_sufficient(c, b, t), what) for c, b, t, what in inputs]

    def shown(keep, baseline, tolerance):
        got = sufficient_rank(np.array(keep), baseline, tolerance)
        return NONE_SHOWN_AS if got is None else got

    def was(name: str):
        def test(got, c) -> bool:
            variants = _sufficient_variants(*c.args)
            return got == variants[name] and got != c.expected

        return test

    hints = [
        (
            was("no_tolerance"),
            "you asked for the baseline itself; a rank is sufficient when its accuracy is at least "
            "baseline - tolerance.",
        ),
        (was("strict"), "'at least baseline - tolerance' includes the edge: >=, not >."),
        (
            was("absolute"),
            "a core that keeps more than the model's own accuracy is sufficient too: test "
            "keep >= baseline - tolerance, not |keep - baseline| <= tolerance.",
        ),
        (
            was("stays"),
            "take the first rank that qualifies, even if the curve dips below at a larger rank (the chapter's "
            "scan stops at the first).",
        ),
        (
            lambda got, c: c.expected != NONE_SHOWN_AS and got == c.expected - 1,
            "ranks count from 1: keep[0] is the accuracy with one direction kept, so rank = index + 1.",
        ),
        (lambda got, c: c.expected == NONE_SHOWN_AS, "when no rank gets within the tolerance, return None."),
    ]
    return check_function(shown, cases, name="sufficient_rank", hints=hints, atol=0)


def _gap(a, b) -> float:
    """Distance between the ranges of two sets of values, 0 when they share a value."""
    return max(0.0, float(min(a)) - float(max(b)), float(min(b)) - float(max(a)))


def _recorded_ranges() -> list[tuple[list, list, str]]:
    """The recorded run's necessary ranks per arm at its branch and at its last epoch (none when
    the run is not recorded)."""
    if not is_recorded("core_inflation"):
        return []
    arms = load_recorded("core_inflation")["arms"]
    branch = arms["no_wd"][0]["epoch"]

    def ranks(arm: str, epoch: int) -> list:
        rec = next(r for r in arms[arm] if r["epoch"] == epoch)
        return [m["necessary_rank"] for m in rec["models"] if m["necessary_rank"] is not None]

    end = arms["wd"][-1]["epoch"]
    return [
        (ranks("wd", end), ranks("no_wd", end), f"the recorded run's necessary ranks at epoch {end}, kept vs removed"),
        (ranks("wd", branch), ranks("no_wd", branch), f"the recorded run at the branch (epoch {branch}): same models"),
    ]


def check_range_gap(range_gap: Callable) -> bool:
    """Check ``range_gap(a, b)``: the distance between the nearest ends of the ranges of two sets
    of per-model values, 0 when the ranges share a value (touching ends included)."""
    rng = np.random.default_rng(3)
    inputs = _recorded_ranges() + [
        ([32, 40, 35], [63, 42, 48], "the lower set first"),
        ([10, 12, 11], [12, 15, 14], "ranges that touch: they share the value 12"),
        ([1, 10, 5], [4, 5, 6], "one range inside the other"),
        ([3], [7], "one model per arm"),
        ([0.91, 0.95, 0.93], [0.97, 0.99], "accuracies, sets of different sizes"),
        ([20, 20, 20], [20, 20, 20], "identical sets"),
    ]
    for k in range(3):
        a, b = rng.integers(5, 60, 3), rng.integers(5, 60, 3) + int(rng.integers(0, 40))
        inputs.append((a.tolist(), b.tolist(), f"random ranks, three per arm (draw {k + 1})"))
    cases = [Case((list(a), list(b)), _gap(a, b), what) for a, b, what in inputs]

    def gap(a, b):
        got = range_gap(list(a), list(b))
        return np.nan if got is None else float(got)

    def separated(c) -> bool:
        return c.expected > 0

    hints = [
        (
            lambda got, c: np.isclose(got, abs(np.mean(c.args[0]) - np.mean(c.args[1]))),
            "you returned the distance between the means; ranges are told apart by their nearest ends, "
            "min of the higher set minus max of the lower one.",
        ),
        (
            lambda got, c: got < 0,
            "your gap is negative: ranges that share a value cannot be told apart, and their gap is 0.",
        ),
        (
            lambda got, c: not separated(c) and got > 0,
            "these ranges share a value (they overlap or touch), so the gap is 0.",
        ),
        (
            lambda got, c: (
                not np.isclose(got, c.expected)
                and any(np.isclose(got, abs(min(x) - max(y))) for x, y in (c.args, c.args[::-1]))
            ),
            "you measured from the lowest value of one set to the highest of the other; the gap is between "
            "the nearest ends: the lowest value of the higher set minus the highest value of the lower set.",
        ),
        (
            lambda got, c: separated(c) and got == 0,
            "these ranges are apart, yet your gap is 0. If you compared them in one order only, check both orders: "
            "the second set may lie below the first.",
        ),
    ]
    return check_function(gap, cases, name="range_gap", hints=hints)


def check_seed_noise_p(p_value: Callable) -> bool:
    """Check ``p_value(values, paper)``: the two-sided p-value of a one-sample t-test of the
    per-seed ``values`` against the paper's value (the chapter's ``seed_noise_p``)."""
    rng = np.random.default_rng(11)
    inputs = [
        ([63.0, 42.0, 48.0], 60.0, "the recorded run's three end cores against the paper's 60"),
        ([12.0, 14.0, 13.0], 15.0, "the three cores at the branch against the paper's 15"),
        ([60.0, 58.0, 62.0], 60.0, "a mean exactly at the paper's value: p = 1"),
        ([10.0, 11.0], 30.0, "two seeds, far from the value"),
        ([-1.0, 2.0, 0.5, 3.0, 1.5], 0.0, "five seeds, a mean above zero"),
    ]
    for k in range(3):
        n = int(rng.integers(3, 9))
        inputs.append((list(rng.normal(40, 8, n)), float(rng.uniform(30, 50)), f"{n} random seeds (draw {k})"))
    cases = [Case((v, paper), seed_noise_p(v, paper), what) for v, paper, what in inputs]

    def shown(values, paper):
        return p_value(np.array(values), paper)

    def one_sided(got, c) -> bool:
        return np.isclose(got, c.expected / 2, rtol=1e-6)

    def normal(got, c) -> bool:
        v = np.asarray(c.args[0], dtype=float)
        z = (v.mean() - c.args[1]) / (v.std(ddof=1) / np.sqrt(v.size))
        return bool(np.isclose(got, 2 * stats.norm.sf(abs(z)), rtol=1e-6))

    def population_sd(got, c) -> bool:
        v = np.asarray(c.args[0], dtype=float)
        t = (v.mean() - c.args[1]) / (v.std(ddof=0) / np.sqrt(v.size))
        return bool(np.isclose(got, 2 * stats.t.sf(abs(t), v.size - 1), rtol=1e-6))

    hints = [
        (one_sided, "the test is two-sided: the paper's value may lie above or below our mean, so double the tail."),
        (normal, "with three seeds the statistic follows Student's t with n - 1 degrees of freedom, not the normal."),
        (population_sd, "the standard error uses the sample standard deviation (ddof=1), divided by sqrt(n)."),
    ]
    return check_function(shown, cases, name="p_value", hints=hints, rtol=1e-6, atol=1e-9)
