"""The clock of core inflation: runs at several (lr, wd) pairs on one rescaled time.

The paper's grokking theory says the relaxation time scales as ``1 / (lr * wd)`` (AdamW shrinks
every weight by ``1 - lr * wd`` per step). If core inflation runs on that clock, the state of a
run is a function of the rescaled time ``tau = lr * wd * steps`` alone, and runs at several
``(lr, wd)`` pairs fall on one curve when plotted against ``tau``. :func:`run_clock` trains, then
analyses, one modular-addition run per pair exactly as the core-inflation chapter does (each
pair's snapshot schedule is the paper's scaled to its clock); :func:`curves` puts them on both
time axes, :func:`collapse` measures how much closer they come when rescaled, and
:func:`clock_summary` gathers each run's end state (:class:`EndState`) beside the recorded paper
run. The chapter's settings are :class:`corelib.experiments.inflation_clock.ClockParams`; the runs
and curves are typed records (:class:`~corelib.experiments.inflation_clock_records.ClockRun`,
:class:`~corelib.experiments.inflation_clock_records.Curve`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import modular_runs
from .inflation_clock_records import ClockRun, Curve, as_clock_runs
from .modular_records import Snapshot

if TYPE_CHECKING:
    from .inflation_clock import ClockParams
    from .paper_scale_records import RecordedInflation


REFERENCE_RATE = 1e-3  # lr * wd of the paper's run


METRICS = ("core_dim", "gap", "modes")  # gap: necessary - sufficient rank


# Settings of the modular-addition run that the clock experiment shares.
SHARED = (
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
    larger (+1), smaller (-1) or not told apart (0) (:func:`apart`)."""

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


def steps_per_epoch(params: ClockParams | modular_runs.ModularParams) -> int:
    """Optimizer steps per epoch: the training set in batches, the last one partial."""
    mp = params if isinstance(params, modular_runs.ModularParams) else params.base()
    n_train = len(modular_runs.make_data(mp)["train"][0])
    return -(-n_train // mp.batch_size)


def rate_ratio(lr: float, wd: float) -> float:
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
    u = max(1, round(params.snapshot_unit / rate_ratio(lr, wd)))
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


Runs = Mapping[str, ClockRun | Mapping[str, Any]]
"""Runs of the clock by label: :class:`ClockRun`, or its JSON form (a dict), which is read as one."""


def run_clock(params: ClockParams, *, progress: bool = True) -> dict[str, ClockRun]:
    """Train and analyse the run of every pair to ``params.horizon``; per pair (by label) its
    :class:`ClockRun`: ``lr``, ``wd``, optimizer ``steps`` per epoch and snapshot ``records``
    (:func:`modular_runs.analyse_arm`).

    The pairs share the model, data and seeds: they train as one stack, each with its own lr, wd,
    horizon and snapshots (:func:`modular_runs.train_together`), to the folders and weights that
    one :func:`modular_runs.train_arm` per pair gives."""
    runs = [pair_params(params, lr, wd) for lr, wd in params.pairs]
    modular_runs.train_together([(mp, "wd", mp.long_epochs) for mp in runs], progress=progress)
    out = {}
    for (lr, wd), mp in zip(params.pairs, runs):
        records = modular_runs.analyse_arm(mp, "wd", mp.long_epochs, progress=progress)
        out[pair_label(lr, wd)] = ClockRun(lr=lr, wd=wd, steps=steps_per_epoch(mp), records=records)
    return out


def metric_series(records: Sequence[Snapshot], metric: str) -> np.ndarray:
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


def curves(params: ClockParams, runs: Runs, metric: str) -> dict[str, Curve]:
    """Per run its :class:`Curve`: ``epochs``, ``tau`` (from the run's own lr, wd and steps per
    epoch), the metric per seed (``values``, snapshots x seeds), its seed mean (``mean``) and the
    standard error of that mean (``sem``), and ``grok``, the first snapshot at which every model
    reaches ``params.grok_threshold`` (None if none does)."""
    out = {}
    for label, run in as_clock_runs(runs).items():
        values = metric_series(run.records, metric)
        epochs = modular_runs.epochs_of(run.records)
        mean, sem = _quiet_mean_sem(values)
        out[label] = Curve(
            epochs=epochs,
            tau=run.tau_per_epoch * epochs.astype(float),
            values=values,
            mean=mean,
            sem=sem,
            grok=modular_runs.grokking_epoch(run.records, params.grok_threshold),
        )
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


def collapse(params: ClockParams, runs: Runs) -> dict[str, Collapse]:
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
        kept = [v for v in curves(params, runs, metric).values() if v.grok is not None]
        after = [v.epochs >= v.grok for v in kept]
        by_epoch = spread([v.epochs[a] for v, a in zip(kept, after)], [v.mean[a] for v, a in zip(kept, after)])
        by_tau = spread([v.tau[a] for v, a in zip(kept, after)], [v.mean[a] for v, a in zip(kept, after)])
        sems = np.concatenate([v.sem[a] for v, a in zip(kept, after)]) if kept else np.array([np.nan])
        noise = float(np.sqrt(np.nanmean(sems**2))) if np.isfinite(sems).any() else float("nan")
        ratio = by_tau / by_epoch if by_epoch > 0 else float("nan")
        out[metric] = Collapse(spread_epochs=by_epoch, spread_tau=by_tau, ratio=ratio, noise=noise, n_runs=len(kept))
    return out


def end_means(records: Sequence[Snapshot]) -> EndState:
    """The models at the last record: seed means, and the range over seeds of the core dimension."""
    last = records[-1:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a metric no seed has gives NaN
        means = {m: float(np.nanmean(metric_series(last, m))) for m in METRICS}
        dims = metric_series(last, "core_dim")[0]
        lo, hi = float(np.nanmin(dims)), float(np.nanmax(dims))
    acc = float(np.mean([m["test_acc"] for m in last[0]["models"]]))
    return EndState(**means, core_dim_min=lo, core_dim_max=hi, test_acc=acc)


def clock_summary(params: ClockParams, runs: Runs, recorded: RecordedInflation | None = None) -> ClockSummary:
    """The clock's numbers: per run its rate ratio to the paper's, epochs, end tau and end means;
    :func:`collapse`; and, with the recorded paper-profile inflation run
    (:func:`corelib.experiments.paper_scale.recorded_inflation`) when it trained these models,
    that run's end (``tau_end``, ``epochs_end``) and its weight-decay arm at the snapshot nearest
    each other run's end tau (``at_pair_ends``) and nearest its last epoch (``at_pair_epochs``)."""
    runs, pairs = as_clock_runs(runs), {}
    for label, run in runs.items():
        end = run.records[-1]["epoch"]
        pairs[label] = PairEnd(
            rate_ratio=rate_ratio(run.lr, run.wd),
            epochs=end,
            tau_end=run.tau_per_epoch * end,
            **asdict(end_means(run.records)),
        )
    compared = None
    reference = recorded_run(params, recorded)
    if reference is not None:
        records = reference.records
        epochs = modular_runs.epochs_of(records).astype(float)
        taus = reference.tau_per_epoch * epochs
        nearest, same_epoch = {}, {}
        for label, row in pairs.items():
            if label == RECORDED_LABEL or (runs[label].lr, runs[label].wd) == (reference.lr, reference.wd):
                continue  # the recorded run itself, or the same run over a shorter horizon
            for found, where in (
                (nearest, np.abs(taus - row.tau_end)),
                (same_epoch, np.abs(epochs - row.epochs)),
            ):
                i = int(np.argmin(where))
                found[label] = RecordedPoint(
                    epoch=records[i]["epoch"], tau=float(taus[i]), **asdict(end_means(records[: i + 1]))
                )
        compared = RecordedComparison(
            source=recorded.source,
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
    dimensions at the end are told apart (:func:`apart`: +1 the first larger, -1 smaller, 0 not)."""
    labels = list(pairs)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            ra, rb = pairs[a], pairs[b]
            if np.isclose(ra.rate_ratio, rb.rate_ratio, rtol=1e-9) and ra.epochs == rb.epochs:
                out.append(SameProduct(runs=(a, b), epochs=ra.epochs, apart=apart(ra, rb)))
    return out


def apart(a: EndState, b: EndState) -> int:
    """+1 if every seed of ``a`` has a larger core than every seed of ``b``, -1 if smaller, else 0:
    with three seeds, only ranges that do not overlap tell two arms apart."""
    if a.core_dim_min > b.core_dim_max:
        return 1
    if a.core_dim_max < b.core_dim_min:
        return -1
    return 0


APART_WORDS = {1: "larger", -1: "smaller", 0: "not told apart"}
"""How a table words :func:`apart`: the first core larger, smaller, or not told apart."""


RECORDED_LABEL = "recorded paper run"


def recorded_run(params: ClockParams, recorded: RecordedInflation | None) -> ClockRun | None:
    """The recorded paper-profile run's weight-decay arm as one more run of the clock, when it
    trained these experiments' model on this task (lr and wd aside)."""
    if recorded is None:
        return None
    rp = recorded.params
    if any(getattr(rp, k) != getattr(params, k) for k in SHARED if k not in ("precision", "eval_every")):
        return None
    return ClockRun(lr=rp.lr, wd=rp.weight_decay, steps=steps_per_epoch(rp), records=list(recorded.arms["wd"]))


def state_at(records: Sequence[Snapshot], epoch: int) -> EndState:
    """The models of an arm's snapshot ``records`` at ``epoch`` (seed means and the core
    dimension's range over seeds); an error naming the snapshots there are when none is at it."""
    at = [r for r in records if r["epoch"] == epoch]
    if not at:
        have = [r["epoch"] for r in records]
        raise ValueError(f"no snapshot at epoch {epoch}: the arm has snapshots at {have[:3]} ... {have[-3:]}.")
    return end_means(at)
