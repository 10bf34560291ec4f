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
    if np.iscomplexobj(x):
        raise ValueError(f"{name} is complex; pass real activations and Jacobians (e.g. its real part, if meant).")
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers, got {type(x).__name__} ({exc}).") from None
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


MAX_EPOCHS = 1_000_000  # fifty times the paper's longest run; beyond it a horizon is a typo
MAX_SEED = 2**32  # numpy's and torch's seeds are below it


def check_energy(energy: float) -> float:
    """Energy thresholds are fractions in (0, 1]."""
    if not is_number(energy) or not (0.0 < float(energy) <= 1.0):
        raise ValueError(f"energy must be a number in (0, 1] (a share of the spectrum's energy), got {energy!r}.")
    return float(energy)


def check_rank(rank: int, upper: int, what: str = "dimension D") -> int:
    """A core rank is an integer in [1, upper] (not a bool, not a fraction)."""
    if not is_number(rank) or int(rank) != rank or not (1 <= rank <= upper):
        raise ValueError(f"rank must be a whole number in [1, {upper}] (the {what}), got {rank!r}.")
    return int(rank)


def is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def is_finite(v) -> bool:
    return isinstance(v, (int, np.integer)) or bool(np.isfinite(v))  # a Python int may exceed a float


def is_whole(v) -> bool:
    return is_number(v) and is_finite(v) and int(v) == v


def check_seeds(owner: str, seeds, *, at_least: int = 1, name: str = "seeds") -> tuple[int, ...]:
    """Seeds as a tuple of distinct whole numbers in [0, 2**32), at least ``at_least`` of them."""
    fix = f"pass a list of distinct whole numbers, e.g. {name}=[0, 1, 2]"
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"{owner}: {name} must be a list of seeds, got {seeds!r}; {fix}.")
    seeds = list(seeds)
    bad = [s for s in seeds if not is_whole(s) or not 0 <= s < MAX_SEED]
    if bad:
        raise ValueError(f"{owner}: {name} must be whole numbers in [0, 2**32), got {bad[0]!r} in {seeds!r}; {fix}.")
    seeds = [int(s) for s in seeds]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(
            f"{owner}: {name} lists {twice[0]} more than once ({seeds}); identical seeds train identical models, "
            f"which makes every comparison between them trivially perfect. {fix[0].upper() + fix[1:]}."
        )
    if len(seeds) < at_least:
        raise ValueError(
            f"{owner}: {name} must list at least {at_least} seed{'s' if at_least > 1 else ''} (this experiment "
            f"compares models with each other), got {seeds}; {fix}."
        )
    return tuple(seeds)


def check_seed(owner: str, name: str, value) -> int:
    """One seed: a whole number in [0, 2**32)."""
    if not is_whole(value) or not 0 <= value < MAX_SEED:
        raise ValueError(f"{owner}: {name} must be a whole number in [0, 2**32), got {value!r}; e.g. {name}=0.")
    return int(value)


def check_memory(owner: str, name: str, value, needed_bytes: float, what: str, fix: str | None = None) -> None:
    """Refuse a size whose memory (``needed_bytes``, an estimate of ``what``) exceeds the machine's."""
    total = _total_memory()
    if total is not None and needed_bytes > 0.8 * total:
        raise ValueError(
            f"{owner}: {name} = {value} needs about {needed_bytes / 2**30:.0f} GiB for {what}; this machine has "
            f"{total / 2**30:.0f} GiB. Choose a smaller {fix or name}."
        )


def _total_memory() -> int | None:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: no estimate, no refusal
        return None


def check_settings(
    owner: str,
    *,
    positive: dict | None = None,
    non_negative: dict | None = None,
    integers: dict | None = None,
    fractions: dict | None = None,
    epochs: dict | None = None,
    rates: dict | None = None,
) -> None:
    """Refuse impossible settings of a parameter object before any work, naming each and the fix.

    ``positive``: finite numbers > 0; ``non_negative``: finite numbers >= 0; ``integers``: whole
    numbers >= 1 (a bool or a fraction is refused, not truncated); ``fractions``: numbers in
    (0, 1]; ``epochs``: whole numbers in [1, MAX_EPOCHS]; ``rates``: learning rates in (0, 1].
    Each maps setting names to values.
    """
    problems = []
    for name, v in (positive or {}).items():
        if not is_number(v) or not is_finite(v) or not v > 0:
            problems.append(f"{name} must be a finite positive number, got {v!r}")
    for name, v in (non_negative or {}).items():
        if not is_number(v) or not is_finite(v) or not v >= 0:
            problems.append(f"{name} must be a finite number >= 0, got {v!r}")
    for name, v in (integers or {}).items():
        if not is_whole(v) or v < 1:
            problems.append(f"{name} must be a whole number of at least 1, got {v!r}")
    for name, v in (fractions or {}).items():
        if not is_number(v) or not 0 < v <= 1:
            problems.append(f"{name} must lie in (0, 1], got {v!r}")
    for name, v in (epochs or {}).items():
        if not is_whole(v) or not 1 <= v <= MAX_EPOCHS:
            problems.append(f"{name} must be a whole number of epochs in [1, {MAX_EPOCHS:,}], got {v!r}")
    for name, v in (rates or {}).items():
        if not is_number(v) or not 0 < v <= 1:
            problems.append(f"{name} must be a learning rate in (0, 1] (the paper: 1e-3), got {v!r}")
    if problems:
        raise ValueError(f"{owner}: " + "; ".join(problems) + ". Change these settings and run again.")


def check_decay(owner: str, lr: float, weight_decay: float, name: str = "weight_decay") -> None:
    """AdamW multiplies every weight by 1 - lr * weight_decay each step: at 1 or more it zeroes or
    flips the weights, so that product must stay below 1."""
    if is_number(lr) and is_number(weight_decay) and lr * weight_decay >= 1:
        raise ValueError(
            f"{owner}: lr * {name} = {lr} * {weight_decay} = {lr * weight_decay:g} >= 1; AdamW would zero or flip "
            f"every weight at each step. Choose a smaller lr or {name} (the paper: lr 1e-3, {name} 1)."
        )


def check_split(owner: str, train_fraction, name: str = "train_fraction") -> float:
    """A share of the data that trains, strictly inside (0, 1): at 0 nothing trains, at 1 nothing
    is left to test generalisation on."""
    if not is_number(train_fraction) or not is_finite(train_fraction) or not 0 < train_fraction < 1:
        raise ValueError(
            f"{owner}: {name} is the share of the pairs that train, strictly between 0 and 1 (the rest test), "
            f"got {train_fraction!r}; the paper: 0.5."
        )
    return float(train_fraction)


def check_distinct(owner: str, name: str, values) -> None:
    """Refuse a list that names one value twice (a sweep would run one condition twice)."""
    seen: list = []
    for v in values:
        if v in seen:
            raise ValueError(
                f"{owner}: {name} lists {v!r} more than once ({list(values)}); each value is one condition of the "
                f"sweep, run once. Remove the repeat."
            )
        seen.append(v)


def check_workers(owner: str, n_jobs, name: str = "n_jobs") -> None:
    """Worker processes as joblib counts them: None (joblib's configuration), a whole number >= 1,
    or a negative one counting back from the CPUs (-1: all of them); 0 means nothing."""
    if n_jobs is not None and (not is_whole(n_jobs) or n_jobs == 0):
        raise ValueError(
            f"{owner}: {name} must be None (one process unless configured), a whole number of processes >= 1, or "
            f"-1 for every CPU; got {n_jobs!r}."
        )
