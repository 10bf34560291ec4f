"""The typed records of the chapter "ACE on your own model".

:func:`~corelib.experiments.own_model.tense_analysis` returns a :class:`TenseAnalysis` (stored as
``tense.json``) and :func:`~corelib.experiments.own_model_directions.agreement_analysis` an
:class:`AgreementAnalysis` (stored as ``directions.json``), in the JSON forms their ``to_json``
write and ``from_json`` read back. Their parts: :class:`RunInfo` (the model and the data, whose
fields both records carry), :class:`LayerSweep` (:func:`layer_sweep`), :class:`DirectionMeasures`
(:func:`evaluate_direction`), :class:`ProbeGridRow` and the tense examples
(:class:`~corelib.experiments.subject_verb_agreement_steering_records.FlipExample`). Reading
refuses a key it does not know (naming the field meant), a missing key, a value of the wrong type
and per-prompt or per-layer lists of unequal lengths. The forms are versioned: the records written
so far are format 1 and carry no marker, so every stored file keeps its bytes.

Margins are in logits (tense: ``(was + were) - (is + are)``; agreement: ``(are + were) - (is +
was)``, at the last token). AUCs, accuracies, R² and energy shares are shares in [0, 1]; angles are
in degrees, 0 to 90; layers are 0-based. Every record answers item access (``analysis["auc"]``) for
code written against the dicts these records once were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..typed_records import (
    Reader,
    StoredRecord,
    by_name,
    check_value,
    each,
    is_finite,
    is_natural,
    is_rank,
    is_real,
    is_share,
    leaf,
    list_of,
    named,
    nested,
    same_lengths,
)
from .subject_verb_agreement_steering_records import FlipExample

__all__ = [
    "OWN_MODEL_FORMAT",
    "AgreementAnalysis",
    "DirectionMeasures",
    "FlipExample",
    "LayerSweep",
    "ProbeGridRow",
    "RunInfo",
    "TenseAnalysis",
]

OWN_MODEL_FORMAT = 1  # the JSON form of tense.json and directions.json; format 1 has no "format" key

_TENSE_FIX = "delete the run folder's tense.json to compute it again (`own_model.run`) or restore it"
_DIRECTIONS_FIX = "delete the run folder's directions.json to compute it again (`own_model.run`) or restore it"

_AUC = leaf(is_share, "an AUC, a number in [0, 1]")
_AUCS = leaf(list_of(is_share), "a list of AUCs (numbers in [0, 1])")
_REALS = leaf(list_of(is_real), "a list of numbers")
_R2 = leaf(lambda v: is_finite(v) and -1e-9 <= v <= 1 + 1e-9, "an R², a number in [0, 1]")
_ANGLE = leaf(lambda v: is_finite(v) and 0.0 <= v <= 90.0, "an angle in degrees, 0 to 90")
_LABELS = leaf(list_of(lambda x: x in (0, 1) and not isinstance(x, bool)), "a list of labels, 0 and 1")
_GAP = leaf(is_real, "a spectral gap, a number")
_INFO: dict[str, Reader] = {
    "model": leaf(lambda v: isinstance(v, str) and bool(v), "a model name"),
    "n_layers": leaf(is_rank, "a whole number >= 1"),
    "d_model": leaf(is_rank, "a whole number >= 1"),
    "n_train": leaf(is_rank, "a whole number >= 1"),
    "n_test": leaf(is_rank, "a whole number >= 1"),
    "layers": leaf(list_of(is_natural), "a list of layers, whole numbers >= 0"),
}


@dataclass(frozen=True)
class RunInfo(StoredRecord):
    """What an analysis says about its model and data
    (:func:`~corelib.experiments.own_model_directions.run_info`).

    Attributes:
        model: the model's name; ``n_layers``, ``d_model``: its depth and width.
        n_train: the prompts the cores and directions are fitted on; ``n_test``: those they are tested on.
        layers: the swept layers (0-based).
    """

    model: str
    n_layers: int
    d_model: int
    n_train: int
    n_test: int
    layers: tuple[int, ...]

    READERS: ClassVar[Mapping[str, Reader]] = _INFO
    WHAT: ClassVar[str] = "run info"

    def as_fields(self) -> dict[str, Any]:
        """The fields by name, to build an analysis that carries them."""
        return {name: getattr(self, name) for name in self.keys()}


@dataclass(frozen=True)
class TenseAnalysis(StoredRecord):
    """The tense core of one model (:func:`~corelib.experiments.own_model.tense_analysis`; stored
    as ``tense.json``). N is the number of test prompts.

    Attributes:
        model, n_layers, d_model, n_train, n_test, layers: as in :class:`RunInfo`.
        baseline_auc: the AUC of the clean margin for the tense (past: positive) on the test prompts.
        sweep_auc: per mode (keep, remove, flip), the margin's AUC with each swept layer's core intervened on.
        spectral_gap_by_layer: per swept layer, the core's spectral gap ``(s1 / s2)^2``.
        chosen_layer: the layer whose core the chapter keeps (0-based).
        singular_values: its first 20 (at most) balanced singular values, largest first.
        energy_share: the first direction's share of the energy, ``s1^2 / sum(s^2)``.
        spectral_gap: its spectral gap.
        auc: the margin's AUC unmodified (``baseline``) and per mode at the chosen layer.
        coords: per test prompt, the core coordinate, oriented towards past, shape (N,).
        margins: per test prompt, the clean margin (logits), shape (N,).
        past: per test prompt, the tense (1: past, 0: present), shape (N,).
        core_folder: where the core is saved, relative to the results root.
        core_metadata: the saved core's metadata (:attr:`corelib.ace.Core.metadata`), as stored.
        examples: a few test prompts' verb probabilities with the core flipped.
    """

    model: str
    n_layers: int
    d_model: int
    n_train: int
    n_test: int
    layers: tuple[int, ...]
    baseline_auc: float
    sweep_auc: dict[str, tuple[float, ...]]
    spectral_gap_by_layer: tuple[float, ...]
    chosen_layer: int
    singular_values: tuple[float, ...]
    energy_share: float
    spectral_gap: float
    auc: dict[str, float]
    coords: tuple[float, ...]
    margins: tuple[float, ...]
    past: tuple[int, ...]
    core_folder: str
    core_metadata: dict[str, Any]
    examples: tuple[FlipExample, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {
        **_INFO,
        "baseline_auc": _AUC,
        "sweep_auc": leaf(by_name(list_of(is_share)), "lists of AUCs (numbers in [0, 1]) by mode"),
        "spectral_gap_by_layer": _REALS,
        "chosen_layer": leaf(is_natural, "a layer, a whole number >= 0"),
        "singular_values": _REALS,
        "energy_share": leaf(is_share, "a share, a number in [0, 1]"),
        "spectral_gap": _GAP,
        "auc": leaf(by_name(is_share), "AUCs (numbers in [0, 1]) by intervention"),
        "coords": _REALS,
        "margins": _REALS,
        "past": _LABELS,
        "core_folder": leaf(lambda v: isinstance(v, str) and bool(v), "a folder (a string)"),
        "core_metadata": leaf(lambda v: isinstance(v, Mapping), "a JSON object (dict)", as_stored=True),
        "examples": each(FlipExample),
    }
    WHAT: ClassVar[str] = "tense analysis"
    FIX: ClassVar[str] = _TENSE_FIX
    FORMAT: ClassVar[int] = OWN_MODEL_FORMAT

    def check(self, what: str, fix: str) -> None:
        """Refuse per-layer and per-prompt lists of unequal lengths and a chosen layer not swept."""
        per_layer = {"spectral_gap_by_layer": len(self.spectral_gap_by_layer)}
        per_layer |= {f"sweep_auc[{k!r}]": len(v) for k, v in self.sweep_auc.items()}
        same_lengths(what, per_layer, len(self.layers), "swept layer", fix)
        per_prompt = {name: len(getattr(self, name)) for name in ("coords", "margins", "past")}
        same_lengths(what, per_prompt, self.n_test, "test prompt", fix)
        _check_layer(what, "chosen_layer", self.chosen_layer, self.layers, fix)


class _DirectionsRecord(StoredRecord):
    """The agreement analysis and its parts: their file is the run folder's ``directions.json``."""

    __slots__ = ()
    FIX: ClassVar[str] = _DIRECTIONS_FIX


def _check_layer(what: str, name: str, layer: int, layers: tuple[int, ...], fix: str) -> None:
    check_value(what, name, layer, lambda x: x in layers, f"one of the swept layers {list(layers)}", fix=fix)


@dataclass(frozen=True)
class LayerSweep(_DirectionsRecord):
    """The agreement margin's AUC at every swept layer
    (:func:`~corelib.experiments.own_model_directions.layer_sweep`), one entry per layer.

    Attributes:
        baseline: the clean margin's AUC for the number (plural: positive).
        ace_remove, ace_flip: the margin's AUC with the layer's ACE core removed and flipped.
        probe_read: the AUC of the projection on the layer's probe direction for the number.
        probe_remove, probe_flip: the margin's AUC with the probe's direction removed and flipped.
        probe_angle: the angle between the probe's direction and the ACE core's, in degrees.
    """

    baseline: float
    ace_remove: tuple[float, ...]
    ace_flip: tuple[float, ...]
    probe_read: tuple[float, ...]
    probe_remove: tuple[float, ...]
    probe_flip: tuple[float, ...]
    probe_angle: tuple[float, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {
        "baseline": _AUC,
        **{name: _AUCS for name in ("ace_remove", "ace_flip", "probe_read", "probe_remove", "probe_flip")},
        "probe_angle": leaf(list_of(lambda v: is_finite(v) and 0.0 <= v <= 90.0), "a list of angles, 0 to 90"),
    }
    WHAT: ClassVar[str] = "layer sweep"

    def check(self, what: str, fix: str) -> None:
        """Refuse lists of unequal lengths (one entry per swept layer)."""
        lengths = {name: len(getattr(self, name)) for name in list(self.READERS)[2:]}
        same_lengths(what, lengths, len(self.ace_remove), "swept layer", fix)


@dataclass(frozen=True)
class DirectionMeasures(_DirectionsRecord):
    """One direction at the chosen layer, on the held-out prompts
    (:func:`~corelib.experiments.own_model_directions.evaluate_direction`). N is the number of
    test prompts.

    Attributes:
        read_auc: the AUC of the projection on the direction for the label.
        r2: the R² of the clean margin on the projection.
        keep, remove, flip: the margin's AUC with the direction kept, removed and flipped
            (None for a mode not asked for; every stored direction has all three).
        coords: per test prompt, the projection on the direction (centred), shape (N,).
        baseline: per test prompt, the clean margin (logits), shape (N,).
        angle_to_ace: the angle to the ACE core's direction, in degrees (None when not asked for).
    """

    read_auc: float
    r2: float
    keep: float | None
    remove: float | None
    flip: float | None
    coords: tuple[float, ...]
    baseline: tuple[float, ...]
    angle_to_ace: float | None

    READERS: ClassVar[Mapping[str, Reader]] = {
        "read_auc": _AUC,
        "r2": _R2,
        "keep": _AUC,
        "remove": _AUC,
        "flip": _AUC,
        "coords": _REALS,
        "baseline": _REALS,
        "angle_to_ace": _ANGLE,
    }
    WHAT: ClassVar[str] = "direction's measures"

    def check(self, what: str, fix: str) -> None:
        """Refuse a projection and margins of unequal lengths."""
        same_lengths(what, {"coords": len(self.coords)}, len(self.baseline), "test prompt", fix)


@dataclass(frozen=True)
class ProbeGridRow(_DirectionsRecord):
    """The probe at one L2 penalty of the grid.

    Attributes:
        l2: the penalty (features scaled to unit RMS).
        angle_to_ace, angle_to_mean_difference: its angles to the ACE core and to the mean
            difference, in degrees.
        read_auc: the AUC of the projection on it for the label; ``r2``: the margin's R² on it.
        remove, flip: the margin's AUC with it removed and flipped.
    """

    l2: float
    angle_to_ace: float
    angle_to_mean_difference: float
    read_auc: float
    r2: float
    remove: float
    flip: float

    READERS: ClassVar[Mapping[str, Reader]] = {
        "l2": leaf(lambda v: is_finite(v) and v > 0, "a penalty, a number > 0"),
        "angle_to_ace": _ANGLE,
        "angle_to_mean_difference": _ANGLE,
        "read_auc": _AUC,
        "r2": _R2,
        "remove": _AUC,
        "flip": _AUC,
    }
    WHAT: ClassVar[str] = "probe grid row"


@dataclass(frozen=True)
class AgreementAnalysis(_DirectionsRecord):
    """One model on the agreement task (:func:`~corelib.experiments.own_model_directions.agreement_analysis`;
    stored as ``directions.json``). N is the number of test prompts.

    Attributes:
        model, n_layers, d_model, n_train, n_test, layers: as in :class:`RunInfo`.
        sweep: the layer sweep.
        spectral_gap_by_layer: per swept layer, the ACE core's spectral gap ``(s1 / s2)^2``.
        layer: the chosen layer (0-based); ``layer_chosen``: False where the parameters fixed it.
        baseline_auc: the clean margin's AUC for the number (plural: positive).
        spectral_gap: the core's spectral gap at the chosen layer.
        directions: per direction of :data:`corelib.experiments.own_model.DIRECTIONS`, its measures.
        probe_accuracy: the probe's accuracy on the test prompts; ``probe_iterations``: its Newton steps.
        probe_grid: one row per L2 penalty of the grid, in the grid's order.
        plural: per test prompt, the label (1: plural, 0: singular), shape (N,).
    """

    model: str
    n_layers: int
    d_model: int
    n_train: int
    n_test: int
    layers: tuple[int, ...]
    sweep: LayerSweep
    spectral_gap_by_layer: tuple[float, ...]
    layer: int
    layer_chosen: bool
    baseline_auc: float
    spectral_gap: float
    directions: dict[str, DirectionMeasures]
    probe_accuracy: float
    probe_iterations: int
    probe_grid: tuple[ProbeGridRow, ...]
    plural: tuple[int, ...]

    READERS: ClassVar[Mapping[str, Reader]] = {
        **_INFO,
        "sweep": nested(LayerSweep),
        "spectral_gap_by_layer": _REALS,
        "layer": leaf(is_natural, "a layer, a whole number >= 0"),
        "layer_chosen": leaf(lambda v: isinstance(v, bool), "true or false"),
        "baseline_auc": _AUC,
        "spectral_gap": _GAP,
        "directions": named(DirectionMeasures),
        "probe_accuracy": leaf(is_share, "an accuracy, a number in [0, 1]"),
        "probe_iterations": leaf(is_natural, "a number of steps, a whole number >= 0"),
        "probe_grid": each(ProbeGridRow),
        "plural": _LABELS,
    }
    WHAT: ClassVar[str] = "agreement analysis"
    FORMAT: ClassVar[int] = OWN_MODEL_FORMAT

    def check(self, what: str, fix: str) -> None:
        """Refuse per-layer and per-prompt lists of unequal lengths and a chosen layer not swept."""
        per_layer = {
            "spectral_gap_by_layer": len(self.spectral_gap_by_layer),
            "sweep.ace_remove": len(self.sweep.ace_remove),
        }
        same_lengths(what, per_layer, len(self.layers), "swept layer", fix)
        per_prompt = {"plural": len(self.plural)}
        per_prompt |= {f"directions[{k!r}].coords": len(d.coords) for k, d in self.directions.items()}
        same_lengths(what, per_prompt, self.n_test, "test prompt", fix)
        _check_layer(what, "layer", self.layer, self.layers, fix)
