"""Discrete-time linear time-invariant (LTI) systems: the exactly solvable case of ACE.

For ``x_{t+1} = A x_t + B u_t``, ``y_t = C x_t`` with a stable ``A`` (spectral radius < 1):

* the *reachability* (controllability) Gramian ``Wc = sum_k A^k B B^T (A^T)^k`` solves
  ``A Wc A^T - Wc + B B^T = 0``; it is the stationary state covariance when ``u`` is white noise
  of unit variance -- the *activity* of the state;
* the *observability* Gramian ``Wo = sum_k (A^T)^k C^T C A^k`` solves ``A^T Wo A - Wo + C^T C = 0``;
  it is ``O^T O`` for the Jacobian ``O = [C; C A; C A^2; ...]`` of all future outputs with respect
  to the current state -- the *relevance* of the state;
* the Hankel singular values are ``sqrt(eig(Wc Wo))`` and balanced truncation keeps the states
  with the largest ones.

This module is written independently of :mod:`corelib.ace` so that it can check it: Gramians come
from :func:`scipy.linalg.solve_discrete_lyapunov` and balanced truncation uses the square-root
method with *Cholesky* factors (ACE uses symmetric ``eigh`` factors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ._checks import as_matrix

__all__ = [
    "BalancedTruncation",
    "balanced_truncation",
    "gramians",
    "hankel_singular_values",
    "observability_matrix",
    "pca_basis",
    "random_stable_system",
    "simulate_states",
    "spectral_radius",
]


def spectral_radius(A) -> float:
    """Largest eigenvalue modulus of a square matrix."""
    a = as_matrix(A, "A")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be square (n x n), got shape {a.shape}.")
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def _check_system(A, B, C) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate shapes and stability of ``(A, B, C)``; return float64 copies."""
    a = as_matrix(A, "A")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be square (n x n), got shape {a.shape}.")
    n = a.shape[0]
    b = as_matrix(B, "B")
    c = as_matrix(C, "C")
    if b.shape[0] != n:
        raise ValueError(f"B must have n = {n} rows (one per state) to match A, got shape {b.shape}.")
    if c.shape[1] != n:
        raise ValueError(f"C must have n = {n} columns (one per state) to match A, got shape {c.shape}.")
    rho = spectral_radius(a)
    if rho >= 1.0:
        raise ValueError(
            f"A is not stable: its spectral radius is {rho:.6g} >= 1, so the infinite-horizon "
            "Gramians do not exist (discrete time needs all |eigenvalues| < 1)."
        )
    return a, b, c


def random_stable_system(
    n: int, m: int, l: int, *, seed: int, spectral_radius: float = 0.9
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random stable discrete-time system ``(A, B, C)`` with ``n`` states, ``m`` inputs, ``l`` outputs.

    ``A`` is a Gaussian matrix rescaled so that its spectral radius is exactly ``spectral_radius``;
    ``B`` and ``C`` are Gaussian with variance ``1/n``. Seeded: the same arguments give the same
    system.
    """
    for name, value in (("n", n), ("m", m), ("l", l)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    if not (0.0 < spectral_radius < 1.0):
        raise ValueError(f"spectral_radius must be in (0, 1) for a stable system, got {spectral_radius}.")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    a *= spectral_radius / np.max(np.abs(np.linalg.eigvals(a)))
    b = rng.standard_normal((n, m)) / np.sqrt(n)
    c = rng.standard_normal((l, n)) / np.sqrt(n)
    return a, b, c


def gramians(A, B, C) -> tuple[np.ndarray, np.ndarray]:
    """Reachability and observability Gramians ``(Wc, Wo)`` of a stable discrete-time system.

    ``Wc`` solves ``A Wc A^T - Wc + B B^T = 0`` and ``Wo`` solves ``A^T Wo A - Wo + C^T C = 0``
    (:func:`scipy.linalg.solve_discrete_lyapunov`). Both are returned exactly symmetric.

    Raises:
        ValueError: if the shapes do not match or ``A`` is not stable.
    """
    a, b, c = _check_system(A, B, C)
    wc = scipy.linalg.solve_discrete_lyapunov(a, b @ b.T)
    wo = scipy.linalg.solve_discrete_lyapunov(a.T, c.T @ c)
    return (wc + wc.T) / 2, (wo + wo.T) / 2


def _cholesky(w: np.ndarray, name: str) -> np.ndarray:
    try:
        return np.linalg.cholesky(w)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"the {name} Gramian is not (numerically) positive definite: the system is not "
            f"minimal (some state is {'unreachable' if name == 'reachability' else 'unobservable'}"
            ", or nearly so), so balanced truncation by the square-root method is undefined. "
            "Remove those states first (e.g. a Kalman decomposition) or use a smaller system."
        ) from None


@dataclass(frozen=True)
class BalancedTruncation:
    """Result of :func:`balanced_truncation`.

    Attributes:
        hsv: all n Hankel singular values, descending.
        T: (n, n) balancing transform: balanced state ``x_b = T x``; then
            ``T Wc T^T = T^{-T} Wo T^{-1} = diag(hsv)``.
        T_inv: (n, n) inverse of ``T``; its columns are the balanced states in original coordinates.
        basis: (n, r) orthonormal basis of the dominant subspace ``span(T_inv[:, :r])``.
        A_r, B_r, C_r: the truncated (r-state) system ``(T A T^{-1}, T B, C T^{-1})`` restricted to
            the leading r balanced states.
    """

    hsv: np.ndarray
    T: np.ndarray
    T_inv: np.ndarray
    basis: np.ndarray
    A_r: np.ndarray
    B_r: np.ndarray
    C_r: np.ndarray

    @property
    def rank(self) -> int:
        """Number r of retained states."""
        return int(self.basis.shape[1])


def _square_root_svd(A, B, C):
    a, b, c = _check_system(A, B, C)
    wc, wo = gramians(a, b, c)
    lc = _cholesky(wc, "reachability")
    lo = _cholesky(wo, "observability")
    u, s, vt = np.linalg.svd(lo.T @ lc)
    return a, b, c, lc, lo, u, s, vt.T


def balanced_truncation(A, B, C, r: int) -> BalancedTruncation:
    """Balanced truncation to ``r`` states by the square-root method (Cholesky factors).

    With ``Wc = Lc Lc^T`` and ``Wo = Lo Lo^T`` (Cholesky) and the SVD ``Lo^T Lc = U S V^T``, the
    balancing transform is ``T = S^{-1/2} U^T Lo^T`` with inverse ``T^{-1} = Lc V S^{-1/2}``.

    Raises:
        ValueError: bad shapes, unstable ``A``, ``r`` outside ``[1, n]``, or a non-minimal system
            (a singular Gramian has no Cholesky factor).
    """
    a, b, c, lc, lo, u, s, v = _square_root_svd(A, B, C)
    n = a.shape[0]
    if int(r) != r or not (1 <= r <= n):
        raise ValueError(f"r must be an integer in [1, {n}] (the number of states), got {r}.")
    r = int(r)
    if s[-1] <= 0:
        raise ValueError("a Hankel singular value is zero: the system is not minimal.")
    root = np.sqrt(s)
    t = (u / root).T @ lo.T
    t_inv = (lc @ v) / root
    basis, _ = np.linalg.qr(t_inv[:, :r])
    return BalancedTruncation(
        hsv=s,
        T=t,
        T_inv=t_inv,
        basis=basis,
        A_r=t[:r] @ a @ t_inv[:, :r],
        B_r=t[:r] @ b,
        C_r=c @ t_inv[:, :r],
    )


def hankel_singular_values(A, B, C) -> np.ndarray:
    """Hankel singular values (descending): the singular values of ``Lo^T Lc`` (Cholesky factors).

    Their squares are the eigenvalues of ``Wc Wo``.
    """
    return _square_root_svd(A, B, C)[6]


def observability_matrix(A, C, horizon: int) -> np.ndarray:
    """Stacked ``[C; C A; ...; C A^{horizon-1}]`` of shape (horizon * l, n).

    This is the Jacobian of the next ``horizon`` outputs with respect to the current state (with
    zero future input); ``O^T O`` converges to the observability Gramian as the horizon grows.
    """
    a = as_matrix(A, "A")
    c = as_matrix(C, "C")
    if a.shape[0] != a.shape[1] or c.shape[1] != a.shape[0]:
        raise ValueError(f"A must be n x n and C l x n, got shapes {a.shape} and {c.shape}.")
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon}.")
    blocks, row = [], c
    for _ in range(int(horizon)):
        blocks.append(row)
        row = row @ a
    return np.vstack(blocks)


def simulate_states(
    A, B, n_steps: int, *, seed: int, n_runs: int | None = None, burn_in: int | None = None
) -> np.ndarray:
    """States of ``x_{t+1} = A x_t + B u_t`` driven by unit white noise ``u``.

    Returns (n_steps, n) for a single run, or (n_runs, n_steps, n) for ``n_runs`` independent
    runs simulated together. Each run starts at zero and its first ``burn_in`` steps (default:
    enough for ``rho^k < 1e-8``) are dropped, so the rows are (approximately) stationary with
    covariance ``Wc``.
    """
    a = as_matrix(A, "A")
    b = as_matrix(B, "B")
    if a.shape[0] != a.shape[1] or b.shape[0] != a.shape[0]:
        raise ValueError(f"A must be n x n and B n x m, got shapes {a.shape} and {b.shape}.")
    if int(n_steps) != n_steps or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps}.")
    runs = 1 if n_runs is None else n_runs
    if int(runs) != runs or runs < 1:
        raise ValueError(f"n_runs must be a positive integer, got {n_runs}.")
    rho = spectral_radius(a)
    if rho >= 1.0:
        raise ValueError(f"A is not stable (spectral radius {rho:.6g} >= 1); the states would diverge.")
    if burn_in is None:
        burn_in = int(np.ceil(np.log(1e-8) / np.log(max(rho, 1e-3)))) if rho > 0 else 1
    rng = np.random.default_rng(seed)
    total = int(n_steps) + int(burn_in)
    noise = rng.standard_normal((total, int(runs), b.shape[1])) @ b.T  # (time, run, n)
    out = np.empty((total, int(runs), a.shape[0]))
    x = np.zeros((int(runs), a.shape[0]))
    a_t = a.T
    for t in range(total):
        out[t] = x
        x = x @ a_t + noise[t]
    out = out[burn_in:].transpose(1, 0, 2)
    return out[0] if n_runs is None else out


def pca_basis(H, r: int) -> np.ndarray:
    """Orthonormal (D, r) basis of the top-``r`` principal directions of the centred rows of ``H``.

    Columns are ordered by decreasing variance; each column's sign is fixed so that its largest
    entry (in absolute value) is positive.
    """
    h = as_matrix(H, "activations H")
    n, d = h.shape
    if n < 2:
        raise ValueError(f"PCA needs at least 2 samples, got {n}.")
    if int(r) != r or not (1 <= r <= min(d, n)):
        raise ValueError(f"r must be an integer in [1, {min(d, n)}] (min of D and N), got {r}.")
    _, _, vt = np.linalg.svd(h - h.mean(axis=0), full_matrices=False)
    basis = vt[: int(r)].T
    idx = np.argmax(np.abs(basis), axis=0)
    return basis * np.sign(basis[idx, np.arange(basis.shape[1])])
