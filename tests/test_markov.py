"""The Markov task (known answers) and the Markov experiment pipeline (cached, end to end)."""

import numpy as np
import pytest

from corelib.operators import spectrum_distance
from corelib.tasks import markov


def test_paper_chain_known_answers():
    t = markov.transition_matrix(0.75, 0.25)
    np.testing.assert_allclose(markov.stationary_distribution(t), 0.25)
    assert markov.bayes_accuracy(t) == pytest.approx(0.75)
    assert markov.chance_accuracy(t) == pytest.approx(0.25)
    assert spectrum_distance(markov.chain_eigenvalues(t), [0.75 + 0.25j, 0.75 - 0.25j, 0.5]) < 1e-12


@pytest.mark.parametrize("n,alpha", [(3, 0.9), (5, 0.6), (7, 0.3)])
def test_cyclic_chain_spectrum_formula(n, alpha):
    t = markov.transition_matrix(alpha, 1 - alpha, n)
    k = np.arange(1, n)
    assert spectrum_distance(markov.chain_eigenvalues(t), alpha + (1 - alpha) * np.exp(2j * np.pi * k / n)) < 1e-10


def test_sampler_follows_the_chain_and_is_seeded():
    t = markov.transition_matrix(0.6, 0.4, 5)
    seq = markov.sample_sequences(t, 2000, 60, seed=3)
    counts = np.zeros((5, 5))
    np.add.at(counts, (seq[:, :-1].ravel(), seq[:, 1:].ravel()), 1)
    np.testing.assert_allclose(counts / counts.sum(1, keepdims=True), t, atol=0.01)
    np.testing.assert_allclose(np.bincount(seq[:, 0], minlength=5) / 2000, 0.2, atol=0.03)
    np.testing.assert_array_equal(seq, markov.sample_sequences(t, 2000, 60, seed=3))
    assert not np.array_equal(seq, markov.sample_sequences(t, 2000, 60, seed=4))


def test_sampler_draws_the_reference_codes_sequences():
    """The same sequences as the reference's loop of ``RandomState.choice`` calls, one per state."""
    t = markov.transition_matrix(0.75, 0.25, 4)
    rng = np.random.RandomState(999)
    expected = np.zeros((50, 12), dtype=np.int64)
    expected[:, 0] = rng.choice(4, size=50)
    for i in range(1, 12):
        expected[:, i] = [rng.choice(4, p=row) for row in t[expected[:, i - 1]]]
    np.testing.assert_array_equal(markov.sample_sequences(t, 50, 12, seed=999), expected)


def test_bad_chains_are_rejected():
    with pytest.raises(ValueError, match="sum to 1"):
        markov.transition_matrix(0.5, 0.6)
    with pytest.raises(ValueError, match="row-stochastic"):
        markov.bayes_accuracy(np.ones((3, 3)))
    with pytest.raises(ValueError, match="length"):
        markov.sample_sequences(markov.transition_matrix(), 3, 1, seed=0)


def test_spectrum_distance_is_order_free():
    a = np.array([1 + 1j, 2, 3 - 1j])
    assert spectrum_distance(a, a[::-1]) == 0
    assert spectrum_distance(a, a + 0.1) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="cannot match"):
        spectrum_distance(a, a[:2])


@pytest.mark.slow  # trains the chapter's models end to end
def test_experiment_runs_caches_and_reports(tmp_path, monkeypatch):
    from corelib.experiments import markov_chain

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = markov_chain.MarkovParams(
        n_train=400, n_test=100, seeds=(0, 1), epochs=4, d_model=16, d_ff=32, n_jacobians=8, dropout=0.0, lr=3e-3
    )
    summary = markov_chain.run(p, progress=False)
    assert [m["seed"] for m in summary["models"]] == [0, 1]
    assert summary["bayes_accuracy"] == pytest.approx(0.75)
    # Even a briefly trained model learns most of the task, and its core carries it.
    for m in summary["models"]:
        assert m["accuracy"]["full"] > 0.6
        assert m["accuracy"]["keep"] >= m["accuracy"]["full"] - 0.02
        assert m["accuracy"]["remove"] < 0.45
        assert 1 <= m["rank"] <= 4
    assert len(summary["pairs"]) == 1
    values = markov_chain.claim_values(summary)
    assert values["markov.rank"] == [m["rank"] for m in summary["models"]]
    assert values["markov.remove_accuracy"] == [m["accuracy"]["remove"] for m in summary["models"]]
    assert values["markov.cca_third"] == [p["cca"][2] for p in summary["pairs"] if len(p["cca"]) > 2]
    assert set(markov_chain.tables(summary)) == {"A1", "A2", "A3"}

    # The second call reads the saved summary: no training, no analysis.
    monkeypatch.setattr(markov_chain, "train_stack", lambda *a, **k: pytest.fail("retrained"))
    assert markov_chain.run(p, progress=False) == summary


def test_params_from_namespace_ignores_other_names():
    from corelib.experiments import markov_chain

    p = markov_chain.MarkovParams.from_namespace({"epochs": 3, "seeds": [5, 6], "np": np})
    assert p.epochs == 3 and p.seeds == (5, 6)
