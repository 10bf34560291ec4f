"""Subject-verb agreement prompts (the paper's appendix "Subject-Verb Agreement Experiment").

Every prompt is a noun phrase that a verb should follow: a head noun (the subject), an
*attractor* noun of the opposite number between it and the verb, and one of five templates:

* base:     ``The key to the cabinets``
* front:    ``In this ancient kingdom, the key to the cabinets``
* back:     ``The key to the cabinets in the old kingdom``
* there:    ``There key near the boxes`` (deliberately ungrammatical word order)
* relative: ``The key that guards the cabinets``

Half of the prompts are prefixed with ``In the past,``. A plural head should make the model
prefer *are/were* to *is/was*. :func:`make_dataset` builds the paper's 600 singular + 600 plural
prompts, shuffles them with a seed and splits them in half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "AGREEMENT_READOUT",
    "AGREEMENT_VERBS",
    "ATTRACTORS",
    "CONNECTORS",
    "HEADS",
    "TEMPLATES",
    "NUMBER_WORD_PAIRS",
    "FLIP_DEMO_PROMPTS",
    "SVADataset",
    "make_dataset",
    "make_prompt",
    "vocabulary",
]

HEADS = {
    "singular": ("key", "label", "author", "pilot", "teacher", "child", "man", "woman", "mouse"),
    "plural": ("keys", "labels", "authors", "pilots", "teachers", "children", "men", "women", "mice"),
}
ATTRACTORS = {
    "singular": ("cabinet", "drawer", "door", "folder", "box", "room", "student", "guard", "desk"),
    "plural": ("cabinets", "drawers", "doors", "folders", "boxes", "rooms", "students", "guards", "desks"),
}
CONNECTORS = ("to the", "of the", "near the", "behind the", "next to the", "alongside the")
FRONT_PADS = (
    "In this ancient kingdom,",
    "Long ago in a distant land,",
    "In a busy laboratory,",
    "Deep under the old castle,",
)
BACK_PADS = ("in the old kingdom", "in this strange world", "in the present tense", "on most days")
RELATIVES = ("that the", "that guards the", "that surrounds the", "that hides the")
TEMPLATES = ("base", "front", "back", "there", "relative")
PAST = "In the past,"

AGREEMENT_VERBS = {"singular": (" is", " was"), "plural": (" are", " were")}
"""The agreement verbs, by the number they mark."""

AGREEMENT_READOUT = {
    verb: (1.0 if number == "plural" else -1.0) for number, verbs in AGREEMENT_VERBS.items() for verb in verbs
}
"""The number margin ``(are + were) - (is + was)`` as a :class:`corelib.lm.LanguageModel` read-out
(``load_model(name, readout=AGREEMENT_READOUT)``): positive when the model prefers the plural."""

NUMBER_WORD_PAIRS = ((" has", " have"), (" does", " do"), (" this", " these"), (" it", " they"), (" its", " their"))
"""Number-marked words other than the four agreement verbs: (singular, plural) forms. The paper
says steering along the core changes words beyond is/are/was/were; these are what we count."""

FLIP_DEMO_PROMPTS = (
    "The key next to the cabinets",
    "The keys next to the cabinet",
    "The children near the guard",
    "In this ancient kingdom, the key to the cabinets",
    "There key near the boxes",
    "There keys near the box",
)
"""The reference code's flip demonstration; the paper quotes the first (P(is) 0.51 -> 0.01)."""


def make_prompt(
    template: str,
    head: str,
    attractor: str,
    *,
    connector: str = "to the",
    front: str = FRONT_PADS[0],
    back: str = BACK_PADS[0],
    relative: str = RELATIVES[0],
    past: bool = False,
) -> str:
    """One prompt from its parts, e.g. ``make_prompt("base", "key", "cabinets")``."""
    forms = {
        "base": f"The {head} {connector} {attractor}",
        "front": f"{front} the {head} {connector} {attractor}",
        "back": f"The {head} {connector} {attractor} {back}",
        "there": f"There {head} {connector} {attractor}",
        "relative": f"The {head} {relative} {attractor}",
    }
    if template not in forms:
        raise ValueError(f"unknown template {template!r}; templates are {', '.join(TEMPLATES)}")
    text = forms[template]
    return f"{PAST} {text[0].lower()}{text[1:]}" if past else text


class PromptHalves:
    """Prompts split in a ``train`` and a ``test`` half (index arrays), with a binary label per
    prompt in the attribute named by ``LABEL``."""

    LABEL = "plural"

    def split(self, name: str) -> tuple[list[str], np.ndarray]:
        """``(prompts, labels)`` of the ``"train"`` or ``"test"`` half."""
        if name not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {name!r}")
        idx = getattr(self, name)
        return [self.prompts[i] for i in idx], getattr(self, self.LABEL)[idx]

    def __len__(self) -> int:
        return len(self.prompts)


@dataclass(frozen=True)
class SVADataset(PromptHalves):
    """Prompts with their number: ``plural[i]`` is 1 for a plural head, 0 for a singular one.

    ``template`` and ``past`` record how each prompt was made; ``train``/``test`` are index
    arrays of the two halves.
    """

    prompts: tuple[str, ...]
    plural: np.ndarray
    template: tuple[str, ...]
    past: np.ndarray
    train: np.ndarray
    test: np.ndarray


def make_dataset(n_per_number: int = 600, seed: int = 0) -> SVADataset:
    """``n_per_number`` singular and as many plural prompts, shuffled, split in two halves.

    Templates cycle through the five forms and every other group of five gets ``In the past,``,
    so templates and tense are balanced; nouns, connectors and pads are drawn with ``seed``.
    Singular heads take plural attractors and vice versa.
    """
    if int(n_per_number) != n_per_number or n_per_number < 1:
        raise ValueError(f"n_per_number must be a positive integer, got {n_per_number}")
    rng = np.random.default_rng(seed)
    prompts, plural, templates, past = [], [], [], []
    for number, other, label in (("singular", "plural", 0), ("plural", "singular", 1)):
        for k in range(int(n_per_number)):
            template = TEMPLATES[k % len(TEMPLATES)]
            is_past = (k // len(TEMPLATES)) % 2 == 1
            prompts.append(
                make_prompt(
                    template,
                    HEADS[number][rng.integers(9)],
                    ATTRACTORS[other][rng.integers(9)],
                    connector=CONNECTORS[rng.integers(len(CONNECTORS))],
                    front=FRONT_PADS[rng.integers(len(FRONT_PADS))],
                    back=BACK_PADS[rng.integers(len(BACK_PADS))],
                    relative=RELATIVES[rng.integers(len(RELATIVES))],
                    past=is_past,
                )
            )
            plural.append(label)
            templates.append(template)
            past.append(is_past)
    order = rng.permutation(len(prompts))
    half = len(order) // 2
    return SVADataset(
        prompts=tuple(prompts[i] for i in order),
        plural=np.asarray(plural)[order],
        template=tuple(templates[i] for i in order),
        past=np.asarray(past)[order],
        train=np.arange(half),
        test=np.arange(half, len(order)),
    )


def vocabulary() -> list[str]:
    """Every word and punctuation mark of the prompts, the agreement verbs, and the words of
    the book's steering and control prompts (for the word-level tokenizer of the tiny model)."""
    parts = [
        *HEADS["singular"],
        *HEADS["plural"],
        *ATTRACTORS["singular"],
        *ATTRACTORS["plural"],
        *CONNECTORS,
        *FRONT_PADS,
        *BACK_PADS,
        *RELATIVES,
        PAST,
        "The There is are was were , . the a and of in on to 1 2 3 4 5 6 7 8 9 10",
    ]
    words = set()
    for part in parts:
        for w in part.replace(",", " , ").replace(".", " . ").split():
            words.update({w, w.lower(), w.capitalize()})
    return sorted(words)
