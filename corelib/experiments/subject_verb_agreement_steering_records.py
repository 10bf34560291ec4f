"""The typed record of one model's steering run.

:func:`~corelib.experiments.subject_verb_agreement_steering.steering_run` returns a
:class:`SteeringRun`, which the results store keeps as ``steering.json`` in the JSON form
:meth:`SteeringRun.to_json` writes and :meth:`SteeringRun.from_json` reads back. Reading refuses a
key it does not know (naming the field meant), a missing key, a value of the wrong type, and
per-step or per-prompt lists of unequal lengths. The form is versioned: the runs written so far
are format 1 and carry no marker, so every stored file keeps its bytes; a later format adds a
``"format"`` key and a reader.

Margins are in logits (``logsumexp(are, were) - logsumexp(is, was)``, positive: plural);
probabilities, masses and rates are shares in [0, 1]; counts are whole numbers. Every record
answers item access (``run["inversion"]["rate"]``) and iterates over its field names, as the
dicts these records once were did (:class:`corelib.typed_records.StoredRecord`, whose field
readers build them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

from ..steering import Generation
from ..typed_records import (
    Reader,
    StoredRecord,
    by_name,
    check_value,
    each,
    is_int,
    is_natural,
    is_real,
    is_share,
    leaf,
    list_of,
    named,
    nested,
    same_lengths,
)

__all__ = [
    "STEERING_FORMAT",
    "FlipExample",
    "GateRun",
    "GenerationPair",
    "InversionCounts",
    "OtherWords",
    "SampledInversion",
    "SampledPair",
    "SampledWordInversion",
    "SteeringRun",
    "StoredGeneration",
    "WordInversionCounts",
]

STEERING_FORMAT = 1  # the JSON form of steering.json read and written here; format 1 has no "format" key

_FIX = "delete the steering run's folder to compute it again (`subject_verb_agreement.run`) or restore steering.json"


class _SteeringRecord(StoredRecord):
    """A part of the steering run: its file is the run's ``steering.json``."""

    __slots__ = ()
    FIX: ClassVar[str] = _FIX


# --------------------------------------------------------------------------- the generations

_REALS = leaf(list_of(is_real), "a list of numbers")
_COUNT = leaf(is_natural, "a count, a whole number >= 0")
_RATE = leaf(lambda v: v is None or is_share(v), "a rate, a number in [0, 1], or null without decisions")
_CLASSES = leaf(list_of(lambda x: x is None or isinstance(x, str)), "a list of token classes (strings) or nulls")
_STEPS = ("pieces", "gated", "strength", "clean_margin", "margin", "clean_token", "verb", "clean_verb", "verb_mass")


@dataclass(frozen=True)
class StoredGeneration(_SteeringRecord):
    """A continuation as stored (:class:`corelib.steering.Generation`); every list has one entry
    per generated token (step).

    Attributes:
        prompt: the prompt continued.
        tokens: the generated token ids; ``pieces``: their text.
        gated: per step, whether the gate opened (an agreement decision was steered).
        strength: per step, the steering strength s* (0 where the gate stayed shut).
        clean_margin, margin: per step, the generation margin (logits) of the clean pass and of
            the logits used.
        clean_token: per step, the clean pass's greedy token id.
        verb, clean_verb: per step, the token class ("singular", "plural") of the emitted and of
            the clean greedy token, or None for a token of neither class.
        verb_mass: per step, the clean pass's probability on the classes' tokens (a share).
    """

    prompt: str
    tokens: tuple[int, ...]
    pieces: tuple[str, ...]
    gated: tuple[bool, ...]
    strength: tuple[float, ...]
    clean_margin: tuple[float, ...]
    margin: tuple[float, ...]
    clean_token: tuple[int, ...]
    verb: tuple[str | None, ...]
    clean_verb: tuple[str | None, ...]
    verb_mass: tuple[float, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {
        "prompt": leaf(lambda v: isinstance(v, str), "a prompt (a string)"),
        "tokens": leaf(list_of(is_natural), "a list of token ids (whole numbers >= 0)"),
        "pieces": leaf(list_of(lambda x: isinstance(x, str)), "a list of strings"),
        "gated": leaf(list_of(lambda x: isinstance(x, bool)), "a list of true/false"),
        "strength": _REALS,
        "clean_margin": _REALS,
        "margin": _REALS,
        "clean_token": leaf(list_of(is_natural), "a list of token ids (whole numbers >= 0)"),
        "verb": _CLASSES,
        "clean_verb": _CLASSES,
        "verb_mass": leaf(list_of(is_share), "a list of probabilities (numbers in [0, 1])"),
    }
    WHAT: ClassVar[str] = "generation"

    def check(self, what: str, fix: str) -> None:
        """Refuse per-step lists of unequal lengths."""
        same_lengths(what, {k: len(getattr(self, k)) for k in _STEPS}, len(self.tokens), "generated token", fix)

    @property
    def text(self) -> str:
        """The continuation as text."""
        return "".join(self.pieces)

    def generation(self) -> Generation:
        """The continuation as a :class:`corelib.steering.Generation` (lists), to count inversions."""
        return Generation(
            **{f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}
        )


@dataclass(frozen=True)
class GenerationPair(_SteeringRecord):
    """A prompt continued greedily, unsteered and steered.

    Attributes:
        base: the unsteered continuation; ``steered``: the steered one (at the run's gate).
    """

    base: StoredGeneration
    steered: StoredGeneration

    READERS: ClassVar[Mapping[str, Reader]] = {"base": nested(StoredGeneration), "steered": nested(StoredGeneration)}
    WHAT: ClassVar[str] = "generation pair"


@dataclass(frozen=True)
class SampledPair(_SteeringRecord):
    """A steering prompt continued by sampling, unsteered and steered with the same seed.

    Attributes:
        base: the unsteered sample; ``steered``: the steered one (at the run's gate).
        seed: the sampling seed the two share.
    """

    base: StoredGeneration
    steered: StoredGeneration
    seed: int

    READERS: ClassVar[Mapping[str, Reader]] = {
        "base": nested(StoredGeneration),
        "steered": nested(StoredGeneration),
        "seed": leaf(is_int, "a seed (a whole number)"),
    }
    WHAT: ClassVar[str] = "sampled pair"


@dataclass(frozen=True)
class GateRun(_SteeringRecord):
    """The greedy continuations steered at one gate threshold of the grid.

    Attributes:
        greedy: the steering prompts' continuations, in the order of the prompts.
        control: the control prompts' continuations, in the order of the prompts.
    """

    greedy: tuple[StoredGeneration, ...]
    control: tuple[StoredGeneration, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {"greedy": each(StoredGeneration), "control": each(StoredGeneration)}
    WHAT: ClassVar[str] = "gate run"


# --------------------------------------------------------------------------- the counts


@dataclass(frozen=True)
class InversionCounts(_SteeringRecord):
    """Agreement decisions and inversions of steered generations
    (:func:`corelib.steering.inversion_stats`).

    Attributes:
        decisions: steps where the clean greedy or the emitted token is an agreement verb.
        inverted: of those, the steps whose emitted verb has the number the clean pass disfavoured.
        ungated_decisions: decisions at steps the gate left alone.
        steered_steps: steps the gate opened.
        rate: ``inverted / decisions`` (None without decisions).
        clean_verb_decisions: decisions whose clean greedy token is a verb;
            ``clean_verbs_inverted``: of those, the inverted ones.
        rate_clean_verbs: ``clean_verbs_inverted / clean_verb_decisions`` (None without such decisions).
    """

    decisions: int
    inverted: int
    ungated_decisions: int
    steered_steps: int
    rate: float | None
    clean_verb_decisions: int
    clean_verbs_inverted: int
    rate_clean_verbs: float | None

    READERS: ClassVar[Mapping[str, Reader]] = {
        "decisions": _COUNT,
        "inverted": _COUNT,
        "ungated_decisions": _COUNT,
        "steered_steps": _COUNT,
        "rate": _RATE,
        "clean_verb_decisions": _COUNT,
        "clean_verbs_inverted": _COUNT,
        "rate_clean_verbs": _RATE,
    }
    WHAT: ClassVar[str] = "inversion count"


@dataclass(frozen=True)
class WordInversionCounts(_SteeringRecord):
    """How often generations wrote the other-number form of a number-marked word
    (:func:`corelib.steering.word_inversion_stats`).

    Attributes:
        decisions: steps whose clean greedy token is one of the words.
        inverted: of those, the steps that emitted its counterpart.
        rate: ``inverted / decisions`` (None without decisions).
    """

    decisions: int
    inverted: int
    rate: float | None

    READERS: ClassVar[Mapping[str, Reader]] = {"decisions": _COUNT, "inverted": _COUNT, "rate": _RATE}
    WHAT: ClassVar[str] = "word inversion count"


@dataclass(frozen=True)
class SampledInversion(_SteeringRecord):
    """The sampled generations' verb inversions.

    Attributes:
        steered: those of the steered samples; ``unsteered``: those of the unsteered ones (what
            sampling alone does).
    """

    steered: InversionCounts
    unsteered: InversionCounts

    READERS: ClassVar[Mapping[str, Reader]] = {"steered": nested(InversionCounts), "unsteered": nested(InversionCounts)}
    WHAT: ClassVar[str] = "sampled inversion"


@dataclass(frozen=True)
class SampledWordInversion(_SteeringRecord):
    """The sampled generations' inversions of the other number-marked words.

    Attributes:
        steered: those of the steered samples; ``unsteered``: those of the unsteered ones.
    """

    steered: WordInversionCounts
    unsteered: WordInversionCounts

    READERS: ClassVar[Mapping[str, Reader]] = {
        "steered": nested(WordInversionCounts),
        "unsteered": nested(WordInversionCounts),
    }
    WHAT: ClassVar[str] = "sampled word inversion"


@dataclass(frozen=True)
class OtherWords(_SteeringRecord):
    """Inversions of number-marked words other than the four verbs.

    Attributes:
        words: the words counted (each form of :data:`corelib.tasks.sva.NUMBER_WORD_PAIRS` that is
            one token of the model), sorted.
        greedy: the greedy steered continuations' counts; ``sampled``: the samples', steered and not.
    """

    words: tuple[str, ...]
    greedy: WordInversionCounts
    sampled: SampledWordInversion

    READERS: ClassVar[Mapping[str, Reader]] = {
        "words": leaf(list_of(lambda x: isinstance(x, str)), "a list of words (strings)"),
        "greedy": nested(WordInversionCounts),
        "sampled": nested(SampledWordInversion),
    }
    WHAT: ClassVar[str] = "other-word count"


@dataclass(frozen=True)
class FlipExample(_SteeringRecord):
    """One prompt's next-token probabilities of the four verbs, unmodified and with the core
    flipped (:func:`~corelib.experiments.subject_verb_agreement_steering.flip_demo`).

    Attributes:
        prompt: the prompt.
        baseline: per verb (stripped of its space: ``is``, ``are``, ``was``, ``were``), its
            probability over the whole vocabulary, unmodified.
        flip: the same with the core flipped at its layer (last token only).
    """

    prompt: str
    baseline: dict[str, float]
    flip: dict[str, float]

    READERS: ClassVar[Mapping[str, Reader]] = {
        "prompt": leaf(lambda v: isinstance(v, str), "a prompt (a string)"),
        "baseline": leaf(by_name(is_share), "probabilities (numbers in [0, 1]) by verb"),
        "flip": leaf(by_name(is_share), "probabilities (numbers in [0, 1]) by verb"),
    }
    WHAT: ClassVar[str] = "flip example"


# --------------------------------------------------------------------------- the run


def _is_gate_name(name: str) -> bool:
    try:
        return 0.0 <= float(name) <= 1.0
    except ValueError:
        return False


@dataclass(frozen=True)
class SteeringRun(_SteeringRecord):
    """One model's steering run (:func:`~corelib.experiments.subject_verb_agreement_steering.steering_run`;
    stored as ``steering.json``).

    Attributes:
        gate: the gate threshold of the pairs below (a share of probability mass).
        greedy: per steering prompt, its greedy continuations unsteered and steered at ``gate``.
        control: the same for the control prompts.
        sampled: per steering prompt and seed, the sampled continuations unsteered and steered.
        gate_sweep: per gate threshold of the grid (as text, e.g. ``"0.3"``), the steered greedy
            continuations of the steering and the control prompts.
        inversion: the verb inversions of the greedy steered continuations at ``gate``.
        sampled_inversion: those of the sampled continuations, steered and unsteered.
        other_words: the inversions of other number-marked words.
        control_unchanged: the control continuations steering left unchanged (of ``n_control``).
        control_steered_steps: the steps of the control continuations the gate opened.
        n_control: the control prompts.
        flip_demo: the four verbs' probabilities of the demonstration prompts, with the core flipped.
    """

    gate: float
    greedy: tuple[GenerationPair, ...]
    control: tuple[GenerationPair, ...]
    sampled: tuple[SampledPair, ...]
    gate_sweep: dict[str, GateRun]
    inversion: InversionCounts
    sampled_inversion: SampledInversion
    other_words: OtherWords
    control_unchanged: int
    control_steered_steps: int
    n_control: int
    flip_demo: tuple[FlipExample, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {
        "gate": leaf(is_share, "a gate threshold, a number in [0, 1]"),
        "greedy": each(GenerationPair),
        "control": each(GenerationPair),
        "sampled": each(SampledPair),
        "gate_sweep": named(GateRun),
        "inversion": nested(InversionCounts),
        "sampled_inversion": nested(SampledInversion),
        "other_words": nested(OtherWords),
        "control_unchanged": _COUNT,
        "control_steered_steps": _COUNT,
        "n_control": _COUNT,
        "flip_demo": each(FlipExample),
    }
    WHAT: ClassVar[str] = "steering run"
    FORMAT: ClassVar[int] = STEERING_FORMAT

    def check(self, what: str, fix: str) -> None:
        """Refuse a gate sweep whose lists do not match the prompts or whose keys are not gate
        thresholds, and control counts that do not match the control pairs."""
        for gate, run in self.gate_sweep.items():
            check_value(what, "gate_sweep", gate, _is_gate_name, "keyed by gate thresholds in [0, 1]", fix=fix)
            same_lengths(
                what, {f"gate_sweep[{gate!r}].greedy": len(run.greedy)}, len(self.greedy), "steering prompt", fix
            )
            same_lengths(what, {f"gate_sweep[{gate!r}].control": len(run.control)}, len(self.control), "control", fix)
        n = len(self.control)
        check_value(what, "n_control", self.n_control, lambda x: x == n, f"the number of control pairs ({n})", fix=fix)
        check_value(what, "control_unchanged", self.control_unchanged, lambda x: x <= n, f"at most {n}", fix=fix)
