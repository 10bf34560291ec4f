"""The core-inflation chapter (Figure 3): the core grows under weight decay after grokking.

Both arms (weight decay kept, removed at the branch) at the branch and at the end; how fast the
core grows; the necessary ranks at other thresholds; the paper's claims and every value the
chapter quotes, with the recorded paper-scale run's. The runs and their analysis are
:mod:`corelib.experiments.modular_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..claims import claim
from .modular_records import Snapshot, snapshots_from_json
from .modular_runs import (
    ARMS,
    NOT_AVAILABLE,
    ModularParams,
    agreement_values,
    collapse_summary,
    epochs_of,
    first_rank_at_or_below,
    grokking_epoch,
    history_until,
    listed,
    make_data,
    mean_rank,
    settings_list,
)

if TYPE_CHECKING:
    import pandas

    from .paper_scale_records import InflationAgreement, RecordedInflation

__all__ = [
    "ArmSummary",
    "InflationSummary",
    "inflation_summary",
    "inflation_claim_values",
    "growth_epoch",
    "necessary_ranks",
    "threshold_table",
    "inflation_glue_values",
]


def growth_epoch(epochs, values, share: float) -> int | None:
    """The first epoch at which ``values`` have covered ``share`` of their change from the first
    value to the last (a rise or a fall).

    With the mean core dimension after the branch this dates the growth of core inflation: with
    ``share=0.5`` when half of it is there, with ``share=0.9`` when most of it is. A noisy series
    may cross the level and fall back; the first crossing counts. Without change, the first epoch;
    ``None`` when the first or the last value is not finite.
    """
    epochs, values = np.asarray(epochs), np.asarray(values, dtype=float)
    if epochs.shape != values.shape or epochs.ndim != 1 or not len(epochs):
        raise ValueError(
            f"epochs and values must be equal-length 1-d sequences, got {epochs.shape} and {values.shape}."
        )
    if not 0 < share <= 1:
        raise ValueError(f"share must lie in (0, 1], got {share}.")
    first, last = values[0], values[-1]
    if not (np.isfinite(first) and np.isfinite(last)):
        return None
    level = first + share * (last - first)
    # a fall is a rise of the negated series; NaN compares false and is passed over
    reached = values >= level if last >= first else values <= level
    return int(epochs[np.flatnonzero(reached)[0]])


def _mean_growth_epoch(records: Sequence[Snapshot], start: int, end: int, share: float) -> int | None:
    """:func:`growth_epoch` of the mean core dimension over the models, from ``start`` to ``end``."""
    kept = [r for r in snapshots_from_json(records) if start <= r.epoch <= end]
    return growth_epoch(epochs_of(kept), [np.mean([m.core_dim for m in r.models]) for r in kept], share)


def _mean_at(records: Sequence[Snapshot], epoch: int, field: str, min_acc: float = 0.0) -> float:
    """Mean of ``field`` over the models at ``epoch`` whose test accuracy is at least ``min_acc``
    (a list field by its length: ``modes``, the mode count)."""
    r = next(r for r in records if r["epoch"] == epoch)
    vals = [m[field] for m in r["models"] if m["test_acc"] >= min_acc]
    vals = [len(v) if isinstance(v, (list, tuple)) else v for v in vals]
    return float(np.mean([np.nan if v is None else v for v in vals])) if vals else float("nan")


@dataclass(frozen=True)
class ArmSummary:
    """One arm of Figure 3: means over the models at the window's start and end.

    Attributes:
        core_dim_start, core_dim_end: the core dimension (the necessary rank refined by the
            removal test; :func:`corelib.experiments.modular_runs.analyse_model`).
        necessary_rank_start, necessary_rank_end: the smallest rank whose removal leaves at
            most chance accuracy.
        sufficient_rank_start, sufficient_rank_end: the smallest rank that alone keeps the
            model's accuracy.
        modes_start, modes_end: the number of Fourier modes of the core.
        test_acc_start, test_acc_end: test accuracy, a share in [0, 1].
        core_dim_end_working, modes_end_working: at the end, over the models that still do the
            task (test accuracy at least ``grok_threshold``); NaN when none does.
        n_working_end: how many models those are.
    """

    core_dim_start: float
    core_dim_end: float
    necessary_rank_start: float
    necessary_rank_end: float
    sufficient_rank_start: float
    sufficient_rank_end: float
    modes_start: float
    modes_end: float
    test_acc_start: float
    test_acc_end: float
    core_dim_end_working: float
    modes_end_working: float
    n_working_end: int


@dataclass(frozen=True)
class InflationSummary:
    """The numbers of Figure 3 (:func:`inflation_summary`).

    Attributes:
        start: the branch epoch, the no-weight-decay arm's first snapshot (the arms are still one model).
        end: the last epoch both arms have.
        grok_epoch: the kept arm's grokking epoch (None if it did not grok).
        wd, no_wd: the arm that keeps weight decay and the arm without it.
    """

    start: int
    end: int
    grok_epoch: int | None
    wd: ArmSummary
    no_wd: ArmSummary


def _arm_summary(recs: list[Snapshot], start: int, end: int, threshold: float) -> ArmSummary:
    last = next(r for r in recs if r["epoch"] == end)
    return ArmSummary(
        core_dim_start=_mean_at(recs, start, "core_dim"),
        core_dim_end=_mean_at(recs, end, "core_dim"),
        necessary_rank_start=_mean_at(recs, start, "necessary_rank"),
        necessary_rank_end=_mean_at(recs, end, "necessary_rank"),
        sufficient_rank_start=_mean_at(recs, start, "sufficient_rank"),
        sufficient_rank_end=_mean_at(recs, end, "sufficient_rank"),
        modes_start=_mean_at(recs, start, "modes"),
        modes_end=_mean_at(recs, end, "modes"),
        test_acc_start=_mean_at(recs, start, "test_acc"),
        test_acc_end=_mean_at(recs, end, "test_acc"),
        core_dim_end_working=_mean_at(recs, end, "core_dim", threshold),
        modes_end_working=_mean_at(recs, end, "modes", threshold),
        n_working_end=sum(m["test_acc"] >= threshold for m in last["models"]),
    )


def inflation_summary(params: ModularParams, wd: Sequence[Snapshot], no_wd: Sequence[Snapshot]) -> InflationSummary:
    """The numbers of Figure 3: core dimension and mode counts of both arms, start vs end.

    "Start" is the first snapshot of the no-weight-decay arm (the branch epoch), where the arms
    are still one model; "end" is the last snapshot both arms have. Means are over all models, as
    in the paper; ``*_end_working`` are over the models that do the task at the end (test accuracy
    at least ``params.grok_threshold``; ``n_working_end`` of them), which leaves out a model caught in
    a loss spike (see :func:`~corelib.experiments.modular_runs.training_collapses`). The arms'
    records are :func:`~corelib.experiments.modular_runs.analyse_arm`'s, read by item so that
    their JSON form (or a part of it: the fields read here) serves too.
    """
    start = no_wd[0]["epoch"]
    end = min(wd[-1]["epoch"], no_wd[-1]["epoch"])
    return InflationSummary(
        start=start,
        end=end,
        grok_epoch=grokking_epoch(wd, params.grok_threshold),
        wd=_arm_summary(wd, start, end, params.grok_threshold),
        no_wd=_arm_summary(no_wd, start, end, params.grok_threshold),
    )


def _ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is 0 or not finite (e.g. no modes at the branch epoch)."""
    return a / b if b and np.isfinite(b) else float("nan")


def inflation_claim_values(summary: InflationSummary) -> dict:
    """The measured values of the paper's core-inflation claims (see :mod:`corelib.claims`)."""
    wd, no = summary.wd, summary.no_wd
    return {
        "inflation.core_dim_grok": wd.core_dim_start,
        "inflation.core_dim_end": wd.core_dim_end,
        "inflation.sufficient_stable": _ratio(wd.sufficient_rank_end, wd.sufficient_rank_start),
        "inflation.modes_end": wd.modes_end,
        "inflation.modes_sparse": _ratio(no.modes_end, no.modes_start),
        "inflation.arm_dim_gap": wd.core_dim_end - no.core_dim_end,
        "inflation.arm_mode_gap": wd.modes_end - no.modes_end,
    }


def necessary_ranks(records: Sequence[Snapshot], epoch: int) -> list[int | None]:
    """Each model's necessary rank at ``epoch``."""
    return [m.necessary_rank for m in next(r for r in snapshots_from_json(records) if r.epoch == epoch).models]


def threshold_table(curves: dict[str, dict], levels: Sequence[float]) -> pandas.DataFrame:
    """Mean core dimension of each arm (columns) when the necessary rank's threshold is each of
    ``levels`` (rows): :func:`~corelib.experiments.modular_runs.first_rank_at_or_below` on the
    removal curves, averaged over models (NaN where a model's curve never gets that low)."""
    import pandas as pd

    rows = {
        round(float(level), 4): {arm: mean_rank(first_rank_at_or_below(c, level)) for arm, c in curves.items()}
        for level in levels
    }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("threshold")


def _overlap(a: Sequence[float], b: Sequence[float]) -> str:
    """Whether two sets of per-model values can be told apart: ``"overlap"`` when their ranges
    share a value (or either is empty), else ``"do not overlap"`` (three seeds: no more is said)."""
    if not a or not b or (min(a) <= max(b) and min(b) <= max(a)):
        return "overlap"
    return "do not overlap"


def _frequency_values(params: ModularParams, summary: InflationSummary, spectra: dict[str, dict]) -> dict[str, object]:
    def mean_count(arm: str, epoch: int) -> float:
        spectrum = spectra[arm]
        return float(spectrum["count"][spectrum["epoch"] == epoch].mean())

    return {
        "wd_frequencies_start": mean_count("wd", summary.start),
        "wd_frequencies_end": mean_count("wd", summary.end),
        "no_frequencies_start": mean_count("no_wd", summary.start),
        "no_frequencies_end": mean_count("no_wd", summary.end),
        "frequencies_init": float(spectra["wd"]["count"][0].mean()),
        "frequencies_max": params.p // 2,
    }


def _arm_values(wd: ArmSummary, no: ArmSummary) -> dict[str, float]:
    """Both arms' summaries under their glue names (``wd_``: weight decay kept, ``no_``: removed)."""
    return {
        "wd_core_dim_start": wd.core_dim_start,
        "wd_core_dim_end": wd.core_dim_end,
        "wd_necessary_rank_start": wd.necessary_rank_start,
        "wd_necessary_rank_end": wd.necessary_rank_end,
        "wd_sufficient_rank_start": wd.sufficient_rank_start,
        "wd_sufficient_rank_end": wd.sufficient_rank_end,
        "wd_modes_start": wd.modes_start,
        "wd_modes_end": wd.modes_end,
        "wd_test_acc_start": wd.test_acc_start,
        "wd_test_acc_end": wd.test_acc_end,
        "wd_core_dim_end_working": wd.core_dim_end_working,
        "wd_modes_end_working": wd.modes_end_working,
        "wd_n_working_end": wd.n_working_end,
        "no_core_dim_start": no.core_dim_start,
        "no_core_dim_end": no.core_dim_end,
        "no_necessary_rank_start": no.necessary_rank_start,
        "no_necessary_rank_end": no.necessary_rank_end,
        "no_sufficient_rank_start": no.sufficient_rank_start,
        "no_sufficient_rank_end": no.sufficient_rank_end,
        "no_modes_start": no.modes_start,
        "no_modes_end": no.modes_end,
        "no_test_acc_start": no.test_acc_start,
        "no_test_acc_end": no.test_acc_end,
        "no_core_dim_end_working": no.core_dim_end_working,
        "no_modes_end_working": no.modes_end_working,
        "no_n_working_end": no.n_working_end,
    }


def inflation_glue_values(params: ModularParams, chapter: dict) -> dict[str, object]:
    """Every value the core-inflation chapter quotes, by glue name: numbers, per-model lists of
    numbers and short status words (no sentences).

    ``chapter`` holds ``summary`` (:func:`inflation_summary`), ``arms``, ``histories``, ``curves``
    and ``spectra`` (per arm), and the chapter's ``collapse_threshold``, ``middle_level`` and
    ``loose_level`` (thresholds of the necessary rank besides 2/p) and ``frequency_share``; and
    ``recorded`` (:func:`corelib.experiments.paper_scale.recorded_inflation`, None when no
    paper-scale run is recorded) with ``agreement``
    (:func:`corelib.experiments.paper_scale.inflation_agreement`).
    """
    summary, curves = chapter["summary"], chapter["curves"]
    wd, no = summary.wd, summary.no_wd
    start, end, loose = summary.start, summary.end, chapter["loose_level"]
    values = _arm_values(wd, no)
    values |= {
        "start": start,
        "end": end,
        "span": end - start,
        "grok_threshold": params.grok_threshold,
        "branch_epoch": params.branch_epoch,
        "branch_weight_decay": params.branch_weight_decay,
        "dropout": params.dropout,
        "long_epochs": params.long_epochs,
        "paper_long_epochs": ModularParams().long_epochs,
        "n_models": len(params.seeds),
        "collapse_threshold": chapter["collapse_threshold"],
        "middle_level": chapter["middle_level"],
        "loose_level": loose,
        "chance_level": params.chance_level,
        "frequency_share": chapter["frequency_share"],
        "wd_gap_start": wd.necessary_rank_start - wd.sufficient_rank_start,
        "wd_gap_end": wd.necessary_rank_end - wd.sufficient_rank_end,
        "no_gap_end": no.necessary_rank_end - no.sufficient_rank_end,
    }
    ends = {arm: [v for v in necessary_ranks(chapter["arms"][arm], end) if v is not None] for arm in ARMS}
    values["dim_ranges"] = _overlap(*ends.values())
    wd_c, no_c = (collapse_summary(chapter["histories"][a], start, end, chapter["collapse_threshold"]) for a in ARMS)
    values |= {
        "wd_collapses": wd_c.per_model,
        "wd_collapse_pct": wd_c.percent,
        "wd_collapse_longest": wd_c.longest,
        "wd_necessary_end_list": listed(necessary_ranks(chapter["arms"]["wd"], end)),
        "wd_loose_end_list": listed(first_rank_at_or_below(curves["wd"], loose)),
        "no_collapses": no_c.per_model,
        "no_collapse_pct": no_c.percent,
        "no_collapse_longest": no_c.longest,
        "no_necessary_end_list": listed(necessary_ranks(chapter["arms"]["no_wd"], end)),
        "no_loose_end_list": listed(first_rank_at_or_below(curves["no_wd"], loose)),
    }
    values |= _frequency_values(params, summary, chapter["spectra"])
    return values | _recorded_values(chapter.get("recorded"), chapter.get("agreement"), chapter["collapse_threshold"])


_RECORDED_ARM_NAMES = (
    *("rec_wd_core_dim_start", "rec_wd_core_dim_end", "rec_no_core_dim_start", "rec_no_core_dim_end"),
    *("rec_wd_necessary_rank_start", "rec_wd_necessary_rank_end", "rec_no_necessary_rank_start"),
    *("rec_no_necessary_rank_end", "rec_wd_sufficient_rank_start", "rec_wd_sufficient_rank_end"),
    *("rec_no_sufficient_rank_start", "rec_no_sufficient_rank_end", "rec_wd_modes_start", "rec_wd_modes_end"),
    *("rec_no_modes_start", "rec_no_modes_end", "rec_wd_test_acc_start", "rec_wd_test_acc_end"),
    *("rec_no_test_acc_start", "rec_no_test_acc_end"),
)
"""The glue names of :func:`_recorded_arm_values`."""


def _recorded_arm_values(wd: dict, no: dict) -> dict[str, float]:
    """Each arm's mean core dimension, necessary and sufficient rank, modes and test accuracy, at the
    branch (``start``) and the end, of the recorded run (``wd``, ``no``: its summary's arms)."""
    return {
        "rec_wd_core_dim_start": wd.core_dim_start,
        "rec_wd_core_dim_end": wd.core_dim_end,
        "rec_no_core_dim_start": no.core_dim_start,
        "rec_no_core_dim_end": no.core_dim_end,
        "rec_wd_necessary_rank_start": wd.necessary_rank_start,
        "rec_wd_necessary_rank_end": wd.necessary_rank_end,
        "rec_no_necessary_rank_start": no.necessary_rank_start,
        "rec_no_necessary_rank_end": no.necessary_rank_end,
        "rec_wd_sufficient_rank_start": wd.sufficient_rank_start,
        "rec_wd_sufficient_rank_end": wd.sufficient_rank_end,
        "rec_no_sufficient_rank_start": no.sufficient_rank_start,
        "rec_no_sufficient_rank_end": no.sufficient_rank_end,
        "rec_wd_modes_start": wd.modes_start,
        "rec_wd_modes_end": wd.modes_end,
        "rec_no_modes_start": no.modes_start,
        "rec_no_modes_end": no.modes_end,
        "rec_wd_test_acc_start": wd.test_acc_start,
        "rec_wd_test_acc_end": wd.test_acc_end,
        "rec_no_test_acc_start": no.test_acc_start,
        "rec_no_test_acc_end": no.test_acc_end,
    }


def _recorded_values(
    recorded: RecordedInflation | None, agreement: InflationAgreement | None, collapse_threshold: float = 0.9
) -> dict[str, object]:
    """The recorded paper-scale run as the core-inflation chapter quotes it (``rec_*``): the means
    of each arm at the branch and at the end, growth factors, how far the weight-decay arm's core
    dimension lies below the paper's at both ends (percent of the paper's value), when the mean
    core dimension has grown halfway and nine tenths of the way (:func:`growth_epoch`; for the
    arm without weight decay, in epochs after the branch), necessary-minus-sufficient gaps,
    training collapses per model after the branch
    (:func:`~corelib.experiments.modular_runs.collapse_summary`), the most rotational modes there
    can be, the dropout and the number of test pairs (NaN without a record); the
    run's name, settings, size and training time, and how this build's snapshots compare with it
    (``n/a`` without one)."""
    nan = float("nan")
    names = list(_RECORDED_ARM_NAMES)
    names += ["rec_wd_growth", "rec_no_growth", "rec_wd_gap_start", "rec_wd_gap_end", "rec_no_gap_end"]
    names += ["rec_wd_collapses", "rec_no_collapses"]
    names += ["rec_wd_start_below_paper_pct", "rec_wd_end_below_paper_pct"]
    names += ["rec_wd_growth_half_epoch", "rec_wd_growth_90_epoch", "rec_no_growth_90_after"]
    names += ["rec_modes_max", "rec_dropout", "rec_n_test"]
    about = ("rec_source", "rec_settings", "rec_seeds", "rec_hours", "rec_threads", "rec_cpu", "rec_start", "rec_end")
    if recorded is None:
        return dict.fromkeys(names, nan) | dict.fromkeys(about, NOT_AVAILABLE) | agreement_values(None)
    summary, prov = recorded.summary, recorded.provenance
    wd, no = summary.wd, summary.no_wd
    values = _recorded_arm_values(wd, no)
    values |= {
        "rec_wd_growth": _ratio(wd.core_dim_end, wd.core_dim_start),
        "rec_no_growth": _ratio(no.core_dim_end, no.core_dim_start),
        "rec_wd_gap_start": wd.necessary_rank_start - wd.sufficient_rank_start,
        "rec_wd_gap_end": wd.necessary_rank_end - wd.sufficient_rank_end,
        "rec_no_gap_end": no.necessary_rank_end - no.sufficient_rank_end,
    }
    wd_c, no_c = (
        collapse_summary(history_until(recorded.histories[a], summary.end), summary.start, summary.end,
                         collapse_threshold)
        for a in ARMS
    )  # fmt: skip
    values |= {"rec_wd_collapses": wd_c.per_model, "rec_no_collapses": no_c.per_model}
    start, end, params = summary.start, summary.end, recorded.params

    def grown(arm: str, share: float) -> int | None:
        return _mean_growth_epoch(recorded.arms[arm], start, end, share)

    no_90 = grown("no_wd", 0.9)
    values |= {
        "rec_wd_start_below_paper_pct": 100 * (1 - wd.core_dim_start / claim("inflation.core_dim_grok").value),
        "rec_wd_end_below_paper_pct": 100 * (1 - wd.core_dim_end / claim("inflation.core_dim_end").value),
        "rec_wd_growth_half_epoch": _or_nan(grown("wd", 0.5)),
        "rec_wd_growth_90_epoch": _or_nan(grown("wd", 0.9)),
        "rec_no_growth_90_after": nan if no_90 is None else no_90 - start,
        "rec_modes_max": params.p // 2,
        "rec_dropout": params.dropout,
        "rec_n_test": len(make_data(params)["test"][1]),
    }
    machine = prov.get("machine", {})
    values |= {
        "rec_source": recorded.source,
        "rec_settings": settings_list(recorded.params),
        "rec_seeds": len(recorded.params.seeds),
        "rec_hours": sum(t for t in (prov.get("training_seconds") or {}).values() if t) / 3600,
        "rec_threads": machine.get("logical_cpus", NOT_AVAILABLE),
        "rec_cpu": machine.get("cpu", NOT_AVAILABLE),
        "rec_start": start,
        "rec_end": end,
    }
    return values | agreement_values(agreement)


def _or_nan(value: int | None) -> float | int:
    """``value``, NaN for None (a number to glue either way)."""
    return float("nan") if value is None else value
