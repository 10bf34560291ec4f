"""Linear layers of stacked seeds: one matrix product per seed where a batched one would idle CPU threads.

Under ``vmap`` over the seed dimension, a linear layer whose weights differ per seed becomes one
batched matrix product (``bmm``). On a CPU, PyTorch spreads a batched product's matrices over its
threads, one matrix per thread: three seeds on two threads keep one thread idle for a third of
every product (``benchmarks/train_throughput.py``: the engine's products ran at 139-156 GFLOP/s
batched and at 182-195 GFLOP/s one seed at a time, on two threads of an AMD EPYC). One product per
seed lets every thread work on each. At the engine's sizes both call the same matrix kernel on
the same operands, so the values are the same, bit for bit (a test holds training equal at the
book's model size); products of fewer than ``MIN_ROWS`` rows, which MKL may round otherwise,
stay batched.

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

import torch
import torch.nn.functional as F
from torch import nn

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


# Below this many rows a product is too small to gain from splitting, and MKL's small-matrix
# kernels may round it otherwise than its batched one: it stays batched.
MIN_ROWS = 64


def _products(a: torch.Tensor, b: torch.Tensor, split: bool) -> torch.Tensor:
    """``torch.bmm(a, b)`` for (S, M, K) and (S, K, N); with ``split``, one product per seed."""
    if not split:
        return torch.bmm(a, b)
    out = torch.empty(a.shape[0], a.shape[1], b.shape[2], dtype=torch.result_type(a, b), device=a.device)
    for i in range(a.shape[0]):
        torch.mm(a[i], b[i], out=out[i])
    return out


class StackedLinear(torch.autograd.Function):
    """``x[s] @ weight[s].T + bias[s]`` for every seed s, one matrix product per seed (of ``MIN_ROWS`` rows or more).

    x (S, ..., in), weight (S, out, in), bias (S, out) or None. The backward pass computes the
    products autograd computes for a batched ``F.linear``: the input's gradient ``dy @ W`` and
    the weight's as the transpose of ``x^T @ dy``.
    """

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        s, k = x.shape[0], x.shape[-1]
        x2 = x.reshape(s, -1, k)
        y = _products(x2, weight.transpose(1, 2), x2.shape[1] >= MIN_ROWS)
        if bias is not None:
            y += bias[:, None]
        return y.view(*x.shape[:-1], weight.shape[1])

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight = ctx.saved_tensors
        s, k, n = x.shape[0], x.shape[-1], weight.shape[1]
        dy2 = dy.reshape(s, -1, n)
        split = dy2.shape[1] >= MIN_ROWS
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _products(dy2, weight, split).view(x.shape)
        if ctx.needs_input_grad[1]:
            dw = _products(x.reshape(s, -1, k).transpose(1, 2), dy2, split).transpose(1, 2)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(1)
        return dx, dw, db


class _Linear(torch.autograd.Function):
    """``F.linear`` whose rule under ``vmap`` is :class:`StackedLinear` on the stacked tensors."""

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return F.linear(x, weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight = ctx.saved_tensors
        dx = dy @ weight
        dw = dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None
        return dx, dw, db

    @staticmethod
    def vmap(info, in_dims, x, weight, bias):
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
