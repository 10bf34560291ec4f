"""Figures of the grokking-sweeps chapter (the paper's Figure 4), drawn from the summary of
:func:`corelib.experiments.grokking_sweeps.run`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from corelib.tasks.sweeps import usable_delays
from corelib.theory import grok_time

from .style import figure_message

if TYPE_CHECKING:
    from corelib.experiments.grokking_sweeps import RecordedSweeps, SweepsSummary

__all__ = ["figure_sweeps", "figure_recorded_sweeps", "panel_delays"]


def panel_delays(ax, table: pd.DataFrame, by_condition: pd.DataFrame, by: str) -> None:
    """Each seed's delay (grey) and the mean ± sd per condition (black); log scale when any grokked."""
    usable = table[usable_delays(table)]
    ax.plot(usable[by], usable["delay"], ".", color="0.7", ms=4, label="seeds")
    grokked = by_condition.dropna(subset=["delay_mean"])
    ax.errorbar(
        grokked.index,
        grokked["delay_mean"],
        grokked["delay_sd"].fillna(0),
        fmt="o",
        color="k",
        ms=5,
        capsize=3,
        label="mean ± sd",
    )
    if table["delay"].gt(0).any():
        ax.set_yscale("log")
    else:  # a short run: say so instead of drawing an empty log axis
        ax.text(0.5, 0.5, "no seed grokked before the cap", transform=ax.transAxes, ha="center")
    ax.set_ylabel(r"$\tau_{\rm grok}$ (steps)")


def _panel_omega_fit(ax, summary: SweepsSummary) -> None:
    params, fit = summary.params, summary.fit_omega
    if fit is not None:
        beta, beta_sd = fit.loc["exponent", "estimate"], fit.loc["exponent", "sd"]
        ww = np.geomspace(min(params.omegas) * 0.9, max(params.omegas) * 1.1, 100)
        ax.plot(
            ww,
            fit.loc["prefactor", "estimate"] * ww**beta,
            "C0-",
            label=rf"fit $\propto \omega^{{{beta:.2f} \pm {beta_sd:.2f}}}$",
        )
    batch = "full batch" if params.omega_batch_size is None else f"batch {params.omega_batch_size}"
    ax.set(xscale="log", xlabel=r"weight decay $\omega$", title=f"p = {params.omega_p}, {batch}")
    ax.set_xticks(params.omegas, [f"{w:g}" for w in params.omegas], minor=False)
    ax.set_xticks([], minor=True)


def _panel_p_fit(ax, summary: SweepsSummary) -> None:
    params, fit, paper = summary.params, summary.fit_p, summary.paper
    pp = np.linspace(min(params.moduli) * 0.95, max(params.moduli) * 1.05, 300)
    if fit is not None:
        omega_big, p_crit = fit.loc["Omega", "estimate"], fit.loc["p_crit", "estimate"]
        above = pp[pp > p_crit * 1.01]
        ax.plot(
            above,
            grok_time(above, omega_big, p_crit),
            "C3-",
            label=rf"ODE fit: $\Omega$ = {omega_big:.3g}, $p_{{\rm crit}}$ = {p_crit:.3g}",
        )
    above = pp[pp > paper["p_crit"] * 1.01]
    ax.plot(
        above,
        grok_time(above, paper["Omega"] / params.p_weight_decay, paper["p_crit"]),
        color="0.5",
        ls="--",
        label=r"paper's fit, $\Omega/\omega$",
    )
    batch = "full batch" if params.p_batch_size is None else f"batch {params.p_batch_size}"
    ax.set(xlabel="modulus $p$", title=rf"$\omega$ = {params.p_weight_decay:g}, {batch}")


def figure_sweeps(summary: SweepsSummary) -> plt.Figure:
    """Figure 4: grokking delay against weight decay (power-law fit) and modulus (ODE fit)."""
    fig, (ax_w, ax_p) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    panel_delays(ax_w, summary.table_omega, summary.summary_omega, "weight_decay")
    _panel_omega_fit(ax_w, summary)
    panel_delays(ax_p, summary.table_p, summary.summary_p, "p")
    _panel_p_fit(ax_p, summary)
    for ax in (ax_w, ax_p):
        ax.legend(fontsize=8)
    return fig


def figure_recorded_sweeps(recorded: RecordedSweeps | None) -> plt.Figure:
    """Figure 4 of the recorded paper-scale sweeps (:func:`corelib.experiments.paper_scale.recorded_sweeps`),
    or a note saying that none is recorded."""
    if recorded is None:
        return figure_message("No paper-scale sweep is recorded.")
    return figure_sweeps(recorded)
