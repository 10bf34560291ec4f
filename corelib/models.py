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

import functools
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

__all__ = ["TransformerConfig", "Transformer", "Dropout", "supplied_dropout_masks", "dropout_mask_shapes",
           "trailing_part", "default_device", "resid_hook", "MODEL_REVISION"]

# Part of every stored run's identity: a change to how models are built or initialised must
# change it, so results trained by another construction are never reused.
MODEL_REVISION = "torch-encoder-layer"

_SMALL_ATTENTION = 16  # query x key pairs up to which attention avoids batched matmuls


def default_device() -> torch.device:
    """The GPU when one is present, otherwise the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _rows(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``t[index]`` along the first dimension, by an embedding lookup.

    Same values as indexing, but its backward (a dense scatter-add) is several times faster than
    the backward of advanced indexing, which matters in the training step of
    :meth:`Transformer.last_logits` (and stays fast under ``vmap``).
    """
    return F.embedding(index, t.flatten(1)).view(*index.shape, *t.shape[1:])


_MASK_FEED: ContextVar[Callable[[torch.Tensor], torch.Tensor] | None] = ContextVar("dropout_masks", default=None)


class Dropout(nn.Dropout):
    """``nn.Dropout`` that can take its masks from outside (:func:`supplied_dropout_masks`).

    Without supplied masks it is exactly ``nn.Dropout``. The vectorised engine supplies masks it
    drew itself, one random stream per seed, because random operations under ``vmap`` cannot give
    each seed the stream it would have trained with alone.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feed = _MASK_FEED.get()
        if feed is None or not self.training or self.p == 0:
            return super().forward(x)
        return feed(x)


@contextmanager
def supplied_dropout_masks(masks: Sequence[torch.Tensor]) -> Iterator[None]:
    """Within this block, active :class:`Dropout` layers multiply by ``masks`` in call order.

    Each mask is what ``F.dropout`` would multiply by: 0 or ``1 / (1 - p)``. The forward pass must
    use every mask, in order and with matching shapes; anything else is an error, so a mask list
    drawn for another architecture or batch size is never applied out of place.
    """
    queue = list(masks)

    def feed(x: torch.Tensor) -> torch.Tensor:
        if not queue:
            raise RuntimeError(f"dropout layers ran more often than the {len(masks)} supplied masks; "
                               "draw the masks with dropout_mask_shapes for this model and batch.")
        mask = queue.pop(0)
        if mask.shape != x.shape:
            raise ValueError(f"dropout mask of shape {tuple(mask.shape)} for an activation of shape "
                             f"{tuple(x.shape)}; draw the masks with dropout_mask_shapes for this batch.")
        return x * mask

    token = _MASK_FEED.set(feed)
    try:
        yield
    finally:
        _MASK_FEED.reset(token)
    if queue:
        raise RuntimeError(f"{len(queue)} of {len(masks)} supplied dropout masks were not used.")


def dropout_mask_shapes(cfg: "TransformerConfig", batch: int, length: int, *,
                        last_only: bool = False) -> list[torch.Size]:
    """The shapes of the dropout masks one training forward pass on (batch, length) tokens draws, in order.

    With ``last_only``, the shapes :meth:`Transformer.forward_last` multiplies by: the same masks,
    in the last block cut to the last position. Found by running the model on the meta device
    (no computation), so it follows the model's code rather than a hand-kept list; remembered
    per argument, since a training loop asks for the same shapes at every step.
    """
    return list(_mask_shapes(cfg, batch, length, last_only))


@functools.lru_cache(maxsize=64)
def _mask_shapes(cfg: "TransformerConfig", batch: int, length: int, last_only: bool) -> tuple[torch.Size, ...]:
    shapes: list[torch.Size] = []

    def record(x: torch.Tensor) -> torch.Tensor:
        shapes.append(x.shape)
        return x

    model = Transformer(cfg).to("meta").train()
    tokens = torch.zeros(batch, length, dtype=torch.long, device="meta")
    token = _MASK_FEED.set(record)
    try:
        with torch.no_grad():
            model.forward_last(tokens) if last_only else model(tokens)
    finally:
        _MASK_FEED.reset(token)
    return tuple(shapes)


def trailing_part(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """The last ``shape[i]`` entries of ``t`` along every dimension i (a view).

    Cuts a dropout mask drawn for a full forward pass down to the positions
    :meth:`Transformer.forward_last` computes, which are the last ones along each cut dimension.
    """
    if t.ndim != len(shape) or any(n > m for n, m in zip(shape, t.shape)):
        raise ValueError(f"cannot cut a tensor of shape {tuple(t.shape)} down to {tuple(shape)}.")
    return t[tuple(slice(m - n, None) for n, m in zip(shape, t.shape))]


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
        self.dropout = Dropout(cfg.dropout)
        self.hook_pattern = HookPoint()

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values, each (batch, pos, head, d_head)."""
        b, t, _ = x.shape
        return self.qkv(x).view(b, t, 3, self.n_heads, self.d_head).unbind(dim=2)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Attend from the positions of ``x``; ``past`` = keys and values of earlier positions.

        With ``past`` (each (batch, t_past, head, d_head)), ``x`` holds the positions that follow
        them, which may attend to all of ``past`` and causally among themselves.
        """
        return self.attend(*self.project(x), past)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               past: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The attention output for given queries, keys and values (from :meth:`project`)."""
        b, t, _, _ = q.shape
        d = self.n_heads * self.d_head
        if past is not None:
            k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
        tk = k.shape[1]
        if t * tk <= _SMALL_ATTENTION:
            # Few query-key pairs: broadcast products beat batched matmuls of 1 x d_head blocks
            # (and under vmap, thousands of them).
            scores = (q[:, :, None] * k[:, None]).sum(-1).permute(0, 3, 1, 2)
        else:
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k)
        causal = torch.ones(t, tk, dtype=torch.bool, device=q.device).triu(tk - t + 1)
        scores = scores / math.sqrt(self.d_head)
        pattern = self.dropout(self.hook_pattern(scores.masked_fill(causal, float("-inf")).softmax(dim=-1)))
        if t * tk <= _SMALL_ATTENTION:
            z = (pattern.permute(0, 2, 3, 1)[..., None] * v[:, None]).sum(2)
        else:
            z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
        return self.out(z.reshape(b, t, d))


class Block(nn.Module):
    """One transformer block: attention then a ReLU MLP, with post- or pre-LayerNorm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.post = cfg.norm == "post"
        self.attn = Attention(cfg)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.ReLU(), Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.drop1, self.drop2 = Dropout(cfg.dropout), Dropout(cfg.dropout)
        for name in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"):
            setattr(self, f"hook_{name}", HookPoint())

    def attn_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the attention layer reads from the block input (normalised first if pre-norm)."""
        return x if self.post else self.ln1(x)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None,
                qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Block output for the positions of ``x`` (``past``: keys/values of earlier positions).

        ``qkv``: the queries, keys and values of ``x`` if already known (they depend on ``x``
        alone), to skip their projection.
        """
        x = self.hook_resid_pre(x)
        if qkv is None:
            qkv = self.attn.project(self.attn_input(x))
        attn = self.drop1(self.hook_attn_out(self.attn.attend(*qkv, past)))
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

    def forward_last(self, x: torch.Tensor) -> torch.Tensor:
        """Logits at the last position only, (batch, vocab): ``self(x)[:, -1]`` with less work.

        Every block but the last runs on all positions, since later positions read them; the last
        block needs only the keys and values of the earlier positions and the whole computation at
        the last one. In training mode its dropout layers draw (or take, under
        :func:`supplied_dropout_masks`) masks of the last position only. Unlike
        :meth:`last_logits` each example has its own earlier positions, so this is the path that
        trains with dropout; it saves a fifth of the work of a two-token, two-block model.
        """
        resid = self(x, stop_at_layer=self.cfg.n_layers - 1)
        block = self.blocks[-1]
        # Contiguous slices: under vmap a strided one turns each linear layer into a batched
        # matmul against a copy of the weights per example (five times slower).
        earlier, last = resid[:, :-1].contiguous(), resid[:, -1:].contiguous()
        _, k, v = block.attn.project(block.attn_input(earlier))
        return self.unembed(self.ln_final(block(last, past=(k, v))))[:, 0]

    def last_logits(
        self, last_tokens: torch.Tensor, prefixes: torch.Tensor, prefix_index: torch.Tensor
    ) -> torch.Tensor:
        """Logits at the last position only, computing shared prefixes once: (batch, vocab).

        Equal (up to float rounding) to ``self(tokens)[:, -1]`` for ``tokens[i] =
        [*prefixes[prefix_index[i]], last_tokens[i]]``. In a causal model the earlier positions
        never see the last token, so their keys and values depend only on the prefix. When many
        examples share few prefixes (modular addition: 53 first tokens for 1 404 pairs), running
        the prefixes once and only the last position per example halves the work of a training
        step. The first block's queries, keys and values at the last position depend on the last
        token alone, so they are projected once per vocabulary entry and gathered (the toy
        vocabularies have at most a hundred tokens). Training without dropout uses this path; the
        analysis uses :meth:`forward` and its hooks (hooks here fire on the prefix pass and on the
        per-vocabulary table, not per example). With dropout active the shortcut would share one
        mask among all examples of a prefix, so it is refused: use :meth:`forward` to train.

        Args:
            last_tokens: (batch,) the last token of each example.
            prefixes: (n_prefixes, pos - 1) the distinct prefixes.
            prefix_index: (batch,) which prefix each example has.
        """
        n_prefix = prefixes.shape[1]
        if n_prefix + 1 > self.cfg.n_ctx:
            raise ValueError(f"sequence length {n_prefix + 1} exceeds n_ctx={self.cfg.n_ctx}.")
        if self.cfg.dropout and self.training:
            raise ValueError("last_logits shares each prefix's dropout mask among its examples; call "
                             "model.eval() first, or train through forward (as corelib.training does).")
        p = self.hook_embed(self.embed(prefixes)) + self.pos_embed[:n_prefix]
        # The first block's input at the last position depends on its token alone: project
        # the queries, keys and values once per vocabulary entry, not once per example.
        table = (self.embed.weight + self.pos_embed[n_prefix])[:, None]
        x = _rows(table, last_tokens)
        qkv = tuple(_rows(t, last_tokens) for t in self.blocks[0].attn.project(self.blocks[0].attn_input(table)))
        for i, block in enumerate(self.blocks):
            _, k, v = block.attn.project(block.attn_input(p))
            x = block(x, past=(_rows(k, prefix_index), _rows(v, prefix_index)), qkv=qkv if i == 0 else None)
            if i + 1 < len(self.blocks):
                p = block(p)
        return self.unembed(self.ln_final(x))[:, 0]

    def readout(self, layer: int):
        """The function ``h -> logits`` from one activation vector (D,) at ``resid_hook(layer)``.

        Valid for position-wise read-outs, i.e. when ``layer`` is the last block (later blocks
        would need the other positions). Used as the ACE target function ``f``.
        """
        if layer != self.cfg.n_layers - 1:
            raise ValueError(
                f"readout is position-wise only from the last block ({self.cfg.n_layers - 1}), "
                f"got layer {layer}."
            )
        return lambda h: self(h[None, None, :], start_at_layer=layer + 1)[0, 0]
