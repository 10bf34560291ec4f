"""The modular-addition task: ``a + b = c (mod p)`` as a two-token sequence.

Inputs are ``[a, b]`` and targets ``[b, c]`` (next-token form); only the last position is
scored. All ``p^2`` pairs are permuted with a fixed seed and split into train and test halves.
Chance accuracy is ``1/p``.

The reference code permutes the pairs two ways: its modular-addition experiment with NumPy's
``RandomState(42).permutation``, its grokking sweeps with ``torch.randperm`` from a generator
seeded 42. Both are here (``permutation="numpy"`` / ``"torch"``), so each chapter trains on
exactly the reference's split.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from ..models import TransformerConfig

__all__ = ["all_pairs", "pair_order", "modular_addition_split", "model_config"]


def model_config(settings: object, p: int) -> TransformerConfig:
    """The transformer that learns ``a + b mod p``: vocabulary ``p`` and the architecture of
    ``settings`` (its ``d_model``, ``n_heads``, ``d_ff``, ``n_layers``, ``norm`` and ``dropout``:
    a chapter's ``ModularParams`` or a sweep's ``SweepConfig``, the one place both are read)."""
    names = ("d_model", "n_heads", "d_ff", "n_layers", "norm", "dropout")
    return TransformerConfig(vocab_size=p, **{k: getattr(settings, k) for k in names})


def all_pairs(p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair: inputs (p^2, 2) ``[a, b]`` and targets (p^2, 2) ``[b, (a + b) mod p]``."""
    if p < 2:
        raise ValueError(f"the modulus p must be at least 2, got {p}.")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.flatten(), b.flatten()
    return torch.stack([a, b], dim=1), torch.stack([b, (a + b) % p], dim=1)


def pair_order(n: int, seed: int, permutation: Literal["numpy", "torch"]) -> torch.Tensor:
    """A permutation of ``range(n)``: NumPy's ``RandomState(seed)`` or torch's ``randperm``."""
    if permutation == "numpy":
        return torch.from_numpy(np.random.RandomState(seed).permutation(n))
    if permutation == "torch":
        return torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    raise ValueError(f"permutation must be 'numpy' or 'torch', got {permutation!r}.")


def modular_addition_split(
    p: int = 53,
    train_fraction: float = 0.5,
    seed: int = 42,
    permutation: Literal["numpy", "torch"] = "numpy",
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``((x_train, y_train), (x_test, y_test))``: all pairs permuted with ``seed`` and split.

    The pairs are in the order ``a`` outer, ``b`` inner; the first ``floor(train_fraction *
    p^2)`` of the permutation train (1 404 of 2 809 for p = 53). ``permutation`` names the
    generator (see the module docstring): ``"numpy"`` is the reference's modular-addition
    experiment, ``"torch"`` its grokking sweeps.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}.")
    x, y = all_pairs(p)
    order = pair_order(len(x), seed, permutation)
    n_train = int(train_fraction * len(x))
    if n_train == 0 or n_train == len(x):
        raise ValueError(f"train_fraction {train_fraction} leaves an empty split for p = {p}.")
    tr, te = order[:n_train], order[n_train:]
    return (x[tr], y[tr]), (x[te], y[te])
