"""Figure panels of the Markov-chain chapter (Figure 1). One function per panel; each draws on a
given Axes from a :class:`corelib.experiments.markov_chain.MarkovSummary`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from ..claims import claim

if TYPE_CHECKING:
    import pandas

    from ..experiments.markov_chain import MarkovSummary
    from ..experiments.markov_chain_seeds import SeedSets

__all__ = [
    "SEED_SET_CLAIMS",
    "figure_markov",
    "inside_paper_ranges",
    "other_seed_values",
    "panel_ablation_accuracy",
    "panel_cca",
    "panel_overlap",
    "panel_spectrum",
    "panel_weight_cosines",
    "seed_sets_frame",
]

MODE_LABELS = {"full": "full model", "keep": "core-only", "remove": "core-removed"}
MODEL_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def _pair_matrix(summary: MarkovSummary, value) -> np.ndarray:
    n = len(summary.models)
    m = np.eye(n)
    for pair in summary.pairs:
        i, j = pair.models
        m[i, j] = m[j, i] = value(pair)
    return m


def _heatmap(ax, m: np.ndarray, labels: list[str], title: str, fmt: str = "{:.2f}", vmin=0.0, vmax=1.0):
    ax.imshow(m, cmap="viridis", vmin=vmin, vmax=vmax)
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, fmt.format(v), ha="center", va="center", color="w" if v < (vmin + vmax) / 2 else "k")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_title(title)


def _labels(summary: MarkovSummary) -> list[str]:
    return [f"M$_{i + 1}$" for i in range(len(summary.models))]


def panel_weight_cosines(ax, summary: MarkovSummary) -> None:
    """(A) Cosine similarity of learned weights for every pair of models, per parameter tensor."""
    names = list(summary.pairs[0].weight_cosine_by_tensor)
    for k, pair in enumerate(summary.pairs):
        vals = [pair.weight_cosine_by_tensor[n] for n in names]
        ax.scatter(
            vals,
            range(len(names)),
            s=14,
            label=f"M$_{pair.models[0] + 1}$–M$_{pair.models[1] + 1}$",
            color=MODEL_COLORS[k % len(MODEL_COLORS)],
        )
    ax.set_yticks(range(len(names)), [n.replace("blocks.0.", "") for n in names], fontsize=7)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlim(-1, 1)
    ax.set_xlabel("cosine similarity of weights")
    ax.set_title("A  weights differ across seeds")
    ax.legend(fontsize=7, loc="lower right")


def panel_ablation_accuracy(ax, summary: MarkovSummary) -> None:
    """(B) Test accuracy of full / core-only / core-removed models, mean ± sem, with controls."""
    modes = list(MODE_LABELS)
    for k, mode in enumerate(modes):
        vals = np.array([getattr(m.accuracy, mode) for m in summary.models])
        sem = vals.std(ddof=1) / np.sqrt(len(vals)) if len(vals) > 1 else 0.0
        ax.bar(k, vals.mean(), yerr=sem, color="lightgrey", edgecolor="k", capsize=4)
        ax.scatter(
            np.full(len(vals), k) + np.linspace(-0.15, 0.15, len(vals)),
            vals,
            c=MODEL_COLORS[: len(vals)],
            zorder=3,
            s=18,
        )
    ax.axhline(summary.bayes_accuracy, ls="--", color="C3", label="Bayes-optimal")
    ax.axhline(summary.chance_accuracy, ls=":", color="k", label="chance")
    ax.set_xticks(range(len(modes)), [MODE_LABELS[m] for m in modes])
    ax.set_ylim(0, 1)
    ax.set_ylabel("test accuracy")
    ax.set_title("B  the core is necessary and sufficient")
    ax.legend(fontsize=7, loc="upper right")


def panel_overlap(ax, summary: MarkovSummary) -> None:
    """(C) Projector overlap between every pair of cores (1 = same subspace, 0 = orthogonal)."""
    _heatmap(ax, _pair_matrix(summary, lambda p: p.overlap), _labels(summary), "C  projector overlap")


def panel_cca(ax, summary: MarkovSummary) -> None:
    """(D) Mean canonical correlation between the core coordinates of every pair of models."""
    _heatmap(ax, _pair_matrix(summary, lambda p: float(np.mean(p.cca))), _labels(summary), "D  mean CCA", fmt="{:.3f}")


def panel_spectrum(ax, summary: MarkovSummary) -> None:
    """(E) Eigenvalues of the operators fitted in each core, against the chain's spectrum."""
    t = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(t), np.sin(t), color="lightgrey", lw=1)
    true = np.array(summary.chain_eigenvalues)
    ax.scatter(true.real, true.imag, s=160, facecolors="none", edgecolors="k", lw=1.5, label="Markov chain", zorder=2)
    for k, m in enumerate(summary.models):
        ev = np.array(m.eigenvalues, dtype=complex)
        ax.scatter(
            ev.real,
            ev.imag,
            marker="x",
            s=30,
            color=MODEL_COLORS[k % len(MODEL_COLORS)],
            label=f"core M$_{k + 1}$",
            zorder=3,
        )
    ax.set_aspect("equal")
    ax.set_xlim(-0.1, 1.1)
    ax.set_ylim(-0.6, 0.6)
    ax.set_xlabel("Re λ")
    ax.set_ylabel("Im λ")
    ax.set_title("E  core dynamics = chain spectrum")
    ax.legend(fontsize=7, loc="lower left")


def figure_markov(summary: MarkovSummary) -> plt.Figure:
    """Figure 1 of the paper: panels A–E from a Markov experiment summary."""
    fig = plt.figure(figsize=(15, 6.2), layout="constrained")
    grid = fig.add_gridspec(2, 6)
    panel_weight_cosines(fig.add_subplot(grid[:, 0:2]), summary)
    panel_ablation_accuracy(fig.add_subplot(grid[0, 2:4]), summary)
    panel_spectrum(fig.add_subplot(grid[:, 4:6]), summary)
    panel_overlap(fig.add_subplot(grid[1, 2]), summary)
    panel_cca(fig.add_subplot(grid[1, 3]), summary)
    return fig


# The claims of Table A2 that :class:`SeedSets` measures, by its field (the angles: every angle).
SEED_SET_CLAIMS = {
    "third": "markov.cca_third",
    "mean": "markov.cca_mean",
    "overlap": "markov.overlap",
    "angles": "markov.angles",
}


def _set_values(sets: SeedSets, field: str, k: int) -> np.ndarray:
    """Set ``k``'s values of ``field``, one number per pair (every angle of every pair for the angles)."""
    values = np.asarray(getattr(sets, field)[k], dtype=float).ravel()
    return values[~np.isnan(values)] if field == "angles" else values


def inside_paper_ranges(sets: SeedSets) -> pandas.DataFrame:
    """Whether each set of models (rows, the chapter's first) passes the tolerance of each claim
    of :data:`SEED_SET_CLAIMS` (columns, by claim id) for every one of its pairs
    (:meth:`corelib.claims.Claim.holds`; a missing value, e.g. no third correlation, fails)."""
    import pandas as pd

    rows = [
        {cid: claim(cid).holds(_set_values(sets, field, k).tolist()) for field, cid in SEED_SET_CLAIMS.items()}
        for k in range(len(sets.seeds))
    ]
    return pd.DataFrame(rows, index=_set_names(sets))


# The book's findings on the other sets, by the claim whose range they test.
OTHER_SEED_FINDINGS = {
    "markov.cca_third": "markov.cca_third_other_seeds",
    "markov.overlap": "markov.overlap_other_seeds",
}


def other_seed_values(sets: SeedSets) -> dict[str, float]:
    """The findings on the sets other than the chapter's (all but the first): for each claim of
    :data:`OTHER_SEED_FINDINGS`, the share of those sets that lie inside its range for every pair
    (:func:`inside_paper_ranges`). Empty when there is no other set."""
    if len(sets.seeds) < 2:
        return {}
    inside = inside_paper_ranges(sets).iloc[1:]
    return {finding: float(inside[cid].mean()) for cid, finding in OTHER_SEED_FINDINGS.items()}


def _set_names(sets: SeedSets) -> list[str]:
    return ["the chapter's", *(f"other {k}" for k in range(1, len(sets.seeds)))]


def _span(values: np.ndarray, digits: int) -> str:
    lo, hi = np.nanmin(values), np.nanmax(values)
    return f"{lo:.{digits}f}–{hi:.{digits}f}"


def seed_sets_frame(sets: SeedSets) -> pandas.DataFrame:
    """One row per set of models (the chapter's first): its seeds, and for each claim of
    :data:`SEED_SET_CLAIMS` the lowest and highest value over its pairs (as text) and whether
    every pair lies inside the paper's range (:func:`inside_paper_ranges`)."""
    import pandas as pd

    inside = inside_paper_ranges(sets)
    digits = {"third": 4, "mean": 4, "overlap": 3, "angles": 0}
    titles = {"third": "third correlation", "mean": "mean correlation", "overlap": "overlap", "angles": "angles (°)"}
    columns = {("", "seeds"): [", ".join(map(str, s)) for s in sets.seeds]}
    for field, cid in SEED_SET_CLAIMS.items():
        columns[(titles[field], "ours")] = [
            _span(_set_values(sets, field, k), digits[field]) for k in range(len(sets.seeds))
        ]
        columns[(titles[field], claim(cid).tolerance)] = ["yes" if v else "no" for v in inside[cid]]
    frame = pd.DataFrame(columns, index=inside.index)
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame
