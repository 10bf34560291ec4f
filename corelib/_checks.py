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
