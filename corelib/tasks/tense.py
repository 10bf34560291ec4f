"""Tense prompts: a time cue fixes whether the verb that follows should be past or present.

Every prompt is a noun phrase of the agreement task (:mod:`corelib.tasks.sva`: a head noun, an
attractor of the other number, the templates ``base`` and ``relative``) after a time cue:

* past:    ``Yesterday, the key to the cabinets``
* present: ``Right now, the key to the cabinets``

Each noun phrase appears twice, once after a past cue and once after a present cue, and both
prompts fall in the same half of the split (the held-out half has phrases the cores never saw).
Singular and plural heads alternate, so number is balanced within each tense. The read-out is
the **tense margin** ``(was + were) - (is + are)``: positive when the model prefers a past verb,
whatever the number.

The cues are unambiguous about the time of the verb: cues after which both tenses are natural
(``Today,``, ``This year,``) are left out. They were picked from a longer list after looking at
SmolLM2's and Gemma-3's margins on another draw of phrases (seed 5): past cues SmolLM2 hardly
reacts to (``Back then,``, ``Once,``, ``Years ago,``, ``In the past,``) were dropped too, so the
task measures a behaviour the model has. The templates ``front``, ``back`` and ``there`` of the
agreement task are not used: their pads carry their own time ("Long ago in a distant land", "in
the present tense") or need no tense ("There key near the boxes").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import sva
from .sva import ATTRACTORS, CONNECTORS, HEADS, RELATIVES, PromptHalves, make_prompt

__all__ = [
    "PAST_CUES",
    "PRESENT_CUES",
    "TENSE_TEMPLATES",
    "TENSE_VERBS",
    "TENSE_READOUT",
    "TenseDataset",
    "make_dataset",
    "tense_prompt",
    "vocabulary",
]

PAST_CUES = ("Yesterday,", "Long ago,", "A century ago,", "Last night,", "Last year,", "In 1900,")
PRESENT_CUES = ("Right now,", "At present,", "Nowadays,", "Currently,", "These days,", "At the moment,")
TENSE_TEMPLATES = ("base", "relative")

TENSE_VERBS = {"past": (" was", " were"), "present": (" is", " are")}
"""The verbs of the read-out, by the tense they mark (each number once per tense)."""

TENSE_READOUT = {verb: (1.0 if tense == "past" else -1.0) for tense, verbs in TENSE_VERBS.items() for verb in verbs}
"""The tense margin ``(was + were) - (is + are)`` as a :class:`corelib.lm.LanguageModel` read-out."""


def vocabulary() -> list[str]:
    """The words of the tiny test model's tokenizer for this task: the agreement task's
    (:func:`corelib.tasks.sva.vocabulary`), which hold the noun phrases and the four verbs. The
    time cues are not among them and read as the unknown word; the smoke profile only checks that
    the pipeline runs."""
    return sva.vocabulary()


def tense_prompt(cue: str, phrase: str) -> str:
    """``cue`` before a noun phrase that starts with a capital: ``"Yesterday, the key ..."``."""
    return f"{cue} {phrase[0].lower()}{phrase[1:]}"


@dataclass(frozen=True)
class TenseDataset(PromptHalves):
    """Prompts with their tense: ``past[i]`` is 1 after a past cue, 0 after a present one.

    ``plural`` is the number of the head noun, ``phrase`` the index of the noun phrase (shared by
    the prompt's past and present versions); ``train``/``test`` are index arrays of the halves.
    """

    prompts: tuple[str, ...]
    past: np.ndarray
    plural: np.ndarray
    phrase: np.ndarray
    train: np.ndarray
    test: np.ndarray

    LABEL = "past"  # split() returns the tense


def make_dataset(n_phrases: int = 600, seed: int = 0) -> TenseDataset:
    """``n_phrases`` noun phrases, each after a past and after a present cue (``2 n_phrases`` prompts).

    Heads alternate singular and plural, templates alternate in pairs; words, connectors, relative
    chunks and cues are drawn with ``seed``. The phrases are shuffled and split in halves (the
    first half of the phrases is ``train``), keeping a phrase's two prompts together.
    """
    if int(n_phrases) != n_phrases or n_phrases < 2:
        raise ValueError(f"n_phrases must be an integer >= 2 (one per half), got {n_phrases}")
    rng = np.random.default_rng(seed)
    prompts, past, plural, phrase = [], [], [], []
    for k in rng.permutation(int(n_phrases)):
        number, other = ("singular", "plural") if k % 2 == 0 else ("plural", "singular")
        text = make_prompt(
            TENSE_TEMPLATES[(k // 2) % len(TENSE_TEMPLATES)],
            HEADS[number][rng.integers(len(HEADS[number]))],
            ATTRACTORS[other][rng.integers(len(ATTRACTORS[other]))],
            connector=CONNECTORS[rng.integers(len(CONNECTORS))],
            relative=RELATIVES[rng.integers(len(RELATIVES))],
        )
        for label, cues in ((1, PAST_CUES), (0, PRESENT_CUES)):
            prompts.append(tense_prompt(cues[rng.integers(len(cues))], text))
            past.append(label)
            plural.append(int(number == "plural"))
            phrase.append(int(k))
    half = 2 * (int(n_phrases) // 2)  # prompts of the first n_phrases // 2 phrases
    return TenseDataset(
        prompts=tuple(prompts),
        past=np.asarray(past),
        plural=np.asarray(plural),
        phrase=np.asarray(phrase),
        train=np.arange(half),
        test=np.arange(half, len(prompts)),
    )
