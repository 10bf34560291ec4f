"""Figures of the chapter on the clock of core inflation and the interpretability window."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from .modular_runs_figures import SEED_COLORS, panel_band

if TYPE_CHECKING:
    from ..experiments.inflation_clock import ClockChapter, WindowCurve

__all__ = ["figure_clock", "figure_window", "WINDOW_COLORS"]

_METRIC_LABELS = {"core_dim": "core dimension", "gap": "necessary - sufficient", "modes": "rotational modes"}
WINDOW_COLORS = {
    "kept": "black",
    "restarted": "#8c8c8c",
    "removed": "#7b3fa0",
    "anneal_short": "#1f77b4",
    "anneal_long": "#2ca02c",
    "removed_late": "#d62728",
}


def figure_clock(summary: ClockChapter) -> plt.Figure:
    """Each metric of every run against epochs (top) and against tau = lr wd steps (bottom),
    mean ± sem over seeds; ``summary`` is :func:`corelib.experiments.inflation_clock.run`'s."""
    metrics = list(summary.curves)
    fig, axes = plt.subplots(2, len(metrics), figsize=(4 * len(metrics), 6), layout="constrained", squeeze=False)
    for j, metric in enumerate(metrics):
        for k, (label, c) in enumerate(summary.curves[metric].items()):
            color = "0.5" if label.startswith("recorded") else SEED_COLORS[k % len(SEED_COLORS)]
            for i, x in enumerate((c.epochs, c.tau)):
                panel_band(axes[i, j], x, c.values, color=color, label=label, marker="o", markersize=2)
        axes[0, j].set(xlabel="epoch", ylabel=_METRIC_LABELS[metric], xscale="log")
        axes[1, j].set(xlabel="tau = lr x wd x steps", ylabel=_METRIC_LABELS[metric], xscale="log")
        for ax in axes[:, j]:
            ax.xaxis.set_minor_formatter(NullFormatter())  # the minor labels of a short log axis collide
        ratio = summary.clock.collapse[metric].ratio
        axes[1, j].set_title(f"spread ratio {ratio:.2f}" if np.isfinite(ratio) else "", fontsize=9)
    axes[0, 0].legend(fontsize=7)
    return fig


def figure_window(curves: dict[str, WindowCurve]) -> plt.Figure:
    """Core dimension, modes and test accuracy of the window's arms against epochs, mean ± sem,
    each arm's branch dotted; ``curves`` is
    :func:`corelib.experiments.inflation_clock.window_curves`'s (``ClockChapter.window_curves``)."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), layout="constrained")
    for name, c in curves.items():
        color = WINDOW_COLORS.get(name, "0.5")
        for ax, key in zip(axes, ("core_dim", "modes", "test_acc")):
            panel_band(ax, c.epochs, getattr(c, key), color=color, label=name.replace("_", " "))
            if c.branch is not None:
                ax.axvline(c.branch, color=color, linestyle=":", linewidth=1)
    for ax, label in zip(axes, ("core dimension", "rotational modes", "test accuracy")):
        ax.set(xlabel="epoch", ylabel=label)
    axes[0].legend(fontsize=7)
    return fig
