"""The subject–verb agreement chapter's exercises: solutions run as printed, checks accept them and
reject typical mistakes with a message that says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from exercise_support import run_solution


def test_the_auc_solution_passes_its_check_and_matches_the_library(capsys):
    from corelib.exercises import subject_verb_agreement as ex
    from corelib.experiments.subject_verb_agreement_layers import auc

    fn = run_solution("subject_verb_agreement", "sva-ex-auc")["my_auc"]
    assert ex.check_auc(fn) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    assert fn([0, 1, 1], [0, 0, 1]) == 0.75
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 200), rng.integers(0, 2, 200)
    assert fn(s, y) == pytest.approx(auc(s, y), abs=1e-12)
    assert fn(-s, y) == pytest.approx(1 - fn(s, y), abs=1e-12)  # negating the score gives 1 - a


def _pairs(scores, positive, tie):
    s, y = np.asarray(scores, dtype=float), np.asarray(positive).astype(bool)
    diff = s[y][:, None] - s[~y][None, :]
    return float((diff > 0).mean() + tie * (diff == 0).mean())


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda s, y: _pairs(s, y, 0.0), "you counted it as a loss"),
        (lambda s, y: _pairs(s, y, 1.0), "you counted it as a win"),
        (lambda s, y: _pairs(s, np.asarray(y) == 0, 0.5), "P\\(positive > negative\\)"),
    ],
)
def test_the_auc_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import subject_verb_agreement as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_auc(wrong)


def test_the_strength_solution_passes_its_check_and_gives_the_stated_example(capsys):
    from corelib.exercises import subject_verb_agreement as ex

    fn = run_solution("subject_verb_agreement", "sva-ex-strength")["steering_strength"]
    assert ex.check_steering_strength(fn) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    assert fn(np.array([4.0]), np.array([3.6]), 0.2, 1.0, 50.0) == pytest.approx([2.5])


def _strength(m0, m1, probe, epsilon, cap, *, target_sign=-1.0, clip=True, zero_gain=True):
    m0, m1 = np.asarray(m0, dtype=float), np.asarray(m1, dtype=float)
    gain = (m1 - m0) / probe
    target = target_sign * np.sign(np.where(m0 > 0, 1.0, -1.0)) * epsilon
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (target - m0) / gain
    if zero_gain:
        s = np.where(gain != 0, s, 0.0)
    return s if cap is None or not clip else np.clip(s, -cap, cap)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda m0, m1, probe, eps, cap: _strength(m0, m1, 1.0, eps, cap), "divide m1 - m0 by probe"),
        (lambda m0, m1, probe, eps, cap: _strength(m0, m1, probe, 0.0, cap), "aim past zero by the buffer"),
        (lambda m0, m1, probe, eps, cap: _strength(m0, m1, probe, eps, cap, target_sign=1.0), "opposite to m0"),
        (lambda m0, m1, probe, eps, cap: _strength(m0, m1, probe, eps, cap, clip=False), r"clip s to \[-cap, cap\]"),
        (lambda m0, m1, probe, eps, cap: _strength(m0, m1, probe, eps, cap, zero_gain=False), "gain 0"),
    ],
)
def test_the_strength_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import subject_verb_agreement as ex

    with np.errstate(divide="ignore", invalid="ignore"), pytest.raises(AssertionError, match=says):
        ex.check_steering_strength(wrong)


def test_the_jacobian_solution_agrees_with_one_pass_per_layer_and_a_finite_difference():
    ns = run_solution("subject_verb_agreement", "sva-ex-jacobians")
    assert max((ns["jac"][l] - ns["jac2"][l]).abs().max().item() for l in (0, 1)) < 1e-6
    assert torch.allclose(ns["central"], ns["jac"][0] @ ns["v"], rtol=1e-2, atol=1e-3)


def test_a_stub_is_reported_as_not_done_yet(capsys):
    from corelib.exercises import subject_verb_agreement as ex

    def stub(*args):
        raise NotImplementedError

    assert ex.check_auc(stub) is False and ex.check_steering_strength(stub) is False
    assert ex.check_core_alignment(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 3


def _book_like_summary(seed=0):
    """Two models' stored analyses as the chapter's summary holds them (coordinates signed to rise
    with the margin), without running a language model."""
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    axis = np.where(rng.integers(0, 2, 600) == 1, 1.0, -1.0) + 0.5 * rng.normal(size=600)
    models = []
    for name, noise in (("model-a", 0.3), ("model-b", 0.6)):
        coords = axis + noise * rng.normal(size=600)
        margins = 3.0 * coords + rng.normal(size=600)
        models.append(SimpleNamespace(model=name, coords=coords.tolist(), margins={"baseline": margins.tolist()}))
    return SimpleNamespace(models=models)


def test_the_alignment_solution_passes_and_gives_back_the_books_correlations(capsys):
    from corelib.exercises import subject_verb_agreement as ex
    from corelib.experiments.subject_verb_agreement_layers import alignment

    fn = run_solution("subject_verb_agreement", "sva-ex-alignment")["core_alignment"]
    summary = _book_like_summary()
    assert ex.check_core_alignment(fn, summary) is True
    assert "all 7 cases pass" in capsys.readouterr().out
    assert ex.check_core_alignment(fn) is True  # a run with one model: no book's case
    assert "all 6 cases pass" in capsys.readouterr().out
    a, b = (np.asarray(m.coords) for m in summary.models)
    want = alignment(a, b)
    got = fn(a, summary.models[0].margins["baseline"], -b, summary.models[1].margins["baseline"])
    assert got == pytest.approx((want["pearson"], want["spearman"]), abs=1e-12)


def _wrong_alignment(*, orient="own", rank=True, swap=False, absolute=False):
    from scipy import stats

    def core_alignment(coords_a, margins_a, coords_b, margins_b):
        a, b = np.asarray(coords_a, dtype=float), np.asarray(coords_b, dtype=float)
        if orient in ("own", "a only"):
            a = a if np.corrcoef(a, margins_a)[0, 1] >= 0 else -a
        if orient == "own":
            b = b if np.corrcoef(b, margins_b)[0, 1] >= 0 else -b
        if orient == "by a":
            a = a if np.corrcoef(a, margins_a)[0, 1] >= 0 else -a
            b = b if np.corrcoef(b, a)[0, 1] >= 0 else -b
        r = stats.pearsonr(a, b).statistic
        rho = stats.spearmanr(a, b).statistic if rank else r
        out = (rho, r) if swap else (r, rho)
        return tuple(abs(v) for v in out) if absolute else out

    return core_alignment


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_wrong_alignment(orient="none"), "sign each by its own model's margin first"),
        (_wrong_alignment(orient="a only"), "sign each by its own model's margin first"),
        (_wrong_alignment(orient="by a"), "anti-correlated"),
        (_wrong_alignment(absolute=True), "anti-correlated"),
        (_wrong_alignment(rank=False), "Pearson's r twice"),
        (_wrong_alignment(swap=True), "in that order"),
    ],
)
def test_the_alignment_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import subject_verb_agreement as ex

    with pytest.raises(AssertionError, match=says) as err:
        ex.check_core_alignment(wrong, _book_like_summary())
    assert len(str(err.value)) < 800  # never the whole arrays of coordinates
