"""Causal interventions on a core: keep it, remove it, or flip it, at a named hook point.

All models in the book (toy transformers and pretrained language models) are intervened on the
same way: a small pure hook function ``fn(act, hook)`` passed to
``model.run_with_hooks(tokens, fwd_hooks=[(hook_name, fn)])``.

* keep (core-only, sufficiency):     ``P h``          or centred ``mu + P (h - mu)``
* remove (core-removed, necessity):  ``h - P h``      or centred ``h - P (h - mu)``
* flip (reflection, steering):       ``h - 2 P h``    or centred ``h - 2 P (h - mu)``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import torch

from .ace import Core

__all__ = ["MODES", "ablation_curve", "accuracy", "intervention_accuracy", "intervention_hook", "refine_rank"]

MODES = ("keep", "remove", "flip")
Positions = Literal["all", "last"] | torch.Tensor


def _apply(core: Core, mode: str, h: torch.Tensor, centered: bool) -> torch.Tensor:
    return getattr(core, mode)(h, centered=centered)


def intervention_hook(
    core: Core, mode: str, *, centered: bool = False, positions: Positions = "all"
) -> Callable[[torch.Tensor, object], torch.Tensor]:
    """A TransformerLens hook ``fn(act, hook)`` applying ``mode`` to activations (batch, pos, D).

    Args:
        core: the core to intervene on.
        mode: ``"keep"``, ``"remove"`` or ``"flip"``.
        centered: intervene relative to ``core.mean`` (language models) or not (toy models).
        positions: ``"all"``, ``"last"``, or a (batch,) tensor with one position per example
            (e.g. the last real token of padded prompts).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    if not (isinstance(positions, torch.Tensor) or positions in ("all", "last")):
        raise ValueError(f"positions must be 'all', 'last' or a tensor of indices, got {positions!r}.")

    def fn(act: torch.Tensor, hook=None) -> torch.Tensor:
        if isinstance(positions, str) and positions == "all":
            return _apply(core, mode, act, centered)
        if isinstance(positions, str):  # "last"
            idx = torch.full((act.shape[0],), act.shape[1] - 1, device=act.device)
        else:
            idx = positions.to(act.device)
        rows = torch.arange(act.shape[0], device=act.device)
        out = act.clone()
        out[rows, idx] = _apply(core, mode, act[rows, idx], centered)
        return out

    return fn


@torch.no_grad()
def accuracy(
    model,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    score_positions: Literal["all", "last"] = "all",
    fwd_hooks: Sequence[tuple[str, Callable]] = (),
    batch_size: int = 1024,
) -> float:
    """Next-token accuracy of ``model`` (a HookedRootModule) on ``inputs`` (N, T) against
    ``targets`` (N, T), run with ``fwd_hooks`` (none: the unmodified model).

    ``score_positions``: which positions count, all of them or only the last one (as in modular
    addition, where only the answer is scored).
    """
    if score_positions not in ("all", "last"):
        raise ValueError(f"score_positions must be 'all' or 'last', got {score_positions!r}.")
    if inputs.shape[:2] != targets.shape[:2]:
        raise ValueError(f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} differ in shape.")
    model.eval()
    device = next(model.parameters()).device
    correct = total = 0
    for i in range(0, inputs.shape[0], batch_size):
        x = inputs[i : i + batch_size].to(device)
        y = targets[i : i + batch_size].to(device)
        logits = model.run_with_hooks(x, fwd_hooks=list(fwd_hooks))
        if score_positions == "last":
            logits, y = logits[:, -1], y[:, -1]
        correct += int((logits.argmax(-1) == y).sum())
        total += y.numel()
    return correct / total


def intervention_accuracy(
    model,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    hook_name: str,
    core: Core,
    mode: str,
    *,
    positions: Positions = "all",
    score_positions: Literal["all", "last"] = "all",
    centered: bool = False,
    batch_size: int = 1024,
) -> float:
    """:func:`accuracy` with ``core`` kept, removed or flipped (``mode``) at ``hook_name``.

    ``positions`` and ``centered`` are those of :func:`intervention_hook`.
    """
    hook = intervention_hook(core, mode, centered=centered, positions=positions)
    return accuracy(
        model, inputs, targets, score_positions=score_positions, fwd_hooks=[(hook_name, hook)], batch_size=batch_size
    )


def _first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """Smallest r in [lo, hi] with pred(r), scanning upward; None if there is none.

    A scan, because the criteria are not monotone in r: once a removal has destroyed the answer,
    accuracy fluctuates around chance, so "≤ 2/p" flips back and forth for larger r and a
    bisection can land on a later crossing.
    """
    for r in range(lo, hi + 1):
        if pred(r):
            return r
    return None


def refine_rank(
    full_core: Core,
    accuracy: Callable[[Core, str], float],
    *,
    baseline: float,
    chance_level: float,
    start_rank: int = 1,
    tolerance: float = 0.001,
) -> tuple[int | None, int | None]:
    """Necessary and sufficient core ranks: the smallest ranks meeting each criterion (linear scans).

    Args:
        full_core: a core whose leading r columns are the rank-r core (e.g. ``rank=D``).
        accuracy: ``accuracy(core, mode)`` with mode ``"keep"`` or ``"remove"``.
        baseline: accuracy of the unmodified model.
        chance_level: removal must drop accuracy to at most this (the paper uses 2/p).
        start_rank: the energy rank; the necessary rank is searched from here up.
        tolerance: core-only must reach ``baseline - tolerance`` to count as sufficient.

    Returns:
        ``(necessary, sufficient)``: the smallest r >= start_rank whose removal drops accuracy to
        ``chance_level`` or below, and the smallest r whose core-only accuracy reaches the
        baseline. ``None`` where no rank up to the core's size satisfies the criterion.
    """
    d = full_core.rank
    necessary = _first_true(start_rank, d, lambda r: accuracy(full_core.truncate(r), "remove") <= chance_level)
    sufficient = _first_true(1, d, lambda r: accuracy(full_core.truncate(r), "keep") >= baseline - tolerance)
    return necessary, sufficient


def ablation_curve(
    full_core: Core, accuracy: Callable[[Core, str], float], mode: str, ranks: Sequence[int] | None = None
) -> np.ndarray:
    """``accuracy(full_core.truncate(r), mode)`` for every r in ``ranks`` (default 1..rank).

    The whole curve that :func:`refine_rank` scans until its criterion first holds: with
    ``mode="remove"`` it shows how far accuracy falls as more core directions are taken out,
    and whether it stays below the chance threshold once it has got there.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}.")
    ranks = range(1, full_core.rank + 1) if ranks is None else ranks
    bad = [r for r in ranks if not 1 <= r <= full_core.rank]
    if bad:
        raise ValueError(f"ranks {bad} lie outside 1..{full_core.rank}, the ranks of this core.")
    return np.array([accuracy(full_core.truncate(r), mode) for r in ranks])
