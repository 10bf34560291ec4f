"""The stopping checks read off the device every few steps (the GPU path) give the records of
the checks read after every step, for one condition, for conditions stacked, and across a kill.

On one CPU thread a model's updates do not depend on the stack around it, so a seed that stays in
the stack a few steps past its stop cannot change the others: the records must be equal."""

from __future__ import annotations

import pytest

from corelib.tasks import condition_stacks, stopping_rules
from corelib.tasks.sweeps import Condition, SweepConfig, SweepStats, train_condition, train_conditions
from tests.test_sweeps import naive_times, overlap_data

TINY = dict(d_model=16, n_heads=2, d_ff=32, lr=1e-2)


# Bit for bit: on one thread a model is computed alike in stacks of any size.
pytestmark = pytest.mark.usefixtures("one_thread")


def _recorded(cond, seeds, cfg, data, **kwargs) -> tuple[list[dict], list[int]]:
    """The records of one condition and the order in which they were handed on."""
    order: list[int] = []
    recs = train_condition(
        cond, seeds, cfg, device="cpu", progress=False, data=data, on_record=lambda r: order.append(r["seed"]), **kwargs
    )
    return recs, order


@pytest.mark.parametrize(
    ("batch_size", "dropout", "sync_every"),
    [(None, 0.0, 3), pytest.param(None, 0.1, 64, marks=pytest.mark.slow), (32, 0.0, 5)],
    ids=["full batch", "dropout", "minibatches"],
)
def test_checks_read_every_few_steps_give_the_records_of_every_step(batch_size, dropout, sync_every):
    cfg = SweepConfig(**TINY, threshold=0.9, patience_epochs=1, max_epochs=150, dropout=dropout)
    cond, seeds = Condition(p=11, weight_decay=1.0, batch_size=batch_size), (1, 2, 3, 4)
    data = overlap_data(cond, cfg)
    every_step, order = _recorded(cond, seeds, cfg, data)
    deferred, deferred_order = _recorded(cond, seeds, cfg, data, sync_every=sync_every)
    assert deferred == every_step and deferred_order == order
    stops = {r["stopped_at"] for r in every_step}
    assert len(stops) >= 2 and any(s % sync_every for s in stops)  # stops fell inside spans, not only at reads
    if batch_size is None and not dropout:  # and both equal a full evaluation after every step
        ref = naive_times(cond, seeds, cfg, max(stops), data)
        assert {r["seed"]: (r["t_mem"], r["t_gen"]) for r in deferred} == ref


def test_the_cap_is_applied_at_its_step_between_reads():
    cfg = SweepConfig(**TINY, threshold=0.9, patience_epochs=1, max_epochs=150)
    cond = Condition(p=11, weight_decay=1.0, batch_size=None)
    data = overlap_data(cond, cfg)
    kwargs = dict(max_steps=23)  # not a multiple of the span: the cap forces a read
    capped, _ = _recorded(cond, (1, 2), cfg, data, **kwargs)
    deferred, _ = _recorded(cond, (1, 2), cfg, data, sync_every=10, **kwargs)
    assert deferred == capped
    assert {r["reason"] for r in capped} == {"max_steps"} and {r["stopped_at"] for r in capped} == {23}


def test_stacked_conditions_read_every_few_steps_give_the_records_of_every_step():
    cfg = SweepConfig(**TINY, threshold=0.9, patience_epochs=1, max_epochs=150, dropout=0.1)
    conds = [Condition(p=11, weight_decay=w, batch_size=None) for w in (0.5, 1.0, 3.0)]
    seeds = {conds[0]: (1, 2, 3), conds[1]: (2, 4), conds[2]: (1, 5, 6)}
    data = overlap_data(conds[0], cfg)
    every_step = train_conditions(seeds, cfg, device="cpu", progress=False, data=data)
    deferred = train_conditions(seeds, cfg, device="cpu", progress=False, data=data, sync_every=8)
    assert deferred == every_step
    assert len({r["stopped_at"] for recs in every_step.values() for r in recs}) >= 3


def test_a_killed_deferred_run_resumes_from_its_checkpoint_to_the_same_records(tmp_path, monkeypatch):
    cfg = SweepConfig(**TINY, threshold=0.9, patience_epochs=1, max_epochs=300, dropout=0.1)
    cond, seeds = Condition(p=11, weight_decay=1.0, batch_size=None), (1, 2, 3)
    data = overlap_data(cond, cfg)
    reference = {r["seed"]: r for r in train_condition(cond, seeds, cfg, device="cpu", progress=False, data=data)}
    stops = sorted(r["stopped_at"] for r in reference.values())
    interrupt_at = 10 * ((stops[0] + stops[-1]) // 20)  # a checkpoint between the first and last stop

    class Killed(Exception):
        pass

    real_save = condition_stacks._save_checkpoint

    def save_then_die(path, trainer, epoch, *args):
        real_save(path, trainer, epoch, *args)
        if epoch == interrupt_at:
            raise Killed

    stored: dict[int, dict] = {}
    kwargs = dict(
        device="cpu", progress=False, data=data, checkpoint=tmp_path / "checkpoint", checkpoint_every=5, sync_every=7
    )
    monkeypatch.setattr(condition_stacks, "_save_checkpoint", save_then_die)
    with pytest.raises(Killed):
        train_condition(cond, seeds, cfg, on_record=lambda r: stored.update({r["seed"]: r}), **kwargs)
    monkeypatch.setattr(condition_stacks, "_save_checkpoint", real_save)
    assert 0 < len(stored) < len(seeds)  # the checkpoint's read recorded the seeds stopped before it
    missing = [s for s in seeds if s not in stored]
    stats = SweepStats()
    resumed = train_condition(
        cond, missing, cfg, on_record=lambda r: stored.update({r["seed"]: r}), stats=stats, **kwargs
    )
    assert stats.steps >= max(reference[s]["stopped_at"] for s in missing) - interrupt_at  # resumed, not redone
    assert stats.steps < max(reference[s]["stopped_at"] for s in missing)
    assert {r["seed"]: r for r in resumed} == {s: reference[s] for s in missing} and stored == reference


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8"])
def test_a_span_that_is_not_a_whole_number_of_steps_is_refused(bad):
    cfg = SweepConfig(**TINY, max_epochs=5)
    cond = Condition(p=11, weight_decay=1.0, batch_size=None)
    with pytest.raises(ValueError, match="sync_every must be a whole number of steps >= 1"):
        train_condition(cond, (1,), cfg, device="cpu", progress=False, sync_every=bad)


def test_the_monitor_for_one_step_is_the_early_exit_one():
    cfg = SweepConfig(**TINY, max_epochs=5)
    cond = Condition(p=11, weight_decay=1.0, batch_size=None)
    data = overlap_data(cond, cfg)
    plan = stopping_rules.StepPlan.of(len(data[0]), cond, cfg, None)
    args = (cond, cfg, plan, data, (1,), SweepStats(), "", None)
    assert type(stopping_rules.monitor_for(*args)) is stopping_rules.SeedMonitor
    assert type(stopping_rules.monitor_for(*args, sync_every=4)) is stopping_rules.DeferredMonitor
