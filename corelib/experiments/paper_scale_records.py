"""The records :mod:`corelib.experiments.paper_scale` reads back from ``recorded/``, typed.

:func:`~corelib.experiments.paper_scale.recorded_inflation` returns a :class:`RecordedInflation`,
:func:`~corelib.experiments.paper_scale.recorded_emergence` a :class:`RecordedEmergence`,
:func:`~corelib.experiments.paper_scale.inflation_agreement` an :class:`InflationAgreement`,
:func:`~corelib.experiments.paper_scale.recorded_clock` a :class:`RecordedClock`,
:func:`~corelib.experiments.paper_scale.recorded_window` a :class:`RecordedWindow` and
:func:`~corelib.experiments.paper_scale.recorded_gpu_times` a :class:`RecordedGpuTimes`. Their
inner parts are the typed records of their experiments (:class:`~.modular_records.Snapshot`,
:class:`~.inflation_clock_records.ClockRun`, :class:`~.inflation_clock_records.Window`).

The files are read as they were written (format 1, no marker; a later format adds a ``"format"``
key and a reader here): a key not known is refused naming the field meant, a missing one or a
value its field cannot hold naming the field, each with the fix, which for a record in git is to
restore it (``git checkout -- recorded/...``), never to recompute it (hours of training).

Every record answers item access (``recorded["arms"]["wd"]``), so notebooks and exercises written
when these were dicts keep working; new code reads attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..results import PROJECT_ROOT
from ..typed_records import (
    ItemAccess,
    Reader,
    StoredRecord,
    by_name,
    check_format,
    check_keys,
    check_value,
    each,
    is_finite,
    is_natural,
    is_object,
    is_rank,
    leaf,
    list_of,
    named,
    nested,
    same_lengths,
)
from .inflation_clock_records import HISTORY_KEYS, ClockRun, Window
from .modular_records import Snapshot, snapshots_from_json

if TYPE_CHECKING:
    import torch

    from ..agreement import Agreement
    from .core_inflation import InflationSummary
    from .inflation_clock import ClockParams
    from .modular_addition import EmergenceSummary
    from .modular_runs import ModularParams

__all__ = [
    "PARTS_FORMAT",
    "GPU_TIMES_FORMAT",
    "RecordedInflation",
    "RecordedEmergence",
    "InflationAgreement",
    "RecordedClock",
    "RecordedWindow",
    "RecordedGpuTimes",
    "InflationTimes",
    "ArmTime",
    "SweepTimes",
    "ConditionTime",
    "StepSeconds",
    "ConditionCheck",
    "TimeTotals",
    "Rederivation",
    "restore_fix",
    "inflation_parts",
]

PARTS_FORMAT = 1  # the recorded folders' parts (arms.json, history.json); format 1 has no "format" key
GPU_TIMES_FORMAT = 1  # recorded/paper_profile_gpu.json; format 1 has no "format" key


def restore_fix(folder: Path | str) -> str:
    """What to do about a damaged record in ``folder`` (or file): restore it from git."""
    path = Path(folder)
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    return f"restore it from git (`git checkout -- {shown}`)"


def _part(stored: object, what: str) -> Mapping[str, Any]:
    """A stored part in the format read here, its marker (if any) left out."""
    check_format(stored, what, PARTS_FORMAT)
    if isinstance(stored, Mapping) and "format" in stored:
        stored = {k: v for k, v in stored.items() if k != "format"}
    return stored


def _by_arm(stored: object, what: str, arms: tuple[str, ...], fix: str) -> Mapping[str, Any]:
    stored = _part(stored, what)
    check_keys(stored, what, arms, fix=fix, type_fix=fix, unknown_fix=f"The record is damaged: {fix}")
    return stored


def _history(stored: object, what: str, fix: str) -> dict[str, list]:
    """One arm's training history, checked: :data:`HISTORY_KEYS`, one row per epoch each."""
    check_keys(stored, what, HISTORY_KEYS, fix=fix, type_fix=fix, unknown_fix=f"The record is damaged: {fix}")
    check_value(what, "epoch", stored["epoch"], list_of(is_natural), "a list of epochs (whole numbers >= 0)", fix=fix)
    for name in HISTORY_KEYS[1:]:
        check_value(what, name, stored[name], lambda v: isinstance(v, list), "a list, one row per epoch", fix=fix)
    same_lengths(what, {k: len(stored[k]) for k in HISTORY_KEYS[1:]}, len(stored["epoch"]), "epoch", fix)
    return dict(stored)


def inflation_parts(
    arms: object, history: object, names: tuple[str, ...], fix: str
) -> tuple[dict[str, list[Snapshot]], dict[str, dict[str, list]]]:
    """The snapshots and histories of a recorded core-inflation run (its ``arms.json`` and
    ``history.json``), each arm of ``names`` checked; ``fix``: how to mend the record."""
    arms = _by_arm(arms, "recorded core-inflation arms.json", names, fix)
    history = _by_arm(history, "recorded core-inflation history.json", names, fix)
    for arm in names:
        check_value(
            "recorded core-inflation arms.json", arm, arms[arm], list_of(is_object), "a list of snapshots", fix=fix
        )
    snapshots = {arm: snapshots_from_json(arms[arm]) for arm in names}
    return snapshots, {arm: _history(history[arm], f"recorded core-inflation history ({arm})", fix) for arm in names}


@dataclass(frozen=True)
class RecordedInflation(ItemAccess):
    """The recorded core-inflation run of a profile (``recorded/core_inflation_<profile>/``).

    Attributes:
        params: the settings it was made with.
        arms: per arm (``"wd"``, ``"no_wd"``), its snapshot analyses in order of epoch, as
            :func:`~corelib.experiments.modular_runs.analyse_arm` gives them, without the fitted
            operators except at the last snapshot.
        histories: per arm, its training history, ``{"epoch": [e, ...], "loss" / "train_acc":
            [[per seed], ...], "test_acc": [[per seed] or None, ...]}`` (one row per epoch; losses
            in nats, accuracies shares in [0, 1]).
        summary: :func:`~corelib.experiments.core_inflation.inflation_summary` of the two arms.
        provenance: the record's provenance (profile, params, code, machine, precision, training
            seconds per arm, the command that re-derives a sample), as stored.
        source: how the book names it (:func:`~corelib.experiments.paper_scale.source_label`).
    """

    params: ModularParams
    arms: dict[str, list[Snapshot]]
    histories: dict[str, dict[str, list]]
    summary: InflationSummary | None
    provenance: dict[str, Any]
    source: str


@dataclass(frozen=True)
class RecordedEmergence(ItemAccess):
    """The modular-addition chapter's view of the recorded inflation run (its weight-decay arm up
    to the chapter's horizon).

    Attributes:
        records: those snapshots, in order of epoch.
        summary: :func:`~corelib.experiments.modular_addition.emergence_summary` of them.
    """

    records: list[Snapshot]
    summary: EmergenceSummary


@dataclass(frozen=True)
class InflationAgreement(ItemAccess):
    """A build's snapshots compared with the recorded run's at the epochs both have.

    Attributes:
        comparable: whether the two trained the same models (if not, nothing is compared).
        n_snapshots: per arm, the snapshots compared.
        differences: each value that differs, worded by :func:`corelib.recorded.compare_values`
            (integers exactly, floats within the tolerance).
        agreement: every per-seed quantity of the shared snapshots compared statistically
            (:class:`corelib.agreement.Agreement`); None when not comparable.
    """

    comparable: bool
    n_snapshots: dict[str, int]
    differences: list[str]
    agreement: Agreement | None


@dataclass(frozen=True)
class RecordedClock(ItemAccess):
    """The recorded clock-and-window experiment (``recorded/inflation_clock_<profile>/``).

    Attributes:
        params: the settings it was made with (those the chapter asked for).
        runs: per (lr, wd) label, its :class:`~.inflation_clock_records.ClockRun`.
        window: the window's arms (:class:`~.inflation_clock_records.Window`).
        provenance: the record's provenance (training seconds per run and arm among it), as stored.
        source: how the book names it.
    """

    params: ClockParams
    runs: dict[str, ClockRun]
    window: Window
    provenance: dict[str, Any]
    source: str


@dataclass(frozen=True)
class RecordedWindow(ItemAccess):
    """The recorded window on the paper's clock (``recorded/inflation_clock_window_<profile>/``).

    Attributes:
        params: the settings it was made with.
        window: its arms (:class:`~.inflation_clock_records.Window`), their histories read from
            the tensors the record keeps them in.
        branch_run: the identity of the run at the branch (model, seeds, data fingerprints), as
            the engine wrote it, for :func:`~.inflation_clock.window_sample_agreement`.
        branch_weights: that run's verified weights at the branch, stacked over its seeds.
        provenance: the record's provenance (training seconds per arm, core dimensions at the
            branch, the kept run it branched from), as stored.
        source: how the book names it.
    """

    params: ClockParams
    window: Window
    branch_run: dict[str, Any]
    branch_weights: dict[str, torch.Tensor]
    provenance: dict[str, Any]
    source: str


# --------------------------------------------------------------------------- the GPU timing record


class _Timing(StoredRecord):
    """A part of the GPU timing record; ``OPTIONAL`` fields may be absent (None, and left out when written)."""

    __slots__ = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    WHAT = "GPU timing record"
    FIX = (
        f"{restore_fix('recorded/paper_profile_gpu.json')}, or time it again on a GPU "
        "(`python benchmarks/paper_profile_times.py --check ... --rederive --out recorded/paper_profile_gpu.json`)"
    )

    @classmethod
    def read(cls, stored: object, what: str, fix: str):
        required = [k for k in cls.READERS if k not in cls.OPTIONAL]
        damaged = f"The record is damaged: {fix}"
        check_keys(stored, what, required, cls.OPTIONAL, fix=fix, type_fix=fix, unknown_fix=damaged)
        values = {k: read(stored[k], what, k, fix) if k in stored else None for k, read in cls.READERS.items()}
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        return {k: v for k, v in out.items() if not (k in self.OPTIONAL and v is None)}


def _seconds(v: object) -> bool:
    return is_finite(v) and v >= 0


def _rate(v: object) -> bool:
    return is_finite(v) and v > 0


_SECONDS = leaf(_seconds, "seconds, a finite number >= 0")
_CPU_SECONDS = leaf(lambda v: v is None or _seconds(v), "seconds (a finite number >= 0) or null")
_RATE = leaf(_rate, "seconds, a finite number > 0")
_TEXT = leaf(lambda v: isinstance(v, str), "a string")


@dataclass(frozen=True)
class ArmTime(_Timing):
    """One core-inflation arm timed. ``seconds``: its scaled GPU time; ``epochs``: the epochs it
    trains; ``recorded_cpu_seconds``: the record's CPU time (None where it has none)."""

    arm: str
    epochs: int
    recorded_cpu_seconds: float | None
    seconds: float
    READERS: ClassVar[Mapping[str, Reader]] = {
        "arm": _TEXT,
        "epochs": leaf(is_natural, "a number of epochs, a whole number >= 0"),
        "recorded_cpu_seconds": _CPU_SECONDS,
        "seconds": _SECONDS,
    }


@dataclass(frozen=True)
class InflationTimes(_Timing):
    """Core inflation timed: its ``arms`` (:class:`ArmTime`), the ``epochs_timed`` of the slice and
    the measured ``seconds_per_epoch`` (of the 3-seed stack)."""

    arms: tuple[ArmTime, ...]
    epochs_timed: int
    seconds_per_epoch: float
    READERS: ClassVar[Mapping[str, Reader]] = {
        "arms": each(ArmTime),
        "epochs_timed": leaf(is_rank, "a number of epochs, a whole number >= 1"),
        "seconds_per_epoch": _RATE,
    }


@dataclass(frozen=True)
class ConditionTime(_Timing):
    """One sweep condition timed: its label, the ``steps`` of its longest seed, its scaled GPU
    ``seconds`` and the record's ``recorded_cpu_seconds`` (None where it has none)."""

    condition: str
    recorded_cpu_seconds: float | None
    seconds: float
    steps: int
    READERS: ClassVar[Mapping[str, Reader]] = {
        "condition": _TEXT,
        "recorded_cpu_seconds": _CPU_SECONDS,
        "seconds": _SECONDS,
        "steps": leaf(is_natural, "a number of steps, a whole number >= 0"),
    }


@dataclass(frozen=True)
class StepSeconds(_Timing):
    """Seconds per optimizer step of one (p, batch) shape: with the full stack of seeds and with one."""

    full_stack: float
    one_seed: float
    READERS: ClassVar[Mapping[str, Reader]] = {"full_stack": _RATE, "one_seed": _RATE}


@dataclass(frozen=True)
class ConditionCheck(_Timing):
    """One sweep condition trained whole: its ``measured_seconds`` beside its ``scaled_seconds``."""

    condition: str
    measured_seconds: float
    scaled_seconds: float
    READERS: ClassVar[Mapping[str, Reader]] = {"condition": _TEXT, "measured_seconds": _RATE, "scaled_seconds": _RATE}


@dataclass(frozen=True)
class SweepTimes(_Timing):
    """The grokking sweeps timed: per condition (:class:`ConditionTime`), the step times per
    shape (``"p=53 B=512"`` -> :class:`StepSeconds`), the seeds of a full stack, the steps timed
    per shape and, where one was trained whole, its :class:`ConditionCheck` (else None)."""

    # the stored key; on a record it hides StoredRecord.check, which _Timing.read never calls
    check: ConditionCheck | None = field()
    conditions: tuple[ConditionTime, ...]
    full_stack_seeds: int
    step_seconds: dict[str, StepSeconds]
    steps_timed: int
    OPTIONAL = ("check",)
    READERS: ClassVar[Mapping[str, Reader]] = {
        "check": nested(ConditionCheck),
        "conditions": each(ConditionTime),
        "full_stack_seeds": leaf(is_rank, "a number of seeds, a whole number >= 1"),
        "step_seconds": named(StepSeconds),
        "steps_timed": leaf(is_rank, "a number of steps, a whole number >= 1"),
    }


@dataclass(frozen=True)
class TimeTotals(_Timing):
    """Both runs' scaled GPU seconds and the records' CPU seconds, summed (None where a part has none)."""

    core_inflation: float | None
    core_inflation_recorded_cpu: float | None
    grokking_sweeps: float | None
    grokking_sweeps_recorded_cpu: float | None
    READERS: ClassVar[Mapping[str, Reader]] = dict.fromkeys(
        ("core_inflation", "core_inflation_recorded_cpu", "grokking_sweeps", "grokking_sweeps_recorded_cpu"),
        _CPU_SECONDS,
    )


def _pair(v: object) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(is_natural(x) for x in v)


@dataclass(frozen=True)
class Rederivation(_Timing):
    """A sample of a record re-derived on the GPU and compared (:func:`acebook.record.verify`):
    its ``seconds``, whether ``identical``, ``values_moved`` and ``quantities_moved`` (each
    ``(moved, of)``), the largest change of a seed mean in standard errors, whether it ``agrees``,
    and the sample: core inflation's ``epochs`` or a sweep's ``condition`` (the other None)."""

    agrees: bool
    condition: str | None
    epochs: int | None
    identical: bool
    largest_change_of_a_mean_in_standard_errors: float
    quantities_moved: tuple[int, int]
    seconds: float
    values_moved: tuple[int, int]
    OPTIONAL = ("condition", "epochs")
    READERS: ClassVar[Mapping[str, Reader]] = {
        "agrees": leaf(lambda v: isinstance(v, bool), "true or false"),
        "condition": _TEXT,
        "epochs": leaf(is_rank, "a number of epochs, a whole number >= 1"),
        "identical": leaf(lambda v: isinstance(v, bool), "true or false"),
        "largest_change_of_a_mean_in_standard_errors": leaf(_seconds, "a finite number >= 0"),
        "quantities_moved": leaf(_pair, "a pair of whole numbers (moved, of)"),
        "seconds": _SECONDS,
        "values_moved": leaf(_pair, "a pair of whole numbers (moved, of)"),
    }


def _machine(v: object) -> bool:
    return is_object(v) and isinstance(v.get("device"), str)


@dataclass(frozen=True)
class RecordedGpuTimes(_Timing):
    """The paper profile timed on a GPU (``recorded/paper_profile_gpu.json``, written by
    ``benchmarks/paper_profile_times.py``). Times are wall seconds on that GPU, scaled from slices
    of the runs to the records' lengths, beside the records' CPU seconds.

    Attributes:
        code: the commit and corelib hash it was measured with, and the script, as stored.
        core_inflation: core inflation timed (:class:`InflationTimes`).
        grokking_sweeps: the sweeps timed (:class:`SweepTimes`).
        machine: the machine, as stored; its ``"device"`` names the GPU (e.g. ``"NVIDIA H200 (cuda)"``).
        measured: the date measured (``YYYY-MM-DD``).
        precision: the floating-point precision trained in (``"fp32"``).
        rederived: per record (``"core_inflation"``, ``"grokking_sweeps"``), its sample re-derived on
            the GPU (:class:`Rederivation`); None where none was.
        totals_seconds: the sums (:class:`TimeTotals`).
    """

    code: dict[str, Any]
    core_inflation: InflationTimes
    grokking_sweeps: SweepTimes
    machine: dict[str, Any]
    measured: str
    precision: str
    rederived: dict[str, Rederivation] | None
    totals_seconds: TimeTotals
    OPTIONAL = ("rederived",)
    FORMAT = GPU_TIMES_FORMAT
    READERS: ClassVar[Mapping[str, Reader]] = {
        "code": leaf(by_name(lambda v: v is None or isinstance(v, str)), "a JSON object of strings", as_stored=True),
        "core_inflation": nested(InflationTimes),
        "grokking_sweeps": nested(SweepTimes),
        "machine": leaf(_machine, "a JSON object naming its 'device' (a string)", as_stored=True),
        "measured": _TEXT,
        "precision": _TEXT,
        "rederived": named(Rederivation),
        "totals_seconds": nested(TimeTotals),
    }

    @property
    def device(self) -> str:
        """The GPU timed on, as the machine names it."""
        return self.machine["device"]
