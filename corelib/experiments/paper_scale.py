"""The recorded paper-scale runs, read for the chapters that show them beside their own results.

Core inflation over the paper's 20 000 epochs and the grokking sweeps over 12 seeds and 13
conditions take many CPU hours, so they are run once and kept in ``recorded/``
(:mod:`corelib.recorded`). A chapter computes its own, smaller run and, when a record is present,
shows the recorded one beside it, labelled with :func:`source_label`. Where the chapter's run
trained the same models as the record (same seeds and settings, a shorter horizon), the snapshots
both have must agree: :func:`inflation_agreement` checks that on every build.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import agreement, claims
from ..recorded import BRANCH_WEIGHTS, compare_values, is_recorded, load_recorded, provenance, recorded_path
from ..results import StoreError, load_json, load_tensors
from ..tasks.sweeps import RECORD_FIELDS, condition_key
from ..typed_records import check_value, is_object
from . import core_inflation, grokking_sweeps, inflation_clock, modular_addition, modular_runs
from .core_inflation_questions import (
    RECORDED_ARMS,
    ArmQuestions,
    figure_curves,
    question_table,
    rederive_sample,
    same_training,
    sample_records,
    tolerance_table,
)
from .core_inflation_questions import finding_values as question_findings
from .core_inflation_questions import glue_values as question_glue
from .modular_records import snapshots_from_json
from .paper_scale_records import (
    InflationAgreement,
    RecordedClock,
    RecordedEmergence,
    RecordedGpuTimes,
    RecordedInflation,
    RecordedWindow,
    inflation_parts,
    restore_fix,
)

__all__ = [
    "source_label",
    "parameters_of",
    "recorded_inflation",
    "RecordedQuestions",
    "recorded_questions",
    "QuestionView",
    "question_view",
    "recorded_emergence",
    "inflation_agreement",
    "recorded_sweeps",
    "recorded_clock",
    "recorded_window",
    "clock_record",
    "window_record",
    "record_claims",
    "question_values",
    "SeedCost",
    "window_seed_cost",
    "recorded_gpu_times",
    "seed_cost_values",
    "RecordedInflation",
    "RecordedEmergence",
    "InflationAgreement",
    "RecordedClock",
    "RecordedWindow",
    "RecordedGpuTimes",
]


def parameters_of(cls, values: dict, name: str):
    """A record's parameters as ``cls``; a clear error when this code no longer has them."""
    try:
        return cls(**values)
    except TypeError as exc:
        raise StoreError(
            f"the recorded {name} run was made with parameters this version of corelib does not know ({exc}); "
            f"re-export it with `python -m acebook.record export {name} --profile <its profile>` after a run of "
            "that profile with this code."
        ) from None


def source_label(provenance: dict[str, Any]) -> str:
    """How the book names a recorded run: profile, code commit and export date."""
    code = provenance.get("code", {})
    return (
        f"recorded {provenance.get('profile', '?')}-profile run "
        f"(commit {code.get('commit') or '?'}, exported {provenance.get('exported', '?')})"
    )


def recorded_inflation(root: Path | str | None = None, profile: str = "paper") -> RecordedInflation | None:
    """The recorded core-inflation run of ``profile`` (:class:`RecordedInflation`), or None when
    none is recorded; a damaged file is refused, naming the field and the fix (restore it from git)."""
    if not is_recorded("core_inflation", profile, root):
        return None
    rec = load_recorded("core_inflation", profile, root)
    params = parameters_of(modular_runs.ModularParams, rec["provenance"]["params"], "core_inflation")
    fix = restore_fix(recorded_path("core_inflation", profile, root))
    arms, histories = inflation_parts(rec["arms"], rec["history"], modular_runs.ARMS, fix)
    return RecordedInflation(
        params=params,
        arms=arms,
        histories=histories,
        summary=core_inflation.inflation_summary(params, arms["wd"], arms["no_wd"]),
        provenance=rec["provenance"],
        source=source_label(rec["provenance"]),
    )


@dataclasses.dataclass(frozen=True)
class RecordedQuestions:
    """The recorded tests of the core-inflation chapter's explanations (``core_inflation_questions``).

    Attributes:
        params: the settings of each arm (``"dropout0"``, ``"control"``).
        arms: the typed record of each arm (:class:`ArmQuestions`).
        provenance: the record's provenance (code, machine, command that re-derives a sample).
        source: how the book names it (:func:`source_label`).
    """

    params: dict[str, modular_runs.ModularParams]
    arms: dict[str, ArmQuestions]
    provenance: dict[str, Any]
    source: str

    @property
    def sample_epoch(self) -> int:
        """The snapshot a build re-derives (the record's ``rederive`` command names it)."""
        return int(self.provenance["sample_epoch"])


def recorded_questions(root: Path | str | None = None, profile: str = "paper") -> RecordedQuestions | None:
    """The recorded ``core_inflation_questions`` of ``profile``, or None when none is recorded."""
    if not is_recorded("core_inflation_questions", profile, root):
        return None
    rec = load_recorded("core_inflation_questions", profile, root)
    prov = rec["provenance"]
    if sorted(rec["arms"]) != sorted(RECORDED_ARMS) or sorted(prov.get("params", {})) != sorted(RECORDED_ARMS):
        raise StoreError(
            f"the recorded core_inflation_questions must hold the arms {RECORDED_ARMS}: restore it from git."
        )
    return RecordedQuestions(
        params={
            a: parameters_of(modular_runs.ModularParams, prov["params"][a], "core_inflation_questions")
            for a in RECORDED_ARMS
        },
        arms={a: ArmQuestions.from_json(rec["arms"][a]) for a in RECORDED_ARMS},
        provenance=prov,
        source=source_label(prov),
    )


@dataclasses.dataclass(frozen=True)
class QuestionView:
    """What the core-inflation chapter shows of its tested explanations.

    Attributes:
        curves: panel A's curves (:func:`core_inflation_questions.figure_curves`); empty without a record.
        arms: the record's two arms (:class:`ArmQuestions`); empty without a record.
        table: one row per arm (:func:`core_inflation_questions.question_table`), None without a record.
        tolerances: the control's sufficient rank by tolerance (:func:`core_inflation_questions.tolerance_table`).
        values: the numbers the chapter glues (NaN or "n/a" without a record).
        sample: the build's re-derivation of the record's sample against the record, None when this
            build's settings train other models than the record's (then nothing is re-derived).
        paper: the paper's core dimensions by epoch (at the branch and the end), drawn as marks.
    """

    curves: dict[str, tuple]
    arms: dict[str, ArmQuestions]
    table: pd.DataFrame | None
    tolerances: pd.DataFrame | None
    values: dict[str, Any]
    sample: agreement.Agreement | None
    paper: dict[int, float] = dataclasses.field(default_factory=dict)

    @property
    def tolerance_ranks(self) -> np.ndarray | None:
        """The control's sufficient rank, (snapshots, seeds, tolerances); None without a record."""
        return self.arms["control"].sufficient_by_tolerance if self.arms else None

    @property
    def tolerance_levels(self) -> tuple[float, ...]:
        return self.arms["control"].tolerances if self.arms else ()

    @property
    def tolerance_epochs(self) -> tuple[int, ...]:
        return self.arms["control"].tolerance_epochs if self.arms else ()


_QUESTION_GLUE = (
    "q_d0_end q_ctl_end q_d0_grokked_branch q_n_models q_d0_collapses q_ctl_collapses q_n_jacobians "
    "q_suff_strict_first q_suff_strict_last q_suff_loose_first q_suff_loose_last q_loose_tolerance q_loose_growth "
    "q_strict_growth q_end_low q_end_high q_p_branch q_p_end q_exercise_epoch"
).split()


def replace_dropout(params: modular_runs.ModularParams, dropout: float) -> modular_runs.ModularParams:
    """``params`` at ``dropout``."""
    return dataclasses.replace(params, dropout=dropout)


def question_view(
    questions: RecordedQuestions | None, recorded: RecordedInflation | None, params: modular_runs.ModularParams
) -> QuestionView:
    """The chapter's view of ``questions`` beside the recorded run; when ``params`` (the build's)
    train the record's control arm, the dropout-0 arm's sample is re-derived from scratch (tens
    of seconds) and compared with the record at the level of the claims."""
    if questions is None or recorded is None:
        values = dict.fromkeys(_QUESTION_GLUE, float("nan")) | dict.fromkeys(
            ("q_sample_n", "q_sample_agree", "q_d0_branch_acc", "q_d0_core_exercise"), modular_runs.NOT_AVAILABLE
        )
        return QuestionView({}, {}, None, None, values, None)
    d0, ctl = questions.arms["dropout0"], questions.arms["control"]
    paper = {
        "branch": claims.claim("inflation.core_dim_grok").value,
        "end": claims.claim("inflation.core_dim_end").value,
    }
    branch = recorded.params.branch_epoch
    values = question_glue(
        recorded.arms["wd"],
        d0,
        ctl,
        paper,
        branch,
        grok_threshold=params.grok_threshold,
        exercise_epoch=params.long_epochs,
    )
    sample = None
    if same_training(replace_dropout(params, ctl.dropout), questions.params["control"]):
        epoch = questions.sample_epoch
        was = sample_records(d0, [epoch])
        now = rederive_sample(questions.params["dropout0"], epoch)
        sample = agreement.compare(
            was, now, agreement.snapshot_groups(was, "dropout0"), agreement.snapshot_groups(now, "dropout0")
        )
    values["q_sample_n"] = len(sample.quantities) if sample is not None else modular_runs.NOT_AVAILABLE
    values["q_sample_agree"] = (
        sum(q.agrees for q in sample.quantities) if sample is not None else modular_runs.NOT_AVAILABLE
    )
    epochs = [e for e in (branch, questions.params["control"].epochs, d0.epochs[-1]) if e in d0.epochs]
    return QuestionView(
        figure_curves(d0, ctl, recorded.arms["wd"]),
        {"dropout0": d0, "control": ctl},
        question_table({"dropout0": d0, "control": ctl}, epochs),
        tolerance_table(ctl),
        values,
        sample,
        {branch: paper["branch"], d0.epochs[-1]: paper["end"]},
    )


def recorded_emergence(recorded: RecordedInflation) -> RecordedEmergence:
    """The modular-addition chapter's view of the recorded inflation run: its weight-decay arm up
    to the chapter's horizon (the paper's 2000 epochs), with its
    :func:`modular_addition.emergence_summary`. The inflation run continues those very models."""
    params = recorded.params
    records = [r for r in snapshots_from_json(recorded.arms["wd"]) if r.epoch <= min(params.epochs, params.long_epochs)]
    return RecordedEmergence(records, modular_addition.emergence_summary(params, records))


def _same_models(a: modular_runs.ModularParams, b: modular_runs.ModularParams, arms) -> bool:
    """Whether two parameter sets train and analyse the same models of ``arms`` (horizons aside)."""
    branch = ("branch_epoch", "branch_weight_decay", "branch_anneal_epochs")
    same_branch = all(getattr(a, k) == getattr(b, k) for k in branch)
    return (
        a.training_identity() == b.training_identity()
        and a.analysis_identity() == b.analysis_identity()
        and (same_branch or "no_wd" not in arms)
    )


def inflation_agreement(
    params: modular_runs.ModularParams,
    arms: dict[str, list[dict]],
    recorded: RecordedInflation | None,
    tolerance: float = 1e-6,
) -> InflationAgreement | None:
    """Compare this build's snapshot records with the recorded run's, at the epochs both have
    (None when nothing is recorded): an :class:`InflationAgreement`, whose ``differences`` are
    worded by :func:`corelib.recorded.compare_values` (integers exactly, floats within
    ``tolerance``) and whose ``agreement`` compares every per-seed quantity of the shared
    snapshots, its seed mean within its envelope of the record's. On the
    record's machine and code the shared snapshots are identical; elsewhere rounding moves per-seed
    values, and the comparison that matters is the statistical one.
    """
    if recorded is None:
        return None
    if not _same_models(params, recorded.params, arms):
        return InflationAgreement(False, {arm: 0 for arm in arms}, [], None)
    counts, problems, groups = {}, [], ({}, {})
    for arm, records in arms.items():
        kept = {r.epoch: r for r in snapshots_from_json(recorded.arms[arm])}
        shared = [r for r in records if r["epoch"] in kept]
        counts[arm] = len(shared)
        pairs = [modular_runs.without_operators([kept[r["epoch"]], r]) for r in shared]
        for (was, now), r in zip(pairs, shared):
            problems += compare_values(was, now, tolerance, f"{arm} epoch {r['epoch']}")
        groups[0].update(agreement.snapshot_groups([was for was, _ in pairs], arm))
        groups[1].update(agreement.snapshot_groups([now for _, now in pairs], arm))
    # the exact differences are worded above, per epoch; the statistical comparison is the groups'
    result = agreement.compare(None, None, *groups, tolerance=tolerance)
    return InflationAgreement(True, counts, problems, result)


def recorded_sweeps(
    root: Path | str | None = None, profile: str = "paper", n_boot: int | None = None
) -> grokking_sweeps.RecordedSweeps | None:
    """The recorded grokking sweeps of ``profile``, summarised and fitted as the chapter does its
    own (:func:`grokking_sweeps.summarise_sweeps`), plus ``provenance`` and ``source``; None when
    none is recorded. ``n_boot`` overrides the record's number of bootstrap replicates.
    """
    if not is_recorded("grokking_sweeps", profile, root):
        return None
    rec = load_recorded("grokking_sweeps", profile, root)
    kept = dict(rec["provenance"]["params"])
    if n_boot is not None:
        kept["n_boot"] = n_boot
    params = parameters_of(grokking_sweeps.SweepsParams, kept, "grokking_sweeps")

    def table(conditions, cap) -> pd.DataFrame:
        """The sweep's rows in its condition order, one per seed (as ``run_sweep`` returns them)."""
        cfg = params.config(cap)
        rows = {(r["condition"], r["seed"]): r for r in rec["records"]}
        wanted = [(condition_key(c, cfg), s) for c in conditions for s in params.seeds]
        missing = [w for w in wanted if w not in rows]
        if missing:
            raise StoreError(
                f"the recorded sweeps hold no record of {len(missing)} (condition, seed) pairs as this code keys "
                "them (a record made by another version of corelib); re-export it with "
                "`python -m acebook.record export grokking_sweeps` after a paper-profile run with this code."
            )
        return pd.DataFrame([rows[w] for w in wanted], columns=list(RECORD_FIELDS))

    tables = (
        table(params.omega_conditions(), params.omega_max_epochs),
        table(params.p_conditions(), params.p_max_epochs),
    )
    summary = grokking_sweeps.summarise_sweeps(params, *tables)
    return grokking_sweeps.RecordedSweeps(
        **{f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)},
        provenance=rec["provenance"],
        source=source_label(rec["provenance"]),
    )


def recorded_clock(
    params: inflation_clock.ClockParams, root: Path | str | None = None, profiles: tuple[str, ...] = ("paper", "book")
) -> RecordedClock | None:
    """The recorded clock-and-window experiment (:mod:`corelib.experiments.inflation_clock`) made with
    exactly ``params``, from the first of ``profiles`` whose record has these settings; None when
    none has. A :class:`RecordedClock`, read from the files :func:`inflation_clock.compact` wrote (a
    damaged one refused, naming the field). A record this code cannot
    read is passed over when another matches, and its error raised when none does."""
    stale = None
    for profile in profiles:
        if not is_recorded("inflation_clock", profile, root):
            continue
        try:
            made = parameters_of(
                inflation_clock.ClockParams, provenance("inflation_clock", profile, root)["params"], "inflation_clock"
            )
        except StoreError as exc:
            stale = exc
            continue
        if made == params:
            return clock_record(load_recorded("inflation_clock", profile, root), made)
    if stale is not None:
        raise stale
    return None


def recorded_window(root: Path | str | None = None, profile: str = "paper") -> RecordedWindow | None:
    """The recorded window of ``profile`` (``inflation_clock_window``), which a chapter shows beside
    its own settings' window (:class:`RecordedWindow`); None when none is recorded."""
    name = "inflation_clock_window"
    if not is_recorded(name, profile, root):
        return None
    rec = load_recorded(name, profile, root)
    return window_record(rec, recorded_path(name, profile, root))


def clock_record(rec: dict[str, Any], made: inflation_clock.ClockParams) -> RecordedClock:
    """The clock's record as :func:`~corelib.recorded.load_recorded` reads it (made with ``made``), typed."""
    return RecordedClock(
        params=made,
        runs=inflation_clock.clock_runs_from_json(rec["runs"]),
        window=inflation_clock.Window.from_json(rec["window"]),
        provenance=rec["provenance"],
        source=source_label(rec["provenance"]),
    )


def window_record(rec: dict[str, Any], folder: Path) -> RecordedWindow:
    """The window's record as :func:`~corelib.recorded.load_recorded` reads it from ``folder``, typed,
    with its branch weights (verified) and its branch run checked."""
    name = "inflation_clock_window"
    made = parameters_of(inflation_clock.ClockParams, rec["provenance"]["params"], name)
    weights = load_tensors(folder / BRANCH_WEIGHTS)
    check_value(
        f"recorded {name} branch_run.json", "branch_run", rec["branch_run"], is_object, "a JSON object (dict)",
        fix=restore_fix(folder),
    )  # fmt: skip
    return RecordedWindow(
        params=made,
        window=inflation_clock.Window.from_json(rec["window"]),
        branch_run=rec["branch_run"],
        branch_weights=weights,
        provenance=rec["provenance"],
        source=source_label(rec["provenance"]),
    )


def question_values(recorded: RecordedInflation, questions: RecordedQuestions) -> dict[str, float]:
    """The core-inflation chapter's findings on its own explanations, from the two records."""
    paper = {
        "branch": claims.claim("inflation.core_dim_grok").value,
        "end": claims.claim("inflation.core_dim_end").value,
    }
    return question_findings(
        recorded.arms["wd"],
        questions.arms["dropout0"],
        questions.arms["control"],
        paper,
        recorded.params.branch_epoch,
    )


def record_claims(
    chapter: str,
    recorded: RecordedInflation | grokking_sweeps.RecordedSweeps | None,
    questions: RecordedQuestions | None = None,
    near: Any = None,
) -> None:
    """Record for the claims page the values of ``chapter``'s claims measured on the recorded run
    (``modular_addition``: its first 2000 epochs; ``core_inflation``; ``grokking_sweeps``), with
    the run's settings and name; without a record, forget any values an earlier record left.
    ``questions`` (core_inflation): the recorded tests of the chapter's explanations, whose
    findings are recorded with the run's values (each with a note naming its record); ``near``
    (grokking_sweeps): the modulus law with the recorded conditions near the critical modulus
    (:func:`recorded_near_moduli`), likewise."""
    if recorded is None:
        claims.forget_recorded(chapter)
        return
    notes: dict[str, str] = {}
    if chapter == "grokking_sweeps":
        values = grokking_sweeps.claim_values(recorded)
        settings, source = grokking_sweeps.claim_settings(recorded.params), recorded.source
        if near is not None:
            from .grokking_sweeps_moduli import finding_values as near_findings

            found = near_findings(near, recorded.params.p_weight_decay)
            values = values | found
            notes = dict.fromkeys(found, "with the recorded conditions near p_crit (grokking_sweeps_moduli)")
    elif chapter in ("modular_addition", "core_inflation"):
        if chapter == "modular_addition":
            values = modular_addition.emergence_claim_values(recorded_emergence(recorded).summary)
        else:
            values = core_inflation.inflation_claim_values(recorded.summary)
            if questions is not None:
                found = question_values(recorded, questions)
                values = values | found
                notes = dict.fromkeys(found, f"from the {questions.source} of core_inflation_questions")
        unused = () if chapter == "core_inflation" else modular_runs.LONG_RUN_SETTINGS
        settings = claims.deviations(recorded.params, modular_runs.ModularParams(), ignore=["eval_every", *unused])
        source = recorded.source
    else:
        raise ValueError(f"no recorded run serves chapter {chapter!r}.")
    claims.record(chapter, values, settings=settings, source=source, notes=notes)


@dataclasses.dataclass(frozen=True)
class SeedCost:
    """What training the window's arms with more seeds would cost (:func:`window_seed_cost`).

    Attributes:
        seeds: the seeds per arm costed.
        cpu_hours: on the CPU of the window's record, its training time scaled by the seed count
            (the models of a stack cost about alike on a CPU).
        cpu: that CPU.
        gpu_minutes: on the GPU of the paper-profile timing record, the epochs the branched arms
            span (they train as one stack) at its measured seconds per epoch, which on that GPU do
            not grow with the number of models in the stack (its steps are bound by kernel
            launches); None without a GPU record.
        gpu: that GPU.
    """

    seeds: int
    cpu_hours: float
    cpu: str
    gpu_minutes: float | None
    gpu: str | None


def window_seed_cost(window: RecordedWindow, gpu: RecordedGpuTimes | None, seeds: int) -> SeedCost:
    """The cost of the recorded window's branched arms at ``seeds`` seeds per arm, from the
    window's record (:func:`recorded_window`) and the GPU timing record (:func:`recorded_gpu_times`)."""
    if seeds < 1:
        raise ValueError(f"seeds must be a positive whole number; got {seeds}.")
    prov = window.provenance
    hours = sum(prov["training_seconds"].values()) / 3600 * seeds / len(window.params.seeds)
    spans = [
        (arm.records[0].epoch, arm.records[-1].epoch) for name, arm in window.window.arms.items() if name != "kept"
    ]
    epochs = max(end for _, end in spans) - min(start for start, _ in spans)  # the arms train as one stack
    if gpu is None:
        return SeedCost(seeds, hours, computed_cpu(prov), None, None)
    minutes = epochs * gpu.core_inflation.seconds_per_epoch / 60
    return SeedCost(seeds, hours, computed_cpu(prov), minutes, gpu.device)


def computed_cpu(provenance: dict[str, Any]) -> str:
    """The CPU a record names, in a few words."""
    machine = provenance.get("machine", {})
    return f"{machine.get('cpu', '?')}, {machine.get('torch_threads', '?')} threads"


def recorded_gpu_times(root: Path | str | None = None) -> RecordedGpuTimes | None:
    """The paper profile timed on a GPU (``recorded/paper_profile_gpu.json``, a
    :class:`RecordedGpuTimes`), or None; a damaged file is refused, naming the field and the fix."""
    from ..recorded import recorded_root

    path = Path(root or recorded_root()) / "paper_profile_gpu.json"
    return RecordedGpuTimes.from_json(load_json(path)) if path.exists() else None


def seed_cost_values(window: RecordedWindow | None, gpu: RecordedGpuTimes | None, seeds: int) -> dict[str, Any]:
    """The glued numbers of :func:`window_seed_cost` ("n/a" without a window record)."""
    if window is None:
        return dict.fromkeys(
            ("cost_cpu_hours", "cost_cpu", "cost_gpu_minutes", "cost_gpu"), modular_runs.NOT_AVAILABLE
        ) | {"cost_seeds": seeds}
    cost = window_seed_cost(window, gpu, seeds)
    return {
        "cost_seeds": cost.seeds,
        "cost_cpu_hours": round(cost.cpu_hours),
        "cost_cpu": cost.cpu,
        "cost_gpu_minutes": modular_runs.NOT_AVAILABLE if cost.gpu_minutes is None else round(cost.gpu_minutes),
        "cost_gpu": cost.gpu or modular_runs.NOT_AVAILABLE,
    }


def recorded_near_moduli(
    recorded: grokking_sweeps.RecordedSweeps | None, root: Path | str | None = None, profile: str = "paper"
):
    """The modulus law of the recorded sweep with the recorded conditions near the critical
    modulus added (:class:`grokking_sweeps_moduli.ModulusLaw`), or None when either is not recorded."""
    from . import grokking_sweeps_moduli

    if recorded is None or not is_recorded("grokking_sweeps_moduli", profile, root):
        return None
    rec = load_recorded("grokking_sweeps_moduli", profile, root)
    params = parameters_of(grokking_sweeps.SweepsParams, rec["provenance"]["params"], "grokking_sweeps_moduli")
    cfg = params.config(params.p_max_epochs)
    rows = {(r["condition"], r["seed"]): r for r in rec["records"]}
    wanted = [(condition_key(c, cfg), s) for c in params.p_conditions() for s in params.seeds]
    if any(w not in rows for w in wanted):
        raise StoreError(
            "the recorded grokking_sweeps_moduli lacks records of its own conditions: restore it from git."
        )
    near = pd.DataFrame([rows[w] for w in wanted], columns=list(RECORD_FIELDS))
    return grokking_sweeps_moduli.modulus_law(recorded.table_p, near, n_boot=recorded.params.n_boot)
