"""The Markov task (known answers) and the Markov experiment pipeline (cached, end to end)."""

import dataclasses
import json

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
    assert isinstance(summary, markov_chain.MarkovSummary) and summary.params == p
    assert [m.seed for m in summary.models] == [0, 1]
    assert summary.bayes_accuracy == pytest.approx(0.75)
    # Even a briefly trained model learns most of the task, and its core carries it.
    for m in summary.models:
        assert m.accuracy.full > 0.6
        assert m.accuracy.keep >= m.accuracy.full - 0.02
        assert m.accuracy.remove < 0.45
        assert 1 <= m.rank <= 4 and len(m.eigenvalues) == m.rank
        assert len(m.history.loss) == len(m.history.test_acc) == p.epochs
    assert [pair.models for pair in summary.pairs] == [(0, 1)]
    values = markov_chain.claim_values(summary)
    assert values["markov.rank"] == [m.rank for m in summary.models]
    assert values["markov.remove_accuracy"] == [m.accuracy.remove for m in summary.models]
    assert values["markov.cca_third"] == [pair.cca[2] for pair in summary.pairs if len(pair.cca) > 2]
    tables = markov_chain.tables(summary)
    assert list(tables["A1"].columns) == ["Full model", "Core-only", "Core-removed"]
    assert list(tables["A1"].index) == ["M1", "M2"] and list(tables["A2"].index) == ["M1–M2"]
    assert tables["A1"].loc["M2", "Core-removed"] == round(summary.models[1].accuracy.remove, 3)
    # the stored JSON is the typed summary's, both ways
    stored = json.loads((markov_chain.run_folder(p) / "summary.json").read_text())
    assert summary.to_json() == stored and markov_chain.MarkovSummary.from_json(stored) == summary

    # The second call reads the saved summary: no training, no analysis.
    monkeypatch.setattr(markov_chain, "train_stack", lambda *a, **k: pytest.fail("retrained"))
    assert markov_chain.run(p, progress=False) == summary


def test_the_typed_summary_round_trips_its_json():
    from corelib.experiments import markov_chain

    stored = {
        "params": {**dataclasses.asdict(markov_chain.MarkovParams()), "seeds": [0, 100, 200]},
        "bayes_accuracy": 0.75,
        "chance_accuracy": 0.25,
        "oracle_r2": 0.5,
        "chain_eigenvalues": [[0.5, 0.0], [-0.25, 0.433]],
        "models": [
            {
                "seed": s,
                "accuracy": {"full": 0.75, "keep": 0.74, "remove": 0.3},
                "rank": 2,
                "singular_values": [3.0, 1.0],
                "eigenvalues": [[0.49, 0.0], [-0.26, -0.43]],
                "spectrum_error": None if s else 0.01,
                "r2": 0.4,
                "history": {"loss": [1.0, 0.9], "train_acc": [0.6, 0.7], "test_acc": [0.6, 0.72]},
            }
            for s in (0, 100, 200)
        ],
        "pairs": [
            {"pair": [0, 1], "weight_cosine": 0.01, "weight_cosine_by_tensor": {"w": 0.01}, "overlap": 0.9,
             "angles": [1.0, 2.0], "cca": [0.99, 0.98]}
        ],
    }  # fmt: skip
    summary = markov_chain.MarkovSummary.from_json(stored)
    assert summary.models[1].eigenvalues == (complex(0.49, 0.0), complex(-0.26, -0.43))
    assert summary.pairs[0].models == (0, 1) and summary.params.seeds == (0, 100, 200)
    assert summary.to_json() == stored
    assert markov_chain.spectrum_table(summary).loc["λ2", "Core 1"] == "-0.26 - 0.43i"
    assert markov_chain.glue_values(summary)["spec_err_max"] != markov_chain.glue_values(summary)["spec_err_max"]  # NaN


def test_params_from_namespace_ignores_other_names():
    from corelib.experiments import markov_chain

    p = markov_chain.MarkovParams.from_namespace({"epochs": 3, "seeds": [5, 6], "np": np})
    assert p.epochs == 3 and p.seeds == (5, 6)
