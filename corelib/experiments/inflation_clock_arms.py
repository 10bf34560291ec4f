"""The window's arms: one run of the clock branched at grokking, trained on and analysed.

The paper proposes to anneal weight decay toward zero shortly after grokking, to keep the compact
core. :func:`run_window` branches one run at its grokking snapshot into: weight decay kept;
restarted (a fresh optimizer, the decay kept); removed at once (the paper's arm); annealed
linearly to zero over two spans; and removed late, after the core has grown (:data:`WINDOW_ARMS`).
Every time is given in ``tau`` (:mod:`corelib.experiments.inflation_clock_pairs`), so the
experiment means the same on any clock. :func:`window_summary` reads each arm's end. The window
and its curves are typed records (:class:`~corelib.experiments.inflation_clock_records.Window`,
:class:`~corelib.experiments.inflation_clock_records.WindowCurve`); every function here also takes
a window in its JSON form, as a record's file holds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from . import modular_runs
from .inflation_clock_pairs import (
    EndState,
    end_means,
    epochs_for,
    metric_series,
    pair_params,
    tau_of,
)
from .inflation_clock_records import WINDOW_ARMS as WINDOW_ARMS  # importable here, where it always was
from .inflation_clock_records import Window, WindowArmRun, WindowCurve, as_window
from .modular_records import Snapshot

if TYPE_CHECKING:
    from .inflation_clock import ClockParams

Windowish = Window | Mapping[str, Any]
"""A window: :class:`Window`, or its JSON form (a dict), which is read as one (:func:`as_window`)."""


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


def window_branch_epoch(params: ClockParams, kept: Sequence[Snapshot]) -> int | None:
    """Where the window's arms branch, given the kept run's snapshot records so far: the first
    snapshot at which every model reaches ``grok_threshold`` (None before it), or the snapshot
    nearest ``window_branch``."""
    if params.window_branch is None:
        return modular_runs.grokking_epoch(kept, params.grok_threshold)
    base = window_base(params)
    cfg = base.stack_config("wd", base.long_epochs)
    wanted = epochs_for(params, *params.window_pair, params.window_branch)
    return min((e for e in range(1, base.long_epochs + 1) if cfg.is_snapshot(e)), key=lambda e: abs(e - wanted))


def run_window(params: ClockParams, *, progress: bool = True) -> Window:
    """Train and analyse the window's arms: a :class:`Window` of ``grok_epoch``, where they branch
    (the first snapshot of the kept run at which every model reaches ``grok_threshold``, or the
    snapshot nearest ``window_branch``), the clock's ``lr`` and ``wd``, and per arm its
    :class:`WindowArmRun`: ``params``, ``branch`` epoch, snapshot ``records`` and training ``history``."""
    lr, wd = params.window_pair
    base = window_base(params)
    modular_runs.train_arm(base, "wd", base.long_epochs, progress=progress)
    kept = modular_runs.analyse_arm(base, "wd", base.long_epochs, progress=progress)
    grok = window_branch_epoch(params, kept)
    if grok is None:
        raise ValueError(
            f"the run at lr {lr:g}, wd {wd:g} has not grokked by tau {params.window_horizon}: the window "
            "branches at grokking; raise window_horizon (or set window_branch)."
        )
    branched = window_arms(params, grok)
    # The branched arms as one stack, each joining at its branch (the kept run is trained).
    modular_runs.train_together(
        [(mp, arm, mp.long_epochs) for mp, arm in branched.values() if arm != "wd"], progress=progress
    )
    arms = {}
    for name, (mp, arm) in branched.items():
        records = kept if arm == "wd" else modular_runs.analyse_arm(mp, arm, mp.long_epochs, progress=progress)
        arms[name] = WindowArmRun(
            params=mp,
            branch=None if arm == "wd" else mp.branch_epoch,
            records=records,
            history=modular_runs.history(mp, arm, until=mp.long_epochs),
        )
    return Window(grok_epoch=grok, lr=lr, wd=wd, arms=arms)


def window_summary(params: ClockParams, window: Windowish, until: int | None = None) -> WindowSummary:
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
    window = as_window(window)
    grok = window.grok_epoch
    arms = {}
    for name, arm in window.arms.items():
        records = [r for r in arm.records if until is None or r["epoch"] <= until]
        start = arm.branch or grok
        if not records or records[-1]["epoch"] <= start:
            if until is None:
                raise ValueError(
                    f"the window's arm {name!r} has no snapshot after its branch at epoch {start}: it has not been "
                    "trained yet; finish it (inflation_clock.run_window, or `python -m acebook.paper_runs advance "
                    "inflation_clock --window` for a profile's run) before summarising it."
                )
            continue
        arms[name] = _window_arm(window, name, records, start)
    return WindowSummary(grok_epoch=grok, tau_grok=float(tau_of(params, window.lr, window.wd, grok)), arms=arms)


def _window_arm(window: Window, name: str, records: list[Snapshot], start: int) -> WindowArm:
    """One arm of :func:`window_summary` at its last record of ``records``, its spikes from ``start``."""
    arm, end = window.arms[name], records[-1]["epoch"]
    if arm.history is None:
        raise ValueError(
            f"the window's arm {name!r} has no training history to count its loss spikes in: read the record with "
            "paper_scale.recorded_window, which adds the histories it keeps apart."
        )
    spikes = modular_runs.collapse_summary(modular_runs.history_until(arm.history, end), start, end).per_model
    at_branch = arm_at_branch(window, name) if name == "removed_late" else None
    return WindowArm(
        branch=arm.branch,
        end=end,
        spikes_per_model=spikes,
        spikes_per_1000=1000 * spikes / (end - start),
        at_branch=at_branch,
        **asdict(end_means(records)),
    )


def _is_tau(t: Any) -> bool:
    try:
        return math.isfinite(float(t)) and float(t) >= 0
    except (TypeError, ValueError):
        return False


def window_at_tau(params: ClockParams, window: Windowish, taus: Sequence[float]) -> dict[float, WindowSummary]:
    """:func:`window_summary` as the arms stood at each tau of ``taus`` on the window's clock (at
    the last snapshot at or before the epoch where the clock reaches it)."""
    bad = [t for t in taus if not _is_tau(t)]
    if bad:
        raise ValueError(f"taus must be finite numbers >= 0 (tau = lr x wd x optimizer steps); got {bad}.")
    window = as_window(window)
    lr, wd = window.lr, window.wd
    # The epoch the clock reaches tau in, not after it: float noise must not push an exact epoch down.
    until = {float(t): math.floor(epochs_for(params, lr, wd, t) + 1e-9) for t in taus}
    return {t: window_summary(params, window, until=e) for t, e in until.items()}


def window_curves(window: Windowish) -> dict[str, WindowCurve]:
    """Per arm of a window (:func:`run_window`, or a record's) its :class:`WindowCurve`: ``epochs``
    of its snapshots, its ``branch`` (None for the kept run), and per snapshot and seed (snapshots
    x seeds) its ``core_dim``, ``modes`` and ``test_acc``: what :func:`corelib.plots.figure_window` draws."""
    return {
        name: WindowCurve(
            epochs=modular_runs.epochs_of(arm.records),
            branch=arm.branch,
            core_dim=metric_series(arm.records, "core_dim"),
            modes=metric_series(arm.records, "modes"),
            test_acc=modular_runs.series(arm.records, "test_acc"),
        )
        for name, arm in as_window(window).arms.items()
    }


def arm_at_branch(window: Windowish, name: str, *, fallback: bool = True) -> EndState:
    """The models the arm ``name`` of ``window`` started from: its own snapshot at its branch
    (for the kept run, at grokking), else, with ``fallback``, the kept run's last snapshot at or
    before the branch (right only when the arm branched from that very run); an error when there
    is none."""
    window = as_window(window)
    arm = window.arms[name]
    branch = arm.branch if arm.branch is not None else window.grok_epoch
    at = [r for r in arm.records if r["epoch"] == branch]
    if not at and fallback:
        at = [r for r in window.arms["kept"].records if r["epoch"] <= branch]
    if not at:
        raise ValueError(f"the arm {name!r} has no snapshot at its branch (epoch {branch}) to start from.")
    return end_means(at)
