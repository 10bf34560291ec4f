"""Our toy transformer is the reference's: PyTorch's encoder layer, its initialisation, its dropout.

The reference builds every toy model from ``nn.Embedding`` (tokens), ``nn.Embedding(64, d)``
(positions), one ``nn.TransformerEncoderLayer(batch_first=True)`` per block (post-norm, ReLU,
dropout 0.1) with a causal mask, and an ``nn.Linear`` read-out. ``TorchBuilt`` below is that
model, written from those facts with torch's own layers; our :class:`Transformer` must compute
the same function and start from the same distribution of weights.
"""

import math

import pytest
import torch
from torch import nn

from corelib.fastpath import mask_shapes
from corelib.models import Transformer, TransformerConfig


class TorchBuilt(nn.Module):
    """The reference's model, built from PyTorch's layers in the reference's order."""

    def __init__(self, vocab: int, d: int, heads: int, d_ff: int, n_layers: int, dropout: float = 0.1):
        super().__init__()
        self.token_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(64, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=d_ff, dropout=dropout, batch_first=True)
            for _ in range(n_layers)
        )
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, x):
        t = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(t))[None]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.lm_head(h)


def _cfg(n_layers):
    return TransformerConfig(vocab_size=11, d_model=32, n_heads=4, d_ff=64, n_layers=n_layers, dropout=0.1)


def copy_into_torch(ours: Transformer) -> TorchBuilt:
    """A :class:`TorchBuilt` holding ``ours``'s weights (names mapped, nothing transformed)."""
    c = ours.cfg
    ref = TorchBuilt(c.vocab_size, c.d_model, c.n_heads, c.d_ff, c.n_layers, c.dropout)
    sd = {
        "token_emb.weight": ours.embed.weight,
        "pos_emb.weight": ours.pos_embed,
        "lm_head.weight": ours.unembed.weight,
        "lm_head.bias": ours.unembed.bias,
    }
    for i, b in enumerate(ours.blocks):
        pairs = {
            "self_attn.in_proj_weight": b.attn.qkv.weight,
            "self_attn.in_proj_bias": b.attn.qkv.bias,
            "self_attn.out_proj.weight": b.attn.out.weight,
            "self_attn.out_proj.bias": b.attn.out.bias,
            "linear1.weight": b.mlp[0].weight,
            "linear1.bias": b.mlp[0].bias,
            "linear2.weight": b.mlp[3].weight,
            "linear2.bias": b.mlp[3].bias,
            "norm1.weight": b.ln1.weight,
            "norm1.bias": b.ln1.bias,
            "norm2.weight": b.ln2.weight,
            "norm2.bias": b.ln2.bias,
        }
        sd.update({f"layers.{i}.{k}": v for k, v in pairs.items()})
    ref.load_state_dict({k: v.detach().clone() for k, v in sd.items()})
    return ref


@pytest.mark.parametrize("n_layers", [1, 2])
def test_copied_weights_give_the_torch_encoder_layers_logits(n_layers):
    torch.manual_seed(3)
    ours = Transformer(_cfg(n_layers))
    # Perturb the zero biases and unit gains so that a mis-mapped tensor cannot hide.
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ref = copy_into_torch(ours)
    x = torch.randint(0, 11, (5, 9))
    ours.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_same_seed_gives_the_reference_models_initial_weights(n_layers):
    """Random draws in the reference's order: one seed gives the torch-built model's weights exactly."""
    torch.manual_seed(11)
    ours = Transformer(_cfg(n_layers))
    torch.manual_seed(11)
    c = ours.cfg
    ref = TorchBuilt(c.vocab_size, c.d_model, c.n_heads, c.d_ff, n_layers)
    mapped = copy_into_torch(ours).state_dict()
    for name, value in ref.state_dict().items():
        torch.testing.assert_close(mapped[name], value, rtol=0, atol=0, msg=name)


def test_initial_weight_statistics_are_torchs():
    """Per tensor: N(0, 1) embeddings, Xavier in-projection, nn.Linear's Kaiming-uniform, zero biases."""
    d, d_ff, vocab = 128, 512, 53
    ours = Transformer(TransformerConfig(vocab_size=vocab, d_model=d, n_heads=4, d_ff=d_ff, n_layers=2))
    torch.manual_seed(0)
    torch_layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=d_ff, batch_first=True)

    def uniform_std(bound):  # std of U(-bound, bound)
        return bound / math.sqrt(3)

    expected_std = {
        "embed.weight": 1.0,
        "pos_embed": 1.0,
        "blocks.0.attn.qkv.weight": uniform_std(math.sqrt(6 / (d + 3 * d))),
        "blocks.0.attn.out.weight": uniform_std(1 / math.sqrt(d)),
        "blocks.0.mlp.0.weight": uniform_std(1 / math.sqrt(d)),
        "blocks.0.mlp.3.weight": uniform_std(1 / math.sqrt(d_ff)),
        "unembed.weight": uniform_std(1 / math.sqrt(d)),
    }
    params = dict(ours.named_parameters())
    assert params["pos_embed"].shape == (64, d)
    for name, std in expected_std.items():
        w = params[name].detach()
        assert abs(w.mean().item()) < 4 * std / math.sqrt(w.numel()), name
        assert w.std().item() == pytest.approx(std, rel=0.05), name
    for name in ("blocks.0.attn.qkv.bias", "blocks.0.attn.out.bias", "blocks.1.attn.qkv.bias"):
        assert torch.count_nonzero(params[name]) == 0, name
    # The same numbers from torch's own layer, initialised by torch.
    torch.testing.assert_close(
        params["blocks.0.attn.qkv.weight"].std(), torch_layer.self_attn.in_proj_weight.std(), rtol=0.05, atol=0
    )
    assert torch.count_nonzero(torch_layer.self_attn.in_proj_bias) == 0
    assert torch.count_nonzero(torch_layer.self_attn.out_proj.bias) == 0


def test_dropout_sits_only_at_the_encoder_layers_four_sites():
    cfg = _cfg(2)
    shapes = mask_shapes(cfg, batch=3, length=5)
    per_block = [(3, 4, 5, 5), (3, 5, 32), (3, 5, 64), (3, 5, 32)]  # pattern, attention out, MLP, MLP out
    assert [tuple(s) for s in shapes] == per_block * 2
    model = Transformer(cfg).train()
    x = torch.randint(0, 11, (3, 5))
    _, cache = model.run_with_cache(x, names_filter="blocks.0.hook_resid_pre")
    _, again = model.run_with_cache(x, names_filter="blocks.0.hook_resid_pre")
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], again["blocks.0.hook_resid_pre"], rtol=0, atol=0)
