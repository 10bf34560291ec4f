"""The checked exercise on canonical correlations of the chapter "A Markov chain": the solution
printed in ``book/solutions/markov_chain.md`` passes its check and agrees with the library, and
the check rejects the usual mistakes with a message that names them. (The chapter's first two
checked exercises are tested in ``test_exercises.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

from corelib.compare import cca
from exercise_support import run_solution


def _solution():
    return run_solution("markov_chain", "ex-markov-cca")["canonical_correlations"]


def test_the_cca_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import markov_chain as ex

    fn = _solution()
    assert ex.check_canonical_correlations(fn) is True
    assert "canonical_correlations: all 7 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(0)
    for _ in range(50):  # beyond the check's cases
        n, r1, r2 = rng.integers(30, 200), rng.integers(1, 5), rng.integers(1, 5)
        z1 = rng.standard_normal((n, r1)) * rng.uniform(0.1, 10, r1) + rng.normal(0, 5, r1)
        z2 = np.c_[z1 @ rng.standard_normal((r1, r2))] + rng.standard_normal((n, r2))
        assert np.allclose(fn(z1, z2), cca(z1, z2), atol=1e-10)


def test_a_linear_recoding_scores_one_whatever_the_geometry():
    """The chapter's point: two codings of one signal agree statistically in full."""
    rng = np.random.default_rng(1)
    z = rng.standard_normal((400, 3))
    assert np.allclose(_solution()(z, z @ rng.standard_normal((3, 3)) + 7.0), 1.0)


def _centred(z):
    return z - z.mean(axis=0)


def _qr_svd(z1, z2):
    return np.linalg.svd(np.linalg.qr(z1)[0].T @ np.linalg.qr(z2)[0], compute_uv=False)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_qr_svd, "centre each set of coordinates first"),
        (lambda z1, z2: _qr_svd(_centred(z1), _centred(z2)) ** 2, "these are squared correlations"),
        (lambda z1, z2: _qr_svd(_centred(z1), _centred(z2))[::-1], "in descending order"),
        (
            lambda z1, z2: np.array([abs(np.corrcoef(a, b)[0, 1]) for a, b in zip(z1.T, z2.T)]),
            "coordinate i of one set with coordinate i of the other",
        ),
        (
            lambda z1, z2: np.linalg.svd(np.cov(z1.T, z2.T)[: z1.shape[1], z1.shape[1] :], compute_uv=False),
            "singular values of the cross-covariance: whiten each set first",
        ),
        (
            lambda z1, z2: np.r_[_qr_svd(_centred(z1), _centred(z2)), np.zeros(max(0, z2.shape[1] - z1.shape[1]))],
            "as many canonical correlations as the smaller",
        ),
    ],
)
def test_the_cca_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import markov_chain as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_canonical_correlations(wrong)


def test_a_wrong_answer_shows_the_largest_difference_not_the_arrays():
    from corelib.exercises import markov_chain as ex

    with pytest.raises(AssertionError) as err:
        ex.check_canonical_correlations(lambda z1, z2: _qr_svd(_centred(z1), _centred(z2)) ** 2)
    message = str(err.value)
    assert "the largest difference" in message and len(message.splitlines()) < 8


def test_a_stub_is_reported_as_not_done_yet(capsys):
    from corelib.exercises import markov_chain as ex

    def stub(z1, z2):
        raise NotImplementedError

    assert ex.check_canonical_correlations(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


# --------------------------------------------------------------------------- one more set of seeds


@pytest.fixture(scope="module")
def tiny_summary(tmp_path_factory):
    """A tiny trained run of three models: the check's first case is a real summary."""
    from corelib.experiments import markov_chain

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACE_RESULTS_DIR", str(tmp_path_factory.mktemp("store")))
        params = markov_chain.MarkovParams(n_train=200, n_test=100, epochs=2, seeds=[0, 1, 2], n_jacobians=32)
        yield markov_chain.run(params, progress=False)


def test_the_seeds_solution_passes_its_check_and_matches_the_claim_values(tiny_summary, capsys):
    from corelib.exercises import markov_chain as ex
    from corelib.experiments import markov_chain

    ns = run_solution("markov_chain", "ex-markov-seeds")
    assert ex.check_pair_correlations(ns["pair_correlations"], tiny_summary) is True
    assert "pair_correlations: all 5 cases pass" in capsys.readouterr().out
    rows = ns["pair_correlations"](tiny_summary)
    values = markov_chain.claim_values(tiny_summary)
    np.testing.assert_allclose(rows[:, 1], values["markov.cca_mean"], rtol=0, atol=0)
    assert callable(ns["one_more_set"])  # trains: run by the chapter's reader, not here


def _last_and_mean(summary):
    return np.array([[p.cca[-1], np.mean(p.cca)] for p in summary.pairs])


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_last_and_mean, "the third correlation is the third largest, cca\\[2\\]"),
        (
            lambda s: np.array([[p.cca[2] if len(p.cca) > 2 else np.nan, np.mean(p.cca[:3])] for p in s.pairs]),
            "the mean runs over every correlation of the pair",
        ),
        (lambda s: np.array([[p.cca[2], np.mean(p.cca)] for p in s.pairs]).T, "return one row per pair"),
        (lambda s: np.array([[p.cca[2], np.mean(p.cca)] for p in s.pairs]), "raised IndexError"),
    ],
)
def test_the_seeds_check_rejects_typical_mistakes(tiny_summary, wrong, says):
    from corelib.exercises import markov_chain as ex

    if "IndexError" not in says and len(tiny_summary.pairs[0].cca) < 3:
        pytest.skip("the tiny models' cores have under three directions")
    with pytest.raises(AssertionError, match=says):
        ex.check_pair_correlations(wrong, tiny_summary)
