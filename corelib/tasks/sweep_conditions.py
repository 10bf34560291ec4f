"""A grokking sweep's conditions and the settings they share.

A **condition** (:class:`Condition`) is a modulus ``p``, a weight decay and a batch size (``None``:
full batch); :class:`SweepConfig` holds what every condition of a sweep shares (architecture,
optimiser, data split, stopping rule), :data:`PAPER_SWEEPS` the paper's two sweeps. A condition's
data is the fixed split of all ``p^2`` pairs (:func:`condition_data`), cut into minibatches as
:func:`batch_plan` says. Training them is :mod:`corelib.tasks.condition_stacks`, running and
storing them :mod:`corelib.tasks.sweeps`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .._checks import check_settings, check_split
from ..engine import PrefixData, resolve_precision
from ..models import TransformerConfig, default_device
from . import modular
from .modular import modular_addition_split

__all__ = ["PAPER_SWEEPS", "SweepConfig", "Condition", "check_seeds", "condition_data", "batch_plan"]

PAPER_SWEEPS = {
    "n_seeds": 12,
    "omega_p": 53,
    "omegas": [0.3, 0.5, 1.0, 1.5, 2.0, 3.0],
    "omega_batch_size": 512,
    "omega_max_epochs": 30000,
    "moduli": [31, 43, 53, 61, 79, 89, 101],
    "p_weight_decay": 1.0,
    "p_batch_size": None,
    "p_max_epochs": 30000,
}
"""The paper's two sweeps (its appendix; the caps from the reference code); with
:class:`SweepConfig`'s defaults, the settings at which the sweep claims can be reproduced."""


@dataclass(frozen=True)
class SweepConfig:
    """What is shared by every condition of a sweep: architecture, optimiser, data and stopping rule.

    Defaults are the paper's: one post-norm block, width 128, 4 heads, MLP 512, AdamW lr 1e-3,
    half of the ``p^2`` pairs for training (split seed 42), threshold 0.99, stop 100 epochs after
    generalisation, at most 30 000 epochs; dropout 0.1 during training, the default of the
    PyTorch encoder layer of the paper's reference code (accuracies are measured without it).
    """

    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    n_layers: int = 1
    norm: str = "post"
    lr: float = 1e-3
    train_fraction: float = 0.5
    split_seed: int = 42
    threshold: float = 0.99
    patience_epochs: int = 100
    max_epochs: int = 30000
    dropout: float = 0.1  # the reference's encoder layer (PyTorch's default); the paper is silent
    split_permutation: str = "torch"  # the reference sweep's torch.randperm (its modular experiment: "numpy")
    # The reference draws a fresh permutation whenever the next minibatch would run past its end,
    # so the last n mod B examples of each permutation are skipped (2 steps per permutation at
    # p = 53, B = 512). True keeps that partial batch instead (3 steps).
    keep_partial_batch: bool = False
    # "bf16": training passes in bf16 (corelib.engine.StackOptimizer), accuracies in fp32; "auto": bf16 where native
    precision: str = "fp32"

    def __post_init__(self):
        object.__setattr__(self, "precision", resolve_precision(self.precision, default_device()))
        check_settings(
            "SweepConfig",
            rates={"lr": self.lr},
            fractions={"threshold": self.threshold},
            non_negative={"patience_epochs": self.patience_epochs, "dropout": self.dropout},
            epochs={"max_epochs": self.max_epochs},
        )
        check_split("SweepConfig", self.train_fraction)
        if self.split_permutation not in ("numpy", "torch"):
            raise ValueError(f"split_permutation must be 'numpy' or 'torch', got {self.split_permutation!r}.")
        self.model_config(3)  # validates the architecture (d_model divisible by n_heads, norm)

    def model_config(self, p: int) -> TransformerConfig:
        """The transformer for modulus ``p`` (vocabulary ``p``, two-token context)."""
        return modular.model_config(self, p)


@dataclass(frozen=True)
class Condition:
    """One point of a sweep: modulus ``p``, weight decay and batch size (``None`` = full batch)."""

    p: int
    weight_decay: float
    batch_size: int | None = None

    def __post_init__(self):
        if isinstance(self.p, bool) or int(self.p) != self.p or self.p < 2:
            raise ValueError(f"p must be an integer modulus >= 2, got {self.p!r}.")
        object.__setattr__(self, "p", int(self.p))
        wd = float(self.weight_decay)
        if not (math.isfinite(wd) and wd >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}.")
        object.__setattr__(self, "weight_decay", wd)
        if self.batch_size is not None:
            if int(self.batch_size) != self.batch_size or self.batch_size < 1:
                raise ValueError(
                    f"batch_size must be a positive integer or None (full batch), got {self.batch_size!r}."
                )
            object.__setattr__(self, "batch_size", int(self.batch_size))

    def label(self) -> str:
        """Short human-readable name, e.g. ``p=53 wd=1 B=512``."""
        return f"p={self.p} wd={self.weight_decay:g} B={self.batch_size or 'full'}"


def check_seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    """``seeds`` as a tuple of distinct non-negative integers (each seed is one model), or an error naming the fix."""
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("no seeds given; pass e.g. seeds=[42, 43].")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}; each seed is one model.")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be >= 0 (they seed torch generators), got {list(seeds)}.")
    return seeds


def condition_data(cond: Condition, cfg: SweepConfig) -> tuple[PrefixData, PrefixData]:
    """Training and test sets of a condition (the fixed split of all ``p^2`` pairs)."""
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed, cfg.split_permutation)
    return PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)


def batch_plan(n: int, batch_size: int | None, keep_partial_batch: bool = False) -> dict[str, int]:
    """How ``n`` training examples are cut into minibatches of ``batch_size`` (None: full batch).

    ``batch``: the batch size used (at most n); ``steps_per_permutation``: steps drawn from one
    permutation (``n // batch``, or ``ceil(n / batch)`` when the partial batch is kept);
    ``skipped``: examples of a permutation never used (``n mod batch``, or 0);
    ``steps_per_epoch``: ``ceil(n / batch)``, the unit of the caps and the patience.
    """
    if n < 1 or (batch_size is not None and batch_size < 1):
        raise ValueError(f"need n >= 1 and a positive batch size (or None), got n={n}, batch_size={batch_size}.")
    batch = min(batch_size or n, n)
    per_epoch = -(-n // batch)
    skipped = 0 if keep_partial_batch else n % batch
    return {
        "batch": batch,
        "steps_per_permutation": per_epoch if keep_partial_batch else n // batch,
        "skipped": skipped,
        "steps_per_epoch": per_epoch,
    }
