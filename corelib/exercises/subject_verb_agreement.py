"""Checks for the exercises of the chapter "Subject–verb agreement: a shared one-dimensional core in
language models"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..experiments.subject_verb_agreement_layers import alignment, auc
from . import Case, check_function

__all__ = [
    "check_auc",
    "check_core_alignment",
    "check_steering_strength",
    "core_alignment_reference",
    "steering_strength_reference",
]


def _pairwise(scores: np.ndarray, positive: np.ndarray, tie: float) -> float:
    """AUC by comparing all pairs, ties counting ``tie`` (for the hints)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(positive).astype(bool)
    diff = s[y][:, None] - s[~y][None, :]
    return float((diff > 0).mean() + tie * (diff == 0).mean())


def _auc_cases() -> list[Case]:
    rng = np.random.default_rng(11)
    plural = np.repeat([1, 0], 300)
    margins = np.where(plural == 1, 1.0, -1.0) * 1.2 + rng.normal(0, 1, 600)  # a model that mostly agrees
    rows = [
        (margins, plural, "600 margins of a model that mostly agrees"),
        (-margins, plural, "the same margins negated (a flipped core)"),
        (rng.integers(0, 4, 200).astype(float), rng.integers(0, 2, 200), "integer scores with many ties"),
        (np.zeros(10), np.array([1, 0] * 5), "every score tied"),
        (np.array([3.0, 1.0, 2.0]), np.array([True, False, False]), "three prompts, boolean labels"),
        (rng.normal(0, 1, 51), np.r_[np.ones(5, int), np.zeros(46, int)], "unbalanced: 5 positives, 46 negatives"),
    ]
    return [Case((s, y), auc(s, y), what) for s, y, what in rows]


def check_auc(my_auc: Callable) -> bool:
    """Check ``my_auc(scores, positive)``: the probability that a random positive (plural) prompt
    scores higher than a random negative (singular) one, ties counting one half
    (:func:`corelib.experiments.subject_verb_agreement.auc`)."""

    def as_number(scores, positive):
        return my_auc(np.array(scores), np.array(positive))

    hints = [
        (
            lambda got, c: np.isclose(got, _pairwise(*c.args, tie=0.0)) and not np.isclose(got, c.expected),
            "a tie counts one half; you counted it as a loss.",
        ),
        (
            lambda got, c: np.isclose(got, _pairwise(*c.args, tie=1.0)) and not np.isclose(got, c.expected),
            "a tie counts one half; you counted it as a win.",
        ),
        (
            lambda got, c: np.isclose(got, 1 - c.expected) and not np.isclose(got, 0.5),
            "your answer is 1 minus the AUC: the AUC is P(positive > negative), the plural prompts being "
            "the positives.",
        ),
    ]
    return check_function(as_number, _auc_cases(), name="my_auc", hints=hints, atol=1e-9)


def steering_strength_reference(m0, m1, probe: float = 0.2, epsilon: float = 1.0, cap: float | None = 50.0):
    """The strength of one steered step, as :func:`corelib.steering.generate_batch` computes it:
    the local gain ``g = (m1 - m0) / probe``, the target ``-sign(m0) * epsilon`` (``+epsilon`` when
    ``m0 <= 0``), ``s = (target - m0) / g`` (0 where ``g = 0``), clipped to ``[-cap, cap]``."""
    m0, m1 = np.asarray(m0, dtype=float), np.asarray(m1, dtype=float)
    gain = (m1 - m0) / probe
    target = np.where(m0 > 0, -epsilon, epsilon)
    s = np.where(gain != 0, (target - m0) / np.where(gain != 0, gain, 1.0), 0.0)
    return s if cap is None else np.clip(s, -cap, cap)


def _strength_cases() -> list[Case]:
    rng = np.random.default_rng(9)
    m0 = rng.normal(0, 3, 12)
    m1 = m0 - rng.uniform(0.2, 2.0, 12) * np.sign(m0)  # the probe moves the margin towards zero
    rows = [
        ((m0, m1, 0.2, 1.0, 50.0), "12 steps with the chapter's probe, buffer and cap"),
        ((np.array([4.0]), np.array([3.6]), 0.2, 1.0, 50.0), "one step that prefers the plural verb, m0 = 4"),
        ((np.array([-2.5]), np.array([-2.0]), 0.2, 0.5, 50.0), "a step that prefers the singular verb, buffer 0.5"),
        ((np.array([6.0]), np.array([5.99]), 0.2, 1.0, 50.0), "a weak gain: the cap binds"),
        ((np.array([3.0, -3.0]), np.array([3.0, -3.0]), 0.2, 1.0, 50.0), "the probe changed nothing: no steering"),
        ((np.array([1.0, -1.0]), np.array([0.0, 0.0]), 0.5, 2.0, None), "no cap, probe 0.5, buffer 2"),
    ]
    return [Case(args, steering_strength_reference(*args), what) for args, what in rows]


def check_steering_strength(steering_strength: Callable) -> bool:
    """Check ``steering_strength(m0, m1, probe, epsilon, cap)``: for arrays of clean margins ``m0``
    and probed margins ``m1`` (the margin after steering at strength ``probe``), the strength of
    every step (:func:`steering_strength_reference`; ``cap`` None: no cap)."""

    def as_array(m0, m1, probe, epsilon, cap):
        got = steering_strength(np.array(m0), np.array(m1), probe, epsilon, cap)
        try:
            return np.asarray(got, dtype=float)
        except (TypeError, ValueError):
            return got

    def variant(c: Case, **change):
        m0, m1, probe, epsilon, cap = c.args
        settings = {"probe": probe, "epsilon": epsilon, "cap": cap, **change}
        return steering_strength_reference(m0, m1, **settings)

    def no_zero_gain(got, c):
        m0, m1, probe, _, _ = c.args
        still = (np.asarray(m1) - np.asarray(m0)) == 0
        return bool(still.any()) and not np.allclose(np.asarray(got, dtype=float)[still], 0)

    hints = [
        (
            lambda got, c: np.allclose(got, variant(c, probe=1.0)),
            "the gain is per unit strength: divide m1 - m0 by probe.",
        ),
        (
            lambda got, c: np.allclose(got, variant(c, epsilon=0.0)),
            "aim past zero by the buffer: target -sign(m0) epsilon.",
        ),
        (
            lambda got, c: np.allclose(got, variant(c, epsilon=-c.args[3])),
            "the target has the sign opposite to m0: the step must cross the margin, not move away.",
        ),
        (lambda got, c: c.args[4] is not None and np.allclose(got, variant(c, cap=None)), "clip s to [-cap, cap]."),
        (no_zero_gain, "where the probe did not move the margin (gain 0), do not steer: s = 0."),
    ]
    return check_function(as_array, _strength_cases(), name="steering_strength", hints=hints, atol=1e-9)


def core_alignment_reference(coords_a, margins_a, coords_b, margins_b) -> tuple[float, float]:
    """``(pearson, spearman)`` of two models' core coordinates of the same prompts, each coordinate
    first signed to rise with its own model's margin (the chapter's convention, larger = more
    plural; :func:`corelib.experiments.subject_verb_agreement.alignment`)."""
    a, b = np.asarray(coords_a, dtype=float), np.asarray(coords_b, dtype=float)
    a = a if np.corrcoef(a, margins_a)[0, 1] >= 0 else -a
    b = b if np.corrcoef(b, margins_b)[0, 1] >= 0 else -b
    r = alignment(a, b)
    return r["pearson"], r["spearman"]


def _two_models(n: int, shared: float, rng: np.random.Generator, sign_b: float = 1.0, ties: bool = False):
    """Synthetic held-out prompts seen by two models: a number axis both read (``shared``: how much
    of each coordinate it explains), each model's margin rising with its own coordinate, and model
    b's core returned with sign ``sign_b`` (the sign of an SVD direction is arbitrary)."""
    plural = rng.integers(0, 2, n)
    axis = np.where(plural == 1, 1.0, -1.0) + 0.5 * rng.normal(size=n)
    a = shared * axis + (1 - shared) * rng.normal(size=n)
    b = shared * axis + (1 - shared) * rng.normal(size=n)
    if ties:
        a, b = np.round(a), np.round(b)
    margins_a = 2.0 * a + 0.3 * rng.normal(size=n)
    margins_b = 1.5 * b + 0.3 * rng.normal(size=n)
    return a, margins_a, sign_b * b, margins_b


def _alignment_cases(summary=None) -> list[Case]:
    rng = np.random.default_rng(17)
    rows = []
    models = [] if summary is None else list(summary.models)
    if len(models) >= 2:
        m_a, m_b = models[0], models[1]
        args = (
            np.asarray(m_a.coords),
            np.asarray(m_a.margins["baseline"]),
            -np.asarray(m_b.coords),  # as an SVD might have returned it
            np.asarray(m_b.margins["baseline"]),
        )
        rows.append((args, f"the book's run: {m_a.model} and {m_b.model}, the second core's sign reversed"))
    rows += [
        (_two_models(600, 0.8, rng), "600 prompts, two models sharing a number axis"),
        (_two_models(600, 0.8, rng, sign_b=-1.0), "the same kind of models, the second core's sign reversed"),
        (_two_models(200, 0.5, rng, sign_b=-1.0, ties=True), "coordinates rounded to whole numbers (ties)"),
    ]
    a = rng.normal(size=40)
    b = -a + 0.3 * rng.normal(size=40)
    rows += [
        ((a, a + 0.1 * rng.normal(size=40), b, -b + 0.1 * rng.normal(size=40)), "40 prompts, cores that agree"),
        ((a, a, b, b), "cores whose oriented coordinates are anti-correlated"),
        ((np.array([1.0, 2.0, 4.0]), np.array([0.5, 1.0, 3.0]), np.array([-1.0, -3.0, -2.0]),
          np.array([1.0, 3.0, 2.0])), "three prompts"),
    ]  # fmt: skip
    return [Case(args, core_alignment_reference(*args), what) for args, what in rows]


def check_core_alignment(core_alignment: Callable, summary=None) -> bool:
    """Check ``core_alignment(coords_a, margins_a, coords_b, margins_b)``: ``(pearson, spearman)`` of
    two models' core coordinates of the same prompts after signing each to rise with its own
    model's margin (:func:`core_alignment_reference`). With the chapter's ``summary`` (two models or
    more), the book's run is the first case."""

    def as_numbers(*args):
        got = core_alignment(*(np.array(a) for a in args))
        try:
            return tuple(float(v) for v in got)
        except (TypeError, ValueError):
            return got

    def unsigned(c):
        a, _, b, _ = c.args
        r = alignment(a, b)
        return r["pearson"], r["spearman"]

    def made_positive(got, c):
        return c.expected[0] < 0 and np.allclose(got, np.abs(c.expected))

    hints = [
        (
            lambda got, c: (
                np.allclose(got, [-v for v in c.expected])
                and not np.allclose(got, c.expected)
                and not np.allclose(got, unsigned(c))
                and not made_positive(got, c)
            ),
            "your correlations have the opposite sign: sign each coordinate so that it rises with its own "
            "model's margin before correlating.",
        ),
        (
            made_positive,
            "here the oriented coordinates are anti-correlated, so both correlations must come out negative.",
        ),
        (
            lambda got, c: np.allclose(got, unsigned(c)) and not np.allclose(unsigned(c), c.expected),
            "these are the correlations of the coordinates as given; sign each by its own model's margin first.",
        ),
        (
            lambda got, c: (
                np.isclose(got[0], c.expected[0])
                and np.isclose(got[1], c.expected[0])
                and not np.isclose(c.expected[0], c.expected[1])
            ),
            "the second number should be Spearman's rho, Pearson's r of the ranks; you returned Pearson's r twice.",
        ),
        (
            lambda got, c: np.allclose(got, c.expected[::-1]) and not np.allclose(got, c.expected),
            "return (Pearson's r, Spearman's rho), in that order.",
        ),
    ]
    return check_function(as_numbers, _alignment_cases(summary), name="core_alignment", hints=hints, atol=1e-9)
