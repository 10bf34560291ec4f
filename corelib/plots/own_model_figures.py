"""Figures of the chapter "ACE on your own model", drawn from the summary of
:func:`corelib.experiments.own_model.run`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from ..experiments.own_model import AgreementAnalysis, OwnModelSummary, TenseAnalysis

__all__ = [
    "figure_tense",
    "figure_directions",
    "panel_tense_sweep",
    "panel_core_spectrum",
    "panel_tense_coordinate",
    "panel_directions",
    "panel_direction_sweep",
]

_MODES = {"keep": ("tab:green", "core kept"), "remove": ("tab:orange", "core removed"), "flip": ("tab:red", "flipped")}


def panel_tense_sweep(ax, tense: TenseAnalysis) -> None:
    """(A) AUC of the tense margin with each layer's core kept, removed or flipped, by layer."""
    layers = np.asarray(tense.layers) + 1
    for mode, (colour, label) in _MODES.items():
        ax.plot(layers, tense.sweep_auc[mode], "o-", color=colour, ms=3, label=label)
    ax.axhline(tense.baseline_auc, color="k", ls="--", lw=1, label="unmodified")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.axvline(tense.chosen_layer + 1, color="grey", lw=0.8)
    ax.set(xlabel=f"layer (of {tense.n_layers})", ylabel="tense AUC", ylim=(-0.02, 1.02), title="(A) layer sweep")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="lower left")


def panel_core_spectrum(ax, tense: TenseAnalysis) -> None:
    """(B) The chosen layer's activity x relevance singular values, relative to the first."""
    s = np.asarray(tense.singular_values, dtype=np.float64)
    k = np.arange(1, len(s) + 1)
    ax.semilogy(k, s / s[0], "o-", color="tab:blue", ms=3)
    ax.set(
        xlabel="index k",
        ylabel="σ_k / σ_1",
        title=f"(B) spectrum, layer {tense.chosen_layer + 1}",
        xticks=k[::4] if len(k) > 8 else k,
    )
    ax.text(0.95, 0.95, f"(σ1/σ2)² = {tense.spectral_gap:.3g}", transform=ax.transAxes, ha="right", va="top")


def panel_tense_coordinate(ax, tense: TenseAnalysis) -> None:
    """(C) Held-out prompts: core coordinate against the tense margin, by the tense of the cue."""
    z, margin, past = (np.asarray(getattr(tense, k), dtype=np.float64) for k in ("coords", "margins", "past"))
    for value, colour, label in ((1, "tab:purple", "past cue"), (0, "tab:olive", "present cue")):
        sel = past == value
        ax.scatter(z[sel], margin[sel], s=6, alpha=0.5, color=colour, label=label)
    ax.axhline(0, color="grey", ls=":", lw=1)
    ax.set(xlabel="core coordinate", ylabel="margin (was + were) − (is + are)", title="(C) held-out prompts")
    ax.legend(fontsize=7, loc="lower right")


def figure_tense(summary: OwnModelSummary):
    """The tense core: layer sweep, spectrum at the chosen layer, coordinate against margin."""
    tense = summary.tense
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panel_tense_sweep(axes[0], tense)
    panel_core_spectrum(axes[1], tense)
    panel_tense_coordinate(axes[2], tense)
    fig.tight_layout()
    return fig


_BARS = (
    ("read_auc", "tab:blue", "reads the label"),
    ("remove", "tab:orange", "direction removed"),
    ("flip", "tab:red", "direction flipped"),
)


def panel_directions(ax, model: AgreementAnalysis, letter: str = "A") -> None:
    """One model: for each direction, the AUC of its projection for the label, and the margin's AUC
    with it removed and flipped; the x labels give each direction's angle to the ACE core."""
    names = list(model.directions)
    x = np.arange(len(names))
    width = 0.8 / len(_BARS)
    for k, (key, colour, label) in enumerate(_BARS):
        values = [getattr(model.directions[n], key) for n in names]
        ax.bar(x + (k - (len(_BARS) - 1) / 2) * width, values, width * 0.95, color=colour, label=label)
    ax.axhline(model.baseline_auc, color="k", ls="--", lw=1, label="unmodified")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ticks = [f"{n}\n{model.directions[n].angle_to_ace:.0f}° from ACE" for n in names]
    ax.set_xticks(x, ticks, fontsize=8)
    ax.set(ylim=(0, 1.05), ylabel="AUC", title=f"({letter}) {model.model}: layer {model.layer + 1}")


_SWEEP = (
    ("probe_read", "tab:blue", "-", "probe: reads the label"),
    ("probe_remove", "tab:orange", "--", "probe removed"),
    ("probe_flip", "tab:red", "--", "probe flipped"),
    ("ace_remove", "tab:orange", "-", "ACE core removed"),
    ("ace_flip", "tab:red", "-", "ACE core flipped"),
)


def panel_direction_sweep(ax, model: AgreementAnalysis, letter: str = "A") -> None:
    """One model, by layer: how well a probe's direction reads the label, and the margin's AUC with
    the probe's direction or the ACE core removed and flipped."""
    layers = np.asarray(model.layers) + 1
    for key, colour, style, label in _SWEEP:
        ax.plot(layers, getattr(model.sweep, key), style, color=colour, marker="o", ms=3, label=label)
    ax.axhline(model.baseline_auc, color="k", ls=":", lw=1, label="unmodified")
    ax.axvline(model.layer + 1, color="grey", lw=0.8)
    ax.set(
        xlabel=f"layer (of {model.n_layers})",
        ylabel="AUC",
        ylim=(-0.02, 1.05),
        title=f"({letter}) {model.model}: by layer",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def figure_directions(summary: OwnModelSummary):
    """ACE beside the mean difference, the probe and the top principal component: by layer (top row)
    and at the chosen layer (bottom row), one column per model."""
    models = summary.agreement
    fig, axes = plt.subplots(2, len(models), figsize=(6.5 * len(models), 8.4), squeeze=False)
    letters = "ABCDEFGHIJKL"
    for k, model in enumerate(models):
        panel_direction_sweep(axes[0][k], model, letters[k % 12])
        panel_directions(axes[1][k], model, letters[(len(models) + k) % 12])
    axes[0][0].legend(fontsize=7, loc="lower left")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
