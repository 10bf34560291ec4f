"""The analysis records of the modular-addition runs: one :class:`ModularAnalysis` per model and
snapshot, one :class:`Snapshot` per analysed epoch of an arm.

:func:`corelib.experiments.modular_runs.analyse_arm` returns them; the store, the results folders
and ``recorded/`` keep them as JSON (``{"epoch": e, "models": [{"test_acc": ..., ...}]}``).
:meth:`Snapshot.to_json` writes exactly that form and :meth:`Snapshot.from_json` reads it back,
refusing a key it does not know (a misspelt field fails where the file is read, naming the
field meant, not deep in a figure) and a value of the wrong type or range, naming its field.
The form is versioned: the records written so far are format 1 and carry no marker, so every
stored file and record keeps its bytes; a later format adds a ``"format"`` key and a reader here.

For a transition, both records also answer item access (``snapshot["models"][0]["core_dim"]``),
so code written against the JSON form (a notebook, an exercise) keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ..typed_records import (
    ItemAccess,
    Spec,
    check_format,
    check_keys,
    check_value,
    is_complex_pairs,
    is_finite_list,
    is_list,
    is_natural,
    is_rank,
    is_real,
    is_share,
    list_of,
)

__all__ = ["SNAPSHOT_FORMAT", "ModularAnalysis", "Snapshot", "snapshots_from_json", "snapshots_to_json"]

SNAPSHOT_FORMAT = 1  # the JSON form read and written here; format 1 has no "format" key


# What to do about a damaged record: a missing key, then a value its field cannot hold.
_WRITE_AGAIN = "write it again (`modular_runs.analyse_arm`) or restore it from git"
_RESTORE = "restore it from git (or write it again with `modular_runs.analyse_arm`)"


def _operator(v: object) -> bool:
    return isinstance(v, list) and all(is_finite_list(row) and len(row) == len(v) for row in v)


# Each stored field: whether a value is one it can hold, and what that is (for the refusal).
_FIELDS: dict[str, Spec] = {
    "test_acc": (is_share, "an accuracy, a finite number in [0, 1]"),
    "energy_rank": (is_rank, "a rank, a whole number >= 1 (not a bool)"),
    "necessary_rank": (lambda v: v is None or is_rank(v), "a rank (a whole number >= 1) or null"),
    "sufficient_rank": (lambda v: v is None or is_rank(v), "a rank (a whole number >= 1) or null"),
    "core_dim": (is_rank, "a dimension, a whole number >= 1 (not a bool)"),
    "keep_acc": (is_share, "an accuracy, a finite number in [0, 1]"),
    "remove_acc": (is_share, "an accuracy, a finite number in [0, 1]"),
    # R² has no lower bound (-inf where the targets do not vary); held out, NaN where nothing was held out
    "r2": (lambda v: is_real(v) and v <= 1.0, "an R², a number <= 1"),
    "r2_heldout": (lambda v: is_real(v) and (math.isnan(v) or v <= 1.0), "an R², a number <= 1 or NaN"),
    "unit_fraction": (is_share, "a share of the eigenvalues, a finite number in [0, 1]"),
    "modes": (list_of(is_rank), "a list of frequencies, whole numbers >= 1"),
    "eigenvalues": (is_complex_pairs, "a list of [real, imaginary] pairs of finite numbers"),
    "singular_values": (
        lambda v: is_finite_list(v) and all(x >= 0 for x in v),
        "a list of finite numbers >= 0",
    ),
    "operator": (_operator, "a square matrix, a list of rows (lists) of finite numbers"),
}


def _tuples(value: Any) -> Any:
    """A JSON list (of lists) as tuples, so that a frozen record holds nothing mutable."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _lists(value: Any) -> Any:
    return [_lists(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class ModularAnalysis(ItemAccess):
    """One modular-addition model analysed at one snapshot (:func:`modular_runs.analyse_model`).

    Accuracies are shares of the test pairs answered right, in [0, 1], scored at the answer
    position; ranks are numbers of core directions (1 to d_model).

    Attributes:
        test_acc: the model's test accuracy, unmodified.
        energy_rank: the core's rank holding ``params.energy`` of its energy.
        necessary_rank: the smallest rank at or above the energy rank whose removal leaves
            accuracy at chance (None: no rank does).
        sufficient_rank: the smallest rank whose core alone restores the test accuracy (None: none does).
        core_dim: the core dimension: the necessary rank, or the energy rank where there is none.
        keep_acc: test accuracy with only the core (of ``core_dim`` directions) kept.
        remove_acc: test accuracy with the core removed.
        r2: the descriptive R² of the shift operator ``r_{c+1} = A r_c`` fitted to the answer
            classes' centroids in core coordinates.
        r2_heldout: its R² on held-out transitions (ridge fit); may be NaN.
        unit_fraction: the share of the operator's eigenvalues near the unit circle.
        modes: the occupied rotational frequency bins k (integers in 1 .. p // 2), ascending.
        eigenvalues: the operator's eigenvalues as (real, imaginary) pairs, shape (core_dim, 2).
        singular_values: the full-rank core's singular values, descending, shape (d_model,).
        operator: the fitted operator A, shape (core_dim, core_dim); None where a record leaves
            it out (``recorded/`` keeps it at the last snapshot only).
    """

    test_acc: float
    energy_rank: int
    necessary_rank: int | None
    sufficient_rank: int | None
    core_dim: int
    keep_acc: float
    remove_acc: float
    r2: float
    r2_heldout: float
    unit_fraction: float
    modes: tuple[int, ...]
    eigenvalues: tuple[tuple[float, float], ...]
    singular_values: tuple[float, ...]
    operator: tuple[tuple[float, ...], ...] | None = None

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ModularAnalysis:
        """The analysis from its stored JSON (:meth:`to_json`); refuses unknown or missing keys."""
        names = [f.name for f in fields(cls)]
        check_keys(stored, "model analysis", names[:-1], names[-1:], fix=_WRITE_AGAIN)
        for name, value in stored.items():
            check_value("model analysis", name, value, *_FIELDS[name], fix=_RESTORE)
        return cls(**{k: _tuples(v) for k, v in stored.items()})

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form: every field as JSON, ``operator`` left out where it is None."""
        out = {f.name: _lists(getattr(self, f.name)) for f in fields(self)}
        if self.operator is None:
            del out["operator"]
        return out

    def without_operator(self) -> ModularAnalysis:
        """This analysis without the fitted operator (large; most readers need only its numbers)."""
        return replace(self, operator=None)


@dataclass(frozen=True)
class Snapshot(ItemAccess):
    """The analysis of every model of an arm at one snapshot (:func:`modular_runs.analyse_arm`).

    Attributes:
        epoch: the snapshot's epoch (epochs completed).
        models: one :class:`ModularAnalysis` per model, in the order of the seeds.
    """

    epoch: int
    models: tuple[ModularAnalysis, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Snapshot:
        """The snapshot from its stored JSON, in any format this version reads (:data:`SNAPSHOT_FORMAT`)."""
        check_format(stored, "snapshot", SNAPSHOT_FORMAT)
        check_keys(stored, "snapshot", ("epoch", "models"), ("format",), fix=_WRITE_AGAIN)
        check_value("snapshot", "epoch", stored["epoch"], is_natural, "a whole number >= 0", fix=_RESTORE)
        check_value("snapshot", "models", stored["models"], is_list, "a list of analyses", fix=_RESTORE)
        return cls(epoch=stored["epoch"], models=tuple(ModularAnalysis.from_json(m) for m in stored["models"]))

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form, ``{"epoch": e, "models": [each model's JSON]}`` (format 1)."""
        return {"epoch": self.epoch, "models": [m.to_json() for m in self.models]}

    def without_operators(self) -> Snapshot:
        """This snapshot with every model's fitted operator left out."""
        return replace(self, models=tuple(m.without_operator() for m in self.models))


def snapshots_from_json(stored: Iterable[Mapping[str, Any] | Snapshot]) -> list[Snapshot]:
    """Snapshots from their JSON form (a snapshot already read passes through unchanged)."""
    return [s if isinstance(s, Snapshot) else Snapshot.from_json(s) for s in stored]


def snapshots_to_json(snapshots: Iterable[Snapshot | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The JSON form of snapshots (one already in JSON form is checked and kept as it is)."""
    return [s.to_json() if isinstance(s, Snapshot) else Snapshot.from_json(s).to_json() for s in snapshots]
