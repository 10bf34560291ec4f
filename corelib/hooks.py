"""Functions at named hook points, and how they reach a model.

A hook is a pure function ``fn(act, hook)`` of the activations at one named point of a model.
TransformerLens-style models take a list of ``(hook_name, fn)`` in ``run_with_hooks``; on a plain
``nn.Module`` (a Hugging Face model, say) :meth:`CoreHooks.on` registers each ``fn`` on the
output of the submodule that ``hook_name`` names.

:func:`intervention_hook` is the one hook of the book: it keeps, removes or flips a core
(anything with the methods ``keep``, ``remove`` and ``flip`` of :class:`corelib.ace.Core`). It
lives here, below both :mod:`corelib.ace` (whose ``Core.hooks`` builds on it) and
:mod:`corelib.interventions` (whose accuracies and rank scans run it), so that of those two
only the interventions know the core, and not the reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal, Protocol

import torch

__all__ = ["MODES", "CoreHooks", "Positions", "intervention_hook", "nearest_names", "output_hook"]

MODES = ("keep", "remove", "flip")
Positions = Literal["all", "last"] | torch.Tensor


class Projection(Protocol):
    """What an intervention needs of a core: its three projections of activations (..., D)."""

    def keep(self, h: torch.Tensor, centered: bool = False) -> torch.Tensor: ...
    def remove(self, h: torch.Tensor, centered: bool = False) -> torch.Tensor: ...
    def flip(self, h: torch.Tensor, centered: bool = False) -> torch.Tensor: ...


def _apply(core: Projection, mode: str, h: torch.Tensor, centered: bool) -> torch.Tensor:
    return getattr(core, mode)(h, centered=centered)


def intervention_hook(
    core: Projection, mode: str, *, centered: bool = False, positions: Positions = "all"
) -> Callable[[torch.Tensor, object], torch.Tensor]:
    """A TransformerLens hook ``fn(act, hook)`` applying ``mode`` to activations (batch, pos, D).

    Args:
        core: the core to intervene on (a :class:`corelib.ace.Core`).
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


class CoreHooks(list):
    """``[(hook_name, fn)]`` for ``run_with_hooks``; :meth:`on` applies it to a plain ``nn.Module``."""

    @contextmanager
    def on(self, model: torch.nn.Module) -> Iterator[torch.nn.Module]:
        """Register the hooks on the submodules of ``model`` named by their hook names, for the block."""
        handles = []
        try:
            for name, fn in self:
                try:
                    module = model.get_submodule(name)
                except AttributeError:
                    near = nearest_names((n for n, _ in model.named_modules() if n), name)
                    raise ValueError(f"{type(model).__name__} has no submodule {name!r}; nearest: {near}.") from None
                handles.append(module.register_forward_hook(output_hook(fn)))
            yield model
        finally:
            for h in handles:
                h.remove()


def output_hook(fn: Callable) -> Callable:
    """A forward hook replacing a module's output (or the first element of a tuple output) by ``fn(output)``."""

    def hook(module, inputs, output):
        if isinstance(output, tuple):
            return (fn(output[0], None), *output[1:])
        return fn(output, None)

    return hook


def nearest_names(names: Iterable[str], name: str, k: int = 5) -> list[str]:
    """The ``k`` names closest to ``name`` by edit distance, for the message of a misspelt hook point."""
    return sorted(names, key=lambda n: _distance(n, name))[:k]


def _distance(a: str, b: str) -> int:
    """Edit distance between two names."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
