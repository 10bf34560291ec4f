"""The typed records of the agreement layer sweep and the stored analysis's JSON form
(corelib.experiments.subject_verb_agreement_records).

``tests/stored_records/sva_analysis_format1.json`` is an ``analysis.json`` written by the version
before the records were typed (the tiny random Llama, 15 prompts per number, sweep mode flip): it
must load unchanged and be written back byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from conftest import STORED_RECORDS, edited
from corelib.ace import Core
from corelib.experiments import subject_verb_agreement
from corelib.experiments.subject_verb_agreement_layers import core_of
from corelib.experiments.subject_verb_agreement_records import (
    InterventionMargins,
    LayerCores,
    LayerSweepAnalysis,
    StoredCore,
)
from corelib.lm import load_model
from corelib.results import save_json
from corelib.tasks.sva import AGREEMENT_READOUT, make_dataset, vocabulary

STORED = STORED_RECORDS / "sva_analysis_format1.json"


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random-llama", "cpu", readout=AGREEMENT_READOUT, vocabulary=vocabulary())


def test_an_analysis_stored_by_the_previous_version_loads_and_writes_back_byte_identical(stored, tmp_path):
    analysis = LayerSweepAnalysis.from_json(stored)
    assert isinstance(analysis.core, StoredCore) and analysis.layers == tuple(stored["layers"])
    assert analysis.margins["flip"] == tuple(stored["margins"]["flip"]) and analysis.auc == stored["auc"]
    save_json(tmp_path / "analysis.json", analysis.to_json())
    assert (tmp_path / "analysis.json").read_bytes() == STORED.read_bytes()
    # the steering reads the same core from the record as from its JSON form
    typed, plain = core_of(analysis), core_of(stored)
    assert isinstance(typed, Core) and typed.basis.shape == (analysis.d_model, 1)
    for field in ("basis", "mean", "singular_values"):
        np.testing.assert_array_equal(getattr(typed, field), getattr(plain, field))


@pytest.mark.parametrize(
    "path,wrong",
    [(("wilcoxon_p",), "wilcoxon_P"), (("chosen_layer",), "chosen_layers"), (("core", "basis"), "bais")],
)
def test_a_misspelt_key_is_refused_naming_the_field_meant_and_the_fix(stored, path, wrong):
    with pytest.raises(ValueError, match=re.escape(f"unknown key {wrong!r}: did you mean {path[-1]!r}?")) as err:
        LayerSweepAnalysis.from_json(edited(stored, path, rename=wrong))
    assert "Correct the record" in str(err.value)


@pytest.mark.parametrize(
    "path,value,message",
    [
        (("auc", "flip"), 2.0, "auc = "),
        (("n_params",), 1.5, "n_params = 1.5"),
        (("plural",), [2] * 15, "plural = "),
        (("coords",), [0.1] * 14, "coords = 14, which is not one value per test prompt (15)"),
        (("sweep_auc", "flip"), [0.5], "sweep_auc['flip'] = 1, which is not one value per swept layer (2)"),
        (("chosen_layer",), 5, "chosen_layer = 5, which is not one of [0, 1]"),
        (("core", "mean"), [0.0], "mean = [0.0], which is not of the basis's length"),
    ],
)
def test_a_damaged_value_is_refused_naming_its_field(stored, path, value, message):
    with pytest.raises(ValueError, match=re.escape(message) + ".*the record is damaged; delete the run folder's"):
        LayerSweepAnalysis.from_json(edited(stored, path, value=value))


def test_a_missing_key_and_a_later_format_are_refused_with_the_fix(stored):
    del stored["scores"]
    with pytest.raises(ValueError, match="lacks 'scores': the record is incomplete; delete the run folder's"):
        LayerSweepAnalysis.from_json(stored)
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1: update corelib"):
        LayerSweepAnalysis.from_json({**json.loads(STORED.read_text()), "format": 2})


@pytest.mark.parametrize("record", [LayerCores, InterventionMargins, StoredCore, LayerSweepAnalysis])
def test_every_field_is_documented(record):
    doc = (record.__doc__ or "").split("Attributes:")
    assert len(doc) == 2, f"{record.__name__} has no Attributes section"
    missing = [f.name for f in dataclasses.fields(record) if not re.search(rf"\b{f.name}\b", doc[1])]
    assert not missing, f"{record.__name__} does not document {missing}"


def test_the_sweep_returns_typed_records_that_old_code_still_reads(tiny):
    params = subject_verb_agreement.SVAParams(models=("tiny-random-llama",), n_per_number=15, sweep_modes=("flip",))
    ds = make_dataset(params.n_per_number, params.dataset_seed)
    analysis = subject_verb_agreement.analyse_model(tiny, ds, params, progress=False)
    assert isinstance(analysis, LayerSweepAnalysis)
    assert LayerSweepAnalysis.from_json(json.loads(json.dumps(analysis.to_json()))) == analysis
    assert analysis["auc"] is analysis.auc and set(analysis.auc) == {"baseline", "keep", "remove", "flip"}
    assert len(analysis.coords) == len(analysis.plural) == len(ds.test)
    with pytest.raises(KeyError, match="did you mean 'coords'"):
        analysis["coord"]

    prompts, _ = ds.split("test")
    cores = subject_verb_agreement.layer_cores(tiny, prompts, [1, 0], batch_size=7, progress=False)
    assert isinstance(cores, LayerCores) and list(cores) == [1, 0] and dict(cores.items())[0] is cores[0]
    with pytest.raises(KeyError, match=r"no core at layer 5: the swept layers are \[1, 0\]"):
        cores[5]
    m = subject_verb_agreement.intervened_margins(tiny, prompts, cores, {0: ("flip",)}, batch_size=7, progress=False)
    assert isinstance(m, InterventionMargins) and list(m.intervened) == [(0, "flip")]
    assert m[(0, "flip")] is m.intervened[(0, "flip")] and m["baseline"] is m.baseline
    assert m.baseline.shape == (len(prompts),) and m.acts[1].shape == (len(prompts), tiny.d_model)
    with pytest.raises(KeyError, match=r"no margins under \(1, 'flip'\): the interventions run are \[\(0, 'flip'\)\]"):
        m[(1, "flip")]
    more = subject_verb_agreement.intervened_margins(
        tiny, prompts, {1: cores[1]}, {1: ("keep",)}, batch_size=7, progress=False
    )
    both = m.merged(more)
    assert set(both.intervened) == {(0, "flip"), (1, "keep")} and (1, "keep") in both
    with pytest.raises(ValueError, match="same prompts"):
        m.merged(InterventionMargins(baseline=m.baseline[:3], acts={}, intervened={}))


def test_layer_cores_refuse_a_layer_twice():
    core = Core(np.eye(4)[:, :1], np.ones(4), np.zeros(4))
    with pytest.raises(ValueError, match="each layer once"):
        LayerCores((0, 0), (core, core))
