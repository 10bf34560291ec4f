"""Figures of the core-inflation chapter (Figure 3): both arms' cores over time, their loss
spikes, removal curves and frequencies. Inputs are arrays from saved results."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from .modular_runs_figures import SEED_COLORS, panel_band
from .style import figure_message

if TYPE_CHECKING:
    from ..experiments.modular_records import Snapshot
    from ..experiments.paper_scale_records import RecordedInflation

__all__ = [
    "panel_operator",
    "panel_training_loss",
    "panel_frequency_shares",
    "panel_removal_curves",
    "ARM_COLORS",
    "ARM_LABELS",
    "figure_inflation",
    "figure_recorded_inflation",
    "figure_spikes",
    "figure_removal",
    "figure_frequencies",
    "panel_core_dimension",
    "panel_necessary_sufficient",
    "panel_mode_counts",
]

ARM_COLORS = {"wd": "black", "no_wd": "#7b3fa0"}
ARM_LABELS = {"wd": "weight decay kept", "no_wd": "weight decay removed"}


def panel_operator(ax, operator: np.ndarray, *, title: str, vmax: float | None = None):
    """Figure 3C (left): magnitudes of a fitted shift operator's entries."""
    a = np.abs(np.asarray(operator))
    im = ax.imshow(a, cmap="magma", vmin=0, vmax=vmax or max(a.max(), 1e-12))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("component")
    ax.set_ylabel("component")
    return im


def panel_training_loss(ax, histories: dict[str, dict]):
    """Training loss of every seed in each arm (log scale): the loss spikes of long runs.

    ``histories`` maps an arm (a key of ``ARM_COLORS``) to its per-epoch history
    (``corelib.experiments.modular_runs.history``).
    """
    for arm, hist in histories.items():
        epochs = np.asarray(hist["epoch"])
        loss = np.asarray(hist["loss"], dtype=float)
        for i in range(loss.shape[1]):
            ax.plot(
                epochs,
                loss[:, i],
                color=ARM_COLORS[arm],
                linewidth=0.6,
                alpha=0.55,
                label=ARM_LABELS[arm] if i == 0 else None,
            )
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (per seed)")


def panel_frequency_shares(ax, shares: dict[str, np.ndarray], *, share: float):
    """Cumulative share of the class centroids' variance held by the n largest frequencies.

    ``shares`` maps an arm to its (models, p // 2) shares at one epoch
    (``corelib.experiments.modular_runs.centroid_spectra``). One curve per model, its frequencies
    ranked by share (models use different frequencies, so they are not averaged); where a curve
    crosses the dashed line ``share`` is that model's frequency count.
    """
    for arm, s in shares.items():
        ranked = np.cumsum(np.sort(s, axis=1)[:, ::-1], axis=1)
        n = np.arange(1, s.shape[1] + 1)
        for i, row in enumerate(ranked):
            ax.plot(
                n,
                row,
                color=ARM_COLORS[arm],
                linewidth=0.8,
                alpha=0.4,
                label=f"{ARM_LABELS[arm]} (each model)" if i == 0 else None,
            )
    ax.axhline(share, color="0.6", linestyle="--", linewidth=1)
    ax.set_xlabel("number of largest frequencies n")
    ax.set_ylabel("share of centroid variance held")
    ax.set_ylim(0, 1.02)


def panel_removal_curves(
    ax, curves: dict, *, chance: float, necessary=None, max_rank: int | None = None, title: str | None = None
):
    """Core-removed accuracy against the number of core directions removed, one line per model.

    ``curves`` is :func:`corelib.experiments.modular_runs.removal_curves` at one snapshot. The dashed
    line is the chance threshold of the necessary rank; ``necessary`` (one rank per model, or
    None) marks where each curve first reaches it, at or above the energy rank.
    """
    ranks, remove = curves["rank"], np.asarray(curves["remove"])
    keep = ranks <= (max_rank or ranks[-1])
    for i, row in enumerate(remove):
        color = SEED_COLORS[i % len(SEED_COLORS)]
        ax.plot(ranks[keep], row[keep], color=color, linewidth=1, label=f"model {i + 1}")
        if necessary is not None and necessary[i] is not None:
            ax.plot(necessary[i], row[necessary[i] - 1], "o", color=color, markersize=5)
    ax.axhline(chance, color="0.4", linestyle="--", linewidth=1)
    ax.text(ranks[keep][-1], chance, "2/p ", ha="right", va="bottom", fontsize=7, color="0.3")
    ax.set_yscale("log")
    ax.set_xlabel("core directions removed (rank r)")
    ax.set_ylabel("core-removed test accuracy")
    if title:
        ax.set_title(title, loc="left", fontsize=10)


def _mark_branch(ax, branch_epoch: int) -> None:
    ax.axvline(branch_epoch, color="0.6", linestyle=":", linewidth=1)


def panel_core_dimension(ax, arms: dict[str, list[Snapshot]], branch_epoch: int) -> None:
    """Figure 3A: core dimension (necessary rank) of both arms, mean ± sem."""
    for arm, records in arms.items():
        epochs = np.array([r.epoch for r in records])
        dims = np.array([[m.core_dim for m in r.models] for r in records], dtype=float)
        panel_band(ax, epochs, dims, color=ARM_COLORS[arm], label=ARM_LABELS[arm], marker="o", markersize=2.5)
    _mark_branch(ax, branch_epoch)
    ax.set(xlabel="epoch", ylabel="core dimension")
    ax.legend(fontsize=8)


def panel_necessary_sufficient(ax, arms: dict[str, list[Snapshot]], branch_epoch: int) -> None:
    """Figure 3B: necessary (solid) and sufficient (dashed) ranks of both arms, means over models."""
    for key, style, label in (("necessary_rank", "-", "necessary"), ("sufficient_rank", "--", "sufficient")):
        for arm, records in arms.items():
            epochs = np.array([r.epoch for r in records])
            ranks = np.array([[getattr(m, key) for m in r.models] for r in records], dtype=float)  # None: NaN
            ax.plot(
                epochs,
                np.nanmean(ranks.astype(float), axis=1),
                style,
                color=ARM_COLORS[arm],
                label=label if arm == "wd" else None,
                alpha=1.0 if arm == "wd" else 0.8,
            )
    _mark_branch(ax, branch_epoch)
    ax.set(xlabel="epoch", ylabel="dimensions (mean over models)")
    ax.legend(fontsize=8, title="black: decay kept, purple: removed", title_fontsize=7)


def panel_mode_counts(ax, arms: dict[str, list[Snapshot]], *, p: int) -> None:
    """Figure 3C (right): rotational modes of both arms over time, against the maximum p // 2."""
    for arm, records in arms.items():
        counts = np.array([[len(m.modes) for m in r.models] for r in records], dtype=float)
        panel_band(ax, np.array([r.epoch for r in records]), counts, color=ARM_COLORS[arm], label=ARM_LABELS[arm])
    ax.axhline(p // 2, color="0.6", linestyle="--", linewidth=1)
    ax.text(ax.get_xlim()[0], p // 2, " max ⌊p/2⌋", va="bottom", fontsize=7, color="0.4")
    ax.set(xlabel="epoch", ylabel="rotational modes")
    ax.legend(fontsize=7)


def figure_inflation(arms: dict[str, list[Snapshot]], *, p: int, branch_epoch: int) -> plt.Figure:
    """Figure 3: (A) core dimension, (B) necessary vs sufficient ranks, (C) the shift operator of
    model 1 at the last epoch of each arm and the rotational modes over time.

    ``arms`` maps "wd" and "no_wd" to :func:`corelib.experiments.modular_runs.analyse_arm` records.
    """
    fig = plt.figure(figsize=(11, 6.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1)
    ax_a, ax_b = top.subplots(1, 2)
    panel_core_dimension(ax_a, arms, branch_epoch)
    ax_a.set_title("A  core dimension", loc="left", fontsize=10)
    panel_necessary_sufficient(ax_b, arms, branch_epoch)
    ax_b.set_title("B  necessary vs sufficient", loc="left", fontsize=10)
    ax_h1, ax_h2, ax_m = bottom.subplots(1, 3, width_ratios=[1, 1, 1.4])
    operators = {arm: np.array(records[-1].models[0].operator) for arm, records in arms.items()}
    vmax = max(np.abs(a).max() for a in operators.values())
    for ax, arm in ((ax_h1, "wd"), (ax_h2, "no_wd")):
        letter = "C  " if arm == "wd" else ""
        panel_operator(
            ax, operators[arm], vmax=vmax, title=f"{letter}{ARM_LABELS[arm]}\n(model 1, epoch {arms[arm][-1]['epoch']})"
        )
    panel_mode_counts(ax_m, arms, p=p)
    return fig


def figure_spikes(histories: dict[str, dict], *, branch_epoch: int) -> plt.Figure:
    """Training loss of every model in both arms (log scale), the branch epoch dotted."""
    fig, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
    panel_training_loss(ax, histories)
    _mark_branch(ax, branch_epoch)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def figure_removal(
    curves: dict[str, dict],
    necessary: dict[str, list],
    *,
    chance: float,
    loose_level: float,
    epoch: int,
    max_rank: int = 64,
) -> plt.Figure:
    """Core-removed accuracy against the rank removed, one panel per arm, at ``epoch``.

    ``curves`` maps an arm to :func:`corelib.experiments.modular_runs.removal_curves`, ``necessary``
    to each model's necessary rank (a dot on its curve); the dotted line is ``loose_level``.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained", sharey=True)
    for letter, ax, arm in zip("AB", axes, curves):
        panel_removal_curves(
            ax,
            curves[arm],
            chance=chance,
            max_rank=max_rank,
            necessary=necessary[arm],
            title=f"{letter}  {ARM_LABELS[arm]}, epoch {epoch}",
        )
        ax.axhline(loose_level, color="0.7", linestyle=":", linewidth=1)
    axes[0].legend(fontsize=8)
    axes[1].set_ylabel("")
    return fig


def figure_frequencies(spectra: dict[str, dict], *, share: float, branch_epoch: int) -> plt.Figure:
    """(A) The fewest frequencies holding ``share`` of the centroid variance, both arms over time;
    (B) each model's cumulative shares at the last epoch. ``spectra`` maps an arm to
    :func:`corelib.experiments.modular_runs.centroid_spectra`."""
    fig, (ax_n, ax_s) = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained", width_ratios=[1, 1.4])
    for arm, spectrum in spectra.items():
        panel_band(
            ax_n,
            spectrum["epoch"],
            spectrum["count"].astype(float),
            color=ARM_COLORS[arm],
            label=ARM_LABELS[arm],
            marker="o",
            markersize=2.5,
        )
    _mark_branch(ax_n, branch_epoch)
    ax_n.set(xlabel="epoch", ylabel=f"frequencies holding {share:.0%}")
    ax_n.legend(fontsize=8)
    ax_n.set_title("A  frequencies in use", loc="left", fontsize=10)
    panel_frequency_shares(ax_s, {arm: s["shares"][-1] for arm, s in spectra.items()}, share=share)
    ax_s.legend(fontsize=8, loc="lower right")
    last = int(next(iter(spectra.values()))["epoch"][-1])
    ax_s.set_title(f"B  the largest frequencies at epoch {last}", loc="left", fontsize=10)
    return fig


def figure_recorded_inflation(recorded: RecordedInflation | None) -> plt.Figure:
    """Figure 3 of the recorded paper-scale run (:func:`corelib.experiments.paper_scale.recorded_inflation`),
    or a note saying that none is recorded."""
    if recorded is None:
        return figure_message("No paper-scale run is recorded.")
    params = recorded.params
    return figure_inflation(recorded.arms, p=params.p, branch_epoch=params.branch_epoch)
