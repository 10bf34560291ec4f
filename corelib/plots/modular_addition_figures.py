"""Figures of the modular-addition chapter (Figure 2): grokking, the core's ablations and the
operator's eigenvalues. Inputs are arrays from saved results."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from .modular_runs_figures import SEED_COLORS, panel_band

if TYPE_CHECKING:
    from ..experiments.modular_addition import EmergenceSummary
    from ..experiments.modular_records import Snapshot

__all__ = [
    "panel_grokking",
    "panel_ablation_bars",
    "panel_eigenvalues",
    "figure_emergence",
]


def panel_grokking(ax, acc_epochs, test_acc, core_epochs, core_dim, *, grok_epoch=None):
    """Figure 2A: test accuracy (red, left axis) and core dimension (grey, right axis), mean ± sem."""
    panel_band(ax, acc_epochs, test_acc, color="#c0392b", label="test accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy", color="#c0392b")
    twin = ax.twinx()
    panel_band(twin, core_epochs, core_dim, color="0.45", label="core dimension", marker="o", markersize=3)
    twin.set_ylabel("core dimension", color="0.35")
    twin.set_ylim(bottom=0)
    if grok_epoch is not None:
        ax.axvline(grok_epoch, color="0.6", linestyle=":", linewidth=1)
        ax.text(grok_epoch, 0.5, " grokking", color="0.4", fontsize=8, rotation=90, va="center")
    return twin


def panel_ablation_bars(ax, accuracies: dict[str, np.ndarray], *, chance: float, threshold: float):
    """Figure 2B: full / core-only / core-removed accuracy per model, with chance and the 2/p line."""
    labels = list(accuracies)
    n_models = len(next(iter(accuracies.values())))
    width = 0.8 / n_models
    for i in range(n_models):
        xs = np.arange(len(labels)) + (i - (n_models - 1) / 2) * width
        ax.bar(
            xs,
            [accuracies[k][i] for k in labels],
            width,
            color=SEED_COLORS[i % len(SEED_COLORS)],
            label=f"model {i + 1}",
        )
    ax.axhline(chance, color="0.3", linestyle=":", linewidth=1, label="chance 1/p")
    ax.axhline(threshold, color="0.3", linestyle="--", linewidth=1, label="2/p")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7, loc="center right")


def panel_eigenvalues(ax, eigenvalues: list[np.ndarray], *, p: int, title: str):
    """Figure 2C: operator eigenvalues of each model in the complex plane, with the unit circle.

    The shaded ring is the band ``| |λ| - 1 | <= sin(π/p)`` counted as "on the unit circle".
    """
    t = np.linspace(0, 2 * np.pi, 400)
    band = np.sin(np.pi / p)
    ax.fill(
        np.r_[(1 + band) * np.cos(t), (1 - band) * np.cos(t[::-1])],
        np.r_[(1 + band) * np.sin(t), (1 - band) * np.sin(t[::-1])],
        color="0.9",
        linewidth=0,
    )
    ax.plot(np.cos(t), np.sin(t), color="0.5", linewidth=0.8)
    for i, ev in enumerate(eigenvalues):
        ev = np.asarray(ev)
        ax.scatter(
            ev.real,
            ev.imag,
            s=9,
            color=SEED_COLORS[i % len(SEED_COLORS)],
            alpha=0.8,
            label=f"model {i + 1}",
            linewidths=0,
        )
    ax.set_aspect("equal")
    lim = max(1.25, max((np.abs(np.asarray(e)).max() for e in eigenvalues if len(e)), default=1) + 0.1)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_xlabel("Re λ")
    ax.set_ylabel("Im λ")
    ax.set_title(title, fontsize=10)


def _complex(eigenvalues) -> np.ndarray:
    """Eigenvalues saved as (re, im) pairs, as complex numbers."""
    return np.array(eigenvalues, dtype=float).reshape(-1, 2) @ np.array([1, 1j])


def figure_emergence(records: list[Snapshot], history: dict, summary: EmergenceSummary, *, p: int) -> plt.Figure:
    """Figure 2: (A) test accuracy and core dimension, (B) ablations at the last snapshot, (C)
    shift-operator eigenvalues before, at and after grokking.

    ``records`` are the analysed snapshots of :func:`corelib.experiments.modular_runs.analyse_arm`,
    ``history`` its per-epoch history, ``summary`` :func:`~corelib.experiments.modular_addition.emergence_summary`.
    """
    fig = plt.figure(figsize=(11, 6.4), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.05])
    ax_a, ax_b = top.subplots(1, 2, width_ratios=[1.6, 1])
    evaluated = [(e, a) for e, a in zip(history["epoch"], history["test_acc"]) if a is not None]
    acc_epochs, test_acc = (np.array(column) for column in zip(*evaluated))
    core_dim = np.array([[m.core_dim for m in r.models] for r in records], dtype=float)
    epochs = np.array([r.epoch for r in records])
    panel_grokking(ax_a, acc_epochs, test_acc, epochs, core_dim, grok_epoch=summary.grok_epoch)
    ax_a.set_title("A  test accuracy and core dimension", loc="left", fontsize=10)
    final = records[-1].models
    panel_ablation_bars(
        ax_b,
        {
            "full": [m.test_acc for m in final],
            "core-only": [m.keep_acc for m in final],
            "core-removed": [m.remove_acc for m in final],
        },
        chance=1 / p,
        threshold=2 / p,
    )
    ax_b.set_title(f"B  ablations at epoch {records[-1].epoch}", loc="left", fontsize=10)
    axes_c = bottom.subplots(1, 3)
    for k, (ax, (phase, eigenvalues)) in enumerate(zip(axes_c, summary.eigenvalues.items())):
        epochs_text = ", ".join(map(str, summary.phases[phase]))
        letter = "C  " if k == 0 else ""  # the panel letter leads the first title, not a second one
        panel_eigenvalues(
            ax, [_complex(e) for e in eigenvalues], p=p, title=f"{letter}{phase} grokking (epochs {epochs_text})"
        )
    axes_c[-1].legend(fontsize=7, loc="lower right")
    return fig
