r"""The paper's model of core inflation and grokking time, in closed form and as fits.

After memorising modular addition mod ``p``, a transformer can solve it with any of the
``mu = floor(p/2)`` Fourier modes; mode ``k`` adds ``psi_k = 1 - cos(2 pi k / p)`` per unit
amplitude to the classification margin (:func:`psi`; ``||psi||^2 = 3p/4`` for odd ``p``). The
minimum-norm amplitudes reaching margin ``delta`` use every mode (:func:`min_norm_amplitudes`).
Under weight decay ``omega`` and a corrective force ``c omega`` the margin relaxes as
``m(t) = m* (1 - exp(-omega t))`` with ``m* = c ||psi||^2 = kappa p`` (:func:`margin_trajectory`),
so it reaches ``delta`` at ``tau(p) = -Omega log(1 - p_crit / p)`` (:func:`grok_time`) with
``Omega = 1/omega`` and ``p_crit = delta / kappa`` (:func:`grok_constants`): grokking happens
only for ``p > p_crit``. In optimizer steps ``Omega ~ 1 / (eta omega)`` is fitted
(:func:`fit_grok_time`).

The chapter ``notebooks/grokking_theory.py`` derives each formula; every function's docstring
states its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np
import scipy.integrate
import scipy.optimize
from numpy.typing import ArrayLike

__all__ = [
    "GrokTimeFit",
    "PowerLawFit",
    "fit_grok_time",
    "fit_power_law",
    "grok_constants",
    "grok_time",
    "hitting_time_numeric",
    "integrate_margin",
    "margin_trajectory",
    "min_norm_amplitudes",
    "min_norm_amplitudes_numeric",
    "participation_ratio",
    "psi",
    "psi_norm_sq",
    "psi_norm_sq_closed_form",
]


# --------------------------------------------------------------------------- validation


def _modulus(p) -> int:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (Integral, np.integer)):
        if isinstance(p, (float, np.floating)) and float(p).is_integer():
            p = int(p)
        else:
            raise ValueError(f"p must be an integer modulus >= 2, got {p!r}; pass e.g. p=53.")
    if p < 2:
        raise ValueError(f"p must be an integer modulus >= 2 (there are floor(p/2) modes), got {p}.")
    return int(p)


def _positive(x, name: str, fix: str = "") -> float:
    x = float(x)
    if not (np.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite number, got {x}." + (f" {fix}" if fix else ""))
    return x


def _vector(x, name: str, *, positive: bool = True) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"{name} contains NaN/Inf values; drop the runs that produced them "
            "(e.g. a run that never generalised) before fitting."
        )
    if positive and np.any(arr <= 0):
        bad = arr[arr <= 0]
        raise ValueError(
            f"{name} must be strictly positive, got {bad.size} value(s) <= 0 "
            f"(first: {bad[0]}); drop them or shift the data before a log-log fit."
        )
    return arr


# --------------------------------------------------------------------------- modes and amplitudes


def psi(p: int) -> np.ndarray:
    """Margin contributions of the ``floor(p/2)`` Fourier modes: ``psi_k = 1 - cos(2 pi k / p)``.

    Mode ``k = 1..floor(p/2)`` is a rotation by ``2 pi k / p``; ``psi_k`` is how much it adds to
    the classification margin at unit amplitude. All entries are positive.
    """
    p = _modulus(p)
    k = np.arange(1, p // 2 + 1)
    return 1.0 - np.cos(2.0 * np.pi * k / p)


def psi_norm_sq(p: int) -> float:
    """``||psi||^2``, computed from the vector; it sets the saturation margin ``m* = c ||psi||^2``."""
    v = psi(p)
    return float(v @ v)


def psi_norm_sq_closed_form(p: int) -> float:
    """``||psi||^2`` by formula: ``3p/4`` (odd p), ``3p/4 + 2`` (even p >= 4), ``4`` (p = 2).

    Expanding ``(1 - cos)^2`` and summing the cosines over half a period gives these; the even
    case has one extra mode ``k = p/2`` (``psi = 2``). Used to check :func:`psi_norm_sq`.
    """
    p = _modulus(p)
    if p == 2:
        return 4.0
    return 0.75 * p + (2.0 if p % 2 == 0 else 0.0)


def min_norm_amplitudes(p: int, delta: float) -> np.ndarray:
    """Minimum-norm mode amplitudes achieving margin ``delta``: ``alpha* = (delta/||psi||^2) psi``.

    Solution of ``min ||alpha||^2`` subject to ``<alpha, psi> >= delta`` and ``alpha >= 0``
    (Cauchy--Schwarz; ``psi > 0`` makes the sign constraint inactive). Every mode is used, in
    proportion to its margin contribution; ``||alpha*||^2 = delta^2 / ||psi||^2``.
    """
    delta = _positive(delta, "delta", "The margin threshold must be > 0.")
    v = psi(p)
    return (delta / float(v @ v)) * v


def min_norm_amplitudes_numeric(p: int, delta: float) -> np.ndarray:
    """The same minimum-norm problem solved by ``scipy.optimize.minimize`` (SLSQP).

    A numerical reference for :func:`min_norm_amplitudes` that does not use Cauchy--Schwarz:
    it starts from the single best mode (feasible, not optimal) and enforces ``alpha >= 0`` and
    ``<alpha, psi> >= delta`` as generic constraints. The problem is solved for ``delta = 1`` and
    scaled (its solution is proportional to ``delta``), which keeps SLSQP's tolerances meaningful
    for any ``delta``. Raises ``RuntimeError`` if SLSQP fails.
    """
    delta = _positive(delta, "delta", "The margin threshold must be > 0.")
    v = psi(p)
    x0 = np.zeros_like(v)
    x0[np.argmax(v)] = 1.0 / v.max()
    res = scipy.optimize.minimize(
        lambda a: float(a @ a),
        x0,
        jac=lambda a: 2.0 * a,
        method="SLSQP",
        bounds=[(0.0, None)] * v.size,
        constraints=[{"type": "ineq", "fun": lambda a: float(a @ v) - 1.0, "jac": lambda a: v}],
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    if not res.success:
        raise RuntimeError(f"SLSQP did not converge for p={p}: {res.message}")
    return delta * np.asarray(res.x)


def participation_ratio(a: ArrayLike) -> float:
    """Effective number of active modes, ``(sum a)^2 / sum a^2`` for amplitudes ``a >= 0``.

    1 when one mode carries everything, ``len(a)`` when all are equal; ``p/3`` for ``alpha*``
    with odd ``p`` (because ``sum psi = p/2`` and ``||psi||^2 = 3p/4``).
    """
    a = _vector(a, "a", positive=False)
    if np.any(a < 0) or not np.any(a > 0):
        raise ValueError("participation_ratio needs non-negative amplitudes with at least one > 0.")
    return float(a.sum() ** 2 / (a @ a))


# --------------------------------------------------------------------------- margin dynamics


def margin_trajectory(t: ArrayLike, omega: float, m_star: float, m0: float = 0.0) -> np.ndarray | float:
    """Closed-form margin ``m(t) = m* + (m0 - m*) exp(-omega t)``; ``m*(1 - e^{-omega t})`` for ``m0 = 0``.

    Solution of ``dm/dt = -omega m + omega m*`` (weight decay ``omega`` pulling the margin down,
    the corrective force ``c omega ||psi||^2 = omega m*`` pushing it up). Vectorised over ``t``.
    """
    omega = _positive(omega, "omega", "Weight decay must be > 0 for the margin to relax.")
    t_arr = np.asarray(t, dtype=np.float64)
    m = m_star + (m0 - m_star) * np.exp(-omega * t_arr)
    return float(m) if m.ndim == 0 else m


def integrate_margin(
    t: ArrayLike, omega: float, m_star: float, m0: float = 0.0, *, rtol: float = 1e-12, atol: float = 1e-12
) -> np.ndarray:
    """The margin ODE ``dm/dt = -omega (m - m*)`` integrated numerically (``solve_ivp``, DOP853).

    A numerical reference for :func:`margin_trajectory`; ``t`` must be non-negative, the result
    is returned at the given times (any order).
    """
    omega = _positive(omega, "omega", "Weight decay must be > 0 for the margin to relax.")
    t_arr = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if t_arr.ndim != 1 or np.any(t_arr < 0) or not np.all(np.isfinite(t_arr)):
        raise ValueError("t must be a 1-D array of finite times >= 0 (the ODE starts at t = 0).")
    order = np.argsort(t_arr)
    sol = scipy.integrate.solve_ivp(
        lambda _t, m: -omega * (m - m_star),
        (0.0, float(t_arr.max()) or 1.0),
        [float(m0)],
        method="DOP853",
        t_eval=t_arr[order],
        rtol=rtol,
        atol=atol,
    )
    out = np.empty_like(t_arr)
    out[order] = sol.y[0]
    return out


def hitting_time_numeric(
    omega: float, m_star: float, delta: float, m0: float = 0.0, *, rtol: float = 1e-12, atol: float = 1e-12
) -> float:
    """First time the numerically integrated margin reaches ``delta`` (``solve_ivp`` event).

    A numerical reference for :func:`grok_time`. Raises ``ValueError`` when ``m* <= delta``
    (the margin saturates below the threshold: no grokking).
    """
    omega = _positive(omega, "omega", "Weight decay must be > 0 for the margin to relax.")
    delta = _positive(delta, "delta", "The margin threshold must be > 0.")
    if m_star <= delta:
        raise ValueError(
            f"m_star={m_star} <= delta={delta}: the margin saturates below the "
            "threshold and never reaches it (p <= p_crit); increase m_star (or p)."
        )
    if m0 >= delta:
        return 0.0
    event = lambda _t, m: m[0] - delta  # noqa: E731
    event.terminal = True
    sol = scipy.integrate.solve_ivp(
        lambda _t, m: -omega * (m - m_star),
        (0.0, 1e3 / omega),
        [float(m0)],
        method="DOP853",
        events=event,
        rtol=rtol,
        atol=atol,
    )
    if sol.t_events[0].size == 0:  # pragma: no cover - only when m* - delta < e^-1000
        raise RuntimeError("the margin did not reach delta within 1000 relaxation times.")
    return float(sol.t_events[0][0])


# --------------------------------------------------------------------------- grokking time


def grok_constants(omega: float, delta: float, kappa: float) -> tuple[float, float]:
    """``(Omega, p_crit) = (1/omega, delta/kappa)``: the ODE's constants in the form of :func:`grok_time`.

    ``Omega`` is in the ODE's continuous time (multiply by ``1/eta`` for optimizer steps in the
    idealised case of pure decoupled weight decay with learning rate ``eta``).
    """
    omega = _positive(omega, "omega", "Weight decay must be > 0.")
    delta = _positive(delta, "delta", "The margin threshold must be > 0.")
    kappa = _positive(kappa, "kappa", "The saturation margin per unit of p must be > 0.")
    return 1.0 / omega, delta / kappa


def _grok_time(p, omega_const, p_crit):
    return -omega_const * np.log1p(-p_crit / p)


def grok_time(p: ArrayLike, Omega: float, p_crit: float) -> np.ndarray | float:
    """Predicted grokking delay ``tau(p) = -Omega log(1 - p_crit / p)``, vectorised over ``p``.

    The first time the margin ``kappa p (1 - e^{-t/Omega})`` reaches ``delta = kappa p_crit``.
    Defined only for ``p > p_crit``; for large ``p`` it approaches ``Omega p_crit / p``.
    """
    Omega = _positive(Omega, "Omega", "It is the relaxation time (1/omega, or fitted in steps).")
    p_crit = _positive(p_crit, "p_crit", "It is delta/kappa, the smallest modulus that can grok.")
    p_arr = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(p_arr)):
        raise ValueError("p contains NaN/Inf values; pass finite moduli.")
    bad = p_arr <= p_crit
    if np.any(bad):
        raise ValueError(
            f"grok_time needs p > p_crit = {p_crit:g}, got p = {p_arr[bad].ravel()[0]:g}: for "
            "p <= p_crit the margin saturates at kappa p <= delta and grokking never happens "
            "(tau is infinite). Pass only moduli above p_crit."
        )
    tau = _grok_time(p_arr, Omega, p_crit)
    return float(tau) if tau.ndim == 0 else tau


def _r2(y: np.ndarray, y_hat: np.ndarray) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    ss_res = float(np.sum((y - y_hat) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else float("nan")
    return 1.0 - ss_res / ss_tot


@dataclass(frozen=True)
class GrokTimeFit:
    """Result of :func:`fit_grok_time`: constants, their standard errors and ``R^2`` of ``tau``."""

    Omega: float
    p_crit: float
    Omega_se: float
    p_crit_se: float
    r2: float

    def predict(self, p: ArrayLike) -> np.ndarray | float:
        """``tau(p)`` of the fitted curve (for ``p > p_crit``)."""
        return grok_time(p, self.Omega, self.p_crit)


def fit_grok_time(p: ArrayLike, tau: ArrayLike, sigma: ArrayLike | None = None) -> GrokTimeFit:
    """Fit ``tau(p) = -Omega log(1 - p_crit/p)`` to grokking delays by ``scipy.optimize.curve_fit``.

    ``p`` and ``tau`` are equal-length sequences (repeated ``p`` allowed, e.g. one entry per
    seed); optional ``sigma`` are per-point standard deviations (weights ``1/sigma^2``, relative
    scale as in ``curve_fit``'s default). Bounds ``Omega > 0`` and ``0 < p_crit < min(p)``. The
    initial guess profiles ``p_crit`` on a grid (``Omega`` is then linear least squares). Standard
    errors are the square roots of the diagonal of ``curve_fit``'s covariance; ``r2`` is the
    unweighted ``R^2`` of ``tau``.
    """
    p = _vector(p, "p")
    tau = _vector(tau, "tau")
    if p.shape != tau.shape:
        raise ValueError(f"p and tau must have the same length, got {p.size} and {tau.size}.")
    if p.size < 3 or np.unique(p).size < 2:
        raise ValueError(
            "fit_grok_time needs at least 3 (p, tau) pairs with at least 2 distinct "
            f"p to fit 2 constants and their errors, got {p.size} pairs with "
            f"{np.unique(p).size} distinct p."
        )
    w = None
    if sigma is not None:
        sigma = _vector(sigma, "sigma")
        if sigma.shape != p.shape:
            raise ValueError(f"sigma must have one entry per point ({p.size}), got {sigma.size}.")
        w = 1.0 / sigma**2
    p_min = float(p.min())

    # Initial guess: for fixed p_crit the model is linear in Omega.
    best = None
    for frac in np.linspace(0.01, 0.99, 99):
        g = -np.log1p(-frac * p_min / p)
        ww = np.ones_like(g) if w is None else w
        om = float(np.sum(ww * g * tau) / np.sum(ww * g * g))
        loss = float(np.sum(ww * (tau - om * g) ** 2))
        if best is None or loss < best[0]:
            best = (loss, om, frac * p_min)
    _, om0, pc0 = best
    upper = np.nextafter(p_min, 0.0) * (1.0 - 1e-12)
    popt, pcov = scipy.optimize.curve_fit(
        _grok_time,
        p,
        tau,
        p0=[om0, pc0],
        sigma=sigma,
        bounds=([0.0, 0.0], [np.inf, upper]),
        method="trf",
        x_scale="jac",
        ftol=1e-15,
        xtol=1e-15,
        gtol=1e-15,
        max_nfev=10000,
    )
    se = np.sqrt(np.clip(np.diag(pcov), 0.0, None))
    return GrokTimeFit(
        Omega=float(popt[0]),
        p_crit=float(popt[1]),
        Omega_se=float(se[0]),
        p_crit_se=float(se[1]),
        r2=_r2(tau, _grok_time(p, *popt)),
    )


# --------------------------------------------------------------------------- power laws


@dataclass(frozen=True)
class PowerLawFit:
    """Result of :func:`fit_power_law`: ``y = prefactor * x**exponent``, ``R^2`` in log-log space."""

    exponent: float
    prefactor: float
    r2: float
    exponent_se: float

    def predict(self, x: ArrayLike) -> np.ndarray | float:
        """``prefactor * x**exponent``."""
        y = self.prefactor * np.asarray(x, dtype=np.float64) ** self.exponent
        return float(y) if np.ndim(y) == 0 else y


def fit_power_law(x: ArrayLike, y: ArrayLike) -> PowerLawFit:
    """Fit ``y = C x^beta`` by ordinary least squares of ``log y`` on ``log x``.

    Used for the scaling exponents of the grokking sweeps (e.g. ``tau ~ omega^beta``). ``x`` and
    ``y`` must be positive. ``r2`` is the ``R^2`` of ``log y``; ``exponent_se`` the usual OLS
    standard error of the slope (NaN with only two points).
    """
    x = _vector(x, "x")
    y = _vector(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}.")
    if np.unique(x).size < 2:
        raise ValueError("fit_power_law needs at least 2 distinct x values to fit a slope.")
    lx, ly = np.log(x), np.log(y)
    design = np.column_stack([lx, np.ones_like(lx)])
    (beta, log_c), *_ = np.linalg.lstsq(design, ly, rcond=None)
    fitted = design @ np.array([beta, log_c])
    n = x.size
    if n > 2:
        s2 = float(np.sum((ly - fitted) ** 2)) / (n - 2)
        se = float(np.sqrt(s2 / np.sum((lx - lx.mean()) ** 2)))
    else:
        se = float("nan")
    return PowerLawFit(exponent=float(beta), prefactor=float(np.exp(log_c)), r2=_r2(ly, fitted), exponent_se=se)
