"""The chapter "ACE on your own model": tense prompts, the directions practitioners use (mean
difference, probe, top principal component), their interventions, the Hugging Face route by
module path, and the whole experiment on the tiny random Llama (seconds)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import optimize

from corelib import claims
from corelib.ace import Core, extract_from_model
from corelib.claims import FINDINGS
from corelib.experiments import own_model
from corelib.experiments.subject_verb_agreement_layers import auc
from corelib.interventions import MODES, intervention_hook
from corelib.lm import load_model
from corelib.models import resid_hook
from corelib.tasks import tense
from corelib.tasks.sva import ATTRACTORS, HEADS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random-llama", "cpu", readout=tense.TENSE_READOUT, vocabulary=tense.vocabulary())


@pytest.fixture(scope="module")
def tense_prompts():
    return list(tense.make_dataset(8, seed=1).prompts)


def labelled(n: int = 120, d: int = 6, shift: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two overlapping Gaussian classes with an offset and unequal scales per dimension."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(bool)
    x = rng.standard_normal((n, d)) * np.linspace(0.5, 3.0, d) + 10.0
    x[:, 0] += shift * np.where(y, 1.0, -1.0)
    return x, y


# --------------------------------------------------------------------------- tense prompts


def test_tense_prompts_come_in_pairs_that_share_their_half():
    ds = tense.make_dataset(30, seed=0)
    assert len(ds) == 60 and ds.past.sum() == 30
    assert sorted(np.r_[ds.train, ds.test].tolist()) == list(range(60))
    assert len(ds.train) == len(ds.test) == 30
    for p in np.unique(ds.phrase):
        rows = np.flatnonzero(ds.phrase == p)
        assert len(rows) == 2 and sorted(ds.past[rows].tolist()) == [0, 1]
        assert len({row in set(ds.train.tolist()) for row in rows}) == 1  # both in one half
        texts = [ds.prompts[r].split(", ", 1)[1] for r in rows]
        assert texts[0] == texts[1]  # the same noun phrase after both cues
    for prompt, past, plural in zip(ds.prompts, ds.past, ds.plural):
        cues = [c for c in tense.PAST_CUES + tense.PRESENT_CUES if prompt.startswith(c + " ")]
        assert len(cues) == 1 and cues[0] in (tense.PAST_CUES if past else tense.PRESENT_CUES), prompt
        words = prompt.replace(",", "").split()
        number, other = ("plural", "singular") if plural else ("singular", "plural")
        assert any(w in HEADS[number] for w in words) and any(w in ATTRACTORS[other] for w in words), prompt
    assert ds.plural.sum() == 30  # number is balanced


def test_tense_prompts_are_seeded_and_validated():
    assert tense.make_dataset(10, seed=2).prompts == tense.make_dataset(10, seed=2).prompts
    assert tense.make_dataset(10, seed=2).prompts != tense.make_dataset(10, seed=3).prompts
    assert tense.tense_prompt("Yesterday,", "The key to the door") == "Yesterday, the key to the door"
    with pytest.raises(ValueError, match="n_phrases"):
        tense.make_dataset(1)
    with pytest.raises(ValueError, match="split"):
        tense.make_dataset(4).split("validation")


def test_the_readout_is_past_minus_present():
    assert tense.TENSE_READOUT == {" was": 1.0, " were": 1.0, " is": -1.0, " are": -1.0}


# --------------------------------------------------------------------------- directions


def test_angle_is_zero_to_itself_and_blind_to_sign_and_scale():
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(7), rng.standard_normal(7)
    assert own_model.angle_deg(u, u) == pytest.approx(0.0, abs=1e-6)
    assert own_model.angle_deg(u, -3 * u) == pytest.approx(0.0, abs=1e-6)
    assert own_model.angle_deg(u, v) == pytest.approx(own_model.angle_deg(-v, 2 * u), abs=1e-9)
    cos = abs(u @ v) / np.linalg.norm(u) / np.linalg.norm(v)
    assert own_model.angle_deg(u, v) == pytest.approx(np.degrees(np.arccos(cos)), abs=1e-9)
    assert own_model.angle_deg([1, 0], [1, 1]) == pytest.approx(45.0)
    assert own_model.angle_deg([1, 0, 0], [0, 0, 2]) == pytest.approx(90.0)
    with pytest.raises(ValueError, match="non-zero"):
        own_model.angle_deg(np.zeros(3), u[:3])


def test_mean_difference_is_the_naive_one():
    x, y = labelled()
    pos = [row for row, label in zip(x, y) if label]
    neg = [row for row, label in zip(x, y) if not label]
    naive = sum(pos) / len(pos) - sum(neg) / len(neg)
    np.testing.assert_allclose(own_model.mean_difference(x, y), naive / np.sqrt(naive @ naive), atol=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        own_model.mean_difference(x, np.ones(len(x)))


def test_top_principal_component_is_the_covariances_top_eigenvector():
    x, _ = labelled(d=5)
    w, v = np.linalg.eigh(np.cov(x.T))
    assert own_model.angle_deg(own_model.top_principal_component(x), v[:, -1]) < 1e-6
    assert np.linalg.norm(own_model.top_principal_component(x)) == pytest.approx(1.0)


def test_orient_points_towards_the_positive_class():
    x, y = labelled()
    d = own_model.mean_difference(x, y)
    assert own_model.orient(-d, x, y) @ d == pytest.approx(1.0)
    z = x @ own_model.orient(-d, x, y)
    assert z[y].mean() > z[~y].mean()


def probe_loss(x: np.ndarray, y: np.ndarray, l2: float):
    """The probe's loss written again, as a function of (weights in activation units, bias), with its
    gradient: ``mean log(1 + exp(-s (w @ (x - mean) + b))) + l2 / 2 |scale w|^2``."""
    mean = x.mean(0)
    scale = np.sqrt(np.mean((x - mean) ** 2))
    xc, s = x - mean, np.where(y, 1.0, -1.0)

    def loss(theta):
        u = xc @ theta[:-1] + theta[-1]
        value = np.mean(np.logaddexp(0, -s * u)) + 0.5 * l2 * scale**2 * theta[:-1] @ theta[:-1]
        sig = 0.5 * (1 - np.tanh(0.5 * s * u))  # 1 / (1 + exp(s u)): d/du log(1 + exp(-s u)) = -s sig
        grad = np.r_[xc.T @ (-s * sig) / len(x) + l2 * scale**2 * theta[:-1], np.mean(-s * sig)]
        return value, grad

    return loss


def scipy_probe(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """scipy's minimiser of :func:`probe_loss`: (weights..., bias)."""
    res = optimize.minimize(probe_loss(x, y, l2), np.zeros(x.shape[1] + 1), jac=True, method="BFGS")
    return res.x


@pytest.mark.parametrize("l2", [1e-3, 1e-1, 10.0])
def test_probe_is_scipys_optimum_of_the_same_loss(l2):
    x, y = labelled(n=150, d=8, shift=0.8)
    probe = own_model.fit_probe(x, y, l2)
    ours = np.r_[probe.weights, probe.bias]
    loss = probe_loss(x, y, l2)
    assert np.abs(loss(ours)[1]).max() < 1e-8  # a stationary point of the convex loss: its minimum
    theirs = scipy_probe(x, y, l2)
    assert loss(ours)[0] <= loss(theirs)[0] + 1e-12
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5 * np.abs(theirs).max())
    assert probe.n_iter < 50 and probe.l2 == l2
    np.testing.assert_allclose(probe.logits(x), (x - x.mean(0)) @ probe.weights + probe.bias)


def test_probe_on_separable_data_needs_its_penalty():
    x, y = labelled(n=40, d=30, shift=3.0)  # more dimensions than examples: separable
    probe = own_model.fit_probe(x, y, 1e-4)
    assert np.mean((probe.logits(x) > 0) == y) == 1.0
    loss = probe_loss(x, y, 1e-4)
    ours = np.r_[probe.weights, probe.bias]
    assert np.abs(loss(ours)[1]).max() < 1e-8
    assert loss(ours)[0] <= loss(scipy_probe(x, y, 1e-4))[0] + 1e-12
    with pytest.raises(ValueError, match="positive"):
        own_model.fit_probe(x, y, 0.0)


def test_a_strongly_penalised_probe_is_the_mean_difference():
    """As l2 grows, w tends to minus the loss gradient at w = 0 (with the bias at its optimum
    there), which for centred activations is along the difference of the class means."""
    x, y = labelled(n=200, d=6)
    md = own_model.mean_difference(x, y)
    angles = [own_model.angle_deg(own_model.fit_probe(x, y, l2).direction, md) for l2 in (1e-2, 1.0, 1e2, 1e4)]
    assert angles[-1] < 0.05 and angles[0] > 1.0
    assert angles == sorted(angles, reverse=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_directions_hooks_are_its_core_operations_by_hand(mode):
    rng = np.random.default_rng(1)
    d, mu = rng.standard_normal(5), rng.standard_normal(5)
    core = own_model.direction_core(3 * d, mu, "test")
    q = d / np.linalg.norm(d)
    act = torch.tensor(rng.standard_normal((4, 3, 5)))
    out = intervention_hook(core, mode, centered=True, positions="last")(act, None)
    h = act[:, -1].numpy()
    along = np.outer((h - mu) @ q, q)
    expected = {"keep": mu + along, "remove": h - along, "flip": h - 2 * along}[mode]
    np.testing.assert_allclose(out[:, -1].numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(out[:, -1].numpy(), getattr(core, mode)(h, centered=True), atol=1e-12)
    assert torch.equal(out[:, :-1], act[:, :-1])  # other positions untouched
    assert core.rank == 1 and core.metadata == {"direction": "test"}


def test_r_squared_is_that_of_the_least_squares_line():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(50)
    y = 2 * x + rng.standard_normal(50)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    assert own_model.r_squared(x, y) == pytest.approx(1 - residual @ residual / np.sum((y - y.mean()) ** 2))
    assert own_model.r_squared(x, 3 - 5 * x) == pytest.approx(1.0)
    assert own_model.r_squared(np.ones(5), np.arange(5.0)) == 0.0


def test_layer_choice_and_indices():
    assert own_model.choose_layer([0, 3, 6], 0.9, [0.8, 0.1, 0.4]) == 3
    assert own_model.resolve_layer(-1, 30) == 29 and own_model.resolve_layer(4, 30) == 4
    with pytest.raises(ValueError, match="does not exist"):
        own_model.resolve_layer(30, 30)
    with pytest.raises(ValueError, match="one flip AUC per layer"):
        own_model.choose_layer([0, 1], 0.9, [0.5])


def test_params_are_checked_and_read_from_a_namespace():
    p = own_model.OwnModelParams.from_namespace({"models": ["a", "b"], "n_phrases": 4, "np": np})
    assert p.models == ("a", "b") and p.n_phrases == 4
    with pytest.raises(ValueError, match="positive"):
        own_model.OwnModelParams(probe_l2=0)
    with pytest.raises(ValueError, match="each once"):
        own_model.OwnModelParams(models=["a", "a"])


# --------------------------------------------------------------------------- the model routes


def test_tense_cores_equal_the_prefix_cache_route(tiny, tense_prompts):
    """The ten lines (extract_from_model on whole sequences, the read-out a logit difference) and
    the agreement chapter's route (prefix caches, the read-out's four rows) give the same cores."""
    lines = own_model.tense_cores(tiny, tense_prompts, [0, 1])
    acts, cached = own_model.train_pass(tiny, tense_prompts, [0, 1], batch_size=7)
    for layer in (0, 1):
        np.testing.assert_allclose(lines[layer].singular_values, cached[layer].singular_values, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(lines[layer].mean, acts[layer].mean(0), atol=1e-5)
        assert own_model.angle_deg(lines[layer].basis[:, 0], cached[layer].basis[:, 0]) < 0.01
        assert lines[layer].metadata["hook"] == resid_hook(layer)


def test_padded_inputs_end_every_prompt_at_the_last_position(tiny, tense_prompts):
    inputs = own_model.padded_inputs(tiny.tokenizer, tense_prompts)
    batch = tiny.tokenize(tense_prompts)  # the wrapper's tokens: <bos> first, left padding
    assert torch.equal(inputs["input_ids"], batch.input_ids)
    assert torch.equal(inputs["attention_mask"], batch.attention_mask)
    with torch.no_grad():
        padded = tiny.hf(**inputs).logits[:, -1]
        for i, prompt in enumerate(tense_prompts):
            alone = tiny.hf(torch.tensor([tiny.encode(prompt)])).logits[0, -1]
            torch.testing.assert_close(padded[i], alone, rtol=1e-4, atol=1e-5)
    assert inputs["position_ids"][inputs["attention_mask"] == 1].min() == 0
    with pytest.raises(TypeError, match="list"):
        own_model.padded_inputs(tiny.tokenizer, "one prompt")


def test_a_module_path_on_the_plain_model_gives_the_hook_points_core(tiny, tense_prompts):
    from corelib.targets import logit_difference

    margin = logit_difference(tiny.tokenizer, [" was", " were"], [" is", " are"])
    plain = extract_from_model(
        tiny.hf, "model.layers.1", own_model.padded_inputs(tiny.tokenizer, tense_prompts), margin
    )
    hooked = own_model.tense_cores(tiny, tense_prompts, [1])[1]
    np.testing.assert_allclose(plain.singular_values, hooked.singular_values, rtol=1e-5, atol=1e-9)
    assert own_model.angle_deg(plain.basis[:, 0], hooked.basis[:, 0]) < 0.01


def test_evaluated_interventions_equal_whole_forward_passes(tiny, tense_prompts):
    """evaluate_direction re-runs only the last token from the intervened layer on; the same
    intervention on a whole forward pass of the model gives the same margins and AUCs."""
    from corelib.experiments.subject_verb_agreement_layers import prefix_batches

    past = np.array([any(p.startswith(c) for c in tense.PAST_CUES) for p in tense_prompts])
    acts, _ = own_model.train_pass(tiny, tense_prompts, [0], batch_size=16)
    core = own_model.direction_core(own_model.mean_difference(acts[0], past), acts[0].mean(0))
    batches = prefix_batches(tiny, tense_prompts, batch_size=6, progress=False)
    got = own_model.evaluate_direction(tiny, tense_prompts, past, 0, core, batches=batches)
    batch = tiny.tokenize(tense_prompts)
    for mode in MODES:
        hooks = [(resid_hook(0), intervention_hook(core, mode, centered=True, positions="last"))]
        with torch.no_grad():
            whole = tiny.run_with_hooks(batch.input_ids, batch.attention_mask, return_type="readout", fwd_hooks=hooks)
        assert got[mode] == pytest.approx(auc(whole.numpy(), past))
    with torch.no_grad():
        clean = tiny(batch.input_ids, batch.attention_mask, return_type="readout").numpy()
    np.testing.assert_allclose(got["baseline"], clean, rtol=1e-4, atol=1e-5)
    z = (acts[0] - acts[0].mean(0)) @ core.basis[:, 0]
    np.testing.assert_allclose(got["coords"], z, atol=1e-4)
    assert got["read_auc"] == pytest.approx(auc(z, past))


# --------------------------------------------------------------------------- the chapter


def smoke_params() -> own_model.OwnModelParams:
    from acebook.project import profile_parameters

    return own_model.OwnModelParams.from_namespace(profile_parameters("own_model", "smoke"))


def test_run_on_the_tiny_model(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    params = smoke_params()
    assert params.tense_model == "tiny-random-llama" and params.models == ("tiny-random-llama",)
    summary = own_model.run(params, progress=False)
    t, (m,) = summary.tense, summary.agreement
    assert isinstance(summary, own_model.OwnModelSummary) and summary.params == params
    # the typed summary holds everything stored, under the stored names
    (tense_json,), (directions_json,) = tmp_path.rglob("tense.json"), tmp_path.rglob("directions.json")
    for path, cls in ((tense_json, own_model.TenseAnalysis), (directions_json, own_model.AgreementAnalysis)):
        stored = json.loads(path.read_text())
        assert set(stored) == {f.name for f in dataclasses.fields(cls)}, path.name
    assert set(json.loads(directions_json.read_text())["sweep"]) == {
        f.name for f in dataclasses.fields(own_model.LayerSweep)
    }
    assert t.layers == (0, 1) and t.chosen_layer in (0, 1)
    assert t.n_train == t.n_test == 12 and len(t.coords) == 12
    assert set(t.auc) == {"baseline", *MODES} and len(t.examples) == params.n_examples
    # the saved core is the chosen layer's core, and it loads back equal
    folder = own_model.tense_core_path(params)
    assert folder == tmp_path / t.core_folder
    core = Core.load(folder)
    ds = tense.make_dataset(params.n_phrases, params.tense_seed)
    again = own_model.tense_cores(tiny, ds.split("train")[0], [t.chosen_layer])[t.chosen_layer]
    np.testing.assert_allclose(core.basis, again.basis, atol=1e-9)
    np.testing.assert_allclose(
        core.singular_values, again.singular_values, rtol=1e-6, atol=1e-12 * again.singular_values[0]
    )
    np.testing.assert_allclose(core.mean, again.mean, atol=1e-9)
    assert core.metadata == t.core_metadata and core.metadata["hook"] == resid_hook(t.chosen_layer)
    # the directions: the ACE core is at 0 degrees from itself, every measure is a number
    assert list(m.directions) == list(own_model.DIRECTIONS)
    assert m.directions["ACE core"].angle_to_ace == pytest.approx(0.0, abs=1e-6)
    for d in m.directions.values():
        assert all(0 <= getattr(d, k) <= 1 for k in ("read_auc", "r2", *MODES))
        assert 0 <= d.angle_to_ace <= 90
    assert [r.l2 for r in m.probe_grid] == list(params.probe_l2_grid)
    # the layer sweep measured the chosen layer's ACE core and probe as the direction table did
    at = m.layers.index(m.layer)
    for key, name in (("ace", "ACE core"), ("probe", "probe")):
        for mode in ("remove", "flip"):
            assert getattr(m.sweep, f"{key}_{mode}")[at] == pytest.approx(getattr(m.directions[name], mode), abs=1e-12)
    assert m.sweep.probe_read[at] == pytest.approx(m.directions["probe"].read_auc, abs=1e-12)
    assert m.sweep.probe_angle[at] == pytest.approx(m.directions["probe"].angle_to_ace, abs=1e-6)
    assert m.baseline_auc == m.sweep.baseline
    assert 0 <= m.probe_accuracy <= 1
    values = own_model.glue_values(summary)
    texts = {"tense_model", "tense_core_folder", "ex_prompt"}  # names, not results
    assert all(isinstance(values[k], str) for k in texts)
    numbers = {k: v for k, v in values.items() if k not in texts}
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers.values()), numbers
    assert all(np.isfinite(list(numbers.values())))
    # a range over the models is glued as its two ends, each the measure of one model
    for key, name in (("ace", "ACE core"), ("md", "mean difference"), ("probe", "probe"), ("pc", "top PC")):
        assert values[f"{key}_remove_min"] == values[f"{key}_remove_max"] == m.directions[name].remove
        assert values[f"{key}_share_min"] == pytest.approx(own_model.removal_share(m, name), nan_ok=True)
    assert values["dir_base_min"] == values["dir_base_max"] == m.baseline_auc
    assert values["grid_strong_l2"] == max(params.probe_l2_grid) and values["grid_weak_l2"] == min(params.probe_l2_grid)
    assert list(own_model.directions_table(summary)["layer"].unique()) == [f"{m.layer + 1} of {m.n_layers}"]
    assert list(own_model.directions_table(summary).index.get_level_values("direction")) == list(own_model.DIRECTIONS)
    assert len(own_model.probe_table(summary)) == len(params.probe_l2_grid)
    assert len(own_model.tense_examples_table(summary)) == params.n_examples

    # the findings: every id is one of the chapter's, and the record takes them
    found = own_model.finding_values(summary)
    assert set(found) == {c.id for c in FINDINGS if c.chapter == "own_model"}
    claims.record("own_model", found, settings={}, root=tmp_path / "claims")

    # a second run reads everything from disk: no model is loaded
    def no_model(*args, **kwargs):
        raise AssertionError("the results should have been reused")

    monkeypatch.setattr(own_model, "load_model", no_model)
    assert own_model.run(params, progress=False) == summary


def test_every_glued_name_of_the_chapter_is_glued(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    text = (ROOT / "notebooks" / "own_model.py").read_text()
    used = set(re.findall(r"\{glue:text\}`([A-Za-z_0-9]+)", text))
    figures = set(re.findall(r"```\{glue:figure\} (\w+)", text))
    glued = set(re.findall(r'glue\("(\w+)"', text))
    values = own_model.glue_values(own_model.run(smoke_params(), progress=False))
    assert 'cost = chapter_cost("own_model")' in text  # the cost line's values come from the run times
    in_chapter = {"cost_machine", "cost_book", "cost_paper", "time_read", "time_total", "past_cues", "present_cues"}
    assert used - in_chapter <= set(values), sorted(used - in_chapter - set(values))
    assert '("past_cues", tense.PAST_CUES)' in text and '("present_cues",' in text
    assert figures <= glued and figures == {"fig_tense", "fig_directions"}


def test_the_chapters_defaults_are_the_book_profile():
    """The parameters cell holds the book's values (its profile entry is empty) and the parameters
    of the experiment default to the same values."""
    from acebook.project import profile_parameters
    from acebook.runner import notebook_parameters

    assert profile_parameters("own_model", "book") == {}
    cell = {k: v["default"] for k, v in notebook_parameters("own_model").items()}
    defaults = own_model.OwnModelParams()
    for name in own_model.OwnModelParams.__dataclass_fields__:
        value = eval(cell[name])  # the cell's literal
        expected = getattr(defaults, name)
        assert (tuple(value) if isinstance(value, list) else value) == expected, name


def _direction(read: float, keep: float, remove: float, flip: float, angle: float) -> dict:
    return {"read_auc": read, "r2": 0.5, "keep": keep, "remove": remove, "flip": flip, "angle_to_ace": angle}


def _fake_summary() -> SimpleNamespace:
    """A summary of two models with round numbers: what the findings read, written by hand."""
    model = {
        "model": "a",
        "n_layers": 8,
        "layers": [0, 3, 6, 7],
        "layer": 7,
        "baseline_auc": 0.9,
        "sweep": {
            "probe_read": [0.97, 0.98, 0.99, 0.96],
            "probe_flip": [0.88, 0.91, 0.2, 0.3],
            "ace_flip": [0.89, 0.87, 0.1, 0.05],
        },
        "directions": {
            "ACE core": _direction(0.95, 0.96, 0.2, 0.05, 0.0),
            "mean difference": _direction(0.93, 0.93, 0.5, 0.25, 30.0),
            "probe": _direction(0.98, 0.98, 0.8, 0.3, 40.0),
            "top PC": _direction(0.7, 0.7, 0.89, 0.88, 70.0),
        },
        "probe_grid": [
            {"l2": 100.0, "angle_to_mean_difference": 3.0, "remove": 0.5},
            {"l2": 1e-4, "angle_to_mean_difference": 40.0, "remove": 0.85},
        ],
    }
    other = {**model, "model": "b", "baseline_auc": 0.85}
    tense_auc = {"baseline": 0.86, "keep": 0.77, "remove": 0.64, "flip": 0.33}
    # the parts of an OwnModelSummary the findings read
    return SimpleNamespace(tense=SimpleNamespace(auc=tense_auc), agreement=[_namespace(model), _namespace(other)])


def _namespace(model: dict) -> SimpleNamespace:
    return SimpleNamespace(
        **{
            **model,
            "sweep": SimpleNamespace(**model["sweep"]),
            "directions": {name: SimpleNamespace(**d) for name, d in model["directions"].items()},
            "probe_grid": [SimpleNamespace(**r) for r in model["probe_grid"]],
        }
    )


def test_finding_values_are_the_quantities_the_findings_test():
    found = own_model.finding_values(_fake_summary())
    assert found["own.tense_flip_inverts"] == 0.33
    assert found["own.tense_keep_loses"] == pytest.approx(0.09)
    assert found["own.tense_remove_leaves"] == pytest.approx(0.14)
    assert found["own.ace_keep_sufficient"] == pytest.approx({"a": 0.06, "b": 0.11})
    assert found["own.ace_remove_largest"] == pytest.approx({"a": 0.3, "b": 0.3})  # mean difference 0.5 - 0.2
    assert found["own.ace_flip_largest"] == pytest.approx({"a": 0.2, "b": 0.2})  # mean difference 0.25 - 0.05
    assert found["own.md_closest"] == pytest.approx({"a": 10.0, "b": 10.0})  # probe 40 - mean difference 30
    assert found["own.probe_reads_best"] == pytest.approx({"a": 0.03, "b": 0.03})  # 0.98 - ACE 0.95
    assert found["own.probe_remove_share"] == pytest.approx({"a": 0.1 / 0.7, "b": 0.05 / 0.65})
    assert found["own.pc_remove_share"] == pytest.approx({"a": 0.01 / 0.7, "b": -0.04 / 0.65})
    assert found["own.probe_reads_everywhere"] == pytest.approx({"a": 0.96, "b": 0.96})
    # early layers: 1 and 4 of 8 (<= 75 % of the depth), not 7 and 8; the least flip minus the baseline
    assert found["own.early_flips_small"] == pytest.approx(0.87 - 0.9)
    assert found["own.strong_probe_is_md"] == {"a": 3.0, "b": 3.0}
    assert found["own.weak_probe_not_used_more"] == pytest.approx({"a": 0.35, "b": 0.35})
    statuses = {cid: claims.claim(cid).holds(v) for cid, v in found.items()}
    assert all(statuses.values()), statuses


def test_a_finding_that_is_not_measured_is_left_empty():
    summary = _fake_summary()
    for m in summary.agreement:
        m.layers, m.sweep = [7], SimpleNamespace(**{k: v[-1:] for k, v in vars(m.sweep).items()})  # the last layer only
    assert own_model.finding_values(summary)["own.early_flips_small"] == []
