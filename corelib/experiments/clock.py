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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from .._checks import check_settings
from ..recorded import compare_values
from ..results import fresh_results_root
from . import modular

__all__ = [
    "REFERENCE_RATE",
    "WINDOW_ARMS",
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
    "window_verdict",
    "clock_summary",
    "glue_values",
    "findings",
    "settings_text",
    "record_text",
    "compact",
    "record_agreement",
    "summarise",
    "run",
    "RECORDED_LABEL",
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
    precision: str = "fp32"
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
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "pairs", tuple((float(lr), float(wd)) for lr, wd in self.pairs))
        object.__setattr__(self, "window_pair", tuple(float(x) for x in self.window_pair))
        object.__setattr__(self, "anneal", tuple(float(x) for x in self.anneal))
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

    def base(self) -> modular.ModularParams:
        """The modular-addition settings these experiments share (at the paper's lr and wd)."""
        return modular.ModularParams(**{k: getattr(self, k) for k in _SHARED})


def steps_per_epoch(params: ClockParams | modular.ModularParams) -> int:
    """Optimizer steps per epoch: the training set in batches, the last one partial."""
    mp = params.base() if isinstance(params, ClockParams) else params
    n_train = len(modular.make_data(mp)["train"][0])
    return -(-n_train // mp.batch_size)


def _rate_ratio(lr: float, wd: float) -> float:
    return lr * wd / REFERENCE_RATE


def epochs_for(params: ClockParams, lr: float, wd: float, tau: float) -> float:
    """Epochs a run at (lr, wd) needs to reach rescaled time ``tau``."""
    return tau / (lr * wd * steps_per_epoch(params))


def tau_of(params: ClockParams, lr: float, wd: float, epochs) -> np.ndarray:
    """Rescaled time after ``epochs`` epochs at (lr, wd)."""
    return lr * wd * steps_per_epoch(params) * np.asarray(epochs, dtype=float)


def pair_params(params: ClockParams, lr: float, wd: float, horizon: float | None = None) -> modular.ModularParams:
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
    ``lr``, ``wd``, optimizer ``steps`` per epoch and snapshot ``records`` (:func:`modular.analyse_arm`)."""
    out = {}
    for lr, wd in params.pairs:
        mp = pair_params(params, lr, wd)
        records = modular.analyse_arm(mp, "wd", mp.long_epochs, progress=progress)
        out[pair_label(lr, wd)] = {"lr": lr, "wd": wd, "steps": steps_per_epoch(mp), "records": records}
    return out


def _metric(records: list[dict], metric: str) -> np.ndarray:
    """(snapshots, seeds) values of a metric: core dimension, necessary - sufficient, mode count."""
    if metric == "gap":
        return modular.series(records, "necessary_rank") - modular.series(records, "sufficient_rank")
    if metric == "modes":
        return np.array([[len(m["modes"]) for m in r["models"]] for r in records], dtype=float)
    return modular.series(records, metric)


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
        epochs = modular.epochs_of(run["records"])
        mean, sem = _quiet_mean_sem(values)
        out[label] = {
            "epochs": epochs,
            "tau": run["lr"] * run["wd"] * run["steps"] * epochs.astype(float),
            "values": values,
            "mean": mean,
            "sem": sem,
            "grok": modular.grokking_epoch(run["records"], params.grok_threshold),
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


def collapse(params: ClockParams, runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
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
        out[metric] = {
            "spread_epochs": by_epoch,
            "spread_tau": by_tau,
            "ratio": ratio,
            "noise": noise,
            "n_runs": len(kept),
        }
    return out


def _end_means(records: list[dict]) -> dict[str, float]:
    """Seed means at the last record, and the range over seeds of the core dimension."""
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
) -> dict[str, Any]:
    """The clock's numbers: per run its rate ratio to the paper's, epochs, end tau and end means;
    :func:`collapse`; and, with the recorded paper-profile inflation run
    (:func:`corelib.experiments.paper_scale.recorded_inflation`) when it trained these models,
    that run's weight-decay arm at the snapshot nearest each other run's end tau
    (``at_pair_ends``) and nearest its last epoch (``at_pair_epochs``)."""
    pairs = {}
    for label, run in runs.items():
        end = run["records"][-1]["epoch"]
        pairs[label] = {
            "rate_ratio": _rate_ratio(run["lr"], run["wd"]),
            "epochs": end,
            "tau_end": run["lr"] * run["wd"] * run["steps"] * end,
            **_end_means(run["records"]),
        }
    out = {"pairs": pairs, "collapse": collapse(params, runs), "same_product": same_product(pairs), "recorded": None}
    reference = _recorded_run(params, recorded)
    if reference is not None:
        records = reference["records"]
        epochs = modular.epochs_of(records).astype(float)
        taus = reference["lr"] * reference["wd"] * reference["steps"] * epochs
        nearest, same_epoch = {}, {}
        for label, row in pairs.items():
            if label == RECORDED_LABEL or (runs[label]["lr"], runs[label]["wd"]) == (reference["lr"], reference["wd"]):
                continue  # the recorded run itself, or the same run over a shorter horizon
            for found, where in (
                (nearest, np.abs(taus - row["tau_end"])),
                (same_epoch, np.abs(epochs - row["epochs"])),
            ):
                i = int(np.argmin(where))
                found[label] = {"epoch": records[i]["epoch"], "tau": float(taus[i]), **_end_means(records[: i + 1])}
        out["recorded"] = {
            "source": recorded["source"],
            "tau_end": float(taus[-1]),
            "at_pair_ends": nearest,
            "at_pair_epochs": same_epoch,
        }
    return out


def same_product(pairs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each two runs of :func:`clock_summary`'s ``pairs`` with the same lr x wd (and so the same
    tau at the same step) that end at the same epoch: their labels and whether their core
    dimensions at the end are told apart (:func:`_apart`: +1 the first larger, -1 smaller, 0 not)."""
    labels = list(pairs)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            ra, rb = pairs[a], pairs[b]
            if np.isclose(ra["rate_ratio"], rb["rate_ratio"], rtol=1e-9) and ra["epochs"] == rb["epochs"]:
                out.append({"runs": (a, b), "epochs": ra["epochs"], "apart": _apart(ra, rb)})
    return out


# ----------------------------------------------------------------------------- the window


def window_arms(params: ClockParams, grok_epoch: int) -> dict[str, tuple[modular.ModularParams, str]]:
    """Each arm of the window as (modular settings, arm of :func:`modular.analyse_arm`), branching
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


def window_base(params: ClockParams) -> modular.ModularParams:
    """The run the window's arms branch from: the window pair's, to ``window_horizon``."""
    return pair_params(params, *params.window_pair, params.window_horizon)


def window_branch_epoch(params: ClockParams, kept: list[dict]) -> int | None:
    """Where the window's arms branch, given the kept run's snapshot records so far: the first
    snapshot at which every model reaches ``grok_threshold`` (None before it), or the snapshot
    nearest ``window_branch``."""
    if params.window_branch is None:
        return modular.grokking_epoch(kept, params.grok_threshold)
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
    kept = modular.analyse_arm(base, "wd", base.long_epochs, progress=progress)
    grok = window_branch_epoch(params, kept)
    if grok is None:
        raise ValueError(
            f"the run at lr {lr:g}, wd {wd:g} has not grokked by tau {params.window_horizon}: the window "
            "branches at grokking; raise window_horizon (or set window_branch)."
        )
    arms = {}
    for name, (mp, arm) in window_arms(params, grok).items():
        records = kept if arm == "wd" else modular.analyse_arm(mp, arm, mp.long_epochs, progress=progress)
        arms[name] = {
            "params": mp,
            "branch": None if arm == "wd" else mp.branch_epoch,
            "records": records,
            "history": modular.history(mp, arm, until=mp.long_epochs),
        }
    return {"grok_epoch": grok, "lr": lr, "wd": wd, "arms": arms}


def window_summary(params: ClockParams, window: dict[str, Any]) -> dict[str, Any]:
    """Per arm at the window's end: mean core dimension (and its range over seeds), gap, modes
    and test accuracy, and the loss spikes from the branch to the end (every arm, the kept one
    included, counted from the common branch at grokking; the late removal from its own branch)
    as collapse episodes per model and per 1000 epochs (:func:`modular.collapse_summary`); for the
    late removal also the kept run's values at its branch, to tell whether removing decay deflates."""
    grok = window["grok_epoch"]
    out = {"grok_epoch": grok, "tau_grok": float(tau_of(params, window["lr"], window["wd"], grok)), "arms": {}}
    for name, arm in window["arms"].items():
        records, end = arm["records"], arm["records"][-1]["epoch"]
        start = arm["branch"] or grok
        row = {"branch": arm["branch"], "end": end, **_end_means(records)}
        row["spikes_per_model"] = modular.collapse_summary(arm["history"], start, end)["per_model"]
        row["spikes_per_1000"] = 1000 * row["spikes_per_model"] / (end - start)
        if name == "removed_late":
            at = [r for r in window["arms"]["kept"]["records"] if r["epoch"] <= arm["branch"]]
            row["at_branch"] = _end_means(at)
        out["arms"][name] = row
    return out


# ----------------------------------------------------------------------------- what the chapter says


def _num(x: float, digits: int = 1) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _collapse_verdict(c: dict[str, float]) -> str:
    ratio, by_tau, noise = c["ratio"], c["spread_tau"], c["noise"]
    if not np.isfinite(ratio):
        return "cannot be judged (fewer than two grokked runs that overlap)"
    numbers = f"(spread {_num(by_tau)} against {_num(c['spread_epochs'])})"
    if max(by_tau, c["spread_epochs"]) <= 2 * noise:
        return f"cannot be told apart on either axis {numbers}: both spreads lie within twice the seed noise"
    if ratio < 0.5:
        within = "within" if by_tau <= 2 * noise else "beyond"
        return f"come together when rescaled {numbers}, {within} twice the seed noise"
    if ratio < 1:
        return f"come somewhat closer when rescaled {numbers}"
    return f"do not come closer when rescaled {numbers}"


def findings(params: ClockParams, clock: dict[str, Any], window: dict[str, Any]) -> list[dict[str, Any]]:
    """The chapter's findings, one statement each with its numbers (for the claims page's
    section beyond the paper)."""
    c = clock["collapse"]
    out = [
        {
            "id": f"clock.collapse.{m}",
            "statement": f"{name} curves of {c[m]['n_runs']} runs at different lr x wd {_collapse_verdict(c[m])}",
            "value": c[m]["ratio"],
        }
        for m, name in (("core_dim", "Core-dimension"), ("gap", "Necessary-sufficient gap"), ("modes", "Mode-count"))
    ]
    arms = window["arms"]
    late = arms["removed_late"]
    out.append(
        {
            "id": "window.late_removal",
            "statement": (
                f"Removing weight decay late (epoch {late['branch']}) takes the core dimension from "
                f"{_dim(late['at_branch'])} to {_dim(late)} at epoch {late['end']} (kept: {_dim(arms['kept'])})"
            ),
            "value": late["core_dim"] - late["at_branch"]["core_dim"],
        }
    )
    for name in ("restarted", "removed", "anneal_short", "anneal_long"):
        arm, kept = arms[name], arms["kept"]
        statement = (
            f"Arm '{name}': core dimension {_dim(arm)} at epoch {arm['end']} (kept: {_dim(kept)}), "
            f"{_num(arm['modes'])} modes (kept: {_num(kept['modes'])}), test accuracy {_num(arm['test_acc'], 3)}, "
            f"{_num(arm['spikes_per_1000'], 2)} loss spikes per model and 1000 epochs "
            f"(kept: {_num(kept['spikes_per_1000'], 2)})"
        )
        out.append({"id": f"window.{name}", "statement": statement, "value": arm["core_dim"]})
    for same in clock["same_product"]:
        a, b = same["runs"]
        ra, rb = clock["pairs"][a], clock["pairs"][b]
        out.append(
            {
                "id": f"clock.same_product.{_slug(a)}.{_slug(b)}",
                "statement": (
                    f"The runs at {a} and {b}, the same lr x wd, end at epoch {same['epochs']} with core dimension "
                    f"{_dim(ra)} and {_dim(rb)}, and {_num(ra['modes'])} and {_num(rb['modes'])} modes: in core "
                    f"dimension the first is {_COMPARED[same['apart']]} the second"
                ),
                "value": ra["core_dim"] - rb["core_dim"],
            }
        )
    rec = clock["recorded"]
    for label in [] if rec is None else rec["at_pair_ends"]:
        pair, at_tau, at_epoch = clock["pairs"][label], rec["at_pair_ends"][label], rec["at_pair_epochs"][label]
        reach = (
            f"The run at {label} ends at tau {_num(pair['tau_end'])} with core dimension {_dim(pair)} and "
            f"{_num(pair['modes'])} modes; the recorded paper run at its epoch {at_tau['epoch']} (same tau) has "
            f"{_dim(at_tau)} and {_num(at_tau['modes'])}: in core dimension it ends "
            f"{_REACH[_apart(pair, at_tau)]} the paper run's state"
        )
        by_epoch = (
            f"At its last epoch, {pair['epochs']}, the run at {label} has core dimension {_dim(pair)}; the "
            f"recorded paper run at its epoch {at_epoch['epoch']} has {_dim(at_epoch)}: "
            f"{_COMPARED[_apart(pair, at_epoch)]} it"
        )
        for kind, statement, at in (("reaches", reach, at_tau), ("same_epoch", by_epoch, at_epoch)):
            out.append(
                {
                    "id": f"clock.{kind}.{_slug(label)}",
                    "statement": statement,
                    "value": pair["core_dim"] - at["core_dim"],
                }
            )
    return out


def _conclusion(clock: dict[str, Any]) -> str:
    """One sentence when every run compared with the recorded paper run ends with a smaller core
    both at equal tau and at equal epochs (else nothing: the findings speak for themselves)."""
    rec, pairs = clock["recorded"], clock["pairs"]
    compared = list(rec["at_pair_ends"]) if rec else []
    if not compared or any(
        _apart(pairs[k], rec["at_pair_ends"][k]) != -1 or _apart(pairs[k], rec["at_pair_epochs"][k]) != -1
        for k in compared
    ):
        return ""
    return (
        "Every run compared ends with a smaller core than the paper run's both at equal tau and at equal epochs, "
        "so neither clock carries the paper run's inflation over to them: over the range measured, their "
        "settings hold the core compact."
    )


_REACH = {1: "beyond", -1: "short of", 0: "not told apart from"}
_COMPARED = {1: "larger than", -1: "smaller than", 0: "not told apart from"}


def _slug(label: str) -> str:
    return label.replace(" ", "").replace(",", "_")


def _apart(a: dict[str, float], b: dict[str, float]) -> int:
    """+1 if every seed of ``a`` has a larger core than every seed of ``b``, -1 if smaller, else 0:
    with three seeds, only ranges that do not overlap tell two arms apart."""
    if a["core_dim_min"] > b["core_dim_max"]:
        return 1
    if a["core_dim_max"] < b["core_dim_min"]:
        return -1
    return 0


def window_verdict(window: dict[str, Any]) -> str:
    """What the window's arms show about the decay after grokking, in one or two sentences."""
    arms = window["arms"]
    restart = arms["restarted"]
    parts = [
        f"Restarting the optimizer with the decay kept leaves cores {_COMPARED[_apart(restart, arms['kept'])]} "
        "those of the uninterrupted run"
    ]
    for name, what in (
        ("removed", "removing the decay"),
        ("anneal_short", "the short ramp"),
        ("anneal_long", "the long ramp"),
    ):
        parts.append(f"{what} gives cores {_COMPARED[_apart(arms[name], restart)]} the restarted arm's")
    late = arms["removed_late"]
    change = {1: "grow", -1: "shrink", 0: "do not change measurably"}[_apart(late, late["at_branch"])]
    return "; ".join(parts) + f". After a late removal the cores {change}."


def _dim(row: dict[str, float]) -> str:
    """Mean core dimension with its range over seeds."""
    return f"{_num(row['core_dim'])} (seeds {_num(row['core_dim_min'], 0)}-{_num(row['core_dim_max'], 0)})"


def _runs_text(clock: dict[str, Any]) -> str:
    """The runs compared, their lr x wd relative to the paper's, epochs and end tau."""
    rows = clock["pairs"]
    listed = "; ".join(
        f"{k} ({_num(v['rate_ratio'], 0)} x the paper's lr x wd, {v['epochs']} epochs, tau {_num(v['tau_end'])})"
        for k, v in rows.items()
    )
    if len(rows) < 2:
        return (
            f"The only run is {listed}: with nothing to compare it with, the clock is not tested here "
            "(it needs the recorded paper run or a second pair)."
        )
    ratios = [v["rate_ratio"] for v in rows.values()]
    return f"The runs: {listed}. Their lr x wd spans a factor {_num(max(ratios) / min(ratios))}."


def settings_text(params: ClockParams, record: dict[str, Any] | None = None) -> str:
    """At what scale the findings were measured, in a few words (and from which record, if any)."""
    full = ClockParams()
    scale = "the full settings" if replace(params, precision=full.precision) == full else "reduced settings"
    text = (
        f"{scale}: {len(params.pairs)} (lr, wd) pairs to tau {params.horizon:g}, the window to tau "
        f"{params.window_horizon:g} at lr {params.window_pair[0]:g}, wd {params.window_pair[1]:g} "
        f"(full: {len(full.pairs)} pairs, both to tau {full.horizon:g}), {len(params.seeds)} seeds"
    )
    return text if record is None else f"{text}; read from the {record['source']}"


def record_text(record: dict[str, Any] | None, searched: bool = False) -> str:
    """Where the runs shown come from: this build (``searched``: after looking for a record of
    these settings and finding none), or a record, what it cost and how much of it this build
    re-derived from scratch."""
    if record is None:
        if searched:
            return (
                "No record of exactly these settings was found, so this build trained and analysed every run "
                "and arm shown here."
            )
        return "This build trained and analysed every run and arm shown here (use_record is off)."
    agree = record["agreement"]
    seconds = sum((record.get("training_seconds") or {}).values())
    head = (
        f"The runs and arms shown are the {record['source']} of exactly these settings, recorded to keep the "
        f"book's build short: its runs trained for {seconds / 60:.0f} min, summed over runs."
    )
    if not agree["n_snapshots"]:
        return head + " This build re-derived none of it (check_epochs is 0)."
    done = (
        f" This build trained its first {agree['epochs']} epochs again from scratch (the run the window branches "
        f"from{', then the removed arm' if 'removed' in agree['arms'] else ''}) and analysed its "
        f"{agree['n_snapshots']} snapshots there"
    )
    if not agree["differences"]:
        return head + done + ": every analysed number and the training history agree with the record."
    return (
        head + done + f": {len(agree['differences'])} numbers differ from the record (the first: "
        f"{agree['differences'][0]}). The figures below are the record's, which this build did not reproduce "
        "exactly: on another machine or device float rounding can do that; with the record's code and machine "
        "it means the record or the code has changed."
    )


def glue_values(
    params: ClockParams,
    clock: dict[str, Any],
    window: dict[str, Any],
    record: dict[str, Any] | None = None,
    searched: bool = False,
) -> dict[str, object]:
    """Every value the chapter's prose quotes, by glue name (``record``: :func:`run`'s;
    ``searched``: whether a record of these settings was looked for)."""
    c = clock["collapse"]
    values: dict[str, object] = {
        "record_text": record_text(record, searched),
        "n_pairs": len(params.pairs),
        "horizon": _num(params.horizon, 0),
        "n_runs": len(clock["pairs"]),
        "n_seeds": len(params.seeds),
        "runs_text": _runs_text(clock),
        "window_pair": pair_label(*params.window_pair),
        "window_grok": window["grok_epoch"],
        "window_tau_grok": _num(window["tau_grok"], 2),
    }
    for m in METRICS:
        values[f"collapse_{m}"] = _collapse_verdict(c[m])
        values[f"ratio_{m}"] = _num(c[m]["ratio"], 2)
        values[f"noise_{m}"] = _num(c[m]["noise"], 2)
    values["window_verdict"] = window_verdict(window)
    found = findings(params, clock, window)

    def statements(prefix: str) -> list[str]:
        return [f["statement"] for f in found if f["id"].startswith(prefix)]

    rec = clock["recorded"]
    if rec is None:
        values["recorded_text"] = (
            "No recorded paper-profile run of these models is present, so the runs are compared only with "
            "each other, and nothing here says where the paper's run stood at the same tau."
        )
        values["same_epoch_text"] = values["conclusion_text"] = ""
    else:
        reach = statements("clock.reaches.")
        values["recorded_text"] = f"The {rec['source']} goes to tau {_num(rec['tau_end'])}. " + (
            ". ".join(reach) + "." if reach else "No other run of this build to compare with it."
        )
        by_epoch = statements("clock.same_epoch.")
        values["same_epoch_text"] = ". ".join(by_epoch) + "." if by_epoch else ""
        values["conclusion_text"] = _conclusion(clock)
    same = statements("clock.same_product.")
    values["same_product_text"] = (
        ". ".join(same) + "."
        if same
        else "No two runs here share lr x wd at the same horizon, so this is not tested by these settings."
    )
    for f in found:
        if f["id"].startswith("window."):
            values[f["id"].replace(".", "_")] = f["statement"]
    return values


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
                "records": modular.without_operators(r["records"]),
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
                    "records": modular.without_operators(arm["records"]),
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

    Returns ``epochs`` (the last epoch re-derived), ``arms`` (those re-derived), ``n_snapshots``
    and ``differences`` (as :func:`corelib.recorded.compare_values` words them: integers exactly,
    floats within ``tolerance``). ``epochs`` 0 checks nothing.
    """
    if epochs < 0:
        raise ValueError(f"check_epochs must be 0 (check nothing) or a number of epochs; got {epochs}.")
    window = record["window"]
    grok = window["grok_epoch"]
    removed_params, _ = window_arms(params, grok)["removed"]
    pieces = [("kept", window_base(params), "wd", min(epochs, grok))]
    if epochs > grok:
        pieces.append(("removed", removed_params, "no_wd", epochs))
    done, n, problems, arms = 0, 0, [], []
    with fresh_results_root():
        for name, mp, arm, limit in pieces:
            shown = [r for r in window["arms"][name]["records"] if r["epoch"] <= limit] if epochs else []
            if not shown or (name == "removed" and shown[-1]["epoch"] <= grok):
                continue
            until = shown[-1]["epoch"]
            fresh = modular.without_operators(modular.analyse_arm(mp, arm, until, progress=progress))
            problems += compare_values(shown, fresh, tolerance, name)
            if until > 0:  # nothing trained, no history
                shown_hist = modular.history_until(window["arms"][name]["history"], until)
                fresh_hist = modular.history(mp, arm, until=until)
                problems += compare_values(shown_hist, fresh_hist, tolerance, f"{name} history")
            done, n, arms = until, n + len(shown), [*arms, name]
    return {"epochs": done, "arms": arms, "n_snapshots": n, "differences": problems}


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
    window_curves = {
        name: {
            "epochs": modular.epochs_of(arm["records"]),
            "branch": arm["branch"],
            **{m: _metric(arm["records"], m) for m in ("core_dim", "modes")},
            "test_acc": modular.series(arm["records"], "test_acc"),
        }
        for name, arm in window["arms"].items()
    }
    return {
        "clock": clock_summary(params, runs, recorded),
        "curves": {m: curves(params, runs, m) for m in METRICS},
        "window": window_summary(params, window),
        "window_curves": window_curves,
    }


def run(
    params: ClockParams,
    recorded: dict[str, Any] | None = None,
    *,
    record: dict[str, Any] | None = None,
    check_epochs: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
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
        return {**summarise(params, runs, window, recorded), "record": None}
    if record["params"] != params:
        raise ValueError(
            "the record passed to clock.run was made with other settings than params; pass the record "
            "paper_scale.recorded_clock(params) finds for these settings (None when there is none)."
        )
    agreement = record_agreement(params, record, check_epochs, progress=progress)
    if agreement["differences"]:
        warnings.warn(
            f"the recorded clock run differs from what this build re-derived in {len(agreement['differences'])} "
            f"numbers (the first: {agreement['differences'][0]}); the chapter shows the record.",
            stacklevel=2,
        )
    return {
        **summarise(params, record["runs"], record["window"], recorded),
        "record": {
            "source": record["source"],
            "training_seconds": record["provenance"].get("training_seconds"),
            "agreement": agreement,
        },
    }
