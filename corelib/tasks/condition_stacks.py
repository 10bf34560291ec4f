"""Training a sweep's conditions: each a stack of seeds on :class:`corelib.engine.Trainer`, or
several of one modulus and batch size as groups of one stack, stopped by the stopping rules of
:mod:`corelib.tasks.stopping_rules`, with checkpoints to resume from.

All seeds of a condition train together; a seed leaves the stack when it stops, without changing
the others' updates. Minibatches follow the reference: a fresh permutation whenever the next
batch would run past the end of the current one (its last ``n mod B`` examples are skipped).
Conditions of one modulus and batch size train as one stack (:func:`train_conditions`: each its
own weight decay and stopping rules, each bit for bit as alone on one CPU thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ..engine import DropoutStreams, PrefixData, SeedStack, Trainer
from ..models import default_device
from ..results import load_json, load_tensors, remove, save_json, save_tensors
from .stopping_rules import StepPlan, SweepStats, monitor_for
from .sweep_conditions import Condition, SweepConfig, check_seeds, condition_data

__all__ = ["train_condition", "train_conditions", "remove_checkpoint"]


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
    sync_every: int = 1,
) -> list[dict]:
    """Train ``seeds`` of one condition together and measure their times; returns one record per seed.

    Records are returned in the order of ``seeds``; ``on_record`` is called with each record as
    soon as its seed stops (used to save it). ``max_steps`` overrides the cap
    ``cfg.max_epochs * steps_per_epoch`` (benchmarks). ``data`` replaces the condition's
    ``(train, test)`` sets (tests, other tasks with tokens in ``range(p)``). With ``checkpoint``
    (a path without suffix), the running seeds' state is saved there every ``checkpoint_every``
    epochs, and a later call with the same seeds resumes from it to the records an uninterrupted
    run gives; nothing else is read from or written to disk. ``sync_every``: read the stopping
    checks off the device every that many steps (:class:`~corelib.tasks.stopping_rules.DeferredMonitor`,
    for a GPU; the same records), or after every step with early exits (1, the default).
    """
    seeds = check_seeds(seeds)
    device = torch.device(device) if device is not None else default_device()
    train, test = (d.to(device) for d in (data if data is not None else condition_data(cond, cfg)))
    steps = StepPlan.of(len(train), cond, cfg, max_steps)
    stats = stats if stats is not None else SweepStats()
    saved = _load_checkpoint(checkpoint, seeds, device)
    trainer = _condition_trainer(cond, cfg, seeds, train, steps.batch, saved, device)
    monitor = monitor_for(
        cond,
        cfg,
        steps,
        (train, test),
        trainer.stack.seeds,
        stats,
        condition_key,
        on_record,
        sync_every=sync_every,
        sync_steps=checkpoint_every * steps.per_epoch if checkpoint is not None else None,
    )
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
    sync_every: int = 1,
) -> dict[Condition, list[dict]]:
    """:func:`train_condition` for several conditions of one modulus and batch size, as one stack.

    ``seeds`` maps each condition to its seeds. Every condition is a group of the trainer with its
    own weight decay and AdamW (:meth:`corelib.engine.Trainer.join`) and its own stopping rules; its
    seeds leave the stack as they stop. Each condition gets the records, and its ``checkpoints[cond]``
    the files, that :func:`train_condition` gives it alone (bit for bit where the matrix library
    computes each model alike in stacks of any size: on one CPU thread). Conditions whose
    checkpoints stand at different epochs are trained in stacks of those at the same epoch.
    ``data`` replaces the conditions' ``(train, test)`` sets and ``sync_every`` reads the
    stopping checks, as in :func:`train_condition`.
    """
    conds = list(seeds)
    keys = condition_keys or {}
    if len({(c.p, c.batch_size) for c in conds}) > 1:
        raise ValueError(
            f"conditions of one stack share the modulus and batch size; got {[c.label() for c in conds]}: "
            "train each (p, batch size) with a call of its own."
        )
    seeds = {c: check_seeds(seeds[c]) for c in conds}
    device = torch.device(device) if device is not None else default_device()
    stats = stats if stats is not None else SweepStats()
    saved = {c: _load_checkpoint((checkpoints or {}).get(c), seeds[c], device) for c in conds}
    out = {}
    for epoch in sorted({s["meta"]["epoch"] if s else 0 for s in saved.values()}):
        group = [c for c in conds if (saved[c]["meta"]["epoch"] if saved[c] else 0) == epoch]
        sets = data if data is not None else condition_data(group[0], cfg)
        sync = (sync_every, checkpoint_every if checkpoints else None)
        run = _ConditionStack(group, seeds, cfg, sets, saved, device, stats, keys, on_record, sync)
        out.update(run.fit(epoch, progress, checkpoints, checkpoint_every))
    return {c: out[c] for c in conds}


class _ConditionStack:
    """Conditions of one modulus and batch size at one epoch, as groups of one trainer, each with its monitor."""

    def __init__(self, conds, seeds, cfg, data, saved, device, stats, keys, on_record, sync=(1, None)) -> None:
        self.conds, self.seeds = conds, seeds
        train, test = (d.to(device) for d in data)
        self.steps = StepPlan.of(len(train), conds[0], cfg, None)
        trainer, self.monitors = None, {}
        for c in conds:
            trainer = _condition_trainer(c, cfg, seeds[c], train, self.steps.batch, saved[c], device, join=trainer)
            running = trainer.stack.part(trainer.opt.spans[c]).seeds
            monitor = monitor_for(
                c,
                cfg,
                self.steps,
                (train, test),
                running,
                stats,
                keys.get(c, ""),
                on_record,
                sync_every=sync[0],
                sync_steps=sync[1] * self.steps.per_epoch if sync[1] else None,
            )
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
            self.monitors[c].show(len(span), step)
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
