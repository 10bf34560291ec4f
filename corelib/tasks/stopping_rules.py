"""The stopping rules of a grokking sweep, applied to a condition's seeds after every step.

For each seed, ``t_mem`` and ``t_gen`` are the first optimizer steps after which the accuracy on
the whole training set, and on the whole test set, reaches ``threshold``; a seed stops
``patience_epochs`` epochs after it generalised, or at the cap (:class:`StepPlan`).
:class:`SeedMonitor` applies the rules and makes each seed's record once it stops.

Evaluating after every step stays cheap without approximation: the evaluation set is visited in
a fixed random order in growing chunks, and a seed leaves as soon as its errors exceed what the
threshold allows (:func:`min_correct`); decided seeds skip the evaluation; with full batches the
next step's forward pass gives the training accuracy for free. Raise
:data:`STOPPING_RULE_VERSION` with any change to what these rules decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ..engine import PrefixData, SeedStack, Trainer, stacked_last_logits
from .sweep_conditions import Condition, SweepConfig, batch_plan

__all__ = ["STOPPING_RULE_VERSION", "min_correct", "SweepStats", "StepPlan", "SeedMonitor"]


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


@dataclass
class SweepStats:
    """Work done by :func:`corelib.tasks.condition_stacks.train_condition` (rows x seeds), for throughput
    measurements."""

    steps: int = 0
    seed_steps: int = 0
    train_rows: int = 0
    eval_rows: int = 0
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StepPlan:
    """A condition's steps: minibatch size, steps per epoch (the unit of caps and patience), cap, patience."""

    batch: int
    per_epoch: int
    cap: int
    patience: int
    full_batch: bool

    @classmethod
    def of(cls, n: int, cond: Condition, cfg: SweepConfig, max_steps: int | None) -> StepPlan:
        """The plan of ``cond`` on ``n`` training examples; ``max_steps`` overrides the cap."""
        plan = batch_plan(n, cond.batch_size, cfg.keep_partial_batch)
        batch, per_epoch = plan["batch"], plan["steps_per_epoch"]
        cap = cfg.max_epochs * per_epoch if max_steps is None else int(max_steps)
        if cap < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}.")
        return cls(batch, per_epoch, cap, cfg.patience_epochs * per_epoch, batch == n)


class SeedMonitor:
    """Watches a condition's seeds after every step: first memorisation and generalisation steps,
    and each seed's record once it has generalised for ``patience`` steps (or the cap is reached).

    ``after_step`` is the trainer's per-step callback; ``t_mem``, ``t_gen`` (seed → step or None)
    and ``records`` (seed → record) are what a checkpoint saves.
    """

    def __init__(
        self,
        cond: Condition,
        cfg: SweepConfig,
        steps: StepPlan,
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
        self.show(len(trainer.stack), step)
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

    def show(self, running: int, step: int) -> None:
        """Update the progress bar (every 50 steps) with the running, memorised and generalised seeds."""
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
