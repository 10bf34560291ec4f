"""What the figures of the modular-addition runs share: one colour per seed, and a mean line with
its band of ± one standard error over the seeds."""

from __future__ import annotations

import numpy as np

__all__ = [
    "mean_sem",
    "panel_band",
    "SEED_COLORS",
]

SEED_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def mean_sem(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over the last axis (seeds), ignoring NaN."""
    v = np.asarray(values, dtype=float)
    n = np.sum(~np.isnan(v), axis=-1)
    sem = np.nanstd(v, axis=-1, ddof=1) / np.sqrt(n) if v.shape[-1] > 1 else np.zeros(v.shape[:-1])
    return np.nanmean(v, axis=-1), np.nan_to_num(sem)


def panel_band(ax, x, values, *, color, label=None, alpha=0.25, **line_kw):
    """Mean line with a ±sem band; ``values`` is (len(x), seeds)."""
    m, s = mean_sem(values)
    ax.plot(x, m, color=color, label=label, **line_kw)
    ax.fill_between(x, m - s, m + s, color=color, alpha=alpha, linewidth=0)
