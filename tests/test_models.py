"""The hooked transformer: hooks, layer slicing, causality, input checks."""

import pytest
import torch

from corelib.models import Transformer, TransformerConfig, resid_hook


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_start_and_stop_at_layer_compose_to_the_full_forward(norm):
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(vocab_size=7, d_model=16, n_heads=4, d_ff=32, n_layers=2, n_ctx=5, norm=norm)
    ).eval()
    x = torch.randint(0, 7, (3, 5))
    full = model(x)
    for layer in range(3):
        resid = model(x, stop_at_layer=layer)
        torch.testing.assert_close(model(resid, start_at_layer=layer), full)


def test_cache_names_and_readout_match_logits():
    torch.manual_seed(1)
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_ctx=4)).eval()
    x = torch.randint(0, 5, (2, 4))
    logits, cache = model.run_with_cache(x)
    for name in ["hook_embed", "hook_pos_embed", "blocks.0.attn.hook_pattern", resid_hook(0)]:
        assert name in cache
    f = model.readout(0)
    torch.testing.assert_close(f(cache[resid_hook(0)][1, 2]), logits[1, 2])
    with pytest.raises(ValueError, match="last block"):
        Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=2)).readout(0)


def test_attention_is_causal():
    torch.manual_seed(2)
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_ctx=6)).eval()
    x = torch.randint(0, 5, (1, 6))
    y = x.clone()
    y[0, 4:] = (x[0, 4:] + 1) % 5
    torch.testing.assert_close(model(x)[0, :4], model(y)[0, :4])
    assert not torch.allclose(model(x)[0, 4:], model(y)[0, 4:])


def test_bad_inputs_are_explained():
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_ctx=4))
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="tokens must be integers"):
        model(torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(vocab_size=5, d_model=10, n_heads=4)


def test_no_float64_cast_happens_on_the_device():
    """Apple's MPS has no float64: tensors go to the CPU before they become float64, never after
    (``x.double().cpu()`` fails there; ``x.cpu().double()`` works everywhere)."""
    import re
    from pathlib import Path

    sources = sorted((Path(__file__).resolve().parent.parent / "corelib").rglob("*.py"))
    found = [
        f"{path.name}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\.(double|to\(torch\.float64\))\(\)?\.(cpu|to\(\"cpu\")", line)
        or re.search(r'\.to\("cpu", torch\.float64\)', line)
    ]
    assert not found, found


def test_the_key_bias_has_no_gradient_but_rounding():
    """The key bias adds ``q . b_k`` to all of a query's scores, which the softmax removes: its
    gradient is zero in exact arithmetic, so each device's rounding alone sets it (and AdamW turns
    that noise into steps), which is why ``tests/test_gpu.py`` compares the trained models without it."""
    from corelib.tasks.modular import modular_addition_split

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=11, d_model=32, n_heads=2, d_ff=64, n_layers=1, n_ctx=2, dropout=0.0)
    (x, y), _ = modular_addition_split(11, 0.5, 0)
    model32 = Transformer(cfg)
    model64 = Transformer(cfg).double()
    model64.load_state_dict({k: v.double() for k, v in model32.state_dict().items()})
    ratios = {}
    for name, model in (("float32", model32), ("float64", model64)):
        torch.nn.functional.cross_entropy(model(x)[:, -1], y[:, -1]).backward()
        grad = model.blocks[0].attn.qkv.bias.grad.abs()
        queries, keys, values = (grad[i * cfg.d_model : (i + 1) * cfg.d_model].max().item() for i in range(3))
        assert queries > 1e-4 and values > 1e-4, (name, queries, values)  # the other biases learn
        ratios[name] = keys / queries
    assert ratios["float32"] < 1e-5 and ratios["float64"] < 1e-12, ratios
