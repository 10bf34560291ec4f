"""Figures of the "How ACE works" chapter, drawn from the results of
:mod:`corelib.experiments.ace_method`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["figure_spectra", "figure_from_data", "figure_pca", "panel_decoy_plane", "panel_kept_r2"]

from corelib.experiments.ace_method import ARROW_SD, DecoyComparison, LTIComparison, SimulationResult


def figure_spectra(lti: LTIComparison, *, tolerance: float) -> plt.Figure:
    """ACE and Hankel singular values (left) and their relative difference (right), against
    ``tolerance`` and machine epsilon. ``lti`` is :func:`corelib.experiments.ace_method.lti_comparison`."""
    fig, (ax_s, ax_e) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
    hsv, ace, rank = lti.hankel, lti.ace, lti.params.rank
    idx = np.arange(1, len(hsv) + 1)
    ax_s.semilogy(idx, hsv, "o", ms=9, mfc="none", color="C0", label="Hankel (balanced truncation)")
    ax_s.semilogy(idx, ace, "x", ms=7, color="C3", label="ACE, from the two Gramians")
    ax_s.axvspan(0.5, rank + 0.5, color="0.9", zorder=0, label=f"kept by rank {rank}")
    ax_s.set(xlabel="index $i$", ylabel=r"$\sigma_i$", title="Spectra")
    ax_s.legend(fontsize=8)
    ax_e.semilogy(idx, np.maximum(np.abs(ace - hsv) / hsv, 1e-17), "s-", color="C3", ms=4)
    ax_e.axhline(tolerance, color="k", ls="--", lw=1, label="tolerance of the tests")
    ax_e.axhline(np.finfo(float).eps, color="0.5", ls=":", lw=1, label="machine epsilon")
    ax_e.set(xlabel="index $i$", ylabel="relative difference", title="ACE versus Hankel")
    ax_e.legend(fontsize=8)
    return fig


def figure_from_data(simulation: SimulationResult) -> plt.Figure:
    """Largest relative error of the top singular values from simulated data, against the
    trajectory length, with an ``N^{-1/2}`` guide. ``simulation`` is
    :func:`corelib.experiments.ace_method.from_simulation`."""
    params = simulation.params
    fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
    ns, errors = np.asarray(params.sim_steps, dtype=float), simulation.errors
    ax.loglog(ns, errors, "o-", color="C3", label=f"ACE from simulated data (RMS of {params.sim_repeats} runs)")
    ax.loglog(ns, errors[0] * np.sqrt(ns[0] / ns), "k--", lw=1, label=r"$\propto N^{-1/2}$")
    ax.set(xlabel="simulated steps $N$", ylabel=f"max rel. error of top-{params.rank} " + r"$\sigma_i$")
    ax.legend(fontsize=8)
    return fig


def panel_decoy_plane(ax, decoy: DecoyComparison):
    """Activations in the plane of the loudest and the quietest axis, coloured by the read-out,
    with the leading PCA and ACE directions as arrows. Returns the scatter (for a colour bar)."""
    h, axes = decoy.activations, decoy.axes
    plane = axes[:, [0, -1]]  # (e_1, e_D): loudest and quietest axes
    xy = (h - h.mean(axis=0)) @ plane
    dots = ax.scatter(xy[:, 0], xy[:, 1], c=decoy.readout_values, s=4, cmap="coolwarm", alpha=0.7)
    cov = np.cov(h.T)
    for vec, name, color in ((decoy.pca_direction, "PCA 1", "k"), (decoy.ace_direction, "ACE 1", "C2")):
        d2 = plane.T @ vec  # the direction in the plotted plane (both lie in it here)
        d2 = d2 * np.sign(d2[np.argmax(np.abs(d2))]) * ARROW_SD * np.sqrt(vec @ cov @ vec)
        ax.annotate("", xy=d2, xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2.5})
        ax.annotate(
            name,
            xy=d2,
            xytext=(6, 6),
            textcoords="offset points",
            color=color,
            fontsize=10,
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        )
    ax.set(
        xlabel=r"coordinate along $\mathbf{e}_1$ (ignored)",
        ylabel=r"coordinate along $\mathbf{e}_D$ (read)",
        title=r"Activations in the plane of $\mathbf{e}_1$, $\mathbf{e}_D$",
    )
    return dots


def panel_kept_r2(ax, decoy: DecoyComparison) -> None:
    """R^2 of the read-out after keeping the top-k ACE or PCA directions, for every k."""
    ax.plot(decoy.ks, decoy.r2_ace, "o-", color="C2", label="keep ACE top-$k$")
    ax.plot(decoy.ks, decoy.r2_pca, "s-", color="k", label="keep PCA top-$k$")
    ax.set(
        xlabel="directions kept $k$",
        ylabel="read-out $R^2$",
        ylim=(-0.05, 1.05),
        xticks=decoy.ks,
        title="What survives core-only",
    )
    ax.legend(fontsize=8, loc="center right")


def figure_pca(decoy: DecoyComparison) -> plt.Figure:
    """ACE versus PCA on decoy activations. ``decoy`` is
    :func:`corelib.experiments.ace_method.decoy_comparison`."""
    fig, (ax_plane, ax_r2) = plt.subplots(1, 2, figsize=(9.5, 3.6), layout="constrained")
    dots = panel_decoy_plane(ax_plane, decoy)
    fig.colorbar(dots, ax=ax_plane, label=r"read-out $f(\mathbf{h})$")
    panel_kept_r2(ax_r2, decoy)
    return fig
