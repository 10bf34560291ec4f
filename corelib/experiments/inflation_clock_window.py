"""The interpretability window on the paper's own clock, shown from its record.

The paper ends by proposing to anneal weight decay soon after grokking, to keep the compact core
that forms there. The chapter ``interpretability_window`` shows it; the clock chapter's ``paper``
profile puts that to the test on the paper's clock
(lr 1e-3, weight decay 1): the window's arms (:data:`inflation_clock.WINDOW_ARMS`) branch from the
kept run at grokking and train to epoch 20 000 (tau 60), three seeds each. That costs about eleven
hours of one core, so it is recorded once (``recorded/inflation_clock_window_paper``, read by
:func:`corelib.experiments.paper_scale.recorded_window`), and every build shows the record after
re-deriving a sample of it from the recorded weights at the branch
(:func:`inflation_clock.window_sample_agreement`).

:func:`show` reads the record into a :class:`PaperWindow`; :func:`finding_values` measures the
book's findings ``window_paper.*`` on it (:data:`corelib.claims.FINDINGS`); :func:`glue_values`
gives the numbers the chapter's prose quotes; :func:`seeds_needed` says how many seeds would tell
two arms apart where three do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas
from scipy import stats

from .. import claims
from . import inflation_clock, modular_runs
from .inflation_clock import ClockParams, EndState, Window, WindowCurve, WindowSummary
from .inflation_clock_records import as_window

if TYPE_CHECKING:
    from .paper_scale_records import RecordedWindow

__all__ = [
    "CHAPTER",
    "WindowParams",
    "TAUS",
    "ANNEALED",
    "PaperWindow",
    "show",
    "tau_table",
    "finding_values",
    "record_claims",
    "seeds_needed",
    "t_test_power",
    "glue_values",
]

CHAPTER = "interpretability_window"
"""The chapter that shows the window, and under whose name its findings are recorded."""

TAUS = (12.0, 30.0, 60.0)
"""Where the chapter reads the arms: the fast clock's window end, halfway, and the paper's end."""

ANNEALED = ("anneal_short", "anneal_long")
"""The arms whose weight decay is annealed to zero after grokking (over tau 1.5 and 6)."""

_ALPHA, _POWER = 0.05, 0.8  # a two-sided test at the 5 % level, with 80 % power


@dataclass(frozen=True)
class PaperWindow:
    """The recorded window on the paper's clock (:func:`show`).

    Attributes:
        params: the record's settings.
        source: how the book names the record (profile, commit, export date).
        end: every arm at the window's end.
        at_tau: ``{tau: WindowSummary}``, every arm as it stood at each tau of :data:`TAUS`.
        at_branch: ``{arm: EndState}``, the models each arm started from
            (:func:`inflation_clock.arm_at_branch`): the kept run at grokking; the arms that
            branch at grokking from the branch weights (the kept models trained to grokking again,
            another realisation of them: ``core_dims_at_branch``); the late removal from its own
            snapshot where it branches (tau ``params.late_removal``).
        curves: per arm its :class:`~corelib.experiments.inflation_clock_records.WindowCurve`: its
            snapshots' epochs and per-seed values (snapshots x seeds) of the core dimension, modes
            and test accuracy (:func:`inflation_clock.window_curves`).
        sample: the sample re-derived from the branch weights and compared with the record
            (:func:`inflation_clock.window_sample_agreement`'s result), None when not checked.
        sample_arm: the arm of that sample.
        training_seconds: per arm trained for the record, its training time.
        core_dims_at_branch: per seed at grokking, the core dimension of the kept run shown
            (``"kept run"``) and of the weights the arms branched from (``"branch weights"``).
    """

    params: ClockParams
    source: str
    end: WindowSummary
    at_tau: dict[float, WindowSummary]
    at_branch: dict[str, EndState]
    curves: dict[str, WindowCurve]
    sample: dict[str, Any] | None
    sample_arm: str
    training_seconds: dict[str, float]
    core_dims_at_branch: dict[str, list[float]]


def _check_sample_request(arm: str, epochs: int) -> None:
    if arm not in inflation_clock.WINDOW_SAMPLE_ARMS:
        raise ValueError(
            f"window_sample_arm must be an arm that branches at grokking, one of "
            f"{inflation_clock.WINDOW_SAMPLE_ARMS}; got {arm!r}."
        )
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(
            f"window_check_epochs must be a whole number of epochs after the branch (0: check nothing); got {epochs!r}."
        )


@dataclass(frozen=True)
class WindowParams:
    """The window chapter's own settings: which arm of the record on the paper's clock a build
    re-derives from the recorded branch weights (``window_sample_arm``), and for how many epochs
    after the branch (``window_check_epochs``; 0: none). The arms on the fast clock are the clock
    chapter's (:class:`~corelib.experiments.inflation_clock.ClockParams`)."""

    window_sample_arm: str = "anneal_short"
    window_check_epochs: int = 200

    def __post_init__(self):
        _check_sample_request(self.window_sample_arm, self.window_check_epochs)

    @classmethod
    def from_namespace(cls, namespace: dict) -> WindowParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})


def show(
    recorded: RecordedWindow | None,
    *,
    sample_arm: str = "anneal_short",
    sample_epochs: int = 200,
    progress: bool = True,
) -> PaperWindow:
    """The record ``recorded`` (:func:`~corelib.experiments.paper_scale.recorded_window`'s) as the
    chapter shows it, after re-deriving its arm ``sample_arm`` for ``sample_epochs`` epochs after
    the branch from the recorded branch weights (0: no re-derivation); an error naming the fix
    without a record."""
    _check_sample_request(sample_arm, sample_epochs)
    if recorded is None:
        raise ValueError(
            "no recorded window on the paper's clock: recorded/inflation_clock_window_paper/ is missing; restore it "
            "with `git checkout -- recorded/` (or export a finished run: `python -m acebook.record export "
            "inflation_clock_window`)."
        )
    params, window = recorded.params, as_window(recorded.window)
    sample = None
    if sample_epochs:
        sample = inflation_clock.window_sample_agreement(params, recorded, sample_arm, sample_epochs, progress=progress)
    prov = recorded.provenance
    return PaperWindow(
        params=params,
        source=recorded.source,
        end=inflation_clock.window_summary(params, window),
        at_tau=inflation_clock.window_at_tau(params, window, TAUS),
        at_branch=_at_branch(window),
        curves=inflation_clock.window_curves(window),
        sample=sample,
        sample_arm=sample_arm,
        training_seconds=dict(prov.get("training_seconds") or {}),
        core_dims_at_branch=dict(prov.get("core_dims_at_branch") or {}),
    )


def _at_branch(window: Window) -> dict[str, EndState]:
    """The models every arm started from (:func:`inflation_clock.arm_at_branch`), each from its own
    snapshot at its branch: the kept run shown is another realisation, never a stand-in."""
    return {name: inflation_clock.arm_at_branch(window, name, fallback=False) for name in window.arms}


def tau_table(pw: PaperWindow) -> pandas.DataFrame:
    """Every arm at each tau of :data:`TAUS`, indexed by (tau, arm): what
    :func:`inflation_clock.window_table` shows of one."""
    return inflation_clock.window_tau_table(pw.at_tau)


def _growths(pw: PaperWindow, arm: str) -> np.ndarray:
    """Per seed of ``arm``, its core dimension at the window's end minus at its branch (seeds
    without a core at either left out)."""
    curve = pw.curves[arm]
    start = curve.branch if curve.branch is not None else pw.end.grok_epoch
    dims = np.asarray(curve.core_dim, dtype=float)
    growth = dims[-1] - dims[list(curve.epochs).index(start)]
    return growth[np.isfinite(growth)]


def _near_grokking(pw: PaperWindow) -> float:
    """The largest growth of an annealed seed over the smallest growth of a kept seed (NaN when
    some kept seed did not grow: there is no inflation to compare with)."""
    kept = _growths(pw, "kept").min()
    annealed = max(_growths(pw, a).max() for a in ANNEALED)
    return float(annealed / kept) if kept > 0 else float("nan")


def finding_values(pw: PaperWindow) -> dict[str, float]:
    """The values of the findings ``window_paper.*`` (:data:`corelib.claims.FINDINGS`), measured
    at the window's end. With three seeds, two arms are told apart only where their seed ranges
    do not overlap: seven findings are the gap between two ranges (positive when they are apart);
    ``anneal_near_grokking`` compares the extremes of the seeds' growths since their branch (a
    ratio, NaN when some kept seed did not grow), and ``all_generalise`` is the lowest test
    accuracy of any model of any arm."""
    end, branch = pw.end.arms, pw.at_branch
    kept, restarted = end["kept"], end["restarted"]
    annealed_max = max(end[a].core_dim_max for a in ANNEALED)
    return {
        "window_paper.kept_inflates": kept.core_dim_min - branch["kept"].core_dim_max,
        "window_paper.anneal_smaller": kept.core_dim_min - annealed_max,
        "window_paper.anneal_near_grokking": _near_grokking(pw),
        "window_paper.removed_smaller": kept.core_dim_min - end["removed"].core_dim_max,
        "window_paper.restart_smaller": kept.core_dim_min - restarted.core_dim_max,
        "window_paper.late_removal_deflates": branch["removed_late"].core_dim_min - end["removed_late"].core_dim_max,
        "window_paper.anneal_below_restart": restarted.core_dim_min - annealed_max,
        "window_paper.removed_below_restart": restarted.core_dim_min - end["removed"].core_dim_max,
        "window_paper.all_generalise": min(float(np.min(_end_values(pw, a, "test_acc"))) for a in end),
    }


def record_claims(pw: PaperWindow | None) -> None:
    """Record the findings ``window_paper.*`` measured on the record ``pw`` for the claims page,
    under the record's name and with its settings that differ from the paper's; without a record,
    forget what an earlier one left."""
    claims.forget_recorded("inflation_clock")  # left by builds from before the window had a chapter of its own
    if pw is None:
        claims.forget_recorded(CHAPTER)
        return
    settings = claims.deviations(pw.params.base(), modular_runs.ModularParams(), ignore=["eval_every"])
    claims.record(CHAPTER, finding_values(pw), settings=settings, source=pw.source)


def seeds_needed(pw: PaperWindow, arm: str, other: str = "kept") -> int | None:
    """Seeds per arm that a two-sided two-sample t-test at the 5 % level would need to tell the
    mean core dimension of ``arm`` from that of ``other`` at the window's end with 80 % power, if
    the difference of the means and the pooled spread over seeds were what the record measured
    (the power from the noncentral t distribution); at least 2, None when the means are equal
    (no number of seeds would do). It sizes a test of the means, which needs fewer seeds than
    ranges that stop overlapping, and it trusts a spread that three seeds estimate poorly. Each
    arm needs at least two seeds with a core at the end."""
    a, b = (_end_values(pw, name, "core_dim") for name in (arm, other))
    if min(len(a), len(b)) < 2:
        raise ValueError(
            f"seeds_needed estimates the spread over seeds: {arm!r} has {len(a)} and {other!r} has {len(b)} "
            "seeds with a core at the end; it needs at least two each."
        )
    d = abs(float(np.mean(a) - np.mean(b)))
    if d == 0:
        return None
    spread = math.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1) * np.var(b, ddof=1)) / (len(a) + len(b) - 2))
    if spread == 0:
        return 2
    z = stats.norm.ppf(1 - _ALPHA / 2) + stats.norm.ppf(_POWER)
    n = max(2, math.ceil(2 * (z * spread / d) ** 2))  # the normal approximation: a lower bound
    while t_test_power(d / spread, n) < _POWER:
        n += 1
    return n


def t_test_power(effect: float, n: int, alpha: float = _ALPHA) -> float:
    """The power of a two-sided two-sample t-test at level ``alpha`` with ``n`` seeds per arm, for
    a difference of means of ``effect`` standard deviations (the noncentral t distribution)."""
    df = 2 * n - 2
    nc = effect * math.sqrt(n / 2)
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def _end_values(pw: PaperWindow, arm: str, metric: str) -> np.ndarray:
    """The per-seed ``metric`` of ``arm`` at its last snapshot (seeds without one left out)."""
    last = np.asarray(getattr(pw.curves[arm], metric), dtype=float)[-1]
    return last[np.isfinite(last)]


def _arm_glue(name: str, arm: Any, tau: float) -> dict[str, float]:
    key = f"pw_{name}_{tau:g}"
    return {
        f"{key}_core": round(arm.core_dim, 1),
        f"{key}_min": arm.core_dim_min,
        f"{key}_max": arm.core_dim_max,
        f"{key}_modes": round(arm.modes, 1),
        f"{key}_acc": round(arm.test_acc, 3),
        f"{key}_spikes": round(arm.spikes_per_1000, 2),
    }


def _seeds_text(pw: PaperWindow, arm: str) -> int | str:
    """:func:`seeds_needed` against the kept run, or why there is no number."""
    try:
        n = seeds_needed(pw, arm)
    except ValueError:
        return "no estimate (too few seeds)"
    return "no number" if n is None else n


def _seed_values(pw: PaperWindow, arm: str, epoch: int, metric: str = "core_dim") -> list[float]:
    """The per-seed ``metric`` of ``arm`` at its snapshot of ``epoch``, in the order of the seeds."""
    curve = pw.curves[arm]
    return list(np.asarray(getattr(curve, metric), dtype=float)[list(curve.epochs).index(epoch)])


def _dims(values: list[float]) -> str:
    """Per-seed whole numbers as text ("none" for a seed without one)."""
    return ", ".join(f"{v:.0f}" if math.isfinite(v) else "none" for v in values)


def glue_values(pw: PaperWindow) -> dict[str, float | int | str]:
    """The numbers the chapter's prose quotes of the paper-clock window, by glue name: the clock
    (``pw_pair``) and the taus of :data:`TAUS` (``pw_tau_0`` ...); per arm and tau,
    ``pw_<arm>_<tau>_core`` (mean core dimension), ``_min``, ``_max`` (its range over seeds), ``_dims``
    (each seed's, in the order of the seeds),
    ``_modes``, ``_acc`` and ``_spikes`` (per 1000 epochs since the branch); the arms at their
    branch; the seeds :func:`seeds_needed` per arm against the kept run; and how the sample
    re-derived (``pw_checked_*``, as :func:`inflation_clock.record_numbers`)."""
    out: dict[str, float | int | str] = {}
    for tau, summary in pw.at_tau.items():
        for name, arm in summary.arms.items():
            out.update(_arm_glue(name, arm, tau))
            out[f"pw_{name}_{tau:g}_dims"] = _dims(_seed_values(pw, name, arm.end))
    lr, wd = pw.params.window_pair
    late = pw.end.arms["removed_late"]
    branch = pw.at_branch[inflation_clock.WINDOW_SAMPLE_ARMS[0]]  # every arm at grokking starts from these
    out.update(
        {
            "pw_n_seeds": len(pw.params.seeds),
            "pw_pair": inflation_clock.pair_label(lr, wd),
            **{f"pw_tau_{i}": tau for i, tau in enumerate(TAUS)},
            "pw_grok": pw.end.grok_epoch,
            "pw_tau_grok": round(pw.end.tau_grok, 2),
            "pw_end_epoch": pw.end.arms["kept"].end,
            "pw_kept_branch_core": round(pw.at_branch["kept"].core_dim, 1),
            "pw_branch_core": round(branch.core_dim, 1),
            "pw_kept_branch_dims": _dims(pw.core_dims_at_branch.get("kept run", [])),
            "pw_weights_branch_dims": _dims(pw.core_dims_at_branch.get("branch weights", [])),
            "pw_anneal_short_epochs": round(inflation_clock.epochs_for(pw.params, lr, wd, pw.params.anneal[0])),
            "pw_anneal_long_epochs": round(inflation_clock.epochs_for(pw.params, lr, wd, pw.params.anneal[1])),
            "pw_late_tau": pw.params.late_removal,
            "pw_late_branch": late.branch,
            "pw_late_at_branch": round(pw.at_branch["removed_late"].core_dim, 1),
            "pw_late_at_branch_min": pw.at_branch["removed_late"].core_dim_min,
            "pw_late_at_branch_max": pw.at_branch["removed_late"].core_dim_max,
            "pw_late_at_branch_dims": _dims(_seed_values(pw, "removed_late", late.branch)),
            "pw_training_hours": round(sum(pw.training_seconds.values()) / 3600, 1),
            "pw_sample_arm": pw.sample_arm.replace("_", " "),
            "pw_anneal_gap": pw.end.arms["kept"].core_dim_min - max(pw.end.arms[a].core_dim_max for a in ANNEALED),
            "pw_max_spikes": round(max(a.spikes_per_1000 for s in pw.at_tau.values() for a in s.arms.values()), 2),
        }
    )
    for name in ("restarted", "removed", *ANNEALED):
        out[f"pw_seeds_{name}"] = _seeds_text(pw, name)
    checked = inflation_clock.record_numbers(None if pw.sample is None else {"agreement": pw.sample})
    out.update({f"pw_{k}": v for k, v in checked.items() if k != "record_minutes"})
    out["pw_checked_after"] = 0 if pw.sample is None else pw.sample["epochs"] - pw.end.grok_epoch
    return out
