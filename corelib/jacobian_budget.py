"""How many Jacobians ACE needs: the core found from a few sampled Jacobians against many.

ACE's relevance matrix is a mean of ``J_i^T J_i`` over sampled activations. The paper samples 64
Jacobians, the authors' reference code 1 000. :func:`jacobian_budget` extracts the core of one
layer from several budgets, each from several independent draws of the sampled activations, and
compares each with a reference core from many more Jacobians: its energy rank, its necessary and
sufficient ranks (when an accuracy under intervention is given), and the largest principal angle
between its leading directions and the reference's.

The draws of one resample are nested: the first 16 Jacobians of the 64-Jacobian draw are the
16-Jacobian draw (:func:`corelib.ace.jacobians` takes a prefix of one random permutation), so the
budgets differ only in how many are averaged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import ace
from .compare import principal_angles
from .interventions import refine_rank

__all__ = ["JacobianBudget", "jacobian_budget"]

REFERENCE_SEED = 1_000_003  # the reference draw is independent of every resample


@dataclass(frozen=True)
class JacobianBudget:
    """Cores of one layer from several Jacobian budgets.

    Attributes:
        counts: the budgets, Jacobians per core, (C,).
        energy_rank: energy rank of each budget's core in each resample, (C, R).
        necessary_rank, sufficient_rank: the refined ranks, (C, R); -1 where no rank meets the
            test, or where no accuracy was given.
        angle: largest principal angle in degrees between the leading ``reference_rank``
            directions of each core and the reference core's, (C, R).
        reference_count: Jacobians behind the reference core.
        reference_rank: the reference core's energy rank.
    """

    counts: np.ndarray
    energy_rank: np.ndarray
    necessary_rank: np.ndarray
    sufficient_rank: np.ndarray
    angle: np.ndarray
    reference_count: int
    reference_rank: int

    def spread(self, name: str) -> np.ndarray:
        """(C, 2): the smallest and largest value of attribute ``name`` over resamples, per budget."""
        values = getattr(self, name)
        return np.stack([values.min(axis=1), values.max(axis=1)], axis=1)


def _check_counts(counts: Sequence[int], n: int, reference: int) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 1 or c.size == 0 or not np.issubdtype(c.dtype, np.integer) or np.any(c < 1):
        raise ValueError(f"counts must be positive whole numbers; got {list(counts)}.")
    if np.any(np.diff(c) <= 0):
        raise ValueError(f"counts must increase; got {list(counts)}.")
    if c[-1] > n or reference > n:
        raise ValueError(
            f"the layer has {n} activations: a budget ({c[-1]}) or the reference ({reference}) cannot exceed it."
        )
    return c


def jacobian_budget(
    h: torch.Tensor,
    readout: Callable[[torch.Tensor], torch.Tensor],
    counts: Sequence[int] = (16, 64, 256, 1000),
    *,
    resamples: int = 5,
    energy: float = 0.99,
    reference: int | None = None,
    accuracy: Callable | None = None,
    baseline: float | None = None,
    chance_level: float | None = None,
) -> JacobianBudget:
    """Cores of the activations ``h`` (N, D) for each Jacobian budget of ``counts``.

    Args:
        h: the layer's activations on the test set.
        readout: the map from one activation (D,) to the target (K,), as :func:`corelib.ace.jacobians` takes.
        counts: the budgets, increasing.
        resamples: independent draws of the sampled activations per budget.
        energy: the energy threshold of the rank.
        reference: Jacobians behind the reference core (None: every activation).
        accuracy, baseline, chance_level: when given, ``accuracy(core, mode)`` on the test set
            (as :func:`corelib.interventions.refine_rank` takes), the model's own accuracy and the
            removal threshold: the necessary and sufficient ranks are computed too.
    """
    n, d = h.shape
    ref_n = n if reference is None else int(reference)
    c = _check_counts(counts, n, ref_n)
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a whole number >= 1; got {resamples}.")
    refine = accuracy is not None
    if refine and (baseline is None or chance_level is None):
        raise ValueError("with an accuracy, give the model's baseline accuracy and the chance level too.")
    hd = h.detach().cpu().double()
    ref_jac = ace.jacobians(readout, h, n_samples=None if reference is None else ref_n, seed=REFERENCE_SEED)
    ref = ace.extract(hd, ref_jac, energy=energy)
    shape = (c.size, int(resamples))
    out = {k: np.full(shape, -1, dtype=int) for k in ("energy", "necessary", "sufficient")}
    angle = np.zeros(shape)
    for r in range(int(resamples)):
        jac = ace.jacobians(readout, h, n_samples=int(c[-1]), seed=r)
        for i, m in enumerate(c):
            full = ace.extract(hd, jac[: int(m)], rank=d)
            out["energy"][i, r] = ace.energy_rank(full.singular_values, energy)
            angle[i, r] = float(np.max(principal_angles(full.basis[:, : ref.rank], ref.basis)))
            if refine:
                nec, suf = refine_rank(
                    full, accuracy, baseline=baseline, chance_level=chance_level, start_rank=out["energy"][i, r]
                )
                out["necessary"][i, r] = -1 if nec is None else nec
                out["sufficient"][i, r] = -1 if suf is None else suf
    return JacobianBudget(c, out["energy"], out["necessary"], out["sufficient"], angle, ref_n, ref.rank)
