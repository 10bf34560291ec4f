"""Linear operators fitted inside a core, and their spectra.

A core's computation is identified by fitting ``z_{t+1} = A z_t`` to its coordinates and reading
the eigenvalues of ``A``: for a Markov chain they should match the chain's non-trivial spectrum.

For modular addition the "dynamics" is the cycle of answer classes: the class centroids
``r_c`` of the core coordinates are fitted by a shift operator ``r_{c+1 mod p} ~ A r_c``, and its
eigenvalues near the unit circle are read as rotational (Fourier) modes of frequency ``k``.
``cycle_spectrum`` reads the same frequencies straight from the centroids, without a fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import as_matrix

__all__ = [
    "ShiftFit",
    "class_centroids",
    "cycle_spectrum",
    "fit_dynamics",
    "fit_shift_operator",
    "frequency_count",
    "holdout_block",
    "mode_count",
    "near_unit_circle",
    "rotational_modes",
    "spectrum_distance",
    "unit_circle_fraction",
]


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


# --------------------------------------------------------------------------- modular addition


def _check_int(value, name: str, lower: int) -> int:
    """``value`` as an int >= ``lower``, or a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lower:
        raise ValueError(f"{name} must be an integer >= {lower}, got {value!r}.")
    return int(value)


def class_centroids(coords, labels, n_classes: int) -> np.ndarray:
    """Mean core coordinate of the examples of each class (for modular addition: the answer c).

    Args:
        coords: (N, r) core coordinates, one row per example.
        labels: (N,) integer class of each example, in ``[0, n_classes)``.
        n_classes: number of classes p.

    Returns:
        (n_classes, r) array whose row c is the mean of ``coords`` over the examples with label c.
        Every class must have at least one example; the shift operator needs the whole cycle.
    """
    x = as_matrix(coords, "coords")
    p = _check_int(n_classes, "n_classes", 1)
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != x.shape[0]:
        raise ValueError(
            f"labels must be a 1-D array with one entry per row of coords ({x.shape[0]}), got shape {lab.shape}."
        )
    if lab.dtype.kind not in "iu":
        labf = lab.astype(np.float64)
        if not np.all(np.isfinite(labf)) or np.any(labf != np.round(labf)):
            raise ValueError("labels must be integer class indices; got non-integer values.")
        lab = labf.astype(np.int64)
    bad = (lab < 0) | (lab >= p)
    if bad.any():
        raise ValueError(
            f"labels must lie in [0, {p}) for n_classes={p}; found {int(bad.sum())} outside (e.g. {int(lab[bad][0])})."
        )
    counts = np.bincount(lab, minlength=p)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        shown = ", ".join(str(c) for c in empty[:20]) + (", ..." if empty.size > 20 else "")
        raise ValueError(
            f"{empty.size} class(es) have no examples: {shown}. Use data that covers every class "
            "(e.g. the full test set) or lower n_classes."
        )
    sums = np.zeros((p, x.shape[1]))
    np.add.at(sums, lab, x)
    return sums / counts[:, None]


@dataclass(frozen=True, eq=False)
class ShiftFit:
    """A shift operator ``r_{c+1 mod p} ~ A r_c`` fitted to class centroids on a cycle.

    Attributes:
        A: (k, k) operator in the reduced coordinates ``x = basis^T (r - center)``.
        eigenvalues: (k,) eigenvalues of ``A``, by descending modulus, then ascending angle.
        r2: R^2 on the transitions used for the fit (all p of them without a holdout).
        basis: (r, k) orthonormal SVD directions of the centred inputs of the fitting transitions.
        r2_heldout: R^2 on the transitions inside the held-out block, or None without a holdout.
        center: (r,) mean of the inputs of the fitting transitions, subtracted from every centroid.
        singular_values: all singular values of the centred fitting inputs (the kept ones first).
    """

    A: np.ndarray
    eigenvalues: np.ndarray
    r2: float
    basis: np.ndarray
    r2_heldout: float | None
    center: np.ndarray
    singular_values: np.ndarray

    @property
    def n_components(self) -> int:
        """Number k of SVD components kept."""
        return int(self.A.shape[0])


def holdout_block(p: int, fraction: float = 0.075, seed: int = 0) -> tuple[int, int]:
    """Held-out block ``(start, size)`` for ``fit_shift_operator``, as the reference draws it.

    ``size = round(fraction * p)`` (Python rounding; 4 classes, so 3 transitions, for p = 53 and
    the default 7.5 %), raised to 3 so that the block holds the 2 transitions an R^2 against
    their own mean needs; ``start = RandomState(seed).randint(p)``.
    """
    p = _check_int(p, "p", 3)
    if not (0.0 < float(fraction) < 1.0):
        raise ValueError(f"fraction must be in (0, 1), got {fraction}.")
    size = max(3, int(round(float(fraction) * p)))
    return int(np.random.RandomState(int(seed)).randint(p)), size


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Pooled R^2 against the targets' own mean: 1 - SS_res / SS_tot, sums over rows and columns."""
    ss_tot = float(((y - y.mean(axis=0)) ** 2).sum())
    ss_res = float(((y - pred) ** 2).sum())
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else float("-inf")
    return 1.0 - ss_res / ss_tot


def fit_shift_operator(
    centroids,
    *,
    ridge: float = 0.0,
    rel_tol: float = 1e-3,
    max_components: int | None = None,
    holdout: tuple[int, int] | None = None,
) -> ShiftFit:
    """Fit the cycle shift ``r_{(c+1) mod p} ~ A r_c`` to class centroids and read its spectrum.

    This is the modular-addition operator analysis: if the core represents the answer c by
    Fourier features of frequencies k, the shift acts on them as rotations and ``A`` has
    eigenvalues ``exp(+-2 pi i k / p)``. The conventions are the reference code's:

      1. Fitting transitions: the c -> c+1 (mod p) whose both endpoints lie outside the held-out
         block (all p without a holdout); held-out transitions: both endpoints inside it.
      2. Centre every centroid by one vector, the mean of the fitting transitions' inputs, and
         take the SVD of the centred fitting inputs; keep the directions with singular value
         ``>= rel_tol * s_max``, at most ``max_components`` (default p - 1). Coordinates
         ``x_c = basis^T (r_c - center)``.
      3. Least squares without intercept, ``x_{c+1} ~ A x_c`` over the fitting transitions,
         solved as ``(X^T X + ridge I) coef = X^T Y`` (``A = coef^T``).

    R^2 (both ``r2`` and ``r2_heldout``) is pooled over the k reduced coordinates,
    ``1 - SS_res / SS_tot`` with sums over transitions and components and ``SS_tot`` measured
    from the mean of the scored targets themselves. ``r2`` scores the fitting transitions
    (descriptive, in-sample); ``r2_heldout`` the held-out ones (out-of-sample; can be negative).

    Args:
        centroids: (p, r) centroid of class c in row c, classes in cycle order (p >= 3).
        ridge: ridge penalty >= 0 (0 = ordinary least squares).
        rel_tol: relative singular-value cut-off in [0, 1).
        max_components: upper bound on the number k of SVD directions kept.
        holdout: ``(start, size)``: classes start..start+size-1 (mod p) form the held-out block;
            see ``holdout_block``. ``size`` must be >= 3 (two transitions to score).

    Returns:
        A ``ShiftFit``.
    """
    r_all = as_matrix(centroids, "centroids")
    p = r_all.shape[0]
    if p < 3:
        raise ValueError(f"a cycle needs at least 3 classes (rows of centroids), got {p}.")
    ridge = float(ridge)
    if not (np.isfinite(ridge) and ridge >= 0.0):
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge}.")
    rel_tol = float(rel_tol)
    if not (0.0 <= rel_tol < 1.0):
        raise ValueError(f"rel_tol must be in [0, 1), got {rel_tol}.")
    max_k = p - 1 if max_components is None else _check_int(max_components, "max_components", 1)

    classes = np.arange(p)
    in_block = np.zeros(p, dtype=bool)
    if holdout is not None:
        try:
            start, size = holdout
        except (TypeError, ValueError):
            raise ValueError(f"holdout must be a pair (start, size), got {holdout!r}.") from None
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)):
            raise ValueError(f"holdout start must be an integer class index, got {start!r}.")
        start = int(start) % p
        size = _check_int(size, "holdout size", 0)
        if size < 3:
            raise ValueError(
                f"holdout size must be >= 3 so that the block contains two transitions to score, "
                f"got {size}; use holdout_block(p) for the default block."
            )
        if p - size < 3:
            raise ValueError(
                f"holdout size {size} leaves {p - size} of p={p} classes, fewer than the 3 needed "
                "for two fitting transitions; use a smaller block."
            )
        in_block[(start + np.arange(size)) % p] = True
    nxt = (classes + 1) % p
    fit_src = classes[~in_block & ~in_block[nxt]]

    center = r_all[fit_src].mean(axis=0)
    _, s, vt = np.linalg.svd(r_all[fit_src] - center, full_matrices=False)
    if s[0] == 0.0:
        raise ValueError(
            "all fitting centroids are identical (no spread); the core does not separate the "
            "classes, so there is no shift to fit."
        )
    # A centred set of n points spans at most n - 1 directions: never keep a null one.
    k = max(1, min(int(np.sum(s >= rel_tol * s[0])), max_k, len(fit_src) - 1))
    basis = vt[:k].T
    coords = (r_all - center) @ basis  # (p, k)

    x, y = coords[fit_src], coords[nxt[fit_src]]
    if ridge == 0.0:
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    else:
        coef = np.linalg.solve(x.T @ x + ridge * np.eye(k), x.T @ y)
    a = coef.T

    r2 = _r2(y, x @ coef)
    r2_heldout = None
    if holdout is not None:
        ev_src = classes[in_block & in_block[nxt]]
        r2_heldout = _r2(coords[nxt[ev_src]], coords[ev_src] @ coef)

    eig = np.linalg.eigvals(a)
    eig = eig[np.lexsort((np.angle(eig), -np.round(np.abs(eig), 12)))]
    return ShiftFit(A=a, eigenvalues=eig, r2=r2, basis=basis, r2_heldout=r2_heldout, center=center, singular_values=s)


def _as_eigenvalues(eigenvalues) -> np.ndarray:
    """Eigenvalues as a finite 1-D complex array (empty allowed)."""
    arr = np.atleast_1d(np.asarray(eigenvalues, dtype=complex))
    if arr.ndim != 1:
        raise ValueError(f"eigenvalues must be a 1-D list, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"eigenvalues contain {int((~np.isfinite(arr)).sum())} NaN/Inf values; check the fitted operator."
        )
    return arr


def near_unit_circle(eigenvalues, p: int) -> np.ndarray:
    """Which eigenvalues are rotational candidates: ``| |lambda| - 1 | <= sin(pi / p)``.

    ``sin(pi / p)`` is half the chord between neighbouring p-th roots of unity, so the tolerance
    shrinks with the modulus p. Returns a boolean array, one entry per eigenvalue.
    """
    p = _check_int(p, "p", 2)
    eig = _as_eigenvalues(eigenvalues)
    return np.abs(np.abs(eig) - 1.0) <= np.sin(np.pi / p)


def unit_circle_fraction(eigenvalues, p: int) -> float:
    """Fraction of the eigenvalues that are near the unit circle (see ``near_unit_circle``)."""
    mask = near_unit_circle(eigenvalues, p)
    if mask.size == 0:
        raise ValueError("eigenvalues is empty; the fraction near the unit circle is undefined.")
    return float(mask.mean())


def rotational_modes(eigenvalues, p: int) -> np.ndarray:
    """Occupied non-zero frequency bins of the eigenvalues near the unit circle, sorted.

    An eigenvalue of angle theta falls in bin ``k = round(theta * p / (2 pi)) mod p``; bins k and
    p - k (a conjugate pair, the same oscillation) are folded to ``min(k, p - k)``. Bin 0 (no
    rotation) is dropped, so the result has at most ``p // 2`` entries, each in ``1..p // 2``.
    """
    p = _check_int(p, "p", 2)
    eig = _as_eigenvalues(eigenvalues)
    eig = eig[near_unit_circle(eig, p)]
    bins = np.mod(np.rint(np.angle(eig) * p / (2.0 * np.pi)).astype(np.int64), p)
    folded = np.minimum(bins, p - bins)
    return np.unique(folded[folded != 0]).astype(np.int64)


def mode_count(eigenvalues, p: int) -> int:
    """Number of occupied non-zero frequency bins (``len(rotational_modes(eigenvalues, p))``)."""
    return int(rotational_modes(eigenvalues, p).size)


def cycle_spectrum(centroids) -> np.ndarray:
    """Share of the class centroids' variance at each frequency ``k = 1..p // 2`` of the class cycle.

    An operator-free look at the same Fourier structure the shift operator finds: the centred
    centroids ``r_c`` (rows, classes in cycle order) are Fourier-transformed along c, and the power
    ``sum_d |F_k[d]|^2`` of frequencies k and p - k (the same oscillation) is pooled. A
    representation built from ``cos(2 pi k c / p)``, ``sin(2 pi k c / p)`` features puts all its
    power at those k. The result does not change under a rotation of the feature space or a
    relabelling ``c -> c + s`` of the cycle.

    Args:
        centroids: (p, r) centroid of class c in row c (p >= 2), e.g. from ``class_centroids``.

    Returns:
        (p // 2,) non-negative shares that sum to 1; entry ``k - 1`` is frequency k.
    """
    r = as_matrix(centroids, "centroids")
    p = r.shape[0]
    if p < 2:
        raise ValueError(f"a cycle needs at least 2 classes (rows of centroids), got {p}.")
    power = (np.abs(np.fft.fft(r - r.mean(axis=0), axis=0)) ** 2).sum(axis=1)  # (p,), power[0] = 0
    k = np.arange(1, p // 2 + 1)
    pooled = power[k] + np.where(2 * k == p, 0.0, power[(p - k) % p])  # p/2 (even p) is its own pair
    total = pooled.sum()
    if not total > 0.0:
        raise ValueError("all centroids are identical (no spread); there is no frequency content to measure.")
    return pooled / total


def frequency_count(shares, share: float = 0.9) -> int:
    """Fewest frequencies that together hold at least ``share`` of the power (see ``cycle_spectrum``).

    Args:
        shares: non-negative shares per frequency that sum to 1, as ``cycle_spectrum`` returns.
        share: the fraction of the power to cover, in (0, 1].
    """
    s = np.asarray(shares, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"shares must be a non-empty 1-D array, got shape {s.shape}.")
    if not np.all(np.isfinite(s)) or np.any(s < 0) or not np.isclose(s.sum(), 1.0, rtol=0, atol=1e-9):
        raise ValueError("shares must be finite, non-negative and sum to 1; pass cycle_spectrum(centroids).")
    share = float(share)
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}.")
    covered = np.cumsum(np.sort(s)[::-1])
    return int(min(np.searchsorted(covered, share - 1e-12) + 1, s.size))
