"""AdamW over a stack of seeds: one weight decay per seed, one learning rate and AdamW per group
of consecutive models (the arms of a mixed stack), each computing what it computes alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .precision import PRECISIONS, resolve_precision
from .results import StoreError
from .seed_stack import SeedStack
from .training_data import Data

__all__ = ["StackOptimizer"]


@dataclass
class _Group:
    """The models at positions ``start`` to ``start + size`` of a stack: one learning rate, one AdamW."""

    name: Hashable
    size: int
    lr: float
    start: int = 0
    opt: torch.optim.AdamW | None = None
    views: list[torch.Tensor] | None = None  # its part of each stacked tensor; None: it has the whole stack

    @property
    def span(self) -> range:
        return range(self.start, self.start + self.size)


class StackOptimizer:
    """AdamW over a :class:`SeedStack`, with one weight decay per seed and one learning rate per group.

    AdamW's moments are elementwise, so one optimizer over the stacked tensors is S independent
    optimizers. The per-seed decay is applied here in the decoupled form and at the point of the
    step where ``torch.optim.AdamW`` applies it (``w <- w (1 - lr wd)`` before the Adam update).

    Groups (:meth:`joined`): consecutive models with a learning rate and an AdamW of their own, e.g.
    the arms of a mixed stack (:func:`train_mixed`). A group's AdamW runs over its part of each
    stacked tensor (a view), with its learning rate the Python number it has alone, so the fused
    kernel computes for it exactly what it computes for the group trained as a stack of its own: the
    same numbers, the same scalars, the same tensor sizes (the sizes matter: the kernel treats the last
    ``numel mod vector width`` elements of a tensor apart, so a group is not cut into single models).
    A learning rate per model in a float32 tensor would be another computation (the kernel forms
    ``lr / bias_correction`` in double precision and rounds it once) and is never used. The decay
    factor ``1 - lr wd`` is formed per group as alone: in double precision, then rounded. A stack of
    one group is the optimizer the engine always had: AdamW over the stacked tensors themselves.

    ``precision="bf16"``: each step computes its forward and backward passes with a bf16 copy of
    the weights, made once per step; the weights, their gradients, the loss and AdamW's state
    stay float32, and dropout scales the activations exactly before they are rounded.
    """

    def __init__(
        self,
        stack: SeedStack,
        lr: float,
        weight_decay: float | Sequence[float],
        precision: str = "fp32",
        *,
        name: Hashable = 0,
    ) -> None:
        self.precision = resolve_precision(precision, stack.device)
        self.dtype = PRECISIONS[self.precision]
        self.groups = [_Group(name, len(stack), lr)]
        self._build(stack, [None])
        self.set_decay(stack, weight_decay)

    @classmethod
    def _grouped(
        cls, stack: SeedStack, groups: list[_Group], decay: Sequence[float], states: list, precision: str
    ) -> StackOptimizer:
        new = cls.__new__(cls)
        new.precision, new.dtype, new.groups = precision, PRECISIONS[precision], groups
        new._build(stack, states)
        new.set_decay(stack, decay)
        return new

    def _build(self, stack: SeedStack, states: list[dict | None]) -> None:
        """An AdamW per group over its part of the weights, with its saved state (None: fresh)."""
        for v in stack.params.values():
            v.requires_grad_(True)
        whole, start = len(self.groups) == 1, 0
        for group, state in zip(self.groups, states, strict=True):
            group.start, start = start, start + group.size
            group.views = None if whole else [v.detach()[group.start : start] for v in stack.params.values()]
            tensors = list(stack.params.values()) if whole else group.views
            # The fused kernel: the same algorithm in one pass per tensor, equal up to float rounding.
            group.opt = torch.optim.AdamW(tensors, lr=group.lr, weight_decay=0.0, fused=True)
            if state is not None:
                group.opt.load_state_dict(state)
        if start != len(stack):
            raise ValueError(f"groups of {start} models for a stack of {len(stack)}.")

    def _single(self) -> _Group:
        if len(self.groups) != 1:
            raise ValueError(
                f"this optimizer has {len(self.groups)} groups ({[g.name for g in self.groups]}); "
                "name the group (tensors(name), spans) instead."
            )
        return self.groups[0]

    def _group(self, name: Hashable) -> _Group:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"no group {name!r} in this optimizer; its groups: {[g.name for g in self.groups]}.")

    @property
    def opt(self) -> torch.optim.AdamW:
        """The AdamW of an optimizer of one group."""
        return self._single().opt

    @property
    def lr(self) -> float:
        """The learning rate of an optimizer of one group."""
        return self._single().lr

    @property
    def spans(self) -> dict[Hashable, range]:
        """Each group's positions in the stack, by name."""
        return {g.name: g.span for g in self.groups}

    def set_decay(self, stack: SeedStack, weight_decay: float | Sequence[float]) -> None:
        """Use ``weight_decay`` (one value, or one per seed) from the next step on."""
        self.decay = torch.as_tensor(weight_decay, dtype=torch.float64).expand(len(stack)).clone()
        shrink = torch.cat([1.0 - g.lr * self.decay[g.start : g.start + g.size] for g in self.groups])
        self.shrink = {
            k: shrink.to(v.dtype).to(v.device).view(-1, *[1] * (v.ndim - 1)) for k, v in stack.params.items()
        }

    def step(
        self, stack: SeedStack, data: Data, idx: torch.Tensor, masks: list[torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One update of every seed on its rows ``idx`` (S, B); returns the losses (S,) and logits.

        ``masks``: the step's dropout masks (:class:`DropoutStreams`), for a model with dropout.
        """
        if (masks is None) != (not stack.cfg.dropout):
            raise ValueError(
                "a model with dropout needs the step's masks (DropoutStreams.draw) and one "
                f"without takes none; dropout is {stack.cfg.dropout}."
            )
        params = stack.params
        if self.dtype != torch.float32:
            params = {k: v.to(self.dtype) for k, v in params.items()}  # differentiable: grads reach the fp32 weights
        logits = stack.train_logits(data, idx, masks, params).float()
        targets = data.targets[idx]
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        losses = losses.view(len(stack), -1).mean(dim=1)
        for p in stack.params.values():
            p.grad = None
        losses.sum().backward()  # seeds share no weights, so each gets its own gradient
        with torch.no_grad():
            for k, p in stack.params.items():
                p.mul_(self.shrink[k])
        for group in self.groups:
            if group.views is None:
                group.opt.step()
                continue
            for view, p in zip(group.views, stack.params.values()):
                view.grad = p.grad[group.start : group.start + group.size]
            group.opt.step()
            for view in group.views:
                view.grad = None
        return losses.detach(), logits.detach()

    def joined(
        self,
        stack: SeedStack,
        lr: float,
        weight_decay: float | Sequence[float],
        saved: tuple[dict[str, torch.Tensor], dict] | None = None,
        *,
        name: Hashable,
    ) -> StackOptimizer:
        """For ``stack``, whose last models come after this optimizer's: those models as a new group
        ``name`` with learning rate ``lr``, decay ``weight_decay`` and a fresh AdamW, or the ``saved``
        state of one (:meth:`tensors`)."""
        size = len(stack) - sum(g.size for g in self.groups)
        if size < 1 or any(g.name == name for g in self.groups):
            raise ValueError(f"a new group needs new models and a new name; got {size} models named {name!r}.")
        shapes = [(size, *v.shape[1:]) for v in stack.params.values()]
        state = None if saved is None else _adamw_state(*saved, shapes)
        groups = [_Group(g.name, g.size, g.lr) for g in self.groups] + [_Group(name, size, lr)]
        decay = self.decay.tolist() + torch.as_tensor(weight_decay, dtype=torch.float64).expand(size).tolist()
        states = [g.opt.state_dict() for g in self.groups] + [state]
        return StackOptimizer._grouped(stack, groups, decay, states, self.precision)

    def subset(self, stack: SeedStack, keep: list[int]) -> StackOptimizer:
        """This optimizer's state restricted to the seeds at positions ``keep``, for ``stack`` (their weights)."""
        owner = [next((i for i, g in enumerate(self.groups) if j in g.span), None) for j in keep]
        if None in owner:
            outside = [j for j, o in zip(keep, owner) if o is None]
            raise ValueError(
                f"positions {outside} are in no group of this optimizer (its {len(self.decay)} models: positions "
                f"0 to {len(self.decay) - 1}); keep positions of the stack it optimizes."
            )
        if owner != sorted(owner):
            raise ValueError(
                f"positions {keep} would mix the groups {[g.name for g in self.groups]}; keep their order."
            )
        groups, states = [], []
        for i, group in enumerate(self.groups):
            local = [j - group.start for j, o in zip(keep, owner) if o == i]
            if not local:
                continue
            index = torch.tensor(local, device=stack.device)
            state = group.opt.state_dict()
            for slot in state["state"].values():
                for name in ("exp_avg", "exp_avg_sq"):
                    slot[name] = slot[name][index].clone()
            groups.append(_Group(group.name, len(local), group.lr))
            states.append(state)
        return StackOptimizer._grouped(stack, groups, self.decay[keep].tolist(), states, self.precision)

    def tensors(self, name: Hashable | None = None) -> tuple[dict[str, torch.Tensor], dict]:
        """The state of the one group (or of group ``name``) as named tensors and JSON (for
        :func:`corelib.results.save_tensors`): what a stack of that group alone saves."""
        sd = (self._single() if name is None else self._group(name)).opt.state_dict()
        tensors = {f"{i}.{key}": t for i, slot in sd["state"].items() for key, t in slot.items()}
        return tensors, {"param_groups": sd["param_groups"]}

    def load_tensors(self, tensors: dict[str, torch.Tensor], meta: dict, name: Hashable | None = None) -> None:
        """Continue from :meth:`tensors` (of the one group, or of group ``name``)."""
        group = self._single() if name is None else self._group(name)
        params = group.opt.param_groups[0]["params"]
        group.opt.load_state_dict(_adamw_state(tensors, meta, [p.shape for p in params]))


def _adamw_state(tensors: dict[str, torch.Tensor], meta: dict, shapes: list) -> dict:
    """The AdamW state dict of saved :meth:`StackOptimizer.tensors`, checked against the weights' ``shapes``."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        i, name = key.split(".", 1)
        state.setdefault(int(i), {})[name] = t
    for i, slot in state.items():  # the fused kernel does not check shapes itself
        if i >= len(shapes) or any(slot[n].shape != shapes[i] for n in ("exp_avg", "exp_avg_sq")):
            raise StoreError("optimizer state does not match the model's weights; delete the run to retrain.")
    return {"state": state, "param_groups": meta["param_groups"]}
