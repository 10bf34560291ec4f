"""The data a stack of seeds trains on, and each seed's order of it.

:class:`PrefixData`: token sequences scored at the last position, their shared prefixes stored
once; :class:`SequenceData`: sequences scored at every position. :func:`epoch_order` is the order
in which a seed visits the examples in an epoch, drawn from its own generator.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

__all__ = ["Data", "PrefixData", "SequenceData", "epoch_order"]


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The order in which seed ``seed`` visits ``n`` training examples in ``epoch``.

    Drawn from its own generator, so a resumed run, or a seed trained with others, sees the same order.
    """
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))


def _fingerprint(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.cpu().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class PrefixData:
    """Token sequences scored at the last position, with shared prefixes stored once.

    ``tokens[i] = [*prefixes[index[i]], last[i]]`` and ``targets[i]`` is the answer at the last position.
    """

    last: torch.Tensor
    prefixes: torch.Tensor
    index: torch.Tensor
    targets: torch.Tensor

    @classmethod
    def from_tokens(cls, x: torch.Tensor, y: torch.Tensor) -> PrefixData:
        """From inputs (N, T) and targets (N,) or (N, T) (only the last target is used)."""
        if x.ndim != 2 or x.shape[1] < 2:
            raise ValueError(f"inputs must be (N, T) with T >= 2, got {tuple(x.shape)}.")
        y = y[:, -1] if y.ndim == 2 else y
        if y.shape != (x.shape[0],):
            raise ValueError(f"targets must be (N,) or (N, T) for inputs {tuple(x.shape)}, got {tuple(y.shape)}.")
        prefixes, index = torch.unique(x[:, :-1], dim=0, return_inverse=True)
        return cls(x[:, -1].contiguous(), prefixes, index, y.contiguous())

    def __len__(self) -> int:
        return self.last.shape[0]

    @property
    def length(self) -> int:
        return self.prefixes.shape[1] + 1

    def tokens(self, idx: torch.Tensor) -> torch.Tensor:
        """The full token sequences of rows ``idx`` (any shape), (*idx.shape, T)."""
        return torch.cat([self.prefixes[self.index[idx]], self.last[idx][..., None]], dim=-1)

    def to(self, device) -> PrefixData:
        return PrefixData(*(t.to(device) for t in (self.last, self.prefixes, self.index, self.targets)))

    def fingerprint(self) -> str:
        return _fingerprint(self.last, self.prefixes, self.index, self.targets)


@dataclass(frozen=True)
class SequenceData:
    """Token sequences (N, T) scored at every position against ``targets`` (N, T)."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __post_init__(self):
        if self.inputs.ndim != 2 or self.targets.shape != self.inputs.shape:
            raise ValueError(
                f"inputs and targets must both be (N, T), got {tuple(self.inputs.shape)} "
                f"and {tuple(self.targets.shape)}."
            )

    def __len__(self) -> int:
        return self.inputs.shape[0]

    @property
    def length(self) -> int:
        return self.inputs.shape[1]

    def to(self, device) -> SequenceData:
        return SequenceData(self.inputs.to(device), self.targets.to(device))

    def fingerprint(self) -> str:
        return _fingerprint(self.inputs, self.targets)


Data = PrefixData | SequenceData
