"""Input validation shared by the public API.

Every public function that accepts user data calls these so that bad input fails early with a
message naming the problem and the fix, instead of producing NaNs or silently clipped ranks.
"""

from __future__ import annotations

import numpy as np


def as_matrix(x, name: str, *, ndim: int = 2, dtype=np.float64) -> np.ndarray:
    """Return ``x`` as a finite float array with ``ndim`` dimensions, or raise ``ValueError``."""
    try:
        import torch

        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().double().numpy()
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass
    arr = np.asarray(x, dtype=dtype)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}.")
    if arr.size == 0 or any(s == 0 for s in arr.shape):
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one sample.")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/Inf values; check the model or the inputs that "
            "produced it (e.g. a diverged training run) before extracting a core."
        )
    return arr


def check_energy(energy: float) -> float:
    """Energy thresholds are fractions in (0, 1]."""
    if not (0.0 < float(energy) <= 1.0):
        raise ValueError(f"energy must be in (0, 1], got {energy}.")
    return float(energy)


def check_rank(rank: int, upper: int, what: str = "dimension D") -> int:
    """A core rank is an integer in [1, upper]."""
    if int(rank) != rank or not (1 <= rank <= upper):
        raise ValueError(f"rank must be an integer in [1, {upper}] (the {what}), got {rank}.")
    return int(rank)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def check_settings(
    owner: str,
    *,
    positive: dict | None = None,
    non_negative: dict | None = None,
    integers: dict | None = None,
    fractions: dict | None = None,
) -> None:
    """Refuse impossible settings of a parameter object before any work, naming each and the fix.

    ``positive``: numbers > 0; ``non_negative``: numbers >= 0; ``integers``: whole numbers >= 1;
    ``fractions``: numbers in (0, 1]. Each maps setting names to values.
    """
    problems = []
    for name, v in (positive or {}).items():
        if not _is_number(v) or not v > 0:
            problems.append(f"{name} must be a positive number, got {v!r}")
    for name, v in (non_negative or {}).items():
        if not _is_number(v) or not v >= 0:
            problems.append(f"{name} must be zero or positive, got {v!r}")
    for name, v in (integers or {}).items():
        if not _is_number(v) or int(v) != v or v < 1:
            problems.append(f"{name} must be a whole number of at least 1, got {v!r}")
    for name, v in (fractions or {}).items():
        if not _is_number(v) or not 0 < v <= 1:
            problems.append(f"{name} must lie in (0, 1], got {v!r}")
    if problems:
        raise ValueError(f"{owner}: " + "; ".join(problems) + ". Change these settings and run again.")
