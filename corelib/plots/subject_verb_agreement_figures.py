"""Figure panels of the subject-verb agreement chapter (Figure 5), the side-by-side
generations of Figure 6, and the gate table judged by the steering claims. Everything is drawn
from the summary of :func:`corelib.experiments.subject_verb_agreement.run`; the experiment
reports the numbers, and only this layer holds them to the claims' tolerances."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from ..claims import claim
from ..experiments import subject_verb_agreement

if TYPE_CHECKING:
    import pandas

    from ..experiments.subject_verb_agreement import SVASummary

__all__ = [
    "gate_criteria_frame",
    "meets_steering_criteria",
    "passing_gates",
    "generation_html",
    "generation_boxes_html",
    "figure_sva",
    "panel_layer_sweep",
    "panel_coordinate_fit",
    "panel_agreement_boxes",
]

_MODE_STYLE = {
    "keep": ("tab:green", "Core-only"),
    "remove": ("tab:orange", "Core-removed"),
    "flip": ("tab:red", "Core-flipped"),
}
_MARKERS = "osD^vP*X"


def panel_layer_sweep(ax, summary: SVASummary) -> None:
    """(A) AUC of each intervention against normalised depth, one marker style per model; the
    line is the mean over models on a common depth grid, the band its min-max range."""
    grid = np.linspace(0, 1, 101)
    modes = [m for m in ("keep", "remove", "flip") if m in summary.models[0].sweep_auc]
    for mode in modes:
        colour, label = _MODE_STYLE[mode]
        curves = []
        for k, m in enumerate(summary.models):
            depth, values = np.asarray(m.depth), np.asarray(m.sweep_auc[mode])
            ax.plot(depth, values, _MARKERS[k % len(_MARKERS)], color=colour, ms=4, alpha=0.7, mfc="none")
            curves.append(np.interp(grid, depth, values, left=np.nan))
        curves = np.asarray(curves)
        ok = ~np.isnan(curves).any(axis=0)
        ax.plot(grid[ok], curves[:, ok].mean(0), color=colour, label=label)
        ax.fill_between(grid[ok], curves[:, ok].min(0), curves[:, ok].max(0), color=colour, alpha=0.15)
    base = np.mean([m.baseline_auc for m in summary.models])
    ax.axhline(base, color="k", ls="--", lw=1, label="Baseline (mean)")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    for k, m in enumerate(summary.models):
        ax.plot([], [], _MARKERS[k % len(_MARKERS)], color="k", mfc="none", label=m.model)
    ax.set(
        xlabel="normalised depth (layer / layers)", ylabel="agreement AUC", ylim=(-0.02, 1.02), title="(A) layer sweep"
    )
    ax.legend(fontsize=7, loc="lower left")


def _z(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean()) / (x.std() or 1.0)


def panel_coordinate_fit(ax, summary: SVASummary) -> None:
    """(B) z-scored core coordinate against z-scored margin, with each model's affine fit."""
    for k, m in enumerate(summary.models):
        z, margin = _z(m.coords), _z(m.margins["baseline"])
        colour = f"C{k}"
        ax.scatter(z, margin, s=5, alpha=0.35, color=colour)
        slope, intercept = np.polyfit(z, margin, 1)
        r = np.corrcoef(z, margin)[0, 1]
        xs = np.linspace(z.min(), z.max(), 2)
        ax.plot(xs, slope * xs + intercept, color=colour, label=f"{m.model} (r = {r:.2f})")
    ax.set(xlabel="core coordinate (z-score)", ylabel="margin (z-score)", title="(B) core coordinate vs margin")
    ax.legend(fontsize=7)


def panel_agreement_boxes(ax, summary: SVASummary) -> None:
    """(C) prompt-level agreement (margin signed towards the correct verb, in units of the
    baseline's standard deviation) under no intervention, core removal and core flip."""
    modes = ("baseline", "remove", "flip")
    n = len(summary.models)
    width = 0.8 / n
    for k, m in enumerate(summary.models):
        scale = np.std(m.scores["baseline"]) or 1.0
        data = [np.asarray(m.scores[mode]) / scale for mode in modes]
        pos = np.arange(len(modes)) + (k - (n - 1) / 2) * width
        box = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True, showfliers=False)
        for patch in box["boxes"]:
            patch.set(facecolor=f"C{k}", alpha=0.5)
        ax.plot([], [], "s", color=f"C{k}", alpha=0.5, label=m.model)
    p = summary.fisher_p
    ax.axhline(0, color="grey", ls=":", lw=1)
    ax.set_xticks(range(len(modes)), ["baseline", f"removed\np={p['remove']:.1e}", f"flipped\np={p['flip']:.1e}"])
    ax.set(ylabel="agreement score (baseline sd)", title="(C) prompt-level agreement")
    ax.legend(fontsize=7)


def figure_sva(summary: SVASummary):
    """Figure 5: layer sweep, coordinate-margin fit, prompt-level agreement."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    panel_layer_sweep(axes[0], summary)
    panel_coordinate_fit(axes[1], summary)
    panel_agreement_boxes(axes[2], summary)
    fig.tight_layout()
    return fig


def _render(gen: dict, steered: bool) -> str:
    out = []
    for piece, verb, clean_verb, gated in zip(gen["pieces"], gen["verb"], gen["clean_verb"], gen["gated"]):
        text = html.escape(piece)
        if steered and gated and verb is not None and clean_verb is not None and verb != clean_verb:
            text = f'<span style="background:#f6b8b8;font-weight:bold">{text}</span>'
        elif verb is not None:
            text = f"<b>{text}</b>"
        out.append(text)
    return "".join(out)


def generation_html(prompt: str, pair: dict, title: str = "") -> str:
    """Figure-6 style box: base and steered continuations side by side. Agreement verbs are
    bold; in the steered text, verbs whose number steering inverted are highlighted."""
    cell = "vertical-align:top;padding:4px 8px;width:50%;font-size:90%"
    p = html.escape(prompt)
    return (
        f'<table style="border:1px solid #999;margin:6px 0;width:100%">'
        f'<tr><th colspan="2" style="text-align:left">Prompt: <i>{p}</i>'
        f'<span style="float:right">{html.escape(title)}</span></th></tr>'
        f'<tr><td style="{cell}"><b>Base:</b> {p}{_render(pair["base"], False)}</td>'
        f'<td style="{cell}"><b>Core steering:</b> {p}{_render(pair["steered"], True)}</td></tr>'
        f"</table>"
    )


def generation_boxes_html(summary: SVASummary, *, n_display: int, seed: int) -> str:
    """Figure 6: the first ``n_display`` sampled continuations (generation seed ``seed``) of each
    model, base and steered side by side (:func:`generation_html`)."""
    boxes = []
    for m in summary.models:
        pairs = [pair for pair in m.steering["sampled"] if pair["seed"] == seed][:n_display]
        boxes += [generation_html(pair["base"]["prompt"], pair, m.model) for pair in pairs]
    return "".join(boxes)


def meets_steering_criteria(row: Mapping) -> bool:
    """Whether a row of :func:`corelib.experiments.subject_verb_agreement.gate_table` meets both
    steering criteria: its inversion rate passes the tolerance of the claim
    ``sva.steering_rate``, and its share of unchanged decision-free control continuations that of
    ``sva.steering_untouched`` (:mod:`corelib.claims`). No decision-free control: not met."""
    free = row["decision-free controls"]
    return (
        claim("sva.steering_rate").holds(row["inversion rate"])
        and free > 0
        and claim("sva.steering_untouched").holds(row["decision-free unchanged"] / free)
    )


def gate_criteria_frame(summary: SVASummary) -> pandas.DataFrame:
    """The gate table of every model (:func:`corelib.experiments.subject_verb_agreement.gate_frame`),
    indexed by (model, gate), with a last column ``both criteria`` (:func:`meets_steering_criteria`)."""
    frame = subject_verb_agreement.gate_frame(summary)
    frame["both criteria"] = [meets_steering_criteria(row) for _, row in frame.iterrows()]
    return frame


def passing_gates(summary: SVASummary) -> list[float]:
    """Gate thresholds of the grid at which every model meets both steering criteria."""
    frame = gate_criteria_frame(summary)["both criteria"]
    gates = sorted({float(g) for g in frame.index.get_level_values("gate")})
    return [g for g in gates if frame.xs(g, level="gate").all()]
