"""The checked exercises of the chapter "How ACE works": the solutions printed in
``book/solutions/ace_method.md`` pass their checks and agree with the library, and the checks
reject the usual mistakes with a message that names them."""

from __future__ import annotations

import numpy as np
import pytest

from corelib.ace import energy_rank as library_energy_rank
from corelib.ace import extract
from corelib.compare import principal_angles
from exercise_support import run_solution


def _shares(s):
    e = np.asarray(s, dtype=float) ** 2
    return np.cumsum(e) / e.sum()


def test_the_energy_rank_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import ace_method as ex

    fn = run_solution("ace_method", "ace-ex-energy")["energy_rank"]
    assert ex.check_energy_rank(fn) is True
    assert "all 8 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(0)
    for _ in range(200):  # beyond the check's cases
        s = np.sort(rng.exponential(size=rng.integers(1, 30)))[::-1]
        t = float(rng.uniform(0.5, 1.0))
        assert fn(s, t) == library_energy_rank(s, t)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda s, t: int(np.argmax(np.cumsum(s) / np.sum(s) >= t)) + 1, "the sum of their squares"),
        (lambda s, t: int(np.argmax(_shares(s) >= t - 1e-12)), "the rank is a count, one more"),
        (lambda s, t: int(np.argmax(_shares(s) > t)) + 1, r"reach the threshold \(>=\), not exceed it"),
        (lambda s, t: int(np.searchsorted(_shares(s), t)) + 1, "compare with a small tolerance"),
    ],
)
def test_the_energy_rank_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import ace_method as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_energy_rank(wrong)


def test_the_ace_core_solution_passes_its_check_and_matches_extract(capsys):
    from corelib.exercises import ace_method as ex

    fn = run_solution("ace_method", "ace-ex-core")["ace_core"]
    assert ex.check_ace_core(fn) is True
    out = capsys.readouterr().out
    assert "ace_core (singular values): all 5 cases pass" in out and "ace_core (basis): all 5 cases pass" in out
    rng = np.random.default_rng(1)  # the moments of sampled activations and Jacobians, as extract sees them
    h, j = rng.standard_normal((500, 6)) @ rng.standard_normal((6, 6)), rng.standard_normal((40, 2, 6))
    core = extract(h, j, rank=2, eps=0)
    s, basis = fn(np.cov(h.T), np.einsum("mkd,mke->de", j, j) / len(j), 2)
    assert np.allclose(s, core.singular_values, rtol=1e-8)
    assert np.max(principal_angles(np.linalg.qr(basis)[0], core.basis)) < 1e-6


def _factor(m):
    w, v = np.linalg.eigh(m)
    return v * np.sqrt(np.clip(w, 0, None))


def _whitened(a, s, r):
    u, sv, _ = np.linalg.svd(_factor(a).T @ _factor(s))
    return sv, u[:, :r]


def _pca(a, s, r):
    sv = np.linalg.svd(_factor(a).T @ _factor(s), compute_uv=False)
    w, v = np.linalg.eigh(a)
    return sv, v[:, ::-1][:, :r]


def _squared(a, s, r):
    lf = _factor(a)
    u, sv, _ = np.linalg.svd(lf.T @ _factor(s))
    return sv**2, lf @ u[:, :r]


def _cholesky(a, s, r):
    lf = np.linalg.cholesky(a)
    u, sv, _ = np.linalg.svd(lf.T @ np.linalg.cholesky(s))
    return sv, lf @ u[:, :r]


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_whitened, r"the core is span\(L U_r\)"),
        (_pca, r"top of the activity alone \(PCA\)"),
        (_squared, "these are the squares"),
        (_cholesky, "If you used a Cholesky factorisation, it needs a positive-definite matrix"),
    ],
)
def test_the_ace_core_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import ace_method as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_ace_core(wrong)


def _inverts_activity(a, s, r):
    """A right answer that also inverts the activity on the way (as np.linalg.inv does when the
    matrix is exactly singular, which round-off hides here): no Cholesky anywhere."""
    if np.linalg.matrix_rank(a) < len(a):
        raise np.linalg.LinAlgError("Singular matrix")
    return run_solution("ace_method", "ace-ex-core")["ace_core"](a, s, r)


def test_a_linalg_error_is_reported_without_naming_a_routine_the_student_did_not_use():
    from corelib.exercises import ace_method as ex

    with pytest.raises(AssertionError) as err:
        ex.check_ace_core(_inverts_activity)
    message = str(err.value)
    assert "LinAlgError" in message and "Singular matrix" in message and "case 5" in message
    sentences = [t for t in message.replace("\n", " ").split(". ") if "cholesky" in t.lower()]
    assert all(t.lstrip().startswith("If you") for t in sentences), sentences
    assert "Cholesky refuses" not in message


def test_a_linalg_error_message_stays_short():
    from corelib.exercises import ace_method as ex

    with pytest.raises(AssertionError) as err:
        ex.check_ace_core(_cholesky)
    message = str(err.value)
    assert len(message.splitlines()) < 6 and len(message) < 1000
    assert "a (6, 6) array starting [" in message  # the moments by their shape, not printed whole


def test_a_basis_of_the_wrong_shape_is_reported_with_the_shape_expected():
    from corelib.exercises import ace_method as ex

    def transposed(a, s, r):
        sv, basis = run_solution("ace_method", "ace-ex-core")["ace_core"](a, s, r)
        return sv, basis.T

    with pytest.raises(AssertionError, match=r"a rank-4 core in 12 dimensions is a \(12, 4\) matrix") as err:
        ex.check_ace_core(transposed)
    assert "is wrong on case 1" in str(err.value) and "raised" not in str(err.value)  # not an error of theirs


def test_unfilled_stubs_are_reported_as_not_done_yet(capsys):
    from corelib.exercises import ace_method as ex

    def stub(*args):
        raise NotImplementedError

    assert ex.check_energy_rank(stub) is False
    assert ex.check_ace_core(stub) is False
    assert ex.check_keep_r2(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 3


def test_the_keep_r2_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import ace_method as ex
    from corelib.experiments.ace_method import keep_r2

    fn = run_solution("ace_method", "ace-ex-keep")["keep_r2"]
    assert ex.check_keep_r2(fn) is True
    assert "keep_r2: all 6 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(2)
    for _ in range(20):  # beyond the check's cases
        d, k = rng.integers(2, 8), rng.integers(1, 3)
        h = rng.standard_normal((200, d)) @ rng.standard_normal((d, d)) + rng.normal(0, 3, d)
        w, q = rng.standard_normal(d), np.linalg.qr(rng.standard_normal((d, k)))[0]
        f = lambda x, w=w: np.tanh(x @ w / 4)  # noqa: E731
        assert fn(f, h, q) == pytest.approx(keep_r2(f, h, q, h.mean(axis=0)), rel=1e-9, abs=1e-12)


def _r2(f, h, kept, total=None):
    y, y_kept = f(h), f(kept)
    return 1 - np.sum((y - y_kept) ** 2) / (np.sum((y - y.mean()) ** 2) if total is None else total(y))


def _q(basis):
    return np.linalg.qr(basis)[0]


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda f, h, b: _r2(f, h, h @ _q(b) @ _q(b).T), "keep the mean"),
        (
            lambda f, h, b: _r2(f, h, h.mean(0) + (h - h.mean(0)) @ b @ b.T),
            "orthonormalise the basis first",
        ),
        (
            lambda f, h, b: _r2(f, h, h.mean(0) + (h - h.mean(0)) @ _q(b) @ _q(b).T, lambda y: np.sum(y**2)),
            "the read-out's variation around its mean",
        ),
        (lambda f, h, b: _r2(f, h, h - (h - h.mean(0)) @ _q(b) @ _q(b).T), "you removed the subspace"),
    ],
)
def test_the_keep_r2_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import ace_method as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_keep_r2(wrong)
