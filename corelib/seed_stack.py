"""S transformers of one architecture with their weights stacked along a seed dimension.

The forward pass runs under ``torch.func.vmap`` over the seed dimension, each seed with its own
weights (:class:`SeedStack`); :func:`stacked_last_logits` is its last-position pass on stacked
weights, for evaluations outside the stack (the sweeps' threshold tests).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from .fastpath import mask_feed, masked_forward, prefix_last_logits
from .models import Transformer, TransformerConfig, default_device
from .results import StoreError
from .seed_linear import per_seed, per_seed_products
from .training_data import Data, PrefixData, SequenceData

__all__ = ["SeedStack", "stacked_last_logits"]


class _Call(nn.Module):
    """Adapter so ``functional_call`` can run a function of a model other than its ``forward``."""

    def __init__(self, model: Transformer, fn: Callable):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, *args):
        return self.fn(self.model, *args)


def _stacked(model_cfg: TransformerConfig, fn: Callable, in_dims: tuple) -> Callable:
    """``vmap`` over the seed dimension of ``fn(model, *args)`` with the seed's weights."""
    wrapper = _Call(Transformer(model_cfg).to("meta"), fn)
    return vmap(
        lambda p, *args: functional_call(wrapper, {f"model.{k}": v for k, v in p.items()}, args), in_dims=(0, *in_dims)
    )


def stacked_last_logits(model_cfg: TransformerConfig, *, shared_rows: bool) -> Callable:
    """``f(params, last, index, prefixes) -> (S, B, vocab)``: last-position logits of stacked seeds.

    With ``shared_rows`` every seed runs on the same rows (``last`` and ``index`` (B,), as in an
    evaluation); otherwise each on its own rows ((S, B), as in training). No dropout.
    """
    rows = None if shared_rows else 0

    def fn(model, last, index, prefixes):
        return prefix_last_logits(model, last, prefixes, index)

    return _stacked(model_cfg, fn, (rows, rows, None))


@functools.lru_cache(maxsize=32)
def _stacked_fn(model_cfg: TransformerConfig, kind: str) -> Callable:
    """The vmapped forward passes a :class:`SeedStack` uses, built once per architecture."""
    if kind == "last":
        return stacked_last_logits(model_cfg, shared_rows=False)
    if kind == "last_masked":
        return _stacked(model_cfg, lambda m, t, masks: masked_forward(m, t, mask_feed(masks), last_only=True), (0, 0))
    if kind == "all_masked":
        return _stacked(model_cfg, lambda m, t, masks: masked_forward(m, t, mask_feed(masks)), (0, 0))
    if kind == "all":
        return _stacked(model_cfg, lambda m, t: masked_forward(m, t), (0,))
    if kind == "all_shared":
        return _stacked(model_cfg, lambda m, t: masked_forward(m, t), (None,))
    raise ValueError(kind)


class SeedStack:
    """S transformers of one architecture with their weights stacked along a seed dimension."""

    def __init__(self, model_cfg: TransformerConfig, seeds: Iterable[int], params: dict[str, torch.Tensor]):
        self.cfg, self.seeds = model_cfg, tuple(int(s) for s in seeds)
        template = Transformer(model_cfg).to("meta")
        expected = {k: v.shape for k, v in template.state_dict().items()}
        got = {k: v.shape[1:] for k, v in params.items()}
        if expected != got or any(v.shape[0] != len(self.seeds) for v in params.values()):
            raise StoreError(
                f"stacked weights do not match the architecture and seeds ({len(self.seeds)} seeds, {model_cfg})."
            )
        # The model's order (files may store names sorted): the optimizer's state follows it.
        self.params = {k: params[k] for k in expected}

    @classmethod
    def initialise(cls, model_cfg: TransformerConfig, seeds, device=None) -> SeedStack:
        """Fresh models, seed s initialised exactly as ``torch.manual_seed(s); Transformer(cfg)``."""
        models = []
        for s in seeds:
            torch.manual_seed(int(s))
            models.append(Transformer(model_cfg).to(device or default_device()))
        params, buffers = stack_module_state(models)
        if buffers:
            raise ValueError("models with buffers are not supported by the vectorised engine.")
        return cls(model_cfg, seeds, {k: v.detach() for k, v in params.items()})

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    def __len__(self) -> int:
        return len(self.seeds)

    def model(self, i: int) -> Transformer:
        """An ordinary (hooked) :class:`Transformer` holding seed ``i``'s weights, in eval mode."""
        model = Transformer(self.cfg).to(self.device)
        model.load_state_dict({k: v[i].detach().clone() for k, v in self.params.items()})
        return model.eval()

    def subset(self, keep: list[int]) -> SeedStack:
        """The seeds at positions ``keep`` (copies of their weights)."""
        index = torch.tensor(keep, device=self.device)
        return SeedStack(
            self.cfg, [self.seeds[i] for i in keep], {k: v.detach()[index].clone() for k, v in self.params.items()}
        )

    def part(self, span: range) -> SeedStack:
        """The models at the positions ``span`` (a range with step 1), sharing this stack's weights (views)."""
        part = SeedStack.__new__(SeedStack)
        part.cfg, part.seeds = self.cfg, self.seeds[span.start : span.stop]
        part.params = {k: v.detach()[span.start : span.stop] for k, v in self.params.items()}
        return part

    @classmethod
    def joined(cls, stacks: Sequence[SeedStack]) -> SeedStack:
        """The models of ``stacks`` (one architecture) side by side, in order (new tensors)."""
        cfgs = {s.cfg for s in stacks}
        if len(cfgs) != 1:
            raise ValueError(
                f"only stacks of one architecture can be joined, got {len(cfgs)}: {sorted(map(str, cfgs))}."
            )
        seeds = [seed for s in stacks for seed in s.seeds]
        return cls(
            stacks[0].cfg, seeds, {k: torch.cat([s.params[k].detach() for s in stacks]) for k in stacks[0].params}
        )

    def last_logits(
        self, data: PrefixData, idx: torch.Tensor | None = None, params: dict | None = None
    ) -> torch.Tensor:
        """Last-position logits (S, B, vocab) without dropout: every seed on its rows ``idx`` (S, B).

        Without ``idx`` every seed sees the whole dataset; ``params`` replaces the stack's weights.
        """
        if idx is None:
            idx = torch.arange(len(data), device=data.last.device).expand(len(self), -1)
        params = self.params if params is None else params
        return _stacked_fn(self.cfg, "last")(params, data.last[idx], data.index[idx], data.prefixes)

    def train_logits(
        self, data: Data, idx: torch.Tensor, masks: list[torch.Tensor] | None, params: dict | None = None
    ) -> torch.Tensor:
        """Training-mode logits of every seed on its rows ``idx`` (S, B), with its dropout ``masks``.

        (S, B, vocab) for :class:`PrefixData`, (S, B, T, vocab) for :class:`SequenceData`.
        ``params``: the weights to compute with (default: the stack's own), e.g. a bf16 copy.
        """
        params = self.params if params is None else params
        dtype = next(iter(params.values())).dtype
        with per_seed(per_seed_products(len(self), self.device, dtype)):
            return self._train_logits(data, idx, masks, params)

    def _train_logits(
        self, data: Data, idx: torch.Tensor, masks: list[torch.Tensor] | None, params: dict
    ) -> torch.Tensor:
        if isinstance(data, SequenceData):
            if masks is None:
                return _stacked_fn(self.cfg, "all")(params, data.inputs[idx])
            return _stacked_fn(self.cfg, "all_masked")(params, data.inputs[idx], masks)
        if masks is None:
            return self.last_logits(data, idx, params)
        return _stacked_fn(self.cfg, "last_masked")(params, data.tokens(idx), masks)

    @torch.no_grad()
    def accuracy(self, data: Data, batch_size: int = 4096) -> torch.Tensor:
        """Accuracy of each seed on ``data`` (at the last position, or over all positions): (S,)."""
        correct = torch.zeros(len(self), device=self.device)
        if isinstance(data, SequenceData):
            rows = max(1, batch_size // data.length)
            for i in range(0, len(data), rows):
                logits = _stacked_fn(self.cfg, "all_shared")(self.params, data.inputs[i : i + rows])
                correct += (logits.argmax(-1) == data.targets[i : i + rows]).flatten(1).sum(1)
            return (correct / data.targets.numel()).cpu()
        for i in range(0, len(data), batch_size):
            rows = torch.arange(i, min(i + batch_size, len(data)), device=self.device).expand(len(self), -1)
            correct += (self.last_logits(data, rows).argmax(-1) == data.targets[rows]).sum(1)
        return (correct / len(data)).cpu()
