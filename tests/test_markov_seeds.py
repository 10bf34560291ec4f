"""Other sets of seeds for the Markov chapter (markov_chain_seeds), on tiny trained runs, and the
judgement of each set against the paper's ranges (markov_chain_figures)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from corelib.experiments import markov_chain, markov_chain_seeds
from corelib.experiments.markov_chain_seeds import SeedSets
from corelib.plots import markov_chain_figures as figures

TINY = {"n_train": 200, "n_test": 100, "epochs": 2, "n_jacobians": 32}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The chapter's tiny run (seeds 0, 1, 2) and one other set (3, 4, 5), in a store of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACE_RESULTS_DIR", str(tmp_path_factory.mktemp("store")))
        p = markov_chain.MarkovParams(seeds=[0, 1, 2], **TINY)
        sets = markov_chain_seeds.seed_sets(p, [[3, 4, 5]])
        own = markov_chain.run(p, progress=False)
        other = markov_chain.run(replace(p, seeds=(3, 4, 5)), progress=False)
        yield p, sets, own, other


def test_the_first_set_is_the_chapters_own_computation(trained):
    _, sets, own, _ = trained
    values = markov_chain.claim_values(own)
    assert sets.seeds[0] == (0, 1, 2)
    np.testing.assert_array_equal(sets.ranks[0], values["markov.rank"])
    np.testing.assert_allclose(sets.mean[0], values["markov.cca_mean"], rtol=0, atol=0)
    np.testing.assert_allclose(sets.overlap[0], values["markov.overlap"], rtol=0, atol=0)
    if min(values["markov.rank"]) >= 3:
        np.testing.assert_allclose(sets.third[0], values["markov.cca_third"], rtol=0, atol=0)
    else:  # a pair whose smaller core has under three directions has no third correlation
        assert np.isnan(sets.third[0]).any()
    got = sets.angles[0][~np.isnan(sets.angles[0])]
    np.testing.assert_allclose(got, values["markov.angles"], rtol=0, atol=0)


def test_every_other_set_is_its_own_run_with_the_same_settings(trained):
    p, sets, _, other = trained
    assert sets.seeds[1] == (3, 4, 5)
    np.testing.assert_allclose(sets.mean[1], markov_chain.claim_values(other)["markov.cca_mean"], rtol=0, atol=0)
    # other seeds train other models: the pairs differ from the chapter's
    assert not np.allclose(sets.overlap[0], sets.overlap[1])
    top = int(sets.ranks.max())
    assert sets.ranks.shape == (2, 3) and sets.angles.shape == (2, 3, top)
    assert sets.third.shape == sets.mean.shape == sets.overlap.shape == (2, 3)
    assert np.all((sets.overlap >= 0) & (sets.overlap <= 1)) and np.nanmax(sets.angles) <= 90 + 1e-9
    # the mean of the correlations is at most the largest, at least the smallest (the third where it is last)
    assert np.all(sets.mean <= 1 + 1e-12)
    # asked again, the sets are read back from the store, not trained again
    folders = sorted(markov_chain.run_folder(p).parent.iterdir())
    again = markov_chain_seeds.seed_sets(p, [[3, 4, 5]])
    assert sorted(markov_chain.run_folder(p).parent.iterdir()) == folders
    np.testing.assert_array_equal(again.third, sets.third)
    # the same seeds in another order train the same models: the same pairs, in another order
    shuffled = markov_chain_seeds.seed_sets(p, [(5, 4, 3)])
    np.testing.assert_allclose(np.sort(shuffled.overlap[1]), np.sort(sets.overlap[1]), rtol=0, atol=1e-9)


def _pair(pair, cca, angles, overlap):
    return replace(pair, cca=tuple(cca), angles=tuple(angles), overlap=overlap)


def test_known_pairs_give_known_sets(trained):
    """Hand-made pairs: the third correlation, the mean of all correlations, angles padded with NaN."""
    _, _, own, _ = trained
    first = [
        _pair(own.pairs[0], [0.999, 0.998, 0.95], [80, 85, 89], 0.03),
        _pair(own.pairs[1], [0.999, 0.99, 0.9, 0.5], [70, 80, 85, 88], 0.05),
        _pair(own.pairs[2], [1.0, 0.8], [60, 70], 0.2),
    ]
    models = tuple(replace(m, rank=r) for m, r in zip(own.models, (3, 4, 2)))
    sets = markov_chain_seeds.from_summaries([replace(own, pairs=tuple(first), models=models), own])
    np.testing.assert_allclose(sets.third[0], [0.95, 0.9, np.nan])
    np.testing.assert_allclose(sets.mean[0], [0.982333333333, 0.84725, 0.9], atol=1e-12)
    np.testing.assert_allclose(sets.overlap[0], [0.03, 0.05, 0.2])
    assert sets.angles.shape[2] == max(4, int(sets.ranks.max()))
    np.testing.assert_allclose(sets.angles[0, 2, :2], [60, 70])
    assert np.isnan(sets.angles[0, 2, 2:]).all() and np.isnan(sets.angles[0, 0, 3:]).all()
    np.testing.assert_array_equal(sets.ranks[0], [3, 4, 2])


def test_sets_that_cannot_be_compared_are_refused(trained):
    p, _, own, _ = trained
    with pytest.raises(ValueError, match="as the chapter's \\[0, 1, 2\\] does"):
        markov_chain_seeds.seed_sets(p, [[3, 4]])
    with pytest.raises(ValueError, match="is the chapter's or is listed twice"):
        markov_chain_seeds.seed_sets(p, [[2, 1, 0]])
    with pytest.raises(ValueError, match="is the chapter's or is listed twice"):
        markov_chain_seeds.seed_sets(p, [[3, 4, 5], [5, 3, 4]])
    with pytest.raises(ValueError, match="lists 3 more than once"):
        markov_chain_seeds.seed_sets(p, [[3, 3, 4]])
    with pytest.raises(ValueError, match="must be a list of sets of seeds"):
        markov_chain_seeds.seed_sets(p, "3, 4, 5")
    with pytest.raises(ValueError, match="same number of models"):
        markov_chain_seeds.from_summaries([own, replace(own, models=own.models[:2], pairs=own.pairs[:1])])
    with pytest.raises(ValueError, match="at least one summary"):
        markov_chain_seeds.from_summaries([])


def _sets(third, mean, overlap, angles) -> SeedSets:
    n = len(third)
    return SeedSets(
        seeds=tuple((3 * k, 3 * k + 1, 3 * k + 2) for k in range(n)),
        ranks=np.full((n, 3), 3),
        third=np.array(third, dtype=float),
        mean=np.array(mean, dtype=float),
        overlap=np.array(overlap, dtype=float),
        angles=np.array(angles, dtype=float),
    )


def test_each_set_is_judged_by_the_claims_own_tolerance():
    inside = [0.94, 0.93, 0.95], [0.98, 0.98, 0.98], [0.03, 0.03, 0.03], [[80, 85, 89]] * 3
    above = [0.94, 0.99, 0.95], [0.98, 0.995, 0.98], [0.03, 0.06, 0.03], [[70, 85, 89]] * 3
    rank2 = [[80, 85, 89], [80, 85, np.nan], [80, 85, 89]]
    missing = [0.94, np.nan, 0.95], [0.98, 0.98, 0.98], [0.03, 0.03, 0.03], rank2
    sets = _sets(*(list(col) for col in zip(inside, above, missing)))
    got = figures.inside_paper_ranges(sets)
    assert list(got.index) == ["the chapter's", "other 1", "other 2"]
    assert got.loc["the chapter's"].all() and not got.loc["other 1"].any()
    # no third correlation fails its claim; a missing angle (a core of rank 2) is not counted
    assert got.loc["other 2"].to_dict() == {
        "markov.cca_third": False,
        "markov.cca_mean": True,
        "markov.overlap": True,
        "markov.angles": True,
    }
    frame = figures.seed_sets_frame(sets)
    assert frame.shape == (3, 1 + 2 * len(figures.SEED_SET_CLAIMS))
    assert frame[("third correlation", "ours")].tolist()[1] == "0.9400–0.9900"
    assert frame[("third correlation", "in [0.927, 0.958]")].tolist() == ["yes", "no", "no"]
    assert frame[("", "seeds")].tolist()[0] == "0, 1, 2"


def test_the_findings_count_the_other_sets_only():
    chapter = [0.99, 0.99, 0.99], [0.996] * 3, [0.06, 0.03, 0.03], [[70, 85, 89]] * 3
    inside = [0.94, 0.93, 0.95], [0.98] * 3, [0.03, 0.03, 0.03], [[80, 85, 89]] * 3
    above = [0.94, 0.99, 0.95], [0.98, 0.995, 0.98], [0.03, 0.035, 0.021], [[70, 85, 89]] * 3
    sets = _sets(*(list(col) for col in zip(chapter, inside, above)))
    assert figures.other_seed_values(sets) == {
        "markov.cca_third_other_seeds": 0.5,  # the chapter's set, outside, is not counted
        "markov.overlap_other_seeds": 1.0,
    }
    assert figures.other_seed_values(_sets(*(list(col) for col in zip(chapter)))) == {}
