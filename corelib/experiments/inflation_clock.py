"""Beyond the paper: the clock of core inflation, and the interpretability window.

**The clock.** The paper's grokking theory says the relaxation time scales as ``1 / (lr * wd)``
(AdamW shrinks every weight by ``1 - lr * wd`` per step). If core inflation runs on that clock,
the state of a run is a function of the rescaled time ``tau = lr * wd * steps`` alone, and runs at
several ``(lr, wd)`` pairs fall on one curve when plotted against ``tau``. The paper's run (lr
1e-3, wd 1, 3 steps per epoch) reaches ``tau = 60`` at its 20 000 epochs; a run at six times its
``lr * wd`` gets there in a sixth of the epochs. :func:`run_clock` trains and analyses one
modular-addition run per pair, exactly as the core-inflation chapter does (the same model,
seeds and snapshot analysis; each pair's snapshot schedule is the paper's scaled to its clock),
and :func:`collapse` measures how much closer the curves come when rescaled.

**The window.** The paper proposes to anneal weight decay toward zero shortly after grokking, to
keep the compact core. :func:`run_window` branches one run at its grokking snapshot into: weight
decay kept; removed at once (the paper's arm); annealed linearly to zero over two spans; and
removed late, after the core has grown. Every time here is given in ``tau``, so the experiment
means the same on any clock (on the paper's, ``tau = 1.5`` is 500 epochs).

The clock is :mod:`corelib.experiments.inflation_clock_pairs`, the window's arms
:mod:`corelib.experiments.inflation_clock_arms`, their typed records (runs, windows, curves)
:mod:`corelib.experiments.inflation_clock_records`; this module holds the chapter's settings, its
run, tables, glued values and the agreement with a record. Two chapters show the experiment:
``inflation_clock`` runs both parts (:func:`run`) and shows the clock; it keeps the window's arms
in the results root (:func:`save_window`), from which ``interpretability_window`` reads them
(:func:`load_window`) beside the window on the paper's own clock
(:mod:`corelib.experiments.inflation_clock_window`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas

from .. import agreement
from .._checks import MAX_EPOCHS, check_decay, check_seeds, check_settings
from ..engine import PrefixData, plant_snapshot, resolve_precision
from ..models import default_device
from ..results import StoreError, fresh_results_root, load_json, params_key, results_root, save_json
from . import modular_runs
from .inflation_clock_arms import (
    WINDOW_ARMS,
    WindowSummary,
    arm_at_branch,
    run_window,
    window_arms,
    window_at_tau,
    window_base,
    window_branch_epoch,
    window_curves,
    window_summary,
)
from .inflation_clock_pairs import (
    APART_WORDS,
    METRICS,
    RECORDED_LABEL,
    REFERENCE_RATE,
    SHARED,
    ClockSummary,
    EndState,
    Runs,
    apart,
    clock_summary,
    collapse,
    curves,
    epochs_for,
    pair_label,
    pair_params,
    recorded_run,
    run_clock,
    same_product,
    spread,
    state_at,
    steps_per_epoch,
)
from .inflation_clock_records import (
    ClockRun,
    Curve,
    Window,
    WindowArmRun,
    WindowCurve,
    as_clock_runs,
    as_window,
    clock_runs_from_json,
    clock_runs_to_json,
)

if TYPE_CHECKING:
    from .paper_scale_records import RecordedClock, RecordedInflation, RecordedWindow

__all__ = [
    "REFERENCE_RATE",
    "WINDOW_ARMS",
    "WINDOW_SAMPLE_ARMS",
    "window_at_tau",
    "window_tau_table",
    "window_sample_agreement",
    "window_curves",
    "state_at",
    "arm_at_branch",
    "ClockParams",
    "steps_per_epoch",
    "pair_params",
    "pair_label",
    "run_clock",
    "curves",
    "spread",
    "collapse",
    "same_product",
    "window_arms",
    "window_base",
    "window_branch_epoch",
    "run_window",
    "window_summary",
    "clock_summary",
    "glue_values",
    "APART_WORDS",
    "runs_table",
    "collapse_table",
    "recorded_table",
    "same_product_table",
    "window_table",
    "finding_values",
    "record_numbers",
    "compact",
    "record_agreement",
    "summarise",
    "run",
    "RECORDED_LABEL",
    "clock_glue_values",
    "window_glue_values",
    "clock_finding_values",
    "window_finding_values",
    "WINDOW_FOLDER",
    "FastWindow",
    "save_window",
    "load_window",
    "ClockRun",
    "Curve",
    "Window",
    "WindowArmRun",
    "WindowCurve",
    "clock_runs_from_json",
    "clock_runs_to_json",
]


@dataclass(frozen=True)
class ClockParams:
    """Settings of both experiments; the model, task and analysis are the core-inflation chapter's.

    Times are rescaled times ``tau = lr * wd * optimizer steps`` (the paper's 20 000 epochs: 60).
    """

    p: int = 53
    train_fraction: float = 0.5
    split_seed: int = 42
    seeds: tuple[int, ...] = (1031, 1032, 1033)
    batch_size: int = 512
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    n_layers: int = 2
    dropout: float = 0.1
    precision: str = "fp32"  # or "bf16", or "auto": bf16 where the hardware computes it natively
    eval_every: int = 10
    n_jacobians: int = 64
    energy: float = 0.99
    grok_threshold: float = 0.99
    pairs: tuple[tuple[float, float], ...] = ((1e-3, 1.0), (1e-3, 3.0), (2e-3, 3.0), (3e-3, 2.0))  # (lr, wd)
    horizon: float = 60.0  # tau at which each pair's run ends
    window_pair: tuple[float, float] = (1e-3, 1.0)  # the clock of the window's arms
    window_horizon: float = 60.0
    anneal: tuple[float, float] = (1.5, 6.0)  # tau over which the decay ramps to 0 (500, 2000 epochs at 1e-3)
    late_removal: float = 18.0  # tau of the late removal (epoch 6000 at 1e-3)
    window_branch: float | None = None  # tau of the window's branch; None: the grokking snapshot
    snapshot_unit: int = 100  # snapshot interval at the reference rate (then 20x it, every 5x)

    def __post_init__(self):
        object.__setattr__(self, "precision", resolve_precision(self.precision, default_device()))
        # the seed noise that every comparison is judged against needs two seeds at least
        object.__setattr__(self, "seeds", check_seeds("ClockParams", self.seeds, at_least=2))
        try:
            object.__setattr__(self, "pairs", tuple((float(lr), float(wd)) for lr, wd in self.pairs))
            object.__setattr__(self, "window_pair", tuple(float(x) for x in self.window_pair))
            object.__setattr__(self, "anneal", tuple(float(x) for x in self.anneal))
        except (TypeError, ValueError):
            raise ValueError(
                "ClockParams: pairs must list (lr, wd) pairs of numbers, e.g. [[1e-3, 1.0], [2e-3, 1.0]]; "
                f"window_pair one such pair and anneal two numbers; got pairs={self.pairs!r}, "
                f"window_pair={self.window_pair!r}, anneal={self.anneal!r}."
            ) from None
        if not self.pairs or len(set(self.pairs)) != len(self.pairs):
            raise ValueError(f"ClockParams: pairs must list distinct (lr, wd) pairs, got {self.pairs}.")
        if len(self.window_pair) != 2 or len(self.anneal) != 2:
            raise ValueError("ClockParams: window_pair is one (lr, wd) pair and anneal two spans of tau.")
        check_settings(
            "ClockParams",
            positive={
                **{f"pairs[{i}]": min(pair) for i, pair in enumerate(self.pairs)},
                "window_pair": min(self.window_pair),
                "horizon": self.horizon,
                "window_horizon": self.window_horizon,
                "anneal": min(self.anneal),
                "late_removal": self.late_removal,
                **({} if self.window_branch is None else {"window_branch": self.window_branch}),
            },
            integers={"snapshot_unit": self.snapshot_unit},
        )
        if not self.anneal[0] < self.anneal[1]:
            raise ValueError(
                f"ClockParams: anneal lists the short span of tau, then the long one (arms anneal_short, anneal_long); "
                f"got {list(self.anneal)}. Give them in increasing order, e.g. [1.5, 6.0]."
            )
        for lr, wd in (*self.pairs, self.window_pair):
            check_settings("ClockParams", rates={"lr of a pair": lr})
            check_decay("ClockParams", lr, wd, "wd (of pairs or window_pair)")
            tau = max(self.horizon, self.window_horizon)
            longest = tau / (lr * wd)
            if longest > MAX_EPOCHS:
                raise ValueError(
                    f"ClockParams: the pair (lr {lr:g}, wd {wd:g}) reaches tau {tau:g} "
                    f"only after {longest:,.0f} epochs, more than {MAX_EPOCHS:,}; choose a larger lr x wd or a "
                    "shorter horizon."
                )
        if not self.late_removal < self.window_horizon:
            raise ValueError(
                f"ClockParams: late_removal ({self.late_removal}) must come before window_horizon "
                f"({self.window_horizon}); it is a tau."
            )
        self.base()  # the shared settings checked by ModularParams

    @classmethod
    def from_namespace(cls, namespace: dict) -> ClockParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    def base(self) -> modular_runs.ModularParams:
        """The modular-addition settings these experiments share (at the paper's lr and wd)."""
        return modular_runs.ModularParams(**{k: getattr(self, k) for k in SHARED})


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ClockChapter:
    """What :func:`run` returns.

    Attributes:
        clock: :class:`ClockSummary`.
        curves: per metric (:data:`METRICS`), per run its :class:`Curve`: ``epochs``, ``tau`` and
            the per-seed ``values`` with their ``mean`` and ``sem``.
        window: :class:`WindowSummary`.
        window_curves: per arm its :class:`WindowCurve`: ``epochs``, ``branch`` and per model
            ``core_dim``, ``modes`` and ``test_acc``.
        record: with a record, its ``source``, ``training_seconds`` and the ``agreement`` of this
            build's re-derived epochs with it (:func:`record_agreement`); else None.
        window_data: the window's arms as a record keeps them (:func:`compact`), which
            :func:`save_window` keeps for the chapter that shows them.
    """

    clock: ClockSummary
    curves: dict[str, dict[str, Curve]]
    window: WindowSummary
    window_curves: dict[str, WindowCurve]
    record: dict[str, Any] | None
    window_data: dict[str, Any] | None = None


# ----------------------------------------------------------------------------- what the chapter shows


def _seeds(row: EndState) -> str:
    return f"{row.core_dim_min:.0f}–{row.core_dim_max:.0f}"


def runs_table(clock: ClockSummary) -> pandas.DataFrame:
    """One row per run of :func:`clock_summary`: its lr x wd relative to the paper's, epochs, tau
    at the end, and at the end the mean core dimension with its range over seeds, modes and test
    accuracy."""
    rows = {
        label: {
            "lr·wd / paper's": round(v.rate_ratio, 2),
            "epochs": v.epochs,
            "τ at the end": round(v.tau_end, 1),
            "core dim.": round(v.core_dim, 1),
            "seeds": _seeds(v),
            "modes": round(v.modes, 1),
            "test acc.": round(v.test_acc, 3),
        }
        for label, v in clock.pairs.items()
    }
    return pandas.DataFrame.from_dict(rows, orient="index").rename_axis("run")


def collapse_table(clock: ClockSummary) -> pandas.DataFrame:
    """Per metric of :func:`collapse`: the runs compared, the spreads against epochs and against
    tau, their ratio (below 1: closer when rescaled) and the seed noise."""
    names = {"core_dim": "core dimension", "gap": "necessary − sufficient", "modes": "rotational modes"}
    rows = {
        names[m]: {
            "runs": c.n_runs,
            "spread vs epochs": round(c.spread_epochs, 2),
            "spread vs τ": round(c.spread_tau, 2),
            "ratio": round(c.ratio, 2),
            "seed noise": round(c.noise, 2),
        }
        for m, c in clock.collapse.items()
    }
    return pandas.DataFrame.from_dict(rows, orient="index").rename_axis("metric")


def recorded_table(clock: ClockSummary) -> pandas.DataFrame | None:
    """Each run beside the recorded paper run at the same tau and at the same epoch: epochs and
    core dimensions (seed ranges), and whether the run's core is larger, smaller or not told apart
    (:data:`APART_WORDS`). None without a recorded run."""
    rec = clock.recorded
    if rec is None:
        return None
    rows = {}
    for label, at_tau in rec.at_pair_ends.items():
        run, at_epoch = clock.pairs[label], rec.at_pair_epochs[label]
        rows[label] = {
            "epochs": run.epochs,
            "core dim. (seeds)": _seeds(run),
            "paper run, same τ: epoch": at_tau.epoch,
            "its core dim.": _seeds(at_tau),
            "vs same τ": APART_WORDS[apart(run, at_tau)],
            "paper run, same epoch: core dim.": _seeds(at_epoch),
            "vs same epoch": APART_WORDS[apart(run, at_epoch)],
        }
    return pandas.DataFrame.from_dict(rows, orient="index").rename_axis("run")


def same_product_table(clock: ClockSummary) -> pandas.DataFrame:
    """Each two runs with the same lr x wd that end at the same epoch: their core dimensions (seed
    ranges) and modes there, and whether the first core is larger, smaller or not told apart."""
    rows = []
    for same in clock.same_product:
        a, b = same.runs
        ra, rb = clock.pairs[a], clock.pairs[b]
        rows.append(
            {
                "runs": f"{a} / {b}",
                "epoch": same.epochs,
                "core dim.": f"{_seeds(ra)} / {_seeds(rb)}",
                "modes": f"{ra.modes:.1f} / {rb.modes:.1f}",
                "first vs second": APART_WORDS[same.apart],
            }
        )
    return pandas.DataFrame(rows, columns=["runs", "epoch", "core dim.", "modes", "first vs second"])


def window_table(window: WindowSummary) -> pandas.DataFrame:
    """One row per arm of :func:`window_summary`: where it branched, its end, the mean core
    dimension with its range over seeds, modes, test accuracy and loss spikes per model and 1000
    epochs after its branch; for the late removal, its core dimension at the branch too. An arm
    the summary leaves out (see :func:`window_summary`'s ``until``) has no row."""
    rows = {}
    for name in (n for n in WINDOW_ARMS if n in window.arms):
        arm = window.arms[name]
        rows[name] = {
            "branch": "—" if arm.branch is None else arm.branch,
            "end": arm.end,
            "core dim.": round(arm.core_dim, 1),
            "seeds": _seeds(arm),
            "at its branch": f"{arm.at_branch.core_dim:.1f}" if arm.at_branch is not None else "",
            "modes": round(arm.modes, 1),
            "test acc.": round(arm.test_acc, 3),
            "spikes / 1000 ep.": round(arm.spikes_per_1000, 2),
        }
    return pandas.DataFrame.from_dict(rows, orient="index").rename_axis("arm")


def window_tau_table(at_tau: dict[float, WindowSummary]) -> pandas.DataFrame:
    """:func:`window_table` at each tau of :func:`window_at_tau`, indexed by (tau, arm)."""
    return pandas.concat({tau: window_table(w) for tau, w in at_tau.items()}, names=["tau", "arm"])


def window_finding_values(window: WindowSummary) -> dict[str, float]:
    """The values of the window's findings on its own clock (:data:`corelib.claims.FINDINGS`, ids
    ``window.*``), for ``claims.record``."""
    arms = window.arms
    control, annealed = arms["restarted"], [arms["anneal_short"], arms["anneal_long"]]
    late = arms["removed_late"]
    return {
        "window.restart_grows": control.core_dim_min - arms["kept"].core_dim_max,
        "window.anneal_smaller": control.core_dim_min - max(a.core_dim_max for a in annealed),
        "window.anneal_larger": min(a.core_dim_min for a in annealed) - control.core_dim_max,
        "window.removed_smaller": control.core_dim_min - arms["removed"].core_dim_max,
        "window.late_removal_deflates": late.at_branch.core_dim - late.core_dim,
    }


def clock_finding_values(clock: ClockSummary) -> dict[str, float]:
    """The values of the clock's findings (:data:`corelib.claims.FINDINGS`, ids ``clock.*``), for
    ``claims.record``; a finding the settings do not measure (no recorded paper run) is left out."""
    ratio = clock.collapse["core_dim"].ratio
    out = {"clock.tau_collapse": ratio, "clock.tau_separates": ratio}
    rec = clock.recorded
    if rec is not None and rec.at_pair_ends:
        for key, where in (
            ("clock.smaller_at_equal_tau", "at_pair_ends"),
            ("clock.smaller_at_equal_epochs", "at_pair_epochs"),
        ):
            out[key] = min(
                getattr(rec, where)[k].core_dim_min - clock.pairs[k].core_dim_max for k in getattr(rec, where)
            )
    return out


def finding_values(clock: ClockSummary, window: WindowSummary) -> dict[str, float]:
    """Both experiments' findings: :func:`clock_finding_values` and :func:`window_finding_values`."""
    return {**window_finding_values(window), **clock_finding_values(clock)}


def clock_glue_values(params: ClockParams, clock: ClockSummary) -> dict[str, float | int | str]:
    """The numbers the clock chapter's prose quotes, by glue name (numbers and short labels only)."""
    c, rec = clock.collapse, clock.recorded
    return {
        "n_pairs": len(params.pairs),
        "n_seeds": len(params.seeds),
        "horizon": params.horizon,
        "snapshot_unit": params.snapshot_unit,
        "ratio_core_dim": round(c["core_dim"].ratio, 2),
        "noise_core_dim": round(c["core_dim"].noise, 2),
        "recorded_tau_end": float("nan") if rec is None else round(rec.tau_end, 1),
        "recorded_epochs": float("nan") if rec is None else rec.epochs_end,
    }


def window_glue_values(params: ClockParams, window: WindowSummary) -> dict[str, float | int | str]:
    """The numbers the window chapter's prose quotes of the window on ``params``' clock, by glue
    name (numbers and short labels only)."""
    arms = window.arms
    late, removed, control = arms["removed_late"], arms["removed"], arms["restarted"]
    paper = modular_runs.ModularParams()  # the paper's learning rate and weight decay
    short, long = params.anneal
    return {
        "n_seeds": len(params.seeds),
        "window_pair": pair_label(*params.window_pair),
        "window_horizon": params.window_horizon,
        # after a removal only the learning rate drives the weights: the window's against the paper's
        "window_lr_ratio": params.window_pair[0] / paper.lr,
        "anneal_short": short,
        "anneal_long": long,
        "anneal_short_paper_epochs": round(epochs_for(params, paper.lr, paper.weight_decay, short)),
        "anneal_long_paper_epochs": round(epochs_for(params, paper.lr, paper.weight_decay, long)),
        "window_grok": window.grok_epoch,
        "window_tau_grok": round(window.tau_grok, 2),
        "late_branch": late.branch,
        "late_at_branch": round(late.at_branch.core_dim, 1),
        "late_end": round(late.core_dim, 1),
        "kept_end": round(arms["kept"].core_dim, 1),
        "restarted_end": round(control.core_dim, 1),
        "removed_min": removed.core_dim_min,
        "removed_max": removed.core_dim_max,
        # the removed arm's largest seed against the control's mean core
        "removed_max_over_control": round(removed.core_dim_max / control.core_dim, 2),
    }


def glue_values(params: ClockParams, clock: ClockSummary, window: WindowSummary) -> dict[str, float | int | str]:
    """Both chapters' numbers: :func:`clock_glue_values` and :func:`window_glue_values`."""
    return {**clock_glue_values(params, clock), **window_glue_values(params, window)}


def record_numbers(record: dict[str, Any] | None) -> dict[str, float | int]:
    """What a record cost and how much of it this build re-derived: ``record_minutes`` (its runs'
    training, summed), ``checked_epochs``, ``checked_snapshots``, ``differences`` (numbers that
    differ from the record beyond the exact comparison's tolerance), and the comparison at the
    level of the findings (:mod:`corelib.agreement`): ``checked_quantities`` (quantities measured
    per seed), ``quantities_moved`` (those whose per-seed values moved), ``quantities_beyond``
    (those whose mean moved beyond its envelope) and ``largest_z`` (the largest change of a mean,
    in standard errors of the difference of the means); all 0 without a record; and
    ``seed_errors``, how many of those a mean may move (:data:`corelib.agreement.SEED_ERRORS`)."""
    if record is None:
        return {"record_minutes": 0, "checked_epochs": 0, "checked_snapshots": 0, "differences": 0,
                "checked_quantities": 0, "quantities_moved": 0, "quantities_beyond": 0, "largest_z": 0.0,
                "seed_errors": agreement.SEED_ERRORS}  # fmt: skip
    agree = record["agreement"]
    result = agree["agreement"]
    return {
        "record_minutes": round(sum((record.get("training_seconds") or {}).values()) / 60),
        "checked_epochs": agree["epochs"],
        "checked_snapshots": agree["n_snapshots"],
        "differences": len(agree["differences"]),
        "checked_quantities": len(result.quantities),
        "quantities_moved": result.n_moved,
        "quantities_beyond": len(result.beyond),
        "largest_z": round(result.largest_z, 2),
        "seed_errors": agreement.SEED_ERRORS,
    }


# ----------------------------------------------------------------------------- the chapter's run


def compact(runs: Runs, window: Window | dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a computed experiment (:func:`run_clock`, :func:`run_window`): the JSON
    form (``runs``: :func:`clock_runs_to_json`; ``window``: :meth:`Window.to_json`), the snapshot
    records without their fitted operators (no summary here reads them)."""
    return {
        "runs": clock_runs_to_json({label: r.without_operators() for label, r in as_clock_runs(runs).items()}),
        "window": as_window(window).without_operators().to_json(),
    }


def record_agreement(
    params: ClockParams, record: RecordedClock, epochs: int, *, tolerance: float = 1e-6, progress: bool = True
) -> dict[str, Any]:
    """Re-derive the first ``epochs`` epochs of a record's removed arm (the paper's arm) from
    scratch, in a fresh results root, and compare them with the record: the kept run up to the
    window's branch, then the removed arm after it; their snapshot analyses and training histories.

    Returns ``epochs`` (the last epoch re-derived), ``arms`` (those re-derived), ``n_snapshots``,
    ``differences`` (as :func:`corelib.recorded.compare_values` words them: integers exactly,
    floats within ``tolerance``) and ``agreement``, the :class:`corelib.agreement.Agreement` that
    also compares every per-seed quantity of the snapshots at the level of the findings (seed
    means within their envelope). ``epochs`` 0 checks nothing.
    """
    if epochs < 0:
        raise ValueError(f"check_epochs must be 0 (check nothing) or a number of epochs; got {epochs}.")
    window = as_window(record.window)
    grok = window.grok_epoch
    removed_params, _ = window_arms(params, grok)["removed"]
    pieces = [("kept", window_base(params), "wd", min(epochs, grok))]
    if epochs > grok:
        pieces.append(("removed", removed_params, "no_wd", epochs))
    done, n, arms = 0, 0, []
    recorded_tree, fresh_tree, recorded_groups, fresh_groups = {}, {}, {}, {}
    with fresh_results_root():
        for name, mp, arm, limit in pieces:
            shown = [r for r in window.arms[name].records if r["epoch"] <= limit] if epochs else []
            if not shown or (name == "removed" and shown[-1]["epoch"] <= grok):
                continue
            until = shown[-1]["epoch"]
            modular_runs.train_arm(mp, arm, until, progress=progress)
            fresh = modular_runs.without_operators(modular_runs.analyse_arm(mp, arm, until, progress=progress))
            recorded_tree[name], fresh_tree[name] = modular_runs.without_operators(shown), fresh
            recorded_groups.update(agreement.snapshot_groups(shown, name))
            fresh_groups.update(agreement.snapshot_groups(fresh, name))
            if until > 0:  # nothing trained, no history; compared exactly only (the claims read snapshots)
                recorded_tree[f"{name} history"] = modular_runs.history_until(window.arms[name].history, until)
                fresh_tree[f"{name} history"] = modular_runs.history(mp, arm, until=until)
            done, n, arms = until, n + len(shown), [*arms, name]
    result = agreement.compare(recorded_tree, fresh_tree, recorded_groups, fresh_groups, tolerance=tolerance)
    return {
        "epochs": done,
        "arms": arms,
        "n_snapshots": n,
        "differences": list(result.differences),
        "agreement": result,
    }


WINDOW_SAMPLE_ARMS = ("restarted", "removed", "anneal_short", "anneal_long")
"""The window's arms that branch at grokking: a record's branch weights re-derive their start."""


def window_sample_agreement(
    params: ClockParams,
    record: RecordedWindow,
    arm: str,
    epochs: int,
    *,
    tolerance: float = 1e-6,
    progress: bool = True,
) -> dict[str, Any]:
    """Re-derive the first ``epochs`` epochs of the window's ``arm`` after its branch from a record's
    branch weights (:func:`corelib.experiments.paper_scale.recorded_window`), in a fresh results
    root, and compare its snapshots and training history with the record's.

    The weights at the branch stand in for the run up to it, so a sample of an arm that branches
    late in a long run costs only its own epochs. Returns what :func:`record_agreement` returns
    (``epochs``: the last epoch re-derived).
    """
    window = as_window(record.window)
    _check_sample(window, arm, epochs)
    _check_branch_run(params, record.branch_run)
    grok = window.grok_epoch
    mp, kind = window_arms(params, grok)[arm]
    shown = [r for r in window.arms[arm].records if r["epoch"] <= grok + epochs]
    until = shown[-1]["epoch"]
    with fresh_results_root():
        plant_snapshot(modular_runs.arm_dir(mp, "wd"), record.branch_run, grok, record.branch_weights)
        modular_runs.train_arm(mp, kind, until, progress=progress)
        fresh = modular_runs.without_operators(modular_runs.analyse_arm(mp, kind, until, progress=progress))
        fresh_history = modular_runs.history(mp, kind, until=until)
    history = modular_runs.history_until(window.arms[arm].history, until)
    recorded_tree = {arm: modular_runs.without_operators(shown), f"{arm} history": history}
    fresh_tree = {arm: fresh, f"{arm} history": fresh_history}
    result = agreement.compare(
        recorded_tree,
        fresh_tree,
        agreement.snapshot_groups(shown, arm),
        agreement.snapshot_groups(fresh, arm),
        tolerance=tolerance,
    )
    return {
        "epochs": until,
        "arms": [arm],
        "n_snapshots": len(shown),
        "differences": list(result.differences),
        "agreement": result,
    }


def _check_sample(window: Window, arm: str, epochs: int) -> None:
    """Refuse a sample :func:`window_sample_agreement` cannot re-derive, naming what would do."""
    if arm not in WINDOW_SAMPLE_ARMS:
        raise ValueError(
            f"the sample's arm must branch at grokking, from the recorded weights: one of {WINDOW_SAMPLE_ARMS}; "
            f"got {arm!r}."
        )
    grok = window.grok_epoch
    after = [r["epoch"] - grok for r in window.arms[arm].records if r["epoch"] > grok]
    if not after:
        raise ValueError(f"the recorded arm {arm!r} has no snapshot after its branch at epoch {grok}; re-export it.")
    if not isinstance(epochs, int) or not after[0] <= epochs <= after[-1]:
        raise ValueError(
            f"the sample's epochs after the branch at {grok} must be a whole number from {after[0]} (the arm's first "
            f"snapshot after it) to {after[-1]} (its last); got {epochs!r}."
        )


def _check_branch_run(params: ClockParams, run: dict[str, Any]) -> None:
    """Refuse branch weights of another run than the window's kept run at ``params``."""
    base = window_base(params)
    train = PrefixData.from_tokens(*modular_runs.make_data(base)["train"])
    expected = {"model": base.model_config().to_dict(), "seeds": list(base.seeds), "train_data": train.fingerprint()}
    differs = sorted(k for k, v in expected.items() if run.get(k) != v)
    if differs:
        raise ValueError(
            f"the record's branch weights belong to another run than these settings' kept run (they differ in "
            f"{', '.join(differs)}); pass the record's own settings (its ``params``) or re-export it."
        )


def summarise(
    params: ClockParams,
    runs: Runs,
    window: Window | dict[str, Any],
    recorded: RecordedInflation | None = None,
) -> dict[str, Any]:
    """The chapter's view of computed or recorded runs (:func:`run`'s keys but ``record``)."""
    runs, extra = as_clock_runs(runs), recorded_run(params, recorded)
    if extra is not None:  # its full horizon: a pair at its (lr, wd) is the same run, shorter
        runs = {label: r for label, r in runs.items() if (r.lr, r.wd) != (extra.lr, extra.wd)}
        runs[RECORDED_LABEL] = extra
    return {
        "clock": clock_summary(params, runs, recorded),
        "curves": {m: curves(params, runs, m) for m in METRICS},
        "window": window_summary(params, window),
        "window_curves": window_curves(window),
    }  # the fields of ClockChapter but ``record``


def run(
    params: ClockParams,
    recorded: RecordedInflation | None = None,
    *,
    record: RecordedClock | None = None,
    check_epochs: int = 0,
    progress: bool = True,
) -> ClockChapter:
    """Both experiments, as the chapter shows them: ``clock`` (:func:`clock_summary`, the
    recorded paper run ``recorded`` included in the collapse when it is not one of the pairs),
    ``curves`` (per metric, per run: epochs, tau, values), ``window`` (:func:`window_summary`),
    ``window_curves`` (per arm: epochs and per-model core dimension, modes, test accuracy) and
    ``record``.

    With ``record``, a recorded run of exactly these settings
    (:func:`corelib.experiments.paper_scale.recorded_clock`), the runs and arms are the record's;
    only its first ``check_epochs`` epochs are trained again and compared with it
    (:func:`record_agreement`), and ``record`` holds its ``source`` and that ``agreement``.
    Without one, everything is trained and analysed here and ``record`` is None.
    """
    if check_epochs < 0:
        raise ValueError(f"check_epochs must be 0 (check nothing) or a number of epochs; got {check_epochs}.")
    if record is None:
        runs, window = run_clock(params, progress=progress), run_window(params, progress=progress)
        return ClockChapter(
            **summarise(params, runs, window, recorded), record=None, window_data=compact({}, window)["window"]
        )
    if record.params != params:
        raise ValueError(
            "the record passed to inflation_clock.run was made with other settings than params; pass the record "
            "paper_scale.recorded_clock(params) finds for these settings (None when there is none)."
        )
    checked = record_agreement(params, record, check_epochs, progress=progress)
    if not checked["agreement"].agrees:
        beyond = checked["agreement"].beyond
        warnings.warn(
            f"the recorded clock run differs from what this build re-derived: {len(beyond)} quantities moved beyond "
            f"their seed-noise envelope (the first: {beyond[0].name}); the chapter shows the record.",
            stacklevel=2,
        )
    return ClockChapter(
        **summarise(params, record.runs, record.window, recorded),
        record={
            "source": record.source,
            "training_seconds": record.provenance.get("training_seconds"),
            "agreement": checked,
        },
        window_data=as_window(record.window).to_json(),
    )


# ----------------------------------------------------------------------------- the window, for its chapter

WINDOW_FOLDER = "clock_window"
"""The folder of the results root where the clock chapter keeps its window's arms for the window
chapter (which declares it among its inputs, ``corelib_inputs``)."""
_WINDOW_FILE = "window.json"


@dataclass(frozen=True)
class FastWindow:
    """The window's arms on the clock chapter's clock, as :func:`load_window` reads them back.

    Attributes:
        params: the clock chapter's settings (the window's clock, spans and seeds among them).
        window: :class:`WindowSummary` of the arms at their end.
        curves: per arm its :class:`WindowCurve`, what :func:`corelib.plots.figure_window` draws
            (:func:`window_curves`).
        profile: the profile the clock chapter ran with (``"interactive"`` outside the runner).
        source: the record the arms were read from, None when the clock chapter trained them.
    """

    params: ClockParams
    window: WindowSummary
    curves: dict[str, WindowCurve]
    profile: str
    source: str | None


def _window_path() -> Path:
    return results_root() / WINDOW_FOLDER / _WINDOW_FILE


def save_window(params: ClockParams, chapter: ClockChapter) -> None:
    """Keep the window's arms of ``chapter`` (:func:`run`'s) with ``params`` in the results root
    for the window chapter. An unchanged window is not written again, so that a run that only
    read stored results neither counts as a computation nor changes the window chapter's inputs."""
    if chapter.window_data is None:
        raise ValueError("this ClockChapter keeps no window_data; compute it with inflation_clock.run.")
    data = {
        "params": asdict(params),
        "window": chapter.window_data,
        "profile": os.environ.get("ACE_PROFILE", "interactive"),
        "source": None if chapter.record is None else chapter.record["source"],
    }
    digest = params_key(data)  # a hash of the content, whatever its keys
    path = _window_path()
    if path.exists():
        try:
            if load_json(path).get("digest") == digest:
                return
        except StoreError:  # damaged: written again below
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    save_json(path, {**data, "digest": digest}, compact=True)


def load_window() -> FastWindow:
    """The window the clock chapter kept (:func:`save_window`); an error naming the chapter to run
    when there is none."""
    path = _window_path()
    if not path.exists():
        raise ValueError(
            f"no window of the clock chapter in {path.parent}: the chapter inflation_clock trains (or reads) the "
            "window's arms and keeps them there; run it first, with the same profile "
            "(`ace-book run inflation_clock --profile <profile>`)."
        )
    data = load_json(path)
    running = os.environ.get("ACE_PROFILE")
    if running is not None and data["profile"] != running:
        warnings.warn(
            f"the window kept in {path.parent} is the clock chapter's run with the {data['profile']} profile, not "
            f"{running}; run `ace-book run inflation_clock --profile {running}` to show that profile's.",
            stacklevel=2,
        )
    params = ClockParams(**data["params"])
    try:  # a damaged file is refused here, naming its field
        window = Window.from_json(data["window"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc} (This file: run the chapter inflation_clock again.)") from None
    return FastWindow(
        params=params,
        window=window_summary(params, window),
        curves=window_curves(window),
        profile=data["profile"],
        source=data["source"],
    )
