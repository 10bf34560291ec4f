"""Checks for the exercises of the chapter "ACE on your own model".

Four small functions the chapter's machinery rests on, each compared with the library: the
read-out (a logit difference at the last position), the AUC that scores a margin, the angle
between a direction and a core, and the keep / remove / flip interventions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..ace import Core
from ..compare import principal_angles
from ..experiments.subject_verb_agreement_layers import auc as library_auc
from ..targets import logit_difference
from . import Case, check_function

__all__ = ["check_core_angle", "check_intervene", "check_logit_margin", "check_margin_auc"]


class _NumberedVocab:
    """A tokenizer whose word ``" t17"`` is the single token 17: lets the library's
    :func:`corelib.targets.logit_difference`, which takes words, read token ids."""

    def encode(self, word: str, add_special_tokens: bool = False) -> list[int]:
        return [int(word.strip()[1:])]


def _library_margin(logits: np.ndarray, plus: list[int], minus: list[int]) -> np.ndarray:
    words = [[f" t{i}" for i in side] for side in (plus, minus)]
    return logit_difference(_NumberedVocab(), *words)(torch.tensor(logits)).numpy()


def check_logit_margin(logit_margin: Callable) -> bool:
    """Check ``logit_margin(logits, plus, minus)``: for logits of shape (batch, positions, vocab), the sum
    of the logits of the token ids ``plus`` minus the sum of those of ``minus``, at the last
    position; one number per prompt.

    The cases hold the logits as NumPy arrays, so that a message shows them by their shape and first
    entries; the student's function receives them as torch tensors, as the model returns them."""
    rng = np.random.default_rng(0)

    def logits(batch, positions, vocab):
        return rng.standard_normal((batch, positions, vocab)) * 3

    specs = [
        (logits(5, 7, 40), [3, 8], [1, 2], "the tense read-out's shape: two verbs a side"),
        (logits(1, 4, 10), [0], [9], "one prompt, one token a side"),
        (logits(6, 1, 12), [5], [6], "prompts of one token"),
        (logits(4, 9, 30), [2, 4, 6], [7], "three tokens against one"),
        (logits(3, 5, 20), [11], [4, 19], "one token against two"),
    ]
    cases = [Case((x, plus, minus), _library_margin(x, plus, minus), what) for x, plus, minus, what in specs]

    def as_array(x, plus, minus):
        got = logit_margin(torch.tensor(x), list(plus), list(minus))
        return got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)

    def at(x, position, plus, minus):
        return x[:, position, plus].sum(-1) - x[:, position, minus].sum(-1)

    def log_probs(x, plus, minus):
        lp = torch.log_softmax(torch.tensor(x[:, -1]), -1).numpy()
        return lp[:, plus].sum(-1) - lp[:, minus].sum(-1)

    hints = [
        (
            lambda got, c: np.allclose(got, at(c.args[0], 0, c.args[1], c.args[2])),
            "you read the first position; the next word is predicted at the last one (index -1).",
        ),
        (
            lambda got, c: np.allclose(got, -c.expected),
            "the sign is reversed: the margin is plus minus minus.",
        ),
        (
            lambda got, c: np.allclose(
                got, c.args[0][:, -1, c.args[1]].mean(-1) - c.args[0][:, -1, c.args[2]].mean(-1)
            ),
            "you averaged each side; the read-out sums the logits of each side (was + were, not their mean).",
        ),
        (
            lambda got, c: np.allclose(got, log_probs(*c.args)),
            "you used log-probabilities: they equal the logit difference only when both sides have as "
            "many tokens (the log-normaliser cancels); return the logits' difference.",
        ),
        (
            lambda got, c: np.shape(got) != np.shape(c.expected),
            "return one number per prompt, shape (batch,).",
        ),
    ]
    return check_function(as_array, cases, name="logit_margin", hints=hints, rtol=1e-6, atol=1e-9)


def check_margin_auc(margin_auc: Callable) -> bool:
    """Check ``margin_auc(scores, positive)``: the probability that a positive example's score exceeds a
    negative one's, ties counted one half (the area under the ROC curve)."""
    rng = np.random.default_rng(1)
    n = 40
    y = np.r_[np.ones(n // 2), np.zeros(n // 2)].astype(bool)
    noisy = rng.standard_normal(n) + 0.8 * y
    specs = [
        (noisy, y, "two overlapping classes"),
        (np.arange(10.0), np.arange(10) >= 5, "perfectly separated: 1"),
        (-np.arange(10.0), np.arange(10) >= 5, "perfectly inverted: 0"),
        (np.zeros(8), np.arange(8) % 2 == 0, "every score tied: 1/2"),
        (np.round(noisy), y, "scores rounded: many ties"),
        (
            rng.standard_normal(31) + np.r_[np.ones(5), np.zeros(26)],
            np.r_[np.ones(5), np.zeros(26)],
            "5 positives, 26 negatives",
        ),
        (np.array([0.3, -1.2, 2.0]), np.array([1, 0, 0]), "integer labels, three prompts"),
    ]
    cases = [Case((s, p), library_auc(s, p), what) for s, p, what in specs]

    def counted(s, p, tie):
        s, p = np.asarray(s, float), np.asarray(p).astype(bool)
        diff = s[p][:, None] - s[~p][None, :]
        return float(np.mean((diff > 0) + tie * (diff == 0)))

    def call(s, p):
        return float(margin_auc(np.array(s, copy=True), np.array(p, copy=True)))

    hints = [
        (
            lambda got, c: np.isclose(got, counted(*c.args, 0.0)) or np.isclose(got, counted(*c.args, 1.0)),
            "ties must count one half: a tied pair is as likely ordered either way.",
        ),
        (
            lambda got, c: np.isclose(got, 1 - c.expected),
            "you computed P(negative > positive): the AUC ranks the positives above the negatives.",
        ),
        (
            lambda got, c: np.isclose(got, np.mean((np.asarray(c.args[0]) > 0) == np.asarray(c.args[1]).astype(bool))),
            "this is the accuracy of the sign; the AUC uses no threshold, it compares every positive with "
            "every negative.",
        ),
    ]
    return check_function(call, cases, name="margin_auc", hints=hints, rtol=1e-9, atol=1e-12)


def _orthonormal(rng: np.random.Generator, d: int, r: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((d, r)))[0]


def check_core_angle(core_angle: Callable) -> bool:
    """Check ``core_angle(v, basis)``: the angle in degrees between the vector ``v`` (any length, any
    sign) and the subspace spanned by the orthonormal columns of ``basis`` (D, r): the smallest
    principal angle, from 0 (inside the core) to 90 (orthogonal to it)."""
    rng = np.random.default_rng(2)
    q1, q3 = _orthonormal(rng, 12, 1), _orthonormal(rng, 12, 3)
    inside = q3 @ np.array([1.0, -2.0, 0.5])
    ortho = rng.standard_normal(12)
    ortho -= q3 @ (q3.T @ ortho)
    specs = [
        (rng.standard_normal(12) * 5, q1, "a steering vector and a rank-1 core"),
        (-3 * q1[:, 0] + 0.4 * rng.standard_normal(12), q1, "a vector pointing away from the core's direction"),
        (rng.standard_normal(12), q3, "a rank-3 core"),
        (inside, q3, "a vector inside the core: 0"),
        (ortho, q3, "a vector orthogonal to the core: 90"),
        (np.array([1.0, 1.0]), np.array([[1.0], [0.0]]), "the diagonal against the first axis: 45"),
    ]
    cases = [
        Case((v, q), float(principal_angles((v / np.linalg.norm(v))[:, None], q)[0]), what) for v, q, what in specs
    ]

    def call(v, q):
        return float(core_angle(np.array(v, copy=True), np.array(q, copy=True)))

    def signed(v, q):
        c = (q.T @ v).sum() / np.linalg.norm(v)
        return float(np.degrees(np.arccos(np.clip(c, -1, 1))))

    def unnormalised(v, q):
        return float(np.degrees(np.arccos(np.clip(np.linalg.norm(q.T @ v), -1, 1))))

    def projection(v, q):  # |Q^T v|, the cosine's numerator
        return float(np.linalg.norm(q.T @ v))

    # Each hint names a mistake only when the answer is what that mistake gives.
    hints = [
        (
            lambda got, c: np.isclose(got, np.radians(c.expected)),
            "you returned radians; the chapter's angles are in degrees (np.degrees).",
        ),
        (
            lambda got, c: c.args[1].shape[1] == 1 and np.isclose(got, signed(*c.args)),
            "a direction's sign does not matter (a core is a subspace): use the length of the projection "
            "|Q^T v| / |v|, which is never negative.",
        ),
        (
            lambda got, c: got > 90 + 1e-9 and not np.isclose(got, signed(*c.args)),
            "the angle between a vector and a subspace lies between 0 and 90 degrees.",
        ),
        (
            lambda got, c: 0 < projection(*c.args) < 1 and np.isclose(got, unnormalised(*c.args)),
            "divide by the length of v: the cosine of the angle is |Q^T v| / |v|.",
        ),
        (
            lambda got, c: (np.isnan(got) or np.isclose(got, 0.0)) and projection(*c.args) > 1 and c.expected > 1e-3,
            "if you took the arccos of |Q^T v| itself: here it is above 1, so it is not a cosine; "
            "divide by the length of v.",
        ),
    ]
    return check_function(call, cases, name="core_angle", hints=hints, rtol=1e-6, atol=1e-4)


def check_intervene(intervene: Callable) -> bool:
    """Check ``intervene(h, basis, mean, mode)``: activations ``h`` (N, D) with the part along the
    core (orthonormal ``basis`` (D, r)), measured from ``mean``, kept (``"keep"``: the mean plus that
    part), removed (``"remove"``) or reversed (``"flip"``)."""
    rng = np.random.default_rng(3)
    d = 10
    specs = []
    for r, what in ((1, "a rank-1 core"), (3, "a rank-3 core")):
        q = _orthonormal(rng, d, r)
        mu = rng.standard_normal(d) * 2
        h = mu + rng.standard_normal((6, d))
        for mode in ("keep", "remove", "flip"):
            specs.append((h, q, mu, mode, f"{what}, {mode}"))
    q = _orthonormal(rng, d, 2)
    specs.append((np.zeros((1, d)), q, np.zeros(d), "flip", "the mean itself: nothing to flip"))
    cases = [
        Case((h, q, mu, mode), getattr(Core(q, np.ones(q.shape[1]), mu), mode)(h, centered=True), what)
        for h, q, mu, mode, what in specs
    ]

    def call(h, q, mu, mode):
        return np.asarray(intervene(np.array(h, copy=True), np.array(q, copy=True), np.array(mu, copy=True), mode))

    def uncentred(h, q, mu, mode):
        return getattr(Core(q, np.ones(q.shape[1]), mu), mode)(h, centered=False)

    hints = [
        (
            lambda got, c: np.allclose(got, uncentred(*c.args)),
            "you projected h itself; project h - mean, the activation's offset from the training mean "
            "(the chapter's interventions are centred).",
        ),
        (
            lambda got, c: c.args[3] == "keep" and np.allclose(got, c.expected - c.args[2]),
            "keep returns the mean plus the core part: without the mean every prompt sits at the origin "
            "of the other directions, far from any activation the model has seen.",
        ),
        (
            lambda got, c: c.args[3] == "flip" and np.allclose(got, 2 * c.args[2] - c.args[0]),
            "flip reverses only the coordinates along the core, h - 2 P (h - mean); you reflected the "
            "whole activation.",
        ),
        (
            lambda got, c: c.args[3] == "flip" and np.allclose(got, c.args[0] - (c.args[0] - c.expected) / 2),
            "that is remove; flip subtracts the core part twice.",
        ),
    ]
    return check_function(call, cases, name="intervene", hints=hints, rtol=1e-9, atol=1e-9)
