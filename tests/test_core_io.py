"""A Core saved and loaded, and its interventions as hooks on our model and on a plain nn.Module."""

import numpy as np
import pytest
import torch
from torch import nn

from corelib.ace import Core, extract
from corelib.models import Transformer, TransformerConfig, resid_hook
from corelib.results import StoreError


def _core(d: int = 6, rank: int = 3, seed: int = 0) -> Core:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(200, d)) @ rng.normal(size=(d, d))
    j = rng.normal(size=(200, 2, d))
    core = extract(h, j, rank=rank)
    return Core(core.basis, core.singular_values, core.mean, {"model": "test", "hook": "x", "energy": None})


def test_a_saved_core_loads_back_exactly_with_its_metadata(tmp_path):
    core = _core()
    folder = core.save(tmp_path / "core")
    back = Core.load(folder)
    for name in ("basis", "singular_values", "mean"):
        np.testing.assert_array_equal(getattr(back, name), getattr(core, name))
    assert back.metadata == {"model": "test", "hook": "x", "energy": None} and back.rank == 3
    small = Core.load(core.truncate(1).save(tmp_path / "small"))
    assert small.rank == 1 and small.metadata == core.metadata  # truncating keeps where it came from
    np.testing.assert_array_equal(small.basis, core.basis[:, :1])


def test_damaged_missing_or_unserialisable_cores_are_refused(tmp_path):
    folder = _core().save(tmp_path / "core")
    data = bytearray((folder / "core.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "core.safetensors").write_bytes(bytes(data))
    with pytest.raises(StoreError, match="core.safetensors is damaged"):
        Core.load(folder)
    with pytest.raises(StoreError, match=r"holds no saved core .* Core.save"):
        Core.load(tmp_path / "nothing")
    bad = Core(np.eye(3)[:, :1], np.ones(3), np.zeros(3), {"when": object()})
    with pytest.raises(TypeError, match="metadata must be JSON values"):
        bad.save(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # refused before anything was written


@pytest.mark.parametrize("mode", ["keep", "remove", "flip"])
def test_hooks_intervene_like_the_core_on_our_model(mode):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=7, d_model=6, n_heads=2, d_ff=12, n_layers=2, n_ctx=4)).eval()
    x = torch.randint(0, 7, (5, 4))
    core, name = _core(), resid_hook(0)
    got = model.run_with_hooks(x, fwd_hooks=core.hooks(name, mode))
    _, cache = model.run_with_cache(x, names_filter=name)
    changed = getattr(core, mode)(cache[name])
    want = model(changed, start_at_layer=1)  # the rest of the model on the changed activation
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, model(x), atol=1e-4)  # the intervention did act


def test_hooks_apply_to_a_plain_module_by_its_path_and_to_tuple_outputs():
    class Pair(nn.Module):  # returns (hidden, extra), as many Hugging Face layers do
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, x):
            return self.lin(x), x.sum()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Pair(), Pair()])
            self.head = nn.Linear(6, 2)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)[0]
            return self.head(x)

    torch.manual_seed(0)
    net, x, core = Net(), torch.randn(4, 3, 6), _core()
    with core.hooks("layers.0", "flip", centered=True).on(net):
        got = net(x)
    h = core.flip(net.layers[0](x)[0], centered=True)
    torch.testing.assert_close(got, net.head(net.layers[1](h)[0]))
    torch.testing.assert_close(net(x), net.head(net.layers[1](net.layers[0](x)[0])[0]))  # removed after the block
    with pytest.raises(ValueError, match=r"no submodule 'layer.0'; nearest: \['layers.0'"):
        with core.hooks("layer.0").on(net):
            pass


def _toy_model():
    torch.manual_seed(1)
    cfg = TransformerConfig(vocab_size=9, d_model=8, n_heads=2, d_ff=16, n_layers=2, n_ctx=4)
    return Transformer(cfg).eval(), torch.randint(0, 9, (40, 3))


def _same_core(a: Core, b: Core, r: int) -> None:
    np.testing.assert_allclose(a.singular_values, b.singular_values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-6, atol=1e-7)
    pa, pb = a.truncate(r).projector, b.truncate(r).projector
    np.testing.assert_allclose(pa, pb, atol=1e-6)


def test_extract_from_model_equals_ace_on_activations_and_jacobians_taken_by_hand():
    from corelib.ace import extract_from_model, jacobians

    model, x = _toy_model()
    name = resid_hook(1)
    _, cache = model.run_with_cache(x, names_filter=name)
    h = cache[name][:, -1]
    by_hand = extract(h.double(), jacobians(model.readout(1), h, n_samples=16, seed=3), rank=8)
    got = extract_from_model(model, name, x, lambda out: out[:, -1], n_jacobians=16, seed=3, rank=8, batch_size=7)
    _same_core(got, by_hand, 3)
    assert got.metadata["hook"] == name and got.metadata["n_jacobians"] == 16 and got.metadata["n_examples"] == 40
    # One position per example, here every example's last: the same core.
    per_example = torch.full((40,), 2)
    again = extract_from_model(
        model, name, x, lambda out: out[:, -1], positions=per_example, n_jacobians=16, seed=3, rank=8
    )
    _same_core(again, by_hand, 3)


def test_extract_from_model_on_a_plain_module_by_submodule_path():
    from corelib.ace import extract_from_model, jacobians

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 6), nn.Linear(6, 3))
    x = torch.randn(30, 4, 5)
    h = net[1](net[0](x))[:, -1]
    by_hand = extract(h.double(), jacobians(lambda v: net[3](net[2](v)), h), rank=6)
    got = extract_from_model(net, "1", x, lambda out: out[:, -1], rank=6, batch_size=8)
    _same_core(got, by_hand, 3)


def test_extract_from_model_refuses_bad_requests_with_the_fix():
    from corelib.ace import extract_from_model

    model, x = _toy_model()
    with pytest.raises(
        ValueError,
        match=r"no hook point or submodule 'blocks.1.hook_resid_pots'; nearest: \['blocks.1.hook_resid_post'",
    ):
        extract_from_model(model, "blocks.1.hook_resid_pots", x, lambda out: out[:, -1])
    # Causal: the first position's logits never see the last position's activation.
    with pytest.raises(ValueError, match="does not depend on the activation"):
        extract_from_model(model, resid_hook(0), x, lambda out: out[:, 0])
    with pytest.raises(ValueError, match="positions out of range"):
        extract_from_model(model, resid_hook(0), x, lambda out: out[:, -1], positions=torch.full((40,), 5))
    with pytest.raises(ValueError, match=r"n_jacobians must lie in \[1, 40\]"):
        extract_from_model(model, resid_hook(0), x, lambda out: out[:, -1], n_jacobians=41)


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    return LlamaForCausalLM(cfg).eval(), cfg


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # jacrev through SDPA in the by-hand route
def test_extract_from_model_on_a_hugging_face_causal_lm_by_module_path():
    from corelib.ace import extract_from_model

    model, _ = _tiny_llama()
    ids = torch.randint(0, 40, (12, 5))
    got = extract_from_model(model, "model.layers.0", {"input_ids": ids}, lambda out: out.logits[:, -1, :4], rank=16)
    # By hand: the layer's output from output_hidden_states, and each example's Jacobian by
    # jacrev of the logits as a function of the vector put at its last position.
    with torch.no_grad():
        h = model(ids, output_hidden_states=True).hidden_states[1][:, -1]

    def logits_given(i: int):
        def f(v):
            def put(module, inputs, output):
                hidden = output[0] if isinstance(output, tuple) else output
                hidden = torch.cat([hidden[:, :-1], v[None, None]], dim=1)
                return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

            handle = model.model.layers[0].register_forward_hook(put)
            try:
                return model(ids[i : i + 1]).logits[0, -1, :4]
            finally:
                handle.remove()

        return f

    jac = torch.stack([torch.func.jacrev(logits_given(i))(h[i]) for i in range(len(ids))])
    _same_core(got, extract(h.double(), jac.double(), rank=16), 3)


def test_several_hooks_in_one_call_equal_one_call_per_hook():
    from corelib.ace import extract_from_model

    model, x = _toy_model()
    names = [resid_hook(0), resid_hook(1)]
    both = extract_from_model(model, names, x, lambda out: out[:, -1], n_jacobians=20, seed=1, rank=8, batch_size=9)
    assert list(both) == names
    for name in names:  # the earlier hook's Jacobians run through the later layer, not around it
        alone = extract_from_model(model, name, x, lambda out: out[:, -1], n_jacobians=20, seed=1, rank=8)
        _same_core(both[name], alone, 4)
        assert both[name].metadata["hook"] == name
    llama, _ = _tiny_llama()
    ids = torch.randint(0, 40, (10, 5))
    paths = ["model.layers.0", "model.layers.1"]
    both = extract_from_model(llama, paths, {"input_ids": ids}, lambda out: out.logits[:, -1, :4], rank=16)
    for path in paths:
        alone = extract_from_model(llama, path, {"input_ids": ids}, lambda out: out.logits[:, -1, :4], rank=16)
        _same_core(both[path], alone, 3)
    with pytest.raises(ValueError, match="list of distinct ones"):
        extract_from_model(model, [resid_hook(0), resid_hook(0)], x, lambda out: out[:, -1])


def test_extract_from_model_on_a_transformer_bridge_equals_the_wrapped_module():
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_from_module

    from corelib.ace import extract_from_model

    model, cfg = _tiny_llama()
    ids = torch.randint(0, 40, (10, 5))
    by_path = extract_from_model(
        model, "model.layers.1", {"input_ids": ids}, lambda out: out.logits[:, -1, :4], rank=16
    )
    bridge = build_bridge_from_module(model, "LlamaForCausalLM", hf_config=cfg)  # wraps `model` in place
    by_hook = extract_from_model(bridge, "blocks.1.hook_resid_post", ids, lambda out: out[:, -1, :4], rank=16)
    _same_core(by_hook, by_path, 3)


def test_truncating_a_core_updates_the_rank_in_a_copy_of_its_metadata():
    core = Core(np.eye(4)[:, :3], np.ones(4), np.zeros(4), {"rank": 3, "hook": "h"})
    small = core.truncate(2)
    assert small.metadata == {"rank": 2, "hook": "h"} and core.metadata["rank"] == 3


def test_extract_from_model_on_a_hooked_root_module_by_hook_point():
    # TransformerLens 3's HookedTransformer is a HookedRootModule driven by run_with_hooks; a
    # small one, whose core follows by hand: the read-out is linear in the hooked activation.
    from transformer_lens import HookedRootModule
    from transformer_lens.hook_points import HookPoint

    from corelib.ace import extract_from_model

    class Tiny(HookedRootModule):
        def __init__(self):
            super().__init__()
            self.embed, self.hook_h, self.unembed = nn.Embedding(11, 8), HookPoint(), nn.Linear(8, 3)
            self.setup()

        def forward(self, tokens):
            return self.unembed(torch.tanh(self.hook_h(self.embed(tokens))))

    torch.manual_seed(0)
    model, tokens = Tiny().double(), torch.randint(0, 11, (40, 4))
    got = extract_from_model(model, "hook_h", tokens, lambda out: out[:, -1], rank=3)
    with torch.no_grad():
        h = model.embed(tokens[:, -1])
    jac = model.unembed.weight[None] * (1 - torch.tanh(h) ** 2)[:, None, :]
    _same_core(got, extract(h, jac.detach(), rank=3), 3)
    assert got.metadata["model"] == "Tiny" and len(got.metadata["data"]) == 16
    other = extract_from_model(model, "hook_h", tokens.flip(0), lambda out: out[:, -1], rank=3)
    assert other.metadata["data"] != got.metadata["data"]  # same examples, another order: other data


def test_a_saved_core_names_the_model_it_was_loaded_as():
    from corelib.ace import extract_from_model

    model, _ = _tiny_llama()
    model.config._name_or_path = "org/tiny-llama"
    ids = torch.randint(0, 40, (6, 5))
    core = extract_from_model(model, "model.layers.0", {"input_ids": ids}, lambda out: out.logits[:, -1, :4], rank=2)
    assert core.metadata["model"] == "org/tiny-llama"
