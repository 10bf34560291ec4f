"""The Markov cores cut at rank 3 and 4 (markov_chain.rank_sensitivity), on a tiny trained run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from corelib.experiments import markov_chain
from corelib.results import StoreError


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = markov_chain.MarkovParams(n_train=200, n_test=100, epochs=2, seeds=[0, 1, 2], n_jacobians=32)
    return p, markov_chain.run(p, progress=False)


def test_at_the_chapters_rank_the_correlations_are_the_chapters(run):
    p, summary = run
    rank = summary.models[0].rank
    if any(m.rank != rank for m in summary.models):
        pytest.skip("the tiny models disagree on the rank")
    got = markov_chain.rank_sensitivity(p, ranks=(rank, rank + 1))
    assert got.cca.shape == (3, 2, rank + 1) and np.all(np.isnan(got.cca[:, 0, rank:]))
    for k, pair in enumerate(summary.pairs):
        np.testing.assert_allclose(got.cca[k, 0, :rank], pair.cca, atol=1e-6)
    # a correlation is at most 1, and the shares are the energy spectrum's leading fractions
    assert np.nanmax(got.cca) <= 1 + 1e-9
    assert np.all(got.energy_share > 0) and np.all(np.diff(got.energy_share, axis=1) <= 1e-12)
    assert np.all(got.energy_share.sum(axis=1) <= 1 + 1e-12)


def test_an_untrained_run_or_a_bad_rank_is_refused(run, monkeypatch, tmp_path):
    p, _ = run
    with pytest.raises(ValueError, match="ranks must be whole numbers"):
        markov_chain.rank_sensitivity(p, ranks=(0,))
    with pytest.raises(StoreError, match="has not been analysed; run the chapter first"):
        markov_chain.rank_sensitivity(replace(p, epochs=3))
    with pytest.raises(StoreError, match="has not been trained; run the chapter first"):
        markov_chain.rank_sensitivity(replace(p, epochs=3), ranks=(2, 3))
