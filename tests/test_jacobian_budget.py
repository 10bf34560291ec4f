"""How many Jacobians ACE needs (corelib.jacobian_budget): known answers and the nesting of draws."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from corelib import ace
from corelib.compare import principal_angles
from corelib.jacobian_budget import REFERENCE_SEED, jacobian_budget


def _layer(n=300, d=12, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(3.0, 0.5, d, dtype=torch.float64)
    w = torch.randn(k, d, generator=g, dtype=torch.float64)
    return h, w


def test_a_linear_readout_needs_one_jacobian():
    """f(h) = W h has the same Jacobian everywhere: every budget finds the reference core."""
    h, w = _layer()
    got = jacobian_budget(h, lambda x: w @ x, counts=(1, 4, 64), resamples=3)
    assert got.reference_count == 300 and np.all(got.energy_rank == got.reference_rank)
    assert np.all(got.angle < 1e-5)
    assert np.all(got.necessary_rank == -1) and got.spread("energy_rank").shape == (3, 2)


def test_a_budget_is_a_prefix_of_its_resamples_draw():
    h, w = _layer()
    f = lambda x: torch.tanh(w @ x) ** 2  # noqa: E731 - a Jacobian that changes with x
    got = jacobian_budget(h, f, counts=(8, 40), resamples=2, energy=0.9)
    ref = ace.extract(h, ace.jacobians(f, h, seed=REFERENCE_SEED), energy=0.9)
    for r in range(2):
        core = ace.extract(h, ace.jacobians(f, h, n_samples=8, seed=r), rank=12)
        assert got.energy_rank[0, r] == ace.energy_rank(core.singular_values, 0.9)
        want = np.max(principal_angles(core.basis[:, : ref.rank], ref.basis))
        assert got.angle[0, r] == pytest.approx(want, abs=1e-8)
    assert got.reference_rank == ref.rank


def test_the_refined_ranks_come_from_the_accuracy_given():
    h, w = _layer()
    calls = []

    def accuracy(core, mode):  # a model that needs its first two core directions
        calls.append(mode)
        return (0.9 if core.rank >= 2 else 0.2) if mode == "keep" else (0.01 if core.rank >= 2 else 0.8)

    got = jacobian_budget(
        h, lambda x: w @ x, counts=(5,), resamples=1, accuracy=accuracy, baseline=0.9, chance_level=0.02
    )
    assert got.sufficient_rank[0, 0] == 2 and got.necessary_rank[0, 0] == max(2, got.energy_rank[0, 0])
    assert {"keep", "remove"} <= set(calls)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(counts=(64, 16)), "counts must increase"),
        (dict(counts=(16, 400)), "has 300 activations"),
        (dict(counts=(0, 4)), "positive whole numbers"),
        (dict(counts=(4,), resamples=0), "resamples must be"),
        (dict(counts=(4,), accuracy=lambda c, m: 1.0), "baseline accuracy and the chance level"),
    ],
)
def test_bad_budgets_are_refused(kwargs, message):
    h, w = _layer()
    with pytest.raises(ValueError, match=message):
        jacobian_budget(h, lambda x: w @ x, **kwargs)


def test_the_book_models_budgets_read_snapshots_and_train_nothing(tmp_path, monkeypatch):
    from corelib.experiments import ace_method_jacobians, modular_runs
    from corelib.results import StoreError

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(
        p=11,
        d_model=16,
        n_heads=2,
        d_ff=32,
        epochs=4,
        long_epochs=6,
        branch_epoch=2,
        snapshot_every=2,
        seeds=(0,),
        eval_every=2,
    )
    with pytest.raises(StoreError, match="run the modular chapter first"):
        ace_method_jacobians.modular_budget(p, 4, counts=(4, 8), resamples=2)
    modular_runs.train_arm(p, "wd", p.epochs, progress=False)
    analysis = modular_runs.analyse_arm(replace(p, n_jacobians=8), "wd", 4, progress=False)[-1]["models"][0]
    (got,) = ace_method_jacobians.modular_budget(p, 4, counts=(4, 8), resamples=2)
    assert got.energy_rank.shape == (2, 2) and got.reference_count == 61
    # resample 0 of the 8-Jacobian budget is the chapter's own analysis with 8 Jacobians (seed 0)
    assert got.energy_rank[1, 0] == analysis["energy_rank"]
    assert got.sufficient_rank[1, 0] == (analysis["sufficient_rank"] or -1)
    assert got.necessary_rank[1, 0] == (analysis["necessary_rank"] or -1)


def test_the_budget_table_and_values_read_the_ranges_over_seeds_and_draws():
    from corelib.experiments.ace_method_jacobians import budget_table, budget_values
    from corelib.jacobian_budget import JacobianBudget

    counts = np.array([16, 64, 1000])

    def budget(nec64, angle64):
        nec = np.array([[9, 11], nec64, [12, 12]])
        return JacobianBudget(
            counts, nec - 1, nec, np.full((3, 2), -1), np.array([[30.0, 20.0], angle64, [1.0, 2.0]]), 1404, 10
        )

    seeds = [budget([12, 13], [5.0, 4.0]), budget([12, 12], [3.0, 7.5])]
    table = budget_table({"after grokking": seeds})
    row = table.loc[("after grokking", 64)]
    assert row["necessary rank"] == "12–13" and row["energy rank"] == "11–12" and row["sufficient rank"] == "none"
    assert row["largest angle (°)"] == 7.5 and table.loc[("after grokking", 1000)]["necessary rank"] == "12"
    values = budget_values(seeds)
    assert values == {"necessary_gap": 1.0, "sufficient_gap": 0.0, "angle": 7.5}
