"""Linear operators fitted inside a core, and their spectra.

A core's computation is identified by fitting ``z_{t+1} = A z_t`` to its coordinates and reading
the eigenvalues of ``A``: for a Markov chain they should match the chain's non-trivial spectrum.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_matrix
from .tasks.markov import stationary_distribution

__all__ = ["fit_dynamics", "oracle_r2", "spectrum_distance"]


def fit_dynamics(z_t, z_next, center: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares operator ``z_next ~ A z_t``.

    Args:
        z_t, z_next: (N, r) consecutive core coordinates.
        center: subtract each array's mean first (the paper's choice).

    Returns:
        ``(A, eigenvalues, r2)``: A is (r, r); eigenvalues sorted by descending modulus;
        r2 is the coefficient of determination averaged over the r output dimensions.
    """
    x, y = as_matrix(z_t, "Z_t"), as_matrix(z_next, "Z_next")
    if x.shape != y.shape:
        raise ValueError(f"Z_t and Z_next must have the same shape, got {x.shape} and {y.shape}.")
    if x.shape[0] <= x.shape[1]:
        raise ValueError(f"need more transitions than dimensions, got {x.shape[0]} for r={x.shape[1]}.")
    if center:
        x, y = x - x.mean(axis=0), y - y.mean(axis=0)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)  # y ~ x @ coef, so A = coef^T
    a = coef.T
    pred = x @ coef
    ss_res = ((y - pred) ** 2).sum(axis=0)
    ss_tot = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    r2 = float(np.mean(1.0 - ss_res / ss_tot))
    eig = np.linalg.eigvals(a)
    eig = eig[np.lexsort((-eig.imag, -np.abs(eig)))]
    return a, eig, r2


def oracle_r2(T) -> float:
    """R^2 ceiling for predicting the next one-hot token from the current state.

    For next-token coordinate j, ``m_j = sum_i pi_i T_ij (1 - T_ij)`` is the variance no predictor
    can remove and ``v_j = pi_j (1 - pi_j)`` the total variance; the ceiling is
    ``1 - mean_j m_j / v_j``. The paper writes ``m = diag(pi) (T * (1 - T))^T 1``, which is the
    same number whenever pi is uniform (as for the chains in the book).
    """
    t = as_matrix(T, "T")
    pi = stationary_distribution(t)
    m = (pi[:, None] * t * (1.0 - t)).sum(axis=0)
    v = pi * (1.0 - pi)
    return float(1.0 - np.mean(m / v))


def spectrum_distance(eigenvalues, reference) -> float:
    """Largest distance between matched eigenvalues (optimal one-to-one matching), in C.

    Both lists must have the same length; the matching minimises the total distance so the
    order in which the eigenvalues are listed does not matter.
    """
    from scipy.optimize import linear_sum_assignment

    a = np.asarray(eigenvalues, dtype=complex).ravel()
    b = np.asarray(reference, dtype=complex).ravel()
    if a.shape != b.shape:
        raise ValueError(f"cannot match {a.size} eigenvalues with {b.size} reference values.")
    cost = np.abs(a[:, None] - b[None, :])
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].max())
