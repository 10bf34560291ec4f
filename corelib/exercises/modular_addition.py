"""Checks for the exercises of the chapter "Modular addition": the shift operator, its rotational
modes and the grokking epoch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..experiments.modular_runs import grokking_epoch as _records_grokking_epoch
from ..operators import fit_shift_operator as _library_fit
from ..operators import rotational_modes as _library_modes
from . import Case, check_function

__all__ = ["check_grokking_epoch", "check_rotational_modes", "check_shift_operator"]

NONE_SHOWN_AS = -1  # how a check shows an answer of None (the comparison needs a number)


def _root(k: float, p: int, radius: float = 1.0) -> complex:
    """``radius * exp(2 pi i k / p)``: a rotation by k steps of 2 pi / p (k need not be whole)."""
    return radius * np.exp(2j * np.pi * k / p)


def _pair(k: float, p: int, radius: float = 1.0) -> list[complex]:
    """A conjugate pair, as a real operator has it."""
    z = _root(k, p, radius)
    return [z, np.conj(z)]


def _variant(eig: np.ndarray, p: int, *, band: bool = True, fold: bool = True, drop_zero: bool = True, rnd=np.rint):
    """The mode list with one step of the recipe changed (to recognise a typical mistake)."""
    eig = np.asarray(eig, dtype=complex)
    if band:
        eig = eig[np.abs(np.abs(eig) - 1) <= np.sin(np.pi / p)]
    bins = np.mod(rnd(np.angle(eig) * p / (2 * np.pi)).astype(int), p)
    if fold:
        bins = np.minimum(bins, p - bins)
    if drop_zero:
        bins = bins[bins != 0]
    return np.unique(bins).astype(float)


def _random_operator_spectrum(p: int, seed: int) -> np.ndarray:
    """Eigenvalues like those of a fitted shift operator: a few pairs near p-th roots of unity
    (angles off by less than half a bin, radii inside the band), others well inside the circle."""
    rng = np.random.default_rng(seed)
    ks = rng.choice(np.arange(1, p // 2 + 1), size=4, replace=False)
    band = np.sin(np.pi / p)
    out = []
    for k in ks:
        out += _pair(k + rng.uniform(-0.4, 0.4), p, 1 + rng.uniform(-0.8, 0.8) * band)
    for _ in range(3):
        out += _pair(rng.uniform(0, p / 2), p, rng.uniform(0.1, 0.8))
    return np.array(out + [rng.uniform(-0.5, 0.5)])  # and one real eigenvalue


def check_rotational_modes(rotational_modes: Callable) -> bool:
    """Check ``rotational_modes(eigenvalues, p)``: the sorted distinct frequencies k (1..p // 2) of
    the eigenvalues within ``sin(pi / p)`` of the unit circle, bins k and p - k folded to one."""
    p = 53
    band = np.sin(np.pi / p)
    inputs = [
        (np.array(_pair(3, p)), p, "the planted clock: one rotation by 2 pi 3 / 53"),
        (np.array([_root(3, p), _root(50, p)]), p, "angles 3 and 50 steps: 50 = 53 - 3 is the same rotation"),
        (np.array([1.0, 0.5, -0.2 + 0.1j]), p, "an eigenvalue 1 (no rotation) and two well inside the circle"),
        (
            np.array([*_pair(7, p, 1 + 0.9 * band), *_pair(11, p, 1 - 1.5 * band)]),
            p,
            "two pairs: just inside the band, and just outside it",
        ),
        (np.array(_pair(4.6, p)), p, "an angle of 4.6 steps: the nearest bin is 5"),
        (np.array([*_pair(1, 7), *_pair(2, 7), *_pair(3, 7)]), 7, "p = 7: every frequency 1..3 once"),
        (np.array([-1.0, *_pair(2, 10)]), 10, "p = 10: eigenvalue -1 is frequency 5, its own partner"),
        (_random_operator_spectrum(p, 1), p, "a random operator, p = 53"),
        (_random_operator_spectrum(31, 2), 31, "a random operator, p = 31"),
    ]
    cases = [Case((e, q), _library_modes(e, q).astype(float), what) for e, q, what in inputs]

    def as_sorted(eig, q):
        got = rotational_modes(eig, q)
        return np.sort(np.asarray(got, dtype=float).ravel()) if np.ndim(got) else got

    def differs_by(**change):
        def test(got, case):
            wrong = _variant(*case.args, **change)
            return not np.array_equal(wrong, case.expected) and np.array_equal(got, wrong)

        return test

    hints = [
        (lambda got, c: np.ndim(got) == 0, "return the array of frequencies, not a single number."),
        (differs_by(fold=False), "fold bin k onto p - k (keep min(k, p - k)): a conjugate pair is one rotation."),
        (differs_by(drop_zero=False), "drop bin 0: an eigenvalue near 1 (angle 0) is no rotation."),
        (
            differs_by(band=False),
            "keep only eigenvalues near the unit circle, | |lambda| - 1 | <= sin(pi / p); those inside it decay.",
        ),
        (differs_by(rnd=np.floor), "round the angle to the nearest bin (np.rint), do not truncate it."),
    ]
    return check_function(as_sorted, cases, name="rotational_modes", hints=hints, atol=0)


def _records(epochs, accuracies) -> list[dict]:
    return [{"epoch": int(e), "models": [{"test_acc": float(a)} for a in row]} for e, row in zip(epochs, accuracies)]


def _sigmoid_runs(epochs: np.ndarray, groks: list[float], width: float = 40.0) -> np.ndarray:
    """(epochs, models) test accuracies that jump from chance to 1 around each model's epoch."""
    e = np.asarray(epochs, dtype=float)[:, None]
    return 1 / 53 + (1 - 1 / 53) / (1 + np.exp(-(e - np.asarray(groks)) / width))


def check_grokking_epoch(grokking_epoch: Callable) -> bool:
    """Check ``grokking_epoch(epochs, test_acc, threshold)``: the first of ``epochs`` at which every
    model's test accuracy (a column of ``test_acc``, shape (epochs, models)) reaches ``threshold``;
    None when there is none. The check shows None as -1."""
    every100 = np.arange(0, 1300, 100)
    spike = _sigmoid_runs(every100, [650, 700, 760])
    spike[10, 0] = 0.3  # model 1 loses the task for one snapshot (a loss spike), then recovers
    late = np.arange(900, 20001, 500)
    inputs = [
        (every100, _sigmoid_runs(every100, [610, 700, 790]), 0.99, "three models grokking at different times"),
        (np.array([100, 200, 300]), np.array([[0.1] * 3, [1.0, 1.0, 0.975], [1.0] * 3]), 0.99, "a mean above 0.99"),
        (every100, spike, 0.99, "a model that falls back below the threshold for a snapshot"),
        (every100, _sigmoid_runs(every100, [500, 600, 2500]), 0.99, "a model that never groks: None (shown as -1)"),
        (np.arange(4), np.array([[0.5, 0.2], [0.99, 0.7], [0.995, 0.99], [1.0, 1.0]]), 0.99, "exactly 0.99"),
        (np.arange(4), np.array([[0.5, 0.2], [0.99, 0.7], [0.995, 0.99], [1.0, 1.0]]), 1.0, "threshold 1.0"),
        (late, np.ones((len(late), 3)), 0.99, "snapshots from epoch 900, every 500: already grokked"),
        (every100, _sigmoid_runs(every100, [300, 900, 900]), 0.5, "a lower threshold, 0.5"),
    ]
    cases = []
    for epochs, acc, threshold, what in inputs:
        want = _records_grokking_epoch(_records(epochs, acc), threshold)
        cases.append(Case((epochs, acc, threshold), NONE_SHOWN_AS if want is None else want, what))

    def shown(epochs, acc, threshold):
        got = grokking_epoch(np.array(epochs), np.array(acc), threshold)
        return NONE_SHOWN_AS if got is None else got

    def first(epochs, ok):
        hits = np.flatnonzero(ok)
        return NONE_SHOWN_AS if not hits.size else epochs[hits[0]]

    def latest_first_crossing(epochs, acc, t):
        per_model = [first(epochs, acc[:, i] >= t) for i in range(acc.shape[1])]
        return NONE_SHOWN_AS if NONE_SHOWN_AS in per_model else max(per_model)

    hints = [
        (
            lambda got, c: got == first(c.args[0], c.args[1].mean(axis=1) >= c.args[2]),
            "every model must reach the threshold, not their mean.",
        ),
        (
            lambda got, c: got == latest_first_crossing(*c.args),
            "a model can fall back below the threshold after it first reached it: find the first epoch at "
            "which all models are above it at once.",
        ),
        (
            lambda got, c: got == first(c.args[0], (c.args[1] > c.args[2]).all(axis=1)),
            "reaching the threshold counts: use >=, not >.",
        ),
        (
            lambda got, c: c.expected in c.args[0] and got == int(np.flatnonzero(c.args[0] == c.expected)[0]),
            "return the epoch, not its position in the list of snapshots.",
        ),
        (lambda got, c: c.expected == NONE_SHOWN_AS, "when no snapshot qualifies, return None."),
    ]
    return check_function(shown, cases, name="grokking_epoch", hints=hints, atol=0)


def _clock(p: int, freqs: tuple[int, ...], noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """(p, 2 len(freqs)) centroids of a Fourier clock: (cos, sin) of 2 pi k c / p for each k, with
    Gaussian noise of the given size, centred (their mean is zero, as the exercise promises)."""
    c = np.arange(p)[:, None]
    r = np.concatenate([np.c_[np.cos(2 * np.pi * k * c / p), np.sin(2 * np.pi * k * c / p)] for k in freqs], axis=1)
    r = r + noise * np.random.default_rng(seed).standard_normal(r.shape)
    return r - r.mean(axis=0)


def _random_centroids(p: int, k: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed).standard_normal((p, k))
    return r - r.mean(axis=0)


def _operator(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares A with y_i ~ A x_i (rows are examples)."""
    return np.linalg.lstsq(x, y, rcond=None)[0].T


def _library_operator(r: np.ndarray) -> np.ndarray:
    """The library's shift operator, taken back from its SVD coordinates to the centroids' own. For
    centred centroids that span their k coordinates, the two least-squares problems are the same
    problem in two orthonormal bases."""
    fit = _library_fit(r, rel_tol=0.0)
    if fit.basis.shape[1] != r.shape[1]:
        raise ValueError(f"the centroids of a case must span all their {r.shape[1]} coordinates.")
    return fit.basis @ fit.A @ fit.basis.T


def _shift_mistakes(r: np.ndarray) -> dict[str, np.ndarray]:
    """The operator that each usual mistake returns for centroids r (rows are classes)."""
    ahead = np.roll(r, -1, axis=0)
    return {
        "transpose": _operator(r, ahead).T,
        "backward": _operator(r, np.roll(r, 1, axis=0)),
        "no wrap": _operator(r[:-1], r[1:]),
        "flat roll": _operator(r, np.roll(r, -1)),
    }


_SHIFT_HINTS = {
    "transpose": "you returned the transpose of A. Solving r @ X = np.roll(r, -1, axis=0) with rows as "
    "centroids gives X with r_(c+1) ~ X^T r_c, so A = X.T.",
    "backward": "your operator maps class c to class c - 1 (np.roll(r, 1, axis=0)): the target of row c "
    "is row (c + 1) mod p, np.roll(r, -1, axis=0).",
    "no wrap": "you left out the step from class p - 1 back to class 0: addition is modulo p, so that "
    "step belongs to the cycle (np.roll wraps around; slicing r[1:] does not).",
    "flat roll": "np.roll without axis=0 shifts the flattened array, which mixes coordinates across rows: "
    "roll the rows (axis=0).",
}


def check_shift_operator(shift_operator: Callable) -> bool:
    """Check ``shift_operator(r)``: for centroids ``r`` of shape (p, k), row c the centroid of class
    c, centred, the (k, k) matrix A that minimises sum_c |r_((c+1) mod p) - A r_c|^2."""
    p = 53
    inputs = [
        (_clock(p, (3, 7), noise=0.05, seed=1), "a noisy clock of frequencies 3 and 7, p = 53 (4 coordinates)"),
        (_clock(p, (3,)), "the clean clock of frequency 3: A is the rotation by 2 pi 3 / 53"),
        (_clock(p, (50,)), "frequency 50 = 53 - 3: the same rotation, turning the other way"),
        (_random_centroids(31, 5, seed=2), "random centroids, p = 31, 5 coordinates"),
        (_random_centroids(11, 3, seed=3), "random centroids, p = 11, 3 coordinates"),
        (_clock(10, (5,))[:, :1], "p = 10, frequency 5, one coordinate: the centroids alternate and A = -1"),
        (_random_centroids(3, 2, seed=4), "the smallest cycle, p = 3, 2 coordinates"),
        (_clock(p, (3,)) @ np.array([[2.0, 0.5], [0.0, 0.5]]), "the clean clock seen through a skewed basis"),
    ]
    cases = [Case((r,), _library_operator(r), what) for r, what in inputs]

    def answer(r):  # on a copy: an in-place edit must not change the case
        return shift_operator(r.copy())

    def made(mistake: str):
        def test(got, case):
            wrong = _shift_mistakes(case.args[0])
            if not _same(got, wrong[mistake]) or _same(wrong[mistake], case.expected):
                return False
            # the same numbers from two mistakes: name neither (the message below names both)
            return not any(_same(got, w) for m, w in wrong.items() if m != mistake)

        return test

    def either_direction(got, case):
        wrong = _shift_mistakes(case.args[0])
        return _same(got, wrong["transpose"]) and _same(got, wrong["backward"]) and not _same(got, case.expected)

    hints = [
        (
            lambda got, c: np.ndim(got) == 1 and len(got) == c.args[0].shape[1],
            "return the matrix A itself, of shape (k, k), not a vector.",
        ),
        (
            lambda got, c: np.ndim(got) == 2 and np.shape(got) != np.shape(c.expected),
            "A maps one centroid (k coordinates) to the next, so it is (k, k), k = r.shape[1].",
        ),
        *[(made(m), text) for m, text in _SHIFT_HINTS.items()],
        (
            either_direction,
            "your operator turns the wrong way: it is the inverse of A. Either it is the transpose of A, "
            "or it maps class c to class c - 1.",
        ),
    ]
    return check_function(answer, cases, name="shift_operator", hints=hints, rtol=1e-6, atol=1e-8)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-8))
