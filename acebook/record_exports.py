"""The exporters of ``python -m acebook.record export``: per experiment, what a finished run of a
profile leaves in ``recorded/`` (its compact results) and what its provenance says of it (the
settings, the training time, the command that re-derives a sample). Each refuses a run that has
not reached the profile's horizon, naming the command that finishes it. :mod:`acebook.record`
writes the provenance and re-derives the samples; ``core_inflation_questions`` is
:mod:`acebook.record_questions`'.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from corelib.engine import load_snapshot, snapshot_epochs, training_seconds
from corelib.experiments import inflation_clock, modular_runs, paper_scale
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.experiments.modular_records import Snapshot
from corelib.recorded import BRANCH_WEIGHTS, HISTORIES, history_tensors
from corelib.results import load_json, save_json, save_tensors
from corelib.tasks.sweeps import condition_dir, load_record

from .parameters import chapter_parameters

__all__ = [
    "WINDOW_SAMPLE_ARM",
    "clock_params",
    "export_core_inflation",
    "export_grokking_sweeps",
    "export_grokking_sweeps_moduli",
    "export_inflation_clock",
    "export_inflation_clock_window",
    "inflation_params",
    "sweep_wall_seconds",
    "sweeps_params",
]


# ---------------------------------------------------------------- core inflation


def _values(chapter: str, profile: str, precision: str | None) -> dict:
    """The chapter's parameters under ``profile``, with ``precision`` (None: the profile's)."""
    values = chapter_parameters(chapter, profile)
    return values if precision is None else {**values, "precision": precision}


def inflation_params(profile: str, precision: str | None = None) -> modular_runs.ModularParams:
    """The core-inflation chapter's settings under ``profile`` (``precision``: None, the profile's)."""
    return modular_runs.ModularParams.from_namespace(_values("core_inflation", profile, precision))


def _compact(records: list[Snapshot]) -> list[dict]:
    """The records' JSON form without the fitted operators, except at the last snapshot (the figure shows it)."""
    return [(r if r is records[-1] else r.without_operators()).to_json() for r in records]


def _profile_flag(profile: str) -> str:
    return "" if profile == "paper" else f" --profile {profile}"


def export_core_inflation(profile: str, folder: Path) -> dict:
    """Both arms' snapshot records and histories of a finished ``profile`` run into ``folder``; returns
    its provenance."""
    params = inflation_params(profile)
    for arm in modular_runs.ARMS:
        done = snapshot_epochs(modular_runs.arm_dir(params, arm))
        if not done or max(done) < params.long_epochs:
            raise SystemExit(
                f"the {arm} arm of the {profile}-profile run is at epoch {max(done, default=0)} of "
                f"{params.long_epochs}; finish it with "
                f"`python -m acebook.runner run core_inflation --profile {profile}`."
            )
    arms = {arm: _compact(modular_runs.analyse_arm(params, arm, params.long_epochs)) for arm in modular_runs.ARMS}
    # the sample re-derived by the command below: the first snapshot after the branch at or past 1000
    after = [r["epoch"] for r in arms["wd"] if r["epoch"] > params.branch_epoch]
    sample = next((e for e in after if e >= 1000), after[-1])
    history = {arm: _rounded(modular_runs.history(params, arm, until=params.long_epochs)) for arm in modular_runs.ARMS}
    save_json(folder / "arms.json", arms, compact=True)
    save_json(folder / "history.json", history, compact=True)
    return {
        "params": asdict(params),
        "precision": params.precision,
        "training_seconds": {arm: training_seconds(modular_runs.arm_dir(params, arm)) for arm in modular_runs.ARMS},
        "rederive": f"python -m acebook.record verify core_inflation{_profile_flag(profile)} --epochs {sample}",
    }


def _rounded(value: Any, digits: int = 6) -> Any:
    """Floats to ``digits`` significant digits (the per-epoch history, read only for its figure
    and the loss-spike counts, would otherwise take megabytes of digits nobody reads)."""
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    return float(f"{value:.{digits}g}") if isinstance(value, float) else value


# ---------------------------------------------------------------- grokking sweeps


def sweeps_params(profile: str, precision: str | None = None) -> SweepsParams:
    """The grokking-sweeps chapter's settings under ``profile`` (``precision``: None, the profile's)."""
    return SweepsParams.from_namespace(_values("grokking_sweeps", profile, precision))


_PROGRESS = re.compile(
    r"^(?P<label>p=\d+ wd=\S+ B=\w+), \d+ seeds:[^|]*\|[^|]*\| *(?P<step>\d+)/\d+ \[(?P<elapsed>[\d:]+)"
)


def _seconds(clock_text: str) -> int:
    """``[H:]MM:SS`` (a progress bar's elapsed time) in seconds."""
    seconds = 0
    for part in clock_text.split(":"):
        seconds = 60 * seconds + int(part)
    return seconds


def _pieces(text: str) -> list[tuple[str, int, int]]:
    """The progress bars' pieces in one log, in order: (condition, first step, last elapsed seconds).
    A bar whose elapsed time goes back starts a new piece (a log appended to by another run)."""
    out: list[tuple[str, int, int]] = []
    current: dict[str, int] = {}  # condition -> index of its open piece in out
    for line in re.split(r"[\r\n]", text):
        m = _PROGRESS.match(line.strip())
        if not m:
            continue
        label, step, elapsed = m["label"], int(m["step"]), _seconds(m["elapsed"])
        i = current.get(label)
        if i is None or elapsed < out[i][2]:
            current[label] = len(out)
            out.append((label, step, elapsed))
        else:
            out[i] = (label, out[i][1], elapsed)
    return out


def sweep_wall_seconds(logs: list[Path]) -> dict[str, int]:
    """Wall time of each sweep condition, read from the progress bars in the drivers' logs
    (``python -m acebook.paper_runs advance grokking_sweeps > log 2>&1``: the bars go to stderr):
    per condition the elapsed time of the last piece that started from step 0 plus the pieces that
    resumed after it, each to its last progress update. Logs are taken in the order of their
    modification times (keep them when copying); a piece that started over from step 0 replaced
    the work before it, so that work is not counted."""
    pieces: dict[str, list[tuple[int, int]]] = {}
    for log in sorted(logs, key=lambda f: f.stat().st_mtime):
        for label, start, seconds in _pieces(log.read_text(errors="replace")):
            pieces.setdefault(label, []).append((start, seconds))
    if not pieces:
        raise SystemExit(
            "the logs hold no sweep progress bars; they go to stderr, so write the logs with "
            "`python -m acebook.paper_runs advance grokking_sweeps > LOG 2>&1`."
        )
    out = {}
    for label, runs in pieces.items():
        fresh = [i for i, (start, _) in enumerate(runs) if start == 0]
        if not fresh:
            raise SystemExit(f"the logs hold only resumed pieces of {label}: add the log where it started.")
        out[label] = sum(seconds for _, seconds in runs[fresh[-1] :])
    return out


def export_grokking_sweeps(profile: str, folder: Path, logs: list[Path] | None = None) -> dict:
    """Every (condition, seed) record of the ``profile`` sweeps into ``folder``; returns its provenance
    (``logs``: the drivers' logs, for each condition's wall time)."""
    params = sweeps_params(profile)
    records, missing = [], []
    for cond, cfg in params.plans():
        stored = condition_dir(cond, cfg)
        for seed in params.seeds:
            rec = load_record(stored, cond, cfg, seed)
            records.append(rec)
            if rec is None:
                missing.append(f"{cond.label()} seed {seed}")
    if missing:
        raise SystemExit(
            f"{len(missing)} (condition, seed) records of the {profile}-profile sweeps are missing "
            f"(e.g. {missing[0]}); "
            f"finish them with `python -m acebook.runner run grokking_sweeps --profile {profile}`."
        )
    labels = [c.label() for c, _ in params.plans()]
    timed = sweep_wall_seconds(logs) if logs else {}  # read before anything is written
    save_json(folder / "records.json", records, compact=True)
    untimed = [label for label in labels if label not in timed]
    return {
        "params": asdict(params),
        "precision": params.precision,
        # the records do not keep time; the drivers' logs do (None: no logs given)
        "training_seconds": {label: timed.get(label) for label in dict.fromkeys(labels)},
        "timing": (
            "wall seconds per condition (its seeds stacked, one thread), read from the drivers' progress bars"
            + (f"; not timed: {', '.join(untimed)}" if untimed else "")
        ),
        "rederive": (
            f"python -m acebook.record verify grokking_sweeps{_profile_flag(profile)} "
            f'--condition "{params.omega_conditions()[-1].label()}"'
        ),
    }


def export_grokking_sweeps_moduli(profile: str, folder: Path) -> dict:
    """The modulus sweep's conditions near the critical modulus, at the profile's settings."""
    from corelib.experiments.grokking_sweeps_moduli import near_params

    params = near_params(sweeps_params(profile))
    cfg = params.config(params.p_max_epochs)
    records = [load_record(condition_dir(c, cfg), c, cfg, s) for c in params.p_conditions() for s in params.seeds]
    if any(r is None for r in records):
        moduli = " ".join(str(p) for p in params.moduli)
        raise SystemExit(
            f"{sum(r is None for r in records)} (condition, seed) records near the critical modulus are missing; "
            f"finish them with `python -m acebook.paper_runs advance grokking_sweeps --moduli {moduli}`."
        )
    save_json(folder / "records.json", records, compact=True)
    return {
        "params": asdict(params),
        "precision": params.precision,
        "rederive": "python -m acebook.record verify grokking_sweeps_moduli "
        f'--condition "{params.p_conditions()[-1].label()}"',
    }


# ---------------------------------------------------------------- the clock of core inflation


def clock_params(profile: str, precision: str | None = None) -> inflation_clock.ClockParams:
    """The inflation-clock chapter's settings under ``profile`` (``precision``: None, the profile's)."""
    return inflation_clock.ClockParams.from_namespace(_values("inflation_clock", profile, precision))


def _unfinished(mp: modular_runs.ModularParams, arm: str) -> int | None:
    """The epoch an arm stands at when it has not reached its horizon (None when it has)."""
    done = snapshot_epochs(modular_runs.arm_dir(mp, arm))
    return None if done and max(done) >= mp.long_epochs else max(done, default=0)


def export_inflation_clock(profile: str, folder: Path) -> dict:
    """The clock's runs and its window of a finished ``profile`` run into ``folder``; returns its provenance."""
    params = clock_params(profile)
    finish = f"finish it with `python -m acebook.runner run inflation_clock --profile {profile}`."
    runs = [
        (inflation_clock.pair_label(lr, wd), inflation_clock.pair_params(params, lr, wd), "wd")
        for lr, wd in params.pairs
    ]
    for label, mp, arm in [*runs, ("the window's kept run", inflation_clock.window_base(params), "wd")]:
        at = _unfinished(mp, arm)
        if at is not None:
            raise SystemExit(f"{label} of the {profile}-profile run is at epoch {at} of {mp.long_epochs}; {finish}")
    base = inflation_clock.window_base(params)
    grok = inflation_clock.window_branch_epoch(params, modular_runs.analyse_arm(base, "wd", base.long_epochs))
    arms = inflation_clock.window_arms(params, grok) if grok is not None else {}
    for name, (mp, arm) in arms.items():
        at = _unfinished(mp, arm)
        if at is not None:
            raise SystemExit(f"the window's arm {name!r} of the {profile}-profile run is at epoch {at}; {finish}")
    kept = inflation_clock.compact(inflation_clock.run_clock(params), inflation_clock.run_window(params))
    save_json(folder / "runs.json", kept["runs"], compact=True)
    save_json(folder / "window.json", kept["window"], compact=True)
    dirs = {}  # the window's kept run is a pair's run when its clock is one of the pairs: count it once
    for label, folder in [(label, modular_runs.arm_dir(mp, arm)) for label, mp, arm in runs] + [
        (f"window {name}", modular_runs.arm_dir(mp, arm)) for name, (mp, arm) in arms.items()
    ]:
        if folder not in dirs.values():
            dirs[label] = folder
    return {
        "params": asdict(params),
        "precision": params.precision,
        "training_seconds": {k: training_seconds(d) for k, d in dirs.items()},
        "rederive": f"python -m acebook.record verify inflation_clock{_profile_flag(profile)} --epochs {grok}",
    }


def _window_kept(params: inflation_clock.ClockParams, profile: str, root: Path) -> tuple[list[dict], dict, str]:
    """The window's kept run to its horizon: snapshot records, history and where they come from.
    From the results root when it trained that far; else from the recorded core-inflation run of
    ``profile`` in ``root`` when that run trained and analysed the same models (the window-only
    drivers train the kept run only to its last branch; its history is recorded to 6 digits)."""
    base = inflation_clock.window_base(params)
    if _unfinished(base, "wd") is None:
        records = modular_runs.analyse_arm(base, "wd", base.long_epochs)
        return records, modular_runs.history(base, "wd", until=base.long_epochs), "results"
    rec = paper_scale.recorded_inflation(root, profile)
    same = rec is not None and all(
        getattr(rec.params, k)() == getattr(base, k)() for k in ("training_identity", "analysis_identity")
    )
    if not same or rec.params.long_epochs < base.long_epochs:
        raise SystemExit(
            f"the window's kept run of the {profile}-profile run is at epoch {_unfinished(base, 'wd')} of "
            f"{base.long_epochs}, and no recorded core-inflation run of the same models reaches it; finish it with "
            f"`python -m acebook.runner run inflation_clock --profile {profile}`."
        )
    records = [r for r in rec.arms["wd"] if r.epoch <= base.long_epochs]
    return records, modular_runs.history_until(rec.histories["wd"], base.long_epochs), rec.source


def _window_records(
    params: inflation_clock.ClockParams, profile: str, root: Path
) -> tuple[inflation_clock.Window, str]:
    """The finished window of ``profile`` as :func:`inflation_clock.run_window` returns it, and where
    its kept run comes from (``"results"`` or the recorded core-inflation run's source)."""
    finish = f"finish it with `python -m acebook.paper_runs advance inflation_clock --window --profile {profile}`."
    kept, kept_history, kept_source = _window_kept(params, profile, root)
    grok = inflation_clock.window_branch_epoch(params, kept)
    if grok is None:
        raise SystemExit(f"the window's kept run of the {profile}-profile run never grokked: no window to record.")
    arms = inflation_clock.window_arms(params, grok)
    for name, (mp, arm) in arms.items():
        at = None if arm == "wd" else _unfinished(mp, arm)
        if at is not None:
            raise SystemExit(f"the window's arm {name!r} of the {profile}-profile run is at epoch {at}; {finish}")
    runs = {
        name: inflation_clock.WindowArmRun(
            params=mp,
            branch=None if arm == "wd" else mp.branch_epoch,
            records=kept if arm == "wd" else modular_runs.analyse_arm(mp, arm, mp.long_epochs),
            history=kept_history if arm == "wd" else modular_runs.history(mp, arm, until=mp.long_epochs),
        )
        for name, (mp, arm) in arms.items()
    }
    return inflation_clock.Window(grok, params.window_pair[0], params.window_pair[1], runs), kept_source


def _branch_weights(
    params: inflation_clock.ClockParams, window: inflation_clock.Window, profile: str
) -> dict[str, torch.Tensor]:
    """The weights every arm that branches at grokking started from: the results root's kept run
    at the branch. Refused unless each such arm's record at the branch is that snapshot's analysis."""
    base = inflation_clock.window_base(params)
    grok, source = window.grok_epoch, modular_runs.arm_dir(base, "wd")
    if grok not in snapshot_epochs(source):
        raise SystemExit(
            f"the results root holds no snapshot of the window's kept run at its branch (epoch {grok}); train the "
            f"window there with `python -m acebook.paper_runs advance inflation_clock --window --profile {profile}`."
        )
    start = modular_runs.analyse_arm(base, "wd", grok)[-1]
    for name, arm in window.arms.items():
        at = next((r for r in arm.records if r.epoch == grok), None)
        if arm.branch == grok and at != start:
            raise SystemExit(
                f"the window's arm {name!r} did not start from the results root's kept run at epoch {grok} (its "
                "record there is not that snapshot's analysis): the arms and the kept run are of different runs."
            )
    return load_snapshot(source, grok, "cpu").params


def export_inflation_clock_window(profile: str, folder: Path) -> dict:
    """The window alone of a finished ``profile`` run into ``folder`` (its records, histories, and the
    weights its arms branched from); returns its provenance."""
    params = clock_params(profile)
    window, kept_source = _window_records(params, profile, folder.parent)
    weights = _branch_weights(params, window, profile)
    compacted = inflation_clock.compact({}, window)["window"]
    histories = {name: arm.pop("history") for name, arm in compacted["arms"].items()}
    save_json(folder / "window.json", compacted, compact=True)
    save_tensors(folder / HISTORIES, history_tensors(histories))
    save_json(
        folder / "branch_run.json", load_json(modular_runs.arm_dir(window.arms["kept"].params, "wd") / "run.json")
    )
    save_tensors(folder / BRANCH_WEIGHTS, weights)
    return {
        "params": asdict(params),
        "precision": params.precision,
        "kept_run": kept_source,
        "core_dims_at_branch": _core_dims_at_branch(window),
        "training_seconds": {
            f"window {name}": training_seconds(modular_runs.arm_dir(arm.params, "no_wd"))
            for name, arm in window.arms.items()
            if arm.branch is not None
        },
        "rederive": (
            f"python -m acebook.record verify inflation_clock_window{_profile_flag(profile)} "
            f"--epochs {_window_sample_epochs(window)}"
        ),
    }


def _core_dims_at_branch(window: inflation_clock.Window) -> dict[str, list]:
    """Per seed, the core dimension at the branch of the kept run shown and of the weights the arms
    started from: equal when both are one run; a kept run recorded on another machine differs."""
    grok = window.grok_epoch

    def dims(arm: str) -> list:
        return [m.core_dim for m in next(r for r in window.arms[arm].records if r.epoch == grok).models]

    return {"kept run": dims("kept"), "branch weights": dims(WINDOW_SAMPLE_ARM)}


WINDOW_SAMPLE_ARM = "anneal_short"
"""The arm whose first epochs after the branch a window record's sample re-derives: the window's premise."""


def _window_sample_epochs(window: inflation_clock.Window) -> int:
    """Epochs after the branch of the default sample: to the sample arm's second snapshot after it."""
    grok = window.grok_epoch
    after = [r.epoch - grok for r in window.arms[WINDOW_SAMPLE_ARM].records if r.epoch > grok]
    if not after:
        raise SystemExit(f"the window's arm {WINDOW_SAMPLE_ARM!r} has no snapshot after its branch: nothing to sample.")
    return after[min(1, len(after) - 1)]
