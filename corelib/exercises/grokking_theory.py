"""Checks for the exercises of the chapter "Why weight decay inflates cores, and when grokking happens"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..claims import claim
from ..theory import grok_time, min_norm_amplitudes, psi
from . import Case, check_function

__all__ = ["check_grok_time", "check_min_norm_amplitudes", "check_psi"]


def check_psi(student: Callable) -> bool:
    """Check ``psi(p)``: the margin contributions ``1 - cos(2 pi k / p)`` of the ``floor(p/2)``
    Fourier modes ``k = 1, ..., floor(p/2)``, in that order."""
    moduli = [
        (53, "the book's modulus"),
        (3, "the smallest odd modulus: one mode"),
        (4, "an even modulus: the last mode k = p/2 is a reflection"),
        (10, "an even modulus"),
        (2, "p = 2: one mode, the reflection k = 1 = p/2"),
        (101, "the largest of the paper's moduli"),
    ]
    cases = [Case((p,), psi(p), what) for p, what in moduli]

    def vector(p):
        return np.asarray(student(p), dtype=float).ravel()

    def modes(got, c, ks):
        p = c.args[0]
        return len(got) == len(ks) and np.allclose(got, 1 - np.cos(2 * np.pi * ks / p))

    hints = [
        (
            lambda got, c: modes(got, c, np.arange(0, c.args[0] // 2)),
            "your modes run from k = 0; mode 0 is the constant, which adds nothing (psi_0 = 0): "
            "take k = 1..floor(p/2).",
        ),
        (
            lambda got, c: modes(got, c, np.arange(1, (c.args[0] - 1) // 2 + 1)),
            "for even p you left out the last mode k = p/2 (a reflection, psi = 2): there are floor(p/2) modes.",
        ),
        (
            lambda got, c: modes(got, c, np.arange(1, c.args[0])),
            "modes k and p - k are the same rotation, one clockwise: count each once, k = 1..floor(p/2).",
        ),
        (
            lambda got, c: got.shape == c.expected.shape and np.allclose(got, 1 - c.expected),
            "you returned cos(2 pi k / p); the margin contribution is 1 minus it.",
        ),
    ]
    return check_function(vector, cases, name="psi", hints=hints, atol=1e-12)


def _delay(p, omega_const: float, p_crit: float):
    """The library's delay where it is defined, infinity where grokking never happens (p <= p_crit)."""
    p = np.asarray(p, dtype=float)
    tau = np.full(p.shape, np.inf)
    above = p > p_crit
    if above.any():
        tau[above] = grok_time(p[above], omega_const, p_crit)
    return float(tau) if tau.ndim == 0 else tau


def _where_defined(wrong: Callable) -> Callable:
    """A hint's test: whether the answer equals ``wrong(p, Omega, p_crit, expected)`` wherever the
    expected delay is finite (where the formula applies)."""

    def test(got, case: Case) -> bool:
        got, want = np.atleast_1d(np.asarray(got, dtype=float)), np.atleast_1d(case.expected)
        keep = np.isfinite(want)
        if got.shape != want.shape or not keep.any():
            return False
        p = np.broadcast_to(np.asarray(case.args[0], dtype=float), want.shape)[keep]
        return bool(np.allclose(got[keep], wrong(p, case.args[1], case.args[2], want[keep]), rtol=1e-9))

    return test


def check_grok_time(student: Callable) -> bool:
    """Check ``grok_time(p, Omega, p_crit)``: ``-Omega log(1 - p_crit / p)`` for ``p > p_crit``
    and infinity for ``p <= p_crit`` (the margin saturates below the threshold), for a scalar
    ``p`` or an array of moduli."""
    omega_paper, p_crit_paper = claim("sweeps.Omega").value, claim("sweeps.p_crit").value
    primes = np.array([31, 43, 53, 61, 79, 89, 101])
    params = [
        (53, omega_paper, p_crit_paper, "the paper's fitted constants at p = 53"),
        (primes, omega_paper, p_crit_paper, "the paper's fitted constants at its seven primes (an array)"),
        (24, 1000.0, 23.0, "p just above p_crit: a long delay"),
        (10_000, 1000.0, 23.0, "p far above p_crit: close to Omega p_crit / p"),
        (np.array([17, 23, 29]), 1000.0, 23.0, "p below, at and above p_crit (an array)"),
        (20, 1000.0, 23.0, "p below p_crit: the margin never reaches delta"),
        (np.array([40.0, 80.0]), 1.0 / 0.5, 33.3, "ODE time: omega = 0.5 (Omega = 2), p_crit = 33.3"),
    ]
    cases = [Case((p, om, pc), _delay(p, om, pc), what) for p, om, pc, what in params]

    def delays(p, om, pc):
        with np.errstate(divide="ignore", invalid="ignore"):  # a NaN from log(<0) is reported, not warned
            return np.asarray(student(np.array(p, dtype=float) if np.ndim(p) else p, om, pc), dtype=float)

    hints = [
        (
            lambda got, c: bool(np.any(np.isnan(got))) and not np.all(np.isfinite(c.expected)),
            "below p_crit, 1 - p_crit/p < 0 and its log is NaN: the margin saturates at kappa p <= delta and "
            "never reaches it, so the delay is infinite (np.inf). Use np.where, or test p > p_crit.",
        ),
        (
            _where_defined(lambda p, om, pc, want: -want),
            "your delays are negative: log(1 - p_crit/p) < 0, so tau is MINUS Omega times it.",
        ),
        (
            _where_defined(lambda p, om, pc, want: om * pc / p),
            "this is the large-p asymptote Omega p_crit / p; the full formula is -Omega log(1 - p_crit/p).",
        ),
        (
            _where_defined(lambda p, om, pc, want: want / np.log(10)),
            "you used log10; the formula uses the natural logarithm (np.log, or np.log1p(-p_crit / p)).",
        ),
    ]
    return check_function(delays, cases, name="grok_time", hints=hints, rtol=1e-9)


def _like(got: np.ndarray, case: Case, wrong: Callable) -> bool:
    """Whether a wrong answer equals ``wrong(psi, p, delta)``, a usual mistake, for this case."""
    p, delta = case.args
    want = np.asarray(wrong(psi(p), p, delta), dtype=float)
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-6) and not np.allclose(got, case.expected)


def _best_mode_only(v: np.ndarray, p: int, delta: float) -> np.ndarray:
    out = np.zeros_like(v)
    out[np.argmax(v)] = delta / v.max()
    return out


def _margin_off(got: np.ndarray, case: Case) -> bool:
    p, delta = case.args
    return got.shape == case.expected.shape and not np.isclose(got @ psi(p), delta, rtol=1e-6)


_AMPLITUDE_HINTS = [
    (
        _margin_off,
        "the margin <alpha, psi> of your amplitudes is not delta: scale them so that it is exactly delta.",
    ),
    (
        lambda got, c: _like(got, c, lambda v, p, d: d * v / np.linalg.norm(v)),
        "you divided by ||psi||; divide by its square, ||psi||^2, so that <alpha, psi> = delta.",
    ),
    (
        lambda got, c: c.args[1] != 1 and _like(got, c, lambda v, p, d: v / (v @ v)),
        "your amplitudes do not grow with the margin: they must be proportional to delta.",
    ),
    (
        lambda got, c: _like(got, c, _best_mode_only),
        "you put all the weight on the best mode: that reaches the margin, but spreading it over every mode "
        "in proportion to psi costs less (Cauchy-Schwarz).",
    ),
    (
        lambda got, c: _like(got, c, lambda v, p, d: np.full_like(v, d / v.sum())),
        "equal amplitudes reach the margin, but not with the smallest norm: the optimum is proportional "
        "to psi (Cauchy-Schwarz).",
    ),
    (
        lambda got, c: c.args[0] % 2 == 0 and _like(got, c, lambda v, p, d: d * v / (3 * p / 4)),
        "||psi||^2 = 3p/4 holds only for odd p (even p >= 4 adds 2): compute the norm from the vector.",
    ),
    (lambda got, c: got.shape != c.expected.shape, "there is one amplitude per mode, k = 1..floor(p/2)."),
]
"""The usual mistakes of ``min_norm_amplitudes``, each shown only when the answer is that mistake."""


def check_min_norm_amplitudes(student: Callable) -> bool:
    """Check ``min_norm_amplitudes(p, delta)``: the amplitudes ``alpha >= 0`` of the ``floor(p/2)``
    modes with the smallest squared norm whose margin ``<alpha, psi>`` is ``delta``, i.e.
    ``delta psi / ||psi||^2``."""
    rng = np.random.default_rng(5)
    inputs = [
        (53, 1.0, "the book's modulus, margin 1"),
        (53, 2.5, "the book's modulus, margin 2.5"),
        (3, 1.0, "p = 3: a single mode"),
        (4, 1.0, "p = 4: an even modulus, whose last mode is a reflection"),
        (10, 0.3, "an even modulus, margin 0.3"),
        (2, 1.0, "p = 2: one mode, the reflection"),
        (101, 0.7, "the largest of the paper's moduli, margin 0.7"),
    ]
    for k in range(2):
        inputs.append(
            (int(rng.integers(5, 300)), float(rng.uniform(0.1, 5.0)), f"a random modulus and margin ({k + 1})")
        )
    cases = [Case((p, delta), min_norm_amplitudes(p, delta), what) for p, delta, what in inputs]

    def amplitudes(p, delta):
        return np.asarray(student(p, delta), dtype=float).ravel()

    return check_function(amplitudes, cases, name="min_norm_amplitudes", hints=_AMPLITUDE_HINTS, rtol=1e-9, atol=1e-12)
