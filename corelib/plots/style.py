"""The look shared by the book's figures."""

from __future__ import annotations

import matplotlib.pyplot as plt

__all__ = ["use_book_style"]


def use_book_style() -> None:
    """Figures at 110 dpi without top and right spines (matplotlib's rcParams, for this process)."""
    plt.rcParams.update({"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False})
