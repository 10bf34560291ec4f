"""Tests of the core-inflation chapter's own explanations, on snapshots that exist.

The chapter finds cores smaller than the paper's at both ends of the run and a sufficient
dimension that grows where the paper has it stable, and offers explanations: dropout, the number
of Jacobians, a strict sufficiency test, seed noise. Each function here answers one of them from
the weight snapshots of a trained arm; none trains (a missing snapshot is an error naming the
command that makes it).

- :func:`core_sizes`: energy, necessary and sufficient ranks of each seed at chosen snapshots, for
  the run's settings or a variant of their analysis (e.g. 1 000 Jacobians instead of 64). Cached
  beside the arm's other analyses, under the analysis settings' key.
- :func:`sufficient_by_tolerance`: the sufficient rank when core-only accuracy may fall short of
  the model's by each of several tolerances.
- :func:`seed_interval`: a t-interval of a per-seed statistic; :func:`seed_noise_p`: how likely
  seed noise alone puts three seeds as far from the paper's value as ours are.
- :class:`ArmQuestions` and :func:`arm_questions`: everything the chapter shows about one trained
  weight-decay arm, as a typed record (stored in ``recorded/core_inflation_questions_paper``).
- :func:`finding_values`: the chapter's findings, from the recorded arms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats

from ..engine import load_snapshot, snapshot_epochs
from ..interventions import ablation_curve, accuracy
from ..models import default_device
from ..results import StoreError, compute_once
from .modular_records import ModularAnalysis, Snapshot
from .modular_runs import (
    ModularParams,
    analyse_arm,
    analyse_model,
    analysis_path,
    arm_dir,
    collapse_summary,
    history,
    listed,
    make_data,
    model_core,
    train_arm,
)

__all__ = [
    "ArmQuestions",
    "RECORDED_ARMS",
    "SeedInterval",
    "arm_questions",
    "core_sizes",
    "figure_curves",
    "finding_values",
    "glue_values",
    "question_table",
    "tolerance_table",
    "rederive_sample",
    "same_training",
    "sample_records",
    "seed_interval",
    "seed_noise_p",
    "sufficient_by_tolerance",
    "variant_params",
]

TOLERANCES = (0.001, 0.01, 0.05)
"""The sufficiency tolerances compared: the paper's test (0.001) and two looser ones."""

MANY_JACOBIANS = 1000
"""The reference implementation's number of Jacobians (the paper samples 64)."""


def _snapshot(params: ModularParams, arm: str, epoch: int):
    folder = arm_dir(params, arm)
    if epoch not in snapshot_epochs(folder):
        raise StoreError(
            f"no snapshot of arm {arm!r} at epoch {epoch} in {folder}; train it first "
            "(python -m acebook.paper_runs advance core_inflation ...)."
        )
    return load_snapshot(folder, epoch, default_device())


def core_sizes(params: ModularParams, arm: str, epochs: Sequence[int]) -> dict[int, tuple[ModularAnalysis, ...]]:
    """The analysis of every seed (:func:`corelib.experiments.modular_runs.analyse_model`) at each
    snapshot ``epochs`` of ``arm``, ``{epoch: [analysis per seed]}``, with ``params``' analysis
    settings (``n_jacobians``, ``energy`` …); cached where the chapter's own analyses are."""
    test = make_data(params)["test"]
    out = {}
    for e in epochs:

        def compute(e: int = e) -> dict:
            stack = _snapshot(params, arm, e)
            return Snapshot(e, tuple(analyse_model(stack.model(i), test, params) for i in range(len(stack)))).to_json()

        out[e] = Snapshot.from_json(compute_once(analysis_path(params, arm, e), compute)).models
    return out


def sufficient_by_tolerance(params: ModularParams, arm: str, epoch: int, tolerances: Sequence[float]) -> np.ndarray:
    """Sufficient rank of each seed at snapshot ``epoch`` for each tolerance: the smallest rank r
    whose core-only accuracy reaches the model's own accuracy minus the tolerance.

    Returns an int array (seeds, tolerances); -1 where no rank reaches it. The paper's test is a
    tolerance of 0.001; a tolerance of k / n_test lets the core miss k more test pairs."""
    tol = np.asarray(tolerances, dtype=float)
    if tol.ndim != 1 or not np.all(np.isfinite(tol)) or np.any((tol < 0) | (tol >= 1)):
        raise ValueError(f"tolerances must be finite numbers in [0, 1); got {list(tolerances)}.")
    stack = _snapshot(params, arm, epoch)
    x, y = test = make_data(params)["test"]
    out = []
    for i in range(len(stack)):
        model = stack.model(i)
        with torch.no_grad():
            baseline = accuracy(model, x, y, score_positions="last")
        _, full, _, intervened = model_core(model, test, params)
        curve = ablation_curve(full, intervened, "keep")  # accuracy kept at ranks 1..D
        out.append([_first_at_least(curve, baseline - t) for t in tol])
    return np.asarray(out, dtype=int)


def _first_at_least(curve: np.ndarray, level: float) -> int:
    hits = np.flatnonzero(curve >= level)
    return int(hits[0]) + 1 if hits.size else -1


@dataclass(frozen=True)
class SeedInterval:
    """A per-seed statistic summarised over seeds.

    Attributes:
        mean: the mean over seeds.
        low, high: the two-sided t-interval of the mean at ``level``.
        n: the number of seeds.
        level: the confidence level.
    """

    mean: float
    low: float
    high: float
    n: int
    level: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def seed_interval(values: Sequence[float], level: float = 0.95) -> SeedInterval:
    """The t-interval of the mean of ``values`` (one per seed; at least two)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)):
        raise ValueError(f"need at least two finite values, one per seed; got {list(values)}.")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}.")
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return SeedInterval(float(v.mean()), float(v.mean() - half), float(v.mean() + half), int(v.size), level)


def seed_noise_p(values: Sequence[float], paper: float) -> float:
    """Two-sided p-value of a one-sample t-test of ``values`` (one per seed) against ``paper``:
    how often seed noise of the size our seeds show would put their mean at least this far from
    the paper's value, if the paper's value were the true mean. Small (below 0.05): the difference
    is unlikely to be seed noise alone. NaN when every seed has the same value and it is not the
    paper's: without a spread the test says nothing."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.all(np.isfinite(v)):
        raise ValueError(f"need at least two finite values, one per seed; got {list(values)}.")
    if np.all(v == v[0]):  # no spread: the test is undefined unless the value is the paper's
        return 1.0 if v[0] == paper else float("nan")
    return float(stats.ttest_1samp(v, paper).pvalue)


@dataclass(frozen=True)
class ArmQuestions:
    """What the chapter's questions need from one trained weight-decay arm (S seeds).

    Attributes:
        label: what distinguishes the arm, e.g. ``"dropout 0"``.
        dropout: its dropout probability.
        epochs: the analysed snapshot epochs, (E,).
        core_dim, sufficient_rank: per snapshot and seed, (E, S), the chapter's analysis (64
            Jacobians, tolerance 0.001); -1 where a rank was not found.
        test_acc: test accuracy per snapshot and seed, (E, S).
        tolerances: the sufficiency tolerances compared, (T,).
        tolerance_epochs: the snapshots they were compared at, (K,).
        sufficient_by_tolerance: sufficient rank, (K, S, T); -1 where none reaches it.
        n_many_jacobians: the larger number of Jacobians (the reference implementation's).
        many_jacobians_epoch: the snapshot it was compared at.
        core_dim_many_jacobians: core dimension per seed with that many Jacobians, (S,).
        collapses: training-collapse episodes per seed after the branch, (S,).
    """

    label: str
    dropout: float
    epochs: tuple[int, ...]
    core_dim: np.ndarray
    sufficient_rank: np.ndarray
    test_acc: np.ndarray
    tolerances: tuple[float, ...]
    tolerance_epochs: tuple[int, ...]
    sufficient_by_tolerance: np.ndarray
    n_many_jacobians: int
    many_jacobians_epoch: int
    core_dim_many_jacobians: np.ndarray
    collapses: np.ndarray

    VERSION = 1

    def at(self, epoch: int) -> int:
        """The row of snapshot ``epoch``."""
        if epoch not in self.epochs:
            raise KeyError(f"epoch {epoch} was not analysed; analysed: {self.epochs[0]} .. {self.epochs[-1]}.")
        return self.epochs.index(epoch)

    def to_json(self) -> dict[str, Any]:
        """A plain JSON form (with its format version), read back by :meth:`from_json`."""
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        return {"version": self.VERSION, **out}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArmQuestions:
        """The record :meth:`to_json` wrote; shapes and types are checked."""
        if not isinstance(data, dict) or data.get("version") != cls.VERSION:
            raise StoreError(f"not an arm-questions record of version {cls.VERSION}: restore it from git.")
        try:
            arr = {k: np.asarray(data[k]) for k in _ARRAYS}
            out = cls(
                label=str(data["label"]),
                dropout=float(data["dropout"]),
                epochs=tuple(int(e) for e in data["epochs"]),
                tolerances=tuple(float(t) for t in data["tolerances"]),
                tolerance_epochs=tuple(int(e) for e in data["tolerance_epochs"]),
                n_many_jacobians=int(data["n_many_jacobians"]),
                many_jacobians_epoch=int(data["many_jacobians_epoch"]),
                **arr,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"a damaged arm-questions record ({exc}): restore it from git.") from None
        out._check_shapes()
        return out

    def _check_shapes(self) -> None:
        e, s = len(self.epochs), self.core_dim.shape[-1] if self.core_dim.ndim == 2 else -1
        want = {
            "core_dim": (e, s), "sufficient_rank": (e, s), "test_acc": (e, s), "collapses": (s,),
            "sufficient_by_tolerance": (len(self.tolerance_epochs), s, len(self.tolerances)),
            "core_dim_many_jacobians": (s,),
        }  # fmt: skip
        bad = [k for k, shape in want.items() if getattr(self, k).shape != shape]
        if bad:
            raise StoreError(
                f"an arm-questions record with arrays of the wrong shape ({', '.join(bad)}): restore it from git."
            )


_ARRAYS = (
    "core_dim",
    "sufficient_rank",
    "test_acc",
    "sufficient_by_tolerance",
    "core_dim_many_jacobians",
    "collapses",
)


def _per_snapshot(records: list[dict], key: str) -> np.ndarray:
    return np.asarray([[-1 if m[key] is None else m[key] for m in r["models"]] for r in records])


def arm_questions(
    params: ModularParams,
    label: str,
    *,
    tolerance_epochs: Sequence[int],
    tolerances: Sequence[float] = TOLERANCES,
    many_jacobians: int = MANY_JACOBIANS,
    arm: str = "wd",
) -> ArmQuestions:
    """The questions' record of ``arm`` of ``params``' run, from its snapshots (none is trained):
    its analyses at every snapshot, the sufficient rank at ``tolerances`` at ``tolerance_epochs``,
    the core dimension with ``many_jacobians`` at the last snapshot, and the collapses after the
    branch."""
    end = params.long_epochs
    records = analyse_arm(params, arm, end, progress=False)
    if not records or records[-1]["epoch"] != end:
        raise StoreError(f"arm {arm!r} of {label} has not reached epoch {end}; train it first.")
    many = core_sizes(replace(params, n_jacobians=many_jacobians), arm, [end])[end]
    by_tol = [sufficient_by_tolerance(params, arm, e, tolerances) for e in tolerance_epochs]
    spikes = collapse_summary_per_seed(history(params, arm, until=end), params.branch_epoch, end)
    return ArmQuestions(
        label=label,
        dropout=params.dropout,
        epochs=tuple(r["epoch"] for r in records),
        core_dim=_per_snapshot(records, "core_dim"),
        sufficient_rank=_per_snapshot(records, "sufficient_rank"),
        test_acc=np.asarray([[m["test_acc"] for m in r["models"]] for r in records]),
        tolerances=tuple(float(t) for t in tolerances),
        tolerance_epochs=tuple(int(e) for e in tolerance_epochs),
        sufficient_by_tolerance=np.stack(by_tol),
        n_many_jacobians=many_jacobians,
        many_jacobians_epoch=end,
        core_dim_many_jacobians=np.asarray([m["core_dim"] for m in many]),
        collapses=spikes,
    )


def collapse_summary_per_seed(hist: dict, start: int, end: int) -> np.ndarray:
    """Collapse episodes of each seed that begin after ``start`` (up to ``end``), (S,)."""
    n_seeds = len(hist["train_acc"][0])
    per_seed = [collapse_summary(_one_seed(hist, i), start, end).per_model for i in range(n_seeds)]
    return np.asarray(per_seed, dtype=int)


def _one_seed(hist: dict, i: int) -> dict:
    return {**hist, "train_acc": [[row[i]] for row in hist["train_acc"]]}


def found_mean(ranks: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Mean of ranks over ``axis`` leaving out the -1 of "no rank reaches it"; NaN where none is found."""
    r = np.asarray(ranks, dtype=float)
    r = np.where(r < 0, np.nan, r)
    with np.errstate(invalid="ignore"):
        out = np.nanmean(r, axis=axis) if np.isfinite(r).any() else np.full(np.mean(r, axis=axis).shape, np.nan)
    return float(out) if axis is None else out


def _mean_at(arm: ArmQuestions, epoch: int, what: str = "core_dim") -> float:
    return found_mean(getattr(arm, what)[arm.at(epoch)])


def finding_values(
    recorded_wd: list[dict], dropout0: ArmQuestions, control: ArmQuestions, paper: dict[str, float], branch: int
) -> dict[str, float]:
    """The chapter's findings on its own explanations (``inflation.*`` findings of
    :data:`corelib.claims.FINDINGS`).

    ``recorded_wd``: the recorded run's weight-decay arm (snapshot records); ``dropout0``: the same
    arm trained without dropout; ``control``: trained again with the recorded settings on the
    machine that trained ``dropout0`` (so that only the dropout differs); ``paper``: the paper's
    core dimensions at the ``"branch"`` and the ``"end"``; ``branch``: the branch epoch."""
    end = control.epochs[-1]
    last_tol = control.tolerances.index(max(control.tolerances))
    suff = control.sufficient_by_tolerance[:, :, last_tol]
    k_branch, k_end = control.tolerance_epochs.index(branch), control.tolerance_epochs.index(end)
    rec = {r["epoch"]: [m["core_dim"] for m in r["models"]] for r in recorded_wd}
    jac = [
        np.abs(a.core_dim_many_jacobians - a.core_dim[a.at(a.many_jacobians_epoch)]).max() for a in (dropout0, control)
    ]
    return {
        "inflation.dropout_end_core": _mean_at(dropout0, end) - _mean_at(control, end),
        "inflation.dropout_spikes": float(dropout0.collapses.mean() - control.collapses.mean()),
        "inflation.jacobians_count": float(max(jac)),
        "inflation.sufficient_loose_stable": found_mean(suff[k_end]) / found_mean(suff[k_branch]),
        "inflation.grok_core_seed_noise": seed_noise_p(rec[branch], paper["branch"]),
        "inflation.end_core_seed_noise": seed_noise_p(rec[end], paper["end"]),
    }


RECORDED_ARMS = ("dropout0", "control")
"""The arms of the questions' record: the weight-decay arm without dropout, and with the recorded
run's dropout trained again on the same machine."""


def variant_params(params: ModularParams) -> dict[str, ModularParams]:
    """The settings of each recorded arm, from the recorded run's ``params``."""
    return {"dropout0": replace(params, dropout=0.0), "control": params}


def sample_records(arm: ArmQuestions, epochs: Sequence[int]) -> list[dict]:
    """The rows of ``arm`` at ``epochs`` as snapshot records (``{"epoch", "models"}``, as
    :func:`corelib.experiments.modular_runs.analyse_arm` gives them, with the record's quantities)."""
    out = []
    for e in epochs:
        i = arm.at(e)
        models = [
            {"core_dim": int(c), "sufficient_rank": None if s < 0 else int(s), "test_acc": float(a)}
            for c, s, a in zip(arm.core_dim[i], arm.sufficient_rank[i], arm.test_acc[i])
        ]
        out.append({"epoch": e, "models": models})
    return out


def rederive_sample(params: ModularParams, epochs: int, *, progress: bool = False) -> list[dict]:
    """Train the weight-decay arm of ``params`` from scratch to ``epochs`` and analyse its last
    snapshot: the sample of the record a build re-derives, in :func:`sample_records`' form."""
    # horizons and the branch do not enter the weight-decay arm's training identity (the same run)
    short = replace(
        params, epochs=min(params.epochs, epochs), long_epochs=epochs, branch_epoch=min(params.branch_epoch, epochs)
    )
    train_arm(short, "wd", epochs, progress=progress)
    [last] = [r for r in analyse_arm(short, "wd", epochs, progress=False) if r["epoch"] == epochs]
    keep = ("core_dim", "sufficient_rank", "test_acc")
    return [{"epoch": epochs, "models": [{k: m[k] for k in keep} for m in last["models"]]}]


def question_table(arms: dict[str, ArmQuestions], epochs: Sequence[int], grok_threshold: float = 0.99) -> pd.DataFrame:
    """One row per arm: the mean core dimension at ``epochs``, the models that generalise there,
    and the training collapses per model after the branch."""
    rows = {}
    for arm in arms.values():
        row = {f"core dimension, epoch {e}": _mean_at(arm, e) for e in epochs}
        row |= {
            f"models generalising, epoch {e}": int((arm.test_acc[arm.at(e)] >= grok_threshold).sum()) for e in epochs
        }
        row["collapses per model"] = float(arm.collapses.mean())
        rows[arm.label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def tolerance_table(arm: ArmQuestions) -> pd.DataFrame:
    """The mean sufficient rank of ``arm`` at each tolerance (columns) and snapshot (rows), and
    the growth from the first snapshot to the last."""
    means = found_mean(arm.sufficient_by_tolerance, axis=1)  # (K, T)
    table = pd.DataFrame(
        means, index=[f"epoch {e}" for e in arm.tolerance_epochs], columns=[f"{t:g}" for t in arm.tolerances]
    )
    table.loc["growth, last / first"] = means[-1] / means[0]
    table.columns.name = "tolerance"
    return table


def glue_values(
    recorded_wd: list[dict],
    dropout0: ArmQuestions,
    control: ArmQuestions,
    paper: dict[str, float],
    branch: int,
    *,
    grok_threshold: float,
    exercise_epoch: int,
) -> dict[str, float]:
    """The numbers the chapter's section on its explanations glues into its sentences; a model
    generalises at ``grok_threshold`` test accuracy; ``exercise_epoch``: the horizon of the
    exercise that trains the dropout-0 arm again (the chapter's own)."""
    end, loose = control.epochs[-1], control.tolerances.index(max(control.tolerances))
    rec = {r["epoch"]: [m["core_dim"] for m in r["models"]] for r in recorded_wd}
    interval = seed_interval(rec[end])
    suff = found_mean(control.sufficient_by_tolerance, axis=1)  # (K, T)
    first, last = 0, len(control.tolerance_epochs) - 1
    values = {
        "q_d0_end": _mean_at(dropout0, end),
        "q_ctl_end": _mean_at(control, end),
        "q_d0_grokked_branch": int((dropout0.test_acc[dropout0.at(branch)] >= grok_threshold).sum()),
        "q_n_models": int(dropout0.core_dim.shape[1]),
        "q_d0_collapses": float(dropout0.collapses.mean()),
        "q_ctl_collapses": float(control.collapses.mean()),
        "q_n_jacobians": control.n_many_jacobians,
        "q_suff_strict_first": suff[first, 0],
        "q_suff_strict_last": suff[last, 0],
        "q_suff_loose_first": suff[first, loose],
        "q_suff_loose_last": suff[last, loose],
        "q_loose_tolerance": max(control.tolerances),
        "q_loose_growth": suff[last, loose] / suff[first, loose],
        "q_strict_growth": suff[last, 0] / suff[first, 0],
        "q_end_low": interval.low,
        "q_end_high": interval.high,
        "q_p_branch": seed_noise_p(rec[branch], paper["branch"]),
        "q_p_end": seed_noise_p(rec[end], paper["end"]),
        "q_d0_branch_acc": listed([f"{a:.2f}" for a in dropout0.test_acc[dropout0.at(branch)]]),
        "q_exercise_epoch": exercise_epoch,
        "q_d0_core_exercise": (
            listed(dropout0.core_dim[dropout0.at(exercise_epoch)].tolist())
            if exercise_epoch in dropout0.epochs
            else "n/a"
        ),
    }
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in values.items()}  # glue reads plain numbers


def figure_curves(dropout0: ArmQuestions, control: ArmQuestions, recorded_wd: list[dict]) -> dict:
    """Panel A's curves, ``{label: (epochs, core_dim (E, S))}``: both arms and the recorded run."""
    rec = (np.asarray([r["epoch"] for r in recorded_wd]), _per_snapshot(recorded_wd, "core_dim"))
    return {
        "dropout 0": (np.asarray(dropout0.epochs), dropout0.core_dim),
        f"dropout {control.dropout:g}": (np.asarray(control.epochs), control.core_dim),
        "recorded": rec,
    }


def same_training(a: ModularParams, b: ModularParams) -> bool:
    """Whether two settings train the same weight-decay arm (horizons and analysis aside)."""
    return a.training_identity() == b.training_identity() and a.analysis_identity() == b.analysis_identity()
