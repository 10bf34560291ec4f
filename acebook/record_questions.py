"""The record of the core-inflation chapter's tests of its own explanations (``core_inflation_questions``).

The weight-decay arm of the paper-profile run, trained twice more on one machine: without dropout
(``dropout0``) and with the recorded run's dropout (``control``, so that the two differ in dropout
only). ``export`` reads both finished arms from the results root and writes their typed records
(:class:`corelib.experiments.core_inflation_questions.ArmQuestions`); ``verify`` trains the
dropout-0 arm from scratch to the sample epoch and compares the snapshot with the record at the
level of the claims. Train the arms with::

    python -m acebook.paper_runs advance core_inflation --arm wd --dropout 0
    python -m acebook.paper_runs advance core_inflation --arm wd
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from corelib import agreement
from corelib.agreement import Agreement
from corelib.engine import snapshot_epochs, training_seconds
from corelib.experiments import core_inflation_questions as questions
from corelib.experiments import modular_runs
from corelib.results import StoreError, save_json

from .runner import chapter_parameters

__all__ = ["SAMPLE_EPOCH", "export_questions", "tolerance_epochs", "verify_questions"]

SAMPLE_EPOCH = 100
"""The snapshot a build re-derives: the first after the start, in seconds rather than hours."""


def tolerance_epochs(params: modular_runs.ModularParams) -> list[int]:
    """Where the sufficiency tolerances are compared: the branch, the end of the modular chapter's
    run (the paper's 2000 epochs) where it lies between, and the end of the long run."""
    return sorted(
        {params.branch_epoch, params.long_epochs} | ({params.epochs} if params.epochs < params.long_epochs else set())
    )


def _arm_params(profile: str) -> dict[str, modular_runs.ModularParams]:
    params = modular_runs.ModularParams.from_namespace(chapter_parameters("core_inflation", profile))
    return questions.variant_params(params)


def _check_finished(profile: str, arms: dict[str, modular_runs.ModularParams]) -> None:
    for name, p in arms.items():
        done = snapshot_epochs(modular_runs.arm_dir(p, "wd"))
        if not done or max(done) < p.long_epochs:
            flag = " --dropout 0" if name == "dropout0" else ""
            raise SystemExit(
                f"the weight-decay arm at dropout {p.dropout:g} is at epoch {max(done, default=0)} of "
                f"{p.long_epochs}; finish it with `python -m acebook.paper_runs advance core_inflation --arm wd{flag}`"
                f"{'' if profile == 'paper' else f' --profile {profile}'}."
            )


def export_questions(profile: str, folder: Path) -> dict[str, Any]:
    """Write ``arms.json`` into ``folder``; returns what the provenance adds."""
    arms = _arm_params(profile)
    _check_finished(profile, arms)
    labels = {"dropout0": "dropout 0", "control": f"dropout {arms['control'].dropout:g}, trained again"}
    epochs = tolerance_epochs(arms["control"])
    records = {a: questions.arm_questions(p, labels[a], tolerance_epochs=epochs) for a, p in arms.items()}
    save_json(folder / "arms.json", {a: r.to_json() for a, r in records.items()}, compact=True)
    flag = "" if profile == "paper" else f" --profile {profile}"
    return {
        "params": {a: asdict(p) for a, p in arms.items()},
        "precision": arms["control"].precision,
        "training_seconds": {a: training_seconds(modular_runs.arm_dir(p, "wd")) for a, p in arms.items()},
        "sample_epoch": SAMPLE_EPOCH,
        "rederive": f"python -m acebook.record verify core_inflation_questions{flag} --epochs {SAMPLE_EPOCH}",
    }


def verify_questions(record: dict, epochs: int, tolerance: float) -> Agreement:
    """Re-derive the dropout-0 arm's snapshot at ``epochs`` and compare it with the record."""
    kept = questions.ArmQuestions.from_json(record["arms"]["dropout0"])
    if epochs not in kept.epochs or epochs == 0:
        raise SystemExit(
            f"--epochs must be a recorded snapshot after the start, e.g. {list(kept.epochs[1:5])}; got {epochs}."
        )
    try:
        params = modular_runs.ModularParams(**record["provenance"]["params"]["dropout0"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(
            f"the record's provenance holds no settings of its dropout-0 arm ({exc}); restore it from git: "
            "`git checkout -- recorded/core_inflation_questions_paper`."
        ) from None
    was = questions.sample_records(kept, [epochs])
    now = questions.rederive_sample(params, epochs)
    return agreement.compare(
        was,
        now,
        agreement.snapshot_groups(was, "dropout0"),
        agreement.snapshot_groups(now, "dropout0"),
        tolerance=tolerance,
    )
