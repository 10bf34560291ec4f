"""Running a profile in pieces, and carrying an unfinished run to a fresh results root."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

from acebook import paper_runs
from conftest import copy_results
from corelib.experiments import modular_runs
from corelib.tasks.sweeps import condition_dir


def test_pieces_end_on_the_whole_runs_snapshots_and_at_the_horizon():
    params = modular_runs.ModularParams()  # snapshots every 100 epochs to 2000, then every 500
    job = paper_runs._Arm(params, "wd", 20000, "wd")
    assert paper_runs._horizons(job, 0, 500)[:5] == [500, 1000, 1500, 2000, 2500]
    assert paper_runs._horizons(job, 19000, 500) == [19500, 20000]
    assert paper_runs._horizons(job, 20000, 500) == []
    # 750 and 2250 are not snapshots (a piece ending there would add one the whole run lacks):
    # each piece ends at the first snapshot at or after a multiple of the chunk
    ends = paper_runs._horizons(job, 0, 750)
    assert ends[:6] == [800, 1500, 2500, 3000, 4000, 4500] and ends[-1] == 20000
    assert len(ends) == 27 and all(params.stack_config("wd", 20000).is_snapshot(e) for e in ends)
    short = paper_runs._Arm(params, "wd", 1234, "wd")  # a horizon between snapshots ends a piece
    assert paper_runs._horizons(short, 1000, 500) == [1234]


def _analyses(root, params):
    out = {}
    for arm in modular_runs.ARMS:
        for path in sorted(modular_runs.arm_dir(params, arm).glob("analysis_*/epoch_*.json")):
            out[(arm, path.name)] = json.loads(path.read_text())
    return out


def test_pieces_packed_and_unpacked_give_the_uninterrupted_run(tmp_path, monkeypatch):
    params = paper_runs.inflation_params("smoke")
    whole, first, second = tmp_path / "whole", tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("ACE_RESULTS_DIR", str(whole))
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
        modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    expected = _analyses(whole, params)

    monkeypatch.setenv("ACE_RESULTS_DIR", str(first))
    reached = paper_runs.advance_inflation("smoke", chunk=2, pieces=1)
    assert reached == {"wd": 2, "no_wd": 0}
    packed = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "packed")
    assert not list(packed.rglob("state_*.safetensors"))[1:], "only the committed state is packed"

    monkeypatch.setenv("ACE_RESULTS_DIR", str(second))
    paper_runs.unpack("core_inflation", packed)
    reached = paper_runs.advance_inflation("smoke", minutes=60, chunk=2)
    assert reached == {"wd": params.long_epochs, "no_wd": params.long_epochs}
    assert _analyses(second, params) == expected


@pytest.mark.usefixtures("one_thread")  # bit for bit: a model computed alike in stacks of any size
def test_both_arms_advanced_as_one_stack_give_the_uninterrupted_run(tmp_path, monkeypatch):
    params = paper_runs.inflation_params("smoke")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "whole"))
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
        modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    expected = _analyses(tmp_path / "whole", params)
    calls = []
    real = modular_runs.train_together
    monkeypatch.setattr(modular_runs, "train_together", lambda jobs, **k: calls.append(jobs) or real(jobs, **k))
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "stacked"))
    assert paper_runs.advance_inflation("smoke", chunk=2, pieces=1, together=True) == {"wd": 2, "no_wd": 0}
    paper_runs.advance_inflation("smoke", chunk=2, together=True)
    assert _analyses(tmp_path / "stacked", params) == expected
    arms_per_call = [tuple(arm for _, arm, _ in jobs) for jobs in calls]
    assert arms_per_call[0] == ("wd",) and ("wd", "no_wd") in arms_per_call  # the branch joined the stack
    assert all(len(jobs) <= 2 for jobs in calls)


def test_runs_are_stacked_by_default_where_the_models_train_on_a_gpu(monkeypatch):
    import torch

    for device, stacked in (("cpu", False), ("cuda", True), ("mps", True)):
        monkeypatch.setattr(paper_runs, "default_device", lambda d=device: torch.device(d))
        assert paper_runs.stacked_by_default() is stacked


def _state_epoch(params, arm) -> int:
    return json.loads((modular_runs.arm_dir(params, arm) / "progress.json").read_text())["epoch"]


def test_unpack_merges_keeping_the_state_that_is_further_on(tmp_path, monkeypatch):
    params = paper_runs.inflation_params("smoke")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "run"))
    paper_runs.advance_inflation("smoke", chunk=2, pieces=1)
    early = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "early")
    paper_runs.advance_inflation("smoke", chunk=2)
    late = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "late")
    paper_runs.unpack("core_inflation", early)  # onto a root further on: nothing goes back
    assert _state_epoch(params, "wd") == params.long_epochs
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "fresh"))
    paper_runs.unpack("core_inflation", early)
    assert _state_epoch(params, "wd") == 2
    paper_runs.unpack("core_inflation", late)  # further on: its state replaces the early one
    assert _state_epoch(params, "wd") == params.long_epochs
    for arm in modular_runs.ARMS:  # and everything reads back verified
        assert modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    # a pack never replaces one that got further than the results root
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "other"))
    paper_runs.advance_inflation("smoke", chunk=2, pieces=1)
    with pytest.raises(SystemExit, match="further along than the results root"):
        paper_runs.pack("core_inflation", "smoke", dest=late)


def test_a_piece_killed_between_training_and_analysis_is_carried_and_finished(tmp_path, monkeypatch):
    params = paper_runs.inflation_params("smoke")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "whole"))
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
    expected = {
        arm: modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False) for arm in modular_runs.ARMS
    }
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "killed"))
    modular_runs.train_arm(paper_runs._piece(params, 4), "wd", 4, progress=False)  # trained, not analysed
    packed = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "packed")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "resumed"))
    paper_runs.unpack("core_inflation", packed)
    paper_runs.advance_inflation("smoke", chunk=2)
    got = {arm: modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False) for arm in modular_runs.ARMS}
    assert got == expected


def test_unpack_without_a_pack_names_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="pack a run first"):
        paper_runs.unpack("core_inflation", tmp_path / "nothing")


def _sweep_records(root) -> dict[str, dict]:
    return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("seed_*.json"))}


@pytest.mark.slow
def test_sweeps_carried_in_pieces_give_the_records_of_one_run(tmp_path, monkeypatch, smoke_sweeps):
    whole, first, second = smoke_sweeps, tmp_path / "first", tmp_path / "second"  # whole: one uninterrupted run
    monkeypatch.setenv("ACE_RESULTS_DIR", str(copy_results(whole, tmp_path / "whole")))
    assert paper_runs.advance_sweeps("smoke") == (4, 4)  # its four conditions (one is in both sweeps), all done
    monkeypatch.setenv("ACE_RESULTS_DIR", str(first))
    assert paper_runs.advance_sweeps("smoke", pieces=1) == (1, 4)
    packed = paper_runs.pack("grokking_sweeps", "smoke", dest=tmp_path / "packed")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(second))
    paper_runs.unpack("grokking_sweeps", packed)
    assert paper_runs.advance_sweeps("smoke", pieces=2) == (4, 4)
    assert _sweep_records(second) == _sweep_records(whole)


@pytest.mark.slow
def test_a_run_carried_in_pieces_exports_the_record_of_an_uninterrupted_one(tmp_path, monkeypatch):
    from acebook import record
    from corelib.recorded import load_recorded

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "whole"))
    params = paper_runs.inflation_params("smoke")
    for arm in modular_runs.ARMS:  # uninterrupted
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
        modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False)
    whole = load_recorded("core_inflation", "smoke", record.export("core_inflation", "smoke", tmp_path / "rec1").parent)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "first"))
    paper_runs.advance_inflation("smoke", chunk=3, pieces=2)
    packed = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "packed")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "second"))  # a machine without the weight snapshots
    paper_runs.unpack("core_inflation", packed)
    paper_runs.advance_inflation("smoke", chunk=3)
    carried = load_recorded(
        "core_inflation", "smoke", record.export("core_inflation", "smoke", tmp_path / "rec2").parent
    )
    assert carried["arms"] == whole["arms"] and carried["history"] == whole["history"]


@pytest.mark.slow
def test_the_clock_chapters_runs_carried_in_pieces_give_its_uninterrupted_summary(tmp_path, monkeypatch):
    from corelib.experiments import inflation_clock

    params = paper_runs.clock_params("smoke")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "whole"))
    whole = inflation_clock.run(params, progress=False)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "first"))
    assert paper_runs.advance_clock("smoke", chunk=40, pieces=3) == 3
    packed = paper_runs.pack("inflation_clock", "smoke", dest=tmp_path / "packed")
    assert not list(packed.rglob("snapshots/epoch_000004.safetensors"))  # analysed snapshots stay behind
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "second"))
    paper_runs.unpack("inflation_clock", packed)
    paper_runs.advance_clock("smoke", chunk=40)
    carried = inflation_clock.run(params, progress=False)
    assert carried.clock.pairs == whole.clock.pairs
    assert carried.window == whole.window


@pytest.mark.slow
def test_the_window_alone_trains_no_pair_and_the_kept_run_only_to_its_last_branch(tmp_path, monkeypatch):
    from corelib.engine import snapshot_epochs
    from corelib.experiments import inflation_clock, modular_runs

    params = paper_runs.clock_params("smoke")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "whole"))
    whole = inflation_clock.run_window(params, progress=False)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "window"))
    paper_runs.advance_clock("smoke", chunk=40, window_only=True)
    base, late = inflation_clock.window_base(params), paper_runs._late_branch(params)
    assert max(snapshot_epochs(modular_runs.arm_dir(base, "wd"))) == late < base.long_epochs
    for lr, wd in params.pairs:
        mp = inflation_clock.pair_params(params, lr, wd)
        if (lr, wd) != params.window_pair:
            assert not modular_runs.arm_dir(mp, "wd").exists(), (lr, wd)
    for name, (mp, arm) in inflation_clock.window_arms(params, whole["grok_epoch"]).items():
        if arm != "wd":
            assert modular_runs.analyse_arm(mp, arm, mp.long_epochs, progress=False) == whole["arms"][name]["records"]


def test_a_fast_clock_is_advanced_in_many_pieces_too():
    from corelib.experiments import inflation_clock

    params = inflation_clock.ClockParams()
    for lr, wd in params.pairs:
        mp = inflation_clock.pair_params(params, lr, wd)
        step = round(500 * inflation_clock.REFERENCE_RATE / (lr * wd))  # as _advance scales the chunk
        ends = paper_runs._horizons(paper_runs._Arm(mp, "wd", mp.long_epochs, "x"), 0, step)
        assert len(ends) >= 30 and ends[-1] == mp.long_epochs, (lr, wd, ends[:5])
        assert all(mp.stack_config("wd", mp.long_epochs).is_snapshot(e) for e in ends)


@contextlib.contextmanager
def _held_elsewhere(hold):
    """Run the block while another thread holds the OS lock of ``hold()``, as another process would."""
    held, release = threading.Event(), threading.Event()

    def other():
        with hold():
            held.set()
            release.wait(60)

    thread = threading.Thread(target=other)
    thread.start()
    assert held.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join()


@pytest.mark.slow
def test_a_sweep_condition_another_process_runs_is_left_to_it(tmp_path, monkeypatch, capsys):
    from corelib.results import run_busy, run_lock

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    params, plans = paper_runs._sweep_plans("smoke")
    busy = condition_dir(*plans[0])
    assert run_busy(busy) is False
    with _held_elsewhere(lambda: run_lock(busy)):
        assert run_busy(busy) is True
        done, total = paper_runs.advance_sweeps("smoke")
    assert "is being run by another process; left to it" in capsys.readouterr().out
    twice = sum(condition_dir(*plan) == busy for plan in plans)  # a condition of both sweeps is listed twice
    assert (done, total) == (total - twice, total)  # every condition but the busy one
    assert run_busy(busy) is False
    assert paper_runs.advance_sweeps("smoke") == (total, total)


def test_a_clock_run_another_driver_advances_is_left_to_it(tmp_path, monkeypatch, capsys):
    from corelib.experiments import inflation_clock
    from corelib.results import claimed

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    params = paper_runs.clock_params("smoke")
    first, second = (inflation_clock.pair_params(params, lr, wd) for lr, wd in params.pairs[:2])
    jobs = [paper_runs._Arm(mp, "wd", mp.long_epochs, f"run {i}") for i, mp in enumerate((first, second))]
    with _held_elsewhere(lambda: claimed(modular_runs.arm_dir(first, "wd"))):
        with claimed(modular_runs.arm_dir(first, "wd")) as mine:
            assert mine is False
        paper_runs._advance(jobs, chunk=500, deadline=float("inf"), pieces=None)
    assert "run 0: advanced by another process; left to it" in capsys.readouterr().out
    assert paper_runs._trained(first, "wd") == 0
    assert paper_runs._trained(second, "wd") == second.long_epochs
    paper_runs._advance(jobs[:1], chunk=500, deadline=float("inf"), pieces=None)
    assert paper_runs._trained(first, "wd") == first.long_epochs


def test_a_precision_is_resolved_per_run_and_refused_where_emulated_before_any_work(tmp_path, monkeypatch):
    import corelib.precision as precision

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("ACE_DEVICE", "cpu")
    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: False)
    for name in paper_runs.EXPERIMENTS:
        with pytest.raises(SystemExit, match=rf"paper_runs advance {name}: precision 'bf16' would be emulated"):
            paper_runs.main(["advance", name, "--profile", "smoke", "--precision", "bf16"])
    assert not any(tmp_path.iterdir())  # refused before anything was written
    # auto is fp32 here and bf16 where native; the profile's own precision otherwise
    assert paper_runs._inflation_jobs("smoke", "auto")[0].params.precision == "fp32"
    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: True)
    assert paper_runs._inflation_jobs("smoke", "auto")[0].params.precision == "bf16"
    assert paper_runs._sweep_plans("smoke", "auto")[1][0][1].precision == "bf16"
    assert paper_runs._inflation_jobs("smoke")[0].params.precision == "fp32"
    folders = [modular_runs.arm_dir(paper_runs._inflation_jobs("smoke", p)[0].params, "wd") for p in ("bf16", "fp32")]
    assert folders[0] != folders[1]  # a run's precision is part of its identity


def test_a_variant_of_one_arm_is_packed_with_the_snapshot_the_other_arm_branches_from(tmp_path, monkeypatch):
    """``--dropout 0 --arm wd``: the variant trains in a folder of its own, packs into
    ``in_progress/core_inflation_dropout0`` by default, and keeps the branch snapshot, since the
    variant's other arm (not trained yet) would start from it."""
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))
    params = paper_runs.inflation_params("smoke")
    reached = paper_runs.advance_inflation("smoke", minutes=60, chunk=2, dropout=0.0, arms=("wd",))
    assert reached == {"wd": params.long_epochs}
    assert not modular_runs.arm_dir(params, "wd").joinpath("progress.json").exists()  # the profile's own run
    assert paper_runs.variant_name("core_inflation", 0.0) == "core_inflation_dropout0"
    packed = paper_runs.pack("core_inflation", "smoke", dest=tmp_path / "packed", dropout=0.0, arms=("wd",))
    assert [p.name for p in packed.rglob("snapshots/epoch_*.safetensors")] == [
        f"epoch_{params.branch_epoch:06d}.safetensors"
    ]
    assert not list(packed.rglob("no_wd")) and not list(packed.rglob("branch_*"))


def test_the_modulus_sweep_alone_at_other_moduli_is_advanced_and_packed_apart(tmp_path, monkeypatch, smoke_sweeps):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(copy_results(smoke_sweeps, tmp_path / "run")))
    assert paper_runs.variant_name("grokking_sweeps", None, [23, 29]) == "grokking_sweeps_moduli23-29"
    assert paper_runs.advance_sweeps("smoke", pieces=1, moduli=[11], p_weight_decay=0.5) == (1, 1)
    packed = paper_runs.pack("grokking_sweeps", "smoke", dest=tmp_path / "packed", moduli=[11], p_weight_decay=0.5)
    params = [json.loads(f.read_text()) for f in packed.rglob("params.json")]
    assert len(params) == 1 and params[0]["condition"]["p"] == 11 and params[0]["condition"]["weight_decay"] == 0.5
    with pytest.raises(SystemExit, match="--moduli and --p-weight-decay are for grokking_sweeps only"):
        paper_runs.main(["advance", "core_inflation", "--moduli", "23"])
