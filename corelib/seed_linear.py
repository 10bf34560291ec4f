"""Linear layers of stacked seeds: one matrix product per seed where a batched one would idle CPU threads.

Under ``vmap`` over the seed dimension, a linear layer whose weights differ per seed becomes one
batched matrix product (``bmm``). On a CPU, PyTorch spreads a batched product's matrices over its
threads, one matrix per thread: three seeds on two threads keep one thread idle for a third of
every product (``benchmarks/train_throughput.py``: the engine's products ran at 139-156 GFLOP/s
batched and at 182-195 GFLOP/s one seed at a time, on two threads of an AMD EPYC). One product per
seed lets every thread work on each.

The two need not round alike: the matrix library picks its kernel by shape, layout and thread
count, and on two threads the engine's products came out equal bit for bit while at 3, 4 or 8
threads some did not (those with 53 or 24 columns). So each product's shape and layout is checked
once per process, on random operands, and split only if both ways gave the same values
(:func:`_products`): the engine computes the numbers it computed before, on any thread count,
and a seed's numbers do not depend on how many seeds train beside it.

:func:`linear` is what the engine's forward passes (:mod:`corelib.fastpath`) call in place of
``layer(x)``: that is all it does, unless the caller has entered :func:`per_seed` (the engine
does, around a training pass, where :func:`per_seed_products` says one product per seed is
faster). Then, under one level of ``vmap``, its rule hands the stacked tensors to
:class:`StackedLinear`, whose forward and backward compute what autograd computes for the batched
product: the same products, the bias added in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._dispatch import dispatch_mode_active

__all__ = ["linear", "per_seed", "per_seed_products", "StackedLinear"]

_PER_SEED: ContextVar[bool] = ContextVar("per_seed", default=False)


@contextmanager
def per_seed(enabled: bool = True) -> Iterator[None]:
    """Within this block, :func:`linear` under ``vmap`` computes one product per seed (if ``enabled``).

    The engine enters it around a training pass where :func:`per_seed_products` says it is
    faster; the backward pass of what was computed inside follows the same way.
    """
    token = _PER_SEED.set(enabled)
    try:
        yield
    finally:
        _PER_SEED.reset(token)


def per_seed_products(n_seeds: int, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether ``n_seeds`` stacked products run faster one per seed than as one batched product.

    Only in float32 on a CPU, and only where the seeds do not divide evenly among its threads and
    are few (fewer than four per thread), so a thread would idle for a sizeable part of the
    product. A bf16 batched product (oneDNN) already keeps the threads busy: one per seed was
    slower. On a GPU one batched product is always faster than a loop of launches.
    """
    threads = torch.get_num_threads()
    return device.type == "cpu" and dtype == torch.float32 and n_seeds % threads != 0 and n_seeds < 4 * threads


# Per product shape, layout, dtype and thread count: whether one product per seed gave exactly the
# batched product's values on this machine (the first time that product came up).
_same_as_batched: dict[tuple, bool] = {}


def _split_products(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.bmm(a, b)`` computed one product per seed."""
    out = torch.empty(a.shape[0], a.shape[1], b.shape[2], dtype=torch.result_type(a, b), device=a.device)
    for i in range(a.shape[0]):
        torch.mm(a[i], b[i], out=out[i])
    return out


def _products(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.bmm(a, b)`` for (S, M, K) and (S, K, N), one product per seed where that gives its values.

    Which kernel a matrix library runs depends on the shapes, the layout and the thread count (at
    3, 4 or 8 threads some products of 53 or 24 columns round otherwise one seed at a time). So
    the first time a product comes up, both are computed on random operands of its shape and
    layout and compared; the split is used for it from then on only if the two were equal bit
    for bit.
    """
    if dispatch_mode_active():  # counting, say: the same products, batched, and no check to count
        return torch.bmm(a, b)
    key = (a.shape, a.stride(), b.shape, b.stride(), a.dtype, b.dtype, a.device, torch.get_num_threads())
    if key not in _same_as_batched:
        a_test, b_test = _like(a), _like(b)
        _same_as_batched[key] = torch.equal(torch.bmm(a_test, b_test), _split_products(a_test, b_test))
    return _split_products(a, b) if _same_as_batched[key] else torch.bmm(a, b)


def _like(t: torch.Tensor) -> torch.Tensor:
    """Random values in the shape and layout of ``t``, from a generator of their own (the global one is left alone)."""
    g = torch.Generator(device=t.device).manual_seed(0)
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(torch.randn(t.shape, generator=g, dtype=t.dtype, device=t.device))


def _save_for_backward(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    """What a linear layer's backward pass needs: its input, its weight and whether it has a bias."""
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


class StackedLinear(torch.autograd.Function):
    """``x[s] @ weight[s].T + bias[s]`` for every seed s, one matrix product per seed where that gives the same values.

    x (S, ..., in), weight (S, out, in), bias (S, out) or None. The backward pass computes the
    products autograd computes for a batched ``F.linear``: the input's gradient ``dy @ W`` and
    the weight's as the transpose of ``x^T @ dy``.
    """

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        s, k = x.shape[0], x.shape[-1]
        y = _products(x.reshape(s, -1, k), weight.transpose(1, 2))
        if bias is not None:
            y += bias[:, None]
        return y.view(*x.shape[:-1], weight.shape[1])

    setup_context = staticmethod(_save_for_backward)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        s, k, n = x.shape[0], x.shape[-1], weight.shape[1]
        dy2 = dy.reshape(s, -1, n)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _products(dy2, weight).view(x.shape)
        if ctx.needs_input_grad[1]:
            dw = _products(x.reshape(s, -1, k).transpose(1, 2), dy2).transpose(1, 2)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(1)
        return dx, dw, db


class _Linear(torch.autograd.Function):
    """``F.linear`` whose rule under ``vmap`` is :class:`StackedLinear` on the stacked tensors."""

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return F.linear(x, weight, bias)

    setup_context = staticmethod(_save_for_backward)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        dx = dy @ weight
        dw = dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None
        return dx, dw, db

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        if in_dims[0] is None or in_dims[1] is None:  # nothing to split by seed: the batched product
            return torch.vmap(F.linear, in_dims=in_dims)(x, weight, bias), 0
        x, weight, bias = (_seeds_first(t, d, info.batch_size) for t, d in zip((x, weight, bias), in_dims))
        return StackedLinear.apply(x, weight, bias), 0


def _seeds_first(t: torch.Tensor | None, dim: int | None, n_seeds: int) -> torch.Tensor | None:
    """``t`` with its seed dimension first; an argument shared by every seed is expanded to them."""
    if t is None:
        return None
    if dim is None:
        return t.expand(n_seeds, *t.shape)
    return t.movedim(dim, 0)


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)``; under ``vmap`` over stacked seeds and within :func:`per_seed`, one product per seed."""
    if not _PER_SEED.get():
        return layer(x)
    return _Linear.apply(x, layer.weight, layer.bias)
