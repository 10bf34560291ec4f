"""The one training loop: several seeds of one architecture trained together, as one vectorised model.

The weights of S models are stacked along a leading seed dimension and the forward pass runs
under ``torch.func.vmap``, so one optimizer step updates every seed. Nothing couples the seeds:
each has its own initialisation, data order (:func:`epoch_order`), loss, AdamW moments (AdamW is
elementwise), weight decay and dropout stream (:class:`~corelib.masks.DropoutStreams`, a
counter-based generator whose masks depend on nothing but the seed, the step and the element). A
seed therefore gets the updates it would get trained alone in a plain PyTorch loop fed the same
masks; the tests check this against one. A single model is a stack of one.

:class:`Trainer` runs epochs of minibatch steps and calls back after each step, which is all the
grokking sweeps need (:mod:`corelib.tasks.stopping_rules` measures and stops seeds from there).
:func:`train_stack` adds a run folder: snapshots of the weights for the analysis, a resumable
state, and ``progress.json``, which commits a checkpoint only once its files are complete, so a
run killed at any moment resumes to exactly the results of an uninterrupted one. Files go
through :mod:`corelib.results` (safetensors and JSON, verified by SHA-256 on every read).

Models of one shape with different hyperparameters train as one **mixed stack**: each group of
them (an :class:`Arm` of :func:`train_mixed`, or a group that :meth:`Trainer.join` adds) has its
own learning rate, weight decay or decay schedule, first epoch (a branch joins at its epoch with
the weights it starts from) and last (it leaves the stack, or a stopping rule drops its seeds), and
its own AdamW over its part of the stacked tensors. A group trains bit for bit as it does as a
stack of its own wherever the matrix library computes each model's products alike in stacks of
any size (on one CPU thread, checked by the tests); an arm's run folder is the one
:func:`train_stack` writes, which is :func:`train_mixed` with one arm.

The pieces live in modules of their own, their public names importable from here too: the data
(:mod:`corelib.training_data`), the stacked models (:mod:`corelib.seed_stack`), the optimizer
(:mod:`corelib.stack_optimizer`), the precisions (:mod:`corelib.precision`), and a run's settings
and folder (:mod:`corelib.run_folders`); this module is the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from . import results
from .cpu_memory import retain_freed_memory
from .masks import DropoutStreams, dropout_seed
from .models import TransformerConfig, default_device
from .precision import PRECISIONS, bf16_native, check_precision, resolve_precision
from .results import StoreError, params_key, save_json
from .run_folders import (
    StackConfig,
    check_identity,
    load_committed,
    load_history,
    load_snapshot,
    plant_snapshot,
    remove_uncommitted,
    run_meta,
    run_progress,
    save_state,
    snapshot_epochs,
    snapshot_path,
    training_seconds,
)
from .seed_stack import SeedStack, stacked_last_logits
from .stack_optimizer import StackOptimizer
from .training_data import Data, PrefixData, SequenceData, epoch_order

__all__ = [
    "epoch_order",
    "PrefixData",
    "SequenceData",
    "StackConfig",
    "SeedStack",
    "StackOptimizer",
    "DropoutStreams",
    "Trainer",
    "train_stack",
    "Arm",
    "train_mixed",
    "load_snapshot",
    "plant_snapshot",
    "snapshot_epochs",
    "load_history",
    "training_seconds",
    "stacked_last_logits",
    "dropout_seed",
    "bf16_native",
    "check_precision",
    "resolve_precision",
    "PRECISIONS",
]


class Trainer:
    """Epochs of minibatch AdamW steps on a :class:`SeedStack`, one data order and dropout stream per seed.

    ``on_step(trainer, step, idx, logits)`` is called after every step with the rows (S, B) and
    training logits of that step; it may :meth:`drop` seeds, or return ``True`` to end training.
    Between epochs, models with hyperparameters of their own may :meth:`join` the stack as a group
    (a learning rate, weight decay, AdamW and dropout streams of their own) and groups may
    :meth:`leave` it; each group trains as it would as a stack of its own (see :class:`StackOptimizer`).
    """

    def __init__(
        self,
        stack: SeedStack,
        data: Data,
        *,
        lr: float,
        weight_decay: float | Sequence[float],
        batch_size: int,
        keep_partial_batch: bool = True,
        streams: DropoutStreams | None = None,
        precision: str = "fp32",
        name: Hashable = 0,
    ):
        if not isinstance(data, (PrefixData, SequenceData)):
            raise TypeError(f"data must be PrefixData or SequenceData, got {type(data).__name__}.")
        if bool(stack.cfg.dropout) != (streams is not None):
            raise ValueError(f"dropout is {stack.cfg.dropout}: give DropoutStreams exactly when it is > 0.")
        self.stack, self.data, self.streams = stack, data, streams
        if stack.device.type == "cpu":
            retain_freed_memory()  # a step's large tensors then reuse the last step's memory
        self.opt = StackOptimizer(stack, lr, weight_decay, precision, name=name)
        self.batch = min(batch_size, len(data))
        self.end = len(data) if keep_partial_batch else len(data) - len(data) % self.batch
        self.step_count = 0
        self.order: torch.Tensor | None = None

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.end // self.batch)

    def epoch(self, epoch: int, on_step: Callable | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Run one epoch; returns per-seed (summed loss x rows, correct answers), or None if stopped early."""
        stack, data = self.stack, self.data
        device = stack.device
        self.order = torch.stack([epoch_order(len(data), s, epoch) for s in stack.seeds]).to(device)
        self._total = torch.zeros(len(stack), device=device)
        self._correct = torch.zeros(len(stack), device=device)
        last_only = isinstance(data, PrefixData)
        for i in range(0, self.end, self.batch):
            idx = self.order[:, i : i + self.batch]
            masks = (
                None
                if self.streams is None
                else self.streams.draw(stack.cfg, idx.shape[1], data.length, device, last_only=last_only)
            )
            losses, logits = self.opt.step(stack, data, idx, masks)
            self.step_count += 1
            self._total += losses * idx.shape[1]
            self._correct += (logits.argmax(-1) == data.targets[idx]).flatten(1).sum(dim=1)
            if on_step is not None and on_step(self, self.step_count, idx, logits):
                return None
            stack = self.stack  # on_step may have dropped seeds
        return self._total, self._correct

    def drop(self, positions: list[int]) -> None:
        """Remove the seeds at ``positions`` (their weights, moments, data order and dropout stream)."""
        keep = [j for j in range(len(self.stack)) if j not in set(positions)]
        new = self.stack.subset(keep)
        self.opt = self.opt.subset(new, keep)
        self.stack = new
        index = torch.tensor(keep, device=new.device)
        if self.order is not None:
            self.order = self.order[index]
            self._total, self._correct = self._total[index], self._correct[index]
        if self.streams is not None:
            self.streams = self.streams.subset(keep)

    def join(
        self,
        stack: SeedStack,
        *,
        lr: float,
        weight_decay: float | Sequence[float],
        streams: DropoutStreams | None = None,
        optimizer: tuple[dict[str, torch.Tensor], dict] | None = None,
        name: Hashable,
    ) -> None:
        """Add the models of ``stack`` after the others, as group ``name``: learning rate ``lr``, decay
        ``weight_decay`` (one value or one per model), their dropout ``streams`` (at the draws they
        have reached) and a fresh AdamW, or the ``optimizer`` state a stack of them saved
        (:meth:`StackOptimizer.tensors`). Between epochs: the next epoch draws every model's order."""
        if stack.cfg != self.stack.cfg:
            raise ValueError(f"models of another architecture cannot join this stack: {stack.cfg} != {self.stack.cfg}.")
        if bool(stack.cfg.dropout) != (streams is not None):
            raise ValueError(f"dropout is {stack.cfg.dropout}: give DropoutStreams exactly when it is > 0.")
        if stack.device != self.stack.device:
            raise ValueError(
                f"the joining models are on {stack.device}, this stack's on {self.stack.device}; initialise or "
                f"load them on {self.stack.device} (or move their params there) before they join."
            )
        joined = SeedStack.joined([self.stack, stack])
        self.opt = self.opt.joined(joined, lr, weight_decay, optimizer, name=name)
        self.stack = joined
        if streams is not None:
            self.streams = DropoutStreams.joined([self.streams, streams])
        self.order = None

    def leave(self, name: Hashable) -> SeedStack:
        """Remove group ``name``; returns its models (their weights, detached)."""
        span = self.opt.spans[name]
        if len(span) == len(self.stack):
            raise ValueError(f"group {name!r} is the whole stack: it cannot leave it; use the stack itself.")
        part = self.stack.subset(list(span))
        self.drop(list(span))
        return part


def _split(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) + 1 :]: v for k, v in tensors.items() if k.startswith(prefix + ".")}


# ---------------------------------------------------------------- training a run


def train_stack(
    model_cfg: TransformerConfig,
    cfg: StackConfig,
    seeds,
    train_data: Data,
    test_data: Data | None,
    run_dir: Path,
    *,
    start: tuple[Path, int] | None = None,
    device=None,
    progress: bool = True,
) -> tuple[SeedStack, dict]:
    """Train ``seeds`` together up to ``cfg.epochs``, resuming or extending the run in ``run_dir``.

    Args:
        start: ``(source_run, epoch)`` to branch: begin from that run's snapshot at ``epoch``
            with a fresh optimizer (e.g. to continue without weight decay). Default: fresh
            initialisation at epoch 0.

    Returns:
        The trained :class:`SeedStack` and the history (lists indexed by epoch; per-seed values).
        A second process asking for the same run waits for the first and reuses its work.
    """
    arm = Arm(cfg, seeds, run_dir, start)
    return train_mixed(model_cfg, [arm], train_data, test_data, device=device, progress=progress)[0]


@dataclass(frozen=True)
class Arm:
    """One arm of a mixed stack (:func:`train_mixed`): what one :func:`train_stack` call trains.

    ``cfg`` holds the arm's own learning rate, weight decay or decay schedule (``decay_knots``: an
    anneal, or a removal at an epoch), snapshot, checkpoint and evaluation schedules, and
    ``epochs``, where it stops. ``start = (source_run, epoch)`` branches: the arm joins the stack at
    ``epoch`` with the source run's weights of that epoch and a fresh AdamW; the source may be an
    arm listed before it in the same call. ``run_dir`` is the arm's run folder, in the format of
    :func:`train_stack`.
    """

    cfg: StackConfig
    seeds: tuple[int, ...]
    run_dir: Path
    start: tuple[Path, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        if not self.seeds:
            raise ValueError(f"an arm needs at least one seed; {self.run_dir} has none.")
        if self.start is not None:
            object.__setattr__(self, "start", (Path(self.start[0]), int(self.start[1])))


# Settings that shape a training step: every arm of a mixed stack must share them.
_STEP_SETTINGS = ("batch_size", "keep_partial_batch", "loss_positions", "precision")


def train_mixed(
    model_cfg: TransformerConfig,
    arms: Sequence[Arm],
    train_data: Data,
    test_data: Data | None,
    *,
    device=None,
    progress: bool = True,
) -> list[tuple[SeedStack, dict]]:
    """Train several arms of one architecture and data as one stack: one forward and backward pass
    per step for all their models, each arm with its own hyperparameters (see :class:`Arm`).

    An arm joins the stack at the epoch it begins (0, its branch epoch, or the epoch its run folder
    has reached), leaves it after its ``epochs``, and writes its run folder exactly as
    :func:`train_stack` would: the same identity, files and values, bit for bit where the matrix
    library computes each model's products alike in stacks of any size (the tests check it on one
    CPU thread). So an arm trained here is resumed, extended or read by :func:`train_stack` and
    the other way round, and a caller moves a loop of :func:`train_stack` calls to one call here
    without changing a stored result. The arms must share the settings that shape a step
    (``batch_size``, ``keep_partial_batch``, ``loss_positions``, ``precision``).

    Returns:
        Per arm, in order, what :func:`train_stack` returns for it: its models and its history.
    """
    arms = _checked_arms(arms, train_data, test_data)
    with ExitStack() as held:
        for run in sorted({arm.run_dir.resolve() for arm in arms}):  # one order in every process: no deadlock
            held.enter_context(results.run_lock(run, "training"))
        mixed = _MixedRun(model_cfg, arms, train_data, test_data, torch.device(device or default_device()))
        return mixed.fit(progress)


def _checked_arms(arms: Sequence[Arm], train_data: Data, test_data: Data | None) -> list[Arm]:
    """The arms, refused where they cannot train as one stack on this data."""
    arms = list(arms)
    if not arms or not all(isinstance(a, Arm) for a in arms):
        raise TypeError(f"train_mixed takes a non-empty list of Arm, got {arms!r}.")
    cfg = arms[0].cfg
    expected = PrefixData if cfg.loss_positions == "last" else SequenceData
    if not isinstance(train_data, expected) or not (test_data is None or isinstance(test_data, expected)):
        raise TypeError(
            f"loss_positions={cfg.loss_positions!r} trains on {expected.__name__}, got {type(train_data).__name__}."
        )
    for arm in arms[1:]:
        differ = [k for k in _STEP_SETTINGS if getattr(arm.cfg, k) != getattr(cfg, k)]
        if differ:
            raise ValueError(
                f"the arm in {arm.run_dir} differs from the first in {', '.join(differ)}, which shape every step of "
                "a stack; train arms that differ there in separate calls."
            )
    folders = [a.run_dir.resolve() for a in arms]
    if len(set(folders)) != len(folders):
        raise ValueError(f"two arms share a run folder ({folders}); give each arm a folder of its own.")
    return arms


@dataclass(frozen=True)
class _Start:
    """Where the epochs of a run begin: the weights, the epoch, the history so far and, when
    resuming, the optimizer's saved state (its tensors and JSON)."""

    stack: SeedStack
    epoch: int
    history: dict
    optimizer: tuple[dict[str, torch.Tensor], dict] | None = None


def _dropout_streams(
    model_cfg: TransformerConfig, seeds: tuple[int, ...], start: tuple[Path, int] | None
) -> DropoutStreams | None:
    """The seeds' dropout streams from the run's first epoch (None without dropout)."""
    if not model_cfg.dropout:
        return None
    return DropoutStreams(model_cfg.dropout, seeds, 0 if start is None else int(start[1]))


def _history_until(state: dict, epochs: int) -> dict:
    """The history of a state saved after ``state["epoch"]`` epochs, cut after ``epochs``."""
    return {k: v[: epochs - (state["epoch"] - len(v))] for k, v in state["history"].items()}


def _resumed(
    model_cfg: TransformerConfig,
    seeds: tuple[int, ...],
    tensors: dict[str, torch.Tensor],
    state: dict,
    streams: DropoutStreams | None,
) -> _Start:
    """Continue from a committed state: its weights, history, dropout streams and optimizer."""
    stack = SeedStack(model_cfg, seeds, _split(tensors, "params"))
    if streams is not None:
        streams.load_state(tensors["rng.dropout"])
    return _Start(stack, state["epoch"], state["history"], (_split(tensors, "optimizer"), state["optimizer"]))


def _fresh(
    model_cfg: TransformerConfig, seeds: tuple[int, ...], start: tuple[Path, int] | None, device: torch.device
) -> _Start:
    """Begin a run: fresh initialisation at epoch 0, or a branch from the snapshot ``start``."""
    if start is None:
        stack, epoch = SeedStack.initialise(model_cfg, seeds, device), 0
    else:
        stack, epoch = load_snapshot(start[0], start[1], device), int(start[1])
        if stack.seeds != seeds or stack.cfg != model_cfg:
            raise StoreError(f"snapshot {start} has other seeds or architecture than requested.")
    return _Start(stack, epoch, {"epoch": [], "loss": [], "train_acc": [], "test_acc": []})


def _settled(history: dict, fresh: int) -> None:
    """Turn the last ``fresh`` entries of ``history`` from device tensors into lists (one host sync)."""
    for key in ("loss", "train_acc", "test_acc"):
        rows = history[key]
        for i in range(len(rows) - fresh, len(rows)):
            if isinstance(rows[i], torch.Tensor):
                rows[i] = rows[i].tolist()


class _StackClock:
    """The wall time of a mixed stack shared among its arms by their numbers of models.

    An arm's time in the stack, less its :meth:`discount`, is its share: over each interval during
    which the same arms trained, the interval times its models over all the stack's models. So the
    shares of arms trained together add up to the stack's wall time, and an arm alone in the stack
    has no discount (its time is today's, to the bit).
    """

    def __init__(self) -> None:
        self.sizes: dict[Hashable, int] = {}
        self.discounts: dict[Hashable, float] = {}
        self.mark = time.perf_counter()

    def _pending(self, name: Hashable, now: float) -> float:
        total = sum(self.sizes.values())
        if len(self.sizes) < 2 or name not in self.sizes:
            return 0.0
        return (now - self.mark) * (total - self.sizes[name]) / total

    def change(self, name: Hashable, size: int) -> None:
        """Arm ``name`` joins the stack with ``size`` models (0: leaves it)."""
        now = time.perf_counter()
        for other in self.sizes:
            self.discounts[other] = self.discounts.get(other, 0.0) + self._pending(other, now)
        self.mark = now
        if size:
            self.sizes[name] = size
            self.discounts.setdefault(name, 0.0)
        else:
            self.sizes.pop(name, None)

    def discount(self, name: Hashable, now: float) -> float:
        """The time up to ``now`` that arm ``name`` spent in the stack on the other arms' models."""
        return self.discounts.get(name, 0.0) + self._pending(name, now)


class _ArmRun:
    """One arm's run folder while a mixed stack trains: its identity and committed progress, its
    history, and once it has joined, its group (named by the arm's index) in the trainer. Each
    checkpoint is made visible by committing ``progress.json`` once its files are complete."""

    def __init__(
        self, model_cfg: TransformerConfig, arm: Arm, index: int, data: Data, test_data: Data | None, device
    ) -> None:
        self.arm, self.cfg, self.run, self.name = arm, arm.cfg, arm.run_dir, index
        if arm.start is not None and not (arm.start[0] / "run.json").exists():
            raise StoreError(
                f"the arm in {arm.run_dir} branches from {arm.start[0]}, which holds no run; train that run "
                "first, or list the arm that trains it before this one."
            )
        meta = run_meta(model_cfg, arm.cfg, arm.seeds, data, test_data, arm.start)
        check_identity(self.run, meta)
        self.key = params_key(meta)
        self.done = run_progress(self.run)
        remove_uncommitted(self.run, self.done)
        self.streams = _dropout_streams(model_cfg, arm.seeds, arm.start)
        self.result: tuple[SeedStack, dict] | None = None
        self.begin: _Start | None = None
        self.join_epoch = 0 if arm.start is None else arm.start[1]
        if self.done["state"] is not None:
            tensors, state = load_committed(self.run, self.done["state"], self.key, device)
            self.join_epoch = state["epoch"]
            if state["epoch"] > arm.cfg.epochs:  # already trained further: hand back the earlier snapshot
                self.result = load_snapshot(self.run, arm.cfg.epochs, device), _history_until(state, arm.cfg.epochs)
            else:
                self.begin = _resumed(model_cfg, arm.seeds, tensors, state, self.streams)
        self.snapshots = set(self.done["snapshots"])
        # Wall time of the training up to the committed state, summed over the processes that ran it.
        self.seconds_before, self.started = float(self.done.get("seconds", 0.0)), time.perf_counter()
        self.clock: _StackClock | None = None  # set by the stack it trains in
        self.fresh = 0  # history entries still held as device tensors

    def open(self, model_cfg: TransformerConfig, device: torch.device) -> bool:
        """Take up the arm's weights at its first epoch; returns whether it has epochs to train."""
        if self.begin is None:
            self.begin = _fresh(model_cfg, self.arm.seeds, self.arm.start, device)
        self.history, self.started = self.begin.history, time.perf_counter()
        if self.clock is not None:  # from here the arm is in the stack, its time shared with the others
            self.clock.change(self.name, len(self.arm.seeds))
        if self.begin.epoch not in self.snapshots and self.cfg.is_snapshot(self.begin.epoch):
            self.checkpoint(None, self.begin.epoch, snapshot=True, state=False)
        if self.begin.epoch < self.cfg.epochs:
            return True
        stack = self.begin.stack
        for p in stack.params.values():
            p.requires_grad_(False)
        self.result = stack, self.history
        if self.clock is not None:
            self.clock.change(self.name, 0)
        return False

    def join(self, trainer: Trainer | None, data: Data) -> Trainer:
        """Join the stack of ``trainer`` (or begin one) as a group with the arm's hyperparameters."""
        begin, cfg = self.begin, self.cfg
        stack = begin.stack
        stack.params = {k: v.detach() for k, v in stack.params.items()}
        decay = cfg.decay_at(begin.epoch, len(stack))
        if trainer is not None:
            trainer.join(stack, lr=cfg.lr, weight_decay=decay, streams=self.streams, optimizer=begin.optimizer,
                         name=self.name)  # fmt: skip
            return trainer
        trainer = Trainer(
            stack,
            data,
            lr=cfg.lr,
            weight_decay=decay,
            batch_size=cfg.batch_size,
            keep_partial_batch=cfg.keep_partial_batch,
            streams=self.streams,
            precision=cfg.precision,
            name=self.name,
        )
        if begin.optimizer is not None:
            trainer.opt.load_tensors(*begin.optimizer)
        return trainer

    def record(self, e: int, trainer: Trainer, sums: tuple[torch.Tensor, torch.Tensor], test_data) -> bool:
        """Append epoch ``e`` to the history; returns whether the test set was measured."""
        span, cfg, history = trainer.opt.spans[self.name], self.cfg, self.history
        total, correct = (t[span.start : span.stop] for t in sums)
        used = trainer.end
        positions = 1 if isinstance(trainer.data, PrefixData) else trainer.data.length
        history["epoch"].append(e + 1)
        history["loss"].append(total / used)
        history["train_acc"].append(correct / (used * positions))
        evaluate = test_data is not None and ((e + 1) % cfg.eval_every == 0 or cfg.is_snapshot(e + 1))
        history["test_acc"].append(trainer.stack.part(span).accuracy(test_data) if evaluate else None)
        self.fresh += 1
        if evaluate:  # the accuracy waited for the device anyway
            self.settle()
        return evaluate

    def settle(self) -> None:
        _settled(self.history, self.fresh)
        self.fresh = 0

    def after_epoch(self, trainer: Trainer, epoch: int) -> None:
        """Checkpoint after ``epoch`` epochs where the arm's schedule asks."""
        cfg = self.cfg
        # The state is saved with every snapshot too, so the snapshots never run ahead of it.
        snap = cfg.is_snapshot(epoch)
        save = snap or epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs
        self.checkpoint(trainer, epoch, snapshot=snap, state=save)

    def checkpoint(self, trainer: Trainer | None, epoch: int, *, snapshot: bool, state: bool) -> None:
        """Write the weight snapshot and/or the resumable state after ``epoch`` epochs, then commit."""
        span = None if trainer is None else trainer.opt.spans[self.name]
        params = self.begin.stack.params if span is None else trainer.stack.part(span).params
        if snapshot:
            results.save_tensors(snapshot_path(self.run, epoch), params)
            self.snapshots.add(epoch)
        name = f"state_{epoch:06d}" if state else None
        if name:
            self.settle()
            dropout = None if trainer.streams is None else trainer.streams.subset(list(span)).state()
            save_state(self.run, name, params, trainer.opt.tensors(self.name), dropout, epoch, self.history, self.key)
        if snapshot or state:
            self.commit(epoch, name)

    def commit(self, epoch: int, state_name: str | None) -> None:
        """The one point at which a checkpoint becomes visible: after all its files are complete."""
        done = self.done
        old = done["state"]
        done.update(
            epoch=epoch if state_name else done["epoch"], state=state_name or old, snapshots=sorted(self.snapshots)
        )
        if state_name:
            now = time.perf_counter()
            shared = 0.0 if self.clock is None else self.clock.discount(self.name, now)
            done["seconds"] = round(self.seconds_before + now - self.started - shared, 1)
        save_json(self.run / "progress.json", done)
        if state_name and old and old != state_name:
            for suffix in (".safetensors", ".json"):
                results.remove(self.run / f"{old}{suffix}")

    def leave(self, trainer: Trainer) -> Trainer | None:
        """End the arm after its last epoch: its models leave the stack; returns the trainer of the others."""
        self.settle()
        if len(trainer.opt.groups) == 1:  # the last arm: the trainer's own stack
            stack, trainer = trainer.stack, None
        else:
            stack = trainer.leave(self.name)
        for p in stack.params.values():
            p.requires_grad_(False)
        self.result = stack, self.history
        return trainer


class _MixedRun:
    """The epochs of a mixed stack: arms join at their first epoch, train together, leave after their last."""

    def __init__(
        self, model_cfg: TransformerConfig, arms: list[Arm], data: Data, test_data: Data | None, device
    ) -> None:
        self.model_cfg, self.device = model_cfg, device
        # Each arm's identity first (a branch reads its source's), on the data as given, then the data to the device.
        self.runs = [_ArmRun(model_cfg, arm, i, data, test_data, device) for i, arm in enumerate(arms)]
        self.clock = _StackClock()
        for run in self.runs:
            run.clock = self.clock
        self.data = data.to(device)
        self.test_data = None if test_data is None else test_data.to(device)
        self.trainer: Trainer | None = None
        self.active: list[_ArmRun] = []

    def fit(self, progress: bool) -> list[tuple[SeedStack, dict]]:
        """Train every arm to its ``epochs``; returns each arm's models and history."""
        todo = [r for r in self.runs if r.result is None]
        if todo:
            first = min(r.join_epoch for r in todo)
            last = max(max(r.cfg.epochs, r.join_epoch) for r in todo)
            n = sum(len(r.arm.seeds) for r in todo)
            desc = f"train {n} seeds" if len(todo) == 1 else f"train {len(todo)} arms ({n} models)"
            bar = tqdm(total=last, initial=first, desc=desc, disable=not progress, leave=False)
            for e in range(first, last + 1):
                self.join(e, [r for r in todo if r.join_epoch == e])
                if e < last and self.active:
                    self.fit_epoch(e, bar if progress else None)
                bar.update(1 if e < last else 0)
            bar.close()
        return [r.result for r in self.runs]

    def join(self, epoch: int, runs: list[_ArmRun]) -> None:
        """Arms that begin at ``epoch`` join the stack (those with nothing to train end at once)."""
        for run in runs:
            if run.open(self.model_cfg, self.device):
                self.trainer = run.join(self.trainer, self.data)
                self.active.append(run)

    def fit_epoch(self, e: int, bar: tqdm | None) -> None:
        """Train epoch ``e`` of every arm in the stack; record, checkpoint, and let finished arms leave."""
        trainer = self.trainer
        by_name = {r.name: r for r in self.active}
        decays = [d for g in trainer.opt.groups for d in by_name[g.name].cfg.decay_at(e, g.size)]
        if decays != trainer.opt.decay.tolist():  # a schedule moved on
            trainer.opt.set_decay(trainer.stack, decays)
        sums = trainer.epoch(e)
        measured = [r for r in self.active if r.record(e, trainer, sums, self.test_data)]
        if bar is not None and measured:
            bar.set_postfix(
                loss=f"{max(max(r.history['loss'][-1]) for r in measured):.3g}",
                test=f"{min(min(r.history['test_acc'][-1]) for r in measured):.3f}",
            )
        for run in self.active:
            run.after_epoch(trainer, e + 1)
        for run in [r for r in self.active if r.cfg.epochs == e + 1]:
            self.trainer = run.leave(self.trainer)
            self.active.remove(run)
            self.clock.change(run.name, 0)
