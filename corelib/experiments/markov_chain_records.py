"""The typed records of the Markov-chain chapter: one model's analysis, and what the results store
keeps of each model and each pair of models.

:func:`corelib.experiments.markov_chain.analyse_model` returns a :class:`MarkovModelAnalysis`
(arrays and the core itself; not stored). The run's ``summary.json`` holds one
:class:`MarkovModel` per model and one :class:`ModelPair` per pair, in the JSON form their
``to_json`` writes and ``from_json`` reads back. Reading refuses a key it does not know (naming
the field meant), a missing key and a value of the wrong type, naming the field. The form is
versioned: the summaries written so far are format 1 and carry no marker, so every stored file
keeps its bytes; a later format adds a ``"format"`` key and a reader here.

Every record also answers item access (``model["accuracy"]["full"]``) for code written against
the dicts these records once were.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .. import typed_records
from ..ace import Core
from ..operators import spectrum_distance
from ..typed_records import (
    ItemAccess,
    Spec,
    check_fields,
    check_value,
    is_complex_pairs,
    is_finite,
    is_finite_list,
    is_list,
    is_natural,
    is_object,
    is_rank,
    is_real,
    is_share,
    list_of,
)

__all__ = [
    "MARKOV_FORMAT",
    "Accuracies",
    "MarkovModel",
    "MarkovModelAnalysis",
    "ModelPair",
    "TrainingHistory",
    "check_format",
    "complex_from_json",
    "complex_to_json",
    "read_fields",
]

MARKOV_FORMAT = 1  # the JSON form of summary.json read and written here; format 1 has no "format" key

FIX = "run the chapter again (`markov_chain.run`) in a fresh results folder, or restore the file from git"

SHARE: Spec = (is_share, "a share, a finite number in [0, 1]")
REAL: Spec = (is_real, "a number")
REALS: Spec = (list_of(is_real), "a list of numbers")
RANK: Spec = (is_rank, "a rank, a whole number >= 1 (not a bool)")
COMPLEX: Spec = (is_complex_pairs, "a list of [real, imaginary] pairs of finite numbers")
OBJECT: Spec = (is_object, "a JSON object (dict)")
LIST: Spec = (is_list, "a list")


def read_fields(stored: object, what: str, specs: Mapping[str, Spec], optional: Sequence[str] = ()) -> None:
    """Refuse ``stored`` unless its keys are those of ``specs`` (``optional`` may be absent) and
    each value fits its spec (:func:`corelib.typed_records.check_fields`, with this chapter's fix)."""
    check_fields(stored, what, specs, optional, fix=FIX)


def check_format(stored: object, what: str) -> None:
    """Refuse a stored record of a format this version does not read (format 1 has no marker)."""
    typed_records.check_format(stored, what, MARKOV_FORMAT)


def complex_from_json(values: Iterable[Sequence[float]]) -> tuple[complex, ...]:
    """Complex numbers from their stored ``[re, im]`` pairs."""
    return tuple(complex(re_, im) for re_, im in values)


def complex_to_json(values: Iterable[complex]) -> list[list[float]]:
    """Complex numbers as ``[re, im]`` pairs of floats (JSON has no complex numbers)."""
    return [[float(v.real), float(v.imag)] for v in values]


@dataclass(frozen=True)
class Accuracies(ItemAccess):
    """Next-token accuracy on the test set, a share in [0, 1], every position counted.

    Attributes:
        full: the trained model as it is.
        keep: only the core kept at the block output (core-only).
        remove: the core projected out of the block output (core-removed).
    """

    full: float
    keep: float
    remove: float

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Accuracies:
        """The accuracies from their stored JSON (:meth:`to_json`)."""
        read_fields(stored, "model's accuracy", {f.name: SHARE for f in fields(cls)})
        return cls(**stored)

    def to_json(self) -> dict[str, float]:
        """``{"full": ..., "keep": ..., "remove": ...}``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainingHistory(ItemAccess):
    """The training curves, one value per epoch (each of length ``epochs``).

    Attributes:
        loss: the mean training loss, nats per token.
        train_acc: the accuracy on the training set, a share in [0, 1].
        test_acc: the accuracy on the test set, a share in [0, 1].
    """

    loss: tuple[float, ...]
    train_acc: tuple[float, ...]
    test_acc: tuple[float, ...]

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> TrainingHistory:
        """The curves from their stored JSON (:meth:`to_json`); refuses curves of unequal length."""
        read_fields(stored, "training history", {f.name: REALS for f in fields(cls)})
        check_value(
            "training history", "lengths", [len(v) for v in stored.values()],
            lambda n: len(set(n)) <= 1, "one length, an epoch each", fix=FIX,
        )  # fmt: skip
        return cls(**{k: tuple(v) for k, v in stored.items()})

    def to_json(self) -> dict[str, list[float]]:
        """Each curve as a list."""
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}


_MODEL_SPECS: dict[str, Spec] = {
    "seed": (is_natural, "a seed, a whole number >= 0"),
    "accuracy": OBJECT,
    "rank": RANK,
    "singular_values": (lambda v: is_finite_list(v) and all(x >= 0 for x in v), "a list of numbers >= 0"),
    "eigenvalues": COMPLEX,
    "spectrum_error": (lambda v: v is None or (is_finite(v) and v >= 0), "a distance (a number >= 0) or null"),
    "r2": REAL,
    "history": OBJECT,
}


@dataclass(frozen=True)
class MarkovModel(ItemAccess):
    """One trained model, analysed on the test set, as the summary stores it.

    Attributes:
        seed: the training seed.
        accuracy: full, core-only and core-removed accuracy.
        rank: the core's dimension (the ``energy`` share of the balanced spectrum).
        singular_values: the balanced singular values, largest first, shape (rank,).
        eigenvalues: the eigenvalues of the linear operator fitted in core coordinates,
            ``z_{t+1} = A z_t``, shape (rank,).
        spectrum_error: distance of ``eigenvalues`` to the chain's non-trivial eigenvalues
            (:func:`corelib.operators.spectrum_distance`); None when their numbers differ.
        r2: the operator's R² on the test coordinates (1: perfect; no lower bound).
        history: the training curves.
    """

    seed: int
    accuracy: Accuracies
    rank: int
    singular_values: tuple[float, ...]
    eigenvalues: tuple[complex, ...]
    spectrum_error: float | None
    r2: float
    history: TrainingHistory

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> MarkovModel:
        """The model from its stored JSON (:meth:`to_json`)."""
        read_fields(stored, "Markov model", _MODEL_SPECS)
        return cls(
            seed=stored["seed"],
            accuracy=Accuracies.from_json(stored["accuracy"]),
            rank=stored["rank"],
            singular_values=tuple(stored["singular_values"]),
            eigenvalues=complex_from_json(stored["eigenvalues"]),
            spectrum_error=stored["spectrum_error"],
            r2=stored["r2"],
            history=TrainingHistory.from_json(stored["history"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The stored form: plain JSON types, complex numbers as ``[re, im]``."""
        return {
            "seed": self.seed,
            "accuracy": self.accuracy.to_json(),
            "rank": self.rank,
            "singular_values": list(self.singular_values),
            "eigenvalues": complex_to_json(self.eigenvalues),
            "spectrum_error": self.spectrum_error,
            "r2": self.r2,
            "history": self.history.to_json(),
        }


_PAIR_SPECS: dict[str, Spec] = {
    "pair": (
        lambda v: isinstance(v, list) and len(v) == 2 and all(map(is_natural, v)) and v[0] < v[1],
        "two model indices, whole numbers >= 0, first < second",
    ),
    "weight_cosine": REAL,
    "weight_cosine_by_tensor": (
        lambda v: is_object(v) and all(map(is_real, v.values())),
        "a JSON object of numbers by tensor name",
    ),
    "overlap": REAL,
    "angles": REALS,
    "cca": REALS,
}


@dataclass(frozen=True)
class ModelPair(ItemAccess):
    """Two models compared (indices into :attr:`MarkovSummary.models`, first < second).

    Stored with the indices under the key ``"pair"``.

    Attributes:
        models: the two indices.
        weight_cosine: cosine of all weights as one vector, in [-1, 1].
        weight_cosine_by_tensor: the cosine per parameter tensor, by its name.
        overlap: projector overlap of the two cores, in [0, 1].
        angles: principal angles between the cores, in degrees, smallest first.
        cca: canonical correlations of the two models' core coordinates, largest first.
    """

    models: tuple[int, int]
    weight_cosine: float
    weight_cosine_by_tensor: dict[str, float]
    overlap: float
    angles: tuple[float, ...]
    cca: tuple[float, ...]

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ModelPair:
        """The pair from its stored JSON (:meth:`to_json`)."""
        read_fields(stored, "pair of Markov models", _PAIR_SPECS)
        return cls(
            models=tuple(stored["pair"]),
            weight_cosine=stored["weight_cosine"],
            weight_cosine_by_tensor=dict(stored["weight_cosine_by_tensor"]),
            overlap=stored["overlap"],
            angles=tuple(stored["angles"]),
            cca=tuple(stored["cca"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The stored form, the indices under ``"pair"``."""
        return {
            "pair": list(self.models),
            "weight_cosine": self.weight_cosine,
            "weight_cosine_by_tensor": dict(self.weight_cosine_by_tensor),
            "overlap": self.overlap,
            "angles": list(self.angles),
            "cca": list(self.cca),
        }


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class MarkovModelAnalysis(ItemAccess):
    """ACE, ablations and core dynamics of one trained model on the test set
    (:func:`corelib.experiments.markov_chain.analyse_model`); not stored as it is: the summary
    keeps :meth:`summarised`, the run folder the core's basis and the operator.

    N is the number of test positions (``n_test * (seq_len - 1)``), r the core's rank.

    Attributes:
        accuracy: full, core-only and core-removed next-token accuracy.
        core: the core extracted at the block output (target: the logits).
        coords: the test activations in core coordinates, shape (N, r), sequence by sequence.
        operator: the linear operator A of ``z_{t+1} = A z_t`` fitted to ``coords``, shape (r, r).
        eigenvalues: A's eigenvalues (complex), shape (r,).
        r2: the operator's R² on the test coordinates.
    """

    accuracy: Accuracies
    core: Core
    coords: np.ndarray
    operator: np.ndarray
    eigenvalues: np.ndarray
    r2: float

    def summarised(self, seed: int, history: TrainingHistory, chain_eigenvalues: np.ndarray) -> MarkovModel:
        """What the summary keeps of this analysis, with the model's seed and training curves;
        ``chain_eigenvalues`` are those the operator's are compared with."""
        eig = self.eigenvalues
        return MarkovModel(
            seed=seed,
            accuracy=self.accuracy,
            rank=self.core.rank,
            singular_values=tuple(self.core.singular_values.tolist()),
            eigenvalues=tuple(complex(v) for v in eig),
            spectrum_error=spectrum_distance(eig, chain_eigenvalues) if len(eig) == len(chain_eigenvalues) else None,
            r2=self.r2,
            history=history,
        )
