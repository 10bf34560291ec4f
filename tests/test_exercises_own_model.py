"""The exercises of the chapter "ACE on your own model": each solution, cut out of
``book/solutions/own_model.md``, passes its check and agrees with an independent answer; each
check rejects typical wrong answers with a message that says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corelib.exercises import own_model as ex
from corelib.experiments import own_model
from exercise_support import run_solution

# --------------------------------------------------------------------------- the read-out


def test_the_margin_solution_passes_and_is_the_logit_difference(capsys):
    fn = run_solution("own_model", "own-ex-margin")["logit_margin"]
    assert ex.check_logit_margin(fn) is True
    assert "all 5 cases pass" in capsys.readouterr().out
    logits = torch.zeros(2, 3, 5)
    logits[0, -1] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    logits[1, -1] = torch.tensor([0.0, 0.0, 7.0, 0.0, 1.0])
    assert fn(logits, [2, 4], [0]).tolist() == [7.0, 8.0]


def _first_position(logits, plus, minus):
    return logits[:, 0, plus].sum(-1) - logits[:, 0, minus].sum(-1)


def _averaged(logits, plus, minus):
    return logits[:, -1, plus].mean(-1) - logits[:, -1, minus].mean(-1)


def _log_probs(logits, plus, minus):
    lp = torch.log_softmax(logits[:, -1], -1)
    return lp[:, plus].sum(-1) - lp[:, minus].sum(-1)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_first_position, "you read the first position"),
        (lambda x, p, m: -(x[:, -1, p].sum(-1) - x[:, -1, m].sum(-1)), "the sign is reversed"),
        (_averaged, "you averaged each side"),
        (_log_probs, "you used log-probabilities"),
        (lambda x, p, m: x[:, -1, p] - x[:, -1, m], "one number per prompt"),
    ],
)
def test_the_margin_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_logit_margin(wrong)


def test_a_log_probability_margin_passes_where_the_sides_are_equal_and_is_caught_where_not():
    """The check's first cases have as many tokens on each side (log-probabilities agree there);
    the message names the case of unequal sides."""
    with pytest.raises(AssertionError, match=r"case 4 of 5 \(three tokens against one\)"):
        ex.check_logit_margin(_log_probs)


# --------------------------------------------------------------------------- the AUC


def test_the_auc_solution_passes_and_counts_pairs(capsys):
    from scipy.stats import mannwhitneyu

    fn = run_solution("own_model", "own-ex-auc")["margin_auc"]
    assert ex.check_margin_auc(fn) is True
    assert "all 7 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 60)
    s = np.round(rng.standard_normal(60) + y, 1)  # with ties
    u = mannwhitneyu(s[y == 1], s[y == 0]).statistic  # pairs won by a positive, ties one half
    assert fn(s, y) == pytest.approx(u / ((y == 1).sum() * (y == 0).sum()), abs=1e-12)


def _ties_lost(scores, positive):
    s, y = np.asarray(scores, float), np.asarray(positive).astype(bool)
    return float(np.mean(s[y][:, None] > s[~y][None, :]))


def _swapped(scores, positive):
    s, y = np.asarray(scores, float), np.asarray(positive).astype(bool)
    d = s[~y][:, None] - s[y][None, :]
    return float(np.mean((d > 0) + 0.5 * (d == 0)))


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_ties_lost, "ties must count one half"),
        (_swapped, "P\\(negative > positive\\)"),
        (lambda s, y: float(np.mean((np.asarray(s) > 0) == np.asarray(y).astype(bool))), "accuracy of the sign"),
    ],
)
def test_the_auc_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_margin_auc(wrong)


# --------------------------------------------------------------------------- the angle to a core


def test_the_angle_solution_passes_and_agrees_with_the_chapters_angle(capsys):
    fn = run_solution("own_model", "own-ex-angle")["core_angle"]
    assert ex.check_core_angle(fn) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(6)
    u, v = rng.standard_normal(9), rng.standard_normal(9)
    assert fn(u, (v / np.linalg.norm(v))[:, None]) == pytest.approx(own_model.angle_deg(u, v), abs=1e-6)


def _signed(v, basis):
    cos = (basis.T @ v).sum() / np.linalg.norm(v)
    return float(np.degrees(np.arccos(np.clip(cos, -1, 1))))


def _radians(v, basis):
    return float(np.arccos(min(np.linalg.norm(basis.T @ v) / np.linalg.norm(v), 1.0)))


def _unnormalised(v, basis):
    return float(np.degrees(np.arccos(np.clip(np.linalg.norm(basis.T @ v), -1, 1))))


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_signed, "sign does not matter"),
        (_radians, "you returned radians"),
        (_unnormalised, "divide by the length of v"),
    ],
)
def test_the_angle_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_core_angle(wrong)


# --------------------------------------------------------------------------- keep, remove, flip


def test_the_intervention_solution_passes_and_is_the_chapters_hook(capsys):
    fn = run_solution("own_model", "own-ex-intervene")["intervene"]
    assert ex.check_intervene(fn) is True
    assert "all 7 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(7)
    d, mu = rng.standard_normal(5), rng.standard_normal(5)
    h = rng.standard_normal((3, 5))
    core = own_model.direction_core(d, mu)
    for mode in ("keep", "remove", "flip"):
        np.testing.assert_allclose(fn(h, core.basis, mu, mode), getattr(core, mode)(h, centered=True), atol=1e-12)
    flipped = fn(h, core.basis, mu, "flip")
    assert np.allclose(core.coords(flipped), -core.coords(h))  # the coordinate reversed, nothing else


def _project(h, q, mu, centred):
    x = h - mu if centred else h
    return x @ q @ q.T


def _uncentred(h, q, mu, mode):
    along = _project(h, q, mu, False)
    return {"keep": along, "remove": h - along, "flip": h - 2 * along}[mode]


def _keep_without_mean(h, q, mu, mode):
    along = _project(h, q, mu, True)
    return {"keep": along, "remove": h - along, "flip": h - 2 * along}[mode]


def _flip_everything(h, q, mu, mode):
    along = _project(h, q, mu, True)
    return {"keep": mu + along, "remove": h - along, "flip": 2 * mu - h}[mode]


def _flip_is_remove(h, q, mu, mode):
    along = _project(h, q, mu, True)
    return {"keep": mu + along, "remove": h - along, "flip": h - along}[mode]


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_uncentred, "project h - mean"),
        (_keep_without_mean, "keep returns the mean plus the core part"),
        (_flip_everything, "you reflected the whole activation"),
        (_flip_is_remove, "that is remove"),
    ],
)
def test_the_intervention_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        ex.check_intervene(wrong)


def test_a_stub_is_reported_as_not_done_yet(capsys):
    def stub(*args):
        raise NotImplementedError

    for check in (ex.check_logit_margin, ex.check_margin_auc, ex.check_core_angle, ex.check_intervene):
        assert check(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 4


# --------------------------------------------------------------------------- the other exercises


def test_exercise_probes_follow_the_covariance():
    ns = run_solution("own_model", "own-ex-probe")
    angles = ns["angles"]
    assert ns["iso_angle"] < 5  # sampling noise of 2 x 20000 points in 20 dimensions: a few degrees
    assert angles["mean difference to delta"] < 5
    assert angles["weak probe to Sigma^-1 delta"] < 3
    assert angles["weak probe to delta"] > 45  # Sigma^-1 delta is 50 degrees from delta
    assert angles["strong probe to mean difference"] < 0.5
    # independently: the angle between delta and Sigma^-1 delta
    delta = np.ones(20)
    assert own_model.angle_deg(delta, delta / np.arange(1, 21)) == pytest.approx(
        np.degrees(np.arccos(np.sum(1 / np.arange(1, 21)) / np.sqrt(20 * np.sum(1 / np.arange(1, 21) ** 2))))
    )


# --------------------------------------------------------------------------- what a failure message shows


def _correct_margin(logits, plus, minus):
    return logits[:, -1, plus].sum(-1) - logits[:, -1, minus].sum(-1)


def _correct_angle(v, basis):
    cos = np.linalg.norm(basis.T @ v) / np.linalg.norm(v)
    return float(np.degrees(np.arccos(min(cos, 1.0))))


def _correct_auc(scores, positive):
    s, y = np.asarray(scores, float), np.asarray(positive).astype(bool)
    d = s[y][:, None] - s[~y][None, :]
    return float(np.mean((d > 0) + 0.5 * (d == 0)))


def _message(check, fn) -> str:
    with pytest.raises(AssertionError) as failed:
        check(fn)
    return str(failed.value)


def _numbers(text: str) -> int:
    import re

    return len(re.findall(r"-?\d+\.\d+", text))


def _raises(*args):
    raise ValueError("shapes do not match")


CHECKS = {
    "logit_margin": (ex.check_logit_margin, lambda x, p, m: _correct_margin(x, p, m) + 1.0, "(5, 7, 40) array"),
    "margin_auc": (ex.check_margin_auc, lambda s, y: 0.5, "(40,) array"),
    "core_angle": (ex.check_core_angle, lambda v, q: _correct_angle(v, q) + 3.0, "(12,) array"),
    "intervene": (ex.check_intervene, lambda h, q, mu, mode: h + 1.0, "(6, 10) array"),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_wrong_answer_is_shown_by_its_shape_a_few_entries_and_the_largest_difference(name):
    check, wrong, _ = CHECKS[name]
    text = _message(check, wrong)
    assert len(text) < 500 and _numbers(text) <= 12, text  # never a whole array
    assert not any(line.lstrip().startswith("[") for line in text.splitlines()), text  # no matrix row by row
    if name in ("logit_margin", "intervene"):  # array answers of the right shape
        assert "largest difference" in text, text
    if name == "intervene":
        assert "a (6, 10) array" in text, text


@pytest.mark.parametrize("name", list(CHECKS))
def test_an_error_is_reported_with_its_arguments_by_shape(name):
    check, _, shown = CHECKS[name]
    text = _message(check, _raises)
    assert "raised ValueError: shapes do not match" in text
    assert shown in text and len(text) < 400 and _numbers(text) <= 12, text
    assert "tensor(" not in text, text


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_mistake_of_no_known_kind_gets_no_hint_that_names_a_cause(name):
    """An answer off by a constant is none of the typical mistakes: no hint may say "you did X"."""
    check, wrong, _ = CHECKS[name]
    text = _message(check, wrong)
    assert "Hint: you" not in text and "Hint: divide" not in text and "Hint: the sign" not in text, text
    assert "sign does not matter" not in text, text


def test_an_angle_above_ninety_degrees_is_not_blamed_on_the_sign():
    """Degrees converted twice gives angles above 90 degrees too; the hint says what an angle to a
    subspace is, not that the sign was used."""
    text = _message(ex.check_core_angle, lambda v, q: float(np.degrees(np.radians(_correct_angle(v, q)) * 3)))
    assert "between 0 and 90 degrees" in text and "sign" not in text, text


def test_an_angle_of_zero_gets_a_hint_that_does_not_claim_the_cause():
    text = _message(ex.check_core_angle, lambda v, q: 0.0)
    assert "Hint: if you took the arccos of |Q^T v| itself" in text, text
    assert "Hint: divide" not in text, text


def test_the_auc_check_asks_for_ties_only_where_there_are_ties():
    """An AUC that is right without ties but counts a tie as a loss fails on the first case with
    ties, and only that case's hint speaks of ties."""
    text = _message(ex.check_margin_auc, _ties_lost)
    assert "every score tied" in text or "ties" in text.split("\n")[0], text
    assert "ties must count one half" in text
    assert "Hint" not in _message(ex.check_margin_auc, lambda s, y: _correct_auc(s, y) * 0.9)
