"""The typed records of the clock and its window (corelib.experiments.inflation_clock_records) and
their JSON form: the recorded files read into them and write back byte for byte."""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil

import numpy as np
import pytest

from acebook.runner import chapter_parameters
from corelib.experiments import inflation_clock, inflation_clock_arms, inflation_clock_pairs, paper_scale
from corelib.experiments.inflation_clock_records import (
    ClockRun,
    Curve,
    Window,
    WindowArmRun,
    WindowCurve,
    as_window,
    clock_runs_from_json,
    clock_runs_to_json,
)
from corelib.experiments.modular_records import Snapshot
from corelib.recorded import RECORDED_DIR
from corelib.results import load_json, save_json

BOOK = "inflation_clock_book"
PAPER_WINDOW = "inflation_clock_window_paper"


def _book_params() -> inflation_clock.ClockParams:
    return inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))


@pytest.mark.parametrize("cls", [ClockRun, Curve, Window, WindowArmRun, WindowCurve])
def test_every_field_is_documented_with_its_meaning(cls):
    doc = inspect.getdoc(cls)
    documented = doc.split("Attributes:")[1]
    for field in dataclasses.fields(cls):
        assert f"\n{field.name}: " in f"\n{documented.replace('    ', '')}", (cls.__name__, field.name)
    assert cls.__dataclass_params__.frozen


def test_the_functions_return_the_typed_records():
    returns = {
        inflation_clock_pairs.run_clock: "dict[str, ClockRun]",
        inflation_clock_pairs.curves: "dict[str, Curve]",
        inflation_clock_pairs.recorded_run: "ClockRun | None",
        inflation_clock_pairs.end_means: "EndState",
        inflation_clock_arms.run_window: "Window",
        inflation_clock_arms.window_curves: "dict[str, WindowCurve]",
    }
    for fn, annotation in returns.items():
        assert inspect.signature(fn).return_annotation == annotation, fn.__name__
    for name in ("ClockRun", "Curve", "Window", "WindowArmRun", "WindowCurve", "WINDOW_ARMS", "run_clock"):
        assert hasattr(inflation_clock, name), name  # importable where the chapter's names are
    assert inflation_clock_arms.WINDOW_ARMS == inflation_clock.WINDOW_ARMS


@pytest.mark.parametrize(
    ("name", "read", "write"),
    [
        (f"{BOOK}/runs.json", clock_runs_from_json, clock_runs_to_json),
        (f"{BOOK}/window.json", Window.from_json, Window.to_json),
        (f"{PAPER_WINDOW}/window.json", Window.from_json, Window.to_json),  # its histories kept apart
    ],
)
def test_a_recorded_file_reads_typed_and_writes_back_byte_identical(tmp_path, name, read, write):
    stored = load_json(RECORDED_DIR / name)
    typed = read(stored)
    save_json(tmp_path / "again.json", write(typed), compact=True)
    assert (tmp_path / "again.json").read_bytes() == (RECORDED_DIR / name).read_bytes()
    runs = typed.values() if isinstance(typed, dict) else typed.arms.values()
    for run in runs:
        assert run.records and all(isinstance(r, Snapshot) for r in run.records)
        assert [r.epoch for r in run.records] == sorted(r.epoch for r in run.records)


def test_the_committed_book_record_is_typed_and_its_compact_form_is_its_files():
    record = paper_scale.recorded_clock(_book_params())
    assert record is not None, f"recorded/{BOOK} does not hold the chapter's book settings"
    runs, window = record["runs"], record["window"]
    assert all(isinstance(r, ClockRun) and isinstance(r.steps, int) for r in runs.values())
    assert isinstance(window, Window) and isinstance(window.grok_epoch, int)
    assert all(isinstance(a, WindowArmRun) and a.history is not None for a in window.arms.values())
    assert window.arms["kept"].branch is None and window.arms["removed"].branch == window.grok_epoch
    kept = inflation_clock.compact(runs, window)
    for part in ("runs", "window"):
        again = json.dumps(kept[part], sort_keys=True, separators=(",", ":")).encode()
        assert again == (RECORDED_DIR / BOOK / f"{part}.json").read_bytes(), part
    # code written against the JSON form reads the typed record alike
    first = window["arms"]["kept"]["records"][0]
    assert first["epoch"] == window.arms["kept"].records[0].epoch == 0
    with pytest.raises(KeyError, match="did you mean 'records'"):
        window.arms["kept"]["record"]


def test_the_paper_window_is_read_with_its_histories():
    rec = paper_scale.recorded_window()
    assert rec is not None, f"recorded/{PAPER_WINDOW} is missing: restore it from git"
    window = rec["window"]
    assert isinstance(window, Window) and set(window.arms) == set(inflation_clock.WINDOW_ARMS)
    for arm in window.arms.values():
        assert set(arm.history) == {"epoch", "loss", "train_acc", "test_acc"}
        assert arm.history["epoch"][-1] == arm.records[-1].epoch


def _misspell(tree: dict, key: str, wrong: str) -> dict:
    return {(wrong if k == key else k): v for k, v in tree.items()}


def test_a_misspelt_key_is_refused_naming_the_field_and_the_fix():
    window = load_json(RECORDED_DIR / BOOK / "window.json")
    with pytest.raises(ValueError, match=r"unknown key 'grok_epch': did you mean 'grok_epoch'\?.*git checkout"):
        Window.from_json(_misspell(window, "grok_epoch", "grok_epch"))
    arms = {**window["arms"], "removed": _misspell(window["arms"]["removed"], "records", "recrods")}
    with pytest.raises(ValueError, match=r"arm \(removed\) has the unknown key 'recrods': did you mean 'records'"):
        Window.from_json({**window, "arms": arms})
    arms = _misspell(window["arms"], "anneal_short", "anneal_shrt")
    with pytest.raises(ValueError, match="unknown arm 'anneal_shrt': did you mean 'anneal_short'"):
        Window.from_json({**window, "arms": arms})
    runs = load_json(RECORDED_DIR / BOOK / "runs.json")
    label = next(iter(runs))
    with pytest.raises(ValueError, match=r"clock run has the unknown key 'step': did you mean 'steps'\?.*git checkout"):
        clock_runs_from_json({**runs, label: _misspell(runs[label], "steps", "step")})
    with pytest.raises(ValueError, match=r"has steps = 2\.5, which is not a whole number >= 1.*restore it from git"):
        clock_runs_from_json({**runs, label: {**runs[label], "steps": 2.5}})
    with pytest.raises(ValueError, match="lacks 'wd'"):
        clock_runs_from_json({label: {k: v for k, v in runs[label].items() if k != "wd"}})
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1"):
        Window.from_json({**window, "format": 2})


def test_a_misspelt_key_in_a_recorded_file_fails_where_the_record_is_read(tmp_path):
    root = tmp_path / "recorded"
    shutil.copytree(RECORDED_DIR / BOOK, root / BOOK)
    window = load_json(root / BOOK / "window.json")
    save_json(root / BOOK / "window.json", {**window, "arms": _misspell(window["arms"], "kept", "kep")}, compact=True)
    with pytest.raises(ValueError, match="unknown arm 'kep': did you mean 'kept'"):
        paper_scale.recorded_clock(_book_params(), root, ("book",))


def test_a_window_in_its_json_form_is_read_as_one_and_misspelt_keys_are_named():
    window = {
        "grok_epoch": 2,
        "lr": 0.01,
        "wd": 1.0,
        "arms": {"kept": {"branch": None, "records": [{"epoch": 0, "models": []}], "history": None}},
    }
    typed = as_window(window)
    assert typed.grok_epoch == 2 and typed.arms["kept"].records == window["arms"]["kept"]["records"]
    assert as_window(typed) is typed
    misspelt = {"kept": _misspell(window["arms"]["kept"], "branch", "brnch")}
    with pytest.raises(ValueError, match="unknown key 'brnch': did you mean 'branch'"):
        inflation_clock.window_curves({**window, "arms": misspelt})


def test_curves_compare_element_by_element_with_nan_equal():
    a = Curve(np.arange(3), np.arange(3) * 0.1, np.array([[1.0, np.nan]] * 3), np.ones(3), np.full(3, np.nan), None)
    b = dataclasses.replace(a, values=a.values.copy(), sem=a.sem.copy())
    assert a == b and a != dataclasses.replace(a, grok=2)
    assert a != dataclasses.replace(a, mean=np.zeros(3)) and a != dataclasses.replace(a, epochs=np.arange(4))
    assert a["values"] is a.values
