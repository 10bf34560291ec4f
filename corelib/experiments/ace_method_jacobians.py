"""How many Jacobians the book's cores need, on the models the chapters train.

The paper estimates ACE's relevance matrix from 64 sampled Jacobians, the authors' reference code
from 1 000. These functions run :func:`corelib.jacobian_budget.jacobian_budget` on trained models
(they read weights and train nothing):

- :func:`modular_budget`: the modular-addition models at one snapshot (before, at or after
  grokking), with the necessary and sufficient ranks of the chapter's tests;
- :func:`markov_budget`: the three Markov models at the end of training (energy rank and angles:
  the Markov chapter uses the energy rank alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch

from ..engine import load_snapshot, snapshot_epochs
from ..interventions import ReadoutAccuracy, accuracy
from ..jacobian_budget import JacobianBudget, jacobian_budget
from ..models import default_device
from ..results import StoreError
from . import markov_chain
from .modular_runs import ModularParams, arm_dir, last_position_output, make_data

__all__ = ["COUNTS", "markov_budget", "modular_budget"]

COUNTS = (16, 64, 256, 1000)
"""The budgets compared: the paper's 64, the reference code's 1 000, and a step of 4 on each side."""


def _load(folder, epoch: int, what: str):
    if epoch not in snapshot_epochs(folder):
        raise StoreError(f"no snapshot at epoch {epoch} in {folder}; run {what} first (this analysis trains nothing).")
    return load_snapshot(folder, epoch, default_device())


def modular_budget(
    params: ModularParams, epoch: int, counts: Sequence[int] = COUNTS, resamples: int = 5
) -> list[JacobianBudget]:
    """One :class:`~corelib.jacobian_budget.JacobianBudget` per seed of the weight-decay arm at
    snapshot ``epoch``: energy, necessary and sufficient ranks, and angles to a reference core
    from every test activation."""
    stack = _load(arm_dir(params, "wd"), epoch, "the modular chapter")
    x, y = make_data(params)["test"]
    layer = params.n_layers - 1
    out = []
    for i in range(len(stack)):
        model = stack.model(i)
        with torch.no_grad():
            baseline = accuracy(model, x, y, score_positions="last")
        h = last_position_output(model, x)
        intervened = ReadoutAccuracy(h, y[:, -1], partial(model, start_at_layer=layer + 1))
        out.append(
            jacobian_budget(
                h,
                model.readout(layer),
                counts,
                resamples=resamples,
                energy=params.energy,
                accuracy=intervened,
                baseline=baseline,
                chance_level=params.chance_level,
            )
        )
    return out


def markov_budget(
    p: markov_chain.MarkovParams, counts: Sequence[int] = COUNTS, resamples: int = 5, reference: int = 4000
) -> list[JacobianBudget]:
    """One :class:`~corelib.jacobian_budget.JacobianBudget` per Markov model at the end of its
    training, with the chapter's energy threshold; the reference core from ``reference`` Jacobians
    (every position of every test sequence would be ~10⁵)."""
    stack = _load(markov_chain.run_folder(p) / "train", p.epochs, "the Markov chapter")
    x = markov_chain.make_data(p)["test"][0]
    out = []
    for i in range(len(p.seeds)):
        model = stack.model(i)
        layer = model.cfg.n_layers - 1
        flat = markov_chain.block_output(model, x, layer).reshape(-1, p.d_model).detach()
        out.append(
            jacobian_budget(
                flat, model.readout(layer), counts, resamples=resamples, energy=p.energy, reference=reference
            )
        )
    return out
