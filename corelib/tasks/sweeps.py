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
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .._checks import check_settings, check_split
from ..engine import DropoutStreams, PrefixData, SeedStack, Trainer, resolve_precision, stacked_last_logits
from ..masks import MASK_GENERATOR
from ..models import DEVICE_VARIABLE, MODEL_REVISION, TransformerConfig, default_device
from ..results import (
    load_json,
    load_tensors,
    params_key,
    remove,
    results_root,
    run_dir,
    run_lock,
    save_json,
    save_tensors,
)
from ..theory import fit_grok_time, fit_power_law
from . import modular
from .modular import modular_addition_split

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


# --------------------------------------------------------------------------- settings

PAPER_SWEEPS = {
    "n_seeds": 12,
    "omega_p": 53,
    "omegas": [0.3, 0.5, 1.0, 1.5, 2.0, 3.0],
    "omega_batch_size": 512,
    "omega_max_epochs": 30000,
    "moduli": [31, 43, 53, 61, 79, 89, 101],
    "p_weight_decay": 1.0,
    "p_batch_size": None,
    "p_max_epochs": 30000,
}
"""The paper's two sweeps (its appendix; the caps from the reference code); with
:class:`SweepConfig`'s defaults, the settings at which the sweep claims can be reproduced."""


@dataclass(frozen=True)
class SweepConfig:
    """What is shared by every condition of a sweep: architecture, optimiser, data and stopping rule.

    Defaults are the paper's: one post-norm block, width 128, 4 heads, MLP 512, AdamW lr 1e-3,
    half of the ``p^2`` pairs for training (split seed 42), threshold 0.99, stop 100 epochs after
    generalisation, at most 30 000 epochs; dropout 0.1 during training, the default of the
    PyTorch encoder layer of the paper's reference code (accuracies are measured without it).
    """

    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    n_layers: int = 1
    norm: str = "post"
    lr: float = 1e-3
    train_fraction: float = 0.5
    split_seed: int = 42
    threshold: float = 0.99
    patience_epochs: int = 100
    max_epochs: int = 30000
    dropout: float = 0.1  # the reference's encoder layer (PyTorch's default); the paper is silent
    split_permutation: str = "torch"  # the reference sweep's torch.randperm (its modular experiment: "numpy")
    # The reference draws a fresh permutation whenever the next minibatch would run past its end,
    # so the last n mod B examples of each permutation are skipped (2 steps per permutation at
    # p = 53, B = 512). True keeps that partial batch instead (3 steps).
    keep_partial_batch: bool = False
    # "bf16": training passes in bf16 (corelib.engine.StackOptimizer), accuracies in fp32; "auto": bf16 where native
    precision: str = "fp32"

    def __post_init__(self):
        object.__setattr__(self, "precision", resolve_precision(self.precision, default_device()))
        check_settings(
            "SweepConfig",
            rates={"lr": self.lr},
            fractions={"threshold": self.threshold},
            non_negative={"patience_epochs": self.patience_epochs, "dropout": self.dropout},
            epochs={"max_epochs": self.max_epochs},
        )
        check_split("SweepConfig", self.train_fraction)
        if self.split_permutation not in ("numpy", "torch"):
            raise ValueError(f"split_permutation must be 'numpy' or 'torch', got {self.split_permutation!r}.")
        self.model_config(3)  # validates the architecture (d_model divisible by n_heads, norm)

    def model_config(self, p: int) -> TransformerConfig:
        """The transformer for modulus ``p`` (vocabulary ``p``, two-token context)."""
        return modular.model_config(self, p)


@dataclass(frozen=True)
class Condition:
    """One point of a sweep: modulus ``p``, weight decay and batch size (``None`` = full batch)."""

    p: int
    weight_decay: float
    batch_size: int | None = None

    def __post_init__(self):
        if isinstance(self.p, bool) or int(self.p) != self.p or self.p < 2:
            raise ValueError(f"p must be an integer modulus >= 2, got {self.p!r}.")
        object.__setattr__(self, "p", int(self.p))
        wd = float(self.weight_decay)
        if not (math.isfinite(wd) and wd >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}.")
        object.__setattr__(self, "weight_decay", wd)
        if self.batch_size is not None:
            if int(self.batch_size) != self.batch_size or self.batch_size < 1:
                raise ValueError(
                    f"batch_size must be a positive integer or None (full batch), got {self.batch_size!r}."
                )
            object.__setattr__(self, "batch_size", int(self.batch_size))

    def label(self) -> str:
        """Short human-readable name, e.g. ``p=53 wd=1 B=512``."""
        return f"p={self.p} wd={self.weight_decay:g} B={self.batch_size or 'full'}"


def _check_seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("no seeds given; pass e.g. seeds=[42, 43].")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}; each seed is one model.")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be >= 0 (they seed torch generators), got {list(seeds)}.")
    return seeds


def condition_data(cond: Condition, cfg: SweepConfig) -> tuple[PrefixData, PrefixData]:
    """Training and test sets of a condition (the fixed split of all ``p^2`` pairs)."""
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed, cfg.split_permutation)
    return PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)


def batch_plan(n: int, batch_size: int | None, keep_partial_batch: bool = False) -> dict[str, int]:
    """How ``n`` training examples are cut into minibatches of ``batch_size`` (None: full batch).

    ``batch``: the batch size used (at most n); ``steps_per_permutation``: steps drawn from one
    permutation (``n // batch``, or ``ceil(n / batch)`` when the partial batch is kept);
    ``skipped``: examples of a permutation never used (``n mod batch``, or 0);
    ``steps_per_epoch``: ``ceil(n / batch)``, the unit of the caps and the patience.
    """
    if n < 1 or (batch_size is not None and batch_size < 1):
        raise ValueError(f"need n >= 1 and a positive batch size (or None), got n={n}, batch_size={batch_size}.")
    batch = min(batch_size or n, n)
    per_epoch = -(-n // batch)
    skipped = 0 if keep_partial_batch else n % batch
    return {
        "batch": batch,
        "steps_per_permutation": per_epoch if keep_partial_batch else n // batch,
        "skipped": skipped,
        "steps_per_epoch": per_epoch,
    }


STOPPING_RULE_VERSION = 1
"""The version of the stopping rules (:func:`min_correct`, the chunked threshold test and the seed
monitor's patience and cap): raise it with any change to what they decide. A sweep record's key
includes it, so records of another rule are not reused; version 1, the first, is left out of the
key, so that records stored before it existed (and ``recorded/``) keep their keys."""


def min_correct(n: int, threshold: float) -> int:
    """Smallest number of correct answers ``c`` out of ``n`` with ``c / n >= threshold``.

    Computed so that it agrees with the floating-point comparison ``c / n >= threshold``
    (what a naive evaluation does), also when ``threshold * n`` is not exactly representable.
    """
    if n < 1:
        raise ValueError(f"cannot measure accuracy on an empty set (n = {n}).")
    c = min(n, max(0, math.ceil(threshold * n)))
    while c > 0 and (c - 1) / n >= threshold:
        c -= 1
    while c <= n and c / n < threshold:
        c += 1
    return c


# --------------------------------------------------------------------------- exact early-exit evaluation


class _ThresholdTest:
    """Decides ``accuracy >= threshold`` on a dataset for several seeds, stopping early when possible.

    The rows are visited in a fixed random order (errors are then spread evenly, so a bad model
    is caught in the first chunk), in chunks that double in size. A seed leaves the evaluation as
    soon as its errors exceed ``budget = n - min_correct(n, threshold)``; a seed that stays to the
    end has at most ``budget`` errors. Both answers are exact.
    """

    def __init__(self, data: PrefixData, threshold: float, logits_fn: Callable, first_chunk: int | None = None):
        n = len(data)
        self.n, self.need = n, min_correct(n, threshold)
        self.budget = n - self.need
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(0)).to(data.last.device)
        self.last, self.index, self.targets = data.last[perm], data.index[perm], data.targets[perm]
        self.prefixes, self.fn = data.prefixes, logits_fn
        size = first_chunk or max(32, 4 * (self.budget + 1))
        self.bounds, start = [], 0
        while start < n:
            self.bounds.append((start, min(n, start + size)))
            start, size = start + size, 2 * size
        self.rows_evaluated = 0  # rows x seeds, for throughput accounting

    def first_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The last tokens and prefix indices of the first chunk's rows."""
        a, b = self.bounds[0]
        return self.last[a:b], self.index[a:b]

    @torch.no_grad()
    def passes(
        self, params: dict[str, torch.Tensor], which: torch.Tensor, first_logits: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Boolean (len(which),): does seed ``which[j]`` of the stacked ``params`` reach the threshold?

        ``first_logits``: the first chunk's logits of these seeds, where the caller computed them.
        """
        k = len(which)
        errors = torch.zeros(k, dtype=torch.long, device=which.device)
        alive = torch.arange(k, device=which.device)  # positions in `which` still undecided
        sub = _seeds_of(params, which)
        for i, (a, b) in enumerate(self.bounds):
            if i == 0 and first_logits is not None:
                logits = first_logits
            else:
                logits = self.fn(sub, self.last[a:b], self.index[a:b], self.prefixes)
            self.rows_evaluated += (b - a) * len(alive)
            errors[alive] += (logits.argmax(-1) != self.targets[a:b]).sum(dim=1)
            keep = errors[alive] <= self.budget
            if not bool(keep.all()):
                alive = alive[keep]
                if len(alive) == 0:
                    break
                sub = {n: v[keep] for n, v in sub.items()}
        return errors <= self.budget


def _seeds_of(params: dict[str, torch.Tensor], which: torch.Tensor) -> dict[str, torch.Tensor]:
    """The stacked weights of the seeds at positions ``which`` (the stack itself when that is all of them)."""
    k = len(which)
    if k == next(iter(params.values())).shape[0] and bool((which == torch.arange(k, device=which.device)).all()):
        return params
    return {n: v[which] for n, v in params.items()}


@torch.no_grad()
def _first_chunks_together(
    tests: Sequence[_ThresholdTest], params: dict[str, torch.Tensor], which: torch.Tensor
) -> list[torch.Tensor]:
    """The first chunk's logits of each of ``tests`` (on the same prefixes), from one forward pass.

    A row's logits do not depend on the rows beside it, so each test gets what its own first
    pass would compute; one pass instead of several saves a forward pass's fixed cost per step.
    """
    rows = [t.first_rows() for t in tests]
    logits = tests[0].fn(
        _seeds_of(params, which), torch.cat([r[0] for r in rows]), torch.cat([r[1] for r in rows]), tests[0].prefixes
    )
    return list(logits.split([len(r[0]) for r in rows], dim=1))


@torch.no_grad()
def _accuracy(
    params: dict[str, torch.Tensor], which: torch.Tensor, data: PrefixData, fn: Callable, chunk: int = 4096
) -> list[float]:
    """Full accuracy of the selected seeds on ``data`` (used once per seed, when it stops)."""
    sub = {n: v[which] for n, v in params.items()}
    correct = torch.zeros(len(which), dtype=torch.long, device=which.device)
    for a in range(0, len(data), chunk):
        b = min(len(data), a + chunk)
        logits = fn(sub, data.last[a:b], data.index[a:b], data.prefixes)
        correct += (logits.argmax(-1) == data.targets[a:b]).sum(dim=1)
    return (correct.cpu().double() / len(data)).tolist()  # float64 off the device: MPS has none


def _mark_first_pass(
    times: dict[int, int | None],
    check: _ThresholdTest,
    params: dict[str, torch.Tensor],
    seeds: Sequence[int],
    step: int,
    positions: Sequence[int] | None = None,
    first_logits: torch.Tensor | None = None,
) -> None:
    """Set ``times[seed] = step`` for every seed without a time yet that passes ``check`` now.

    ``positions``: only the seeds at these positions of the stack (default: all of them).
    ``first_logits``: the first chunk's logits of the pending seeds, where already computed.
    """
    pending = _pending(times, seeds, positions)
    if pending:
        device = next(iter(params.values())).device
        which = torch.tensor(pending, device=device)
        for j, good in zip(pending, check.passes(params, which, first_logits).tolist()):
            if good:
                times[seeds[j]] = step


def _pending(times: dict[int, int | None], seeds: Sequence[int], positions: Sequence[int] | None = None) -> list[int]:
    """Positions (among ``positions``, default all) of the seeds without a time yet."""
    candidates = range(len(seeds)) if positions is None else positions
    return [j for j in candidates if times[seeds[j]] is None]


# --------------------------------------------------------------------------- training one condition


@dataclass
class SweepStats:
    """Work done by :func:`train_condition` (rows x seeds), for throughput measurements."""

    steps: int = 0
    seed_steps: int = 0
    train_rows: int = 0
    eval_rows: int = 0
    extra: dict = field(default_factory=dict)


def train_condition(
    cond: Condition,
    seeds: Sequence[int],
    cfg: SweepConfig,
    *,
    condition_key: str = "",
    on_record: Callable[[dict], None] | None = None,
    max_steps: int | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    stats: SweepStats | None = None,
    data: tuple[PrefixData, PrefixData] | None = None,
    checkpoint: Path | None = None,
    checkpoint_every: int = 500,
) -> list[dict]:
    """Train ``seeds`` of one condition together and measure their times; returns one record per seed.

    Records are returned in the order of ``seeds``; ``on_record`` is called with each record as
    soon as its seed stops (used to save it). ``max_steps`` overrides the cap
    ``cfg.max_epochs * steps_per_epoch`` (benchmarks). ``data`` replaces the condition's
    ``(train, test)`` sets (tests, other tasks with tokens in ``range(p)``). With ``checkpoint``
    (a path without suffix), the running seeds' state is saved there every ``checkpoint_every``
    epochs, and a later call with the same seeds resumes from it to the records an uninterrupted
    run gives; nothing else is read from or written to disk.
    """
    seeds = _check_seeds(seeds)
    device = torch.device(device) if device is not None else default_device()
    train, test = (d.to(device) for d in (data if data is not None else condition_data(cond, cfg)))
    steps = _StepPlan.of(len(train), cond, cfg, max_steps)
    stats = stats if stats is not None else SweepStats()
    saved = _load_checkpoint(checkpoint, seeds, device)
    trainer = _condition_trainer(cond, cfg, seeds, train, steps.batch, saved, device)
    monitor = _SeedMonitor(cond, cfg, steps, (train, test), trainer.stack.seeds, stats, condition_key, on_record)
    if saved:
        monitor.restore(saved["meta"])
    with monitor.progress_bar(trainer, len(seeds), progress):
        epoch = saved["meta"]["epoch"] if saved else 0
        while trainer.epoch(epoch, monitor.after_step) is not None:
            epoch += 1
            if checkpoint is not None and epoch % checkpoint_every == 0:
                _save_checkpoint(checkpoint, trainer, epoch, seeds, monitor.t_mem, monitor.t_gen, monitor.records)
        if checkpoint is not None:  # done: the records replace it
            remove_checkpoint(checkpoint)
    stats.eval_rows += monitor.rows_evaluated()
    return [monitor.records[s] for s in seeds]


def train_conditions(
    seeds: dict[Condition, Sequence[int]],
    cfg: SweepConfig,
    *,
    condition_keys: dict[Condition, str] | None = None,
    on_record: Callable[[dict], None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    stats: SweepStats | None = None,
    checkpoints: dict[Condition, Path] | None = None,
    checkpoint_every: int = 500,
    data: tuple[PrefixData, PrefixData] | None = None,
) -> dict[Condition, list[dict]]:
    """:func:`train_condition` for several conditions of one modulus and batch size, as one stack.

    ``seeds`` maps each condition to its seeds. Every condition is a group of the trainer with its
    own weight decay and AdamW (:meth:`corelib.engine.Trainer.join`) and its own stopping rules; its
    seeds leave the stack as they stop. Each condition gets the records, and its ``checkpoints[cond]``
    the files, that :func:`train_condition` gives it alone (bit for bit where the matrix library
    computes each model alike in stacks of any size: on one CPU thread). Conditions whose
    checkpoints stand at different epochs are trained in stacks of those at the same epoch.
    ``data`` replaces the conditions' ``(train, test)`` sets, as in :func:`train_condition`.
    """
    conds = list(seeds)
    keys = condition_keys or {}
    if len({(c.p, c.batch_size) for c in conds}) > 1:
        raise ValueError(
            f"conditions of one stack share the modulus and batch size; got {[c.label() for c in conds]}: "
            "train each (p, batch size) with a call of its own."
        )
    seeds = {c: _check_seeds(seeds[c]) for c in conds}
    device = torch.device(device) if device is not None else default_device()
    stats = stats if stats is not None else SweepStats()
    saved = {c: _load_checkpoint((checkpoints or {}).get(c), seeds[c], device) for c in conds}
    out = {}
    for epoch in sorted({s["meta"]["epoch"] if s else 0 for s in saved.values()}):
        group = [c for c in conds if (saved[c]["meta"]["epoch"] if saved[c] else 0) == epoch]
        sets = data if data is not None else condition_data(group[0], cfg)
        run = _ConditionStack(group, seeds, cfg, sets, saved, device, stats, keys, on_record)
        out.update(run.fit(epoch, progress, checkpoints, checkpoint_every))
    return {c: out[c] for c in conds}


class _ConditionStack:
    """Conditions of one modulus and batch size at one epoch, as groups of one trainer, each with its monitor."""

    def __init__(self, conds, seeds, cfg, data, saved, device, stats, keys, on_record) -> None:
        self.conds, self.seeds = conds, seeds
        train, test = (d.to(device) for d in data)
        self.steps = _StepPlan.of(len(train), conds[0], cfg, None)
        trainer, self.monitors = None, {}
        for c in conds:
            trainer = _condition_trainer(c, cfg, seeds[c], train, self.steps.batch, saved[c], device, join=trainer)
            running = trainer.stack.part(trainer.opt.spans[c]).seeds
            monitor = _SeedMonitor(c, cfg, self.steps, (train, test), running, stats, keys.get(c, ""), on_record)
            if saved[c]:
                monitor.restore(saved[c]["meta"])
                trainer.step_count = saved[c]["meta"]["step"]
            self.monitors[c] = monitor
        self.trainer, self.stats = trainer, stats

    def after_step(self, trainer: Trainer, step: int, idx: torch.Tensor, logits: torch.Tensor) -> bool:
        """Each condition measures its own seeds; those that stop leave; True when none is left."""
        done = []
        for c, span in trainer.opt.spans.items():
            part = slice(span.start, span.stop)
            stopped = self.monitors[c].measure(trainer.stack.part(span), step, idx[part], logits[part])
            done += list(span) if stopped is None else [span.start + j for j in stopped]
        if len(done) == len(trainer.stack):
            return True
        if done:
            trainer.drop(done)
        for c, span in trainer.opt.spans.items():
            self.monitors[c]._show(len(span), step)
        return False

    def fit(self, epoch: int, progress: bool, checkpoints, checkpoint_every: int) -> dict[Condition, list[dict]]:
        trainer, paths = self.trainer, checkpoints or {}
        n = sum(len(self.seeds[c]) for c in self.conds)
        with self.monitors[self.conds[0]].progress_bar(trainer, n, progress):
            while trainer.epoch(epoch, self.after_step) is not None:
                epoch += 1
                for c in trainer.opt.spans if epoch % checkpoint_every == 0 else ():
                    if c in paths:
                        m = self.monitors[c]
                        _save_checkpoint(paths[c], trainer, epoch, self.seeds[c], m.t_mem, m.t_gen, m.records, c)
            for c in self.conds:
                if c in paths:  # done: the records replace it
                    remove_checkpoint(paths[c])
        self.stats.eval_rows += sum(m.rows_evaluated() for m in self.monitors.values())
        return {c: [self.monitors[c].records[s] for s in self.seeds[c]] for c in self.conds}


@dataclass(frozen=True)
class _StepPlan:
    """A condition's steps: minibatch size, steps per epoch (the unit of caps and patience), cap, patience."""

    batch: int
    per_epoch: int
    cap: int
    patience: int
    full_batch: bool

    @classmethod
    def of(cls, n: int, cond: Condition, cfg: SweepConfig, max_steps: int | None) -> _StepPlan:
        plan = batch_plan(n, cond.batch_size, cfg.keep_partial_batch)
        batch, per_epoch = plan["batch"], plan["steps_per_epoch"]
        cap = cfg.max_epochs * per_epoch if max_steps is None else int(max_steps)
        if cap < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}.")
        return cls(batch, per_epoch, cap, cfg.patience_epochs * per_epoch, batch == n)


def _condition_trainer(
    cond: Condition,
    cfg: SweepConfig,
    seeds: tuple[int, ...],
    train: PrefixData,
    batch: int,
    saved: dict | None,
    device: torch.device,
    join: Trainer | None = None,
) -> Trainer:
    """A trainer of the condition's seed stack: fresh, or in the state a checkpoint saved; with
    ``join``, that trainer with the condition's seeds joined as a group named by the condition."""
    model_cfg = cfg.model_config(cond.p)
    running = tuple(saved["running"]) if saved else seeds
    streams = DropoutStreams(model_cfg.dropout, running) if model_cfg.dropout else None
    stack = (
        SeedStack.initialise(model_cfg, seeds, device) if not saved else SeedStack(model_cfg, running, saved["params"])
    )
    if join is not None:
        if saved and streams is not None:
            streams.load_state(saved["dropout"])
        optimizer = (saved["optimizer"], saved["meta"]["optimizer"]) if saved else None
        decay = [cond.weight_decay] * len(running)
        join.join(stack, lr=cfg.lr, weight_decay=decay, streams=streams, optimizer=optimizer, name=cond)
        return join
    trainer = Trainer(
        stack,
        train,
        lr=cfg.lr,
        weight_decay=[cond.weight_decay] * len(running),
        batch_size=batch,
        keep_partial_batch=cfg.keep_partial_batch,
        streams=streams,
        precision=cfg.precision,
        name=cond,
    )
    if saved:
        trainer.opt.load_tensors(saved["optimizer"], saved["meta"]["optimizer"])
        if streams is not None:
            streams.load_state(saved["dropout"])
        trainer.step_count = saved["meta"]["step"]
    return trainer


class _SeedMonitor:
    """Watches a condition's seeds after every step: first memorisation and generalisation steps,
    and each seed's record once it has generalised for ``patience`` steps (or the cap is reached).

    ``after_step`` is the trainer's per-step callback; ``t_mem``, ``t_gen`` (seed → step or None)
    and ``records`` (seed → record) are what a checkpoint saves.
    """

    def __init__(
        self,
        cond: Condition,
        cfg: SweepConfig,
        steps: _StepPlan,
        data: tuple[PrefixData, PrefixData],
        running: Sequence[int],
        stats: SweepStats,
        condition_key: str,
        on_record: Callable[[dict], None] | None,
    ):
        self.cond, self.steps, (self.train, self.test) = cond, steps, data
        self.stats, self.condition_key, self.on_record = stats, condition_key, on_record
        # A full batch's training forward gives the training accuracy of the weights before the
        # step for free, but only without dropout: with it, that forward is a noisy model's.
        self.free_train_acc = steps.full_batch and not cfg.model_config(cond.p).dropout and cfg.precision == "fp32"
        self.fn = stacked_last_logits(cfg.model_config(cond.p), shared_rows=True)
        self.train_test = _ThresholdTest(self.train, cfg.threshold, self.fn)
        self.test_test = _ThresholdTest(self.test, cfg.threshold, self.fn)
        self.shared_prefixes = torch.equal(self.train.prefixes, self.test.prefixes)
        self.t_mem: dict[int, int | None] = dict.fromkeys(running)
        self.t_gen: dict[int, int | None] = dict.fromkeys(running)
        self.records: dict[int, dict] = {}
        self.bar: tqdm | None = None

    def restore(self, meta: dict) -> None:
        """Take up the times and records a checkpoint saved."""
        for times, name in ((self.t_mem, "t_mem"), (self.t_gen, "t_gen")):
            times.update({int(s): v for s, v in meta[name].items()})
        self.records.update({int(s): r for s, r in meta["records"].items()})

    @contextmanager
    def progress_bar(self, trainer: Trainer, n_seeds: int, show: bool) -> Iterator[None]:
        """Show the condition's steps while training inside the ``with`` block."""
        self.bar = tqdm(
            total=self.steps.cap,
            desc=f"{self.cond.label()}, {n_seeds} seeds",
            disable=not show,
            leave=False,
            mininterval=1.0,
            initial=trainer.step_count,
        )
        yield
        self.bar.update(trainer.step_count - self.bar.n)
        self.bar.close()

    def rows_evaluated(self) -> int:
        """Rows x seeds the threshold tests evaluated (throughput accounting)."""
        return self.train_test.rows_evaluated + self.test_test.rows_evaluated

    def after_step(self, trainer: Trainer, step: int, idx: torch.Tensor, logits: torch.Tensor) -> bool:
        """Measure the times of the weights after ``step``, stop seeds; True ends the condition."""
        done = self.measure(trainer.stack, step, idx, logits)
        if done is None:
            return True
        if done:
            trainer.drop(done)
        self._show(len(trainer.stack), step)
        return False

    def measure(self, stack: SeedStack, step: int, idx: torch.Tensor, logits: torch.Tensor) -> list[int] | None:
        """Measure the condition's seeds ``stack`` (its rows ``idx`` and training ``logits`` of
        ``step``), record those that stop; returns their positions, or None when every seed stopped."""
        self._count(stack, idx)
        self._mark_times(stack, step, idx, logits)
        seeds = stack.seeds
        done = [
            j for j, s in enumerate(seeds) if self.t_gen[s] is not None and step - self.t_gen[s] >= self.steps.patience
        ]
        if step >= self.steps.cap:
            rest = [j for j in range(len(seeds)) if j not in done]
            if done:
                self._finish(stack, done, step, "patience")
            if rest:
                self._finish(stack, rest, step, "max_steps")
            return None
        if done:
            self._finish(stack, done, step, "patience")
        return None if len(done) == len(seeds) else done

    def _count(self, stack: SeedStack, idx: torch.Tensor) -> None:
        self.stats.steps += 1
        self.stats.seed_steps += len(stack)
        self.stats.train_rows += idx.numel()

    def _mark_times(self, stack: SeedStack, step: int, idx: torch.Tensor, logits: torch.Tensor) -> None:
        """First memorisation and generalisation steps reached by the weights after ``step``."""
        params = _detached(stack)
        if self.free_train_acc and step > 1:  # logits of the weights after step - 1, on every training row
            correct = (logits.argmax(-1) == self.train.targets[idx]).sum(dim=1).tolist()
            for j, s in enumerate(stack.seeds):
                if self.t_mem[s] is None and correct[j] >= self.train_test.need:
                    self.t_mem[s] = step - 1
        first = self._first_chunks(stack.seeds, params)
        if not self.free_train_acc:
            _mark_first_pass(self.t_mem, self.train_test, params, stack.seeds, step, first_logits=first[0])
        _mark_first_pass(self.t_gen, self.test_test, params, stack.seeds, step, first_logits=first[1])

    def _first_chunks(self, seeds: Sequence[int], params: dict[str, torch.Tensor]) -> list[torch.Tensor | None]:
        """Both tests' first-chunk logits from one pass, where both test the same seeds on the same prefixes."""
        pending = _pending(self.t_mem, seeds)
        if self.free_train_acc or not pending or pending != _pending(self.t_gen, seeds) or not self.shared_prefixes:
            return [None, None]
        which = torch.tensor(pending, device=next(iter(params.values())).device)
        return _first_chunks_together((self.train_test, self.test_test), params, which)

    def _finish(self, stack: SeedStack, positions: list[int], step: int, reason: str) -> None:
        """Measure the final accuracies of the seeds at ``positions`` and hand on their records."""
        which = torch.tensor(positions, device=next(iter(stack.params.values())).device)
        params = _detached(stack)
        if self.free_train_acc:  # the training forward of the next step would have given this for free
            _mark_first_pass(self.t_mem, self.train_test, params, stack.seeds, step, positions)
        acc_train = _accuracy(params, which, self.train, self.fn)
        acc_test = _accuracy(params, which, self.test, self.fn)
        for j, a_tr, a_te in zip(positions, acc_train, acc_test):
            rec = self._record(stack.seeds[j], step, reason, a_tr, a_te)
            self.records[rec["seed"]] = rec
            if self.on_record is not None:
                self.on_record(rec)

    def _record(self, seed: int, step: int, reason: str, acc_train: float, acc_test: float) -> dict:
        t_mem, t_gen = self.t_mem[seed], self.t_gen[seed]
        return {
            "seed": seed,
            "condition": self.condition_key,
            "p": self.cond.p,
            "weight_decay": self.cond.weight_decay,
            "batch_size": self.steps.batch,
            "steps_per_epoch": self.steps.per_epoch,
            "t_mem": t_mem,
            "t_gen": t_gen,
            "delay": None if t_mem is None or t_gen is None else t_gen - t_mem,
            "stopped_at": step,
            "reason": reason,
            "final_train_acc": acc_train,
            "final_test_acc": acc_test,
        }

    def _show(self, running: int, step: int) -> None:
        if self.bar is None or self.bar.disable or step % 50:
            return
        self.bar.update(step - self.bar.n)
        self.bar.set_postfix(
            running=running,
            memorised=sum(v is not None for v in self.t_mem.values()),
            generalised=sum(v is not None for v in self.t_gen.values()),
        )


def _detached(stack: SeedStack) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in stack.params.items()}


def _save_checkpoint(
    path: Path, trainer: Trainer, epoch: int, seeds, t_mem, t_gen, records, name: Condition | None = None
) -> None:
    """The running seeds' weights, optimizer and dropout state after ``epoch`` epochs, and what was
    measured; ``name``: of that condition's group of a stack of several (the file a stack of it alone saves)."""
    span = range(len(trainer.stack)) if name is None else trainer.opt.spans[name]
    stack = trainer.stack.part(span)
    opt_tensors, opt_meta = trainer.opt.tensors(name)
    tensors = {**{f"params.{k}": v.detach() for k, v in stack.params.items()}}
    tensors.update({f"optimizer.{k}": v for k, v in opt_tensors.items()})
    if trainer.streams is not None:
        tensors["dropout"] = trainer.streams.subset(list(span)).state() if name is not None else trainer.streams.state()
    meta = {
        "seeds": list(seeds),
        "running": list(stack.seeds),
        "epoch": epoch,
        "step": trainer.step_count,
        "optimizer": opt_meta,
        "t_mem": {str(s): v for s, v in t_mem.items()},
        "t_gen": {str(s): v for s, v in t_gen.items()},
        "records": {str(s): r for s, r in records.items()},
    }
    # The tensors under a name of their own first; the JSON, written last, makes them the
    # checkpoint; then the previous tensors go. A kill at any point leaves a consistent pair.
    path = Path(path)
    previous = load_json(Path(f"{path}.json"))["tensors"] if Path(f"{path}.json").exists() else None
    name = f"{path.name}_{epoch:06d}.safetensors"
    save_tensors(path.parent / name, tensors)
    save_json(Path(f"{path}.json"), {**meta, "tensors": name})
    if previous and previous != name:
        remove(path.parent / previous)


def remove_checkpoint(path: Path) -> None:
    """Delete a condition's checkpoint files (nothing happens if there are none)."""
    for old in sorted(Path(path).parent.glob(f"{Path(path).name}*")):
        remove(old)


def _load_checkpoint(path: Path | None, seeds, device) -> dict | None:
    """A checkpoint whose running seeds include ``seeds``, or None (none saved, or of other seeds)."""
    if path is None or not Path(f"{path}.json").exists():
        return None
    meta = load_json(Path(f"{path}.json"))
    # Seeds that finished after the checkpoint have records already: they are trained again
    # (to the same records, with deterministic kernels) with the others that were still running.
    if not set(seeds) <= set(meta["running"]):
        remove_checkpoint(path)  # of other seeds: a fresh run must not write beside it
        return None
    tensors = load_tensors(Path(path).parent / meta["tensors"], device)
    params = {k[len("params.") :]: v for k, v in tensors.items() if k.startswith("params.")}
    optimizer = {k[len("optimizer.") :]: v for k, v in tensors.items() if k.startswith("optimizer.")}
    return {
        "meta": meta,
        "running": meta["running"],
        "params": params,
        "optimizer": optimizer,
        "dropout": tensors.get("dropout"),
    }


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
    seeds = _check_seeds(seeds)
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
    seeds = _check_seeds(seeds)
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
    GPUs, named 0, 1, ...); with ``ACE_DEVICE`` set, or elsewhere, :func:`corelib.models.default_device`."""
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
    seeds = _check_seeds(seeds)
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
