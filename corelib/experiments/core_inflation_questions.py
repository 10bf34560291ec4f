"""Tests of the core-inflation chapter's own explanations, on snapshots that exist.

The chapter finds cores smaller than the paper's at both ends of the run and a sufficient
dimension that grows where the paper has it stable, and offers explanations: dropout, the number
of Jacobians, a strict sufficiency test, seed noise. Each function here answers one of them from
the weight snapshots of a trained arm; none trains (a missing snapshot is an error naming the
command that makes it).

- :func:`core_sizes`: energy, necessary and sufficient ranks of each seed at chosen snapshots, for
  the run's settings or a variant of their analysis (e.g. 1 000 Jacobians instead of 64). Cached
  beside the arm's other analyses, under the analysis settings' key.
- :func:`sufficient_by_tolerance`: the sufficient rank when core-only accuracy may fall short of
  the model's by each of several tolerances.
- :func:`seed_interval`: a t-interval of a per-seed statistic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from ..engine import load_snapshot, snapshot_epochs
from ..interventions import ablation_curve, accuracy
from ..models import default_device
from ..results import StoreError, compute_once
from .modular_runs import ModularParams, analyse_model, analysis_path, arm_dir, make_data, model_core

__all__ = ["SeedInterval", "core_sizes", "seed_interval", "sufficient_by_tolerance"]


def _snapshot(params: ModularParams, arm: str, epoch: int):
    folder = arm_dir(params, arm)
    if epoch not in snapshot_epochs(folder):
        raise StoreError(
            f"no snapshot of arm {arm!r} at epoch {epoch} in {folder}; train it first "
            "(python -m acebook.paper_runs advance core_inflation ...)."
        )
    return load_snapshot(folder, epoch, default_device())


def core_sizes(params: ModularParams, arm: str, epochs: Sequence[int]) -> dict[int, list[dict]]:
    """The analysis of every seed (:func:`corelib.experiments.modular_runs.analyse_model`) at each
    snapshot ``epochs`` of ``arm``, ``{epoch: [analysis per seed]}``, with ``params``' analysis
    settings (``n_jacobians``, ``energy`` …); cached where the chapter's own analyses are."""
    test = make_data(params)["test"]
    out = {}
    for e in epochs:

        def compute(e: int = e) -> dict:
            stack = _snapshot(params, arm, e)
            return {"epoch": e, "models": [analyse_model(stack.model(i), test, params) for i in range(len(stack))]}

        out[e] = compute_once(analysis_path(params, arm, e), compute)["models"]
    return out


def sufficient_by_tolerance(params: ModularParams, arm: str, epoch: int, tolerances: Sequence[float]) -> np.ndarray:
    """Sufficient rank of each seed at snapshot ``epoch`` for each tolerance: the smallest rank r
    whose core-only accuracy reaches the model's own accuracy minus the tolerance.

    Returns an int array (seeds, tolerances); -1 where no rank reaches it. The paper's test is a
    tolerance of 0.001; a tolerance of k / n_test lets the core miss k more test pairs."""
    tol = np.asarray(tolerances, dtype=float)
    if tol.ndim != 1 or not np.all(np.isfinite(tol)) or np.any((tol < 0) | (tol >= 1)):
        raise ValueError(f"tolerances must be finite numbers in [0, 1); got {list(tolerances)}.")
    stack = _snapshot(params, arm, epoch)
    x, y = test = make_data(params)["test"]
    out = []
    for i in range(len(stack)):
        model = stack.model(i)
        with torch.no_grad():
            baseline = accuracy(model, x, y, score_positions="last")
        _, full, _, intervened = model_core(model, test, params)
        curve = ablation_curve(full, intervened, "keep")  # accuracy kept at ranks 1..D
        out.append([_first_at_least(curve, baseline - t) for t in tol])
    return np.asarray(out, dtype=int)


def _first_at_least(curve: np.ndarray, level: float) -> int:
    hits = np.flatnonzero(curve >= level)
    return int(hits[0]) + 1 if hits.size else -1


@dataclass(frozen=True)
class SeedInterval:
    """A per-seed statistic summarised over seeds.

    Attributes:
        mean: the mean over seeds.
        low, high: the two-sided t-interval of the mean at ``level``.
        n: the number of seeds.
        level: the confidence level.
    """

    mean: float
    low: float
    high: float
    n: int
    level: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def seed_interval(values: Sequence[float], level: float = 0.95) -> SeedInterval:
    """The t-interval of the mean of ``values`` (one per seed; at least two)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)):
        raise ValueError(f"need at least two finite values, one per seed; got {list(values)}.")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}.")
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return SeedInterval(float(v.mean()), float(v.mean() - half), float(v.mean() + half), int(v.size), level)
