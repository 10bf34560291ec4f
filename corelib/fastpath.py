"""The training engine's fast forward passes of :class:`~corelib.models.Transformer`.

Training scores the last position (the toy tasks) or every position (the Markov chain), with
dropout masks the engine draws itself, one random stream per seed. These functions compute
exactly what :meth:`Transformer.forward` computes, from the same submodules, with two kinds of
shortcut: only the last position is carried through the last block, and examples that share a
prefix share its computation. The tests keep each of them equal to ``forward``.

``drop`` arguments apply dropout: a callable that receives each activation at the model's four
dropout sites per block, in the order ``nn.Dropout`` draws them in ``forward`` (attention pattern,
attention output, MLP hidden layer, MLP output), and returns it multiplied by its mask.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .models import Block, Transformer, TransformerConfig
from .seed_linear import linear

__all__ = ["masked_forward", "prefix_last_logits", "mask_feed", "mask_shapes", "trailing_part"]

Drop = Callable[[torch.Tensor], torch.Tensor]

_SMALL_ATTENTION = 16  # query x key pairs up to which attention avoids batched matmuls


def _no_drop(x: torch.Tensor) -> torch.Tensor:
    return x


def _rows(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``t[index]`` along the first dimension, by an embedding lookup.

    Same values as indexing; its backward (a dense scatter-add) is much cheaper than that of
    advanced indexing, also under ``vmap``.
    """
    return F.embedding(index, t.flatten(1)).view(*index.shape, *t.shape[1:])


def _project(block: Block, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of the block input ``x``, each (batch, pos, head, d_head)."""
    attn = block.attn
    if not block.post:
        x = block.ln1(x)
    b, t, _ = x.shape
    return linear(attn.qkv, x).view(b, t, 3, attn.n_heads, attn.d_head).unbind(dim=2)


def _attend(block: Block, q, k, v, drop: Drop) -> torch.Tensor:
    """Attention output for queries at the last ``q.shape[1]`` of the key positions (causal)."""
    attn = block.attn
    b, t, _, _ = q.shape
    tk = k.shape[1]
    if t * tk <= _SMALL_ATTENTION:  # broadcast products beat tiny batched matmuls under vmap
        scores = (q[:, :, None] * k[:, None]).sum(-1).permute(0, 3, 1, 2)
    else:
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k)
    causal = torch.ones(t, tk, dtype=torch.bool, device=q.device).triu(tk - t + 1)
    pattern = drop((scores / math.sqrt(attn.d_head)).masked_fill(causal, float("-inf")).softmax(dim=-1))
    if t * tk <= _SMALL_ATTENTION:
        z = (pattern.permute(0, 2, 3, 1)[..., None] * v[:, None]).sum(2)
    else:
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
    return linear(attn.out, z.reshape(b, t, attn.n_heads * attn.d_head))


def _block(block: Block, x: torch.Tensor, qkv, past, drop: Drop) -> torch.Tensor:
    """The block's output at the positions of ``x``; ``past``: keys and values of earlier positions."""
    q, k, v = qkv
    if past is not None:
        k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
    a = drop(_attend(block, q, k, v, drop))
    fc, act, _, proj = block.mlp
    if block.post:
        x = block.ln1(x + a)
        return block.ln2(x + drop(linear(proj, drop(act(linear(fc, x))))))
    x = x + a
    return x + drop(linear(proj, drop(act(linear(fc, block.ln2(x))))))


def masked_forward(
    model: Transformer, tokens: torch.Tensor, drop: Drop | None = None, *, last_only: bool = False
) -> torch.Tensor:
    """``model(tokens)`` with dropout ``drop``: logits (batch, pos, vocab), or (batch, vocab) at the last position.

    With ``last_only``, the last block runs only at the last position (it needs the keys and
    values of the earlier ones), and its dropout sites see only that position.
    """
    drop = drop or _no_drop
    n = tokens.shape[-1]
    if n > model.cfg.n_ctx:
        raise ValueError(f"sequence length {n} exceeds n_ctx={model.cfg.n_ctx}.")
    x = model.embed(tokens) + model.pos_embed[:n]
    blocks = model.blocks
    for i, block in enumerate(blocks):
        if last_only and i == len(blocks) - 1:
            # Contiguous slices: under vmap a strided one makes each linear layer a batched matmul.
            earlier, last = x[:, :-1].contiguous(), x[:, -1:].contiguous()
            _, k, v = _project(block, earlier)
            x = _block(block, last, _project(block, last), (k, v), drop)
        else:
            x = _block(block, x, _project(block, x), None, drop)
    logits = linear(model.unembed, model.ln_final(x))
    return logits[:, -1] if last_only else logits


def prefix_last_logits(
    model: Transformer, last_tokens: torch.Tensor, prefixes: torch.Tensor, prefix_index: torch.Tensor
) -> torch.Tensor:
    """Last-position logits (batch, vocab) without dropout, computing each shared prefix once.

    Equal (up to float rounding) to ``model(tokens)[:, -1]`` for ``tokens[i] =
    [*prefixes[prefix_index[i]], last_tokens[i]]``: in a causal model the earlier positions never
    see the last token, so their keys and values depend only on the prefix. The first block's
    queries, keys and values at the last position depend on the last token alone, so they are
    projected once per vocabulary entry and gathered.
    """
    n_prefix = prefixes.shape[1]
    if n_prefix + 1 > model.cfg.n_ctx:
        raise ValueError(f"sequence length {n_prefix + 1} exceeds n_ctx={model.cfg.n_ctx}.")
    p = model.embed(prefixes) + model.pos_embed[:n_prefix]
    table = (model.embed.weight + model.pos_embed[n_prefix])[:, None]
    x = _rows(table, last_tokens)
    qkv = tuple(_rows(t, last_tokens) for t in _project(model.blocks[0], table))
    for i, block in enumerate(model.blocks):
        _, k, v = _project(block, p)
        past = (_rows(k, prefix_index), _rows(v, prefix_index))
        x = _block(block, x, qkv if i == 0 else _project(block, x), past, _no_drop)
        if i + 1 < len(model.blocks):
            p = _block(block, p, _project(block, p), None, _no_drop)
    return linear(model.unembed, model.ln_final(x))[:, 0]


def mask_feed(masks: Sequence[torch.Tensor]) -> Drop:
    """A ``drop`` that multiplies the activations it receives by ``masks``, in order.

    Each mask is what ``F.dropout`` multiplies by (0 or ``1 / (1 - p)``); the product keeps the
    activation's dtype. A forward pass that asks
    for more masks than given, or for one of another shape, is an error naming the fix.
    """
    queue = list(masks)

    def drop(x: torch.Tensor) -> torch.Tensor:
        if not queue:
            raise RuntimeError(
                f"the forward pass has more dropout sites than the {len(masks)} masks given; "
                "draw them with mask_shapes for this model and batch."
            )
        mask = queue.pop(0)
        if mask.shape != x.shape:
            raise ValueError(
                f"dropout mask of shape {tuple(mask.shape)} for an activation of shape "
                f"{tuple(x.shape)}; draw the masks with mask_shapes for this batch."
            )
        return (x * mask).to(x.dtype)  # a bf16 activation is scaled exactly, then rounded

    return drop


def mask_shapes(cfg: TransformerConfig, batch: int, length: int, *, last_only: bool = False) -> list[torch.Size]:
    """Shapes of the dropout masks of one training pass on (batch, length) tokens, in draw order.

    Read off :func:`masked_forward` run on the meta device (no computation), so they follow the
    code; a test checks them against the ``nn.Dropout`` layers ``forward`` calls.
    """
    return list(_mask_shapes(cfg, batch, length, last_only))


@functools.lru_cache(maxsize=64)
def _mask_shapes(cfg: TransformerConfig, batch: int, length: int, last_only: bool) -> tuple[torch.Size, ...]:
    shapes: list[torch.Size] = []

    def record(x: torch.Tensor) -> torch.Tensor:
        shapes.append(x.shape)
        return x

    model = Transformer(cfg).to("meta")
    with torch.no_grad():
        masked_forward(model, torch.zeros(batch, length, dtype=torch.long, device="meta"), record, last_only=last_only)
    return tuple(shapes)


def trailing_part(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """The last ``shape[i]`` entries of ``t`` along every dimension i (a view).

    Cuts a mask drawn for every position down to the positions ``last_only`` computes.
    """
    if t.ndim != len(shape) or any(n > m for n, m in zip(shape, t.shape)):
        raise ValueError(f"cannot cut a tensor of shape {tuple(t.shape)} down to {tuple(shape)}.")
    return t[tuple(slice(m - n, None) for n, m in zip(shape, t.shape))]
