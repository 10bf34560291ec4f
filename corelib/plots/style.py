"""The look shared by the book's figures."""

from __future__ import annotations

import matplotlib.pyplot as plt

__all__ = ["use_book_style", "figure_message"]


def use_book_style() -> None:
    """Figures at 110 dpi without top and right spines (matplotlib's rcParams, for this process)."""
    plt.rcParams.update({"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False})


def figure_message(text: str, *, width: float = 9, height: float = 1.6) -> plt.Figure:
    """A figure that only says ``text``: the place of a figure whose data are not available."""
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10, color="0.3")
    return fig
