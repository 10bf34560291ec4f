"""Checks for the exercises of the chapter "A Markov chain: three transformers, one core"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tasks.markov import chain_eigenvalues, oracle_r2, transition_matrix
from . import Case, check_function

__all__ = ["check_chain_spectrum", "check_oracle_r2"]


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
