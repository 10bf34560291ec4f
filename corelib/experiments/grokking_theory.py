"""The grokking-theory chapter: each step of the margin model computed in closed form and by an
independent numerical route (``scipy``), with the differences the chapter quotes. The formulas
live in :mod:`corelib.theory`; the tests (``tests/test_theory.py``) hold the differences to the
tolerances below."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from corelib import claims
from corelib._checks import check_seed, check_settings
from corelib.tasks.sweeps import PAPER_SWEEPS
from corelib.theory import (
    GrokTimeFit,
    PowerLawFit,
    fit_grok_time,
    fit_power_law,
    grok_constants,
    grok_time,
    hitting_time_numeric,
    integrate_margin,
    margin_trajectory,
    min_norm_amplitudes,
    min_norm_amplitudes_numeric,
    participation_ratio,
    psi,
    psi_norm_sq,
)

__all__ = [
    "TheoryParams",
    "NORM_REL_TOL",
    "AMPLITUDE_TOL",
    "ODE_TOL",
    "FIT_REL_TOL",
    "norm_identity",
    "amplitudes",
    "margins",
    "grokking_delays",
    "sweep_fits",
    "exercise_values",
    "NormIdentity",
    "Amplitudes",
    "MarginCurves",
    "GrokkingDelays",
    "SweepFits",
    "TheorySummary",
    "glue_values",
]

NORM_REL_TOL = 1e-9  # ||psi||^2 against its closed forms
AMPLITUDE_TOL = 1e-6  # closed-form minimum-norm amplitudes against SLSQP
ODE_TOL = 1e-6  # closed-form margin and hitting time against solve_ivp
FIT_REL_TOL = 1e-6  # fit_grok_time on noise-free delays against the planted constants


@dataclass(frozen=True)
class TheoryParams:
    """The chapter's parameters (see its ``parameters`` cell for their meaning)."""

    p: int = 53
    omega: float = 1.0
    delta: float = 1.0
    kappa: float = 0.0435
    lr: float = 1e-3
    p_check_max: int = 400
    margin_ps: tuple[int, ...] = (17, 31, 53, 101)
    p_plot_max: int = 400
    sweep_primes: tuple[int, ...] = tuple(PAPER_SWEEPS["moduli"])
    sweep_omegas: tuple[float, ...] = tuple(PAPER_SWEEPS["omegas"])
    n_seeds: int = PAPER_SWEEPS["n_seeds"]
    noise_rel: float = 0.1
    seed: int = 0

    def __post_init__(self):
        check_settings(
            "TheoryParams",
            integers={"p_check_max": self.p_check_max, "p_plot_max": self.p_plot_max, "n_seeds": self.n_seeds},
            positive={
                "omega": self.omega,
                "delta": self.delta,
                "lr": self.lr,
                "noise_rel": self.noise_rel,
                **{f"sweep_omegas[{i}]": w for i, w in enumerate(self.sweep_omegas)},
            },
            non_negative={"kappa": self.kappa},
        )
        small = [q for q in (self.p, *self.margin_ps, *self.sweep_primes) if q < 3]
        if small:
            raise ValueError(f"TheoryParams: the moduli p, margin_ps and sweep_primes must be at least 3, got {small}.")

        check_seed("TheoryParams", "seed", self.seed)

    @classmethod
    def from_namespace(cls, namespace: dict) -> TheoryParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(
            **{
                f.name: tuple(v) if isinstance(v, list) else v
                for f in fields(cls)
                if f.name in namespace
                for v in [namespace[f.name]]
            }
        )


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class NormIdentity:
    """``||psi_p||^2`` for every modulus against 3p/4 (odd p) and 3p/4 + 2 (even p >= 4).

    Attributes:
        params: the chapter's parameters.
        ps: (M,) the moduli 2 ... p_check_max.
        norms: (M,) ``||psi_q||^2`` per modulus.
        odd, even: (M,) masks of the odd moduli and of the even ones from 4 on.
        psi: (mu,) the Fourier margin vector of the chapter's modulus p.
        rel_err_odd, rel_err_even: the largest relative error of each identity.
    """

    params: TheoryParams
    ps: np.ndarray
    norms: np.ndarray
    odd: np.ndarray
    even: np.ndarray
    psi: np.ndarray
    rel_err_odd: float
    rel_err_even: float


@dataclass(frozen=True)
class Amplitudes:
    """The minimum-norm amplitudes that reach margin delta, and what one mode alone would cost.

    Attributes:
        params: the chapter's parameters.
        closed: (mu,) the closed form ``(delta / ||psi||^2) psi``.
        numeric: (mu,) the same by constrained minimisation (SLSQP).
        error: the largest absolute difference of the two.
        star_cost: ``||alpha*||^2``, the squared norm of the closed form.
        single_cost: the squared norm with the best single mode.
        odd_ps: (K,) odd moduli 3 ... p_plot_max.
        single_costs, star_costs: (K,) the two costs per odd modulus.
    """

    params: TheoryParams
    closed: np.ndarray
    numeric: np.ndarray
    error: float
    star_cost: float
    single_cost: float
    odd_ps: np.ndarray
    single_costs: np.ndarray
    star_costs: np.ndarray


@dataclass(frozen=True)
class MarginCurves:
    """Margin trajectories over five relaxation times, in closed form and by solve_ivp.

    Attributes:
        params: the chapter's parameters.
        Omega_ode: the relaxation time ``1 / omega`` in ODE time.
        p_crit: the critical modulus ``delta / kappa``.
        t: (401,) ODE times.
        curves: per modulus of ``margin_ps``, the (closed form, solve_ivp) margins at ``t``.
        error: the largest absolute difference of the two over all curves.
    """

    params: TheoryParams
    Omega_ode: float
    p_crit: float
    t: np.ndarray
    curves: dict[int, tuple[np.ndarray, np.ndarray]]
    error: float


@dataclass(frozen=True)
class GrokkingDelays:
    """Grokking delays at the sweep primes above p_crit, in closed form and as solve_ivp hitting times.

    Attributes:
        params: the chapter's parameters.
        Omega_steps: the time constant in optimiser steps, ``Omega_ode / lr``.
        p_crit: the critical modulus.
        primes: (K,) the sweep primes above p_crit.
        closed, numeric: (K,) the delays in ODE time, closed form and hitting time.
        error: the largest relative difference of the two.
        tau_p: the delay of the chapter's modulus p in steps (NaN at or below p_crit).
        asym_p: the large-p approximation ``Omega_steps * p_crit / p`` of ``tau_p``.
        paper: the paper's fitted ``Omega``, ``p_crit`` and ``omega_exponent`` (claims registry).
    """

    params: TheoryParams
    Omega_steps: float
    p_crit: float
    primes: np.ndarray
    closed: np.ndarray
    numeric: np.ndarray
    error: float
    tau_p: float
    asym_p: float
    paper: dict[str, float]


@dataclass(frozen=True)
class SweepFits:
    """The paper's two fits on model delays: a power law in omega, and the grokking-time law on
    noise-free and on noisy synthetic delays.

    Attributes:
        params: the chapter's parameters.
        delays: the delays the fits start from.
        omegas: (W,) the weight decays of the omega sweep.
        tau_omega: (W,) the model's delay of modulus p at each, in steps.
        omega_fit: the power law fitted to ``tau_omega``.
        exact_fit: the grokking-time law fitted to the noise-free delays.
        fit_rel_err: the larger relative error of the exact fit's Omega and p_crit.
        p_runs, tau_runs: (K * n_seeds,) the noisy synthetic runs: modulus and delay in steps.
        noisy_fit: the grokking-time law fitted to the noisy runs.
    """

    params: TheoryParams
    delays: GrokkingDelays
    omegas: np.ndarray
    tau_omega: np.ndarray
    omega_fit: PowerLawFit
    exact_fit: GrokTimeFit
    fit_rel_err: float
    p_runs: np.ndarray
    tau_runs: np.ndarray
    noisy_fit: GrokTimeFit


@dataclass(frozen=True)
class TheorySummary:
    """The chapter's four computations, as :func:`glue_values` reads them."""

    norms: NormIdentity
    amplitudes: Amplitudes
    margins: MarginCurves
    fits: SweepFits


def norm_identity(params: TheoryParams) -> NormIdentity:
    """``||psi||^2`` for every modulus 2..p_check_max against 3p/4 (odd) and 3p/4 + 2 (even >= 4)."""
    ps = np.arange(2, params.p_check_max + 1)
    norms = np.array([psi_norm_sq(q) for q in ps])
    odd, even = ps % 2 == 1, (ps % 2 == 0) & (ps >= 4)
    return NormIdentity(
        params=params,
        ps=ps,
        norms=norms,
        odd=odd,
        even=even,
        psi=psi(params.p),
        rel_err_odd=float(np.max(np.abs(norms[odd] / (0.75 * ps[odd]) - 1))),
        rel_err_even=float(np.max(np.abs(norms[even] / (0.75 * ps[even] + 2) - 1))),
    )


def amplitudes(params: TheoryParams) -> Amplitudes:
    """Minimum-norm amplitudes at margin delta: closed form, SLSQP, and the cost of one mode."""
    closed = min_norm_amplitudes(params.p, params.delta)  # (delta / ||psi||^2) psi
    numeric = min_norm_amplitudes_numeric(params.p, params.delta)  # generic constrained minimisation
    odd_ps = np.arange(3, params.p_plot_max + 1, 2)
    return Amplitudes(
        params=params,
        closed=closed,
        numeric=numeric,
        error=float(np.max(np.abs(closed - numeric))),
        star_cost=float(closed @ closed),
        single_cost=float((params.delta / psi(params.p).max()) ** 2),
        odd_ps=odd_ps,
        single_costs=np.array([(params.delta / psi(q).max()) ** 2 for q in odd_ps]),
        star_costs=np.array([float(a @ a) for a in (min_norm_amplitudes(q, params.delta) for q in odd_ps)]),
    )


def margins(params: TheoryParams) -> MarginCurves:
    """Margin trajectories over five relaxation times, closed form and solve_ivp, per modulus."""
    omega_ode, p_crit = grok_constants(params.omega, params.delta, params.kappa)  # (1/omega, delta/kappa)
    t = np.linspace(0, 5 / params.omega, 401)  # ODE time
    curves = {
        q: (margin_trajectory(t, params.omega, params.kappa * q), integrate_margin(t, params.omega, params.kappa * q))
        for q in params.margin_ps
    }
    error = max(float(np.max(np.abs(closed - numeric))) for closed, numeric in curves.values())
    return MarginCurves(params=params, Omega_ode=omega_ode, p_crit=p_crit, t=t, curves=curves, error=error)


def grokking_delays(params: TheoryParams) -> GrokkingDelays:
    """Grokking delays at the sweep primes above p_crit: closed form and solve_ivp hitting time."""
    omega_ode, p_crit = grok_constants(params.omega, params.delta, params.kappa)
    primes = np.array([q for q in params.sweep_primes if q > p_crit], dtype=float)
    if primes.size < 3:
        raise ValueError(f"need at least 3 sweep primes above p_crit {p_crit:.3g} (raise kappa or lower delta).")
    closed = grok_time(primes, omega_ode, p_crit)
    numeric = np.array([hitting_time_numeric(params.omega, params.kappa * q, params.delta) for q in primes])
    omega_steps = omega_ode / params.lr
    tau_p = grok_time(params.p, omega_steps, p_crit) if params.p > p_crit else float("nan")
    return GrokkingDelays(
        params=params,
        Omega_steps=omega_steps,
        p_crit=p_crit,
        primes=primes,
        closed=closed,
        numeric=numeric,
        error=float(np.max(np.abs(numeric / closed - 1))),
        tau_p=tau_p,
        asym_p=omega_steps * p_crit / params.p,
        paper={k: claims.claim(f"sweeps.{k}").value for k in ("Omega", "p_crit", "omega_exponent")},
    )


def sweep_fits(delays: GrokkingDelays) -> SweepFits:
    """The paper's two fits on model delays: a power law in omega, and fit_grok_time on noise-free
    and on noisy synthetic delays (n_seeds runs per prime, log-normal spread noise_rel)."""
    params, primes = delays.params, delays.primes
    omega_steps, p_crit = delays.Omega_steps, delays.p_crit
    omegas = np.asarray(params.sweep_omegas, dtype=float)
    tau_omega = np.array(
        [grok_time(params.p, grok_constants(w, params.delta, params.kappa)[0] / params.lr, p_crit) for w in omegas]
    )
    exact = fit_grok_time(primes, grok_time(primes, omega_steps, p_crit))
    rng = np.random.default_rng(params.seed)
    p_runs = np.repeat(primes, params.n_seeds)
    noise = np.exp(params.noise_rel * rng.standard_normal(p_runs.size))
    tau_runs = grok_time(p_runs, omega_steps, p_crit) * noise
    return SweepFits(
        params=params,
        delays=delays,
        omegas=omegas,
        tau_omega=tau_omega,
        omega_fit=fit_power_law(omegas, tau_omega),
        exact_fit=exact,
        fit_rel_err=max(abs(exact.Omega / omega_steps - 1), abs(exact.p_crit / p_crit - 1)),
        p_runs=p_runs,
        tau_runs=tau_runs,
        noisy_fit=fit_grok_time(p_runs, tau_runs),
    )


def exercise_values(params: TheoryParams, paper: dict) -> dict[str, float]:
    """Values quoted in the exercises' solutions: local power laws of the paper's fitted curve."""
    primes = np.asarray(params.sweep_primes, dtype=float)
    near = fit_power_law(primes, grok_time(primes, paper["Omega"], paper["p_crit"]))
    far_ps = np.geomspace(300, 3000, 10)
    far = fit_power_law(far_ps, grok_time(far_ps, paper["Omega"], paper["p_crit"]))
    x_mid = paper["p_crit"] / np.sqrt(primes.min() * primes.max())
    return {
        "ex_near_exponent": near.exponent,
        "ex_far_exponent": far.exponent,
        "ex_local_slope": float(-x_mid / ((1 - x_mid) * -np.log1p(-x_mid))),
    }


def glue_values(summary: TheorySummary) -> dict[str, object]:
    """Every value the chapter's prose quotes, by glue name, from the results of
    :func:`norm_identity`, :func:`amplitudes`, :func:`margins` and :func:`sweep_fits`."""
    norms, amps, margin, fits = summary.norms, summary.amplitudes, summary.margins, summary.fits
    params, delays = fits.params, fits.delays
    omega_fit, exact, noisy = fits.omega_fit, fits.exact_fit, fits.noisy_fit
    paper = delays.paper
    return {
        "norm_rel_tol": NORM_REL_TOL,
        "amplitude_tol": AMPLITUDE_TOL,
        "ode_tol": ODE_TOL,
        "fit_rel_tol": FIT_REL_TOL,
        "p": int(params.p),
        "omega": float(params.omega),
        "delta": float(params.delta),
        "kappa": float(params.kappa),
        "lr": float(params.lr),
        "p_check_max": int(params.p_check_max),
        "rel_err_odd": norms.rel_err_odd,
        "rel_err_even": norms.rel_err_even,
        "mu": int(norms.psi.size),
        "psi_norm_sq_p": psi_norm_sq(params.p),
        "psi_max": float(norms.psi.max()),
        "psi_min": float(norms.psi.min()),
        "amp_err": amps.error,
        "star_cost": amps.star_cost,
        "single_cost": amps.single_cost,
        "cost_ratio": amps.single_cost / amps.star_cost,
        "cost_ratio_approx": 3 * params.p / 16,
        "pr_star": participation_ratio(amps.closed),
        "p_over_3": params.p / 3,
        "c_const": 4 * params.kappa / 3,
        "margin_ps_text": ", ".join(str(q) for q in params.margin_ps),
        "ode_err": margin.error,
        "p_crit": margin.p_crit,
        "Omega_steps": delays.Omega_steps,
        "paper_Omega": float(paper["Omega"]),
        "paper_p_crit": float(paper["p_crit"]),
        "paper_Omega_ratio": paper["Omega"] / delays.Omega_steps,
        "hit_err": delays.error,
        "tau_p": delays.tau_p,
        "asym_p": delays.asym_p,
        "asym_rel_p": delays.tau_p / delays.asym_p - 1,
        "half_x_p": delays.p_crit / (2 * params.p),
        "x_p": delays.p_crit / params.p,
        "omega_exponent": omega_fit.exponent,
        "fit_rel_err": fits.fit_rel_err,
        "exact_r2": exact.r2,
        "noisy_Omega": noisy.Omega,
        "noisy_Omega_se": noisy.Omega_se,
        "noisy_p_crit": noisy.p_crit,
        "noisy_p_crit_se": noisy.p_crit_se,
        "noisy_r2": noisy.r2,
        "paper_omega_exponent": paper["omega_exponent"],
        "noise_rel": params.noise_rel,
        "n_primes": int(delays.primes.size),
        "n_seeds": int(params.n_seeds),
        **exercise_values(params, paper),
    }
