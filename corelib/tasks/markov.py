"""The Markov-chain task: next-token prediction on a cyclic chain with known spectrum.

State i stays with probability alpha and moves to i + 1 (mod n) with probability beta. For the
paper's chain (n = 4, alpha = 0.75, beta = 0.25) the eigenvalues are {1, 0.75 +- 0.25i, 0.5}, the
stationary distribution is uniform, Bayes-optimal accuracy is 0.75 and chance is 0.25.
"""

from __future__ import annotations

import numpy as np

from .._checks import as_matrix

__all__ = [
    "bayes_accuracy",
    "chance_accuracy",
    "chain_eigenvalues",
    "oracle_r2",
    "sample_sequences",
    "stationary_distribution",
    "transition_matrix",
]


def transition_matrix(alpha: float = 0.75, beta: float = 0.25, n_states: int = 4) -> np.ndarray:
    """Row-stochastic (n, n) matrix: stay with ``alpha``, step forward cyclically with ``beta``."""
    if n_states < 2:
        raise ValueError(f"n_states must be at least 2, got {n_states}.")
    if alpha < 0 or beta < 0 or not np.isclose(alpha + beta, 1.0):
        raise ValueError(f"alpha and beta must be non-negative and sum to 1, got {alpha} + {beta}.")
    eye = np.eye(n_states)
    return alpha * eye + beta * np.roll(eye, 1, axis=1)


def _check_stochastic(T) -> np.ndarray:
    t = as_matrix(T, "T")
    if t.shape[0] != t.shape[1] or np.any(t < 0) or not np.allclose(t.sum(axis=1), 1.0):
        raise ValueError("T must be a square row-stochastic matrix (non-negative rows summing to 1).")
    return t


def stationary_distribution(T) -> np.ndarray:
    """Stationary distribution pi (pi T = pi, sum 1) of a row-stochastic matrix T."""
    t = _check_stochastic(T)
    w, v = np.linalg.eig(t.T)
    pi = np.real(v[:, int(np.argmin(np.abs(w - 1.0)))])
    return pi / pi.sum()


def chain_eigenvalues(T, *, drop_perron: bool = True) -> np.ndarray:
    """Eigenvalues of T by descending modulus (then imaginary part), without lambda = 1 by default."""
    w = np.linalg.eigvals(_check_stochastic(T))
    w = w[np.lexsort((-w.imag, -np.abs(w)))]
    if drop_perron:
        w = np.delete(w, int(np.argmin(np.abs(w - 1.0))))
    return w


def bayes_accuracy(T) -> float:
    """Best possible next-token accuracy in stationarity: ``sum_i pi_i max_j T_ij``."""
    t = _check_stochastic(T)
    return float(stationary_distribution(t) @ t.max(axis=1))


def chance_accuracy(T) -> float:
    """Accuracy of always predicting the most common token: ``max_i pi_i``."""
    return float(stationary_distribution(T).max())


def oracle_r2(T) -> float:
    """R^2 ceiling for predicting the next one-hot token from the current state.

    For next-token coordinate j, ``m_j = sum_i pi_i T_ij (1 - T_ij)`` is the variance no predictor
    can remove and ``v_j = pi_j (1 - pi_j)`` the total variance; the ceiling is
    ``1 - mean_j m_j / v_j``. The paper writes ``m = diag(pi) (T * (1 - T))^T 1``, which is the
    same number whenever pi is uniform (as for the chains in the book).
    """
    t = _check_stochastic(T)
    pi = stationary_distribution(t)
    m = (pi[:, None] * t * (1.0 - t)).sum(axis=0)
    v = pi * (1.0 - pi)
    return float(1.0 - np.mean(m / v))


def sample_sequences(T, n_sequences: int, length: int, seed: int) -> np.ndarray:
    """Seeded sample of state sequences (n_sequences, length); the first state is uniform.

    Exactly the sequences of the reference code: NumPy's legacy ``RandomState(seed)`` draws the
    first states with ``choice(n, size=n_sequences)``, then, position by position and sequence by
    sequence, each next state with ``choice(n, p=T[previous])``. ``choice`` with ``p`` spends one
    uniform double per call and returns the first state whose normalised cumulative probability
    exceeds it, so the loop is drawn here one position at a time, with the same doubles.
    """
    t = _check_stochastic(T)
    if n_sequences < 1 or length < 2:
        raise ValueError(f"need n_sequences >= 1 and length >= 2, got {n_sequences}, {length}.")
    rng = np.random.RandomState(seed)
    n = t.shape[0]
    cum = np.cumsum(t, axis=1)
    cum /= cum[:, -1:]
    seq = np.empty((n_sequences, length), dtype=np.int64)
    seq[:, 0] = rng.randint(0, n, size=n_sequences)
    for i in range(1, length):
        u = rng.random_sample(n_sequences)
        seq[:, i] = (u[:, None] >= cum[seq[:, i - 1]]).sum(axis=1)
    return seq
