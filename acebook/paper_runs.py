"""Run the paper-profile experiments in pieces, and carry an unfinished run to another machine.

::

    python -m acebook.paper_runs advance core_inflation --minutes 120   # train + analyse, then stop
    python -m acebook.paper_runs advance grokking_sweeps --minutes 120  # whole conditions, in order
    python -m acebook.paper_runs advance inflation_clock --minutes 120  # the clock's runs, the window's arms
    python -m acebook.paper_runs pack core_inflation                    # what a resume needs -> in_progress/
    python -m acebook.paper_runs unpack core_inflation                  # in_progress/ -> the results root
    python -m acebook.paper_runs advance grokking_sweeps --precision auto  # bf16 where the CPU/GPU has it

``--precision auto`` is the fast path: bf16 training passes where the hardware computes bf16
natively (1.6-1.9x the fp32 rate on a CPU with AVX512-BF16), fp32 elsewhere. Its fidelity
is recorded in ``recorded/bf16_fidelity_*.json`` (to epoch 1200 of the modular model, on a CPU).
A run's precision is part of its identity: ``pack`` and a later ``advance`` must name the same
one, and the chapter shows the run when it is run with it too (``ace-book run core_inflation
--profile paper -p precision auto``). The records in ``recorded/`` are of fp32 runs, as every
profile of the book trains in fp32, so that readers on different machines compare like with like.

``advance`` does what ``python -m acebook.runner run <chapter> --profile paper`` computes, in an
order that keeps the work safe when the process is stopped: core inflation trains each arm in
chunks of ``--chunk`` epochs and analyses each new snapshot at once (the analyses are cached);
the sweeps run one condition at a time and keep each seed's record. It starts no new piece after
``--minutes``; a kill at any moment loses at most the epochs since the last checkpoint. Two
drivers (one per core) can share an experiment: each leaves a run, arm or condition that the
other is advancing to it.

``pack`` copies what a resume needs, and nothing re-derivable, into ``in_progress/`` in the
project: per core-inflation arm the committed state (weights, AdamW moments, dropout streams,
history), the snapshot analyses and the snapshot the other arm branches from (not every weight
snapshot: each is ~5 MB and already analysed); per sweep condition the finished records and the
checkpoint of its unfinished seeds. It is
for machines that do not keep files between working sessions: the packed folder goes into
version control until the run is exported to ``recorded/``, then it is deleted. ``unpack`` puts it
back under the results root; every file keeps its manifest, so everything read is verified. A pack
comes from elsewhere, so ``unpack`` checks all of it before it copies anything
(:mod:`corelib.untrusted`): a link anywhere, a manifest naming a path rather than a file of its
folder, a folder another experiment packs, or a pointer of the wrong shape refuses the whole pack.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import shutil
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from corelib import untrusted
from corelib.experiments import inflation_clock, modular_runs
from corelib.models import default_device
from corelib.results import (
    MANIFEST,
    PROJECT_ROOT,
    StoreError,
    claimed,
    copy_file,
    load_json,
    results_root,
    run_busy,
    save_bytes,
    save_json,
    stored_files,
)
from corelib.tasks.sweeps import condition_dir, condition_path, load_record, run_condition

from .project import ConfigError, check_environment
from .record import clock_params, inflation_params, sweeps_params

__all__ = ["IN_PROGRESS", "advance_inflation", "advance_clock", "advance_sweeps", "pack", "unpack", "main"]

IN_PROGRESS = PROJECT_ROOT / "in_progress"
EXPERIMENTS = ("core_inflation", "inflation_clock", "grokking_sweeps")
CHUNK = 500  # epochs per piece of a modular-addition run at the paper's lr x wd


@dataclass(frozen=True)
class _Arm:
    """One arm of a modular-addition experiment to advance: its settings, arm name and horizon."""

    params: modular_runs.ModularParams
    arm: str
    horizon: int
    label: str


def _horizons(job: _Arm, start: int, chunk: int) -> list[int]:
    """Piece ends after ``start``: for each multiple of ``chunk``, the first snapshot of the whole
    run at or after it (so the pieces add no snapshot an uninterrupted run would not have), and
    the horizon."""
    whole = job.params.stack_config(job.arm, job.horizon)
    ends = set()
    for k in range(start // chunk + 1, job.horizon // chunk + 1):
        e = k * chunk
        while e < job.horizon and not whole.is_snapshot(e):
            e += 1
        if start < e < job.horizon:
            ends.add(e)
    return sorted(ends) + ([job.horizon] if job.horizon > start else [])


def _trained(params: modular_runs.ModularParams, arm: str) -> int:
    from corelib.engine import snapshot_epochs

    return max(snapshot_epochs(modular_runs.arm_dir(params, arm)), default=0)


def _piece(params: modular_runs.ModularParams, epochs: int) -> modular_runs.ModularParams:
    """The same models and folders as the whole run, with the horizon ``epochs``."""
    horizon = max(epochs, params.branch_epoch)
    return replace(params, epochs=min(params.epochs, horizon), long_epochs=horizon)


def _advance(
    jobs: list[_Arm], chunk: int, deadline: float, pieces: int | None, started: int = 0, together: bool = False
) -> int:
    """Train and analyse each job chunk by chunk until its horizon, the deadline or ``pieces``
    chunks in all; returns the chunks started. ``chunk`` is in epochs at the paper's lr x wd and
    scales with each run's clock. ``together``: the jobs advance a chunk each per round, as one
    stack (:func:`_advance_together`); else one job after another, each claimed on its own, so
    that a second driver can take the next."""
    if together:
        return _advance_together(jobs, chunk, deadline, pieces, started)
    for job in jobs:
        if time.monotonic() > deadline or started == pieces:
            return started
        with claimed(modular_runs.arm_dir(job.params, job.arm)) as mine:
            if not mine:
                print(f"{job.label}: advanced by another process; left to it", flush=True)
                continue
            started = _advance_job(job, chunk, deadline, pieces, started)
    return started


def stacked_by_default() -> bool:
    """Whether ``advance`` trains an experiment's runs as one stack when not told: on a GPU, where a
    step of one model leaves the device idle between launches; not on a CPU, where a stack is no
    faster and two drivers (one per core), each with its own run, are twice as fast."""
    return default_device().type != "cpu"


def _step(job: _Arm, chunk: int) -> int:
    """A piece of ``job`` in its own epochs: ``chunk`` at the paper's lr x wd, scaled to its clock."""
    return max(1, round(chunk * inflation_clock.REFERENCE_RATE / (job.params.lr * job.params.weight_decay)))


def _first_epoch(job: _Arm) -> int:
    return job.params.branch_epoch if job.arm == "no_wd" else 0


def _finish_analyses(job: _Arm) -> int:
    """Analyse what a piece killed between training and analysing left; returns the epoch trained."""
    trained = _trained(job.params, job.arm)
    if trained > _first_epoch(job):
        modular_runs.analyse_arm(_piece(job.params, trained), job.arm, trained)
    return trained


def _advance_job(job: _Arm, chunk: int, deadline: float, pieces: int | None, started: int) -> int:
    trained = _finish_analyses(job)
    for h in _horizons(job, max(_first_epoch(job), trained), _step(job, chunk)):
        if time.monotonic() > deadline or started == pieces:
            break
        started += 1
        modular_runs.train_arm(_piece(job.params, h), job.arm, h)
        modular_runs.analyse_arm(_piece(job.params, h), job.arm, h)
        print(f"{job.label}: trained and analysed to epoch {h} of {job.horizon}", flush=True)
    return started


def _advance_together(jobs: list[_Arm], chunk: int, deadline: float, pieces: int | None, started: int) -> int:
    """:func:`_advance` with the jobs as one stack: each round every job not done trains its next
    piece in one :func:`modular_runs.train_together` call (a branch once its weight-decay run has
    reached the branch epoch), then each new snapshot is analysed. The folders end as one job
    after another leaves them (bit for bit on one CPU thread). Jobs share one model and data."""
    with ExitStack() as held:
        mine = []
        for job in jobs:
            if held.enter_context(claimed(modular_runs.arm_dir(job.params, job.arm))):
                mine.append(job)
            else:
                print(f"{job.label}: advanced by another process; left to it", flush=True)
        for job in mine:
            _finish_analyses(job)
        while time.monotonic() <= deadline and started != pieces:
            pieces_now = _next_round(mine, chunk, None if pieces is None else pieces - started)
            if not pieces_now:
                break
            started += len(pieces_now)
            modular_runs.train_together([(_piece(job.params, h), job.arm, h) for job, h in pieces_now])
            for job, h in pieces_now:
                modular_runs.analyse_arm(_piece(job.params, h), job.arm, h)
                print(f"{job.label}: trained and analysed to epoch {h} of {job.horizon}", flush=True)
    return started


def _next_round(jobs: list[_Arm], chunk: int, limit: int | None) -> list[tuple[_Arm, int]]:
    """Each job's next piece end (weight-decay runs first, so a branch can join them), at most
    ``limit`` pieces; a branch waits for a round in which its run reaches the branch epoch."""
    out: list[tuple[_Arm, int]] = []
    for job in sorted(jobs, key=lambda j: j.arm != "wd"):
        ends = _horizons(job, max(_first_epoch(job), _trained(job.params, job.arm)), _step(job, chunk))
        if not ends or (job.arm == "no_wd" and not _branch_ready(job, out)):
            continue
        out.append((job, ends[0]))
        if limit is not None and len(out) == limit:
            break
    return out


def _branch_ready(job: _Arm, round_: list[tuple[_Arm, int]]) -> bool:
    """Whether the run ``job`` branches from is, or this round gets, to the branch epoch."""
    source = modular_runs.arm_dir(job.params, "wd")
    reach = [h for j, h in round_ if j.arm == "wd" and modular_runs.arm_dir(j.params, "wd") == source]
    return (reach[0] if reach else _trained(job.params, "wd")) >= job.params.branch_epoch


def _check_limits(chunk: int, minutes: float, pieces: int | None) -> float:
    """The deadline ``minutes`` from now; refuses a chunk or piece count below 1 and a time that is
    not a finite number of minutes above 0 (NaN would never pass, inf never stop)."""
    if chunk < 1 or (pieces is not None and pieces < 1):
        raise SystemExit(f"--chunk and --pieces must be whole numbers >= 1; got --chunk {chunk}, --pieces {pieces}.")
    if not math.isfinite(minutes) or minutes <= 0:
        raise SystemExit(
            f"--minutes must be a finite number of minutes above 0 (no new piece starts after it); got {minutes}."
        )
    return time.monotonic() + 60 * minutes


def _inflation_jobs(
    profile: str, precision: str | None = None, dropout: float | None = None, arms: tuple[str, ...] | None = None
) -> list[_Arm]:
    """The arms to advance; ``dropout`` (None: the profile's) and ``arms`` (None: both) make a variant
    of the profile's run, e.g. the weight-decay arm trained again without dropout."""
    params = inflation_params(profile, precision)
    if dropout is not None:
        params = replace(params, dropout=dropout)
    label = "core_inflation" if dropout is None else f"core_inflation dropout {dropout:g}"
    return [_Arm(params, arm, params.long_epochs, f"{label} {arm}") for arm in (arms or modular_runs.ARMS)]


def variant_name(
    name: str, dropout: float | None, moduli: list[int] | None = None, p_weight_decay: float | None = None
) -> str:
    """The folder in ``in_progress/`` of a run, or of its variant at another dropout (core
    inflation) or of the modulus sweep alone at other moduli or weight decay (the sweeps)."""
    if moduli is not None or p_weight_decay is not None:
        return (
            f"{name}_moduli"
            + ("" if moduli is None else "-".join(str(p) for p in moduli))
            + ("" if p_weight_decay is None else f"_wd{p_weight_decay:g}")
        )
    return name if dropout is None else f"{name}_dropout{dropout:g}"


def advance_inflation(
    profile: str = "paper",
    minutes: float = 60.0,
    chunk: int = CHUNK,
    pieces: int | None = None,
    precision: str | None = None,
    dropout: float | None = None,
    arms: tuple[str, ...] | None = None,
    together: bool | None = None,
) -> dict[str, int]:
    """Train and analyse the core-inflation arms of ``profile`` chunk by chunk until the horizon,
    or until ``minutes`` have passed or ``pieces`` chunks are done (no chunk is started after
    that); returns each arm's epoch. ``precision``: the training precision (None: the profile's;
    ``"auto"``: bf16 where the hardware computes it natively, see ``corelib.engine.resolve_precision``).
    ``together``: both arms as one stack (None: where the models train on a GPU, see :func:`stacked_by_default`)."""
    deadline = _check_limits(chunk, minutes, pieces)
    jobs = _inflation_jobs(profile, precision, dropout, arms)
    _advance(jobs, chunk, deadline, pieces, together=stacked_by_default() if together is None else together)
    return {job.arm: _trained(job.params, job.arm) for job in jobs}


def _late_branch(params: inflation_clock.ClockParams) -> int:
    """The kept run's snapshot nearest the late removal: the last epoch any window arm branches at."""
    base = inflation_clock.window_base(params)
    cfg = base.stack_config("wd", base.long_epochs)
    wanted = inflation_clock.epochs_for(params, *params.window_pair, params.late_removal)
    return min((e for e in range(1, base.long_epochs) if cfg.is_snapshot(e)), key=lambda e: abs(e - wanted))


def _clock_jobs(params: inflation_clock.ClockParams, window_only: bool = False) -> tuple[list[_Arm], list[int]]:
    """The clock's runs and the window's arms known so far (the branches once the kept run has
    grokked), and the kept run's snapshots the branches start from.

    ``window_only``: the window's arms alone, the kept run trained only as far as its last branch
    (its own records to the horizon are the recorded core-inflation run, on the paper's clock)."""
    jobs = (
        []
        if window_only
        else [
            _Arm(mp, "wd", mp.long_epochs, f"inflation_clock {lr:g} x {wd:g}")
            for lr, wd in params.pairs
            for mp in [inflation_clock.pair_params(params, lr, wd)]
        ]
    )
    base = inflation_clock.window_base(params)
    kept_horizon = _late_branch(params) if window_only else base.long_epochs
    jobs.append(_Arm(base, "wd", kept_horizon, "inflation_clock window kept"))
    trained = _trained(base, "wd")
    kept = (
        modular_runs.analyse_arm(replace(base, epochs=max(trained, 1), long_epochs=max(trained, 1)), "wd", trained)
        if trained
        else []
    )
    grok = inflation_clock.window_branch_epoch(params, kept)
    if grok is None:
        return jobs, []
    arms = inflation_clock.window_arms(params, grok)
    jobs += [
        _Arm(mp, arm, mp.long_epochs, f"inflation_clock window {name}")
        for name, (mp, arm) in arms.items()
        if arm != "wd"
    ]
    return jobs, sorted({mp.branch_epoch for mp, arm in arms.values() if arm != "wd"})


def advance_clock(
    profile: str = "paper",
    minutes: float = 60.0,
    chunk: int = CHUNK,
    pieces: int | None = None,
    window_only: bool = False,
    precision: str | None = None,
    together: bool | None = None,
) -> int:
    """Advance the clock chapter's runs and window arms of ``profile`` as :func:`advance_inflation`
    does (the branches start once the kept run has grokked); returns the chunks run.
    ``window_only``: the window's arms alone (see :func:`_clock_jobs`); ``together``: the runs and
    arms as one stack (None: where the models train on a GPU)."""
    deadline = _check_limits(chunk, minutes, pieces)
    params, started = clock_params(profile, precision), 0
    together = stacked_by_default() if together is None else together
    while True:
        jobs, _ = _clock_jobs(params, window_only)
        before = started
        started = _advance(jobs, chunk, deadline, pieces, started, together)
        if started == before or time.monotonic() > deadline or started == pieces:
            return started


def _sweep_plans(
    profile: str,
    precision: str | None = None,
    moduli: tuple[int, ...] | None = None,
    p_weight_decay: float | None = None,
):
    """The profile's sweep conditions; with ``moduli`` (and ``p_weight_decay``), the modulus sweep
    alone at those moduli (and that weight decay): the conditions that test the modulus law
    further, e.g. near the critical modulus or at a second weight decay."""
    params = sweeps_params(profile, precision)
    if moduli is None and p_weight_decay is None:
        return params, params.plans()
    params = replace(
        params,
        moduli=params.moduli if moduli is None else tuple(moduli),
        p_weight_decay=params.p_weight_decay if p_weight_decay is None else p_weight_decay,
    )
    cfg = params.config(params.p_max_epochs)
    return params, [(c, cfg) for c in params.p_conditions()]


def advance_sweeps(
    profile: str = "paper",
    minutes: float = 60.0,
    pieces: int | None = None,
    precision: str | None = None,
    moduli: tuple[int, ...] | None = None,
    p_weight_decay: float | None = None,
) -> tuple[int, int]:
    """Run the sweep conditions of ``profile`` one at a time until all are done, or ``minutes``
    have passed or ``pieces`` conditions were run; returns (conditions complete, conditions in all).

    A condition another process is running is left to it, so one driver per core shares the work.
    ``moduli`` and ``p_weight_decay``: the modulus sweep alone, at these moduli and weight decay.
    """
    deadline = _check_limits(1, minutes, pieces)
    params, plans = _sweep_plans(profile, precision, moduli, p_weight_decay)
    started, done = 0, 0
    for cond, cfg in plans:
        folder = condition_dir(cond, cfg)
        if all(load_record(folder, cond, cfg, s) is not None for s in params.seeds):
            done += 1
            continue
        if time.monotonic() > deadline or started == pieces:
            break
        if run_busy(folder):
            print(f"grokking_sweeps: {cond.label()} is being run by another process; left to it", flush=True)
            continue
        started += 1
        run_condition(cond, params.seeds, cfg, progress=True)
        done += 1
        print(f"grokking_sweeps: {cond.label()} done ({done} of {len(plans)})", flush=True)
    return done, len(plans)


def _copy(src: Path, dst: Path, names: list[str]) -> None:
    for name in names:
        copy_file(src / name, dst / name)


def _unanalysed(job: _Arm, snapshots: list[int]) -> list[int]:
    """Snapshots without their analysis (a piece killed between training and analysing)."""
    return [e for e in snapshots if not modular_runs.analysis_path(job.params, job.arm, e).exists()]


def _pack_arm(job: _Arm, dest: Path, keep_snapshots: list[int]) -> None:
    folder = modular_runs.arm_dir(job.params, job.arm)
    for attempt in range(3):  # a training process may commit a new state while we copy
        progress = load_json(folder / "progress.json")
        state = progress["state"]
        # A finished arm is only read (its history), never trained further: no weights needed.
        weights = [] if progress["epoch"] >= job.horizon else [f"{state}.safetensors"]
        try:
            _copy(folder, dest, ["run.json", f"{state}.json", *weights])
            break
        except StoreError:
            if attempt == 2:
                raise
    snapshots = sorted(set(keep_snapshots) & set(progress["snapshots"]) | set(_unanalysed(job, progress["snapshots"])))
    _copy(folder / "snapshots", dest / "snapshots", [f"epoch_{e:06d}.safetensors" for e in snapshots])
    for analysis in folder.glob("analysis_*"):
        _copy(analysis, dest / analysis.name, stored_files(analysis))
    if not (dest.parent / "params.json").exists():  # the run's parameters, shared by its arms
        _copy(folder.parent, dest.parent, ["params.json"])
    save_json(dest / "progress.json", progress)  # last: it names the state copied above


def _has_state(job: _Arm) -> bool:
    path = modular_runs.arm_dir(job.params, job.arm) / "progress.json"
    return path.exists() and load_json(path)["state"] is not None


def _relative(folder: Path) -> Path:
    return folder.relative_to(results_root())


def _packed_epochs(dest: Path, name: str) -> dict[str, int]:
    """Per packed arm or sweep condition (relative folder), how far the pack of ``name`` at ``dest`` got."""
    out = {}
    for packed in _check_pack(dest, name):
        for epoch in packed.epochs.values():
            out[str(packed.rel)] = epoch
        records = [n for n in packed.files if n.startswith("seed_") and n.endswith(".json")]
        if records:
            out[f"{packed.rel} records"] = len(records)
    return out


def _check_packable(name: str, folder: Path) -> Path:
    """``folder``, relative to the results root, if it is one :func:`unpack` takes for ``name``."""
    rel = _relative(folder)
    why = _unpackable(name, rel)
    if why:  # pack and unpack disagree on the layout: a bug here, not a bad pack
        raise RuntimeError(f"pack {name} would write {rel}, which unpack refuses ({why}); update _PACKED.")
    return rel


def pack(
    name: str,
    profile: str = "paper",
    dest: Path | None = None,
    window_only: bool = False,
    precision: str | None = None,
    dropout: float | None = None,
    arms: tuple[str, ...] | None = None,
    moduli: list[int] | None = None,
    p_weight_decay: float | None = None,
) -> Path:
    """Copy what resuming ``name``'s ``profile`` run (at ``precision``, None: the profile's) needs
    into ``dest`` (``in_progress/<name>``).

    Refuses to replace a pack that got further than the results root (unpack it first)."""
    dest = Path(dest) if dest is not None else IN_PROGRESS / variant_name(name, dropout, moduli, p_weight_decay)
    fresh = dest.with_name(dest.name + ".new")
    if fresh.exists():
        shutil.rmtree(fresh)
    if name in ("core_inflation", "inflation_clock"):
        if name == "core_inflation":
            jobs = _inflation_jobs(profile, precision, dropout, arms)
            branches = [jobs[0].params.branch_epoch]
            # an arm left out of this pack may still branch from the kept one later
            every = _inflation_jobs(profile, precision, dropout)
        else:
            jobs, branches = _clock_jobs(clock_params(profile, precision), window_only)
            every = jobs
        # A branch snapshot is needed only until every arm starting from it has a state of its own.
        waiting = {j.params.branch_epoch for j in every if j.arm == "no_wd" and not _has_state(j)}
        for job in jobs:
            folder = modular_runs.arm_dir(job.params, job.arm)
            if (folder / "progress.json").exists():
                keep = [e for e in branches if e in waiting] if job.arm == "wd" else []
                _pack_arm(job, fresh / _check_packable(name, folder), keep)
    else:
        params, plans = _sweep_plans(profile, precision, moduli, p_weight_decay)
        for cond, cfg in plans:
            folder = condition_path(cond, cfg)
            if not folder.exists():
                continue
            names = [p.name for p in folder.glob("seed_*.json")]
            if (folder / "checkpoint.json").exists():  # the unfinished seeds of a condition
                names += [load_json(folder / "checkpoint.json")["tensors"], "checkpoint.json"]
            if names:
                _copy(folder, fresh / _check_packable(name, folder), ["params.json", *names])
    if dest.exists():
        _check_not_behind(name, dest, fresh)
    if not fresh.exists():
        raise SystemExit(
            f"nothing to pack for {name} ({profile}): the results root {results_root()} holds no state of its "
            f"runs; advance it first (`python -m acebook.paper_runs advance {name} --profile {profile}`)."
        )
    if dest.exists():
        shutil.rmtree(dest)
    fresh.rename(dest)
    print(f"packed {name} ({profile}) into {dest}")
    return dest


def _check_not_behind(name: str, dest: Path, fresh: Path) -> None:
    """Refuse to replace the pack at ``dest`` by ``fresh`` where the old one got further."""
    try:
        old = _packed_epochs(dest, name)
    except untrusted.UntrustedError as exc:
        shutil.rmtree(fresh, ignore_errors=True)
        raise SystemExit(
            f"the pack in {dest} is refused ({exc}); delete it if it is not yours, then pack again."
        ) from None
    new = _packed_epochs(fresh, name) if fresh.exists() else {}
    behind = [k for k, v in old.items() if new.get(k, -1) < v]
    if behind:
        shutil.rmtree(fresh, ignore_errors=True)
        raise SystemExit(
            f"the pack in {dest} is further along than the results root for {behind[:3]}: unpack it first "
            f"(`python -m acebook.paper_runs unpack {name}`), then advance and pack again."
        )


_POINTERS = ("progress.json", "checkpoint.json")  # name the other files of their folder: copied last

# The folders `pack` writes for each experiment, below the pack as below the results root: the kind
# of run (the first folder, as `run_dir` names it) and how deep they go (modular/<run>/<arm>/analysis_<key>).
_PACKED = {"core_inflation": ("modular", 4), "inflation_clock": ("modular", 4), "grokking_sweeps": ("sweeps", 2)}
_RUN_KEY = re.compile(r"[0-9a-f]{16}")  # corelib.results.params_key
MAX_PACKED_FILE = 4 << 30  # far above a packed state (~15 MB at the paper's scale)
MAX_POINTER = 64 << 20  # a sweep checkpoint's JSON holds its finished seeds' records


def _unpackable(name: str, rel: Path) -> str | None:
    """Why the folder ``rel`` of a pack is not one that ``pack`` writes for ``name``; None if it is."""
    kind, depth = _PACKED[name]
    parts = rel.parts
    if parts[0] != kind:
        return f"{name} packs only folders under {kind}/, so {parts[0]}/ belongs to another experiment"
    if len(parts) > 1 and not _RUN_KEY.fullmatch(parts[1]):
        return f"{parts[1]!r} is not the folder of a run (16 hex digits)"
    if len(parts) > depth:
        return f"{name} packs folders at most {depth} deep"
    return None


@dataclass(frozen=True)
class _Packed:
    """A checked folder of a pack: where it goes, its files' verified SHA-256s and its pointers' epochs."""

    rel: Path
    files: dict[str, str]
    epochs: dict[str, int]


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _pointer_epoch(path: Path, files: dict[str, list[str]], what: str) -> int:
    """The epoch of a packed ``progress.json`` or ``checkpoint.json``, after checking that it has
    the shape the training code writes and names only files listed beside it."""
    value = untrusted.load_json(untrusted.read_stored(path, limit=MAX_POINTER, what=what, files=files), str(path))
    if not isinstance(value, dict) or not _whole(value.get("epoch")):
        got = value.get("epoch") if isinstance(value, dict) else value
        raise untrusted.UntrustedError(f"{path}: 'epoch' must be a whole number >= 0, got {got!r}.")
    if path.name == "progress.json":
        state, snapshots = value.get("state"), value.get("snapshots")
        named = [] if state is None else [f"{untrusted.check_name(state, str(path))}.json"]
        if not isinstance(snapshots, list) or not all(_whole(e) for e in snapshots):
            raise untrusted.UntrustedError(f"{path}: 'snapshots' must be a list of epochs, got {snapshots!r}.")
    else:
        named = [untrusted.check_name(value.get("tensors"), str(path))]
    missing = [n for n in named if n not in files]
    if missing:
        raise untrusted.UntrustedError(f"{path} names {missing}, which its folder's manifest does not list.")
    return value["epoch"]


def _check_pack(src: Path, name: str) -> list[_Packed]:
    """Every stored folder of the pack of ``name`` at ``src``, checked before anything is copied:
    no link anywhere, only the folders ``pack`` writes for ``name``, manifests that list plain file
    names present in their folder with the content they record, and pointers of the right shape.
    Files a manifest does not list are left behind. Deepest folders first, so that the files a
    pointer names are copied before it."""
    what = f"the pack {src}"
    tree = untrusted.walk(src, what)
    for rel in tree.folders:
        why = _unpackable(name, rel)
        if why:
            raise untrusted.UntrustedError(f"{src / rel}: {why}.")
    loose = [rel for rel in tree.files if len(rel.parts) == 1]
    if loose:
        raise untrusted.UntrustedError(f"{src / loose[0]}: a pack holds folders of runs, never loose files.")
    present, out = set(tree.files), []
    for rel in sorted(tree.folders, key=lambda r: (-len(r.parts), r)):
        if rel / MANIFEST not in present:
            continue
        folder = src / rel
        files = untrusted.read_manifest(folder, what)
        verified = {}
        for n, accepted in files.items():
            if rel / n not in present:
                raise untrusted.UntrustedError(f"{folder / MANIFEST} lists {n!r}, which is not a file of the pack.")
            verified[n] = untrusted.file_sha256(folder / n, limit=MAX_PACKED_FILE, what=what)
            if verified[n] not in accepted:
                raise untrusted.UntrustedError(f"{folder / n} is damaged or was edited (SHA-256 mismatch).")
        epochs = {p: _pointer_epoch(folder / p, files, what) for p in _POINTERS if p in files}
        out.append(_Packed(rel, verified, epochs))
    return out


def _epoch(path: Path) -> int:
    return load_json(path)["epoch"] if path.exists() else -1


def unpack(name: str, src: Path | None = None) -> Path:
    """Copy a packed run from ``src`` (``in_progress/<name>``) under the results root, merging
    with what is there: files missing there are copied (snapshots, analyses and records never
    change), and a packed state (``progress.json`` and its state files, a sweep checkpoint)
    replaces the present one only when it is further on. The files a state names are copied
    before the state itself, so an interrupted unpack is completed by running it again.

    A pack comes from elsewhere: the whole of it is checked first (:func:`_check_pack`), and one
    that fails any check is refused before anything is written."""
    src = Path(src) if src is not None else IN_PROGRESS / name
    if not src.is_dir() and not src.is_symlink():
        raise SystemExit(f"nothing packed at {src}; pack a run first (`python -m acebook.paper_runs pack {name}`).")
    fix = f"pack the run again where it was run (`python -m acebook.paper_runs pack {name}`), or delete {src}"
    try:
        plan = _check_pack(src, name)
    except untrusted.UntrustedError as exc:
        raise SystemExit(f"refused the pack {src}, nothing was copied: {exc} To go on, {fix}.") from None
    if not plan:
        raise SystemExit(f"nothing packed at {src} (no folder with a manifest.json); {fix}.")
    root = results_root()
    for packed in plan:
        folder, target = src / packed.rel, root / packed.rel
        pointers = [n for n in _POINTERS if n in packed.files]
        newer = any(packed.epochs[n] > _epoch(target / n) for n in pointers)
        # With a newer state, its files replace the present ones; otherwise only missing files come.
        wanted = [n for n in sorted(packed.files) if n not in pointers and (newer or not (target / n).exists())]
        for n in wanted + (pointers if newer else []):
            data = untrusted.read_bytes(folder / n, limit=MAX_PACKED_FILE, what=f"the pack {src}")
            if hashlib.sha256(data).hexdigest() != packed.files[n]:
                raise SystemExit(f"{folder / n} changed while it was unpacked; run the unpack again once it is still.")
            save_bytes(target / n, data)
    print(f"unpacked {src} into {root}")
    return root


_PRECISION_HELP = (
    "training precision: fp32, bf16 (refused where the hardware would emulate it) or auto (bf16 where "
    "native, else fp32); default: the profile's"
)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m acebook.paper_runs", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ad = sub.add_parser("advance", help="compute the next pieces of a profile run, then stop")
    ad.add_argument("--minutes", type=float, default=60.0, help="start no new piece after this long")
    ad.add_argument(
        "--chunk", type=int, default=None, help=f"epochs per piece at the paper's lr x wd (default {CHUNK})"
    )
    ad.add_argument("--pieces", type=int, default=None, help="stop after this many pieces")
    together = "core_inflation, inflation_clock: the runs as one stack (auto: on a GPU)"
    ad.add_argument("--together", choices=("auto", "yes", "no"), default="auto", help=together)
    pa = sub.add_parser("pack", help="copy what resuming a run needs into in_progress/")
    for p in (ad, pa):
        p.add_argument("name", choices=EXPERIMENTS)
        p.add_argument("--profile", default="paper")
        p.add_argument("--window", action="store_true", help="inflation_clock: the window's arms only")
        p.add_argument("--precision", choices=("fp32", "bf16", "auto"), default=None, help=_PRECISION_HELP)
    un = sub.add_parser("unpack", help="copy a packed run under the results root")
    un.add_argument("name", choices=EXPERIMENTS)
    for p in (ad, pa, un):
        p.add_argument("--dropout", type=float, default=None, help="core_inflation: a variant at this dropout")
        p.add_argument(
            "--moduli",
            type=int,
            nargs="+",
            default=None,
            help="grokking_sweeps: the modulus sweep alone, at these moduli",
        )
        p.add_argument(
            "--p-weight-decay", type=float, default=None, help="grokking_sweeps: the modulus sweep alone, at this decay"
        )
    for p in (ad, pa):
        p.add_argument("--arm", choices=modular_runs.ARMS, default=None, help="core_inflation: this arm only")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:  # the environment, as the options: before any work
        check_environment(device=args.command == "advance")
    except ConfigError as exc:
        raise SystemExit(f"paper_runs {args.command}: {exc}") from None
    if args.command == "advance":
        _check_settings(args)
        _advance_command(args)
    elif args.command == "pack":
        _check_settings(args)
        pack(args.name, args.profile, window_only=args.window, precision=args.precision, **_variant(args))
    else:
        _check_variant(args)
        unpack(args.name, IN_PROGRESS / variant_name(args.name, args.dropout, args.moduli, args.p_weight_decay))
    return 0


def _check_variant(args: argparse.Namespace) -> None:
    """``--dropout`` and ``--arm`` mean something for core_inflation only, ``--window`` for
    inflation_clock only and ``--chunk`` not for the sweeps (a condition is one piece); a dropout
    is a probability. An option given where it means nothing is refused rather than ignored."""
    arm = getattr(args, "arm", None)
    if getattr(args, "window", False) and args.name != "inflation_clock":
        raise SystemExit(f"paper_runs {args.command} {args.name}: --window is for inflation_clock only.")
    if getattr(args, "chunk", None) is not None and args.name == "grokking_sweeps":
        raise SystemExit(
            f"paper_runs {args.command} grokking_sweeps: --chunk means nothing here (each piece is one whole "
            "condition); leave it out, or use --pieces to limit the conditions run."
        )
    if getattr(args, "together", "auto") != "auto" and args.name == "grokking_sweeps":
        raise SystemExit(
            f"paper_runs {args.command} grokking_sweeps: --together means nothing here (a condition's seeds "
            "always train as one stack); leave it out."
        )
    sweep_only = getattr(args, "moduli", None) is not None or getattr(args, "p_weight_decay", None) is not None
    if sweep_only and args.name != "grokking_sweeps":
        raise SystemExit(
            f"paper_runs {args.command} {args.name}: --moduli and --p-weight-decay are for grokking_sweeps only."
        )
    if (args.dropout is not None or arm is not None) and args.name != "core_inflation":
        raise SystemExit(f"paper_runs {args.command} {args.name}: --dropout and --arm are for core_inflation only.")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        raise SystemExit(f"paper_runs {args.command}: --dropout must be in [0, 1); got {args.dropout}.")


def _variant(args: argparse.Namespace) -> dict:
    if args.name == "grokking_sweeps":
        return {"moduli": args.moduli, "p_weight_decay": args.p_weight_decay}
    return {} if args.name != "core_inflation" else {"dropout": args.dropout, "arms": (args.arm,) if args.arm else None}


def _check_settings(args: argparse.Namespace) -> None:
    """Refuse the profile's settings with the options given (e.g. bf16 where it would be emulated)
    before any work, as a message rather than a traceback."""
    _check_variant(args)
    make = {"core_inflation": inflation_params, "inflation_clock": clock_params, "grokking_sweeps": sweeps_params}
    try:
        make[args.name](args.profile, args.precision)
        if args.name == "grokking_sweeps":
            _sweep_plans(
                args.profile, args.precision, getattr(args, "moduli", None), getattr(args, "p_weight_decay", None)
            )
    except ValueError as exc:
        raise SystemExit(f"paper_runs {args.command} {args.name}: {exc}") from None


def _advance_command(args: argparse.Namespace) -> None:
    chunk = CHUNK if args.chunk is None else args.chunk
    together = {"auto": None, "yes": True, "no": False}[args.together]
    if args.name == "core_inflation":
        variant = {**_variant(args), "together": together}
        print(advance_inflation(args.profile, args.minutes, chunk, args.pieces, args.precision, **variant))
    elif args.name == "inflation_clock":
        started = advance_clock(args.profile, args.minutes, chunk, args.pieces, args.window, args.precision, together)
        print(f"{started} pieces run")
    else:
        done, total = advance_sweeps(
            args.profile, args.minutes, args.pieces, args.precision, args.moduli, args.p_weight_decay
        )
        print(f"{done} of {total} conditions complete")


if __name__ == "__main__":
    sys.exit(main())
