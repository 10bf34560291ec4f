"""Checks for the exercises of the chapter "How ACE works: activity, relevance and balanced truncation"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ace import energy_rank, from_moments
from ..compare import principal_angles
from ..experiments.ace_method import decoy_activations
from ..experiments.ace_method import keep_r2 as library_keep_r2
from ..linear import gramians, random_stable_system
from . import Case, WrongAnswer, check_function

__all__ = ["check_ace_core", "check_energy_rank", "check_keep_r2"]


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
        (_psd(5, 3, 7), _psd(5, 5, 8), 2, "an activity of rank 3 in 5 dimensions: a singular matrix"),
    ]


def _orthonormal_basis(basis, d: int, r: int) -> np.ndarray:
    b = np.asarray(basis, dtype=float)
    if b.shape != (d, r):
        raise WrongAnswer(
            f"the basis you returned has shape {b.shape}; a rank-{r} core in {d} dimensions is a ({d}, {r}) matrix."
        )
    q, s, _ = np.linalg.svd(b, full_matrices=False)
    if s[-1] < 1e-10 * s[0]:
        raise WrongAnswer(f"the columns of your basis are linearly dependent: they span fewer than {r} directions.")
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


def _linalg_advice(exc: np.linalg.LinAlgError) -> str:
    """What a LinAlgError in the student's ace_core means here, without guessing which routine
    raised it: the moments of the check are singular, and some routines refuse that."""
    advice = (
        f"a linear-algebra routine in your function failed ({exc}). Some of the check's moment "
        "matrices are singular: positive semi-definite, with eigenvalues 0 (round-off can make them "
        "slightly negative)."
    )
    if "positive definite" in str(exc):
        advice += (
            " If you used a Cholesky factorisation, it needs a positive-definite matrix: build the "
            "square-root factor from eigh instead and clip tiny negative eigenvalues to 0."
        )
    else:
        advice += (
            " If you inverted or solved with one of them, or factorised it with Cholesky, use a "
            "square-root factor from eigh instead: it exists for every such matrix."
        )
    return advice


def _answer(student: Callable, a: np.ndarray, s: np.ndarray, r: int):
    """The student's ``ace_core`` on copies of the moments (an in-place edit must not change the
    cases), a LinAlgError reported in neutral words."""
    try:
        return student(a.copy(), s.copy(), r)
    except np.linalg.LinAlgError as exc:
        raise np.linalg.LinAlgError(_linalg_advice(exc)) from exc


def check_ace_core(student: Callable) -> bool:
    """Check ``ace_core(activity, relevance, r)``, which returns ``(singular_values, basis)``: the
    singular values of ``L^T Gamma`` (descending) and a (D, r) basis of the rank-r core; any basis
    of the same subspace passes (the check orthonormalises it)."""
    cases = _core_cases()
    sv_cases = [Case((a, s, r), from_moments(a, s, rank=r, eps=0).singular_values[:r], what) for a, s, r, what in cases]

    def leading_values(a, s, r):  # copies: a student's in-place edit must not change the cases
        return np.asarray(_answer(student, a, s, r)[0], dtype=float).ravel()[:r]

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
        return _angle_to_core(_answer(student, a, s, r)[1], a, s, r)

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


def _tanh_readout(direction: np.ndarray, mean: np.ndarray, scale: float) -> Callable:
    """The chapter's read-out: ``tanh((h - mean) . direction / scale)``, one number per row."""
    return lambda h: np.tanh((np.asarray(h) - mean) @ direction / scale)


def _keep_cases() -> list[tuple[Callable, np.ndarray, np.ndarray, str]]:
    """(read-out, activations, basis, what): the chapter's ACE-versus-PCA example, then random
    and edge cases."""
    h, axes = decoy_activations(6, 4000, loud_std=3.0, quiet_std=0.3, seed=0)  # the book's example
    readout = _tanh_readout(axes[:, -1], h.mean(axis=0), 0.3)
    ace_direction = np.cov(h.T) @ axes[:, -1:]  # a rank-one relevance: the core is span(A w)
    rng = np.random.default_rng(5)
    g = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 5)) + rng.normal(0, 20, 5)  # far from 0
    w = rng.standard_normal(5)
    linear = lambda x: np.asarray(x) @ w  # noqa: E731
    bent = lambda x: np.sin(np.asarray(x) @ w / 5)  # noqa: E731
    sub = np.linalg.qr(rng.standard_normal((5, 2)))[0]
    return [
        (readout, h, ace_direction / np.linalg.norm(ace_direction), "the chapter's example, ACE's direction"),
        (readout, h, axes[:, :1], "the chapter's example, PCA's first direction"),
        (linear, g, sub, "a linear read-out of activations far from 0, a random 2-D subspace"),
        (bent, g, sub @ np.array([[3.0, 1.0], [0.0, 0.2]]), "the same subspace, by a basis that is not orthonormal"),
        (bent, g, rng.standard_normal((5, 5)), "a basis of the whole space: everything is kept"),
        (linear, g, 10 * w[:, None], "the read-out's own direction, as a vector of length 10"),
    ]


def _uncentred_keep(f, h, basis) -> float:
    q = np.linalg.qr(basis)[0]
    y, y_kept = f(h), f(h @ q @ q.T)
    return float(1 - np.sum((y - y_kept) ** 2) / np.sum((y - y.mean()) ** 2))


def _raw_projector(f, h, basis) -> float:
    mean = h.mean(axis=0)
    y, y_kept = f(h), f(mean + (h - mean) @ basis @ basis.T)
    return float(1 - np.sum((y - y_kept) ** 2) / np.sum((y - y.mean()) ** 2))


def _uncentred_total(f, h, basis) -> float:
    q, mean = np.linalg.qr(basis)[0], h.mean(axis=0)
    y, y_kept = f(h), f(mean + (h - mean) @ q @ q.T)
    return float(1 - np.sum((y - y_kept) ** 2) / np.sum(y**2))


def _removed(f, h, basis) -> float:
    q, mean = np.linalg.qr(basis)[0], h.mean(axis=0)
    y, y_kept = f(h), f(h - (h - mean) @ q @ q.T)
    return float(1 - np.sum((y - y_kept) ** 2) / np.sum((y - y.mean()) ** 2))


def check_keep_r2(student: Callable) -> bool:
    """Check ``keep_r2(readout, h, basis)``: the R^2 of ``readout`` after the centred core-only
    intervention ``h -> mean + P (h - mean)`` onto ``span(basis)`` (any basis of the subspace)."""
    cases = [  # the library takes an orthonormal basis of the subspace
        Case((f, h, b), library_keep_r2(f, h, np.linalg.qr(b)[0], h.mean(axis=0)), what)
        for f, h, b, what in _keep_cases()
    ]

    def answer(f, h, b):  # copies: a student's in-place centring must not change the cases
        return student(f, h.copy(), b.copy())

    def near(got, value) -> bool:
        return bool(np.isclose(float(got), value, rtol=1e-6, atol=1e-9))

    hints = [
        (
            lambda got, c: near(got, _uncentred_keep(*c.args)),
            "you projected h itself, so the mean was lost too; keep the mean: h_kept = mean + P (h - mean).",
        ),
        (
            lambda got, c: near(got, _raw_projector(*c.args)),
            "B B^T is a projector only when the columns of B are orthonormal; orthonormalise the basis first "
            "(e.g. the Q of np.linalg.qr).",
        ),
        (
            lambda got, c: near(got, _uncentred_total(*c.args)),
            "the denominator is the read-out's variation around its mean, sum (f(h) - mean f)^2, not sum f(h)^2.",
        ),
        (
            lambda got, c: near(got, _removed(*c.args)),
            "you removed the subspace (h - P (h - mean)); keep only it: mean + P (h - mean).",
        ),
    ]
    return check_function(answer, cases, name="keep_r2", hints=hints, rtol=1e-6, atol=1e-9)
