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

Two chapters show the experiment: ``inflation_clock`` runs both parts (:func:`run`) and shows the
clock; it keeps the window's arms in the results root (:func:`save_window`), from which
``interpretability_window`` reads them (:func:`load_window`) beside the window on the paper's own
clock (:mod:`corelib.experiments.inflation_clock_window`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas

from .. import agreement
from .._checks import MAX_EPOCHS, check_decay, check_seeds, check_settings
from ..engine import PrefixData, plant_snapshot, resolve_precision
from ..models import default_device
from ..results import StoreError, fresh_results_root, load_json, params_key, results_root, save_json
from . import modular_runs

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
]

REFERENCE_RATE = 1e-3  # lr * wd of the paper's run
# "restarted" keeps the decay but branches like the others (a fresh AdamW): the control that
# separates what the decay does from what restarting the optimizer does.
WINDOW_ARMS = ("kept", "restarted", "removed", "anneal_short", "anneal_long", "removed_late")
METRICS = ("core_dim", "gap", "modes")  # gap: necessary - sufficient rank
# Settings of the modular-addition run that the clock experiment shares.
_SHARED = (
    "p",
    "train_fraction",
    "split_seed",
    "seeds",
    "batch_size",
    "d_model",
    "n_heads",
    "d_ff",
    "n_layers",
    "dropout",
    "precision",
    "eval_every",
    "n_jacobians",
    "energy",
    "grok_threshold",
)


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
        return modular_runs.ModularParams(**{k: getattr(self, k) for k in _SHARED})


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class EndState:
    """A run's models at one snapshot: seed means of the core dimension, of the gap (necessary
    minus sufficient rank) and of the rotational modes; the core dimension's range over seeds
    (``core_dim_min``, ``core_dim_max``); the mean test accuracy (a share in [0, 1])."""

    core_dim: float
    gap: float
    modes: float
    core_dim_min: float
    core_dim_max: float
    test_acc: float


@dataclass(frozen=True)
class PairEnd(EndState):
    """One run of the clock at its end: its lr x wd relative to the paper's (``rate_ratio``), its
    last epoch and the tau there, and its :class:`EndState`."""

    rate_ratio: float
    epochs: int
    tau_end: float


@dataclass(frozen=True)
class Collapse:
    """One metric of :func:`collapse`: the spread between the runs' curves against epochs and
    against tau, their ratio (below 1: closer when rescaled), the seed noise and the runs compared."""

    spread_epochs: float
    spread_tau: float
    ratio: float
    noise: float
    n_runs: int


@dataclass(frozen=True)
class SameProduct:
    """Two runs with the same lr x wd that end at the same epoch, and whether the first's core is
    larger (+1), smaller (-1) or not told apart (0) (:func:`_apart`)."""

    runs: tuple[str, str]
    epochs: int
    apart: int


@dataclass(frozen=True)
class RecordedPoint(EndState):
    """The recorded paper run at one snapshot (its epoch and tau) and its :class:`EndState` there."""

    epoch: int
    tau: float


@dataclass(frozen=True)
class RecordedComparison:
    """The recorded paper-profile inflation run beside the clock's runs: its source, where it ends
    (tau and epoch), and per run the snapshot nearest that run's end tau (``at_pair_ends``) and
    nearest its last epoch (``at_pair_epochs``)."""

    source: str
    tau_end: float
    epochs_end: int
    at_pair_ends: dict[str, RecordedPoint]
    at_pair_epochs: dict[str, RecordedPoint]


@dataclass(frozen=True)
class ClockSummary:
    """The clock's numbers (:func:`clock_summary`): per run its end, per metric the collapse, the
    runs with the same lr x wd, and the recorded paper run beside them (None without one)."""

    pairs: dict[str, PairEnd]
    collapse: dict[str, Collapse]
    same_product: list[SameProduct]
    recorded: RecordedComparison | None


@dataclass(frozen=True)
class WindowArm(EndState):
    """One arm of the window at its end (:func:`window_summary`).

    Attributes:
        branch: the epoch it branched from the kept run (None: the kept run itself).
        end: its last epoch.
        spikes_per_model: loss spikes (collapse episodes) per model from the branch to the end.
        spikes_per_1000: the same per 1000 epochs.
        at_branch: for the late removal, the models it started from (:func:`arm_at_branch`; else
            None).
    """

    branch: int | None
    end: int
    spikes_per_model: float
    spikes_per_1000: float
    at_branch: EndState | None = None


@dataclass(frozen=True)
class WindowSummary:
    """The window (:func:`window_summary`): its grokking epoch and tau there, and each arm's end."""

    grok_epoch: int
    tau_grok: float
    arms: dict[str, WindowArm]


@dataclass(frozen=True)
class ClockChapter:
    """What :func:`run` returns.

    Attributes:
        clock: :class:`ClockSummary`.
        curves: per metric, per run: ``epochs``, ``tau`` and the per-seed ``values`` with their ``mean`` and ``sem``.
        window: :class:`WindowSummary`.
        window_curves: per arm: ``epochs``, ``branch`` and per model ``core_dim``, ``modes`` and ``test_acc``.
        record: with a record, its ``source``, ``training_seconds`` and the ``agreement`` of this
            build's re-derived epochs with it (:func:`record_agreement`); else None.
        window_data: the window's arms as a record keeps them (:func:`compact`), which
            :func:`save_window` keeps for the chapter that shows them.
    """

    clock: ClockSummary
    curves: dict[str, dict[str, dict[str, Any]]]
    window: WindowSummary
    window_curves: dict[str, dict[str, Any]]
    record: dict[str, Any] | None
    window_data: dict[str, Any] | None = None


def steps_per_epoch(params: ClockParams | modular_runs.ModularParams) -> int:
    """Optimizer steps per epoch: the training set in batches, the last one partial."""
    mp = params.base() if isinstance(params, ClockParams) else params
    n_train = len(modular_runs.make_data(mp)["train"][0])
    return -(-n_train // mp.batch_size)


def _rate_ratio(lr: float, wd: float) -> float:
    return lr * wd / REFERENCE_RATE


def epochs_for(params: ClockParams, lr: float, wd: float, tau: float) -> float:
    """Epochs a run at (lr, wd) needs to reach rescaled time ``tau``."""
    return tau / (lr * wd * steps_per_epoch(params))


def tau_of(params: ClockParams, lr: float, wd: float, epochs) -> np.ndarray:
    """Rescaled time after ``epochs`` epochs at (lr, wd)."""
    return lr * wd * steps_per_epoch(params) * np.asarray(epochs, dtype=float)


def pair_params(params: ClockParams, lr: float, wd: float, horizon: float | None = None) -> modular_runs.ModularParams:
    """The modular-addition run of one pair, to rescaled time ``horizon`` (default ``params.horizon``).

    Its snapshots follow the paper's schedule scaled to the pair's clock: every ``u`` epochs up to
    ``20 u``, then every ``5 u``, with ``u = snapshot_unit / (lr wd / 1e-3)`` rounded (the paper's
    100, 2000, 500 at the paper's rate, so that pair reuses the core-inflation runs). The horizon
    is rounded up to a snapshot.
    """
    u = max(1, round(params.snapshot_unit / _rate_ratio(lr, wd)))
    late = 20 * u
    epochs = math.ceil(epochs_for(params, lr, wd, params.horizon if horizon is None else horizon) - 1e-9)
    epochs = u * math.ceil(epochs / u) if epochs <= late else late + 5 * u * math.ceil((epochs - late) / (5 * u))
    base = replace(params.base(), lr=lr, weight_decay=wd)
    return replace(
        base,
        epochs=epochs,
        long_epochs=epochs,
        branch_epoch=u,
        snapshot_every=u,
        late_after=late,
        snapshot_every_late=5 * u,
    )


def pair_label(lr: float, wd: float) -> str:
    """How the chapter names the run of one (lr, wd) pair."""
    return f"lr {lr:g}, wd {wd:g}"


def run_clock(params: ClockParams, *, progress: bool = True) -> dict[str, dict[str, Any]]:
    """Train and analyse the run of every pair to ``params.horizon``; per pair (by label) its
    ``lr``, ``wd``, optimizer ``steps`` per epoch and snapshot ``records`` (:func:`modular_runs.analyse_arm`)."""
    out = {}
    for lr, wd in params.pairs:
        mp = pair_params(params, lr, wd)
        records = modular_runs.analyse_arm(mp, "wd", mp.long_epochs, progress=progress)
        out[pair_label(lr, wd)] = {"lr": lr, "wd": wd, "steps": steps_per_epoch(mp), "records": records}
    return out


def _metric(records: list[dict], metric: str) -> np.ndarray:
    """(snapshots, seeds) values of a metric: core dimension, necessary - sufficient, mode count."""
    if metric == "gap":
        return modular_runs.series(records, "necessary_rank") - modular_runs.series(records, "sufficient_rank")
    if metric == "modes":
        return np.array([[len(m["modes"]) for m in r["models"]] for r in records], dtype=float)
    return modular_runs.series(records, metric)


def _quiet_mean_sem(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seed mean and its standard error per snapshot, NaN where too few seeds have a value."""
    n = np.sum(np.isfinite(values), axis=1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows (no rank found) give NaN
        return np.nanmean(values, axis=1), np.nanstd(values, axis=1, ddof=1) / np.sqrt(n)


def curves(params: ClockParams, runs: dict[str, dict[str, Any]], metric: str) -> dict[str, dict[str, Any]]:
    """Per run: ``epochs``, ``tau`` (from the run's own lr, wd and steps per epoch), the metric per
    seed (``values``, snapshots x seeds), its seed mean (``mean``) and the standard error of that
    mean (``sem``), and ``grok``, the first snapshot at which every model reaches
    ``params.grok_threshold`` (None if none does)."""
    out = {}
    for label, run in runs.items():
        values = _metric(run["records"], metric)
        epochs = modular_runs.epochs_of(run["records"])
        mean, sem = _quiet_mean_sem(values)
        out[label] = {
            "epochs": epochs,
            "tau": run["lr"] * run["wd"] * run["steps"] * epochs.astype(float),
            "values": values,
            "mean": mean,
            "sem": sem,
            "grok": modular_runs.grokking_epoch(run["records"], params.grok_threshold),
        }
    return out


def spread(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], n_grid: int = 64) -> float:
    """How far apart curves ``(x_i, y_i)`` lie: the root mean square, over ``n_grid`` points evenly
    spaced on the overlap of their x ranges, of the standard deviation across curves of ``y``
    (linear interpolation). NaN with fewer than two curves or no overlap."""
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(xs, ys)]
    pairs = [(x[np.isfinite(y)], y[np.isfinite(y)]) for x, y in pairs]
    pairs = [(x, y) for x, y in pairs if len(x) >= 2]
    if len(pairs) < 2:
        return float("nan")
    lo, hi = max(x.min() for x, _ in pairs), min(x.max() for x, _ in pairs)
    if not hi > lo:
        return float("nan")
    grid = np.linspace(lo, hi, n_grid)
    stacked = np.stack([np.interp(grid, x, y) for x, y in pairs])
    return float(np.sqrt(np.mean(np.var(stacked, axis=0, ddof=1))))


def collapse(params: ClockParams, runs: dict[str, dict[str, Any]]) -> dict[str, Collapse]:
    """Per metric: the spread of the runs' seed-mean curves against epochs and against tau
    (:func:`spread`), their ratio (below 1: the curves come together when rescaled; 0: one curve),
    the seed noise (root mean square standard error of a seed mean), below which no spread can
    be told from chance, and ``n_runs``, the runs compared.

    Each curve is taken from its run's grokking snapshot on (runs that never grok are left out):
    before it the models memorise, which need not follow the decay's clock, and the inflation
    the clock is about happens after it.
    """
    out = {}
    for metric in METRICS:
        kept = [v for v in curves(params, runs, metric).values() if v["grok"] is not None]
        after = [v["epochs"] >= v["grok"] for v in kept]
        by_epoch = spread([v["epochs"][a] for v, a in zip(kept, after)], [v["mean"][a] for v, a in zip(kept, after)])
        by_tau = spread([v["tau"][a] for v, a in zip(kept, after)], [v["mean"][a] for v, a in zip(kept, after)])
        sems = np.concatenate([v["sem"][a] for v, a in zip(kept, after)]) if kept else np.array([np.nan])
        noise = float(np.sqrt(np.nanmean(sems**2))) if np.isfinite(sems).any() else float("nan")
        ratio = by_tau / by_epoch if by_epoch > 0 else float("nan")
        out[metric] = Collapse(spread_epochs=by_epoch, spread_tau=by_tau, ratio=ratio, noise=noise, n_runs=len(kept))
    return out


def _end_means(records: list[dict]) -> dict[str, float]:
    """Seed means at the last record, and the range over seeds of the core dimension (the fields
    of :class:`EndState`)."""
    last = records[-1:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a metric no seed has gives NaN
        out = {m: float(np.nanmean(_metric(last, m))) for m in METRICS}
        dims = _metric(last, "core_dim")[0]
        out["core_dim_min"], out["core_dim_max"] = float(np.nanmin(dims)), float(np.nanmax(dims))
    out["test_acc"] = float(np.mean([m["test_acc"] for m in last[0]["models"]]))
    return out


def clock_summary(
    params: ClockParams, runs: dict[str, dict[str, Any]], recorded: dict[str, Any] | None = None
) -> ClockSummary:
    """The clock's numbers: per run its rate ratio to the paper's, epochs, end tau and end means;
    :func:`collapse`; and, with the recorded paper-profile inflation run
    (:func:`corelib.experiments.paper_scale.recorded_inflation`) when it trained these models,
    that run's end (``tau_end``, ``epochs_end``) and its weight-decay arm at the snapshot nearest
    each other run's end tau (``at_pair_ends``) and nearest its last epoch (``at_pair_epochs``)."""
    pairs = {}
    for label, run in runs.items():
        end = run["records"][-1]["epoch"]
        pairs[label] = PairEnd(
            rate_ratio=_rate_ratio(run["lr"], run["wd"]),
            epochs=end,
            tau_end=run["lr"] * run["wd"] * run["steps"] * end,
            **_end_means(run["records"]),
        )
    compared = None
    reference = _recorded_run(params, recorded)
    if reference is not None:
        records = reference["records"]
        epochs = modular_runs.epochs_of(records).astype(float)
        taus = reference["lr"] * reference["wd"] * reference["steps"] * epochs
        nearest, same_epoch = {}, {}
        for label, row in pairs.items():
            if label == RECORDED_LABEL or (runs[label]["lr"], runs[label]["wd"]) == (reference["lr"], reference["wd"]):
                continue  # the recorded run itself, or the same run over a shorter horizon
            for found, where in (
                (nearest, np.abs(taus - row.tau_end)),
                (same_epoch, np.abs(epochs - row.epochs)),
            ):
                i = int(np.argmin(where))
                found[label] = RecordedPoint(
                    epoch=records[i]["epoch"], tau=float(taus[i]), **_end_means(records[: i + 1])
                )
        compared = RecordedComparison(
            source=recorded["source"],
            tau_end=float(taus[-1]),
            epochs_end=int(epochs[-1]),
            at_pair_ends=nearest,
            at_pair_epochs=same_epoch,
        )
    return ClockSummary(
        pairs=pairs, collapse=collapse(params, runs), same_product=same_product(pairs), recorded=compared
    )


def same_product(pairs: dict[str, PairEnd]) -> list[SameProduct]:
    """Each two runs of :func:`clock_summary`'s ``pairs`` with the same lr x wd (and so the same
    tau at the same step) that end at the same epoch: their labels and whether their core
    dimensions at the end are told apart (:func:`_apart`: +1 the first larger, -1 smaller, 0 not)."""
    labels = list(pairs)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            ra, rb = pairs[a], pairs[b]
            if np.isclose(ra.rate_ratio, rb.rate_ratio, rtol=1e-9) and ra.epochs == rb.epochs:
                out.append(SameProduct(runs=(a, b), epochs=ra.epochs, apart=_apart(ra, rb)))
    return out


# ----------------------------------------------------------------------------- the window


def window_arms(params: ClockParams, grok_epoch: int) -> dict[str, tuple[modular_runs.ModularParams, str]]:
    """Each arm of the window as (modular settings, arm of :func:`modular_runs.analyse_arm`), branching
    at ``grok_epoch`` (late removal: at the snapshot nearest ``params.late_removal``)."""
    lr, wd = params.window_pair
    base = window_base(params)
    wanted = epochs_for(params, lr, wd, params.late_removal)
    if wanted <= grok_epoch:
        raise ValueError(
            f"late_removal (tau {params.late_removal:g}, epoch {wanted:.0f}) must come after the branch at epoch "
            f"{grok_epoch}; raise it."
        )
    snaps = [e for e in range(1, base.long_epochs) if base.stack_config("wd", base.long_epochs).is_snapshot(e)]
    late = min((e for e in snaps if e > grok_epoch), key=lambda e: abs(e - wanted), default=None)
    if late is None:
        raise ValueError(
            f"no snapshot after the grokking epoch {grok_epoch} to remove the decay late; raise window_horizon."
        )
    removed = replace(base, branch_epoch=grok_epoch, branch_weight_decay=0.0)
    short, long = (max(1, round(epochs_for(params, lr, wd, t))) for t in params.anneal)
    return {
        "kept": (base, "wd"),
        "restarted": (replace(removed, branch_weight_decay=wd), "no_wd"),
        "removed": (removed, "no_wd"),
        "anneal_short": (replace(removed, branch_anneal_epochs=short), "no_wd"),
        "anneal_long": (replace(removed, branch_anneal_epochs=long), "no_wd"),
        "removed_late": (replace(removed, branch_epoch=late), "no_wd"),
    }


def window_base(params: ClockParams) -> modular_runs.ModularParams:
    """The run the window's arms branch from: the window pair's, to ``window_horizon``."""
    return pair_params(params, *params.window_pair, params.window_horizon)


def window_branch_epoch(params: ClockParams, kept: list[dict]) -> int | None:
    """Where the window's arms branch, given the kept run's snapshot records so far: the first
    snapshot at which every model reaches ``grok_threshold`` (None before it), or the snapshot
    nearest ``window_branch``."""
    if params.window_branch is None:
        return modular_runs.grokking_epoch(kept, params.grok_threshold)
    base = window_base(params)
    cfg = base.stack_config("wd", base.long_epochs)
    wanted = epochs_for(params, *params.window_pair, params.window_branch)
    return min((e for e in range(1, base.long_epochs + 1) if cfg.is_snapshot(e)), key=lambda e: abs(e - wanted))


def run_window(params: ClockParams, *, progress: bool = True) -> dict[str, Any]:
    """Train and analyse the window's arms: ``grok_epoch``, where they branch (the first snapshot
    of the kept run at which every model reaches ``grok_threshold``, or the snapshot nearest
    ``window_branch``), and per arm its ``params``, ``branch`` epoch,
    snapshot ``records`` and training ``history``."""
    lr, wd = params.window_pair
    base = window_base(params)
    kept = modular_runs.analyse_arm(base, "wd", base.long_epochs, progress=progress)
    grok = window_branch_epoch(params, kept)
    if grok is None:
        raise ValueError(
            f"the run at lr {lr:g}, wd {wd:g} has not grokked by tau {params.window_horizon}: the window "
            "branches at grokking; raise window_horizon (or set window_branch)."
        )
    arms = {}
    for name, (mp, arm) in window_arms(params, grok).items():
        records = kept if arm == "wd" else modular_runs.analyse_arm(mp, arm, mp.long_epochs, progress=progress)
        arms[name] = {
            "params": mp,
            "branch": None if arm == "wd" else mp.branch_epoch,
            "records": records,
            "history": modular_runs.history(mp, arm, until=mp.long_epochs),
        }
    return {"grok_epoch": grok, "lr": lr, "wd": wd, "arms": arms}


def window_summary(params: ClockParams, window: dict[str, Any], until: int | None = None) -> WindowSummary:
    """Per arm at the window's end: mean core dimension (and its range over seeds), gap, modes
    and test accuracy, and the loss spikes from the branch to the end (every arm, the kept one
    included, counted from the common branch at grokking; the late removal from its own branch)
    as collapse episodes per model and per 1000 epochs (:func:`modular_runs.collapse_summary`); for the
    late removal also its values at its branch (the snapshot it started from; the kept run's when
    the arm's records do not hold it), to tell whether removing decay deflates.

    ``until``: the arms as they stood at that epoch instead, each at its last snapshot up to it
    (its spikes counted up to that snapshot). An arm with no snapshot after its branch by then is
    left out: the late removal before it branches, and every arm before the first snapshot after
    grokking (the kept run's spikes are counted from grokking too)."""
    grok = window["grok_epoch"]
    arms = {}
    for name, arm in window["arms"].items():
        records = [r for r in arm["records"] if until is None or r["epoch"] <= until]
        start = arm["branch"] or grok
        if not records or records[-1]["epoch"] <= start:
            if until is None:
                raise ValueError(
                    f"the window's arm {name!r} has no snapshot after its branch at epoch {start}: it has not been "
                    "trained yet; finish it (inflation_clock.run_window, or `python -m acebook.paper_runs advance "
                    "inflation_clock --window` for a profile's run) before summarising it."
                )
            continue
        arms[name] = _window_arm(window, name, records, start)
    return WindowSummary(grok_epoch=grok, tau_grok=float(tau_of(params, window["lr"], window["wd"], grok)), arms=arms)


def _window_arm(window: dict[str, Any], name: str, records: list[dict], start: int) -> WindowArm:
    """One arm of :func:`window_summary` at its last record of ``records``, its spikes from ``start``."""
    arm, end = window["arms"][name], records[-1]["epoch"]
    spikes = modular_runs.collapse_summary(modular_runs.history_until(arm["history"], end), start, end).per_model
    at_branch = arm_at_branch(window, name) if name == "removed_late" else None
    return WindowArm(
        branch=arm["branch"],
        end=end,
        spikes_per_model=spikes,
        spikes_per_1000=1000 * spikes / (end - start),
        at_branch=at_branch,
        **_end_means(records),
    )


def _is_tau(t: Any) -> bool:
    try:
        return math.isfinite(float(t)) and float(t) >= 0
    except (TypeError, ValueError):
        return False


def window_at_tau(params: ClockParams, window: dict[str, Any], taus: Sequence[float]) -> dict[float, WindowSummary]:
    """:func:`window_summary` as the arms stood at each tau of ``taus`` on the window's clock (at
    the last snapshot at or before the epoch where the clock reaches it)."""
    bad = [t for t in taus if not _is_tau(t)]
    if bad:
        raise ValueError(f"taus must be finite numbers >= 0 (tau = lr x wd x optimizer steps); got {bad}.")
    lr, wd = window["lr"], window["wd"]
    # The epoch the clock reaches tau in, not after it: float noise must not push an exact epoch down.
    until = {float(t): math.floor(epochs_for(params, lr, wd, t) + 1e-9) for t in taus}
    return {t: window_summary(params, window, until=e) for t, e in until.items()}


# ----------------------------------------------------------------------------- what the chapter shows


def _apart(a: EndState, b: EndState) -> int:
    """+1 if every seed of ``a`` has a larger core than every seed of ``b``, -1 if smaller, else 0:
    with three seeds, only ranges that do not overlap tell two arms apart."""
    if a.core_dim_min > b.core_dim_max:
        return 1
    if a.core_dim_max < b.core_dim_min:
        return -1
    return 0


APART_WORDS = {1: "larger", -1: "smaller", 0: "not told apart"}
"""How a table words :func:`_apart`: the first core larger, smaller, or not told apart."""


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
            "vs same τ": APART_WORDS[_apart(run, at_tau)],
            "paper run, same epoch: core dim.": _seeds(at_epoch),
            "vs same epoch": APART_WORDS[_apart(run, at_epoch)],
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

RECORDED_LABEL = "recorded paper run"


def _recorded_run(params: ClockParams, recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    """The recorded paper-profile run's weight-decay arm as one more run of the clock, when it
    trained these experiments' model on this task (lr and wd aside)."""
    if recorded is None:
        return None
    rp = recorded["params"]
    if any(getattr(rp, k) != getattr(params, k) for k in _SHARED if k not in ("precision", "eval_every")):
        return None
    return {"lr": rp.lr, "wd": rp.weight_decay, "steps": steps_per_epoch(rp), "records": recorded["arms"]["wd"]}


def compact(runs: dict[str, dict[str, Any]], window: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a computed experiment (:func:`run_clock`, :func:`run_window`): plain
    JSON, the snapshot records without their fitted operators (no summary here reads them)."""
    return {
        "runs": {
            label: {
                "lr": r["lr"],
                "wd": r["wd"],
                "steps": r["steps"],
                "records": modular_runs.without_operators(r["records"]),
            }
            for label, r in runs.items()
        },
        "window": {
            "grok_epoch": window["grok_epoch"],
            "lr": window["lr"],
            "wd": window["wd"],
            "arms": {
                name: {
                    "branch": arm["branch"],
                    "records": modular_runs.without_operators(arm["records"]),
                    "history": arm["history"],
                }
                for name, arm in window["arms"].items()
            },
        },
    }


def record_agreement(
    params: ClockParams, record: dict[str, Any], epochs: int, *, tolerance: float = 1e-6, progress: bool = True
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
    window = record["window"]
    grok = window["grok_epoch"]
    removed_params, _ = window_arms(params, grok)["removed"]
    pieces = [("kept", window_base(params), "wd", min(epochs, grok))]
    if epochs > grok:
        pieces.append(("removed", removed_params, "no_wd", epochs))
    done, n, arms = 0, 0, []
    recorded_tree, fresh_tree, recorded_groups, fresh_groups = {}, {}, {}, {}
    with fresh_results_root():
        for name, mp, arm, limit in pieces:
            shown = [r for r in window["arms"][name]["records"] if r["epoch"] <= limit] if epochs else []
            if not shown or (name == "removed" and shown[-1]["epoch"] <= grok):
                continue
            until = shown[-1]["epoch"]
            fresh = modular_runs.without_operators(modular_runs.analyse_arm(mp, arm, until, progress=progress))
            recorded_tree[name], fresh_tree[name] = shown, fresh
            recorded_groups.update(agreement.snapshot_groups(shown, name))
            fresh_groups.update(agreement.snapshot_groups(fresh, name))
            if until > 0:  # nothing trained, no history; compared exactly only (the claims read snapshots)
                recorded_tree[f"{name} history"] = modular_runs.history_until(window["arms"][name]["history"], until)
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
    record: dict[str, Any],
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
    window = record["window"]
    _check_sample(window, arm, epochs)
    _check_branch_run(params, record["branch_run"])
    grok = window["grok_epoch"]
    mp, kind = window_arms(params, grok)[arm]
    shown = [r for r in window["arms"][arm]["records"] if r["epoch"] <= grok + epochs]
    until = shown[-1]["epoch"]
    with fresh_results_root():
        plant_snapshot(modular_runs.arm_dir(mp, "wd"), record["branch_run"], grok, record["branch_weights"])
        fresh = modular_runs.without_operators(modular_runs.analyse_arm(mp, kind, until, progress=progress))
        fresh_history = modular_runs.history(mp, kind, until=until)
    recorded_tree = {arm: shown, f"{arm} history": modular_runs.history_until(window["arms"][arm]["history"], until)}
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


def _check_sample(window: dict[str, Any], arm: str, epochs: int) -> None:
    """Refuse a sample :func:`window_sample_agreement` cannot re-derive, naming what would do."""
    if arm not in WINDOW_SAMPLE_ARMS:
        raise ValueError(
            f"the sample's arm must branch at grokking, from the recorded weights: one of {WINDOW_SAMPLE_ARMS}; "
            f"got {arm!r}."
        )
    grok = window["grok_epoch"]
    after = [r["epoch"] - grok for r in window["arms"][arm]["records"] if r["epoch"] > grok]
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
    runs: dict[str, dict[str, Any]],
    window: dict[str, Any],
    recorded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The chapter's view of computed or recorded runs (:func:`run`'s keys but ``record``)."""
    extra = _recorded_run(params, recorded)
    if extra is not None:  # its full horizon: a pair at its (lr, wd) is the same run, shorter
        runs = {label: r for label, r in runs.items() if (r["lr"], r["wd"]) != (extra["lr"], extra["wd"])}
        runs[RECORDED_LABEL] = extra
    return {
        "clock": clock_summary(params, runs, recorded),
        "curves": {m: curves(params, runs, m) for m in METRICS},
        "window": window_summary(params, window),
        "window_curves": window_curves(window),
    }  # the fields of ClockChapter but ``record``


def window_curves(window: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per arm of a window (:func:`run_window`, or a record's): ``epochs`` of its snapshots, its
    ``branch`` (None for the kept run), and per snapshot and seed (snapshots x seeds) its
    ``core_dim``, ``modes`` and ``test_acc``: what :func:`corelib.plots.figure_window` draws."""
    return {
        name: {
            "epochs": modular_runs.epochs_of(arm["records"]),
            "branch": arm["branch"],
            **{m: _metric(arm["records"], m) for m in ("core_dim", "modes")},
            "test_acc": modular_runs.series(arm["records"], "test_acc"),
        }
        for name, arm in window["arms"].items()
    }


def arm_at_branch(window: dict[str, Any], name: str, *, fallback: bool = True) -> EndState:
    """The models the arm ``name`` of ``window`` started from: its own snapshot at its branch
    (for the kept run, at grokking), else, with ``fallback``, the kept run's last snapshot at or
    before the branch (right only when the arm branched from that very run); an error when there
    is none."""
    arm = window["arms"][name]
    branch = arm["branch"] if arm["branch"] is not None else window["grok_epoch"]
    at = [r for r in arm["records"] if r["epoch"] == branch]
    if not at and fallback:
        at = [r for r in window["arms"]["kept"]["records"] if r["epoch"] <= branch]
    if not at:
        raise ValueError(f"the arm {name!r} has no snapshot at its branch (epoch {branch}) to start from.")
    return EndState(**_end_means(at))


def state_at(records: list[dict], epoch: int) -> EndState:
    """The models of an arm's snapshot ``records`` at ``epoch`` (seed means and the core
    dimension's range over seeds); an error naming the snapshots there are when none is at it."""
    at = [r for r in records if r["epoch"] == epoch]
    if not at:
        have = [r["epoch"] for r in records]
        raise ValueError(f"no snapshot at epoch {epoch}: the arm has snapshots at {have[:3]} ... {have[-3:]}.")
    return EndState(**_end_means(at))


def run(
    params: ClockParams,
    recorded: dict[str, Any] | None = None,
    *,
    record: dict[str, Any] | None = None,
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
    if record["params"] != params:
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
        **summarise(params, record["runs"], record["window"], recorded),
        record={
            "source": record["source"],
            "training_seconds": record["provenance"].get("training_seconds"),
            "agreement": checked,
        },
        window_data=record["window"],
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
        curves: per arm, what :func:`corelib.plots.figure_window` draws (:func:`window_curves`).
        profile: the profile the clock chapter ran with (``"interactive"`` outside the runner).
        source: the record the arms were read from, None when the clock chapter trained them.
    """

    params: ClockParams
    window: WindowSummary
    curves: dict[str, dict[str, Any]]
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
    return FastWindow(
        params=params,
        window=window_summary(params, data["window"]),
        curves=window_curves(data["window"]),
        profile=data["profile"],
        source=data["source"],
    )
