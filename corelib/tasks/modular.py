"""The modular-addition task: ``a + b = c (mod p)`` as a two-token sequence.

Inputs are ``[a, b]`` and targets ``[b, c]`` (next-token form); only the last position is
scored. All ``p^2`` pairs are permuted with a fixed seed and split into train and test halves.
Chance accuracy is ``1/p``.
"""
from __future__ import annotations

import torch

__all__ = ["all_pairs", "modular_addition_split"]


def all_pairs(p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair: inputs (p^2, 2) ``[a, b]`` and targets (p^2, 2) ``[b, (a + b) mod p]``."""
    if p < 2:
        raise ValueError(f"the modulus p must be at least 2, got {p}.")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.flatten(), b.flatten()
    return torch.stack([a, b], dim=1), torch.stack([b, (a + b) % p], dim=1)


def modular_addition_split(
    p: int = 53, train_fraction: float = 0.5, seed: int = 42
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``((x_train, y_train), (x_test, y_test))``: all pairs permuted with ``seed`` and split.

    The training set gets ``floor(train_fraction * p^2)`` pairs (1 404 of 2 809 for p = 53).
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}.")
    x, y = all_pairs(p)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n_train = int(train_fraction * len(x))
    if n_train == 0 or n_train == len(x):
        raise ValueError(f"train_fraction {train_fraction} leaves an empty split for p = {p}.")
    tr, te = order[:n_train], order[n_train:]
    return (x[tr], y[tr]), (x[te], y[te])
