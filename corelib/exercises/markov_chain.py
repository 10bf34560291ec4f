"""Checks for the exercises of the chapter "A Markov chain: three transformers, one core"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..compare import cca
from ..experiments.markov_chain_seeds import from_summaries
from ..tasks.markov import chain_eigenvalues, oracle_r2, sample_sequences, transition_matrix
from . import Case, check_function

if TYPE_CHECKING:
    from ..experiments.markov_chain import MarkovSummary

__all__ = ["check_canonical_correlations", "check_chain_spectrum", "check_oracle_r2", "check_pair_correlations"]


def _random_chain(n: int, seed: int) -> np.ndarray:
    """A row-stochastic matrix whose stationary distribution is not uniform."""
    t = np.random.default_rng(seed).dirichlet(np.full(n, 0.7), size=n)
    return t


def check_chain_spectrum(chain_spectrum: Callable) -> bool:
    """Check ``chain_spectrum(alpha, beta, n)``: the n - 1 non-trivial eigenvalues of the chain
    that stays with probability alpha and steps forward with beta, in any order."""
    params = [
        (0.75, 0.25, 4, "the book's chain"),
        (0.6, 0.4, 5, "five states"),
        (0.5, 0.5, 2, "two states"),
        (1.0, 0.0, 3, "a chain that never moves"),
        (0.1, 0.9, 7, "seven states, mostly moving"),
    ]
    cases = [
        Case((a, b, n), np.sort_complex(chain_eigenvalues(transition_matrix(a, b, n)).astype(complex)), what)
        for a, b, n, what in params
    ]

    def sorted_spectrum(a, b, n):
        return np.sort_complex(np.asarray(chain_spectrum(a, b, n), dtype=complex).ravel())

    hints = [
        (lambda got, c: len(got) == c.args[2], "you returned n eigenvalues; leave out the trivial one, 1 (k = 0)."),
        (
            lambda got, c: np.allclose(np.abs(got), c.args[1]),
            "each eigenvalue is alpha + beta e^(2 pi i k / n): add alpha.",
        ),
    ]
    return check_function(sorted_spectrum, cases, name="chain_spectrum", hints=hints, atol=1e-9)


def check_oracle_r2(oracle: Callable) -> bool:
    """Check ``oracle(T)``: the R² ceiling for predicting the next one-hot state from the current
    state, for any row-stochastic matrix ``T`` (stationary distribution not necessarily uniform)."""
    book = transition_matrix()
    chains = [
        (book, "the book's chain"),
        (transition_matrix(0.6, 0.4, 5), "five states, uniform pi"),
        (np.roll(np.eye(4), 1, axis=1), "a deterministic cycle: the next state is known"),
        (np.tile([0.2, 0.3, 0.5], (3, 1)), "independent draws: the current state says nothing"),
        (_random_chain(3, 1), "a random 3-state chain, pi not uniform"),
        (_random_chain(6, 2), "a random 6-state chain, pi not uniform"),
    ]
    cases = [Case((t,), oracle_r2(t), what) for t, what in chains]

    def uniform_pi(t):
        t = np.asarray(t)
        n = len(t)
        pi = np.full(n, 1 / n)
        return 1 - np.mean((pi[:, None] * t * (1 - t)).sum(0) / (pi * (1 - pi)))

    hints = [
        (
            lambda got, c: np.isclose(got, uniform_pi(c.args[0])),
            "this is right only when pi is uniform: weight the "
            "rows by the stationary distribution pi (pi T = pi), and use pi_j (1 - pi_j) as the total variance.",
        ),
        (
            lambda got, c: np.isclose(got, 1 - c.expected),
            "you returned the share of variance left over; R² is 1 minus it.",
        ),
    ]
    return check_function(oracle, cases, name="oracle_r2", hints=hints, atol=1e-9)


def _two_codings(seed: int, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """The chapter's situation in miniature: two "cores" that code the same chain states in
    different coordinates, each with its own noise. The signal is the next-state distribution
    T[s] of the book's chain along sampled sequences; each core maps it linearly to 3 numbers."""
    rng = np.random.default_rng(seed)
    t = transition_matrix()
    states = sample_sequences(t, 40, 50, seed=seed).ravel()
    signal = t[states]  # (2000, 4); centred, it spans 3 dimensions
    z1 = signal @ rng.standard_normal((4, 3)) + noise * rng.standard_normal((len(states), 3))
    z2 = signal @ rng.standard_normal((4, 3)) + noise * rng.standard_normal((len(states), 3))
    return z1 + 5.0, z2 - 2.0  # the coordinates need not be centred


def _cca_cases() -> list[tuple[np.ndarray, np.ndarray, str]]:
    rng = np.random.default_rng(11)
    z = rng.standard_normal((500, 3)) @ rng.standard_normal((3, 3))
    mixed = z @ rng.standard_normal((3, 3)) + 0.5 * rng.standard_normal((500, 3))
    offset = rng.standard_normal((400, 2))
    scaled = rng.standard_normal((600, 2)) * [1e3, 1e-2]
    return [
        (*_two_codings(0), "two cores coding the book's chain states, each with its own noise"),
        (z, z @ np.array([[2.0, 1.0, 0.0], [0.0, 1.0, -3.0], [1.0, 0.0, 1.0]]), "an exact linear re-coding: all 1"),
        (z, mixed, "a noisy linear image, 3 and 3 dimensions"),
        (z, rng.standard_normal((500, 4)), "unrelated coordinates: correlations near 0 only by chance"),
        (
            offset + 100.0,
            np.c_[offset[:, 0] + 0.3 * rng.standard_normal(400), rng.standard_normal(400)] - 50.0,
            "coordinates far from 0: one shared signal plus noise",
        ),
        (scaled, np.c_[scaled[:, 1] * 1e4, rng.standard_normal(600)], "coordinates on very different scales"),
        (z[:, :1], mixed[:, 1:2], "one coordinate each: the absolute Pearson correlation"),
    ]


def _colwise(z1, z2) -> np.ndarray:
    """The usual mistake: correlate coordinate i of one with coordinate i of the other."""
    k = min(z1.shape[1], z2.shape[1])
    return np.sort([abs(np.corrcoef(z1[:, i], z2[:, i])[0, 1]) for i in range(k)])[::-1]


def _uncentred(z1, z2) -> np.ndarray:
    q1, q2 = np.linalg.qr(z1)[0], np.linalg.qr(z2)[0]
    return np.linalg.svd(q1.T @ q2, compute_uv=False)


def _cross_covariance(z1, z2) -> np.ndarray:
    c = (z1 - z1.mean(0)).T @ (z2 - z2.mean(0)) / (len(z1) - 1)
    return np.linalg.svd(c, compute_uv=False)


def check_canonical_correlations(student: Callable) -> bool:
    """Check ``canonical_correlations(z1, z2)``: the canonical correlations (descending, as many as
    the smaller number of columns) between paired samples ``z1`` (N, r1) and ``z2`` (N, r2)."""
    cases = [Case((z1, z2), cca(z1, z2), what) for z1, z2, what in _cca_cases()]

    def answer(z1, z2):  # copies: a student's in-place centring must not change the cases
        got = student(z1.copy(), z2.copy())
        try:
            return np.asarray(got, dtype=float).ravel()
        except (TypeError, ValueError):  # not numbers: shown as returned
            return got

    def near(got, want) -> bool:
        return np.shape(got) == np.shape(want) and bool(np.allclose(got, want, rtol=1e-4, atol=1e-6))

    hints = [
        (
            lambda got, c: near(got, _uncentred(*c.args)),
            "centre each set of coordinates first (subtract its column means): canonical correlations, like "
            "any correlation, are about deviations from the mean.",
        ),
        (lambda got, c: near(got, c.expected**2), "these are squared correlations; take square roots."),
        (
            lambda got, c: near(np.sort(got)[::-1], c.expected) and not near(got, c.expected),
            "return the correlations in descending order, the largest first.",
        ),
        (
            lambda got, c: near(np.sort(got)[::-1], _colwise(*c.args)),
            "you correlated coordinate i of one set with coordinate i of the other. CCA first finds the "
            "linear combinations of each set that agree best, so that a re-coding of the same signal scores 1.",
        ),
        (
            lambda got, c: near(got, _cross_covariance(*c.args)),
            "these are singular values of the cross-covariance: whiten each set first (e.g. the Q of a QR "
            "factorisation of the centred matrix), so that scales and mixing within one set do not count.",
        ),
        (
            lambda got, c: np.size(got) == max(c.args[0].shape[1], c.args[1].shape[1]) != np.size(c.expected),
            "there are as many canonical correlations as the smaller of the two numbers of columns.",
        ),
    ]
    return check_function(answer, cases, name="canonical_correlations", hints=hints, rtol=1e-6, atol=1e-8)


_NO_THIRD = -1.0  # stands for NaN (no third correlation) when answers are compared


def _with_correlations(summary: MarkovSummary, correlations: list[list[float]]) -> MarkovSummary:
    """``summary`` with its first pairs' canonical correlations replaced (one list per pair)."""
    pairs = [replace(p, cca=tuple(c)) for p, c in zip(summary.pairs, correlations)]
    return replace(summary, pairs=tuple(pairs))


def _pair_cases(summary: MarkovSummary) -> list[Case]:
    rng = np.random.default_rng(5)
    n = len(summary.pairs)
    random = [sorted(rng.uniform(0.5, 1.0, 3), reverse=True) for _ in range(n)]
    summaries = [
        (summary, "the chapter's models"),
        (_with_correlations(summary, random), "random correlations, three per pair"),
        (_with_correlations(summary, [[0.999, 0.998, 0.97, 0.2]] * n), "cores of rank 4: four correlations"),
        (_with_correlations(summary, [[0.999, 0.6]] * n), "cores of rank 2: no third correlation (NaN)"),
        (replace(summary, pairs=summary.pairs[:1]), "one pair only"),
    ]
    cases = []
    for s, what in summaries:
        sets = from_summaries([s])
        cases.append(Case((s,), np.nan_to_num(np.c_[sets.third[0], sets.mean[0]], nan=_NO_THIRD), what))
    return cases


def check_pair_correlations(pair_correlations: Callable, summary: MarkovSummary) -> bool:
    """Check ``pair_correlations(summary)``: per pair of models of a Markov run's summary (in the
    order of ``summary.pairs``), its third canonical correlation (NaN when a core has fewer than
    three directions) and the mean of all its canonical correlations, an array (pairs, 2). The
    chapter's ``summary`` is the first case; the others change its pairs' correlations."""

    def answer(s):
        got = pair_correlations(s)
        try:
            return np.nan_to_num(np.asarray(got, dtype=float), nan=_NO_THIRD)
        except (TypeError, ValueError):  # not numbers: shown as returned
            return got

    def correlations(c: Case) -> list[tuple[float, ...]]:
        return [p.cca for p in c.args[0].pairs]

    hints = [
        (
            lambda got, c: np.allclose(got[:, 0], [cc[-1] for cc in correlations(c)]) and len(correlations(c)[0]) > 3,
            "the third correlation is the third largest, cca[2]; the last one is the third only at rank 3.",
        ),
        (
            lambda got, c: np.allclose(got[:, 1], [np.mean(cc[:3]) for cc in correlations(c)]),
            "the mean runs over every correlation of the pair, as the claim markov.cca_mean does.",
        ),
        (
            lambda got, c: np.shape(got) == np.shape(c.expected)[::-1] != np.shape(c.expected),
            "return one row per pair (pairs, 2): the third correlation, then the mean.",
        ),
    ]
    return check_function(answer, _pair_cases(summary), name="pair_correlations", hints=hints)
