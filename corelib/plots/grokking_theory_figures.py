"""Figures of the grokking-theory chapter, drawn from the results of
:mod:`corelib.experiments.grokking_theory`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from corelib.theory import grok_time

if TYPE_CHECKING:
    from corelib.experiments.grokking_theory import Amplitudes, GrokkingDelays, MarginCurves, NormIdentity, SweepFits

__all__ = ["figure_psi", "figure_amplitudes", "figure_margin", "figure_delay", "figure_theory_sweeps"]


def _pair(width: float = 9.0) -> tuple[plt.Figure, np.ndarray]:
    return plt.subplots(1, 2, figsize=(width, 3.4), layout="constrained")


def figure_psi(norms: NormIdentity) -> plt.Figure:
    """Margin per mode at the chapter's p (left) and ``||psi||^2`` against 3p/4 (+2) (right)."""
    fig, (ax_psi, ax_norm) = _pair()
    psi_p, ps, values, odd, even = norms.psi, norms.ps, norms.norms, norms.odd, norms.even
    ax_psi.bar(np.arange(1, psi_p.size + 1), psi_p, color="C0")
    ax_psi.set(
        xlabel="mode $k$", ylabel=r"$\psi_k = 1 - \cos(2\pi k/p)$", title=f"Margin per mode, p = {norms.params.p}"
    )
    ax_norm.plot(ps[odd], values[odd], ".", ms=3, color="C0", label="odd $p$")
    ax_norm.plot(ps[even], values[even], ".", ms=3, color="C1", label="even $p$")
    ax_norm.plot(ps, 0.75 * ps, "k-", lw=0.8, label="$3p/4$")
    ax_norm.plot(ps, 0.75 * ps + 2, "k--", lw=0.8, label="$3p/4 + 2$")
    ax_norm.set(
        xlabel="modulus $p$", ylabel=r"$\|\psi\|^2$", title="Norm of the margin vector", xlim=(0, 60), ylim=(0, 50)
    )
    ax_norm.legend(fontsize=8)
    return fig


def figure_amplitudes(amps: Amplitudes) -> plt.Figure:
    """Minimum-norm amplitudes (closed form and SLSQP, left) and the cost of the margin (right)."""
    fig, (ax_a, ax_c) = _pair()
    params, k = amps.params, np.arange(1, amps.closed.size + 1)
    ax_a.bar(k, amps.closed, color="C2", label=r"$\alpha^\ast$ (closed form)")
    ax_a.plot(k, amps.numeric, "kx", ms=5, label="SLSQP")
    ax_a.set(xlabel="mode $k$", ylabel=r"amplitude $\alpha_k$", title=f"Minimum-norm amplitudes, p = {params.p}")
    ax_a.legend(fontsize=8)
    ps = amps.odd_ps
    ax_c.loglog(ps, amps.single_costs, color="C3", label="best single mode")
    ax_c.loglog(ps, amps.star_costs, color="C2", label=r"all modes, $\alpha^\ast$")
    ax_c.loglog(ps, 4 * params.delta**2 / (3 * ps), "k:", lw=1, label=r"$4\delta^2/(3p)$")
    ax_c.set(xlabel="modulus $p$ (odd)", ylabel=r"$\|\alpha\|^2$ at margin $\delta$", title="Cost of the margin")
    ax_c.legend(fontsize=8)
    return fig


def figure_margin(margin: MarginCurves) -> plt.Figure:
    """Margin trajectories (closed form: lines; solve_ivp: circles) against optimizer steps, with
    the grokking time of each modulus that reaches the threshold."""
    params = margin.params
    fig, ax = plt.subplots(figsize=(6.5, 3.5), layout="constrained")
    steps = margin.t / params.lr  # AdamW's decoupled decay: ODE time is lr times steps
    for i, (q, (closed, numeric)) in enumerate(margin.curves.items()):
        ax.plot(steps, closed, color=f"C{i}", label=f"p = {q}")
        ax.plot(steps[::25], numeric[::25], "o", mfc="none", ms=4, color=f"C{i}")
        if params.kappa * q > params.delta:
            ax.plot(grok_time(q, margin.Omega_ode, margin.p_crit) / params.lr, params.delta, "k|", ms=12, mew=2)
    ax.axhline(params.delta, color="k", ls="--", lw=1, label=r"threshold $\delta$")
    ax.set(
        xlabel="optimizer steps after memorisation", ylabel="margin $m(t)$", title="Margin relaxes towards $\\kappa p$"
    )
    ax.legend(fontsize=8, ncol=2)
    return fig


def figure_delay(delays: GrokkingDelays) -> plt.Figure:
    """Grokking delay against p (model, asymptote, the paper's curve, solve_ivp; left) and the
    relative distance to the 1/p asymptote (right)."""
    params, paper = delays.params, delays.paper
    omega_steps, p_crit = delays.Omega_steps, delays.p_crit
    fig, (ax_t, ax_r) = _pair(9.5)
    pp = np.linspace(p_crit * 1.02, params.p_plot_max, 600)
    ax_t.plot(
        pp,
        grok_time(pp, omega_steps, p_crit),
        color="C2",
        label=rf"ODE: $\Omega = 1/(\eta\omega)$, $p_{{\rm crit}} = {p_crit:.3g}$",
    )
    ax_t.plot(pp, omega_steps * p_crit / pp, "C2:", label=r"asymptote $\Omega p_{\rm crit}/p$")
    pq = np.linspace(paper["p_crit"] * 1.02, params.p_plot_max, 600)
    ax_t.plot(pq, grok_time(pq, paper["Omega"], paper["p_crit"]), color="C7", label="paper's fitted curve")
    ax_t.plot(delays.primes, delays.numeric / params.lr, "ko", mfc="none", ms=5, label="solve_ivp hitting time")
    ax_t.axvline(p_crit, color="C2", lw=0.8, ls="--")
    ax_t.set(xlabel="modulus $p$", ylabel=r"$\tau_{\rm grok}$ (steps)", yscale="log", title="Grokking delay")
    ax_t.legend(fontsize=7)
    pr = np.geomspace(p_crit * 1.05, 1e3 * p_crit, 200)
    ax_r.loglog(
        pr,
        grok_time(pr, omega_steps, p_crit) / (omega_steps * p_crit / pr) - 1,
        color="C2",
        label=r"$\tau$ / asymptote $- 1$",
    )
    ax_r.loglog(pr, p_crit / (2 * pr), "k:", label=r"$p_{\rm crit}/(2p)$")
    ax_r.set(xlabel="modulus $p$", ylabel="relative difference", title="How good is the $1/p$ law?")
    ax_r.legend(fontsize=8)
    return fig


def figure_theory_sweeps(fits: SweepFits) -> plt.Figure:
    """The paper's two fits on the model: delay against omega with a power law (left), and
    synthetic noisy delays against p with the planted and the fitted curve (right)."""
    params, delays = fits.params, fits.delays
    fig, (ax_w, ax_f) = _pair(9.5)
    omegas = fits.omegas
    ax_w.loglog(omegas, fits.tau_omega, "o", color="C0", label="model")
    ax_w.loglog(
        omegas,
        fits.omega_fit.predict(omegas),
        "C0-",
        lw=1,
        label=rf"fit: $\omega^{{{fits.omega_fit.exponent:.2f}}}$",
    )
    ax_w.set(xlabel=r"weight decay $\omega$", ylabel=r"$\tau_{\rm grok}$ (steps)", title=f"p = {params.p}")
    ax_w.set_xticks(omegas, [f"{w:g}" for w in omegas], minor=False)
    ax_w.set_xticks([], minor=True)
    ax_w.legend(fontsize=8)
    primes, p_runs, tau_runs = delays.primes, fits.p_runs, fits.tau_runs
    mean = np.array([tau_runs[p_runs == q].mean() for q in primes])
    sd = np.array([tau_runs[p_runs == q].std(ddof=1) for q in primes])
    ax_f.errorbar(primes, mean, sd, fmt="o", color="k", ms=4, capsize=2, label="synthetic mean ± sd")
    pf = np.linspace(max(fits.noisy_fit.p_crit, delays.p_crit) * 1.05, primes.max() * 1.1, 300)
    ax_f.plot(pf, grok_time(pf, delays.Omega_steps, delays.p_crit), "C2-", label="planted")
    ax_f.plot(pf, fits.noisy_fit.predict(pf), "C3--", label="fitted")
    ax_f.set(
        xlabel="modulus $p$", ylabel=r"$\tau_{\rm grok}$ (steps)", yscale="log", title=rf"$\omega$ = {params.omega:g}"
    )
    ax_f.legend(fontsize=8)
    return fig
