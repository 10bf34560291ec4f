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
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..engine import load_snapshot, snapshot_epochs
from ..interventions import ReadoutAccuracy, accuracy
from ..jacobian_budget import JacobianBudget, jacobian_budget
from ..models import default_device
from ..results import StoreError
from . import markov_chain
from .modular_runs import ModularParams, arm_dir, last_position_output, make_data

if TYPE_CHECKING:
    import pandas

__all__ = [
    "COUNTS",
    "budget_table",
    "budget_values",
    "jacobian_values",
    "markov_budget",
    "modular_budget",
    "snapshot_budgets",
]

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


def _span(per_seed: list[JacobianBudget], name: str, i: int) -> str:
    """A rank's range over seeds and draws at budget ``i``, e.g. "12–14" ("none": no rank passed)."""
    values = np.concatenate([getattr(b, name)[i] for b in per_seed])
    lo, hi = int(values.min()), int(values.max())
    return "none" if hi < 0 else (f"{lo}" if lo == hi else f"{lo}–{hi}")


def budget_table(budgets: dict[str, list[JacobianBudget]]) -> pandas.DataFrame:
    """One row per snapshot and budget: each rank's range over seeds and draws, and the largest
    angle to the reference core. ``budgets``: ``{snapshot label: [budget of each seed]}``."""
    import pandas as pd

    rows = []
    for label, per_seed in budgets.items():
        for i, count in enumerate(per_seed[0].counts):
            rows.append(
                {
                    "snapshot": label,
                    "Jacobians": int(count),
                    "energy rank": _span(per_seed, "energy_rank", i),
                    "necessary rank": _span(per_seed, "necessary_rank", i),
                    "sufficient rank": _span(per_seed, "sufficient_rank", i),
                    "largest angle (°)": round(float(max(b.angle[i].max() for b in per_seed)), 1),
                }
            )
    return pd.DataFrame(rows).set_index(["snapshot", "Jacobians"])


def budget_values(budgets: list[JacobianBudget], paper: int = 64) -> dict[str, float]:
    """At one snapshot: how far the ranks from ``paper`` Jacobians stray from those from the
    largest budget, over seeds and draws (``necessary_gap``, ``sufficient_gap``: the largest
    absolute difference of a draw's rank from the largest budget's mean rank of that seed), and the
    largest angle at ``paper`` (``angle``, degrees)."""
    i = int(np.flatnonzero(budgets[0].counts == paper)[0])
    out = {}
    for name in ("necessary_rank", "sufficient_rank"):
        gaps = [np.abs(getattr(b, name)[i] - getattr(b, name)[-1].mean()).max() for b in budgets]
        out[name.replace("_rank", "_gap")] = float(max(gaps))
    out["angle"] = float(max(b.angle[i].max() for b in budgets))
    return out


def snapshot_budgets(
    params: ModularParams, records: list[dict], fewest: int = 16, resamples: int = 2
) -> dict[str, list[JacobianBudget]]:
    """The budgets of the modular chapter's models before grokking (half its epoch), at grokking
    and at the last snapshot of ``records`` (the chapter's analyses): ``fewest`` Jacobians against
    the chapter's ``n_jacobians``, each from ``resamples`` draws. Before grokking is left out
    where the models never grok."""
    from .modular_runs import grokking_epoch

    epochs = [r["epoch"] for r in records]
    grok = grokking_epoch(records)
    wanted = {"end": epochs[-1]}
    if grok is not None:
        before = next(e for e in epochs if e >= grok // 2)
        wanted = {"before grokking": before, "at grokking": grok, **wanted}
    counts = sorted({min(fewest, params.n_jacobians), params.n_jacobians})
    return {f"{k} (epoch {e})": modular_budget(params, e, counts, resamples) for k, e in wanted.items()}


def jacobian_values(budgets: dict[str, list[JacobianBudget]]) -> dict[str, float]:
    """The finding ``modular.jacobians_exact``: the largest angle (degrees) between a core from the
    fewest Jacobians and the reference core, over snapshots, seeds and draws; and the largest
    difference of a necessary rank between budgets (``rank_gap``)."""
    every = [b for per_seed in budgets.values() for b in per_seed]
    angle = max(float(b.angle[0].max()) for b in every)
    gap = max(int(np.abs(b.necessary_rank - b.necessary_rank[-1]).max()) for b in every)
    return {"modular.jacobians_exact": angle, "rank_gap": gap}
