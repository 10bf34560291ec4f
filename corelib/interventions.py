"""Causal interventions on a core: keep it, remove it, or flip it, at a named hook point.

All models in the book (toy transformers and pretrained language models) are intervened on the
same way: a small pure hook function ``fn(act, hook)`` passed to
``model.run_with_hooks(tokens, fwd_hooks=[(hook_name, fn)])``, made by
:func:`corelib.hooks.intervention_hook` (re-exported here).

* keep (core-only, sufficiency):     ``P h``          or centred ``mu + P (h - mu)``
* remove (core-removed, necessity):  ``h - P h``      or centred ``h - P (h - mu)``
* flip (reflection, steering):       ``h - 2 P h``    or centred ``h - 2 P (h - mu)``

The rank scans (:func:`refine_rank`, :func:`ablation_curve`) take an accuracy callable
``accuracy(core, mode)``, one model run per rank. Where the hook is the input of a position-wise
read-out (the output of a model's last block, intervened and scored at one position),
:class:`ReadoutAccuracy` evaluates many ranks at once instead: the activations are taken once,
and only the read-out runs on every rank's intervened copy (:func:`rank_accuracies`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .ace import Core
from .hooks import MODES, Positions, intervention_hook

__all__ = [
    "MODES",
    "ReadoutAccuracy",
    "ablation_curve",
    "accuracy",
    "intervention_accuracy",
    "intervention_hook",
    "rank_accuracies",
    "rank_interventions",
    "refine_rank",
]


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


def _check_ranks(full_core: Core, ranks: Sequence[int]) -> None:
    bad = [r for r in ranks if not 1 <= r <= full_core.rank]
    if bad:
        raise ValueError(f"ranks {bad} lie outside 1..{full_core.rank}, the ranks of this core.")


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}.")


def rank_interventions(
    full_core: Core,
    mode: str,
    h: torch.Tensor,
    ranks: Sequence[int],
    *,
    centered: bool = False,
    chunk: int = 16,
) -> Iterator[torch.Tensor]:
    """``mode`` applied to ``h`` (N, D) with ``full_core.truncate(r)`` for every r in ``ranks`` (ascending).

    Yields the results in order, ``chunk`` ranks at a time, as (R, N, D) tensors in h's dtype.
    The projections are built up rank by rank (each adds its new directions' share to the
    previous one), so all ranks together cost one projection onto the largest of them. They are
    accumulated in float64, so a result differs from ``full_core.truncate(r).<mode>(h)`` only by
    that call's own rounding.
    """
    _check_mode(mode)
    _check_ranks(full_core, ranks)
    if any(a > b for a, b in zip(ranks, ranks[1:])):
        raise ValueError(f"ranks must be in ascending order, got {list(ranks)}.")
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of ranks, got {chunk}.")
    if h.ndim != 2 or h.shape[1] != full_core.dim:
        raise ValueError(f"h must be (N, {full_core.dim}) for this core, got {tuple(h.shape)}.")
    return _interventions(full_core, mode, h, ranks, centered, chunk)  # checked now, computed when iterated


def _interventions(
    full_core: Core, mode: str, h: torch.Tensor, ranks: Sequence[int], centered: bool, chunk: int
) -> Iterator[torch.Tensor]:
    # float64 where the device has it (MPS has not: there on the CPU, each chunk moved back).
    x = h.double() if h.device.type != "mps" else h.cpu().double()
    q = torch.as_tensor(full_core.basis[:, : max(ranks, default=0)], dtype=x.dtype, device=x.device)
    mu = torch.as_tensor(full_core.mean, dtype=x.dtype, device=x.device)
    z = ((x - mu) if centered else x) @ q
    done, projection = 0, torch.zeros_like(x)
    for start in range(0, len(ranks), chunk):
        block = ranks[start : start + chunk]
        out = x.new_empty((len(block), *x.shape))
        for j, r in enumerate(block):
            projection = torch.addmm(projection, z[:, done:r], q[:, done:r].T, out=out[j])
            done = r
        projection = projection.clone()  # carried into the next chunk; out is overwritten below
        if mode == "keep":
            out = out.add_(mu) if centered else out
        else:
            out = out.mul_(-2 if mode == "flip" else -1).add_(x)
        yield out.to(h.device, h.dtype)


@torch.no_grad()
def rank_accuracies(
    full_core: Core,
    mode: str,
    h: torch.Tensor,
    targets: torch.Tensor,
    readout: Callable[[torch.Tensor], torch.Tensor],
    ranks: Sequence[int],
    *,
    centered: bool = False,
    chunk: int = 16,
) -> np.ndarray:
    """Accuracy of ``readout`` on ``h`` with ``mode`` applied by each rank-r truncation of ``full_core``.

    Args:
        full_core: a core whose leading r columns are the rank-r core.
        mode: ``"keep"``, ``"remove"`` or ``"flip"``.
        h: (N, D) activations at the hook, one row per example (the intervened, scored position).
        targets: (N,) the answer of each example.
        readout: the rest of the model after the hook, position-wise: (..., D) -> logits (..., K).
        ranks: the ranks r to evaluate, in any order.
        centered: intervene relative to ``full_core.mean`` (see :func:`intervention_hook`).
        chunk: ranks per read-out batch (memory: chunk x N x (D + K) numbers).

    Returns:
        (len(ranks),) accuracies: what :func:`intervention_accuracy` with ``positions="last"``,
        ``score_positions="last"`` gives for each truncation, when ``h`` is the last-position
        activation at a hook after which the model is ``readout``.
    """
    if targets.shape != h.shape[:1]:
        raise ValueError(f"targets must be ({h.shape[0]},), one per row of h, got {tuple(targets.shape)}.")
    targets = targets.to(h.device)
    order = np.argsort(np.asarray(ranks, dtype=np.int64), kind="stable")  # the projections build up in rank order
    ascending = [int(ranks[i]) for i in order]
    correct = [
        (readout(batch).argmax(-1) == targets).sum(-1).cpu()
        for batch in rank_interventions(full_core, mode, h, ascending, centered=centered, chunk=chunk)
    ]
    out = np.empty(len(ascending))
    out[order] = torch.cat(correct).numpy() / len(targets) if correct else []
    return out


@dataclass(frozen=True, eq=False)
class ReadoutAccuracy:
    """Intervention accuracy at the input of a position-wise read-out, evaluated for many ranks at once.

    Called as ``accuracy(core, mode)`` it is the accuracy callable the rank scans take; its
    :meth:`over_ranks` lets :func:`refine_rank` and :func:`ablation_curve` evaluate
    ``ranks_per_batch`` truncations in one read-out batch instead of one model run each.

    It gives the accuracies of the hooked model runs (:func:`intervention_accuracy` with
    ``positions="last"`` and ``score_positions="last"``) only when nothing after the hook mixes
    positions, e.g. at the output of the last block: then the scored position's logits are
    ``readout`` of its own activation, and the activations before the hook are the same for
    every core, so they are taken once.

    Attributes:
        h: (N, D) activations at the hook at the scored position of each example.
        targets: (N,) the answers.
        readout: the model after the hook, position-wise, (..., D) -> logits (..., K).
        centered: intervene relative to the core's mean.
        ranks_per_batch: ranks evaluated together (and scanned together by :func:`refine_rank`).
    """

    h: torch.Tensor
    targets: torch.Tensor
    readout: Callable[[torch.Tensor], torch.Tensor]
    centered: bool = False
    ranks_per_batch: int = 16

    def __call__(self, core: Core, mode: str) -> float:
        """Accuracy with ``core`` kept, removed or flipped."""
        return float(self.over_ranks(core, mode, [core.rank])[0])

    def over_ranks(self, full_core: Core, mode: str, ranks: Sequence[int]) -> np.ndarray:
        """Accuracy with ``full_core.truncate(r)`` for every r in ``ranks``."""
        return rank_accuracies(
            full_core,
            mode,
            self.h,
            self.targets,
            self.readout,
            ranks,
            centered=self.centered,
            chunk=self.ranks_per_batch,
        )


def _accuracies(full_core: Core, accuracy: Callable[[Core, str], float], mode: str, ranks: list[int]) -> np.ndarray:
    """``accuracy`` at the truncations of ``full_core`` to ``ranks``: in one call where it can."""
    over_ranks = getattr(accuracy, "over_ranks", None)
    if over_ranks is not None:
        return np.asarray(over_ranks(full_core, mode, ranks), dtype=float)
    return np.array([accuracy(full_core.truncate(r), mode) for r in ranks], dtype=float)


def _first_true(
    lo: int, hi: int, values: Callable[[list[int]], np.ndarray], pred: Callable[[float], bool], step: int = 1
) -> int | None:
    """Smallest r in [lo, hi] with pred(values(r)), scanning upward ``step`` ranks at a time; None if none.

    A scan, because the criteria are not monotone in r: once a removal has destroyed the answer,
    accuracy fluctuates around chance, so "≤ 2/p" flips back and forth for larger r and a
    bisection can land on a later crossing.
    """
    for start in range(lo, hi + 1, step):
        block = list(range(start, min(start + step, hi + 1)))
        hits = [r for r, v in zip(block, values(block)) if pred(v)]
        if hits:
            return hits[0]
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
        accuracy: ``accuracy(core, mode)`` with mode ``"keep"`` or ``"remove"``. If it has an
            ``over_ranks(full_core, mode, ranks)`` method (as :class:`ReadoutAccuracy` has), the
            scans use it, ``ranks_per_batch`` ranks at a time.
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
    step = getattr(accuracy, "ranks_per_batch", 1) if hasattr(accuracy, "over_ranks") else 1  # one run per rank

    def values(mode: str) -> Callable[[list[int]], np.ndarray]:
        return lambda ranks: _accuracies(full_core, accuracy, mode, ranks)

    necessary = _first_true(start_rank, d, values("remove"), lambda a: a <= chance_level, step)
    sufficient = _first_true(1, d, values("keep"), lambda a: a >= baseline - tolerance, step)
    return necessary, sufficient


def ablation_curve(
    full_core: Core, accuracy: Callable[[Core, str], float], mode: str, ranks: Sequence[int] | None = None
) -> np.ndarray:
    """``accuracy(full_core.truncate(r), mode)`` for every r in ``ranks`` (default 1..rank).

    The whole curve that :func:`refine_rank` scans until its criterion first holds: with
    ``mode="remove"`` it shows how far accuracy falls as more core directions are taken out,
    and whether it stays below the chance threshold once it has got there. An ``accuracy`` with
    an ``over_ranks`` method (:class:`ReadoutAccuracy`) computes the curve in batches of ranks.
    """
    _check_mode(mode)
    ranks = list(range(1, full_core.rank + 1) if ranks is None else ranks)
    _check_ranks(full_core, ranks)
    return _accuracies(full_core, accuracy, mode, ranks)
