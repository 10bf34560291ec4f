"""Grokking-time sweeps: memorisation and generalisation times of many seeds, measured after every step.

A **condition** is a modulus ``p``, a weight decay and a batch size (``None``: full batch). For
each seed, ``t_mem`` and ``t_gen`` are the first optimizer steps after which the accuracy on the
whole training set, and on the whole test set, reaches ``threshold`` (0.99); the grokking delay
is their difference. All seeds of a condition train together on :class:`corelib.engine.Trainer`;
these are its stopping rules, applied after every step: a seed stops ``patience_epochs`` epochs
after it generalised, or at the cap, and leaves the stack without changing the others' updates.

Evaluating after every step stays cheap without approximation: the evaluation set is visited in
a fixed random order in growing chunks, and a seed leaves as soon as its errors exceed what the
threshold allows; decided seeds skip the evaluation; with full batches the next step's forward
pass gives the training accuracy for free. Minibatches follow the reference: a fresh permutation
whenever the next batch would run past the end of the current one (its last ``n mod B`` examples
are skipped); caps and patience count epochs of ``ceil(n / B)`` steps.

Each (condition, seed) gets a JSON record in its condition's run folder as soon as it stops, so an
interrupted sweep resumes with the missing seeds. Conditions of one modulus and batch size train
as one stack in one process (:func:`train_conditions`: each its own weight decay and stopping rules,
each bit for bit as alone on one CPU thread), or as independent :mod:`joblib` jobs
(:func:`run_sweep`); the README shows how to send them to a cluster.

This module runs, keys and stores the conditions, and summarises and fits their records; what a
condition is lives in :mod:`corelib.tasks.sweep_conditions`, the stopping rules in
:mod:`corelib.tasks.stopping_rules`, training the stacked conditions in
:mod:`corelib.tasks.condition_stacks` (their public names are importable from here too).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..masks import MASK_GENERATOR
from ..models import DEVICE_VARIABLE, MODEL_REVISION, default_device
from ..results import load_json, params_key, results_root, run_dir, run_lock, save_json
from ..theory import fit_grok_time, fit_power_law
from .condition_stacks import remove_checkpoint, train_condition, train_conditions
from .stopping_rules import STOPPING_RULE_VERSION, SweepStats, min_correct
from .sweep_conditions import PAPER_SWEEPS, Condition, SweepConfig, batch_plan, check_seeds, condition_data

__all__ = [
    "PAPER_SWEEPS",
    "STOPPING_RULE_VERSION",
    "SweepConfig",
    "Condition",
    "SweepStats",
    "RECORD_FIELDS",
    "condition_data",
    "batch_plan",
    "min_correct",
    "train_condition",
    "train_conditions",
    "condition_key",
    "condition_dir",
    "condition_path",
    "record_problems",
    "load_record",
    "run_condition",
    "run_conditions",
    "run_sweep",
    "summarise",
    "usable_delays",
    "bootstrap_fit",
    "power_law_constants",
    "grok_time_constants",
]

RECORD_FIELDS = {
    "seed": int,
    "condition": str,
    "p": int,
    "weight_decay": float,
    "batch_size": int,
    "steps_per_epoch": int,
    "t_mem": (int, type(None)),
    "t_gen": (int, type(None)),
    "delay": (int, type(None)),
    "stopped_at": int,
    "reason": str,
    "final_train_acc": float,
    "final_test_acc": float,
}
"""Fields of a per-(condition, seed) record and their JSON types."""


# --------------------------------------------------------------------------- records on disk


def _condition_params(cond: Condition, cfg: SweepConfig) -> dict:
    config = asdict(cfg)
    params = {"kind": "grokking_sweep", "condition": asdict(cond), "config": config, "model": MODEL_REVISION}
    if cfg.precision == "fp32":  # as for the engine's options: a setting at its default is left out of the key
        config.pop("precision")
    if not cfg.dropout:
        config.pop("dropout")
    else:
        params["masks"] = MASK_GENERATOR
    if STOPPING_RULE_VERSION != 1:
        params["stopping_rule"] = STOPPING_RULE_VERSION
    return params


def condition_key(cond: Condition, cfg: SweepConfig) -> str:
    """The key of a condition's records (its folder name, and the records' ``condition`` field)."""
    return params_key(_condition_params(cond, cfg))


def condition_dir(cond: Condition, cfg: SweepConfig, root: Path | str | None = None) -> Path:
    """Folder of a condition's records (created with its ``params.json`` if new)."""
    return run_dir("sweeps", _condition_params(cond, cfg), Path(root) if root is not None else None)


def condition_path(cond: Condition, cfg: SweepConfig, root: Path | str | None = None) -> Path:
    """Where :func:`condition_dir` keeps a condition's records, without creating anything."""
    return Path(root if root is not None else results_root()) / "sweeps" / params_key(_condition_params(cond, cfg))


def _record_path(folder: Path, seed: int) -> Path:
    return Path(folder) / f"seed_{seed}.json"


def record_problems(rec, cond: Condition, cfg: SweepConfig, seed: int) -> list[str]:
    """What is wrong with a stored record (empty list: usable)."""
    if not isinstance(rec, dict):
        return [f"not a JSON object but {type(rec).__name__}"]
    problems = _field_problems(rec)
    if problems:
        return problems
    expected = {
        "seed": seed,
        "condition": condition_key(cond, cfg),
        "p": cond.p,
        "weight_decay": cond.weight_decay,
    }
    problems += [f"{k} is {rec[k]!r}, expected {v!r}" for k, v in expected.items() if rec[k] != v]
    return problems + _value_problems(rec)


def _field_problems(rec: dict) -> list[str]:
    """Missing or unexpected fields, and fields of the wrong type."""
    problems = []
    missing, extra = set(RECORD_FIELDS) - set(rec), set(rec) - set(RECORD_FIELDS)
    if missing:
        problems.append(f"missing fields {sorted(missing)}")
    if extra:
        problems.append(f"unexpected fields {sorted(extra)}")
    for name, kind in RECORD_FIELDS.items():
        if name in rec:
            value = rec[name]
            ok = isinstance(value, kind) and not isinstance(value, bool)
            if kind is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                problems.append(f"field {name!r} has type {type(value).__name__}")
    return problems


def _value_problems(rec: dict) -> list[str]:
    """Times, delay, stopping reason and accuracies that contradict each other or their ranges."""
    problems = []
    for name in ("t_mem", "t_gen"):
        if rec[name] is not None and not 1 <= rec[name] <= rec["stopped_at"]:
            problems.append(f"{name} = {rec[name]} outside [1, stopped_at = {rec['stopped_at']}]")
    want_delay = None if rec["t_mem"] is None or rec["t_gen"] is None else rec["t_gen"] - rec["t_mem"]
    if rec["delay"] != want_delay:
        problems.append(f"delay {rec['delay']} != t_gen - t_mem ({want_delay})")
    if rec["reason"] not in ("patience", "max_steps"):
        problems.append(f"unknown reason {rec['reason']!r}")
    if rec["reason"] == "patience" and rec["t_gen"] is None:
        problems.append("stopped for patience without having generalised")
    for name in ("final_train_acc", "final_test_acc"):
        if not 0.0 <= rec[name] <= 1.0:
            problems.append(f"{name} = {rec[name]} outside [0, 1]")
    return problems


def load_record(folder: Path, cond: Condition, cfg: SweepConfig, seed: int) -> dict | None:
    """A seed's stored record, or ``None`` when it is missing or unusable (a warning says why)."""
    path = _record_path(folder, seed)
    if not path.exists():
        return None
    try:
        rec = load_json(path)
    except (ValueError, OSError) as err:
        warnings.warn(f"{path} cannot be read ({err}); seed {seed} of {cond.label()} will be recomputed.", stacklevel=2)
        return None
    problems = record_problems(rec, cond, cfg, seed)
    if problems:
        warnings.warn(
            f"{path} is not a valid record ({'; '.join(problems)}); seed {seed} of {cond.label()} will be recomputed.",
            stacklevel=2,
        )
        return None
    return rec


def run_condition(
    cond: Condition,
    seeds: Sequence[int],
    cfg: SweepConfig,
    *,
    root: Path | str | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> list[dict]:
    """Records of ``seeds`` for one condition: stored ones are reused, the others trained and saved.

    This is the unit of work of :func:`run_sweep` (one joblib job). Seeds without a valid record
    are trained together; each record is saved as soon as its seed stops, so an interruption
    loses only the seeds that were still running.
    """
    seeds = check_seeds(seeds)
    folder = condition_dir(cond, cfg, root)
    key = condition_key(cond, cfg)
    with run_lock(folder, f"sweep condition {cond.label()}"):  # a second process waits and reuses
        found = {s: load_record(folder, cond, cfg, s) for s in seeds}
        missing = [s for s in seeds if found[s] is None]
        if not missing:  # a run killed between its last record and its clean-up leaves this behind
            remove_checkpoint(folder / "checkpoint")
        if missing:

            def save(rec: dict) -> None:
                save_json(_record_path(folder, rec["seed"]), rec)
                found[rec["seed"]] = rec

            train_condition(
                cond,
                missing,
                cfg,
                condition_key=key,
                on_record=save,
                device=device,
                progress=progress,
                checkpoint=folder / "checkpoint",
            )
    return [found[s] for s in seeds]


def run_conditions(
    conditions: Sequence[Condition],
    seeds: Sequence[int],
    cfg: SweepConfig,
    *,
    root: Path | str | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> dict[Condition, list[dict]]:
    """:func:`run_condition` for several conditions, those of one modulus and batch size trained as
    one stack (:func:`train_conditions`): the same records and files, fewer passes.

    Every condition's folder is held while they train (taken in one order in every process, so two
    processes never wait on each other); a condition alone goes through :func:`run_condition`.
    """
    seeds = check_seeds(seeds)
    conditions = list(dict.fromkeys(conditions))
    if len(conditions) == 1:
        return {conditions[0]: run_condition(conditions[0], seeds, cfg, root=root, device=device, progress=progress)}
    folders = {c: condition_dir(c, cfg, root) for c in conditions}
    with ExitStack() as held:
        for c in sorted(conditions, key=lambda c: str(folders[c])):
            held.enter_context(run_lock(folders[c], f"sweep condition {c.label()}"))
        found = {c: {s: load_record(folders[c], c, cfg, s) for s in seeds} for c in conditions}
        missing = {c: [s for s in seeds if found[c][s] is None] for c in conditions}
        for c in conditions:
            if not missing[c]:  # a run killed between its last record and its clean-up leaves this behind
                remove_checkpoint(folders[c] / "checkpoint")

        def save(rec: dict) -> None:
            c = by_key[rec["condition"]]
            save_json(_record_path(folders[c], rec["seed"]), rec)
            found[c][rec["seed"]] = rec

        keys = {c: condition_key(c, cfg) for c in conditions}
        by_key = {k: c for c, k in keys.items()}
        for shape in dict.fromkeys((c.p, c.batch_size) for c in conditions if missing[c]):
            group = [c for c in conditions if missing[c] and (c.p, c.batch_size) == shape]
            train_conditions(
                {c: missing[c] for c in group},
                cfg,
                condition_keys=keys,
                on_record=save,
                device=device,
                progress=progress,
                checkpoints={c: folders[c] / "checkpoint" for c in group},
            )
    return {c: [found[c][s] for s in seeds] for c in conditions}


def worker_device() -> torch.device:
    """The device of a sweep job: on a Dask worker of a machine with several GPUs, one GPU per
    worker (worker ``k`` of a ``LocalCluster`` on ``cuda:k mod n``; other names hashed), so the
    workers share the GPUs (a hashed name may share a GPU with another: start as many workers as
    GPUs, named 0, 1, ...); with ``ACE_DEVICE`` set, or elsewhere, :func:`corelib.devices.default_device`."""
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n > 1 and not os.environ.get(DEVICE_VARIABLE):
        try:
            from distributed import get_worker

            name = get_worker().name
        except (ImportError, ValueError):  # not on a Dask worker
            name = None
        if name is not None:
            index = name if isinstance(name, int) else int(hashlib.sha256(str(name).encode()).hexdigest(), 16)
            return torch.device(f"cuda:{index % n}")
    return default_device()


def _run_on_worker(conds: list[Condition], seeds, cfg: SweepConfig, root: Path, progress: bool) -> list[list[dict]]:
    found = run_conditions(conds, seeds, cfg, root=root, device=worker_device(), progress=progress)
    return [found[c] for c in conds]


@contextmanager
def _dask_backend(cluster):
    """joblib's dask backend on ``cluster`` (a scheduler address, or a Client or cluster object)."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(
            "cluster= needs Dask's distributed scheduler: pip install 'corelib[cluster]' (dask[distributed])."
        ) from exc
    if isinstance(cluster, str):
        address = cluster.removeprefix("dask://")
        address = address if "://" in address else f"tcp://{address}"
        client, own = Client(address), True
    elif isinstance(cluster, Client):
        client, own = cluster, False
    else:  # a LocalCluster, SLURMCluster, ... object
        client, own = Client(cluster), True
    try:
        with joblib.parallel_config(backend="dask", client=client, wait_for_workers_timeout=60):
            yield client
    finally:
        if own:
            client.close()


def _stacks_of(conditions: list[Condition]) -> list[list[Condition]]:
    """The conditions grouped by modulus and batch size (what one stack can train), in order."""
    shapes = dict.fromkeys((c.p, c.batch_size) for c in conditions)
    return [[c for c in conditions if (c.p, c.batch_size) == shape] for shape in shapes]


def run_sweep(
    conditions: Sequence[Condition],
    seeds: Sequence[int],
    cfg: SweepConfig,
    *,
    n_jobs: int | None = None,
    cluster=None,
    root: Path | str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run every condition (one joblib job each) and return one row per (condition, seed).

    ``n_jobs=None`` follows joblib's configuration (1 process unless a ``joblib.parallel_config``
    says otherwise). ``cluster`` sends the jobs to Dask instead: a scheduler address
    (``"tcp://host:8786"`` or ``"dask://host:8786"``), a ``distributed.Client``, or a cluster
    object (``LocalCluster``, a dask-jobqueue ``SLURMCluster``, ...); workers need the project
    installed and must see ``root`` (a shared file system), and on machines with several GPUs
    each worker trains on its own (:func:`worker_device`). Conditions whose records are all
    stored are not dispatched at all.
    """
    conditions = list(conditions)
    if not conditions:
        raise ValueError("no conditions given; pass e.g. [Condition(p=53, weight_decay=1.0)].")
    if len(set(conditions)) != len(conditions):
        raise ValueError("conditions must be distinct; a repeated condition would be trained twice.")
    seeds = check_seeds(seeds)
    root = Path(root) if root is not None else results_root()  # resolved here, so workers agree
    done: dict[Condition, list[dict]] = {}
    for cond in conditions:
        folder = condition_dir(cond, cfg, root)
        recs = [load_record(folder, cond, cfg, s) for s in seeds]
        if all(r is not None for r in recs):
            done[cond] = recs
    todo = [c for c in conditions if c not in done]
    inner = progress and joblib.effective_n_jobs(n_jobs) == 1
    bar = tqdm(total=len(conditions), initial=len(done), desc="conditions", disable=not progress)
    if todo:
        inner = inner and cluster is None
        # In one process, the conditions of one modulus and batch size train as one stack; jobs in
        # parallel (processes, a cluster) keep one condition each.
        in_process = cluster is None and joblib.effective_n_jobs(n_jobs) == 1
        units = _stacks_of(todo) if in_process else [[c] for c in todo]
        with _dask_backend(cluster) if cluster is not None else nullcontext():
            jobs = (joblib.delayed(_run_on_worker)(u, seeds, cfg, root, inner) for u in units)
            parallel = joblib.Parallel(n_jobs=-1 if cluster is not None else n_jobs, return_as="generator")
            for unit, found in zip(units, parallel(jobs)):
                for cond, recs in zip(unit, found):
                    folder = condition_dir(cond, cfg, root)
                    for rec in recs:  # a remote worker may not share our file system
                        if load_record(folder, cond, cfg, rec["seed"]) is None:
                            save_json(_record_path(folder, rec["seed"]), rec)
                    done[cond] = recs
                    bar.update(1)
    bar.close()
    return pd.DataFrame([rec for c in conditions for rec in done[c]], columns=list(RECORD_FIELDS))


# --------------------------------------------------------------------------- summaries and fits


def usable_delays(table: pd.DataFrame) -> pd.Series:
    """Which rows have a delay the fits may use: both times measured and ``t_gen > t_mem``.

    As in the reference, a seed that never memorised or never generalised before the cap has no
    delay, and one that generalised no later than it memorised (``t_gen <= t_mem``) has none
    either; such seeds are counted (:func:`summarise`) but never averaged.
    """
    delay = pd.to_numeric(table["delay"], errors="coerce")
    return delay.notna() & (delay > 0)


def summarise(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per value of ``by`` (``"weight_decay"`` or ``"p"``): seed counts, and mean and sd of the times.

    ``n_grokked`` seeds have a usable delay (:func:`usable_delays`); ``n_missing`` did not both
    memorise and generalise before the cap; ``n_nonpositive`` generalised no later than they
    memorised. The means and the sd are over the ``n_grokked`` seeds only.
    """
    if by not in table.columns:
        raise ValueError(f"cannot group by {by!r}; the table has columns {list(table.columns)}.")
    rows = []
    for value, g in table.groupby(by, sort=True):
        ok = g[usable_delays(g)]
        missing = int(g["delay"].isna().sum())
        rows.append(
            {
                by: value,
                "n_seeds": len(g),
                "n_grokked": len(ok),
                "n_missing": missing,
                "n_nonpositive": len(g) - len(ok) - missing,
                "t_mem_mean": ok["t_mem"].mean(),
                "t_gen_mean": ok["t_gen"].mean(),
                "delay_mean": ok["delay"].mean(),
                "delay_sd": ok["delay"].std(ddof=1) if len(ok) > 1 else float("nan"),
            }
        )
    return pd.DataFrame(rows).set_index(by)


def power_law_constants(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """``exponent``, ``prefactor`` and ``r2`` of :func:`corelib.theory.fit_power_law`."""
    fit = fit_power_law(x, y)
    return {"exponent": fit.exponent, "prefactor": fit.prefactor, "r2": fit.r2}


def grok_time_constants(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """``Omega``, ``p_crit``, their product (what data far from ``p_crit`` constrain) and ``r2``
    of :func:`corelib.theory.fit_grok_time`."""
    fit = fit_grok_time(x, y)
    return {"Omega": fit.Omega, "p_crit": fit.p_crit, "Omega_p_crit": fit.Omega * fit.p_crit, "r2": fit.r2}


def bootstrap_fit(
    table: pd.DataFrame,
    by: str,
    fit: Callable[[np.ndarray, np.ndarray], dict[str, float]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Fit ``fit(x, mean delay)`` to the condition means, with bootstrap uncertainties over seeds.

    As the paper and its reference code do, the fit sees one point per condition: ``x`` = the
    value of ``by``, ``y`` = the mean delay of its seeds with a usable delay
    (:func:`usable_delays`; conditions without one are left out). Seeds enter only through the
    uncertainty: each bootstrap replicate resamples, independently for every condition, its
    seeds with replacement, recomputes the means and refits. Returns one row per constant with
    the estimate, the bootstrap standard deviation, a 95 % percentile interval and the number of
    replicates in which the fit failed (those are left out).
    """
    if n_boot < 2:
        raise ValueError(f"n_boot must be >= 2 to estimate a spread, got {n_boot}.")
    if by not in table.columns or "delay" not in table.columns:
        raise ValueError(f"the table needs columns {by!r} and 'delay', got {list(table.columns)}.")
    ok = table[usable_delays(table)]
    groups = {v: g["delay"].to_numpy(dtype=float) for v, g in ok.groupby(by, sort=True)}
    if len(groups) < 2:
        raise ValueError(
            f"need grokked seeds at >= 2 values of {by!r} to fit, got {len(groups)}; "
            "run more conditions or raise max_epochs."
        )
    x = np.array(list(groups), dtype=float)
    estimate = fit(x, np.array([d.mean() for d in groups.values()]))
    rng = np.random.default_rng(seed)
    samples, failed = [], 0
    for _ in range(n_boot):
        y = np.array([rng.choice(d, size=d.size, replace=True).mean() for d in groups.values()])
        try:
            samples.append(fit(x, y))
        except (ValueError, RuntimeError):
            failed += 1
    rows = []
    for name, value in estimate.items():
        s = np.array([b[name] for b in samples], dtype=float)
        lo, hi = np.percentile(s, [2.5, 97.5]) if s.size else (np.nan, np.nan)
        rows.append(
            {
                "constant": name,
                "estimate": value,
                "sd": float(s.std(ddof=1)) if s.size > 1 else np.nan,
                "ci_low": float(lo),
                "ci_high": float(hi),
                "n_failed": failed,
            }
        )
    return pd.DataFrame(rows).set_index("constant")
