"""The Markov chapter's typed records and their stored JSON form (corelib.experiments.markov_chain_records).

``tests/stored_records/markov_summary_format1.json`` is a ``summary.json`` written by the version
before the records were typed (a 2-seed run of 4 epochs, d_model 16): it must load unchanged and
be written back byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from conftest import STORED_RECORDS, edited
from corelib.ace import Core
from corelib.experiments import markov_chain
from corelib.experiments.markov_chain_records import (
    Accuracies,
    MarkovModel,
    MarkovModelAnalysis,
    ModelPair,
    TrainingHistory,
)
from corelib.models import Transformer
from corelib.operators import spectrum_distance
from corelib.results import load_json, save_json
from corelib.tasks import markov

STORED = STORED_RECORDS / "markov_summary_format1.json"


def test_a_summary_stored_by_the_previous_version_loads_and_writes_back_byte_identical(stored, tmp_path):
    summary = markov_chain.MarkovSummary.from_json(stored)
    assert isinstance(summary.models[0], MarkovModel) and isinstance(summary.pairs[0], ModelPair)
    assert isinstance(summary.models[0].accuracy, Accuracies) and isinstance(summary.models[0].history, TrainingHistory)
    assert summary.models[1].accuracy.full == stored["models"][1]["accuracy"]["full"]
    assert summary.pairs[0].models == tuple(stored["pairs"][0]["pair"])
    save_json(tmp_path / "summary.json", summary.to_json())
    assert (tmp_path / "summary.json").read_bytes() == STORED.read_bytes()


def test_run_reads_a_stored_summary_without_training(stored, tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in stored["params"].items()}
    p = markov_chain.MarkovParams(**params)
    save_json(markov_chain.run_folder(p) / "summary.json", stored)
    monkeypatch.setattr(markov_chain, "train_stack", lambda *a, **k: pytest.fail("retrained"))
    summary = markov_chain.run(p, progress=False)
    assert summary == markov_chain.MarkovSummary.from_json(stored) and summary.params == p
    assert load_json(markov_chain.run_folder(p) / "summary.json") == stored  # nothing rewritten


@pytest.mark.parametrize(
    "path,wrong",
    [
        (("oracle_r2",), "oracle_R2"),
        (("params", "epochs"), "epoch"),
        (("models", 0, "singular_values"), "singular_value"),
        (("models", 1, "accuracy", "keep"), "keeep"),
        (("models", 0, "history", "test_acc"), "tests_acc"),
        (("pairs", 0, "weight_cosine_by_tensor"), "weight_cosines_by_tensor"),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_field_meant_and_the_fix(stored, path, wrong):
    with pytest.raises(ValueError, match=re.escape(f"unknown key {wrong!r}: did you mean {path[-1]!r}?")) as err:
        markov_chain.MarkovSummary.from_json(edited(stored, path, rename=wrong))
    assert "Correct the record" in str(err.value)


@pytest.mark.parametrize(
    "path,value,field",
    [
        (("bayes_accuracy",), 1.5, "bayes_accuracy"),
        (("models", 0, "rank"), True, "rank"),
        (("models", 0, "rank"), "3", "rank"),
        (("models", 0, "accuracy", "remove"), -0.1, "remove"),
        (("models", 0, "eigenvalues"), [[0.5, 0.0, 1.0]], "eigenvalues"),
        (("models", 0, "spectrum_error"), "small", "spectrum_error"),
        (("models", 0, "history", "loss"), [1.0], "lengths"),
        (("pairs", 0, "pair"), [1, 0], "pair"),
        (("chain_eigenvalues",), {"re": 1}, "chain_eigenvalues"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_its_field(stored, path, value, field):
    with pytest.raises(ValueError, match=rf"has {field} = .*which is not .*restore the file from git"):
        markov_chain.MarkovSummary.from_json(edited(stored, path, value=value))


def test_a_missing_key_and_a_later_format_are_refused_with_the_fix(stored):
    del stored["models"][0]["r2"]
    with pytest.raises(ValueError, match=r"lacks 'r2': the record is incomplete; run the chapter again"):
        markov_chain.MarkovSummary.from_json(stored)
    with pytest.raises(ValueError, match="in format 2; this corelib reads format 1: update corelib"):
        markov_chain.MarkovSummary.from_json({**stored, "format": 2})
    with pytest.raises(TypeError, match="JSON object"):
        markov_chain.MarkovSummary.from_json([stored])


def test_a_setting_added_since_falls_back_to_its_default(stored):
    del stored["params"]["jacobian_seed"]
    assert markov_chain.MarkovSummary.from_json(stored).params.jacobian_seed == 0


def test_records_answer_item_access_naming_a_misspelt_field(stored):
    summary = markov_chain.MarkovSummary.from_json(stored)
    model = summary.models[0]
    assert model["accuracy"]["full"] == model.accuracy.full and summary["pairs"][0]["cca"] == summary.pairs[0].cca
    with pytest.raises(KeyError, match="did you mean 'spectrum_error'"):
        model["spectrum_eror"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.rank = 4


@pytest.mark.parametrize(
    "record", [Accuracies, TrainingHistory, MarkovModel, ModelPair, MarkovModelAnalysis, markov_chain.MarkovSummary]
)
def test_every_field_is_documented(record):
    doc = record.__doc__ or ""
    assert "Attributes:" in doc
    missing = [
        f.name for f in dataclasses.fields(record) if not re.search(rf"\b{f.name}\b", doc.split("Attributes:")[1])
    ]
    assert not missing, f"{record.__name__} does not document {missing}"


def test_analyse_model_returns_the_typed_analysis_with_its_shapes():
    p = markov_chain.MarkovParams(n_train=20, n_test=20, seq_len=8, seeds=(0, 1), d_model=8, d_ff=16, n_jacobians=16)
    torch.manual_seed(0)
    model = Transformer(p.model_config()).eval()
    test = markov_chain.make_data(p)["test"]
    a = markov_chain.analyse_model(model, test, p)
    assert isinstance(a, MarkovModelAnalysis) and isinstance(a.core, Core) and isinstance(a.accuracy, Accuracies)
    r, n = a.core.rank, p.n_test * (p.seq_len - 1)
    assert a.coords.shape == (n, r) and np.shape(a.operator) == (r, r) and np.shape(a.eigenvalues) == (r,)
    assert all(0.0 <= getattr(a.accuracy, m) <= 1.0 for m in ("full", "keep", "remove"))
    assert a["accuracy"]["keep"] == a.accuracy.keep and a["core"] is a.core  # code written for the dict
    history = TrainingHistory(loss=(1.0,), train_acc=(0.5,), test_acc=(0.5,))
    chain = markov.chain_eigenvalues(p.chain)
    kept = a.summarised(7, history, chain)
    assert (kept.seed, kept.rank, kept.eigenvalues) == (7, r, tuple(complex(v) for v in a.eigenvalues))
    if r == len(chain):
        assert kept.spectrum_error == pytest.approx(spectrum_distance(a.eigenvalues, chain))
    else:
        assert kept.spectrum_error is None
    assert MarkovModel.from_json(json.loads(json.dumps(kept.to_json()))) == kept
