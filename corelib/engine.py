"""The one training loop: several seeds of one architecture trained together, as one vectorised model.

The weights of S models are stacked along a leading seed dimension and the forward pass runs
under ``torch.func.vmap``, so one optimizer step updates every seed. Nothing couples the seeds:
each has its own initialisation, data order (:func:`epoch_order`), loss, AdamW moments (AdamW is
elementwise), weight decay and dropout stream (:class:`~corelib.masks.DropoutStreams`, a
counter-based generator whose masks depend on nothing but the seed, the step and the element). A
seed therefore gets the updates it would get trained alone in a plain PyTorch loop fed the same
masks; the tests check this against one. A single model is a stack of one.

:class:`Trainer` runs epochs of minibatch steps and calls back after each step, which is all the
grokking sweeps need (:mod:`corelib.tasks.sweeps` measures and stops seeds from there).
:func:`train_stack` adds a run folder: snapshots of the weights for the analysis, a resumable
state, and ``progress.json``, which commits a checkpoint only once its files are complete, so a
run killed at any moment resumes to exactly the results of an uninterrupted one. Files go
through :mod:`corelib.results` (safetensors and JSON, verified by SHA-256 on every read).

Models of one shape with different hyperparameters train as one **mixed stack**: each group of
them (an :class:`Arm` of :func:`train_mixed`, or a group that :meth:`Trainer.join` adds) has its
own learning rate, weight decay or decay schedule, first epoch (a branch joins at its epoch with
the weights it starts from) and last (it leaves the stack, or a stopping rule drops its seeds), and
its own AdamW over its part of the stacked tensors. A group trains bit for bit as it does as a
stack of its own wherever the matrix library computes each model's products alike in stacks of
any size (on one CPU thread, checked by the tests); an arm's run folder is the one
:func:`train_stack` writes, which is :func:`train_mixed` with one arm.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from . import results
from ._checks import check_settings, is_whole
from .cpu_memory import retain_freed_memory
from .fastpath import mask_feed, masked_forward, prefix_last_logits
from .masks import MASK_GENERATOR, DropoutStreams, dropout_seed
from .models import Transformer, TransformerConfig, default_device
from .results import StoreError, load_json, params_key, save_json
from .seed_linear import per_seed, per_seed_products

__all__ = [
    "epoch_order",
    "PrefixData",
    "SequenceData",
    "StackConfig",
    "SeedStack",
    "StackOptimizer",
    "DropoutStreams",
    "Trainer",
    "train_stack",
    "Arm",
    "train_mixed",
    "load_snapshot",
    "plant_snapshot",
    "snapshot_epochs",
    "load_history",
    "training_seconds",
    "stacked_last_logits",
    "dropout_seed",
    "bf16_native",
    "check_precision",
    "resolve_precision",
    "PRECISIONS",
]


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

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def check_precision(precision: str) -> torch.dtype:
    """The compute dtype of a training precision, or an error naming the choices."""
    if precision not in PRECISIONS:
        fix = " (resolve 'auto' for a device with resolve_precision first)" if precision == "auto" else ""
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}{fix}.")
    return PRECISIONS[precision]


def bf16_native(device: torch.device | str) -> bool:
    """Whether ``device`` computes bf16 matmuls in hardware.

    A CPU with AVX512-BF16 or AMX tiles, or an NVIDIA GPU of compute capability 8.0 or later
    (Ampere on). Elsewhere (an older CPU or GPU, a ROCm GPU, whose bf16 units this check cannot
    tell, Apple's MPS) bf16 is emulated or was never validated, and the book does not train in it.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return _cpu_has_bf16()
    if device.type == "cuda" and torch.cuda.is_available() and not torch.version.hip:
        index = torch.cuda.current_device() if device.index is None else device.index
        return torch.cuda.get_device_capability(index)[0] >= 8
    return False


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """The training precision to use on ``device``: ``"fp32"`` or ``"bf16"``.

    ``"auto"`` is bf16 where the hardware computes it natively (:func:`bf16_native`), else fp32.
    ``"bf16"`` where it would be emulated is refused: it trains slower than fp32 there, and its
    rounding is not the one ``recorded/bf16_fidelity_*.json`` validated.
    """
    if precision == "auto":
        return "bf16" if bf16_native(device) else "fp32"
    check_precision(precision)
    if precision == "bf16" and not bf16_native(device):
        raise ValueError(
            f"precision 'bf16' would be emulated on {torch.device(device)} (bf16 matmuls need a CPU with "
            "AVX512-BF16 or AMX, or an NVIDIA GPU of compute capability 8.0 or later): it would train slower "
            "than fp32. Use precision='fp32', or 'auto', which picks bf16 only where the hardware has it."
        )
    return precision


@dataclass(frozen=True)
class StackConfig:
    """Optimisation and checkpoint schedule of a run (AdamW).

    ``loss_positions``: ``"last"`` scores the last position (:class:`PrefixData`), ``"all"`` every
    position (:class:`SequenceData`). ``keep_partial_batch=False`` skips the last ``n mod B``
    examples of each epoch's order. Snapshots (weights kept for the analysis) are taken every
    ``snapshot_every`` epochs, and every ``snapshot_every_late`` epochs after ``late_after`` when
    both are given. The resumable state is saved every ``checkpoint_every`` epochs and at the end.
    Test accuracy is measured every ``eval_every`` epochs and at every snapshot (``None`` otherwise).
    ``precision``: ``"fp32"``, or ``"bf16"`` for the training passes' matmuls (see :class:`StackOptimizer`).
    ``decay_knots``: a weight-decay schedule, ``((epoch, weight_decay), ...)`` with increasing
    epochs: epoch ``e`` (counting the epochs done before it) trains with the piecewise-linear
    interpolation of the knots at ``e``, constant before the first knot and after the last; it
    replaces ``weight_decay`` for every seed. Empty (the default): the constant ``weight_decay``.
    """

    epochs: int
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float | tuple[float, ...] = 1.0
    snapshot_every: int = 100
    snapshot_every_late: int | None = None
    late_after: int | None = None
    checkpoint_every: int = 100
    eval_every: int = 1
    loss_positions: Literal["last", "all"] = "last"
    keep_partial_batch: bool = True
    precision: Literal["fp32", "bf16"] = "fp32"
    decay_knots: tuple[tuple[int, float], ...] = ()

    def __post_init__(self):
        decays = self.weight_decay if isinstance(self.weight_decay, (list, tuple)) else (self.weight_decay,)
        check_settings(
            "StackConfig",
            positive={"lr": self.lr},
            integers={"batch_size": self.batch_size},
            non_negative={"epochs": self.epochs, **{f"weight_decay[{i}]": w for i, w in enumerate(decays)}},
        )
        if not is_whole(self.epochs):
            raise ValueError(f"StackConfig: epochs must be a whole number of epochs >= 0, got {self.epochs!r}.")
        self._whole_numbers()
        if min(self.snapshot_every, self.checkpoint_every, self.eval_every, self.snapshot_every_late or 1) < 1:
            raise ValueError(f"snapshot and checkpoint intervals must be >= 1: {self}.")
        if (self.snapshot_every_late is None) != (self.late_after is None):
            raise ValueError("give both snapshot_every_late and late_after, or neither.")
        if self.loss_positions not in ("last", "all"):
            raise ValueError(f"loss_positions must be 'last' or 'all', got {self.loss_positions!r}.")
        check_precision(self.precision)
        if isinstance(self.weight_decay, (list, tuple)):
            object.__setattr__(self, "weight_decay", tuple(float(w) for w in self.weight_decay))
        knots = tuple((int(e), float(w)) for e, w in self.decay_knots)
        if any(b[0] <= a[0] for a, b in zip(knots, knots[1:])) or any(e < 0 or w < 0 for e, w in knots):
            raise ValueError(
                f"decay_knots must be (epoch, weight_decay) pairs with increasing epochs >= 0 and decays >= 0, "
                f"got {self.decay_knots}."
            )
        object.__setattr__(self, "decay_knots", knots)

    def _whole_numbers(self) -> None:
        """The counts and intervals as ints (``2.0`` is accepted as 2 and stored as 2), refused otherwise."""
        for name in ("epochs", "batch_size", "snapshot_every", "snapshot_every_late", "late_after",
                     "checkpoint_every", "eval_every"):  # fmt: skip
            value = getattr(self, name)
            if value is None and name in ("snapshot_every_late", "late_after"):
                continue
            if not is_whole(value):
                raise ValueError(f"StackConfig: {name} must be a whole number, got {value!r}.")
            object.__setattr__(self, name, int(value))

    def is_snapshot(self, epoch: int) -> bool:
        if self.late_after is not None and epoch > self.late_after:
            return epoch % self.snapshot_every_late == 0 or epoch == self.epochs
        return epoch % self.snapshot_every == 0 or epoch == self.epochs

    def decay_at(self, epoch: int, n_seeds: int) -> tuple[float, ...]:
        """The weight decay of each seed in the epoch after ``epoch`` epochs (see ``decay_knots``)."""
        if not self.decay_knots:
            return self.decay(n_seeds)
        knots = self.decay_knots
        if epoch <= knots[0][0]:
            return (knots[0][1],) * n_seeds
        for (e0, w0), (e1, w1) in zip(knots, knots[1:]):
            if epoch <= e1:
                return (w0 + (w1 - w0) * (epoch - e0) / (e1 - e0),) * n_seeds
        return (knots[-1][1],) * n_seeds

    def decay(self, n_seeds: int) -> tuple[float, ...]:
        wd = self.weight_decay
        if isinstance(wd, tuple):
            if len(wd) != n_seeds:
                raise ValueError(f"{len(wd)} weight decays for {n_seeds} seeds; give one per seed or a single value.")
            return wd
        return (float(wd),) * n_seeds

    def identity(self) -> dict:
        """The settings that define the trained weights (not the epoch count: a run can be extended)."""
        d = asdict(self)
        for name in ("epochs", "eval_every"):
            d.pop(name)
        d["weight_decay"] = list(d["weight_decay"]) if isinstance(d["weight_decay"], tuple) else d["weight_decay"]
        # Left out at their defaults: a run at the defaults has one key whichever options exist.
        if d["loss_positions"] == "last":
            d.pop("loss_positions")
        if d["keep_partial_batch"]:
            d.pop("keep_partial_batch")
        if d["precision"] == "fp32":
            d.pop("precision")
        if d["decay_knots"]:
            d["decay_knots"] = [list(k) for k in d["decay_knots"]]
            d.pop("weight_decay")  # replaced by the schedule
        else:
            d.pop("decay_knots")
        return d


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


def _cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX tiles).

    Not oneDNN's own bf16 check, which holds on any AVX-512 CPU (Skylake on), where it emulates bf16
    and runs a matmul slower than in fp32."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False


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


class Trainer:
    """Epochs of minibatch AdamW steps on a :class:`SeedStack`, one data order and dropout stream per seed.

    ``on_step(trainer, step, idx, logits)`` is called after every step with the rows (S, B) and
    training logits of that step; it may :meth:`drop` seeds, or return ``True`` to end training.
    Between epochs, models with hyperparameters of their own may :meth:`join` the stack as a group
    (a learning rate, weight decay, AdamW and dropout streams of their own) and groups may
    :meth:`leave` it; each group trains as it would as a stack of its own (see :class:`StackOptimizer`).
    """

    def __init__(
        self,
        stack: SeedStack,
        data: Data,
        *,
        lr: float,
        weight_decay: float | Sequence[float],
        batch_size: int,
        keep_partial_batch: bool = True,
        streams: DropoutStreams | None = None,
        precision: str = "fp32",
        name: Hashable = 0,
    ):
        if not isinstance(data, (PrefixData, SequenceData)):
            raise TypeError(f"data must be PrefixData or SequenceData, got {type(data).__name__}.")
        if bool(stack.cfg.dropout) != (streams is not None):
            raise ValueError(f"dropout is {stack.cfg.dropout}: give DropoutStreams exactly when it is > 0.")
        self.stack, self.data, self.streams = stack, data, streams
        if stack.device.type == "cpu":
            retain_freed_memory()  # a step's large tensors then reuse the last step's memory
        self.opt = StackOptimizer(stack, lr, weight_decay, precision, name=name)
        self.batch = min(batch_size, len(data))
        self.end = len(data) if keep_partial_batch else len(data) - len(data) % self.batch
        self.step_count = 0
        self.order: torch.Tensor | None = None

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.end // self.batch)

    def epoch(self, epoch: int, on_step: Callable | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Run one epoch; returns per-seed (summed loss x rows, correct answers), or None if stopped early."""
        stack, data = self.stack, self.data
        device = stack.device
        self.order = torch.stack([epoch_order(len(data), s, epoch) for s in stack.seeds]).to(device)
        self._total = torch.zeros(len(stack), device=device)
        self._correct = torch.zeros(len(stack), device=device)
        last_only = isinstance(data, PrefixData)
        for i in range(0, self.end, self.batch):
            idx = self.order[:, i : i + self.batch]
            masks = (
                None
                if self.streams is None
                else self.streams.draw(stack.cfg, idx.shape[1], data.length, device, last_only=last_only)
            )
            losses, logits = self.opt.step(stack, data, idx, masks)
            self.step_count += 1
            self._total += losses * idx.shape[1]
            self._correct += (logits.argmax(-1) == data.targets[idx]).flatten(1).sum(dim=1)
            if on_step is not None and on_step(self, self.step_count, idx, logits):
                return None
            stack = self.stack  # on_step may have dropped seeds
        return self._total, self._correct

    def drop(self, positions: list[int]) -> None:
        """Remove the seeds at ``positions`` (their weights, moments, data order and dropout stream)."""
        keep = [j for j in range(len(self.stack)) if j not in set(positions)]
        new = self.stack.subset(keep)
        self.opt = self.opt.subset(new, keep)
        self.stack = new
        index = torch.tensor(keep, device=new.device)
        if self.order is not None:
            self.order = self.order[index]
            self._total, self._correct = self._total[index], self._correct[index]
        if self.streams is not None:
            self.streams = self.streams.subset(keep)

    def join(
        self,
        stack: SeedStack,
        *,
        lr: float,
        weight_decay: float | Sequence[float],
        streams: DropoutStreams | None = None,
        optimizer: tuple[dict[str, torch.Tensor], dict] | None = None,
        name: Hashable,
    ) -> None:
        """Add the models of ``stack`` after the others, as group ``name``: learning rate ``lr``, decay
        ``weight_decay`` (one value or one per model), their dropout ``streams`` (at the draws they
        have reached) and a fresh AdamW, or the ``optimizer`` state a stack of them saved
        (:meth:`StackOptimizer.tensors`). Between epochs: the next epoch draws every model's order."""
        if stack.cfg != self.stack.cfg:
            raise ValueError(f"models of another architecture cannot join this stack: {stack.cfg} != {self.stack.cfg}.")
        if bool(stack.cfg.dropout) != (streams is not None):
            raise ValueError(f"dropout is {stack.cfg.dropout}: give DropoutStreams exactly when it is > 0.")
        if stack.device != self.stack.device:
            raise ValueError(
                f"the joining models are on {stack.device}, this stack's on {self.stack.device}; initialise or "
                f"load them on {self.stack.device} (or move their params there) before they join."
            )
        joined = SeedStack.joined([self.stack, stack])
        self.opt = self.opt.joined(joined, lr, weight_decay, optimizer, name=name)
        self.stack = joined
        if streams is not None:
            self.streams = DropoutStreams.joined([self.streams, streams])
        self.order = None

    def leave(self, name: Hashable) -> SeedStack:
        """Remove group ``name``; returns its models (their weights, detached)."""
        span = self.opt.spans[name]
        if len(span) == len(self.stack):
            raise ValueError(f"group {name!r} is the whole stack: it cannot leave it; use the stack itself.")
        part = self.stack.subset(list(span))
        self.drop(list(span))
        return part


# ---------------------------------------------------------------- files of a run


def _snapshot_path(run: Path, epoch: int) -> Path:
    return run / "snapshots" / f"epoch_{epoch:06d}.safetensors"


def _progress(run: Path) -> dict:
    path = run / "progress.json"
    return load_json(path) if path.exists() else {"epoch": 0, "state": None, "snapshots": []}


def _remove_uncommitted(run: Path, done: dict) -> None:
    """Delete what a process killed between writing a checkpoint and committing it left behind: a
    state or a weight snapshot that ``progress.json`` does not name. Such files are never read
    (only committed ones are); removing them keeps the folder to what it says it holds."""
    for path in run.glob("state_*.json"):
        if path.stem != done["state"]:
            for suffix in (".safetensors", ".json"):
                results.remove(run / f"{path.stem}{suffix}")
    for path in run.glob("state_*.safetensors"):
        if path.stem != done["state"]:
            results.remove(path)
    committed = {_snapshot_path(run, e).name for e in done["snapshots"]}
    for path in (run / "snapshots").glob("epoch_*.safetensors"):
        if path.name not in committed:
            results.remove(path)


def _check_identity(run: Path, meta: dict) -> None:
    path = run / "run.json"
    if path.exists():
        stored = load_json(path)
        if stored != meta:
            diff = sorted(k for k in set(stored) | set(meta) if stored.get(k) != meta.get(k))
            raise StoreError(
                f"{run} holds a different run (differs in {', '.join(diff)}); use another folder or delete it."
            )
    else:
        save_json(path, meta)


def snapshot_epochs(run_dir: Path) -> list[int]:
    """Epochs at which ``run_dir`` holds a committed weight snapshot (empty for a new run)."""
    return sorted(_progress(Path(run_dir))["snapshots"])


def load_snapshot(run_dir: Path, epoch: int, device=None) -> SeedStack:
    """The stacked weights saved at ``epoch`` (checksum verified)."""
    run = Path(run_dir)
    if epoch not in snapshot_epochs(run):
        raise StoreError(f"no snapshot at epoch {epoch} in {run}; available: {snapshot_epochs(run)}.")
    meta = load_json(run / "run.json")
    params = results.load_tensors(_snapshot_path(run, epoch), device or default_device())
    return SeedStack(TransformerConfig(**meta["model"]), meta["seeds"], params)


def plant_snapshot(run_dir: Path, meta: dict, epoch: int, params: dict[str, torch.Tensor]) -> None:
    """Make ``run_dir`` a run that holds one committed weight snapshot: ``params`` at ``epoch``, of
    the run whose identity (``run.json``) is ``meta``. A branch from it (``train_stack(...,
    start=(run_dir, epoch))``) is then the branch of that run, without training it: how a record's
    branch point is re-derived from its weights alone. Refuses a folder that holds anything of a
    run already, and weights that do not fit ``meta``'s architecture and seeds."""
    run = Path(run_dir)
    if not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be a whole number >= 0, got {epoch!r}.")
    stack = SeedStack(TransformerConfig(**meta["model"]), meta["seeds"], params)
    with results.run_lock(run, "planting a snapshot"):
        if any((run / name).exists() for name in ("run.json", "progress.json", "snapshots")):
            raise StoreError(f"{run} already holds a run; plant a snapshot only into an empty folder.")
        results.save_tensors(_snapshot_path(run, epoch), stack.params)
        save_json(run / "run.json", meta)
        # Last: until progress.json names it, the snapshot is not committed and nothing reads it.
        save_json(run / "progress.json", {"epoch": epoch, "state": None, "snapshots": [epoch]})


def load_history(run_dir: Path) -> dict:
    """Per-epoch history of a run: ``epoch`` and per-seed ``loss``, ``train_acc``, ``test_acc``."""
    run = Path(run_dir)
    progress = _progress(run)
    if progress["state"] is None:
        raise StoreError(f"{run} has no saved state yet; train it first.")
    return load_json(run / f"{progress['state']}.json")["history"]


def training_seconds(run_dir: Path) -> float:
    """Wall time spent training a run up to its committed state, summed over the processes that ran it."""
    return float(_progress(Path(run_dir)).get("seconds", 0.0))


def _save_state(
    run: Path,
    name: str,
    params: dict[str, torch.Tensor],
    optimizer: tuple[dict[str, torch.Tensor], dict],
    dropout: torch.Tensor | None,
    epoch: int,
    history: dict,
    key: str,
) -> None:
    """A run's resumable state after ``epoch`` epochs: weights, AdamW state, dropout streams, history."""
    opt_tensors, opt_meta = optimizer
    tensors = {
        **{f"params.{k}": v for k, v in params.items()},
        **{f"optimizer.{k}": v for k, v in opt_tensors.items()},
    }  # no generator state of torch's: nothing in training draws from it (see epoch_order, masks)
    if dropout is not None:
        tensors["rng.dropout"] = dropout
    results.save_tensors(run / f"{name}.safetensors", tensors)
    save_json(run / f"{name}.json", {"epoch": epoch, "history": history, "run_key": key, "optimizer": opt_meta})


def _load_state(run: Path, name: str, device) -> tuple[dict, dict]:
    meta = load_json(run / f"{name}.json")
    return results.load_tensors(run / f"{name}.safetensors", device), meta


def _split(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) + 1 :]: v for k, v in tensors.items() if k.startswith(prefix + ".")}


# ---------------------------------------------------------------- training a run


def train_stack(
    model_cfg: TransformerConfig,
    cfg: StackConfig,
    seeds,
    train_data: Data,
    test_data: Data | None,
    run_dir: Path,
    *,
    start: tuple[Path, int] | None = None,
    device=None,
    progress: bool = True,
) -> tuple[SeedStack, dict]:
    """Train ``seeds`` together up to ``cfg.epochs``, resuming or extending the run in ``run_dir``.

    Args:
        start: ``(source_run, epoch)`` to branch: begin from that run's snapshot at ``epoch``
            with a fresh optimizer (e.g. to continue without weight decay). Default: fresh
            initialisation at epoch 0.

    Returns:
        The trained :class:`SeedStack` and the history (lists indexed by epoch; per-seed values).
        A second process asking for the same run waits for the first and reuses its work.
    """
    arm = Arm(cfg, seeds, run_dir, start)
    return train_mixed(model_cfg, [arm], train_data, test_data, device=device, progress=progress)[0]


@dataclass(frozen=True)
class Arm:
    """One arm of a mixed stack (:func:`train_mixed`): what one :func:`train_stack` call trains.

    ``cfg`` holds the arm's own learning rate, weight decay or decay schedule (``decay_knots``: an
    anneal, or a removal at an epoch), snapshot, checkpoint and evaluation schedules, and
    ``epochs``, where it stops. ``start = (source_run, epoch)`` branches: the arm joins the stack at
    ``epoch`` with the source run's weights of that epoch and a fresh AdamW; the source may be an
    arm listed before it in the same call. ``run_dir`` is the arm's run folder, in the format of
    :func:`train_stack`.
    """

    cfg: StackConfig
    seeds: tuple[int, ...]
    run_dir: Path
    start: tuple[Path, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        if not self.seeds:
            raise ValueError(f"an arm needs at least one seed; {self.run_dir} has none.")
        if self.start is not None:
            object.__setattr__(self, "start", (Path(self.start[0]), int(self.start[1])))


# Settings that shape a training step: every arm of a mixed stack must share them.
_STEP_SETTINGS = ("batch_size", "keep_partial_batch", "loss_positions", "precision")


def train_mixed(
    model_cfg: TransformerConfig,
    arms: Sequence[Arm],
    train_data: Data,
    test_data: Data | None,
    *,
    device=None,
    progress: bool = True,
) -> list[tuple[SeedStack, dict]]:
    """Train several arms of one architecture and data as one stack: one forward and backward pass
    per step for all their models, each arm with its own hyperparameters (see :class:`Arm`).

    An arm joins the stack at the epoch it begins (0, its branch epoch, or the epoch its run folder
    has reached), leaves it after its ``epochs``, and writes its run folder exactly as
    :func:`train_stack` would: the same identity, files and values, bit for bit where the matrix
    library computes each model's products alike in stacks of any size (the tests check it on one
    CPU thread). So an arm trained here is resumed, extended or read by :func:`train_stack` and
    the other way round, and a caller moves a loop of :func:`train_stack` calls to one call here
    without changing a stored result. The arms must share the settings that shape a step
    (``batch_size``, ``keep_partial_batch``, ``loss_positions``, ``precision``).

    Returns:
        Per arm, in order, what :func:`train_stack` returns for it: its models and its history.
    """
    arms = _checked_arms(arms, train_data, test_data)
    with ExitStack() as held:
        for run in sorted({arm.run_dir.resolve() for arm in arms}):  # one order in every process: no deadlock
            held.enter_context(results.run_lock(run, "training"))
        mixed = _MixedRun(model_cfg, arms, train_data, test_data, torch.device(device or default_device()))
        return mixed.fit(progress)


def _checked_arms(arms: Sequence[Arm], train_data: Data, test_data: Data | None) -> list[Arm]:
    """The arms, refused where they cannot train as one stack on this data."""
    arms = list(arms)
    if not arms or not all(isinstance(a, Arm) for a in arms):
        raise TypeError(f"train_mixed takes a non-empty list of Arm, got {arms!r}.")
    cfg = arms[0].cfg
    expected = PrefixData if cfg.loss_positions == "last" else SequenceData
    if not isinstance(train_data, expected) or not (test_data is None or isinstance(test_data, expected)):
        raise TypeError(
            f"loss_positions={cfg.loss_positions!r} trains on {expected.__name__}, got {type(train_data).__name__}."
        )
    for arm in arms[1:]:
        differ = [k for k in _STEP_SETTINGS if getattr(arm.cfg, k) != getattr(cfg, k)]
        if differ:
            raise ValueError(
                f"the arm in {arm.run_dir} differs from the first in {', '.join(differ)}, which shape every step of "
                "a stack; train arms that differ there in separate calls."
            )
    folders = [a.run_dir.resolve() for a in arms]
    if len(set(folders)) != len(folders):
        raise ValueError(f"two arms share a run folder ({folders}); give each arm a folder of its own.")
    return arms


@dataclass(frozen=True)
class _Start:
    """Where the epochs of a run begin: the weights, the epoch, the history so far and, when
    resuming, the optimizer's saved state (its tensors and JSON)."""

    stack: SeedStack
    epoch: int
    history: dict
    optimizer: tuple[dict[str, torch.Tensor], dict] | None = None


def _run_meta(
    model_cfg: TransformerConfig,
    cfg: StackConfig,
    seeds: tuple[int, ...],
    train_data: Data,
    test_data: Data | None,
    start: tuple[Path, int] | None,
) -> dict:
    """The identity of a run, kept in ``run.json``: what defines its trained weights."""
    origin = None
    if start is not None:
        origin = {"run": params_key(load_json(Path(start[0]) / "run.json")), "epoch": int(start[1])}
    meta = {
        "model": model_cfg.to_dict(),
        "train": cfg.identity(),
        "seeds": list(seeds),
        "train_data": train_data.fingerprint(),
        "test_data": None if test_data is None else test_data.fingerprint(),
        "origin": origin,
    }
    if model_cfg.dropout:
        meta["masks"] = MASK_GENERATOR
    return meta


def _dropout_streams(
    model_cfg: TransformerConfig, seeds: tuple[int, ...], start: tuple[Path, int] | None
) -> DropoutStreams | None:
    """The seeds' dropout streams from the run's first epoch (None without dropout)."""
    if not model_cfg.dropout:
        return None
    return DropoutStreams(model_cfg.dropout, seeds, 0 if start is None else int(start[1]))


def _load_committed(run: Path, name: str, key: str, device: torch.device) -> tuple[dict[str, torch.Tensor], dict]:
    """The committed state ``name`` of the run with identity ``key`` (tensors and JSON)."""
    tensors, state = _load_state(run, name, device)
    if state["run_key"] != key:
        raise StoreError(f"{run / name} was written by a different run; delete {run}.")
    return tensors, state


def _history_until(state: dict, epochs: int) -> dict:
    """The history of a state saved after ``state["epoch"]`` epochs, cut after ``epochs``."""
    return {k: v[: epochs - (state["epoch"] - len(v))] for k, v in state["history"].items()}


def _resumed(
    model_cfg: TransformerConfig,
    seeds: tuple[int, ...],
    tensors: dict[str, torch.Tensor],
    state: dict,
    streams: DropoutStreams | None,
) -> _Start:
    """Continue from a committed state: its weights, history, dropout streams and optimizer."""
    stack = SeedStack(model_cfg, seeds, _split(tensors, "params"))
    if streams is not None:
        streams.load_state(tensors["rng.dropout"])
    return _Start(stack, state["epoch"], state["history"], (_split(tensors, "optimizer"), state["optimizer"]))


def _fresh(
    model_cfg: TransformerConfig, seeds: tuple[int, ...], start: tuple[Path, int] | None, device: torch.device
) -> _Start:
    """Begin a run: fresh initialisation at epoch 0, or a branch from the snapshot ``start``."""
    if start is None:
        stack, epoch = SeedStack.initialise(model_cfg, seeds, device), 0
    else:
        stack, epoch = load_snapshot(start[0], start[1], device), int(start[1])
        if stack.seeds != seeds or stack.cfg != model_cfg:
            raise StoreError(f"snapshot {start} has other seeds or architecture than requested.")
    return _Start(stack, epoch, {"epoch": [], "loss": [], "train_acc": [], "test_acc": []})


def _settled(history: dict, fresh: int) -> None:
    """Turn the last ``fresh`` entries of ``history`` from device tensors into lists (one host sync)."""
    for key in ("loss", "train_acc", "test_acc"):
        rows = history[key]
        for i in range(len(rows) - fresh, len(rows)):
            if isinstance(rows[i], torch.Tensor):
                rows[i] = rows[i].tolist()


class _StackClock:
    """The wall time of a mixed stack shared among its arms by their numbers of models.

    An arm's time in the stack, less its :meth:`discount`, is its share: over each interval during
    which the same arms trained, the interval times its models over all the stack's models. So the
    shares of arms trained together add up to the stack's wall time, and an arm alone in the stack
    has no discount (its time is today's, to the bit).
    """

    def __init__(self) -> None:
        self.sizes: dict[Hashable, int] = {}
        self.discounts: dict[Hashable, float] = {}
        self.mark = time.perf_counter()

    def _pending(self, name: Hashable, now: float) -> float:
        total = sum(self.sizes.values())
        if len(self.sizes) < 2 or name not in self.sizes:
            return 0.0
        return (now - self.mark) * (total - self.sizes[name]) / total

    def change(self, name: Hashable, size: int) -> None:
        """Arm ``name`` joins the stack with ``size`` models (0: leaves it)."""
        now = time.perf_counter()
        for other in self.sizes:
            self.discounts[other] = self.discounts.get(other, 0.0) + self._pending(other, now)
        self.mark = now
        if size:
            self.sizes[name] = size
            self.discounts.setdefault(name, 0.0)
        else:
            self.sizes.pop(name, None)

    def discount(self, name: Hashable, now: float) -> float:
        """The time up to ``now`` that arm ``name`` spent in the stack on the other arms' models."""
        return self.discounts.get(name, 0.0) + self._pending(name, now)


class _ArmRun:
    """One arm's run folder while a mixed stack trains: its identity and committed progress, its
    history, and once it has joined, its group (named by the arm's index) in the trainer. Each
    checkpoint is made visible by committing ``progress.json`` once its files are complete."""

    def __init__(
        self, model_cfg: TransformerConfig, arm: Arm, index: int, data: Data, test_data: Data | None, device
    ) -> None:
        self.arm, self.cfg, self.run, self.name = arm, arm.cfg, arm.run_dir, index
        if arm.start is not None and not (arm.start[0] / "run.json").exists():
            raise StoreError(
                f"the arm in {arm.run_dir} branches from {arm.start[0]}, which holds no run; train that run "
                "first, or list the arm that trains it before this one."
            )
        meta = _run_meta(model_cfg, arm.cfg, arm.seeds, data, test_data, arm.start)
        _check_identity(self.run, meta)
        self.key = params_key(meta)
        self.done = _progress(self.run)
        _remove_uncommitted(self.run, self.done)
        self.streams = _dropout_streams(model_cfg, arm.seeds, arm.start)
        self.result: tuple[SeedStack, dict] | None = None
        self.begin: _Start | None = None
        self.join_epoch = 0 if arm.start is None else arm.start[1]
        if self.done["state"] is not None:
            tensors, state = _load_committed(self.run, self.done["state"], self.key, device)
            self.join_epoch = state["epoch"]
            if state["epoch"] > arm.cfg.epochs:  # already trained further: hand back the earlier snapshot
                self.result = load_snapshot(self.run, arm.cfg.epochs, device), _history_until(state, arm.cfg.epochs)
            else:
                self.begin = _resumed(model_cfg, arm.seeds, tensors, state, self.streams)
        self.snapshots = set(self.done["snapshots"])
        # Wall time of the training up to the committed state, summed over the processes that ran it.
        self.seconds_before, self.started = float(self.done.get("seconds", 0.0)), time.perf_counter()
        self.clock: _StackClock | None = None  # set by the stack it trains in
        self.fresh = 0  # history entries still held as device tensors

    def open(self, model_cfg: TransformerConfig, device: torch.device) -> bool:
        """Take up the arm's weights at its first epoch; returns whether it has epochs to train."""
        if self.begin is None:
            self.begin = _fresh(model_cfg, self.arm.seeds, self.arm.start, device)
        self.history, self.started = self.begin.history, time.perf_counter()
        if self.clock is not None:  # from here the arm is in the stack, its time shared with the others
            self.clock.change(self.name, len(self.arm.seeds))
        if self.begin.epoch not in self.snapshots and self.cfg.is_snapshot(self.begin.epoch):
            self.checkpoint(None, self.begin.epoch, snapshot=True, state=False)
        if self.begin.epoch < self.cfg.epochs:
            return True
        stack = self.begin.stack
        for p in stack.params.values():
            p.requires_grad_(False)
        self.result = stack, self.history
        if self.clock is not None:
            self.clock.change(self.name, 0)
        return False

    def join(self, trainer: Trainer | None, data: Data) -> Trainer:
        """Join the stack of ``trainer`` (or begin one) as a group with the arm's hyperparameters."""
        begin, cfg = self.begin, self.cfg
        stack = begin.stack
        stack.params = {k: v.detach() for k, v in stack.params.items()}
        decay = cfg.decay_at(begin.epoch, len(stack))
        if trainer is not None:
            trainer.join(stack, lr=cfg.lr, weight_decay=decay, streams=self.streams, optimizer=begin.optimizer,
                         name=self.name)  # fmt: skip
            return trainer
        trainer = Trainer(
            stack,
            data,
            lr=cfg.lr,
            weight_decay=decay,
            batch_size=cfg.batch_size,
            keep_partial_batch=cfg.keep_partial_batch,
            streams=self.streams,
            precision=cfg.precision,
            name=self.name,
        )
        if begin.optimizer is not None:
            trainer.opt.load_tensors(*begin.optimizer)
        return trainer

    def record(self, e: int, trainer: Trainer, sums: tuple[torch.Tensor, torch.Tensor], test_data) -> bool:
        """Append epoch ``e`` to the history; returns whether the test set was measured."""
        span, cfg, history = trainer.opt.spans[self.name], self.cfg, self.history
        total, correct = (t[span.start : span.stop] for t in sums)
        used = trainer.end
        positions = 1 if isinstance(trainer.data, PrefixData) else trainer.data.length
        history["epoch"].append(e + 1)
        history["loss"].append(total / used)
        history["train_acc"].append(correct / (used * positions))
        evaluate = test_data is not None and ((e + 1) % cfg.eval_every == 0 or cfg.is_snapshot(e + 1))
        history["test_acc"].append(trainer.stack.part(span).accuracy(test_data) if evaluate else None)
        self.fresh += 1
        if evaluate:  # the accuracy waited for the device anyway
            self.settle()
        return evaluate

    def settle(self) -> None:
        _settled(self.history, self.fresh)
        self.fresh = 0

    def after_epoch(self, trainer: Trainer, epoch: int) -> None:
        """Checkpoint after ``epoch`` epochs where the arm's schedule asks."""
        cfg = self.cfg
        # The state is saved with every snapshot too, so the snapshots never run ahead of it.
        snap = cfg.is_snapshot(epoch)
        save = snap or epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs
        self.checkpoint(trainer, epoch, snapshot=snap, state=save)

    def checkpoint(self, trainer: Trainer | None, epoch: int, *, snapshot: bool, state: bool) -> None:
        """Write the weight snapshot and/or the resumable state after ``epoch`` epochs, then commit."""
        span = None if trainer is None else trainer.opt.spans[self.name]
        params = self.begin.stack.params if span is None else trainer.stack.part(span).params
        if snapshot:
            results.save_tensors(_snapshot_path(self.run, epoch), params)
            self.snapshots.add(epoch)
        name = f"state_{epoch:06d}" if state else None
        if name:
            self.settle()
            dropout = None if trainer.streams is None else trainer.streams.subset(list(span)).state()
            _save_state(self.run, name, params, trainer.opt.tensors(self.name), dropout, epoch, self.history, self.key)
        if snapshot or state:
            self.commit(epoch, name)

    def commit(self, epoch: int, state_name: str | None) -> None:
        """The one point at which a checkpoint becomes visible: after all its files are complete."""
        done = self.done
        old = done["state"]
        done.update(
            epoch=epoch if state_name else done["epoch"], state=state_name or old, snapshots=sorted(self.snapshots)
        )
        if state_name:
            now = time.perf_counter()
            shared = 0.0 if self.clock is None else self.clock.discount(self.name, now)
            done["seconds"] = round(self.seconds_before + now - self.started - shared, 1)
        save_json(self.run / "progress.json", done)
        if state_name and old and old != state_name:
            for suffix in (".safetensors", ".json"):
                results.remove(self.run / f"{old}{suffix}")

    def leave(self, trainer: Trainer) -> Trainer | None:
        """End the arm after its last epoch: its models leave the stack; returns the trainer of the others."""
        self.settle()
        if len(trainer.opt.groups) == 1:  # the last arm: the trainer's own stack
            stack, trainer = trainer.stack, None
        else:
            stack = trainer.leave(self.name)
        for p in stack.params.values():
            p.requires_grad_(False)
        self.result = stack, self.history
        return trainer


class _MixedRun:
    """The epochs of a mixed stack: arms join at their first epoch, train together, leave after their last."""

    def __init__(
        self, model_cfg: TransformerConfig, arms: list[Arm], data: Data, test_data: Data | None, device
    ) -> None:
        self.model_cfg, self.device = model_cfg, device
        # Each arm's identity first (a branch reads its source's), on the data as given, then the data to the device.
        self.runs = [_ArmRun(model_cfg, arm, i, data, test_data, device) for i, arm in enumerate(arms)]
        self.clock = _StackClock()
        for run in self.runs:
            run.clock = self.clock
        self.data = data.to(device)
        self.test_data = None if test_data is None else test_data.to(device)
        self.trainer: Trainer | None = None
        self.active: list[_ArmRun] = []

    def fit(self, progress: bool) -> list[tuple[SeedStack, dict]]:
        """Train every arm to its ``epochs``; returns each arm's models and history."""
        todo = [r for r in self.runs if r.result is None]
        if todo:
            first = min(r.join_epoch for r in todo)
            last = max(max(r.cfg.epochs, r.join_epoch) for r in todo)
            n = sum(len(r.arm.seeds) for r in todo)
            desc = f"train {n} seeds" if len(todo) == 1 else f"train {len(todo)} arms ({n} models)"
            bar = tqdm(total=last, initial=first, desc=desc, disable=not progress, leave=False)
            for e in range(first, last + 1):
                self.join(e, [r for r in todo if r.join_epoch == e])
                if e < last and self.active:
                    self.fit_epoch(e, bar if progress else None)
                bar.update(1 if e < last else 0)
            bar.close()
        return [r.result for r in self.runs]

    def join(self, epoch: int, runs: list[_ArmRun]) -> None:
        """Arms that begin at ``epoch`` join the stack (those with nothing to train end at once)."""
        for run in runs:
            if run.open(self.model_cfg, self.device):
                self.trainer = run.join(self.trainer, self.data)
                self.active.append(run)

    def fit_epoch(self, e: int, bar: tqdm | None) -> None:
        """Train epoch ``e`` of every arm in the stack; record, checkpoint, and let finished arms leave."""
        trainer = self.trainer
        by_name = {r.name: r for r in self.active}
        decays = [d for g in trainer.opt.groups for d in by_name[g.name].cfg.decay_at(e, g.size)]
        if decays != trainer.opt.decay.tolist():  # a schedule moved on
            trainer.opt.set_decay(trainer.stack, decays)
        sums = trainer.epoch(e)
        measured = [r for r in self.active if r.record(e, trainer, sums, self.test_data)]
        if bar is not None and measured:
            bar.set_postfix(
                loss=f"{max(max(r.history['loss'][-1]) for r in measured):.3g}",
                test=f"{min(min(r.history['test_acc'][-1]) for r in measured):.3f}",
            )
        for run in self.active:
            run.after_epoch(trainer, e + 1)
        for run in [r for r in self.active if r.cfg.epochs == e + 1]:
            self.trainer = run.leave(self.trainer)
            self.active.remove(run)
            self.clock.change(run.name, 0)
