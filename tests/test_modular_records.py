"""The typed snapshot records of the modular runs and their JSON form (corelib.experiments.modular_records)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from corelib.experiments import modular_runs
from corelib.experiments.modular_records import ModularAnalysis, Snapshot, snapshots_from_json
from corelib.recorded import RECORDED_DIR
from corelib.results import load_json, save_json

# The JSON keys of one model's analysis as the stored files and records have them (format 1).
STORED_KEYS = {
    "test_acc",
    "energy_rank",
    "necessary_rank",
    "sufficient_rank",
    "core_dim",
    "keep_acc",
    "remove_acc",
    "r2",
    "r2_heldout",
    "unit_fraction",
    "modes",
    "eigenvalues",
    "operator",
    "singular_values",
}

# Recorded files holding snapshot records, and how they were written (all compact).
RECORDED_FILES = (
    "core_inflation_paper/arms.json",
    "inflation_clock_book/runs.json",
    "inflation_clock_book/window.json",
    "inflation_clock_window_paper/window.json",
)


def _is_snapshot(tree) -> bool:
    return isinstance(tree, dict) and set(tree) == {"epoch", "models"}


def _through_records(tree, seen: list):
    """``tree`` with every snapshot record read as a :class:`Snapshot` and written back."""
    if _is_snapshot(tree):
        seen.append(Snapshot.from_json(tree))
        return seen[-1].to_json()
    if isinstance(tree, dict):
        return {k: _through_records(v, seen) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_through_records(v, seen) for v in tree]
    return tree


@pytest.mark.parametrize("name", RECORDED_FILES)
def test_recorded_records_load_unchanged_and_write_back_byte_identical(tmp_path, name):
    copy = tmp_path / "recorded"
    shutil.copytree(RECORDED_DIR, copy)
    stored = load_json(copy / name)
    seen: list[Snapshot] = []
    again = _through_records(stored, seen)
    assert seen, f"{name} holds no snapshot record"
    save_json(tmp_path / "again.json", again, compact=True)
    assert (tmp_path / "again.json").read_bytes() == (RECORDED_DIR / name).read_bytes()
    # the typed record gives the numbers the JSON holds
    first = next(t for t in _walk(stored) if _is_snapshot(t))
    assert seen[0].epoch == first["epoch"]
    assert [m.core_dim for m in seen[0].models] == [m["core_dim"] for m in first["models"]]
    assert [list(m.modes) for m in seen[0].models] == [m["modes"] for m in first["models"]]


def _walk(tree):
    yield tree
    for v in tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else ():
        yield from _walk(v)


def _model_json(**change) -> dict:
    arms = load_json(RECORDED_DIR / "core_inflation_paper" / "arms.json")
    return {**arms["wd"][-1]["models"][0], **change}


def test_the_operator_is_kept_only_where_the_record_has_it():
    with_op = _model_json()
    assert "operator" in with_op and ModularAnalysis.from_json(with_op).to_json() == with_op
    without = {k: v for k, v in with_op.items() if k != "operator"}
    record = ModularAnalysis.from_json(without)
    assert record.operator is None and record.to_json() == without
    assert ModularAnalysis.from_json(with_op).without_operator() == record
    assert set(with_op) == STORED_KEYS


def test_a_misspelt_or_missing_key_is_refused_naming_the_field():
    good = _model_json()
    bad = {("core_dm" if k == "core_dim" else k): v for k, v in good.items()}
    with pytest.raises(ValueError, match="unknown key 'core_dm': did you mean 'core_dim'"):
        ModularAnalysis.from_json(bad)
    with pytest.raises(ValueError, match="lacks 'r2_heldout'"):
        ModularAnalysis.from_json({k: v for k, v in good.items() if k != "r2_heldout"})
    with pytest.raises(ValueError, match="unknown key 'epcoh': did you mean 'epoch'"):
        Snapshot.from_json({"epcoh": 3, "models": [good]})
    with pytest.raises(ValueError, match="format 2.*update corelib"):
        Snapshot.from_json({"epoch": 3, "models": [good], "format": 2})
    with pytest.raises(TypeError, match="JSON object"):
        Snapshot.from_json([3, [good]])


def test_item_access_reads_the_fields_and_names_the_nearest_on_a_misspelling():
    snap = Snapshot.from_json({"epoch": 7, "models": [_model_json()]})
    model = snap.models[0]
    assert snap["epoch"] == 7 and snap["models"][0]["core_dim"] == model.core_dim
    assert model["modes"] == model.modes and model["necessary_rank"] == model.necessary_rank
    with pytest.raises(KeyError, match="no field 'core_dm': did you mean 'core_dim'"):
        model["core_dm"]
    with pytest.raises(KeyError, match="did you mean 'models'"):
        snap["model"]


def test_records_are_frozen_and_hold_nothing_mutable():
    snap = Snapshot.from_json({"epoch": 7, "models": [_model_json()]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.models[0].core_dim = 3
    assert isinstance(snap.models, tuple) and isinstance(snap.models[0].eigenvalues[0], tuple)
    assert hash(snap.without_operators()) == hash(Snapshot.from_json(snap.without_operators().to_json()))


def test_without_operators_gives_the_same_json_for_records_and_their_json():
    arms = load_json(RECORDED_DIR / "core_inflation_paper" / "arms.json")
    tail = arms["wd"][-2:]
    expected = [
        {"epoch": r["epoch"], "models": [{k: v for k, v in m.items() if k != "operator"} for m in r["models"]]}
        for r in tail
    ]
    assert modular_runs.without_operators(tail) == expected
    assert modular_runs.without_operators(snapshots_from_json(tail)) == expected


TINY = dict(
    p=11,
    seeds=(1, 2),
    epochs=4,
    long_epochs=4,
    branch_epoch=2,
    batch_size=32,
    d_model=16,
    n_heads=2,
    d_ff=32,
    snapshot_every=2,
    snapshot_every_late=2,
    late_after=2,
    eval_every=2,
    n_jacobians=4,
)


def test_an_analysed_arm_is_typed_and_stored_in_the_json_form(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    modular_runs.train_arm(p, "wd", 4, progress=False)
    records = modular_runs.analyse_arm(p, "wd", 4, progress=False)
    assert [r.epoch for r in records] == [0, 2, 4]
    assert all(isinstance(m, ModularAnalysis) and m.operator is not None for r in records for m in r.models)
    for r in records:
        path = modular_runs.analysis_path(p, "wd", r.epoch)
        stored = json.loads(path.read_text())
        assert stored == r.to_json() and all(set(m) == STORED_KEYS for m in stored["models"])
        save_json(tmp_path / "again.json", r.to_json())
        assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert modular_runs.analyse_arm(p, "wd", 4, progress=False) == records  # read back from the store


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("core_dim", True),  # a bool is not a dimension
        ("core_dim", 2.0),
        ("energy_rank", 0),
        ("necessary_rank", "3"),
        ("test_acc", float("nan")),
        ("keep_acc", 1.5),
        ("remove_acc", None),
        ("r2", float("inf")),
        ("r2_heldout", "nan"),
        ("unit_fraction", -0.1),
        ("modes", [1, 2.5]),
        ("modes", 3),
        ("eigenvalues", [0.5, 0.1]),  # a pair, not a list of pairs
        ("eigenvalues", [[0.5, 0.1, 0.0]]),
        ("singular_values", [[1.0]]),
        ("singular_values", [1.0, float("nan")]),
        ("operator", [1.0, 2.0]),
        ("operator", [[1.0, 2.0]]),  # not square
    ],
)
def test_a_value_of_the_wrong_type_or_range_is_refused_naming_its_field(field, value):
    with pytest.raises(ValueError, match=rf"has {field} = .*restore it from git"):
        ModularAnalysis.from_json(_model_json(**{field: value}))


def test_the_documented_special_values_are_read():
    record = ModularAnalysis.from_json(_model_json(r2_heldout=float("nan"), necessary_rank=None, modes=[]))
    assert record.necessary_rank is None and record.modes == ()
    assert ModularAnalysis.from_json(_model_json(r2=float("-inf"))).r2 == float("-inf")  # targets without variance
    for epoch in (True, -1, 2.0):
        with pytest.raises(ValueError, match=r"snapshot has epoch = .*restore it from git"):
            Snapshot.from_json({"epoch": epoch, "models": [_model_json()]})
    with pytest.raises(ValueError, match=r"snapshot has models = .*a list of analyses"):
        Snapshot.from_json({"epoch": 1, "models": _model_json()})
