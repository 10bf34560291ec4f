"""Small transformers with TransformerLens hook points, for the toy tasks.

The model is a :class:`transformer_lens.HookedRootModule`, so the usual idioms work:
``model.run_with_cache(tokens, names_filter=...)``, ``model.run_with_hooks(tokens,
fwd_hooks=[(name, fn)])``, and ``model(resid, start_at_layer=L)`` to treat the rest of the
network as a function of the residual stream. Hook names follow TransformerLens:
``hook_embed``, ``hook_pos_embed``, ``blocks.{i}.hook_resid_pre``, ``blocks.{i}.attn.hook_pattern``,
``blocks.{i}.hook_attn_out``, ``blocks.{i}.hook_resid_mid``, ``blocks.{i}.hook_mlp_out``,
``blocks.{i}.hook_resid_post`` (the block's output, where cores are extracted).

Two layouts are supported: ``norm="post"`` (PyTorch's default encoder layer, used by the paper's
reference code: LayerNorm after each residual addition) and ``norm="pre"`` (GPT-style, with a final
LayerNorm before the unembedding).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from ._checks import check_settings
from .devices import DEVICE_VARIABLE, check_device, default_device

__all__ = [
    "TransformerConfig",
    "Transformer",
    "check_device",
    "default_device",
    "resid_hook",
    "MODEL_REVISION",
    "DEVICE_VARIABLE",
]

# Part of every stored run's identity: a change to how models are built or initialised must
# change it, so results trained by another construction are never reused.
MODEL_REVISION = "torch-encoder-layer"


def resid_hook(layer: int) -> str:
    """Name of the hook point at the output of block ``layer``."""
    return f"blocks.{layer}.hook_resid_post"


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of a :class:`Transformer`."""

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 1
    n_ctx: int = 64  # rows of the position table: the reference's 64 in every experiment
    dropout: float = 0.0
    norm: str = "post"
    unembed_bias: bool = True

    def __post_init__(self):
        check_settings(
            "TransformerConfig",
            integers={k: getattr(self, k) for k in ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "n_ctx")},
        )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}.")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}.")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {self.norm!r}.")

    def to_dict(self) -> dict:
        return asdict(self)


class Attention(nn.Module):
    """Causal multi-head self-attention with a hook on the attention pattern."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_heads, self.d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
        # Initialised as nn.MultiheadAttention initialises itself, in the same order of random
        # draws: the output projection as an nn.Linear, then the joint (3d x d) input projection
        # by Xavier-uniform; both biases zero.
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, device="meta").to_empty(device="cpu")
        nn.init.xavier_uniform_(self.qkv.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)
        self.dropout = nn.Dropout(cfg.dropout)
        self.hook_pattern = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention output (batch, pos, d_model) for the input (batch, pos, d_model)."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.d_head).unbind(dim=2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        pattern = self.dropout(self.hook_pattern(scores.masked_fill(causal, float("-inf")).softmax(dim=-1)))
        return self.out(torch.einsum("bhqk,bkhd->bqhd", pattern, v).reshape(b, t, d))


class Block(nn.Module):
    """One transformer block: attention then a ReLU MLP, with post- or pre-LayerNorm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.post = cfg.norm == "post"
        self.attn = Attention(cfg)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.drop1, self.drop2 = nn.Dropout(cfg.dropout), nn.Dropout(cfg.dropout)
        for name in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"):
            setattr(self, f"hook_{name}", HookPoint())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output (batch, pos, d_model)."""
        x = self.hook_resid_pre(x)
        attn = self.drop1(self.hook_attn_out(self.attn(x if self.post else self.ln1(x))))
        if self.post:
            x = self.hook_resid_mid(self.ln1(x + attn))
            x = self.ln2(x + self.drop2(self.hook_mlp_out(self.mlp(x))))
        else:
            x = self.hook_resid_mid(x + attn)
            x = x + self.drop2(self.hook_mlp_out(self.mlp(self.ln2(x))))
        return self.hook_resid_post(x)


class Transformer(HookedRootModule):
    """A small causal transformer over integer tokens, with named hook points."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        # Token and position tables N(0, 1), as nn.Embedding initialises them; no dropout on
        # their sum (the encoder layer's four sites are inside the blocks).
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model).normal_())
        self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.unembed_bias)
        self.setup()  # registers the hook points by name (TransformerLens)

    def forward(
        self,
        x: torch.Tensor,
        *,
        start_at_layer: int | None = None,
        stop_at_layer: int | None = None,
    ) -> torch.Tensor:
        """Logits (batch, pos, vocab) for tokens ``x`` (batch, pos).

        With ``start_at_layer=L``, ``x`` is instead the residual stream (batch, pos, d_model) entering
        block L (``L = n_layers`` applies only the read-out). With ``stop_at_layer=L`` the residual
        stream entering block L is returned instead of logits.
        """
        if start_at_layer is None:
            if x.dtype not in (torch.int64, torch.int32):
                raise ValueError("tokens must be integers; pass start_at_layer to feed activations.")
            if x.shape[-1] > self.cfg.n_ctx:
                raise ValueError(f"sequence length {x.shape[-1]} exceeds n_ctx={self.cfg.n_ctx}.")
            pos = self.hook_pos_embed(self.pos_embed[: x.shape[-1]])
            x = self.hook_embed(self.embed(x)) + pos
            start_at_layer = 0
        elif x.shape[-1] != self.cfg.d_model:
            raise ValueError(f"residual input must end in d_model={self.cfg.d_model}, got {tuple(x.shape)}.")
        for block in self.blocks[start_at_layer:stop_at_layer]:
            x = block(x)
        if stop_at_layer is not None:
            return x
        return self.unembed(self.ln_final(x))

    def readout(self, layer: int):
        """The function ``h -> logits`` from one activation vector (D,) at ``resid_hook(layer)``.

        Valid for position-wise read-outs, i.e. when ``layer`` is the last block (later blocks
        would need the other positions). Used as the ACE target function ``f``.
        """
        if layer != self.cfg.n_layers - 1:
            raise ValueError(
                f"readout is position-wise only from the last block ({self.cfg.n_layers - 1}), got layer {layer}."
            )
        return lambda h: self(h[None, None, :], start_at_layer=layer + 1)[0, 0]
