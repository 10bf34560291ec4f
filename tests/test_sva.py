"""Subject-verb agreement: prompts, metrics, the language-model wrapper, Jacobians,
interventions, steering and the chapter's experiment, on a tiny random Llama (seconds).

The real pretrained models are tested in tests/test_sva_models.py.
"""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from corelib import plots
from corelib.ace import Core, extract
from corelib.experiments import subject_verb_agreement
from corelib.interventions import intervention_hook
from corelib.lm import OFFLINE_MODELS, _NotRun, load_model
from corelib.models import resid_hook
from corelib.steering import (
    Generation,
    SteeringConfig,
    generate,
    generate_batch,
    generation_margin,
    inversion_stats,
    steer_hook,
    word_inversion_stats,
)
from corelib.tasks.sva import (
    AGREEMENT_READOUT,
    AGREEMENT_VERBS,
    ATTRACTORS,
    FLIP_DEMO_PROMPTS,
    HEADS,
    TEMPLATES,
    make_dataset,
    make_prompt,
    vocabulary,
)


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random-llama", "cpu", readout=AGREEMENT_READOUT, vocabulary=vocabulary())


@pytest.fixture(scope="module")
def prompts():
    return list(make_dataset(20, seed=3).prompts[:12])


# --------------------------------------------------------------------------- dataset


def test_dataset_is_the_papers_design():
    ds = make_dataset()
    assert len(ds) == 1200 and ds.plural.sum() == 600
    assert sorted(np.concatenate([ds.train, ds.test]).tolist()) == list(range(1200))
    assert len(ds.train) == len(ds.test) == 600
    assert {t: ds.template.count(t) for t in TEMPLATES} == {t: 240 for t in TEMPLATES}
    assert ds.past.sum() == 600
    assert all(p.startswith("In the past, ") for p, past in zip(ds.prompts, ds.past) if past)
    for prompt, plural in zip(ds.prompts, ds.plural):
        words = prompt.replace(",", "").split()
        number, other = ("plural", "singular") if plural else ("singular", "plural")
        assert any(w in HEADS[number] for w in words), prompt
        assert not any(w in HEADS[other] for w in words), prompt
        assert any(w in ATTRACTORS[other] for w in words), prompt  # attractor of the other number


def test_dataset_is_seeded():
    assert make_dataset(50, seed=1).prompts == make_dataset(50, seed=1).prompts
    assert make_dataset(50, seed=1).prompts != make_dataset(50, seed=2).prompts


def test_templates():
    assert make_prompt("base", "key", "cabinets") == "The key to the cabinets"
    assert make_prompt("there", "key", "boxes", connector="near the") == "There key near the boxes"
    assert make_prompt("relative", "key", "cabinets", relative="that guards the") == "The key that guards the cabinets"
    assert (
        make_prompt("front", "keys", "door", past=True) == "In the past, in this ancient kingdom, the keys to the door"
    )
    with pytest.raises(ValueError, match="unknown template 'middle'.*base, front"):
        make_prompt("middle", "key", "door")


# --------------------------------------------------------------------------- metrics


def test_auc_known_answers():
    y = np.array([0, 0, 1, 1])
    assert subject_verb_agreement.auc([0, 1, 2, 3], y) == 1.0
    assert subject_verb_agreement.auc([3, 2, 1, 0], y) == 0.0
    assert subject_verb_agreement.auc([1, 1, 1, 1], y) == 0.5
    assert subject_verb_agreement.auc([0, 2, 1, 3], y) == 0.75


def test_auc_matches_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 4, 101), rng.integers(0, 2, 101).astype(bool)
    diff = s[y][:, None] - s[~y][None, :]
    assert subject_verb_agreement.auc(s, y) == pytest.approx((diff > 0).mean() + 0.5 * (diff == 0).mean(), abs=1e-12)
    assert subject_verb_agreement.auc(-s, y) == pytest.approx(1 - subject_verb_agreement.auc(s, y), abs=1e-12)


def test_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both positive"):
        subject_verb_agreement.auc([1.0, 2.0], [1, 1])


def test_alignment_and_agreement_scores():
    x = np.linspace(-2, 2, 50)
    assert subject_verb_agreement.alignment(x, 3 * x + 1) == pytest.approx({"spearman": 1.0, "pearson": 1.0})
    nonlinear = subject_verb_agreement.alignment(x, np.exp(3 * x))
    assert nonlinear["spearman"] == pytest.approx(1.0) and nonlinear["pearson"] < 0.9
    assert subject_verb_agreement.alignment(x, -x)["pearson"] == pytest.approx(-1.0)
    assert subject_verb_agreement.agreement_scores([2.0, 2.0, -1.0], [1, 0, 0]).tolist() == [2.0, -2.0, 1.0]
    with pytest.raises(ValueError, match="same prompts"):
        subject_verb_agreement.alignment(x, x[:-1])


# --------------------------------------------------------------------------- the wrapper


def test_left_padding_gives_each_prompt_its_own_margin(tiny, prompts):
    batch = tiny.tokenize(prompts)
    assert (batch.attention_mask[:, -1] == 1).all()  # last real token at the last position
    assert batch.input_ids[0, 0] == tiny.prefix_id or batch.attention_mask[0, 0] == 0
    with torch.no_grad():
        together = tiny(batch.input_ids, batch.attention_mask, return_type="readout")
        alone = torch.cat(
            [tiny(b.input_ids, b.attention_mask, return_type="readout") for b in (tiny.tokenize([p]) for p in prompts)]
        )
    assert torch.allclose(together, alone, atol=1e-5)
    assert together.std() > 1e-3  # not a constant: the test would be empty otherwise


def test_margin_uses_the_four_verb_logits(tiny, prompts):
    batch = tiny.tokenize(prompts)
    with torch.no_grad():
        logits = tiny(batch.input_ids, batch.attention_mask)[:, -1]
        margin = tiny(batch.input_ids, batch.attention_mask, return_type="readout")
    v = tiny.readout_ids
    expected = logits[:, v[" are"]] + logits[:, v[" were"]] - logits[:, v[" is"]] - logits[:, v[" was"]]
    assert torch.allclose(margin, expected, atol=1e-5)


def test_the_readout_is_the_tasks_choice(prompts):
    plain = load_model("tiny-random-llama", "cpu", vocabulary=vocabulary())  # the model knows no task
    batch = plain.tokenize(prompts)
    with pytest.raises(ValueError, match="no read-out.*AGREEMENT_READOUT"):
        plain(batch.input_ids, batch.attention_mask, return_type="readout")
    plain = load_model("tiny-random-llama", "cpu", readout={" has": 2.0, " have": -0.5}, vocabulary=vocabulary())
    with torch.no_grad():
        logits = plain(batch.input_ids, batch.attention_mask)[:, -1]
        readout = plain(batch.input_ids, batch.attention_mask, return_type="readout")
    v = plain.readout_ids
    assert torch.allclose(readout, 2.0 * logits[:, v[" has"]] - 0.5 * logits[:, v[" have"]], atol=1e-5)
    with pytest.raises(ValueError, match="single token"):
        load_model("tiny-random-llama", "cpu", readout={" is are": 1.0}, vocabulary=vocabulary())


def test_cached_last_token_equals_full_forward_and_restores_the_cache(tiny, prompts):
    batch = tiny.tokenize(prompts)
    cache = tiny.prefix_cache(batch)
    length = cache.get_seq_length()
    with torch.no_grad():
        full = tiny(batch.input_ids, batch.attention_mask, return_type="readout")
        first = tiny.last_token(batch, cache)
        second = tiny.last_token(batch, cache)
    assert cache.get_seq_length() == length
    assert torch.allclose(first, full, atol=1e-5) and torch.equal(first, second)


def _shift(act, hook):
    out = act.clone()
    out[:, -1] += 0.5
    return out


def test_start_at_layer_runs_only_later_layers_from_the_given_residual(tiny, prompts):
    batch = tiny.tokenize(prompts)
    cache = tiny.prefix_cache(batch)
    lengths = [layer.get_seq_length() for layer in cache.layers]
    resid = torch.randn(len(prompts), 1, tiny.d_model, generator=torch.Generator().manual_seed(0))

    def replace(act, hook):  # the full pass with the residual after layer 0 replaced by `resid`
        return torch.cat([act[:, :-1], resid], dim=1)

    calls = []
    spy = tiny.layers[0].register_forward_hook(lambda *args: calls.append(1))
    try:
        with torch.no_grad():
            full = tiny.last_token(batch, cache, fwd_hooks=[(resid_hook(0), replace)])
            assert len(calls) == 1
            rest = tiny.last_token(batch, cache, start_at_layer=1, resid=resid)
            shifted = tiny.last_token(
                batch, cache, fwd_hooks=[(resid_hook(0), _shift)], start_at_layer=1, resid=resid
            )  # a hook on the injected residual still fires
            readout = tiny.last_token(batch, cache, start_at_layer=2, resid=resid)  # final norm + read-out
    finally:
        spy.remove()
    assert len(calls) == 1  # layer 0 did not run with start_at_layer
    assert torch.allclose(rest, full, atol=1e-5)
    assert not torch.allclose(shifted, rest, atol=1e-3)
    assert torch.allclose(readout, tiny.readout_from_final(tiny.final_norm(resid[:, 0])), atol=1e-5)
    assert [layer.get_seq_length() for layer in cache.layers] == lengths
    assert not any(isinstance(m, _NotRun) for m in tiny.layers)  # the real layers are back


def test_start_at_layer_errors(tiny, prompts):
    batch = tiny.tokenize(prompts[:3])
    cache = tiny.prefix_cache(batch)
    h = torch.zeros(3, 1, tiny.d_model)
    with pytest.raises(ValueError, match="go together"):
        tiny.last_token(batch, cache, start_at_layer=1)
    with pytest.raises(ValueError, match=r"start_at_layer must be in \[1, 2\]"):
        tiny.last_token(batch, cache, start_at_layer=0, resid=h)
    with pytest.raises(ValueError, match="resid must have shape"):
        tiny.last_token(batch, cache, start_at_layer=1, resid=h[:2])
    with pytest.raises(ValueError, match="do not run"):
        tiny.last_token(batch, cache, start_at_layer=2, resid=h, fwd_hooks=[(resid_hook(0), _shift)])


def test_hook_names_follow_transformer_lens(tiny, prompts):
    batch = tiny.tokenize(prompts[:3])
    _, cache = tiny.run_with_cache(batch.input_ids, batch.attention_mask, names_filter=resid_hook(1))
    assert list(cache.keys()) == ["blocks.1.hook_resid_post"]
    h = cache["blocks.1.hook_resid_post"]
    with torch.no_grad():
        final = tiny(batch.input_ids, batch.attention_mask, return_type="hidden")
    assert torch.allclose(tiny.final_norm(h), final, atol=1e-5)  # last layer, then the final norm


def test_an_unknown_model_fails_at_once_offline_and_a_local_folder_never_asks_the_hub(tmp_path, monkeypatch):
    from corelib import lm

    monkeypatch.setattr(lm, "_hub_reachable", lambda timeout=2.0: False)
    started = time.perf_counter()
    with pytest.raises(ValueError, match="(?s)hub cannot be reached.*offline models are available.*gemma3-270m"):
        load_model("someone/a-model-nobody-has", "cpu")
    assert time.perf_counter() - started < 10
    model, tok = lm._tiny_random_llama(vocabulary())
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    def no_hub(timeout=2.0):
        raise AssertionError("a local folder must not contact the hub")

    monkeypatch.setattr(lm, "_hub_reachable", no_hub)
    local = load_model(str(tmp_path), "cpu", dtype="bfloat16")
    assert {p.dtype for p in local.hf.parameters()} == {torch.bfloat16}


def test_dtype_and_device_map_are_checked(tiny):
    half = load_model("tiny-random-llama", "cpu", dtype=torch.float16, vocabulary=vocabulary())
    assert next(half.hf.parameters()).dtype == torch.float16
    assert (
        next(load_model("tiny-random-llama", "cpu", dtype="bf16", vocabulary=vocabulary()).hf.parameters()).dtype
        == torch.bfloat16
    )
    with pytest.raises(ValueError, match="floating torch dtype"):
        load_model("tiny-random-llama", "cpu", dtype="int8", vocabulary=vocabulary())
    with pytest.raises(ValueError, match="device_map applies to hub models"):
        load_model("tiny-random-llama", device_map="auto", vocabulary=vocabulary())


def test_errors_name_the_problem(tiny):
    with pytest.raises(ValueError, match="(?s)offline models are available.*smollm2-135m"):
        load_model("/nonexistent/folder/of/a-model", "cpu")
    with pytest.raises(ValueError, match="builds its word-level tokenizer from the task's words"):
        load_model("tiny-random-llama", "cpu")
    with pytest.raises(ValueError, match="vocabulary applies only to tiny-random-llama"):
        load_model("/nonexistent/folder/of/a-model", "cpu", vocabulary=vocabulary())
    with pytest.raises(ValueError, match="single token"):
        tiny.single_token("is are")
    with pytest.raises(TypeError, match="list of prompts"):
        tiny.tokenize("The key")
    with pytest.raises(ValueError, match="return_type"):
        tiny(torch.tensor([[2, 5]]), return_type="probs")
    assert {"smollm2-135m", "gemma3-270m", "tiny-random-llama"} <= set(OFFLINE_MODELS)


# --------------------------------------------------------------------------- Jacobians


def test_one_backward_pass_equals_one_pass_per_layer(tiny, prompts):
    batch = tiny.tokenize(prompts)
    cache = tiny.prefix_cache(batch)
    acts, jac, margin = subject_verb_agreement.all_layer_jacobians(tiny, batch, [0, 1], cache)
    acts2, jac2, margin2 = subject_verb_agreement.all_layer_jacobians(tiny, batch, [0, 1], cache, one_pass=False)
    for layer in (0, 1):
        assert torch.allclose(jac[layer], jac2[layer], atol=1e-6)
        assert torch.equal(acts[layer], acts2[layer])
        assert jac[layer].abs().max() > 1e-4
    assert torch.allclose(margin, margin2)


def test_jacobians_match_finite_differences(tiny, prompts):
    batch = tiny.tokenize(prompts)
    cache = tiny.prefix_cache(batch)
    _, jac, margin = subject_verb_agreement.all_layer_jacobians(tiny, batch, [0, 1], cache)
    v = torch.randn(tiny.d_model, generator=torch.Generator().manual_seed(0))
    v /= v.norm()
    for layer in (0, 1):

        def nudged(t, layer=layer):
            def fn(act, hook):
                out = act.clone()
                out[:, -1] += t * v
                return out

            with torch.no_grad():
                return tiny.last_token(batch, cache, fwd_hooks=[(resid_hook(layer), fn)])

        central = (nudged(1e-3) - nudged(-1e-3)) / 2e-3
        assert torch.allclose(central, jac[layer] @ v, rtol=1e-2, atol=1e-3)


def test_layer_cores_are_rank_one_with_the_training_mean(tiny, prompts):
    cores = subject_verb_agreement.layer_cores(tiny, prompts, [0, 1], batch_size=5, progress=False)
    batch = tiny.tokenize(prompts)
    acts, jacs, _ = subject_verb_agreement.all_layer_jacobians(tiny, batch, [0, 1], tiny.prefix_cache(batch))
    for layer, core in cores.items():
        assert core.rank == 1
        assert np.allclose(core.mean, acts[layer].double().mean(0).numpy(), atol=1e-6)
        # streamed in batches of 5, the core is the one extracted from all prompts at once
        whole = extract(acts[layer].double().numpy(), jacs[layer].double().numpy()[:, None, :], rank=1)
        np.testing.assert_allclose(core.singular_values, whole.singular_values, rtol=1e-6, atol=1e-9)
        assert abs(float(core.basis[:, 0] @ whole.basis[:, 0])) == pytest.approx(1.0, abs=1e-6)


def test_extract_from_model_gives_the_chapters_cores(tiny, prompts):
    """The one-call API on the language model (same prompts, same layers, the margin as a logit
    difference) gives the cores the chapter computes with its prefix caches."""
    from corelib.ace import extract_from_model
    from corelib.targets import logit_difference

    chapter = subject_verb_agreement.layer_cores(tiny, prompts, [0, 1], batch_size=5, progress=False)
    batch = tiny.tokenize(prompts)
    plural = [t for t, w in AGREEMENT_READOUT.items() if w > 0]
    singular = [t for t, w in AGREEMENT_READOUT.items() if w < 0]
    api = extract_from_model(
        tiny,
        [resid_hook(0), resid_hook(1)],
        {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask},
        logit_difference(tiny, plural, singular),
        rank=1,
        batch_size=7,
    )
    for layer, core in chapter.items():
        got = api[resid_hook(layer)]
        np.testing.assert_allclose(got.singular_values, core.singular_values, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(got.mean, core.mean, atol=1e-5)
        assert abs(float(got.basis[:, 0] @ core.basis[:, 0])) == pytest.approx(1.0, abs=1e-6)


def test_sweep_layers():
    assert subject_verb_agreement.sweep_layers(30, 3) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29]
    assert subject_verb_agreement.sweep_layers(18, 1) == list(range(18))
    assert subject_verb_agreement.sweep_layers(4, 10) == [0, 3]


# --------------------------------------------------------------------------- interventions


def _full_rank_core(d: int, mean: np.ndarray) -> Core:
    return Core(np.eye(d), np.ones(d), mean)


def test_interventions_with_a_full_rank_core(tiny, prompts):
    mean = np.random.default_rng(0).normal(size=tiny.d_model)
    core = _full_rank_core(tiny.d_model, mean)
    m = subject_verb_agreement.intervened_margins(
        tiny, prompts, {1: core}, {1: ("keep", "remove", "flip")}, batch_size=5, progress=False
    )
    assert np.allclose(m[(1, "keep")], m["baseline"], atol=1e-5)  # P = I: mu + (h - mu) = h
    # removal at the last layer replaces every last token by mu: one margin for all prompts
    with torch.no_grad():
        expected = tiny.readout_from_final(tiny.final_norm(torch.tensor(mean, dtype=torch.float32)))
    assert np.allclose(m[(1, "remove")], float(expected), atol=1e-5)
    assert np.ptp(m[(1, "remove")]) < 1e-5 and np.ptp(m["baseline"]) > 1e-2
    assert m["acts"][1].shape == (len(prompts), tiny.d_model)


def test_reused_prefix_batches_give_the_same_margins(tiny, prompts):
    core = subject_verb_agreement.layer_cores(tiny, prompts, [0], batch_size=6, progress=False)[0]
    fresh = subject_verb_agreement.intervened_margins(
        tiny, prompts, {0: core}, {0: ("remove", "flip")}, batch_size=6, progress=False
    )
    batches = subject_verb_agreement.prefix_batches(tiny, prompts, batch_size=6, progress=False)
    for modes in (("remove", "flip"), ("flip",)):  # the caches survive a first use unchanged
        reused = subject_verb_agreement.intervened_margins(
            tiny, prompts, {0: core}, {0: modes}, batch_size=6, batches=batches, progress=False
        )
        for key in ("baseline", *[(0, m) for m in modes]):
            assert np.array_equal(reused[key], fresh[key])
    with pytest.raises(ValueError, match="prefix_batches"):
        subject_verb_agreement.intervened_margins(
            tiny, prompts[:-1], {0: core}, {0: ("flip",)}, batches=batches, progress=False
        )


def test_steer_hook_is_a_scaled_core_flip():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(8, 1)))
    core = Core(q, np.array([2.0, 1.0]), rng.normal(size=8))
    act = torch.tensor(rng.normal(size=(3, 4, 8)))
    flip = intervention_hook(core, "flip", centered=True, positions="last")(act, None)
    assert torch.allclose(steer_hook(core, 1.0)(act), flip)
    assert torch.allclose(steer_hook(core, 0.0)(act), act)
    half = steer_hook(core, 0.5)(act)
    assert torch.allclose(half[:, :-1], act[:, :-1])

    def z(a):
        return (a[:, -1] - torch.tensor(core.mean)) @ torch.tensor(q)

    assert torch.allclose(z(half), torch.zeros_like(z(half)), atol=1e-12)  # s = 1/2 zeroes the axis


# --------------------------------------------------------------------------- steering


def test_plain_generation_matches_transformers_greedy(tiny):
    prompt = "The keys to the cabinet"
    ours = generate(tiny, prompt, classes=AGREEMENT_VERBS, max_new_tokens=8)
    ids = torch.tensor([tiny.encode(prompt)])
    ref = tiny.hf.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=8,
        do_sample=False,
        pad_token_id=tiny.pad_id,
        eos_token_id=None,
    )
    assert ours.tokens == ref[0, ids.shape[1] :].tolist()


def test_gate_decides_what_is_steered(tiny, prompts):
    core = subject_verb_agreement.layer_cores(tiny, prompts, [1], batch_size=6, progress=False)[1]
    base = generate(tiny, prompts[0], classes=AGREEMENT_VERBS, max_new_tokens=6)
    never = generate(
        tiny, prompts[0], classes=AGREEMENT_VERBS, core=core, layer=1, config=SteeringConfig(gate=1.0), max_new_tokens=6
    )
    always = generate(
        tiny,
        prompts[0],
        classes=AGREEMENT_VERBS,
        core=core,
        layer=1,
        max_new_tokens=6,
        config=SteeringConfig(gate=0.0, epsilon=0.5, cap=None),
    )
    assert never.tokens == base.tokens and not any(never.gated)
    assert all(always.gated)
    assert always.clean_margin[0] == pytest.approx(base.clean_margin[0], abs=1e-5)
    # the first step shares its prefix with the base run: the margin crossed zero
    assert np.sign(always.margin[0]) == -np.sign(always.clean_margin[0])
    with pytest.raises(ValueError, match="layer"):
        generate(tiny, prompts[0], classes=AGREEMENT_VERBS, core=core)
    with pytest.raises(ValueError, match="gate"):
        SteeringConfig(gate=2.0)


def test_steering_takes_its_token_classes_from_the_caller(tiny, prompts):
    # the classes name the recorded verbs and set the margin's sign: swapping them flips both
    swapped = {"plural": AGREEMENT_VERBS["plural"], "singular": AGREEMENT_VERBS["singular"]}
    a = generate(tiny, prompts[0], classes=AGREEMENT_VERBS, max_new_tokens=4)
    b = generate(tiny, prompts[0], classes=swapped, max_new_tokens=4)
    assert a.tokens == b.tokens and a.verb == b.verb
    np.testing.assert_allclose(a.clean_margin, [-m for m in b.clean_margin], atol=1e-6)
    one_class = {"singular": (" is",)}
    for bad, message in [
        (one_class, "two class names"),
        ({"singular": " is", "plural": (" are",)}, "not one string"),
        ({"singular": (), "plural": (" are",)}, "non-empty"),
        ({"singular": (" is",), "plural": (" is", " are")}, "both classes: \\[' is'\\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            generate(tiny, prompts[0], classes=bad, max_new_tokens=2)
    with pytest.raises(ValueError, match="two class names"):
        inversion_stats([], one_class)


def test_sampling_is_seeded_and_shared(tiny):
    a = generate(tiny, "The keys to the cabinet", classes=AGREEMENT_VERBS, greedy=False, seed=5, max_new_tokens=6)
    b = generate(tiny, "The keys to the cabinet", classes=AGREEMENT_VERBS, greedy=False, seed=5, max_new_tokens=6)
    c = generate(tiny, "The keys to the cabinet", classes=AGREEMENT_VERBS, greedy=False, seed=6, max_new_tokens=6)
    assert a.tokens == b.tokens and a.tokens != c.tokens


def test_inversion_stats_known_answer():
    # step 1: clean prefers singular (m0 < 0) and would write it; steering wrote a plural verb
    # step 2: clean prefers singular; steered wrote a singular verb (not inverted)
    # step 3: clean prefers plural, greedy token no verb; steered wrote "is" (inverted)
    # step 4: clean prefers plural and would write it; steered wrote no verb (not inverted)
    # step 5: not steered, the model wrote the singular verb it preferred (a missed decision)
    # step 6: not steered, no verb (no decision)
    g = Generation(
        "p",
        tokens=[1, 2, 3, 4, 5, 6],
        pieces=["a"] * 6,
        gated=[True, True, True, True, False, False],
        strength=[1, 1, 1, 1, 0, 0],
        clean_margin=[-1.0, -2.0, 0.5, 3.0, -1.0, 2.0],
        margin=[0] * 6,
        clean_token=[1, 2, 3, 4, 5, 6],
        verb=["plural", "singular", "singular", None, "singular", None],
        clean_verb=["singular", "singular", None, "plural", "singular", None],
    )
    stats = inversion_stats([g, g], AGREEMENT_VERBS)
    assert stats == {
        "decisions": 10,
        "inverted": 4,
        "ungated_decisions": 2,
        "steered_steps": 8,
        "rate": 0.4,
        "clean_verb_decisions": 8,
        "clean_verbs_inverted": 2,
        "rate_clean_verbs": 0.25,
    }
    assert inversion_stats([], AGREEMENT_VERBS)["rate"] is None


def _full_pass_margins(lm, core, layer, gen):
    """Generation margins of a steered continuation recomputed without any cache: the whole
    sequence in one pass, each position moved by the strength used when it was the last token."""
    ids = lm.encode(gen.prompt) + gen.tokens[:-1]
    start = len(lm.encode(gen.prompt)) - 1
    strength = torch.zeros(len(ids))
    strength[start:] = torch.tensor(gen.strength)

    def fn(act, hook=None):
        return act + strength[None, :, None] * (core.flip(act, centered=True) - act)

    with torch.no_grad():
        logits = lm.run_with_hooks(torch.tensor([ids]), fwd_hooks=[(resid_hook(layer), fn)])
    return generation_margin(logits[0, start:], lm.readout_ids, AGREEMENT_VERBS)


def _alone(lm, prompt, core, cfg, n, greedy):
    """One request generated on its own (no steering when ``cfg`` is None), as the batch must match."""
    config = cfg or SteeringConfig()
    return generate(
        lm,
        prompt,
        classes=AGREEMENT_VERBS,
        core=core if cfg else None,
        layer=0,
        config=config,
        max_new_tokens=n,
        greedy=greedy,
        seed=3,
    )


@pytest.mark.slow  # many generations, each also without a cache
def test_batched_steering_matches_single_rows_and_a_cache_free_pass(tiny, prompts):
    # layer 0: its steered state feeds the keys and values of layer 1 (those of the last layer
    # would reach only the logits, and a wrong cache would go unnoticed)
    core = subject_verb_agreement.layer_cores(tiny, prompts, [0], batch_size=6, progress=False)[0]
    rows = ["The keys to the cabinet", "1, 2, 3", "In the past, the man behind the old desks", "The key"]
    configs = [
        None,
        SteeringConfig(gate=0.0, epsilon=0.5, cap=None),
        SteeringConfig(gate=0.001),
        SteeringConfig(gate=0.0, cap=2.0),
    ]
    budget, greedy = [6, 4, 7, 5], [True, True, False, True]
    batch = generate_batch(
        tiny,
        rows,
        classes=AGREEMENT_VERBS,
        core=core,
        layer=0,
        configs=configs,
        max_new_tokens=budget,
        greedy=greedy,
        seed=3,
    )
    for prompt, cfg, n, g, got in zip(rows, configs, budget, greedy, batch):
        alone = _alone(tiny, prompt, core, cfg, n, g)
        assert got.tokens == alone.tokens and len(got.tokens) == n
        assert got.gated == alone.gated
        np.testing.assert_allclose(got.strength, alone.strength, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(got.margin, alone.margin, atol=1e-4)
        # the cache of every row holds its own steered keys and values
        np.testing.assert_allclose(_full_pass_margins(tiny, core, 0, got), got.margin, atol=1e-4)
    assert sum(batch[1].gated) == 4 and not any(batch[0].gated)
    with torch.no_grad():  # the gate's verb mass at the first step, from an uncached pass
        first = torch.softmax(tiny(torch.tensor([tiny.encode(rows[1])]))[0, -1], -1)
    assert batch[1].verb_mass[0] == pytest.approx(float(first[list(tiny.readout_ids.values())].sum()), abs=1e-5)
    # requests of one prompt share a row until their gates disagree: a gate between the verb
    # masses of the plain continuation makes that row fork mid-way
    prompt = rows[0]
    mass = sorted(generate(tiny, prompt, classes=AGREEMENT_VERBS, max_new_tokens=6).verb_mass)
    middle = (mass[2] + mass[3]) / 2
    shared = [
        (None, True),
        (SteeringConfig(gate=0.0), True),
        (SteeringConfig(gate=middle), True),
        (SteeringConfig(gate=1.0), True),
        (None, False),
        (SteeringConfig(gate=middle), False),
    ]
    got = generate_batch(
        tiny,
        [prompt] * len(shared),
        classes=AGREEMENT_VERBS,
        core=core,
        layer=0,
        configs=[c for c, _ in shared],
        greedy=[g for _, g in shared],
        max_new_tokens=[6, 6, 6, 6, 5, 6],
        seed=3,
    )
    for (cfg, g), out in zip(shared, got):
        alone = _alone(tiny, prompt, core, cfg, len(out.tokens), g)
        assert out.tokens == alone.tokens and out.gated == alone.gated
        np.testing.assert_allclose(out.margin, alone.margin, atol=1e-4)
        np.testing.assert_allclose(_full_pass_margins(tiny, core, 0, out), out.margin, atol=1e-4)
    assert 0 < sum(got[2].gated) < 6 and got[3].tokens == got[0].tokens and len(got[4].tokens) == 5
    with pytest.raises(ValueError, match="configs has 1 entries for 4 prompts"):
        generate_batch(tiny, rows, classes=AGREEMENT_VERBS, core=core, layer=0, configs=[None])
    with pytest.raises(ValueError, match="core and its layer"):
        generate_batch(tiny, rows[:1], classes=AGREEMENT_VERBS, configs=[SteeringConfig()])


# --------------------------------------------------------------------------- experiment


def test_params_validation():
    with pytest.raises(ValueError, match="include 'flip'"):
        subject_verb_agreement.SVAParams(sweep_modes=("keep", "remove"))
    with pytest.raises(ValueError, match="available_models"):
        subject_verb_agreement.SVAParams(models=())
    with pytest.raises(ValueError, match="layer_stride"):
        subject_verb_agreement.SVAParams(layer_stride=0)
    with pytest.raises(ValueError, match="gate"):
        subject_verb_agreement.SVAParams(gate_grid=(0.1, 1.5))
    assert subject_verb_agreement.SVAParams(gate=0.25, gate_grid=[0.5, 0.1, 0.1]).gates == (0.1, 0.25, 0.5)


def test_run_on_the_tiny_model(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = subject_verb_agreement.SVAParams(
        models=("tiny-random-llama",),
        n_per_number=15,
        sweep_modes=("flip",),
        steering_prompts=("The keys to the cabinet", "The key to the doors"),
        control_prompts=("1 , 2 , 3",),
        max_new_tokens=4,
        control_new_tokens=3,
        n_display=1,
        n_samples=2,
        gate=0.0,
        gate_grid=(1.0, 0.5),
    )
    summary = subject_verb_agreement.run(p, progress=False)
    (m,) = summary.models
    assert m.layers == [0, 1] and m.chosen_layer in (0, 1) and m.rank == 1
    assert set(m.auc) == {"baseline", "keep", "remove", "flip"}
    assert len(m.coords) == summary.n_test == 15
    # coordinates are oriented towards "plural": positively correlated with the margin
    assert np.corrcoef(m.coords, m.margins["baseline"])[0, 1] > 0
    s = m.steering
    assert len(s["greedy"]) == 2 and len(s["sampled"]) == 4 and len(s["control"]) == 1
    # two samples per prompt, each with its own seed, the steered one sharing the unsteered one's draws
    assert [(pair["base"]["prompt"], pair["seed"]) for pair in s["sampled"]] == [
        (q, seed) for q in p.steering_prompts for seed in (0, 1)
    ]
    sampled = [Generation(**pair["steered"]) for pair in s["sampled"]]
    assert s["sampled_inversion"]["steered"].to_json() == inversion_stats(sampled, AGREEMENT_VERBS)
    assert set(s["other_words"]) == {"words", "greedy", "sampled"}
    assert [r["prompt"] for r in s["flip_demo"]] == list(FLIP_DEMO_PROMPTS)
    for r in s["flip_demo"]:
        assert set(r["baseline"]) == {"is", "are", "was", "were"}
        with torch.no_grad():  # the unmodified probabilities, from a plain forward pass of the same model
            probs = torch.softmax(tiny(torch.tensor([tiny.encode(r["prompt"])]))[0, -1].double(), -1)
        expected = {verb.strip(): float(probs[i]) for verb, i in tiny.readout_ids.items()}
        assert r["baseline"] == pytest.approx(expected, rel=1e-4, abs=1e-7)
        assert r["flip"] != pytest.approx(r["baseline"], rel=1e-3)  # the flip moved them
    # every gate of the grid and the chosen one were run; the chosen one's pairs are its rows
    assert p.gates == (0.0, 0.5, 1.0) and set(s["gate_sweep"]) == {"0.0", "0.5", "1.0"}
    assert tuple(pair["steered"] for pair in s["greedy"]) == s["gate_sweep"]["0.0"]["greedy"]
    assert all(pair["steered"]["gated"] == (True,) * 4 for pair in s["greedy"])  # gate 0: every step
    table = subject_verb_agreement.gate_table(s)
    rows = table.loc
    assert list(table.index) == [0.0, 0.5, 1.0]
    assert rows[0.0]["inversion rate"] == s["inversion"]["rate"]
    # gate 1 never opens: the steered continuations are the base ones
    never = s["gate_sweep"]["1.0"]
    assert [g["tokens"] for g in never["greedy"]] == [pair["base"]["tokens"] for pair in s["greedy"]]
    assert rows[1.0]["steered steps"] == 0 and (rows[1.0]["controls unchanged"], rows[1.0]["controls"]) == (1, 1)
    tables = subject_verb_agreement.tables(summary)
    assert list(tables["A7"].index) == ["tiny-random-llama"] and tables["A5"].empty
    assert "(σ1/σ2)⁴, the paper's convention" in tables["A6"].columns
    assert subject_verb_agreement.run(p, progress=False).models[0].auc == m.auc  # reused from disk
    assert m.vocab_size == len(tiny.tokenizer)

    def no_model(*args, **kwargs):
        raise AssertionError("the stored results, the model's facts included, should have been reused")

    monkeypatch.setattr(subject_verb_agreement, "load_model", no_model)
    assert subject_verb_agreement.run(p, progress=False).models[0].vocab_size == m.vocab_size
    values = subject_verb_agreement.claim_values(summary)
    assert values["sva.auc_flip"] == {"tiny-random-llama": m.auc["flip"]}
    assert values["sva.spectral_gap"] == {"tiny-random-llama": pytest.approx(m.spectral_gap**2)}
    assert values["sva.key_is_flip"] == {"tiny-random-llama": s["flip_demo"][0]["flip"]["is"]}
    assert values["sva.pearson"] == {}
    from corelib import claims

    settings = subject_verb_agreement.paper_deviations(p)
    assert settings["models"].startswith("[tiny-random-llama] (paper: [gpt2,")
    claims.record("subject_verb_agreement", values, settings=settings, root=tmp_path)  # known ids
    # what the chapter glues: numbers and short lists, never a sentence
    glued = subject_verb_agreement.glue_values(p, summary, make_dataset(p.n_per_number, p.dataset_seed))
    assert glued["free_total"] == 1 and glued["free_unchanged"] == int(rows[0.0]["decision-free unchanged"])
    rates = [float(v) for v in table["inversion rate"] if pd.notna(v)]
    assert glued["grid_inv_max"] == pytest.approx(max(rates, default=float("nan")), nan_ok=True)
    assert not [k for k, v in glued.items() if isinstance(v, str) and ". " in v and k != "ex_prompt"]
    # the models' sizes come from the loaded model, in the order of the model list
    assert (glued["vocab_sizes"], glued["layer_counts"], glued["widths"]) == (str(len(tiny.tokenizer)), "2", "32")
    assert glued["params_millions"] == f"{m.n_params / 1e6:.0f}"
    demo = s["flip_demo"][0]
    assert glued["key_is_fall_min"] == pytest.approx(demo["baseline"]["is"] / demo["flip"]["is"])
    assert glued["key_are_flip_min"] == glued["key_are_flip_max"] == demo["flip"]["are"]
    assert glued["inv_max"] == glued["inv_min"] or np.isnan(glued["inv_max"])


def test_the_models_sizes_are_glued_as_lists_in_the_order_of_the_models():
    summary = SimpleNamespace(  # the parts of an SVASummary the sizes come from
        models=[
            SimpleNamespace(vocab_size=49152, n_layers=30, d_model=576, n_params=134_515_008),
            SimpleNamespace(vocab_size=262144, n_layers=18, d_model=640, n_params=268_098_176),
        ]
    )
    assert subject_verb_agreement._model_values(summary) == {
        "vocab_sizes": "49 152, 262 144",
        "layer_counts": "30, 18",
        "widths": "576, 640",
        "params_millions": "135, 268",
    }


def test_word_inversion_stats_known_answer():
    ids = {10: 11, 11: 10}  # " has" <-> " have"
    g = Generation("x", tokens=[11, 10, 5, 10], clean_token=[10, 10, 10, 5])
    assert word_inversion_stats([g], ids) == {"decisions": 3, "inverted": 1, "rate": 1 / 3}
    assert word_inversion_stats([Generation("x", tokens=[5], clean_token=[5])], ids)["rate"] is None


def test_spectral_gap_in_the_papers_convention():
    """The paper's code squares the singular values, then takes the ratio squared: (s1/s2)^4."""
    core = Core(np.eye(3)[:, :1], np.array([4.0, 2.0, 1.0]), np.zeros(3))
    assert core.spectral_gap == 4.0 and subject_verb_agreement.spectral_gap_paper(core.spectral_gap) == 16.0


def test_control_summary_known_answer():
    def gen(tokens, verbs, gated):
        n = len(tokens)
        return Generation(
            "1, 2,",
            tokens=tokens,
            pieces=[f" {t}" for t in tokens],
            gated=gated,
            strength=[0.0] * n,
            clean_margin=[0.0] * n,
            margin=[0.0] * n,
            clean_token=tokens,
            verb=verbs,
            clean_verb=verbs,
        ).to_dict()

    free = {"base": gen([3, 4], [None, None], [False] * 2), "steered": gen([3, 4], [None, None], [False] * 2)}
    verb = {
        "base": gen([3, 9, 5], [None, "singular", None], [False] * 3),
        "steered": gen([3, 8, 5], [None, "plural", None], [False, True, False]),
    }
    broken = {"base": gen([3, 4], [None, None], [False] * 2), "steered": gen([7, 4], [None, None], [True, False])}
    c = subject_verb_agreement.control_summary({"control": [free, verb, broken]})
    assert (c.n, c.decision_free, c.decision_free_unchanged, c.unchanged) == (3, 2, 1, 1)
    rows = c.table.to_dict("records")
    assert list(c.table.columns) == [
        "prompt",
        "unchanged",
        "verbs in base text",
        "first steered step",
        "base text up to it",
    ]
    assert [r["unchanged"] for r in rows] == [True, False, False]
    assert rows[1]["first steered step"] == 1 and rows[1]["base text up to it"] == " 3 9"
    assert pd.isna(rows[0]["first steered step"]) and pd.isna(rows[0]["base text up to it"])


def _gate_sweep_steering() -> dict:
    """One steering prompt with one agreement decision, one decision-free control, three gates."""

    def gen(verbs, clean_verbs, gated, tokens=None):
        n = len(verbs)
        return Generation(
            "p",
            tokens=tokens or list(range(n)),
            pieces=["x"] * n,
            gated=gated,
            strength=[1.0] * n,
            clean_margin=[-1.0] * n,
            margin=[0.0] * n,
            clean_token=list(range(n)),
            verb=verbs,
            clean_verb=clean_verbs,
        ).to_dict()

    base_greedy = gen(["singular", None], ["singular", None], [False, False])
    base_control = gen([None, None], [None, None], [False, False])
    steering = {
        "greedy": [{"base": base_greedy, "steered": base_greedy}],
        "control": [{"base": base_control, "steered": base_control}],
        "gate_sweep": {
            # inverts its one decision, but changes the decision-free control
            "0.1": {
                "greedy": [gen(["plural", None], ["singular", None], [True, False])],
                "control": [gen([None, "singular"], [None, None], [False, True], [0, 7])],
            },
            # inverts it and leaves the control alone
            "0.3": {"greedy": [gen(["plural", None], ["singular", None], [True, False])], "control": [base_control]},
            # lets the verb through unsteered: a decision, not inverted
            "0.5": {"greedy": [base_greedy], "control": [base_control]},
        },
    }
    return steering


def test_gate_table_and_criteria_known_answer():
    table = subject_verb_agreement.gate_table(_gate_sweep_steering())
    assert table.index.name == "gate" and list(table.index) == [0.1, 0.3, 0.5]
    rows = table.to_dict("records")
    assert [r["inversion rate"] for r in rows] == [1.0, 1.0, 0.0]
    assert [(r["decision-free unchanged"], r["decision-free controls"]) for r in rows] == [(0, 1), (1, 1), (1, 1)]
    assert [(r["controls unchanged"], r["controls"]) for r in rows] == [(0, 1), (1, 1), (1, 1)]
    assert [r["decisions not steered"] for r in rows] == [0, 0, 1]
    assert [plots.meets_steering_criteria(r) for r in rows] == [False, True, False]
    assert "both criteria" not in rows[0]  # the experiment reports numbers; the claims judge them
    free = {"decision-free controls": 1, "decision-free unchanged": 1}
    assert not plots.meets_steering_criteria({"inversion rate": None, **free})
    assert not plots.meets_steering_criteria({"inversion rate": float("nan"), **free})  # a frame's empty cell
    assert not plots.meets_steering_criteria({"inversion rate": 0.9, **free, "decision-free controls": 0})
    summary = SimpleNamespace(models=[SimpleNamespace(model="a", steering=_gate_sweep_steering())])
    frame = plots.gate_criteria_frame(summary)
    assert list(frame["both criteria"]) == [False, True, False] and list(frame.columns)[-1] == "both criteria"


def test_alignment_pairs_are_formed(tmp_path, monkeypatch):
    models = [
        {"model": n, "coords": list(c), "wilcoxon_p": {"remove": 0.01, "flip": 0.02}}
        for n, c in (("a", [1, 2, 3, 4]), ("b", [2, 4, 6, 9]), ("c", [4, 3, 2, 1]))
    ]
    pairs = [
        {"pair": [x["model"], y["model"]], **subject_verb_agreement.alignment(x["coords"], y["coords"])}
        for x, y in itertools.combinations(models, 2)
    ]
    assert [p["pair"] for p in pairs] == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert pairs[1]["spearman"] == pytest.approx(-1)
    assert 0 < subject_verb_agreement._fisher(models)["remove"] < 0.01


def test_passing_gates_are_the_thresholds_where_every_model_meets_both_criteria():
    steering = _gate_sweep_steering()
    one = SimpleNamespace(models=[SimpleNamespace(model="a", steering=steering)])
    assert plots.passing_gates(one) == [0.3]
    # a second model that passes at no threshold: none passes for every model
    failing = {
        **steering,
        "gate_sweep": {g: {**v, "greedy": [steering["greedy"][0]["base"]]} for g, v in steering["gate_sweep"].items()},
    }
    both = SimpleNamespace(
        models=[SimpleNamespace(model="a", steering=steering), SimpleNamespace(model="b", steering=failing)]
    )
    assert plots.passing_gates(both) == []
