"""The typed records of the chapter "ACE on your own model" and their stored JSON forms
(corelib.experiments.own_model_records).

``tests/stored_records/own_model_tense_format1.json`` and ``own_model_directions_format1.json`` are
a ``tense.json`` and a ``directions.json`` written by the version before the records were typed
(the book's smoke profile: the tiny random Llama): they must load unchanged and be written back
byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from conftest import STORED_RECORDS, edited, undocumented
from corelib.experiments import own_model, own_model_directions
from corelib.experiments.own_model_records import (
    AgreementAnalysis,
    DirectionMeasures,
    LayerSweep,
    ProbeGridRow,
    RunInfo,
    TenseAnalysis,
)
from corelib.experiments.subject_verb_agreement_steering_records import FlipExample
from corelib.results import save_json

TENSE = STORED_RECORDS / "own_model_tense_format1.json"
DIRECTIONS = STORED_RECORDS / "own_model_directions_format1.json"
RECORDS = [RunInfo, TenseAnalysis, LayerSweep, DirectionMeasures, ProbeGridRow, AgreementAnalysis]


@pytest.mark.parametrize("cls,path", [(TenseAnalysis, TENSE), (AgreementAnalysis, DIRECTIONS)])
def test_a_record_stored_by_the_previous_version_loads_and_writes_back_byte_identical(cls, path, tmp_path):
    stored = json.loads(path.read_text())
    record = cls.from_json(stored)
    save_json(tmp_path / "again.json", record.to_json())
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert record.layers == tuple(stored["layers"]) and record["model"] == stored["model"]


def test_the_stored_records_parts_are_typed_and_read_as_the_dicts_they_were():
    t = TenseAnalysis.from_json(json.loads(TENSE.read_text()))
    stored = json.loads(TENSE.read_text())
    assert all(isinstance(e, FlipExample) for e in t.examples)
    assert t["examples"][0]["flip"] == stored["examples"][0]["flip"] and t.auc == stored["auc"]
    assert t.core_metadata == stored["core_metadata"] and t.sweep_auc["flip"] == tuple(stored["sweep_auc"]["flip"])
    a = AgreementAnalysis.from_json(json.loads(DIRECTIONS.read_text()))
    assert isinstance(a.sweep, LayerSweep) and list(a.directions) == list(own_model.DIRECTIONS)
    assert isinstance(a.directions["probe"], DirectionMeasures) and isinstance(a.probe_grid[0], ProbeGridRow)
    assert a["directions"]["probe"]["remove"] == a.directions["probe"].remove
    assert set(a.sweep) == {f.name for f in dataclasses.fields(LayerSweep)}  # iterates over its fields
    with pytest.raises(KeyError, match="did you mean 'probe_grid'"):
        a["probe_grids"]


@pytest.mark.parametrize(
    "cls,path,key,wrong",
    [
        (TenseAnalysis, TENSE, ("energy_share",), "energy_shar"),
        (TenseAnalysis, TENSE, ("examples", 0, "baseline"), "basline"),
        (AgreementAnalysis, DIRECTIONS, ("probe_iterations",), "probe_iteration"),
        (AgreementAnalysis, DIRECTIONS, ("sweep", "probe_angle"), "probe_angles"),
        (AgreementAnalysis, DIRECTIONS, ("directions", "top PC", "angle_to_ace"), "angle_to_ACE"),
        (AgreementAnalysis, DIRECTIONS, ("probe_grid", 1, "angle_to_mean_difference"), "angle_to_mean_diff"),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_field_meant_and_the_fix(cls, path, key, wrong):
    stored = edited(json.loads(path.read_text()), key, rename=wrong)
    with pytest.raises(ValueError, match=re.escape(f"unknown key {wrong!r}: did you mean {key[-1]!r}?")) as err:
        cls.from_json(stored)
    assert "Correct the record" in str(err.value)


@pytest.mark.parametrize(
    "cls,path,key,value,message",
    [
        (TenseAnalysis, TENSE, ("auc", "flip"), 1.5, "auc = "),
        (TenseAnalysis, TENSE, ("past",), [2] * 12, "past = "),
        (TenseAnalysis, TENSE, ("coords",), [0.1] * 11, "coords = 11, which is not one value per test prompt (12)"),
        (TenseAnalysis, TENSE, ("sweep_auc", "keep"), [0.5], "sweep_auc['keep'] = 1, which is not one value per swept"),
        (TenseAnalysis, TENSE, ("chosen_layer",), 4, "chosen_layer = 4, which is not one of the swept layers [0, 1]"),
        (AgreementAnalysis, DIRECTIONS, ("layer_chosen",), 1, "layer_chosen = 1, which is not true or false"),
        (AgreementAnalysis, DIRECTIONS, ("directions", "probe", "angle_to_ace"), 91.0, "angle_to_ace = 91.0"),
        (AgreementAnalysis, DIRECTIONS, ("sweep", "probe_flip"), [0.5], "probe_flip = 1, which is not one value per"),
        (AgreementAnalysis, DIRECTIONS, ("probe_grid", 0, "l2"), 0.0, "l2 = 0.0, which is not a penalty"),
        (AgreementAnalysis, DIRECTIONS, ("plural",), [0, 1], "plural = 2, which is not one value per test prompt (10)"),
    ],
)
def test_a_damaged_value_is_refused_naming_its_field(cls, path, key, value, message):
    stored = edited(json.loads(path.read_text()), key, value=value)
    with pytest.raises(ValueError, match=re.escape(message) + ".*the record is damaged; delete the run folder's"):
        cls.from_json(stored)


@pytest.mark.parametrize("cls,path", [(TenseAnalysis, TENSE), (AgreementAnalysis, DIRECTIONS)])
def test_a_missing_key_and_a_later_format_are_refused_with_the_fix(cls, path):
    stored = json.loads(path.read_text())
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1: update corelib"):
        cls.from_json({**stored, "format": 2})
    assert cls.from_json({**stored, "format": 1}) == cls.from_json(stored)
    del stored["n_test"]
    with pytest.raises(ValueError, match="lacks 'n_test': the record is incomplete; delete the run folder's"):
        cls.from_json(stored)
    with pytest.raises(TypeError, match="is a JSON object"):
        cls.from_json([stored])


@pytest.mark.parametrize("record", RECORDS)
def test_every_field_is_documented_and_read(record):
    assert not undocumented(record), f"{record.__name__} does not document {undocumented(record)}"
    names = [f.name for f in dataclasses.fields(record)]
    assert list(record.READERS) == names, f"{record.__name__} reads {list(record.READERS)}"


def test_the_analyses_parts_are_typed_and_a_mode_not_asked_for_is_none():
    """On the tiny random Llama: tense_cores is a mapping layer -> core, run_info a RunInfo, and a
    direction measured for one mode holds None for the others and for its angle."""
    import numpy as np

    from corelib.experiments.subject_verb_agreement_layers import prefix_batches
    from corelib.experiments.subject_verb_agreement_records import LayerCores
    from corelib.lm import load_model
    from corelib.tasks import tense

    lm = load_model("tiny-random-llama", "cpu", readout=tense.TENSE_READOUT, vocabulary=tense.vocabulary())
    prompts = list(tense.make_dataset(6, seed=2).prompts)
    past = np.arange(len(prompts)) % 2 == 0
    cores = own_model.tense_cores(lm, prompts, [1, 0])
    assert isinstance(cores, LayerCores) and list(cores) == [1, 0] and cores[0].basis.shape == (lm.d_model, 1)
    info = own_model.run_info(lm, prompts[:4], prompts, [0, 1])
    assert isinstance(info, RunInfo) and (info.n_train, info.n_test, info.layers) == (4, len(prompts), (0, 1))
    batches = prefix_batches(lm, prompts, batch_size=5, progress=False)
    got = own_model.evaluate_direction(lm, prompts, past, 1, cores[1], batches=batches, modes=("remove",))
    assert isinstance(got, DirectionMeasures) and got.keep is None and got.flip is None and got.angle_to_ace is None
    assert 0.0 <= got.remove <= 1.0 and len(got.coords) == len(got.baseline) == len(prompts)
    assert own_model_directions.evaluate_direction is own_model.evaluate_direction  # importable where it was
