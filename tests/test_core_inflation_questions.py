"""The tests of the core-inflation chapter's explanations (corelib.experiments.inflation_questions)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from corelib.experiments import core_inflation_questions as iq
from corelib.experiments import modular_runs
from corelib.results import StoreError

TINY = dict(
    p=11,
    d_model=16,
    n_heads=2,
    d_ff=32,
    epochs=6,
    long_epochs=8,
    branch_epoch=4,
    snapshot_every=2,
    seeds=(0, 1),
    n_jacobians=16,
)


@pytest.fixture
def trained(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    modular_runs.train_arm(p, "wd", p.epochs, progress=False)
    return p


def test_core_sizes_are_the_chapters_analyses_and_a_variant_is_its_own(trained, monkeypatch):
    p = trained
    chapter = modular_runs.analyse_arm(p, "wd", p.epochs, progress=False)
    sizes = iq.core_sizes(p, "wd", [2, 6])
    assert sizes[6] == next(r["models"] for r in chapter if r["epoch"] == 6)  # the same cache, read back
    more = iq.core_sizes(replace(p, n_jacobians=40), "wd", [6])
    assert len(more[6]) == 2 and modular_runs.analysis_path(replace(p, n_jacobians=40), "wd", 6).exists()
    assert modular_runs.analysis_path(p, "wd", 6) != modular_runs.analysis_path(replace(p, n_jacobians=40), "wd", 6)
    monkeypatch.setattr(modular_runs, "train_arm", lambda *a, **k: pytest.fail("an analysis trained"))
    with pytest.raises(StoreError, match="no snapshot of arm 'wd' at epoch 7.*train it first"):
        iq.core_sizes(p, "wd", [7])


def test_the_paper_tolerance_gives_the_chapters_sufficient_rank_and_looser_ones_never_more(trained):
    p = trained
    chapter = iq.core_sizes(p, "wd", [6])[6]
    ranks = iq.sufficient_by_tolerance(p, "wd", 6, [0.001, 0.05, 0.5, 0.999])
    assert ranks.shape == (2, 4)
    for seed, m in enumerate(chapter):
        assert ranks[seed, 0] == (m["sufficient_rank"] if m["sufficient_rank"] is not None else -1)
    valid = np.where(ranks < 0, 10**6, ranks)
    assert np.all(np.diff(valid, axis=1) <= 0)  # a looser test never needs more dimensions
    assert np.all(ranks[:, -1] == 1)  # within 0.999 of any accuracy: one dimension suffices
    with pytest.raises(ValueError, match=r"tolerances must be finite numbers in \[0, 1\)"):
        iq.sufficient_by_tolerance(p, "wd", 6, [float("nan")])


def test_the_seed_interval_is_scipys_t_interval():
    values = [13.0, 15.0, 12.0]
    got = iq.seed_interval(values)
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert (got.low, got.high, got.n) == pytest.approx((low, high, 3))
    assert got.contains(13.5) and not got.contains(30.0)
    with pytest.raises(ValueError, match="at least two finite values"):
        iq.seed_interval([13.0])
