"""The records of the clock of core inflation and of its window: what the runs give, typed.

:func:`corelib.experiments.inflation_clock_pairs.run_clock` returns one :class:`ClockRun` per
(lr, wd) pair, :func:`~corelib.experiments.inflation_clock_pairs.curves` one :class:`Curve` per
run, :func:`corelib.experiments.inflation_clock_arms.run_window` a :class:`Window` of
:class:`WindowArmRun` arms, and :func:`~corelib.experiments.inflation_clock_arms.window_curves`
one :class:`WindowCurve` per arm. Times are epochs (completed) or the rescaled time
``tau = lr * wd * optimizer steps``; accuracies are shares in [0, 1].

A record keeps the runs and the window as JSON (``recorded/inflation_clock_*/runs.json`` and
``window.json``, the window chapter's ``clock_window/window.json``): ``to_json`` writes exactly the
form those files have, and ``from_json`` reads it back, refusing a key it does not know (naming
the field meant) or a value of the wrong kind (naming its field), so a damaged file fails where it
is read. The form is versioned like :mod:`corelib.experiments.modular_records`: the files written so
far are format 1 and carry no marker, so every stored file keeps its bytes.

Every record also answers item access (``window["arms"]["kept"]["records"]``), so code written
when these were dicts keeps working; new code reads attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..typed_records import (
    Fits,
    ItemAccess,
    check_format,
    check_keys,
    check_value,
    is_finite,
    is_list,
    is_natural,
    is_object,
    is_rank,
    nearest_name,
)
from .modular_records import Snapshot, snapshots_from_json, snapshots_to_json

if TYPE_CHECKING:
    from .modular_runs import ModularParams

__all__ = [
    "RECORDS_FORMAT",
    "WINDOW_ARMS",
    "HISTORY_KEYS",
    "ClockRun",
    "Curve",
    "WindowArmRun",
    "Window",
    "WindowCurve",
    "as_clock_run",
    "as_clock_runs",
    "as_window",
    "clock_runs_from_json",
    "clock_runs_to_json",
]

RECORDS_FORMAT = 1  # the JSON form read and written here; format 1 has no "format" key

# "restarted" keeps the decay but branches like the others (a fresh AdamW): the control that
# separates what the decay does from what restarting the optimizer does.
WINDOW_ARMS = ("kept", "restarted", "removed", "anneal_short", "anneal_long", "removed_late")
"""The window's arms, in the order the tables show them."""

HISTORY_KEYS = ("epoch", "loss", "train_acc", "test_acc")
"""The keys of a training history (:func:`corelib.experiments.modular_runs.history`)."""

# What to do about a damaged file: a record is in git; a results folder's file is written by its chapter.
_FIX = "restore it from git (`git checkout -- recorded/`), or write it again (`python -m acebook.record export`)"


def _refuse_keys(stored: object, what: str, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    # every refusal of a file here names the one fix: git, or the export again
    check_keys(stored, what, required, optional, fix=_FIX, type_fix=_FIX, unknown_fix=f"The record is damaged: {_FIX}")


def _refuse_value(what: str, name: str, value: object, fits: Fits, expected: str) -> None:
    check_value(what, name, value, fits, expected, fix=_FIX)


def _rate(v: object) -> bool:
    return is_finite(v) and v > 0


def _names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


@dataclass(frozen=True)
class ClockRun(ItemAccess):
    """One run of the clock (:func:`~corelib.experiments.inflation_clock_pairs.run_clock`).

    Attributes:
        lr: its learning rate.
        wd: its weight decay (AdamW's, per unit of lr).
        steps: optimizer steps per epoch (the training set in batches, the last one partial).
        records: its snapshot analyses, one :class:`~corelib.experiments.modular_records.Snapshot`
            per analysed epoch, in order of epoch (a record keeps them without the fitted operators).
    """

    lr: float
    wd: float
    steps: int
    records: list[Snapshot]

    @property
    def tau_per_epoch(self) -> float:
        """The rescaled time one epoch of this run adds: ``lr * wd * steps``."""
        return self.lr * self.wd * self.steps

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ClockRun:
        """The run from its stored JSON (:meth:`to_json`); refuses unknown, missing or impossible values."""
        check_format(stored, "clock run", RECORDS_FORMAT)
        _refuse_keys(stored, "clock run", ("lr", "wd", "steps", "records"), ("format",))
        for name in ("lr", "wd"):
            _refuse_value("clock run", name, stored[name], _rate, "a finite number > 0")
        _refuse_value("clock run", "steps", stored["steps"], is_rank, "a whole number >= 1")
        _refuse_value("clock run", "records", stored["records"], is_list, "a list of snapshots")
        return cls(stored["lr"], stored["wd"], stored["steps"], snapshots_from_json(stored["records"]))

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form, ``{"lr", "wd", "steps", "records": [each snapshot's JSON]}`` (format 1)."""
        return {"lr": self.lr, "wd": self.wd, "steps": self.steps, "records": snapshots_to_json(self.records)}

    def without_operators(self) -> ClockRun:
        """This run with every snapshot's fitted operators left out (what a record keeps)."""
        return replace(self, records=[s.without_operators() for s in snapshots_from_json(self.records)])


def clock_runs_from_json(stored: Mapping[str, Any]) -> dict[str, ClockRun]:
    """The runs of a stored ``runs.json`` (``{label: run}``), each read by :meth:`ClockRun.from_json`."""
    _refuse_value("set of clock runs", "runs", stored, is_object, "a JSON object of runs")
    return {label: ClockRun.from_json(run) for label, run in stored.items()}


def clock_runs_to_json(runs: Mapping[str, ClockRun]) -> dict[str, dict[str, Any]]:
    """The stored JSON form of runs by label (``runs.json``)."""
    return {label: as_clock_run(run).to_json() for label, run in runs.items()}


def as_clock_run(run: ClockRun | Mapping[str, Any]) -> ClockRun:
    """``run`` as a :class:`ClockRun`: one already typed as it is; one in its JSON form (a dict, as
    code written before the records were typed makes them) with its keys checked and its values,
    the snapshot records included, taken as they are."""
    if isinstance(run, ClockRun):
        return run
    _refuse_keys(run, "clock run", ("lr", "wd", "steps", "records"))
    return ClockRun(run["lr"], run["wd"], run["steps"], list(run["records"]))


def as_clock_runs(runs: Mapping[str, ClockRun | Mapping[str, Any]]) -> dict[str, ClockRun]:
    """:func:`as_clock_run` of every run, by label."""
    return {label: as_clock_run(run) for label, run in runs.items()}


class _Arrays:
    """Equality of a record holding arrays: field by field, arrays element by element with NaN
    equal to NaN (a seed without a core is NaN in every build), so two builds' curves compare."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, n), getattr(other, n)) for n in _names(type(self)))

    __hash__ = None  # type: ignore[assignment]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return a == b


@dataclass(frozen=True, eq=False)
class Curve(_Arrays, ItemAccess):
    """One run of the clock on both time axes, for one metric
    (:func:`~corelib.experiments.inflation_clock_pairs.curves`).

    Attributes:
        epochs: the epochs of its snapshots, shape (snapshots,), integers.
        tau: the rescaled time there, ``lr * wd * steps * epochs``, shape (snapshots,).
        values: the metric per snapshot and seed, shape (snapshots, seeds); NaN where a seed has
            no value (no rank found).
        mean: its seed mean per snapshot, shape (snapshots,) (NaN where no seed has a value).
        sem: the standard error of that mean, shape (snapshots,) (NaN with fewer than two seeds).
        grok: the first snapshot's epoch at which every model reaches the grokking threshold;
            None if none does.
    """

    epochs: np.ndarray
    tau: np.ndarray
    values: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    grok: int | None


@dataclass(frozen=True)
class WindowArmRun(ItemAccess):
    """One arm of the window as trained and analysed (:func:`~corelib.experiments.inflation_clock_arms.run_window`).

    Attributes:
        params: its modular-addition settings; None where it was read from a record (which does
            not keep them: the window's settings give them again, ``inflation_clock_arms.window_arms``).
        branch: the epoch it branched from the kept run; None for the kept run itself.
        records: its snapshot analyses (:class:`~corelib.experiments.modular_records.Snapshot`),
            in order of epoch; the kept run's from epoch 0, a branched arm's from its branch.
        history: its training history, ``{"epoch": [e, ...], "loss" / "train_acc": [[per seed], ...],
            "test_acc": [[per seed] or None, ...]}`` (one row per epoch; :data:`HISTORY_KEYS`), as
            :func:`corelib.experiments.modular_runs.history` gives it; None where a record keeps it
            apart (the window on the paper's clock keeps its histories as tensors).
    """

    params: ModularParams | None
    branch: int | None
    records: list[Snapshot]
    history: dict[str, list] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form: ``branch``, ``records`` and ``history`` (left out where None);
        the settings are not stored."""
        out = {"branch": self.branch, "records": snapshots_to_json(self.records), "history": self.history}
        if self.history is None:
            del out["history"]
        return out


def _history(v: object) -> bool:
    return isinstance(v, Mapping) and set(v) == set(HISTORY_KEYS) and all(isinstance(x, list) for x in v.values())


def _arm_from_json(name: str, stored: object, checked: bool) -> WindowArmRun:
    what = f"window arm ({name})"
    _refuse_keys(stored, what, ("branch", "records"), ("history",))
    if not checked:
        return WindowArmRun(None, stored["branch"], list(stored["records"]), stored.get("history"))
    branch = stored["branch"]
    _refuse_value(
        what, "branch", branch, lambda v: v is None or is_natural(v), "an epoch (a whole number >= 0) or null"
    )
    _refuse_value(what, "records", stored["records"], is_list, "a list of snapshots")
    history = stored.get("history")
    _refuse_value(
        what, "history", history, lambda v: v is None or _history(v), f"a training history (lists under {HISTORY_KEYS})"
    )
    return WindowArmRun(None, stored["branch"], snapshots_from_json(stored["records"]), history)


@dataclass(frozen=True)
class Window(ItemAccess):
    """The window's arms (:func:`~corelib.experiments.inflation_clock_arms.run_window`).

    Attributes:
        grok_epoch: the epoch the arms branch at (the kept run's grokking snapshot, or the snapshot
            nearest ``window_branch``).
        lr: the learning rate of the window's clock.
        wd: its weight decay (before an arm removes or anneals it).
        arms: per arm name (:data:`WINDOW_ARMS`), its :class:`WindowArmRun`.
    """

    grok_epoch: int
    lr: float
    wd: float
    arms: dict[str, WindowArmRun]

    @classmethod
    def from_json(cls, stored: Mapping[str, Any], *, checked: bool = True) -> Window:
        """The window from its stored JSON (:meth:`to_json`). Unknown or missing keys are refused,
        an arm not of :data:`WINDOW_ARMS` too, each naming the key meant; with ``checked`` (a file),
        every value and snapshot record is checked as well; without it (a window a program made in
        the JSON form), the values are taken as they are."""
        check_format(stored, "window", RECORDS_FORMAT)
        _refuse_keys(stored, "window", ("grok_epoch", "lr", "wd", "arms"), ("format",))
        arms = stored["arms"]
        _refuse_value("window", "arms", arms, is_object, "a JSON object of arms by name")
        unknown = [name for name in arms if name not in WINDOW_ARMS]
        if unknown:
            raise ValueError(
                f"a stored window has the unknown arm {unknown[0]!r}: {nearest_name(unknown[0], WINDOW_ARMS)} "
                f"The record is damaged: {_FIX}."
            )
        if checked:
            _refuse_value("window", "grok_epoch", stored["grok_epoch"], is_natural, "an epoch (a whole number >= 0)")
            for name in ("lr", "wd"):
                _refuse_value("window", name, stored[name], _rate, "a finite number > 0")
        typed = {name: _arm_from_json(name, arm, checked) for name, arm in arms.items()}
        return cls(stored["grok_epoch"], stored["lr"], stored["wd"], typed)

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form, ``{"grok_epoch", "lr", "wd", "arms": {name: arm's JSON}}`` (format 1)."""
        arms = {name: arm.to_json() for name, arm in self.arms.items()}
        return {"grok_epoch": self.grok_epoch, "lr": self.lr, "wd": self.wd, "arms": arms}

    def without_operators(self) -> Window:
        """This window with every snapshot's fitted operators left out (what a record keeps)."""
        arms = {
            name: replace(arm, records=[s.without_operators() for s in snapshots_from_json(arm.records)])
            for name, arm in self.arms.items()
        }
        return replace(self, arms=arms)


def as_window(window: Window | Mapping[str, Any]) -> Window:
    """``window`` as a :class:`Window`: one already typed as it is; one in its JSON form (a dict,
    as a record's file holds it or code written before the records were typed makes it) read by
    :meth:`Window.from_json` with its keys checked and its values taken as they are."""
    return window if isinstance(window, Window) else Window.from_json(window, checked=False)


@dataclass(frozen=True, eq=False)
class WindowCurve(_Arrays, ItemAccess):
    """One arm of the window per snapshot and seed, what :func:`corelib.plots.figure_window` draws
    (:func:`~corelib.experiments.inflation_clock_arms.window_curves`).

    Attributes:
        epochs: the epochs of its snapshots, shape (snapshots,), integers.
        branch: the epoch it branched at; None for the kept run.
        core_dim: the core dimension, shape (snapshots, seeds); NaN where a seed has none.
        modes: the number of occupied rotational modes, shape (snapshots, seeds).
        test_acc: the test accuracy, a share in [0, 1], shape (snapshots, seeds).
    """

    epochs: np.ndarray
    branch: int | None
    core_dim: np.ndarray
    modes: np.ndarray
    test_acc: np.ndarray
