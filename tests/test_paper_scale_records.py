"""The records paper_scale reads back from recorded/, typed (corelib.experiments.paper_scale_records):
each committed record reads into its typed form unchanged, and a misspelt key is refused where it
is read, naming the field and the fix (restore it from git)."""

from __future__ import annotations

import shutil

import pytest
import torch

from acebook.runner import chapter_parameters
from corelib.experiments import inflation_clock, modular_runs, paper_scale
from corelib.experiments.inflation_clock_records import ClockRun, Window
from corelib.experiments.modular_addition import EmergenceSummary
from corelib.experiments.modular_records import Snapshot
from corelib.experiments.paper_scale_records import RecordedGpuTimes, inflation_parts
from corelib.recorded import RECORDED_DIR
from corelib.results import load_json, save_json

INFLATION = "core_inflation_paper"
GPU = RECORDED_DIR / "paper_profile_gpu.json"


def _misspell(tree: dict, key: str, wrong: str) -> dict:
    return {(wrong if k == key else k): v for k, v in tree.items()}


@pytest.fixture(scope="module")
def inflation() -> paper_scale.RecordedInflation:
    rec = paper_scale.recorded_inflation()
    assert rec is not None, f"recorded/{INFLATION} is missing: restore it from git"
    return rec


def test_the_committed_inflation_run_reads_typed(inflation):
    assert isinstance(inflation, paper_scale.RecordedInflation)
    assert set(inflation.arms) == set(modular_runs.ARMS) == set(inflation.histories)
    stored = load_json(RECORDED_DIR / INFLATION / "arms.json")
    for arm, snapshots in inflation.arms.items():
        assert all(isinstance(s, Snapshot) for s in snapshots)
        assert [s.to_json() for s in snapshots] == stored[arm]  # read unchanged
        history = inflation.histories[arm]
        assert history["epoch"][-1] == inflation.params.long_epochs and len(history["loss"]) == len(history["epoch"])
    # code written when the record was a dict reads it alike, and a misspelt field is named
    assert inflation["arms"]["wd"][0]["epoch"] == inflation.arms["wd"][0].epoch
    with pytest.raises(KeyError, match="did you mean 'histories'"):
        inflation["historys"]


def test_a_misspelt_arm_or_history_key_of_the_inflation_run_is_refused(tmp_path, inflation):
    arms = load_json(RECORDED_DIR / INFLATION / "arms.json")
    history = load_json(RECORDED_DIR / INFLATION / "history.json")
    fix = "restore it from git (`git checkout -- recorded/x`)"
    with pytest.raises(ValueError, match=r"history \(wd\) has the unknown key 'tst_acc': did you mean 'test_acc'\?"):
        inflation_parts(arms, {**history, "wd": _misspell(history["wd"], "test_acc", "tst_acc")}, ("wd", "no_wd"), fix)
    short = {**history["wd"], "loss": history["wd"]["loss"][:-1]}
    with pytest.raises(ValueError, match="has loss = .*one value per epoch.*git checkout"):
        inflation_parts(arms, {**history, "wd": short}, ("wd", "no_wd"), fix)
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1"):
        inflation_parts({**arms, "format": 2}, history, ("wd", "no_wd"), fix)
    # end to end: the folder's file, refused where the record is read, with the git command for it
    root = tmp_path / "recorded"
    shutil.copytree(RECORDED_DIR / INFLATION, root / INFLATION)
    save_json(root / INFLATION / "arms.json", _misspell(arms, "no_wd", "no_wdd"), compact=True)
    with pytest.raises(ValueError, match=rf"'no_wdd': did you mean 'no_wd'\?.*git checkout -- .*{INFLATION}"):
        paper_scale.recorded_inflation(root)


def test_the_emergence_and_the_agreement_are_typed(inflation):
    emergence = paper_scale.recorded_emergence(inflation)
    assert isinstance(emergence, paper_scale.RecordedEmergence) and isinstance(emergence.summary, EmergenceSummary)
    horizon = min(inflation.params.epochs, inflation.params.long_epochs)
    assert emergence.records and max(r.epoch for r in emergence.records) <= horizon
    assert emergence["summary"] is emergence.summary
    agree = paper_scale.inflation_agreement(inflation.params, {"wd": inflation.arms["wd"][:3]}, inflation)
    assert isinstance(agree, paper_scale.InflationAgreement)
    assert agree.comparable and agree.n_snapshots == {"wd": 3} and agree.differences == []  # the record against itself
    assert agree.agreement.identical and agree["comparable"]
    with pytest.raises(KeyError, match="did you mean 'differences'"):
        agree["diferences"]


def test_the_committed_clock_and_window_read_typed():
    params = inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))
    clock = paper_scale.recorded_clock(params)
    assert isinstance(clock, paper_scale.RecordedClock) and clock.params == params
    assert all(isinstance(r, ClockRun) for r in clock.runs.values()) and isinstance(clock.window, Window)
    assert clock["source"] == clock.source == paper_scale.source_label(clock.provenance)
    with pytest.raises(KeyError, match="did you mean 'runs'"):
        clock["run"]
    window = paper_scale.recorded_window()
    assert isinstance(window, paper_scale.RecordedWindow) and isinstance(window.window, Window)
    assert window.branch_run["seeds"] == list(window.params.seeds)
    assert window.branch_weights and all(isinstance(t, torch.Tensor) for t in window.branch_weights.values())
    with pytest.raises(KeyError, match="did you mean 'branch_weights'"):
        window["branch_weight"]


def test_a_misspelt_key_of_the_window_record_is_refused(tmp_path):
    name = "inflation_clock_window_paper"
    root = tmp_path / "recorded"
    shutil.copytree(RECORDED_DIR / name, root / name)
    stored = load_json(root / name / "window.json")
    save_json(root / name / "window.json", _misspell(stored, "grok_epoch", "grok_epch"), compact=True)
    with pytest.raises(ValueError, match=r"unknown key 'grok_epch': did you mean 'grok_epoch'\?.*git checkout"):
        paper_scale.recorded_window(root)


def test_the_committed_gpu_times_read_typed_and_write_back_unchanged():
    gpu = paper_scale.recorded_gpu_times()
    assert isinstance(gpu, RecordedGpuTimes) and gpu.device.endswith("(cuda)")
    stored = load_json(GPU)
    assert gpu.to_json() == stored
    assert [a.arm for a in gpu.core_inflation.arms] == ["wd", "no_wd"]
    assert gpu.totals_seconds.core_inflation == pytest.approx(sum(a.seconds for a in gpu.core_inflation.arms))
    assert gpu.rederived["core_inflation"].epochs > 0 and gpu.rederived["grokking_sweeps"].condition
    assert gpu["core_inflation"]["seconds_per_epoch"] == gpu.core_inflation.seconds_per_epoch
    # the optional parts may be absent (a run without --check or --rederive)
    bare = {**stored, "grokking_sweeps": _misspell(stored["grokking_sweeps"], "check", "x")}
    del bare["rederived"], bare["grokking_sweeps"]["x"]
    again = RecordedGpuTimes.from_json(bare)
    assert again.rederived is None and again.grokking_sweeps.check is None and again.to_json() == bare


def test_a_misspelt_key_of_the_gpu_times_is_refused_naming_the_field():
    stored = load_json(GPU)
    timing = _misspell(stored["core_inflation"], "seconds_per_epoch", "seconds_per_epch")
    with pytest.raises(
        ValueError,
        match=r"core_inflation has the unknown key 'seconds_per_epch': did you mean 'seconds_per_epoch'\?"
        r".*git checkout -- recorded/paper_profile_gpu.json",
    ):
        RecordedGpuTimes.from_json({**stored, "core_inflation": timing})
    arms = [dict(a) for a in stored["core_inflation"]["arms"]]
    arms[1]["epochs"] = 1.5
    with pytest.raises(ValueError, match=r"arms\[1\] has epochs = 1.5, which is not a number of epochs"):
        RecordedGpuTimes.from_json({**stored, "core_inflation": {**stored["core_inflation"], "arms": arms}})
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1"):
        RecordedGpuTimes.from_json({**stored, "format": 2})
