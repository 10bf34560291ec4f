"""Checks for the exercises of the chapter "How ACE works: activity, relevance and balanced truncation"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ace import energy_rank, from_moments
from ..compare import principal_angles
from ..linear import gramians, random_stable_system
from . import Case, check_function

__all__ = ["check_ace_core", "check_energy_rank"]


def _book_system_gramians() -> tuple[np.ndarray, np.ndarray]:
    """The two Gramians of the chapter's random system (its default parameters)."""
    return gramians(*random_stable_system(12, 2, 2, seed=0, spectral_radius=0.9))


def _book_hankel() -> np.ndarray:
    wc, wo = _book_system_gramians()
    return from_moments(wc, wo, eps=0).singular_values


def _random_spectrum(n: int, seed: int) -> np.ndarray:
    """Descending singular values spread over a few decades, as a trained layer's often are."""
    return np.sort(np.exp(np.random.default_rng(seed).uniform(-4, 2, n)))[::-1]


def _count_reaching(values: np.ndarray, threshold: float, *, strict: bool = False) -> int:
    """How many leading ``values`` it takes for their cumulative share to reach ``threshold``
    (``strict``: to exceed it); used to recognise the usual mistakes."""
    share = np.cumsum(values) / np.sum(values)
    hit = share > threshold + 1e-12 if strict else share >= threshold - 1e-12
    return int(np.argmax(hit)) + 1 if hit.any() else len(values) + 1


def check_energy_rank(student: Callable) -> bool:
    """Check ``energy_rank(singular_values, threshold)``: the smallest r whose r leading squared
    singular values (given in descending order) hold at least ``threshold`` of their sum."""
    spectra = [
        (_book_hankel(), 0.99, "the chapter's Hankel singular values, threshold 0.99"),
        (_random_spectrum(20, 1), 0.9, "20 random singular values, threshold 0.9"),
        (_random_spectrum(50, 2), 0.999, "50 random singular values, threshold 0.999"),
        (np.ones(4), 0.5, "four equal values, threshold 0.5: two of them hold exactly half"),
        (_random_spectrum(30, 3), 1.0, "30 random values, threshold 1.0: every one is needed"),
        (np.array([3.0, 2.0, 1.0, 0.0]), 1.0, "threshold 1.0 with a trailing zero, which adds no energy"),
        (np.array([2.5]), 0.99, "a single value"),
        (np.array([5.0, 0.0, 0.0, 0.0]), 0.99, "all the energy in the first value"),
    ]
    cases = [Case((s, t), energy_rank(s, t), what) for s, t, what in spectra]
    hints = [
        (
            lambda got, c: got == _count_reaching(np.asarray(c.args[0]), c.args[1]) and got != c.expected,
            "you summed the singular values; the energy is the sum of their squares.",
        ),
        (lambda got, c: got == c.expected - 1, "you returned an index (0-based); the rank is a count, one more."),
        (
            lambda got, c: c.args[1] < 1 and got == _count_reaching(np.asarray(c.args[0]) ** 2, c.args[1], strict=True),
            "the share must reach the threshold (>=), not exceed it (>).",
        ),
        (
            lambda got, c: c.args[1] == 1.0 and got != c.expected,
            "with threshold 1 a cumulative share can fall short of 1 by rounding (0.9999999999999999): "
            "compare with a small tolerance, e.g. share >= threshold - 1e-12; zeros add no energy.",
        ),
    ]
    return check_function(lambda s, t: student(np.array(s), t), cases, name="energy_rank", hints=hints)


def _psd(d: int, rank: int, seed: int, spread: float = 2.0) -> np.ndarray:
    """A random symmetric positive semi-definite matrix of the given rank, eigenvalues spread
    over ``spread`` decades, so that its eigenvectors differ from those of the identity."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = np.zeros(d)
    w[:rank] = np.logspace(0, -spread, rank)
    return (q * w) @ q.T


def _decoy_moments() -> tuple[np.ndarray, np.ndarray]:
    """The chapter's ACE-versus-PCA example in moments: activity with a loud and a quiet axis,
    relevance of rank one along the quietest."""
    rng = np.random.default_rng(3)
    axes, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    activity = (axes * np.geomspace(3.0, 0.3, 6) ** 2) @ axes.T
    w = axes[:, -1]
    return activity, np.outer(w, w)


def _core_cases() -> list[tuple[np.ndarray, np.ndarray, int, str]]:
    wc, wo = _book_system_gramians()
    activity, relevance = _decoy_moments()
    return [
        (wc, wo, 4, "the chapter's Gramians, rank 4"),
        (activity, relevance, 1, "the ACE-versus-PCA example: a loud axis and a rank-one read-out"),
        (_psd(8, 8, 4), _psd(8, 8, 5), 3, "a random full-rank pair in 8 dimensions, rank 3"),
        (np.eye(5), _psd(5, 5, 6), 2, "activity the identity: the core is the top of the relevance"),
        (_psd(5, 3, 7), _psd(5, 5, 8), 2, "an activity of rank 3 in 5 dimensions (no Cholesky factor)"),
    ]


def _orthonormal_basis(basis, d: int, r: int) -> np.ndarray:
    b = np.asarray(basis, dtype=float)
    if b.shape != (d, r):
        raise ValueError(f"the basis has shape {b.shape}; a rank-{r} core in {d} dimensions is a ({d}, {r}) matrix.")
    q, s, _ = np.linalg.svd(b, full_matrices=False)
    if s[-1] < 1e-10 * s[0]:
        raise ValueError("the basis's columns are linearly dependent: they span fewer than r directions.")
    return q


def _top(m: np.ndarray, r: int) -> np.ndarray:
    """The top-r eigenvectors of a symmetric matrix."""
    w, v = np.linalg.eigh(m)
    return v[:, np.argsort(w)[::-1][:r]]


def _angle_to_core(basis: np.ndarray, activity, relevance, r: int) -> float:
    expected = from_moments(activity, relevance, rank=r, eps=0).basis
    return float(np.max(principal_angles(_orthonormal_basis(basis, len(activity), r), expected)))


def _whitened_core(activity, relevance, r: int) -> np.ndarray:
    """The usual mistake: the left singular vectors U_r of L^T Gamma, not mapped back by L."""
    w, v = np.linalg.eigh(activity)
    lf = v * np.sqrt(np.clip(w, 0, None))
    w, v = np.linalg.eigh(relevance)
    gf = v * np.sqrt(np.clip(w, 0, None))
    return np.linalg.svd(lf.T @ gf)[0][:, :r]


def check_ace_core(student: Callable) -> bool:
    """Check ``ace_core(activity, relevance, r)``, which returns ``(singular_values, basis)``: the
    singular values of ``L^T Gamma`` (descending) and a (D, r) basis of the rank-r core; any basis
    of the same subspace passes (the check orthonormalises it)."""
    cases = _core_cases()
    sv_cases = [Case((a, s, r), from_moments(a, s, rank=r, eps=0).singular_values[:r], what) for a, s, r, what in cases]

    def leading_values(a, s, r):  # copies: a student's in-place edit must not change the cases
        try:
            values = student(a.copy(), s.copy(), r)[0]
        except np.linalg.LinAlgError as exc:  # most often Cholesky on a singular moment
            raise np.linalg.LinAlgError(
                f"{exc}. A moment matrix here is only positive semi-definite (some eigenvalues are 0), "
                "which Cholesky refuses: build the square-root factor from eigh and clip tiny negative "
                "eigenvalues to 0."
            ) from exc
        return np.asarray(values, dtype=float).ravel()[:r]

    sv_hints = [
        (
            lambda got, c: np.allclose(got, c.expected**2, rtol=1e-6),
            "these are the squares: the eigenvalues of L^T S L are sigma^2; take square roots.",
        ),
        (
            lambda got, c: len(got) > 1 and bool(np.all(np.diff(got) > 0)),
            "return the singular values in descending order, as the SVD gives them.",
        ),
    ]
    if not check_function(leading_values, sv_cases, name="ace_core (singular values)", hints=sv_hints, rtol=1e-6):
        return False

    angle_cases = [
        Case((a, s, r), 0.0, what + "; the value is the largest angle to ACE's core, degrees")
        for a, s, r, what in cases
    ]

    def largest_angle(a, s, r):
        return _angle_to_core(student(a.copy(), s.copy(), r)[1], a, s, r)

    basis_hints = [
        (
            lambda got, c: np.isclose(got, _angle_to_core(_whitened_core(*c.args), *c.args), atol=1e-4),
            "your basis is U_r, the core in the whitened coordinates of L; map it back: the core is span(L U_r).",
        ),
        (
            lambda got, c: np.isclose(got, _angle_to_core(_top(c.args[0], c.args[2]), *c.args), atol=1e-4),
            "your basis is the top of the activity alone (PCA); the core weighs activity by relevance.",
        ),
        (
            lambda got, c: np.isclose(got, _angle_to_core(_top(c.args[1], c.args[2]), *c.args), atol=1e-4),
            "your basis is the top of the relevance alone; the core weighs relevance by activity.",
        ),
    ]
    return check_function(largest_angle, angle_cases, name="ace_core (basis)", hints=basis_hints, atol=1e-5)
