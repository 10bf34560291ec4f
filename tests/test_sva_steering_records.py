"""The typed record of a steering run and its stored JSON form
(corelib.experiments.subject_verb_agreement_steering_records).

``tests/stored_records/sva_steering_format1.json`` is a ``steering.json`` written by the version
before the record was typed (the tiny random Llama, two steering prompts, one control, two samples
each, gates 0, 0.5 and 1): it must load unchanged and be written back byte for byte.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from conftest import STORED_RECORDS, edited, undocumented
from corelib.experiments import subject_verb_agreement
from corelib.experiments.subject_verb_agreement_steering_records import (
    FlipExample,
    GateRun,
    GenerationPair,
    InversionCounts,
    OtherWords,
    SampledInversion,
    SampledPair,
    SampledWordInversion,
    SteeringRun,
    StoredGeneration,
    WordInversionCounts,
)
from corelib.results import save_json
from corelib.steering import Generation, inversion_stats
from corelib.tasks.sva import AGREEMENT_VERBS

STORED = STORED_RECORDS / "sva_steering_format1.json"
RECORDS = [
    StoredGeneration,
    GenerationPair,
    SampledPair,
    GateRun,
    InversionCounts,
    WordInversionCounts,
    SampledInversion,
    SampledWordInversion,
    OtherWords,
    FlipExample,
    SteeringRun,
]


def test_a_run_stored_by_the_previous_version_loads_and_writes_back_byte_identical(stored, tmp_path):
    run = SteeringRun.from_json(stored)
    save_json(tmp_path / "steering.json", run.to_json())
    assert (tmp_path / "steering.json").read_bytes() == STORED.read_bytes()
    assert isinstance(run.greedy[0].steered, StoredGeneration) and set(run.gate_sweep) == {"0.0", "0.5", "1.0"}
    # its counts are those of its generations, counted again from the record
    steered = [pair.steered.generation() for pair in run.sampled]
    assert run.sampled_inversion.steered.to_json() == inversion_stats(steered, AGREEMENT_VERBS)
    assert steered[0] == Generation(**stored["sampled"][0]["steered"])


def test_old_code_reads_the_run_as_the_dict_it_was(stored):
    run = SteeringRun.from_json(stored)
    assert run["inversion"]["steered_steps"] == stored["inversion"]["steered_steps"]
    assert [pair["seed"] for pair in run["sampled"]] == [pair["seed"] for pair in stored["sampled"]]
    assert run["flip_demo"][0]["flip"] == stored["flip_demo"][0]["flip"]
    assert set(run["other_words"]) == {"words", "greedy", "sampled"}
    typed, plain = Generation(**run.control[0].base), Generation(**stored["control"][0]["base"])  # ** reads a record
    assert (typed.text, list(typed.tokens)) == (plain.text, plain.tokens)
    # the chapter's tables read the typed run as they read its JSON form
    pd_typed, pd_plain = subject_verb_agreement.gate_table(run), subject_verb_agreement.gate_table(stored)
    assert pd_typed.equals(pd_plain)
    assert subject_verb_agreement.control_summary(run).table.equals(
        subject_verb_agreement.control_summary(stored).table
    )
    with pytest.raises(KeyError, match="did you mean 'gate_sweep'"):
        run["gate_swep"]


@pytest.mark.parametrize(
    "path,wrong",
    [
        (("n_control",), "n_controls"),
        (("sampled_inversion", "unsteered"), "unsteerd"),
        (("greedy", 0, "steered", "clean_margin"), "clean_margins"),
        (("gate_sweep", "0.5", "control"), "controls"),
        (("other_words", "sampled", "steered", "rate"), "rates"),
        (("flip_demo", 1, "prompt"), "promt"),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_field_meant_and_the_fix(stored, path, wrong):
    with pytest.raises(ValueError, match=re.escape(f"unknown key {wrong!r}: did you mean {path[-1]!r}?")) as err:
        SteeringRun.from_json(edited(stored, path, rename=wrong))
    assert "Correct the record" in str(err.value)


@pytest.mark.parametrize(
    "path,value,message",
    [
        (("gate",), 1.5, "gate = 1.5, which is not a gate threshold"),
        (("inversion", "rate"), -0.1, "rate = -0.1, which is not a rate"),
        (("sampled", 0, "seed"), "0", "seed = '0', which is not a seed"),
        (("greedy", 0, "base", "verb_mass"), [0.5], "verb_mass = 1, which is not one value per generated token (4)"),
        (("control", 0, "steered", "gated"), [1, 0, 0], "gated = [1, 0, 0], which is not a list of true/false"),
        (("gate_sweep", "0.5", "greedy"), [], "gate_sweep['0.5'].greedy = 0, which is not one value per steering"),
        (("n_control",), 2, "n_control = 2, which is not the number of control pairs (1)"),
    ],
)
def test_a_damaged_value_is_refused_naming_its_field(stored, path, value, message):
    with pytest.raises(ValueError, match=re.escape(message) + ".*the record is damaged; delete the steering run's"):
        SteeringRun.from_json(edited(stored, path, value=value))


def test_a_gate_sweep_keyed_by_no_threshold_a_missing_key_and_a_later_format_are_refused(stored):
    sweep = stored["gate_sweep"]
    with pytest.raises(ValueError, match="gate_sweep = 'high', which is not keyed by gate thresholds"):
        SteeringRun.from_json({**stored, "gate_sweep": {**sweep, "high": sweep["0.5"]}})
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1: update corelib"):
        SteeringRun.from_json({**stored, "format": 2})
    del stored["flip_demo"]
    with pytest.raises(ValueError, match="lacks 'flip_demo': the record is incomplete; delete the steering run's"):
        SteeringRun.from_json(stored)


@pytest.mark.parametrize("record", RECORDS)
def test_every_field_is_documented_and_read(record):
    assert not undocumented(record), f"{record.__name__} does not document {undocumented(record)}"
    names = [f.name for f in dataclasses.fields(record)]
    assert list(record.READERS) == names, f"{record.__name__} reads {list(record.READERS)}"
