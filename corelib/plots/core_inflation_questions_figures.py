"""Figure of the core-inflation chapter's tests of its own explanations: the weight-decay arm
trained without dropout beside the same arm with it, and the sufficient rank under looser tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .style import figure_message

__all__ = ["QUESTION_COLORS", "figure_inflation_questions", "panel_tolerances"]

QUESTION_COLORS = {"dropout 0": "#d9730d", "dropout 0.1": "black", "recorded": "0.6"}


def _band(ax, epochs: np.ndarray, per_seed: np.ndarray, color: str, label: str, dashed: bool = False) -> None:
    mean = per_seed.mean(axis=1)
    ax.plot(epochs, mean, color=color, lw=1.6, ls="--" if dashed else "-", label=label)
    ax.fill_between(epochs, per_seed.min(axis=1), per_seed.max(axis=1), color=color, alpha=0.15, lw=0)


def panel_tolerances(ax, sufficient: np.ndarray, tolerances: Sequence[float], epochs: Sequence[int]) -> None:
    """Mean sufficient rank (bars) and each seed's (dots) at each tolerance, one group per snapshot.
    ``sufficient``: (snapshots, seeds, tolerances)."""
    k, s, t = sufficient.shape
    width = 0.8 / t
    shades = plt.cm.Greys(np.linspace(0.85, 0.35, t))
    for j, tol in enumerate(tolerances):
        x = np.arange(k) + (j - (t - 1) / 2) * width
        ax.bar(x, sufficient[:, :, j].mean(axis=1), width * 0.9, color=shades[j], label=f"tolerance {tol:g}")
        for i in range(k):
            ax.plot(np.full(s, x[i]), sufficient[i, :, j], "o", ms=3, color="#d9730d", zorder=3)
    ax.set_xticks(np.arange(k), [f"epoch {e}" for e in epochs])
    ax.set_ylabel("sufficient rank")
    ax.legend(frameon=False, fontsize=8)


def figure_inflation_questions(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
    sufficient: np.ndarray | None = None,
    tolerances: Sequence[float] = (),
    tolerance_epochs: Sequence[int] = (),
    paper: Mapping[int, float] | None = None,
) -> plt.Figure:
    """(A) Core dimension over epochs, mean and seed range, for each of ``curves``
    (``{label: (epochs (E,), core_dim (E, S))}``; labels as in :data:`QUESTION_COLORS`), with the
    paper's values ``{epoch: dimension}`` as crosses. (B) :func:`panel_tolerances` of the arm
    trained again with dropout. None: a figure that says no record is present."""
    if not curves:
        return figure_message(
            "No recorded tests of the explanations in this checkout (recorded/core_inflation_questions_paper)."
        )
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", width_ratios=(3, 2))
    for label, (epochs, dims) in curves.items():
        _band(
            a,
            np.asarray(epochs),
            np.asarray(dims, dtype=float),
            QUESTION_COLORS.get(label, "C0"),
            label,
            label == "recorded",
        )
    for e, v in (paper or {}).items():
        a.plot([e], [v], "x", color="crimson", ms=9, mew=2, label="paper" if e == min(paper) else None)
    a.set_xlabel("epoch")
    a.set_ylabel("core dimension")
    a.set_title("A. weight decay kept, with and without dropout", fontsize=10, loc="left")
    a.legend(frameon=False, fontsize=8)
    if sufficient is not None:
        panel_tolerances(b, np.asarray(sufficient), tolerances, tolerance_epochs)
    b.set_title("B. sufficient rank, dropout 0.1, looser tests", fontsize=10, loc="left")
    return fig
