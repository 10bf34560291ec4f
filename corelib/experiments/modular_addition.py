"""The modular-addition chapter (Figure 2): how the core emerges as the models grok.

Each model before, at and after its own grokking; the ablations after it; the snap of the
operator's eigenvalues onto the unit circle; when the core dimension condenses; the paper's
claims and every value the chapter quotes. The runs and their analysis are
:mod:`corelib.experiments.modular_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import operators
from .modular_records import ModularAnalysis, Snapshot, snapshots_from_json
from .modular_runs import (
    LONG_RUN_SETTINGS,
    NOT_AVAILABLE,
    ModularParams,
    agreement_values,
    epochs_of,
    grokking_epoch,
    listed,
    model_grokking_epochs,
    settings_list,
)

if TYPE_CHECKING:
    import pandas

    from .paper_scale_records import InflationAgreement, RecordedInflation

__all__ = [
    "EmergenceSummary",
    "phase_epochs",
    "emergence_summary",
    "emergence_claim_values",
    "compact_epoch",
    "first_refined_epoch",
    "phase_table",
    "emergence_glue_values",
]


def phase_epochs(records: list[dict], groks: list[int | None]) -> dict[str, list[int]]:
    """Per model, the snapshots shown as "before", "at" and "after" its own grokking.

    The models grok at different times, so each is shown relative to its own grokking epoch:
    before is the snapshot nearest half of it (memorised, not yet generalising), at is the
    grokking snapshot, after is the last analysed snapshot. A model that never groks uses the
    middle snapshot for "at".
    """
    epochs = epochs_of(records)
    out = {"before": [], "at": [], "after": []}
    for grok in groks:
        at = grok if grok is not None else int(epochs[len(epochs) // 2])
        earlier = epochs[(epochs > 0) & (epochs < at)]
        out["before"].append(int(earlier[np.argmin(np.abs(earlier - at / 2))]) if len(earlier) else int(epochs[0]))
        out["at"].append(int(at))
        out["after"].append(int(epochs[-1]))
    return out


def _at_phase(records: list[Snapshot], epochs: list[int]) -> list[ModularAnalysis]:
    """Model i's analysis at epochs[i]."""
    by_epoch = {r.epoch: r for r in records}
    return [by_epoch[e].models[i] for i, e in enumerate(epochs)]


def _pooled_fraction(models: list[ModularAnalysis], p: int) -> float:
    eig = np.concatenate([np.array(m.eigenvalues).reshape(-1, 2) for m in models])
    return operators.unit_circle_fraction(eig[:, 0] + 1j * eig[:, 1], p) if len(eig) else float("nan")


@dataclass(frozen=True)
class EmergenceSummary:
    """The numbers of Figure 2 (:func:`emergence_summary`). A phase is ``before``, ``at`` or
    ``after`` a model's own grokking; per phase, lists hold one value per model.

    Attributes:
        grok_epoch: the first snapshot at which every model's test accuracy reaches
            ``grok_threshold`` (None: not within the run).
        model_grok_epochs: each model's own grokking epoch (None where it did not grok).
        phases: per phase, each model's snapshot epoch (:func:`phase_epochs`).
        post_grok_keep_ratio_min: the least core-only / full test accuracy over the snapshots
            after each model grokked (None when none did).
        post_grok_remove_max: the largest core-removed accuracy over those snapshots (or None).
        unit_fraction: per phase, the share of the cores' operator eigenvalues on the unit
            circle, pooled over the models.
        modes: per phase, each model's number of Fourier modes.
        core_dim: per phase, each model's core dimension.
        eigenvalues: per phase, each model's operator eigenvalues as ``[re, im]`` pairs.
        core_dim_compact: the first epoch at which the mean core dimension comes within 10 % of
            its least value (:func:`compact_epoch`), or None.
        first_refined_epoch: :func:`first_refined_epoch`.
        final: at the last snapshot, per model: ``test_acc``, ``keep_acc``, ``remove_acc``,
            ``core_dim``, ``necessary_rank``, ``sufficient_rank`` and ``energy_rank``.
    """

    grok_epoch: int | None
    model_grok_epochs: list[int | None]
    phases: dict[str, list[int]]
    post_grok_keep_ratio_min: float | None
    post_grok_remove_max: float | None
    unit_fraction: dict[str, float]
    modes: dict[str, list[int]]
    core_dim: dict[str, list[int]]
    eigenvalues: dict[str, list]
    core_dim_compact: int | None
    first_refined_epoch: int | None
    final: dict[str, list]


def emergence_summary(params: ModularParams, records: Sequence[Snapshot]) -> EmergenceSummary:
    """The numbers of Figure 2: grokking epochs, ablations after them, unit-circle snap, modes
    (``records``: :func:`~corelib.experiments.modular_runs.analyse_arm`'s, or their JSON form)."""
    records = snapshots_from_json(records)
    groks = model_grokking_epochs(records, params.grok_threshold)
    phases = phase_epochs(records, groks)
    at_phase = {k: _at_phase(records, e) for k, e in phases.items()}
    after = [r.models[i] for r in records for i, g in enumerate(groks) if g is not None and r.epoch >= g]
    keep_ratio = [m.keep_acc / m.test_acc for m in after]
    return EmergenceSummary(
        grok_epoch=grokking_epoch(records, params.grok_threshold),
        model_grok_epochs=groks,
        phases=phases,
        post_grok_keep_ratio_min=min(keep_ratio) if keep_ratio else None,
        post_grok_remove_max=max((m.remove_acc for m in after), default=None),
        unit_fraction={k: _pooled_fraction(ms, params.p) for k, ms in at_phase.items()},
        modes={k: [len(m.modes) for m in ms] for k, ms in at_phase.items()},
        core_dim={k: [m.core_dim for m in ms] for k, ms in at_phase.items()},
        eigenvalues={k: [m.eigenvalues for m in ms] for k, ms in at_phase.items()},
        core_dim_compact=compact_epoch(epochs_of(records), [np.mean([m.core_dim for m in r.models]) for r in records]),
        first_refined_epoch=first_refined_epoch(records),
        final={
            key: [getattr(m, key) for m in records[-1].models]
            for key in (
                "test_acc",
                "keep_acc",
                "remove_acc",
                "core_dim",
                "necessary_rank",
                "sufficient_rank",
                "energy_rank",
            )
        },
    )


def first_refined_epoch(records: Sequence[Snapshot]) -> int | None:
    """The first snapshot at which some model's necessary rank exceeds its energy rank.

    Until then every core dimension is the energy rank itself: removing the energy-rank core
    already left at most the chance threshold (before grokking trivially, since there is little
    accuracy to remove). ``None`` when the removal test never adds a dimension.
    """
    for r in records:  # by item: the JSON form of the records, or a part of it, serves too
        if any(m["necessary_rank"] is not None and m["necessary_rank"] > m["energy_rank"] for m in r["models"]):
            return r["epoch"]
    return None


def compact_epoch(epochs, values, tolerance: float = 0.1) -> int | None:
    """The first epoch at which ``values`` come within ``tolerance`` (relative) of their smallest value.

    With the mean core dimension over models this dates when the cores condense into their
    compact form: the paper says they crystallise at grokking. (A later growth, the core
    inflation of the next chapter, does not move it.) ``None`` when no value is finite.
    """
    epochs, values = np.asarray(epochs), np.asarray(values, dtype=float)
    if epochs.shape != values.shape or epochs.ndim != 1 or not len(epochs):
        raise ValueError(
            f"epochs and values must be equal-length 1-d sequences, got {epochs.shape} and {values.shape}."
        )
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must lie in (0, 1), got {tolerance}.")
    if not np.isfinite(values).any():
        return None
    floor = np.nanmin(values)
    return int(epochs[np.flatnonzero(values <= floor + tolerance * abs(floor))[0]])


def emergence_claim_values(summary: EmergenceSummary) -> dict:
    """The measured values of the paper's modular-addition claims (see :mod:`corelib.claims`)."""
    nan = float("nan")
    return {
        "modular.grok_epoch": nan if summary.grok_epoch is None else summary.grok_epoch,
        "modular.keep_ratio": (nan if summary.post_grok_keep_ratio_min is None else summary.post_grok_keep_ratio_min),
        "modular.remove_accuracy": nan if summary.post_grok_remove_max is None else summary.post_grok_remove_max,
        "modular.unit_before": summary.unit_fraction["before"],
        "modular.unit_after": summary.unit_fraction["after"],
        "modular.modes_at_grok": summary.modes["at"] if None not in summary.model_grok_epochs else [nan],
        "modular.core_settles": nan
        if None in (summary.core_dim_compact, summary.grok_epoch)
        else summary.core_dim_compact - summary.grok_epoch,
    }


def phase_table(records: Sequence[Snapshot], summary: EmergenceSummary) -> pandas.DataFrame:
    """Each model before, at and after its own grokking: core dimension, unit-circle share, modes, R²."""
    import pandas as pd

    by_epoch = {r.epoch: r for r in snapshots_from_json(records)}
    rows = []
    for phase, epochs in summary.phases.items():
        for i, epoch in enumerate(epochs):
            m = by_epoch[epoch].models[i]
            rows.append(
                {
                    "phase": phase,
                    "epoch": epoch,
                    "model": f"M{i + 1}",
                    "core dim": m.core_dim,
                    "on unit circle": f"{100 * m.unit_fraction:.0f} %",
                    "modes": len(m.modes),
                    "frequencies": ", ".join(map(str, m.modes)) or "—",
                    "R²": round(m.r2, 3),
                    "R²_h": None if m.r2_heldout is None else round(m.r2_heldout, 3),
                }
            )
    return pd.DataFrame(rows).set_index(["phase", "model"])


def emergence_glue_values(
    params: ModularParams,
    summary: EmergenceSummary,
    recorded: RecordedInflation | None = None,
    agreement: InflationAgreement | None = None,
) -> dict[str, object]:
    """Every value the modular-addition chapter quotes, by glue name: numbers, per-model lists of
    numbers and short status words (no sentences).

    ``recorded``: the recorded paper-scale run (:func:`corelib.experiments.paper_scale.recorded_inflation`),
    or None; ``agreement``: :func:`corelib.experiments.paper_scale.inflation_agreement` of this run with it.
    """
    nan = float("nan")
    values = {
        "snapshot_every": params.snapshot_every,
        "epochs_run": params.epochs,
        "paper_epochs": ModularParams().epochs,
        "energy_pct": round(100 * params.energy),
        "grok_epoch": nan if summary.grok_epoch is None else summary.grok_epoch,
        "n_models": len(params.seeds),
        "final_acc_min": min(summary.final["test_acc"]),
        "keep_ratio_min": summary.post_grok_keep_ratio_min or nan,
        "remove_max": nan if summary.post_grok_remove_max is None else summary.post_grok_remove_max,
        "chance2": params.chance_level,
        "model_groks": listed(summary.model_grok_epochs),
        "first_refined": NOT_AVAILABLE if summary.first_refined_epoch is None else summary.first_refined_epoch,
        "suff_final": listed(summary.final["sufficient_rank"]),
        "energy_final": listed(summary.final["energy_rank"]),
        # settings the prose names (a rerun with -p changes them)
        "n_layers": params.n_layers,
        "d_model": params.d_model,
        "n_heads": params.n_heads,
        "d_ff": params.d_ff,
        "weight_decay": params.weight_decay,
        "dropout": params.dropout,
        "n_jacobians": params.n_jacobians,
        "grok_pct": round(100 * params.grok_threshold),
        "holdout_pct": round(100 * params.holdout_fraction, 6),
    }
    values |= {
        "epoch_before": listed(summary.phases["before"]),
        "frac_before": 100 * summary.unit_fraction["before"],
        "modes_before": listed(summary.modes["before"]),
        "dim_before": listed(summary.core_dim["before"]),
        "epoch_at": listed(summary.phases["at"]),
        "frac_at": 100 * summary.unit_fraction["at"],
        "modes_at": listed(summary.modes["at"]),
        "dim_at": listed(summary.core_dim["at"]),
        "epoch_after": listed(summary.phases["after"]),
        "frac_after": 100 * summary.unit_fraction["after"],
        "modes_after": listed(summary.modes["after"]),
        "dim_after": listed(summary.core_dim["after"]),
    }
    return values | _recorded_emergence_values(recorded, agreement)


def _recorded_emergence_values(
    recorded: RecordedInflation | None, agreement: InflationAgreement | None
) -> dict[str, object]:
    """The recorded paper-scale run's first epochs, as the modular chapter quotes them (``rec_*``):
    its name, settings that differ from the paper's, horizon, grokking epochs and core dimensions,
    and how this build's snapshots compare with it; ``n/a`` throughout when none is recorded."""
    names = ("rec_source", "rec_settings", "rec_epochs", "rec_grok_epoch", "rec_model_groks", "rec_dim_at")
    names += ("rec_dim_after", "rec_modes_at", "rec_core_compact", "rec_core_settles", "rec_first_refined")
    names += ("rec_dim_mean_init", "rec_dim_mean_compact", "rec_energy_pct")
    if recorded is None:
        return dict.fromkeys(names, NOT_AVAILABLE) | agreement_values(None)
    params = recorded.params  # the recorded run's first epochs are the paper's Figure 2
    first = min(params.epochs, params.long_epochs)
    records = [r for r in snapshots_from_json(recorded.arms["wd"]) if r.epoch <= first]
    em = emergence_summary(params, records)
    grok, compact = em.grok_epoch, em.core_dim_compact
    mean_dim = {r.epoch: float(np.mean([m.core_dim for m in r.models])) for r in records}
    values = {
        "rec_source": recorded.source,
        "rec_settings": settings_list(params, LONG_RUN_SETTINGS),
        "rec_epochs": records[-1].epoch,
        "rec_grok_epoch": NOT_AVAILABLE if grok is None else grok,
        "rec_model_groks": listed(em.model_grok_epochs),
        "rec_dim_at": listed(em.core_dim["at"]),
        "rec_dim_after": listed(em.core_dim["after"]),
        "rec_modes_at": listed(em.modes["at"]),
        # when the mean core dimension has condensed (first within 10 % of its least value), and from what
        "rec_core_compact": NOT_AVAILABLE if compact is None else compact,
        "rec_core_settles": NOT_AVAILABLE if None in (compact, grok) else compact - grok,
        "rec_first_refined": NOT_AVAILABLE if em.first_refined_epoch is None else em.first_refined_epoch,
        "rec_dim_mean_init": mean_dim[records[0].epoch],
        "rec_dim_mean_compact": NOT_AVAILABLE if compact is None else mean_dim[compact],
        "rec_energy_pct": round(100 * params.energy),
    }
    return values | agreement_values(agreement)
