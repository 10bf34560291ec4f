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

Those early exits need the host to read the device after every step. :class:`DeferredMonitor`
applies the same rules without that: it counts each seed's correct answers on both whole sets
after every step into the device's memory and reads them every ``sync_every`` steps, replaying
the rules step by step. Its records are the same (a seed that stopped inside a span trains on
until the span ends, and what it does there is never read); it is meant for a GPU, where a
read of the device stalls the queue of launches; on a CPU the early exits are cheaper.
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

__all__ = [
    "STOPPING_RULE_VERSION",
    "min_correct",
    "SweepStats",
    "StepPlan",
    "SeedMonitor",
    "DeferredMonitor",
    "monitor_for",
]


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


def _accuracy(params: dict[str, torch.Tensor], which: torch.Tensor, data: PrefixData, fn: Callable) -> list[float]:
    """Full accuracy of the selected seeds on ``data`` (used once per seed, when it stops)."""
    correct = _correct_counts({n: v[which] for n, v in params.items()}, data, fn)
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


@torch.no_grad()
def _correct_counts(params: dict[str, torch.Tensor], data: PrefixData, fn: Callable, chunk: int = 4096) -> torch.Tensor:
    """Correct answers of every seed of the stacked ``params`` on the whole of ``data``, left on the device."""
    correct = None
    for a in range(0, len(data), chunk):
        b = min(len(data), a + chunk)
        logits = fn(params, data.last[a:b], data.index[a:b], data.prefixes)
        part = (logits.argmax(-1) == data.targets[a:b]).sum(dim=1)
        correct = part if correct is None else correct + part
    return correct


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
            self._hand_on(self._record(stack.seeds[j], step, reason, a_tr, a_te))

    def _hand_on(self, rec: dict) -> None:
        """Keep a stopped seed's record and hand it on (``on_record``)."""
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


class DeferredMonitor(SeedMonitor):
    """:class:`SeedMonitor`'s rules and records, read off the device every ``sync_every`` steps.

    After every step it counts each running seed's correct answers on the whole training and test
    sets (no early exit) and keeps the counts on the device; at a step that is a multiple of
    ``sync_every``, one that ends a checkpoint's span (``sync_steps``) or the cap, it reads them
    all at once and replays the rules step by step: the first memorisation and generalisation
    steps, the stop after ``patience`` steps or at the cap, and the final accuracies, which are
    the counts of the stop step. Seeds that stopped inside the span leave the stack then.
    """

    def __init__(self, *args, sync_every: int, sync_steps: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if not isinstance(sync_every, int) or isinstance(sync_every, bool) or sync_every < 1:
            raise ValueError(f"sync_every must be a whole number of steps >= 1, got {sync_every!r}.")
        self.sync_every, self.sync_steps = sync_every, sync_steps
        self.counts: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (step, train, test correct)

    def measure(self, stack: SeedStack, step: int, idx: torch.Tensor, logits: torch.Tensor) -> list[int] | None:
        """Count the seeds' correct answers after ``step``; at a reading, record those that stopped
        and return their positions (None when every seed stopped); between readings, none."""
        self._count(stack, idx)
        params = _detached(stack)
        self.counts.append(
            (step, _correct_counts(params, self.train, self.fn), _correct_counts(params, self.test, self.fn))
        )
        self.stats.extra["eval_rows_full"] = self.stats.extra.get("eval_rows_full", 0) + len(stack) * (
            len(self.train) + len(self.test)
        )
        if not self._reads_at(step):
            return []
        return self._replay(stack.seeds)

    def _reads_at(self, step: int) -> bool:
        ends_span = self.sync_steps is not None and step % self.sync_steps == 0
        return step % self.sync_every == 0 or ends_span or step >= self.steps.cap

    def _replay(self, seeds: Sequence[int]) -> list[int] | None:
        """Apply the rules to every step counted since the last reading (one read of the device)."""
        steps = [s for s, _, _ in self.counts]
        train = torch.stack([c for _, c, _ in self.counts]).tolist()
        test = torch.stack([c for _, _, c in self.counts]).tolist()
        self.counts.clear()
        stopped: list[int] = []
        for step, tr, te in zip(steps, train, test):
            live = [j for j in range(len(seeds)) if j not in stopped]
            for j in live:
                s = seeds[j]
                if self.t_mem[s] is None and tr[j] >= self.train_test.need:
                    self.t_mem[s] = step
                if self.t_gen[s] is None and te[j] >= self.test_test.need:
                    self.t_gen[s] = step
            patient = [j for j in live if self._patient(seeds[j], step)]
            capped = [j for j in live if j not in patient] if step >= self.steps.cap else []
            for group, reason in ((patient, "patience"), (capped, "max_steps")):
                for j in group:
                    self._hand_on(
                        self._record(seeds[j], step, reason, tr[j] / self.train_test.n, te[j] / self.test_test.n)
                    )
            stopped += patient + capped
        return None if len(stopped) == len(seeds) else sorted(stopped)

    def _patient(self, seed: int, step: int) -> bool:
        return self.t_gen[seed] is not None and step - self.t_gen[seed] >= self.steps.patience


def monitor_for(*args, sync_every: int = 1, sync_steps: int | None = None, **kwargs) -> SeedMonitor:
    """The monitor of a condition: :class:`SeedMonitor` (``sync_every`` 1: the device is read after
    every step, with early exits), else :class:`DeferredMonitor` reading it every ``sync_every`` steps."""
    if sync_every == 1:
        return SeedMonitor(*args, **kwargs)
    return DeferredMonitor(*args, sync_every=sync_every, sync_steps=sync_steps, **kwargs)
