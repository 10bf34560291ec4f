"""The chapters' callers of the mixed stack: core inflation's two arms, the clock's pairs, the
window's arms and a sweep's conditions each train as one stack, and leave the very files (byte for
byte, wall times aside) that training them one after another leaves.

Bit identity across stacks of different sizes needs the matrix library to compute every model's
products alike whatever the batch of models; on one CPU thread it does, so these tests run on one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from corelib.experiments import inflation_clock, inflation_clock_arms, inflation_clock_pairs, modular_runs
from corelib.tasks.sweeps import (
    Condition,
    SweepConfig,
    SweepStats,
    run_condition,
    run_sweep,
    train_condition,
    train_conditions,
)
from tests.test_mixed_stack import _same_folder
from tests.test_sweeps import overlap_data

TINY = dict(
    p=11,
    seeds=(1, 2),
    epochs=6,
    long_epochs=8,
    branch_epoch=4,
    batch_size=32,
    d_model=16,
    n_heads=2,
    d_ff=32,
    snapshot_every=2,
    snapshot_every_late=4,
    late_after=6,
    eval_every=2,
)

# Three clocks of 2 steps an epoch (60 training pairs, batches of 32): 12, 6 and 4 epochs to tau 0.24.
TINY_CLOCK = dict(
    p=11,
    seeds=(1, 2),
    batch_size=32,
    d_model=16,
    n_heads=2,
    d_ff=32,
    eval_every=2,
    pairs=((1e-2, 1.0), (2e-2, 1.0), (1e-2, 3.0)),
    horizon=0.24,
    window_pair=(1e-2, 1.0),
    window_horizon=0.24,
    window_branch=0.08,
    anneal=(0.02, 0.06),
    late_removal=0.16,
    snapshot_unit=20,
)


# Bit for bit: on one thread a model is computed alike in stacks of any size.
pytestmark = pytest.mark.usefixtures("one_thread")


def _stacks(monkeypatch) -> list[list[str]]:
    """The run folders of each mixed stack trained from here on (a call of ``train_mixed`` each)."""
    calls: list[list[str]] = []
    real = modular_runs.train_mixed

    def spy(model_cfg, arms, *args, **kwargs):
        calls.append([a.run_dir.name for a in arms])
        return real(model_cfg, arms, *args, **kwargs)

    monkeypatch.setattr(modular_runs, "train_mixed", spy)
    return calls


def _same_tree(a: Path, b: Path) -> None:
    """Two results roots hold the same run folders, file for file (wall times aside)."""
    assert any(a.rglob("run.json")), f"nothing was trained under {a}"
    _same_folder(a, b)


def test_both_arms_of_core_inflation_train_as_one_stack_as_one_after_another(tmp_path, monkeypatch):
    p = modular_runs.ModularParams(**TINY)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "alone"))
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(p, arm, 8, progress=False)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "stacked"))
    stacks = _stacks(monkeypatch)
    folders = modular_runs.train_arms(p, 8, progress=False)
    assert stacks == [["wd", "branch_4_wd0"]]
    assert folders == {arm: modular_runs.arm_dir(p, arm) for arm in modular_runs.ARMS}
    assert modular_runs.history(p, "no_wd")["epoch"] == [5, 6, 7, 8]
    _same_tree(tmp_path / "stacked", tmp_path / "alone")
    # Extended from where each stands (as a live run leaves them: the first arm further on, alone).
    longer = replace(p, long_epochs=12)
    modular_runs.train_arm(longer, "wd", 10, progress=False)
    modular_runs.train_arms(longer, 12, progress=False)
    assert len(stacks) == 2 and len(stacks[1]) == 2
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "alone"))
    modular_runs.train_arm(longer, "wd", 10, progress=False)
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(longer, arm, 12, progress=False)
    _same_tree(tmp_path / "stacked", tmp_path / "alone")
    with pytest.raises(ValueError, match="starts at epoch 4; asked for 3"):
        modular_runs.train_arms(p, 3, progress=False)


def test_arms_of_other_models_or_data_are_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    for other in (replace(p, d_ff=64), replace(p, split_seed=7)):
        with pytest.raises(ValueError, match="another model or data .* call of its own"):
            modular_runs.train_together([(p, "wd", 4), (other, "wd", 4)], progress=False)
    assert not list(tmp_path.rglob("run.json"))  # refused before anything was trained


def _no_analysis(monkeypatch) -> None:
    """Training alone: the analyses read the snapshots the same way whichever path wrote them."""
    monkeypatch.setattr(modular_runs, "analyse_arm", lambda *a, **k: [])


def test_the_clocks_pairs_train_as_one_stack_as_one_after_another(tmp_path, monkeypatch):
    params = inflation_clock.ClockParams(**TINY_CLOCK)
    runs = [inflation_clock_pairs.pair_params(params, lr, wd) for lr, wd in params.pairs]
    assert sorted(mp.long_epochs for mp in runs) == [4, 6, 12]  # each pair stops at its own horizon
    _no_analysis(monkeypatch)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "alone"))
    for mp in runs:
        modular_runs.train_arm(mp, "wd", mp.long_epochs, progress=False)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "stacked"))
    stacks = _stacks(monkeypatch)
    out = inflation_clock_pairs.run_clock(params, progress=False)
    assert len(stacks) == 1 and len(stacks[0]) == 3
    assert [(v["lr"], v["wd"]) for v in out.values()] == list(params.pairs)
    _same_tree(tmp_path / "stacked", tmp_path / "alone")


def test_the_windows_arms_train_as_one_stack_as_one_after_another(tmp_path, monkeypatch):
    params = inflation_clock.ClockParams(**TINY_CLOCK)
    _no_analysis(monkeypatch)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "alone"))
    base = inflation_clock_arms.window_base(params)
    modular_runs.train_arm(base, "wd", base.long_epochs, progress=False)
    branched = inflation_clock_arms.window_arms(params, 4)
    for mp, arm in branched.values():
        modular_runs.train_arm(mp, arm, mp.long_epochs, progress=False)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "stacked"))
    stacks = _stacks(monkeypatch)
    window = inflation_clock_arms.run_window(params, progress=False)
    assert [len(s) for s in stacks] == [5]  # the kept run is trained by train_arm, before the branch is known
    assert window["grok_epoch"] == 4
    assert {n: a["branch"] for n, a in window["arms"].items()} == {
        "kept": None, "restarted": 4, "removed": 4, "anneal_short": 4, "anneal_long": 4, "removed_late": 8,
    }  # fmt: skip
    assert window["arms"]["removed_late"]["history"]["epoch"][-1] == 12
    _same_tree(tmp_path / "stacked", tmp_path / "alone")


SWEEP = dict(d_model=16, n_heads=2, d_ff=32, lr=1e-2)


@pytest.mark.parametrize("batch_size", [None, 32], ids=["full batch", "minibatches"])
@pytest.mark.parametrize("dropout", [0.0, pytest.param(0.1, marks=pytest.mark.slow)], ids=["no dropout", "dropout"])
def test_a_sweeps_conditions_of_one_modulus_train_as_one_stack_as_alone(batch_size, dropout):
    threshold = 0.7 if dropout else 0.9  # with dropout, 0.9 takes several times the steps to test the same
    cfg = SweepConfig(**SWEEP, threshold=threshold, patience_epochs=1, max_epochs=150, dropout=dropout)
    conds = [Condition(p=11, weight_decay=w, batch_size=batch_size) for w in (0.5, 1.0, 3.0)]
    seeds = {conds[0]: (1, 2, 3), conds[1]: (2, 4), conds[2]: (1, 5, 6)}
    data = overlap_data(conds[0], cfg)
    stats = SweepStats()
    stacked = train_conditions(seeds, cfg, device="cpu", progress=False, data=data, stats=stats)
    alone_stats = SweepStats()
    for cond in conds:
        alone = train_condition(cond, seeds[cond], cfg, device="cpu", progress=False, data=data, stats=alone_stats)
        assert stacked[cond] == alone, cond.label()
    stops = sorted({r["stopped_at"] for recs in stacked.values() for r in recs})
    assert len(stops) >= 3  # seeds and conditions left the stack at several steps
    assert (stats.steps, stats.seed_steps, stats.eval_rows) != (0, 0, 0)
    assert stats.seed_steps == alone_stats.seed_steps and stats.eval_rows == alone_stats.eval_rows


def test_a_sweeps_stacked_conditions_leave_the_files_of_one_condition_at_a_time(tmp_path):
    cfg = SweepConfig(**SWEEP, threshold=0.12, patience_epochs=0, max_epochs=20, dropout=0.1)
    conds = [Condition(p=11, weight_decay=w) for w in (0.5, 1.0)] + [Condition(p=13, weight_decay=1.0)]
    for cond in conds:
        run_condition(cond, (1, 2), cfg, root=tmp_path / "alone", device="cpu", progress=False)
    table = run_sweep(conds, (1, 2), cfg, root=tmp_path / "stacked", n_jobs=1, progress=False)
    assert len(table) == 6
    _same_folder(tmp_path / "stacked", tmp_path / "alone")
    with pytest.raises(ValueError, match="share the modulus and batch size"):
        train_conditions({conds[0]: (1,), conds[2]: (1,)}, cfg, device="cpu", progress=False)


@pytest.mark.slow
def test_an_interrupted_stack_of_conditions_resumes_from_their_checkpoints(tmp_path, monkeypatch):
    import corelib.tasks.condition_stacks as condition_stacks

    cfg = SweepConfig(**SWEEP, threshold=0.9, patience_epochs=1, max_epochs=300, dropout=0.1)
    conds = [Condition(p=11, weight_decay=w) for w in (0.5, 1.0)]
    data = overlap_data(conds[0], cfg)
    seeds = {c: (1, 2, 3) for c in conds}
    reference = train_conditions(seeds, cfg, device="cpu", progress=False, data=data)
    interrupt_at = min(r["stopped_at"] for recs in reference.values() for r in recs) + 1  # one step an epoch

    class Killed(Exception):
        pass

    real_save = condition_stacks._save_checkpoint

    def save_then_die(path, trainer, epoch, *args):
        real_save(path, trainer, epoch, *args)
        if epoch == interrupt_at and path.parent.name == "b":
            raise Killed

    paths = {conds[0]: tmp_path / "a" / "checkpoint", conds[1]: tmp_path / "b" / "checkpoint"}
    stored: dict = {}
    kwargs = dict(device="cpu", progress=False, data=data, checkpoints=paths, checkpoint_every=1)
    monkeypatch.setattr(condition_stacks, "_save_checkpoint", save_then_die)
    record = lambda r: stored.update({(r["weight_decay"], r["seed"]): r})  # noqa: E731
    with pytest.raises(Killed):
        train_conditions(seeds, cfg, on_record=record, **kwargs)
    monkeypatch.setattr(condition_stacks, "_save_checkpoint", real_save)
    missing = {c: [s for s in seeds[c] if (c.weight_decay, s) not in stored] for c in conds}
    assert 0 < sum(map(len, missing.values())) < 6
    resumed = train_conditions({c: m for c, m in missing.items() if m}, cfg, on_record=record, **kwargs)
    for c, m in missing.items():
        assert resumed.get(c, []) == [r for r in reference[c] if r["seed"] in m]
    assert stored == {(c.weight_decay, r["seed"]): r for c in conds for r in reference[c]}
    assert not list(tmp_path.rglob("checkpoint*"))
