"""The typed records of the subject-verb agreement layer sweep (one language model).

:func:`~corelib.experiments.subject_verb_agreement_layers.layer_cores` returns
:class:`LayerCores` (a mapping layer -> core), :func:`intervened_margins` an
:class:`InterventionMargins`, and :func:`analyse_model` a :class:`LayerSweepAnalysis`, which the
results store keeps as ``analysis.json`` in the JSON form :meth:`LayerSweepAnalysis.to_json` writes
and :meth:`LayerSweepAnalysis.from_json` reads back. Reading refuses a key it does not know (naming
the field meant), a missing key, a value of the wrong type, and per-prompt or per-layer lists of
unequal lengths. The form is versioned: the analyses written so far are format 1 and carry no
marker, so every stored file keeps its bytes; a later format adds a ``"format"`` key and a reader.

Margins are in logits: the number margin ``(are + were) - (is + was)`` at the last token
(positive: the model prefers the plural verbs). AUCs are shares in [0, 1]. N is the number of
test prompts, D the model's width. Every record answers item access (``analysis["auc"]``) for
code written against the dicts these records once were.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..ace import Core
from ..typed_records import (
    ItemAccess,
    Spec,
    by_name,
    check_fields,
    check_format,
    check_keys,
    check_value,
    is_int,
    is_natural,
    is_object,
    is_rank,
    is_real,
    is_share,
    list_of,
)

__all__ = ["SWEEP_FORMAT", "InterventionMargins", "LayerCores", "LayerSweepAnalysis", "StoredCore"]

SWEEP_FORMAT = 1  # the JSON form of analysis.json read and written here; format 1 has no "format" key

_FIX = "delete the run folder's analysis.json to compute it again (`subject_verb_agreement.run`) or restore it"
_WHAT = "agreement analysis"


@dataclass(frozen=True, eq=False)  # cores hold arrays: compared by identity
class LayerCores(Mapping[int, Core]):
    """Rank-1 cores of the agreement margin, one per swept layer (:func:`layer_cores`); read as a
    mapping ``layer -> core`` (``cores[layer]``, ``cores.items()``).

    Attributes:
        layers: the swept layers (0-based), in the order asked for.
        cores: each layer's core: ``basis`` (D, 1), ``singular_values`` (D,) largest first,
            ``mean`` (D,) the training prompts' mean last-token residual after that layer.
    """

    layers: tuple[int, ...]
    cores: tuple[Core, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(int(layer) for layer in self.layers))
        object.__setattr__(self, "cores", tuple(self.cores))
        if len(self.layers) != len(self.cores) or len(set(self.layers)) != len(self.layers):
            raise ValueError(
                f"LayerCores needs one core per layer and each layer once; got layers {list(self.layers)} "
                f"and {len(self.cores)} cores: pass the layers without repeats, a core each."
            )

    def __getitem__(self, layer: int) -> Core:
        if layer not in self.layers:
            raise KeyError(f"no core at layer {layer!r}: the swept layers are {list(self.layers)}.")
        return self.cores[self.layers.index(layer)]

    def __iter__(self) -> Iterator[int]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class InterventionMargins(ItemAccess):
    """The test prompts' margins, clean and with cores intervened on (:func:`intervened_margins`),
    in the order of the prompts given.

    Item access also reads ``margins[(layer, mode)]`` (:attr:`intervened`), as the dict this
    record once was did.

    Attributes:
        baseline: each prompt's clean margin, shape (N,), float64.
        acts: by layer, each prompt's clean last-token residual after that layer, shape (N, D), float64.
        intervened: by ``(layer, mode)``, each prompt's margin with that layer's core intervened on
            in that mode (keep, remove or flip; centred on the core's mean, last token only), shape (N,).
    """

    baseline: np.ndarray
    acts: Mapping[int, np.ndarray]
    intervened: Mapping[tuple[int, str], np.ndarray]

    def __getitem__(self, key: str | tuple[int, str]) -> Any:
        if isinstance(key, tuple):
            if key not in self.intervened:
                raise KeyError(
                    f"no margins under {key!r}: the interventions run are {list(self.intervened)}; "
                    f"ask intervened_margins for that mode at that layer (modes_at)."
                )
            return self.intervened[key]
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        return key in self.intervened if isinstance(key, tuple) else super().__contains__(key)

    def merged(self, other: InterventionMargins) -> InterventionMargins:
        """These margins with ``other``'s activations and interventions (of the same prompts) added."""
        if len(other.baseline) != len(self.baseline):
            raise ValueError(
                f"cannot merge the margins of {len(other.baseline)} prompts into those of {len(self.baseline)}: "
                f"compute both for the same prompts."
            )
        return InterventionMargins(
            baseline=self.baseline,
            acts={**self.acts, **other.acts},
            intervened={**self.intervened, **other.intervened},
        )


_REALS: Spec = (list_of(is_real), "a list of numbers")
_SPECS: dict[str, Spec] = {
    "model": (lambda v: isinstance(v, str) and bool(v), "a model name"),
    "n_layers": (is_rank, "a whole number >= 1"),
    "d_model": (is_rank, "a whole number >= 1"),
    "n_params": (is_rank, "a whole number >= 1"),
    "layers": (list_of(is_natural), "a list of layers, whole numbers >= 0"),
    "depth": (list_of(lambda x: is_share(x) and x > 0), "a list of depths, numbers in (0, 1]"),
    "baseline_auc": (is_share, "an AUC, a number in [0, 1]"),
    "sweep_auc": (by_name(list_of(is_share)), "lists of AUCs (numbers in [0, 1]) by mode"),
    "spectral_gap_by_layer": _REALS,
    "chosen_layer": (is_natural, "a layer, a whole number >= 0"),
    "rank": (is_rank, "a rank, a whole number >= 1"),
    "spectral_gap": (is_real, "a number"),
    "singular_values": _REALS,
    "auc": (by_name(is_share), "AUCs (numbers in [0, 1]) by intervention"),
    "coords": _REALS,
    "margins": (by_name(list_of(is_real)), "lists of margins (numbers) by intervention"),
    "scores": (by_name(list_of(is_real)), "lists of scores (numbers) by intervention"),
    "wilcoxon_p": (by_name(is_real), "p-values (numbers) by mode"),
    "plural": (list_of(lambda x: is_int(x) and x in (0, 1)), "a list of 0 (singular) and 1 (plural)"),
    "core": (is_object, "a JSON object (dict) of the core's basis, mean and singular values"),
}


def _check_lengths(stored: Mapping[str, Any]) -> None:
    """Refuse per-layer or per-prompt lists of unequal lengths, and a chosen layer not swept."""
    n_layers = len(stored["layers"])
    per_layer = {
        "depth": len(stored["depth"]),
        "spectral_gap_by_layer": len(stored["spectral_gap_by_layer"]),
        **{f"sweep_auc[{k!r}]": len(v) for k, v in stored["sweep_auc"].items()},
    }
    n_prompts = len(stored["plural"])
    per_prompt = {
        "coords": len(stored["coords"]),
        **{f"{name}[{k!r}]": len(v) for name in ("margins", "scores") for k, v in stored[name].items()},
    }
    for name, n in per_layer.items():
        check_value(_WHAT, name, n, lambda x: x == n_layers, f"one value per swept layer ({n_layers})", fix=_FIX)
    for name, n in per_prompt.items():
        check_value(_WHAT, name, n, lambda x: x == n_prompts, f"one value per test prompt ({n_prompts})", fix=_FIX)
    layers = stored["layers"]
    check_value(_WHAT, "chosen_layer", stored["chosen_layer"], lambda x: x in layers, f"one of {layers}", fix=_FIX)


def _tuples(value: Any) -> Any:
    """A JSON list as a tuple and a JSON object's lists as tuples, so the record holds no list."""
    if isinstance(value, Mapping):
        return {k: _tuples(v) for k, v in value.items()}
    return tuple(value) if isinstance(value, list) else value


def _lists(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _lists(v) for k, v in value.items()}
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class StoredCore(ItemAccess):
    """The chosen layer's rank-1 core as the analysis stores it.

    Attributes:
        basis: the core's direction, shape (D,), unit length, signed to rise with the margin.
        mean: the training prompts' mean last-token residual at the layer, shape (D,).
        singular_values: the balanced singular values, shape (D,), largest first.
    """

    basis: tuple[float, ...]
    mean: tuple[float, ...]
    singular_values: tuple[float, ...]

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> StoredCore:
        """The core from its stored JSON (:meth:`to_json`)."""
        names = [f.name for f in fields(cls)]
        check_keys(stored, f"{_WHAT}'s core", names, fix=_FIX)
        for name in names:
            check_value(f"{_WHAT}'s core", name, stored[name], *_REALS, fix=_FIX)
        check_value(
            f"{_WHAT}'s core", "mean", stored["mean"], lambda m: len(m) == len(stored["basis"]),
            f"of the basis's length ({len(stored['basis'])})", fix=_FIX,
        )  # fmt: skip
        return cls(**{k: tuple(v) for k, v in stored.items()})

    def to_json(self) -> dict[str, list[float]]:
        """``{"basis": [...], "mean": [...], "singular_values": [...]}``."""
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}

    def core(self) -> Core:
        """The rank-1 :class:`~corelib.ace.Core` (basis (D, 1)), to intervene with."""
        return Core(np.asarray(self.basis)[:, None], np.asarray(self.singular_values), np.asarray(self.mean))


@dataclass(frozen=True)
class LayerSweepAnalysis(ItemAccess):
    """One language model's layer sweep and the chosen layer's interventions on the test prompts
    (:func:`analyse_model`; stored as ``analysis.json``).

    Attributes:
        model: the model's name; ``n_layers``, ``d_model``: its depth and width; ``n_params``:
            its number of parameters.
        layers: the swept layers (0-based).
        depth: each swept layer as a share of the depth, ``(layer + 1) / n_layers``.
        baseline_auc: the AUC of the clean margin for the number (plural: positive).
        sweep_auc: per sweep mode, the margin's AUC with each swept layer's core intervened on.
        spectral_gap_by_layer: per swept layer, the core's spectral gap ``(s1 / s2)^2``.
        chosen_layer: the layer whose flip moves the AUC most (0-based); ``rank``: its core's rank.
        spectral_gap: the chosen core's spectral gap; ``singular_values``: its first 10 (at most).
        auc: the margin's AUC clean (``baseline``) and per mode (keep, remove, flip) at the chosen layer.
        coords: per test prompt, the core coordinate, signed to rise with the margin, shape (N,).
        margins: per intervention (``baseline`` and each mode), each prompt's margin, shape (N,).
        scores: the same, each margin signed by the prompt's number (positive: agrees), shape (N,).
        wilcoxon_p: per mode (remove, flip), the p-value of the paired Wilcoxon test of the
            scores against the baseline's.
        plural: per test prompt, its number (1: plural, 0: singular), shape (N,).
        core: the chosen layer's core.
    """

    model: str
    n_layers: int
    d_model: int
    n_params: int
    layers: tuple[int, ...]
    depth: tuple[float, ...]
    baseline_auc: float
    sweep_auc: dict[str, tuple[float, ...]]
    spectral_gap_by_layer: tuple[float, ...]
    chosen_layer: int
    rank: int
    spectral_gap: float
    singular_values: tuple[float, ...]
    auc: dict[str, float]
    coords: tuple[float, ...]
    margins: dict[str, tuple[float, ...]]
    scores: dict[str, tuple[float, ...]]
    wilcoxon_p: dict[str, float]
    plural: tuple[int, ...]
    core: StoredCore

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> LayerSweepAnalysis:
        """The analysis from its stored JSON, in any format this version reads (:data:`SWEEP_FORMAT`);
        refuses unknown or missing keys, values of the wrong type and lists of unequal lengths."""
        check_format(stored, _WHAT, SWEEP_FORMAT)
        check_fields(stored, _WHAT, _SPECS, ("format",), fix=_FIX)  # the format: checked above
        _check_lengths(stored)
        values = {k: _tuples(v) for k, v in stored.items() if k not in ("core", "format")}
        return cls(**values, core=StoredCore.from_json(stored["core"]))

    def to_json(self) -> dict[str, Any]:
        """The stored form (format 1): every field as JSON, the core as its JSON object."""
        out = {f.name: _lists(getattr(self, f.name)) for f in fields(self) if f.name != "core"}
        return {**out, "core": self.core.to_json()}
