"""Train several seeds of one architecture together, as one vectorised model.

The weights of S models are stacked along a leading seed dimension and the forward pass is
``torch.func.vmap`` of the ordinary :class:`~corelib.models.Transformer`, so one optimizer step
updates all seeds at once. Nothing couples the seeds: each has its own initialisation, its own
data order (the same per-(seed, epoch) order as :func:`corelib.training.train`), its own loss,
its own AdamW moments (AdamW is elementwise, so stacking does not mix seeds) and its own weight
decay. A seed therefore gets exactly the updates it would get trained alone; a test checks this
against the plain loop of :mod:`corelib.training`.

Two things make a step cheaper than the plain loop, without changing what is computed:
the loss only reads the last position, so training without dropout runs
:meth:`~corelib.models.Transformer.last_logits` (shared prefixes computed once), and the
per-op overhead of a small model is paid once for all seeds.

Dropout is random, and random operations under ``vmap`` draw from one stream for all seeds. So
the engine draws the masks itself (:class:`DropoutStreams`): seed ``s`` has its own generator,
seeded ``s + 1`` as :func:`corelib.training.train` seeds its dropout stream, and its masks are
drawn in the order and shapes in which ``nn.Dropout`` would draw them in a full forward pass. A
seed trained with dropout in a stack therefore also gets exactly the updates of ``train``.

A run lives in a folder:

- ``run.json``: what is trained (architecture, optimiser, seeds, data fingerprint, origin);
- ``snapshots/epoch_XXXXXX.pt``: the stacked weights at the analysis epochs;
- ``state_XXXXXX.pt``: the latest resumable state (weights, AdamW state, RNG and dropout
  streams, history);
- ``manifest.json``: the current state file and a SHA-256 of every file, written last, so a run
  killed at any moment resumes from its last complete checkpoint and a damaged file is refused.

Checkpoints hold only tensors, numbers and lists, and are read with ``weights_only=True``.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from .models import (Transformer, TransformerConfig, default_device, dropout_mask_shapes, supplied_dropout_masks,
                     trailing_part)
from .results import load_json, params_key, save_json
from .training import epoch_order

__all__ = [
    "PrefixData", "StackConfig", "SeedStack", "StackOptimizer", "DropoutStreams", "CheckpointError", "train_stack", "load_snapshot",
    "snapshot_epochs", "load_history", "stacked_last_logits", "stacked_train_logits", "dropout_seed",
]


class CheckpointError(ValueError):
    """A checkpoint or run folder that must not be used: damaged, or from a different run."""


@dataclass(frozen=True)
class PrefixData:
    """A dataset of token sequences scored at the last position, with shared prefixes.

    ``tokens[i] = [*prefixes[index[i]], last[i]]`` and ``targets[i]`` is the answer at the last
    position.
    """

    last: torch.Tensor
    prefixes: torch.Tensor
    index: torch.Tensor
    targets: torch.Tensor

    @classmethod
    def from_tokens(cls, x: torch.Tensor, y: torch.Tensor) -> "PrefixData":
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

    def to(self, device) -> "PrefixData":
        return PrefixData(*(t.to(device) for t in (self.last, self.prefixes, self.index, self.targets)))

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for t in (self.last, self.prefixes, self.index, self.targets):
            h.update(t.cpu().numpy().tobytes())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class StackConfig:
    """Optimisation and checkpoint schedule of a stacked run (AdamW, last-position loss).

    Snapshots (weights kept for analysis) are taken every ``snapshot_every`` epochs, and every
    ``snapshot_every_late`` epochs after epoch ``late_after`` when both are given. The resumable
    state is saved every ``checkpoint_every`` epochs and at the end. Test accuracy is measured
    every ``eval_every`` epochs and at every snapshot (``None`` in the history otherwise).
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

    def __post_init__(self):
        if self.epochs < 0 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError(f"invalid training settings: {self}.")
        if min(self.snapshot_every, self.checkpoint_every, self.eval_every, self.snapshot_every_late or 1) < 1:
            raise ValueError(f"snapshot and checkpoint intervals must be >= 1: {self}.")
        if (self.snapshot_every_late is None) != (self.late_after is None):
            raise ValueError("give both snapshot_every_late and late_after, or neither.")
        if isinstance(self.weight_decay, (list, tuple)):
            object.__setattr__(self, "weight_decay", tuple(float(w) for w in self.weight_decay))

    def is_snapshot(self, epoch: int) -> bool:
        if self.late_after is not None and epoch > self.late_after:
            return epoch % self.snapshot_every_late == 0 or epoch == self.epochs
        return epoch % self.snapshot_every == 0 or epoch == self.epochs

    def decay(self, n_seeds: int) -> tuple[float, ...]:
        wd = self.weight_decay
        if isinstance(wd, tuple):
            if len(wd) != n_seeds:
                raise ValueError(f"{len(wd)} weight decays for {n_seeds} seeds; give one per seed or a single value.")
            return wd
        return (float(wd),) * n_seeds

    def identity(self) -> dict:
        """The settings that define the run (the epoch count does not: a run can be extended)."""
        d = asdict(self)
        d.pop("epochs")
        d.pop("eval_every")  # what is recorded, not what is trained
        d["weight_decay"] = list(d["weight_decay"]) if isinstance(d["weight_decay"], tuple) else d["weight_decay"]
        return d


class _Method(nn.Module):
    """Adapter so ``functional_call`` can run a method of a :class:`Transformer` other than ``forward``."""

    def __init__(self, model: Transformer, method: str):
        super().__init__()
        self.model, self.method = model, method

    def forward(self, *args):
        return getattr(self.model, self.method)(*args)


def stacked_last_logits(model_cfg: TransformerConfig, *, shared_rows: bool) -> Callable:
    """``f(params, last, index, prefixes) -> (S, B, vocab)``: last-position logits of S stacked seeds.

    ``params`` are weights stacked along a first seed dimension (:class:`SeedStack`). With
    ``shared_rows`` every seed runs on the same rows (``last`` and ``index`` of shape (B,), as in
    an evaluation); otherwise each seed on its own rows (shape (S, B), as in training).
    """
    # In eval mode: training with dropout goes through stacked_train_logits.
    wrapper = _Method(Transformer(model_cfg).to("meta"), "last_logits").eval()
    rows = None if shared_rows else 0
    return vmap(lambda p, last, index, prefixes: functional_call(
        wrapper, {f"model.{k}": v for k, v in p.items()}, (last, prefixes, index)),
        in_dims=(0, rows, rows, None))


def stacked_train_logits(model_cfg: TransformerConfig) -> Callable:
    """``f(params, tokens, masks) -> (S, B, vocab)``: last-position logits of S seeds in training mode.

    :meth:`~corelib.models.Transformer.forward_last` of each seed on its own tokens (S, B, T)
    with its own dropout ``masks`` (a list, each (S, *shape), as drawn by :class:`DropoutStreams`).
    Used for training with dropout, where the masks of the earlier positions make the
    shared-prefix shortcut of :meth:`~corelib.models.Transformer.last_logits` inexact.
    """
    model = _Method(Transformer(model_cfg).to("meta"), "forward_last").train()

    def one_seed(p, tokens, masks):
        with supplied_dropout_masks(masks):
            return functional_call(model, {f"model.{k}": v for k, v in p.items()}, (tokens,))

    return vmap(one_seed, in_dims=(0, 0, 0))


def dropout_seed(seed: int, start_epoch: int) -> int:
    """Seed of seed ``seed``'s dropout stream in a run that starts at ``start_epoch``.

    ``seed + 1`` for a fresh run, as in :func:`corelib.training.train`; a branch (a run started
    from a snapshot) gets a stream of its own, so it does not replay the masks of epoch 0.
    """
    return seed + 1 if start_epoch == 0 else (seed + 1) * 100_003 + start_epoch


class DropoutStreams:
    """One dropout random stream per seed, drawn on the CPU as ``nn.Dropout`` would draw it.

    Each mask is ``bernoulli(1 - p) / (1 - p)``, drawn with ``bernoulli_`` into a fresh tensor of
    the activation's shape, which is what ``F.dropout`` multiplies by on a CPU. Drawing on the CPU
    keeps the masks (and so the results) the same on a GPU.
    """

    def __init__(self, p: float, seeds, start_epoch: int = 0) -> None:
        if not 0 < p < 1:
            raise ValueError(f"dropout probability must lie in (0, 1), got {p}.")
        self.p = float(p)
        self.generators = [torch.Generator().manual_seed(dropout_seed(int(s), start_epoch)) for s in seeds]

    def draw(self, model_cfg: TransformerConfig, batch: int, length: int, device) -> list[torch.Tensor]:
        """The masks of one training step on (batch, length) tokens: a list of (S, *shape) tensors.

        Each mask is drawn whole, as a full forward pass would draw it, so the streams advance
        exactly as ``nn.Dropout``'s would, then cut to what
        :meth:`~corelib.models.Transformer.forward_last` uses.
        """
        shapes = list(zip(dropout_mask_shapes(model_cfg, batch, length),
                          dropout_mask_shapes(model_cfg, batch, length, last_only=True)))
        keep = 1.0 - self.p
        per_seed = [[trailing_part(torch.empty(drawn).bernoulli_(keep, generator=g), used).div(keep)
                     for drawn, used in shapes] for g in self.generators]
        return [torch.stack(masks).to(device) for masks in zip(*per_seed)]

    def subset(self, keep: list[int]) -> "DropoutStreams":
        """The streams of the seeds at positions ``keep``, continuing where they are (not copies)."""
        new = DropoutStreams.__new__(DropoutStreams)
        new.p = self.p
        new.generators = [self.generators[j] for j in keep]
        return new

    def state(self) -> torch.Tensor:
        """The generators' states, stacked (S, n) (uint8), for a checkpoint."""
        return torch.stack([g.get_state() for g in self.generators])

    def load_state(self, state: torch.Tensor) -> None:
        if state.shape[0] != len(self.generators):
            raise CheckpointError(f"dropout state for {state.shape[0]} seeds, run has {len(self.generators)}.")
        for g, st in zip(self.generators, state):
            g.set_state(st.cpu().clone())  # a row of a stacked tensor: set_state needs its own storage


class SeedStack:
    """S transformers of one architecture with their weights stacked along a seed dimension."""

    def __init__(self, model_cfg: TransformerConfig, seeds, params: dict[str, torch.Tensor]):
        self.cfg, self.seeds = model_cfg, tuple(int(s) for s in seeds)
        self.params = params
        template = Transformer(model_cfg).to("meta")
        expected = {k: v.shape for k, v in template.state_dict().items()}
        got = {k: v.shape[1:] for k, v in params.items()}
        if expected != got or any(v.shape[0] != len(self.seeds) for v in params.values()):
            raise CheckpointError("stacked weights do not match the architecture and seeds "
                                  f"({len(self.seeds)} seeds, {model_cfg}).")
        self._fn = stacked_last_logits(model_cfg, shared_rows=False)
        self._train_fn = stacked_train_logits(model_cfg) if model_cfg.dropout else None

    @classmethod
    def initialise(cls, model_cfg: TransformerConfig, seeds, device=None) -> "SeedStack":
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

    def last_logits(self, data: PrefixData, idx: torch.Tensor | None = None) -> torch.Tensor:
        """Last-position logits (S, B, vocab): every seed on its rows ``idx`` (S, B) of ``data``.

        Without ``idx`` every seed sees the whole dataset.
        """
        if idx is None:
            idx = torch.arange(len(data), device=data.last.device).expand(len(self), -1)
        return self._fn(self.params, data.last[idx], data.index[idx], data.prefixes)

    def train_logits(self, data: PrefixData, idx: torch.Tensor, masks: list[torch.Tensor]) -> torch.Tensor:
        """Last-position logits (S, B, vocab) in training mode, with the given dropout masks."""
        if self._train_fn is None:
            raise ValueError("this architecture has no dropout; use last_logits.")
        tokens = torch.cat([data.prefixes[data.index[idx]], data.last[idx][..., None]], dim=-1)
        return self._train_fn(self.params, tokens, masks)

    @torch.no_grad()
    def accuracy(self, data: PrefixData, batch_size: int = 4096) -> torch.Tensor:
        """Last-position accuracy of each seed on ``data``: (S,)."""
        correct = torch.zeros(len(self), device=self.device)
        for i in range(0, len(data), batch_size):
            rows = torch.arange(i, min(i + batch_size, len(data)), device=self.device).expand(len(self), -1)
            correct += (self.last_logits(data, rows).argmax(-1) == data.targets[rows]).sum(1)
        return (correct / len(data)).cpu()


class StackOptimizer:
    """AdamW over a :class:`SeedStack`, with one weight decay per seed.

    AdamW's moments are elementwise, so one optimizer over the stacked tensors is S independent
    optimizers. Its weight decay is a single number, so the per-seed decay is applied here, in
    the same decoupled form and at the same point of the step as ``torch.optim.AdamW`` does it
    (``w <- w (1 - lr wd)`` before the Adam update).
    """

    def __init__(self, stack: SeedStack, lr: float, weight_decay) -> None:
        decay = torch.as_tensor(weight_decay, dtype=torch.float64).expand(len(stack))
        for v in stack.params.values():
            v.requires_grad_(True)
        # The fused kernel does the whole update in one pass per tensor (several times faster than
        # the default per-op loop on a CPU); same algorithm, so results agree to float rounding.
        self.opt = torch.optim.AdamW(list(stack.params.values()), lr=lr, weight_decay=0.0, fused=True)
        self.shrink = {k: (1.0 - lr * decay).to(v.dtype).to(v.device).view(-1, *[1] * (v.ndim - 1))
                       for k, v in stack.params.items()}

    def step(self, stack: SeedStack, data: PrefixData, idx: torch.Tensor,
             masks: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One update of every seed on its rows ``idx`` (S, B); returns losses (S,) and logits.

        ``masks``: the step's dropout masks (:class:`DropoutStreams`), for a model with dropout.
        """
        if (masks is None) != (not stack.cfg.dropout):
            raise ValueError("a model with dropout needs the step's masks (DropoutStreams.draw) and one "
                             f"without takes none; dropout is {stack.cfg.dropout}.")
        logits = stack.last_logits(data, idx) if masks is None else stack.train_logits(data, idx, masks)
        losses = F.cross_entropy(logits.flatten(0, 1), data.targets[idx].flatten(), reduction="none")
        losses = losses.view(len(stack), -1).mean(dim=1)
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()  # seeds share no weights, so each gets its own gradient
        with torch.no_grad():
            for k, p in stack.params.items():
                p.mul_(self.shrink[k])
        self.opt.step()
        return losses.detach(), logits.detach()

    def state_dict(self) -> dict:
        return self.opt.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state)


# ---------------------------------------------------------------- files of a run


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(path: Path, obj) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
    return _sha256(path)


def _read(run: Path, rel: str, manifest: dict, device) -> dict:
    path = run / rel
    expected = manifest["files"].get(rel)
    if expected is None or not path.exists():
        raise CheckpointError(f"{path} is missing from run {run}; delete the folder to retrain.")
    if _sha256(path) != expected:
        raise CheckpointError(f"{path} is damaged (checksum mismatch); delete it and the manifest "
                              f"entry, or the whole folder {run}, to retrain.")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise CheckpointError(f"{path} cannot be read ({err}); delete {run} to retrain.") from err


def _manifest(run: Path) -> dict:
    path = run / "manifest.json"
    return load_json(path) if path.exists() else {"state": None, "snapshots": [], "files": {}}


def _snapshot_name(epoch: int) -> str:
    return f"snapshots/epoch_{epoch:06d}.pt"


def _check_identity(run: Path, meta: dict) -> None:
    path = run / "run.json"
    if path.exists():
        stored = load_json(path)
        if stored != meta:
            diff = sorted(k for k in set(stored) | set(meta) if stored.get(k) != meta.get(k))
            raise CheckpointError(f"{run} holds a different run (differs in {', '.join(diff)}); "
                                  "use another folder or delete it.")
    else:
        run.mkdir(parents=True, exist_ok=True)
        save_json(path, meta)


def snapshot_epochs(run_dir: Path) -> list[int]:
    """Epochs at which ``run_dir`` holds a weight snapshot."""
    return sorted(_manifest(Path(run_dir))["snapshots"])


def load_snapshot(run_dir: Path, epoch: int, device=None) -> SeedStack:
    """The stacked weights saved at ``epoch`` (checksum verified)."""
    run = Path(run_dir)
    manifest = _manifest(run)
    if epoch not in manifest["snapshots"]:
        raise CheckpointError(f"no snapshot at epoch {epoch} in {run}; available: {sorted(manifest['snapshots'])}.")
    meta = load_json(run / "run.json")
    state = _read(run, _snapshot_name(epoch), manifest, device or default_device())
    return SeedStack(TransformerConfig(**meta["model"]), meta["seeds"], state["params"])


def load_history(run_dir: Path) -> dict:
    """Per-epoch history of a run: ``epoch`` and per-seed ``loss``, ``train_acc``, ``test_acc``."""
    run = Path(run_dir)
    manifest = _manifest(run)
    if manifest["state"] is None:
        raise CheckpointError(f"{run} has no saved state yet.")
    return _read(run, manifest["state"], manifest, "cpu")["history"]


# ---------------------------------------------------------------- training


def train_stack(
    model_cfg: TransformerConfig,
    cfg: StackConfig,
    seeds,
    train_data: PrefixData,
    test_data: PrefixData | None,
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
    """
    device = device or default_device()
    run = Path(run_dir)
    seeds = tuple(int(s) for s in seeds)
    origin = None
    if start is not None:
        origin = {"run": params_key(load_json(Path(start[0]) / "run.json")), "epoch": int(start[1])}
    meta = {"model": model_cfg.to_dict(), "train": cfg.identity(), "seeds": list(seeds),
            "train_data": train_data.fingerprint(),
            "test_data": None if test_data is None else test_data.fingerprint(), "origin": origin}
    _check_identity(run, meta)
    key = params_key(meta)
    train_data = train_data.to(device)
    test_data = None if test_data is None else test_data.to(device)

    manifest = _manifest(run)
    streams = DropoutStreams(model_cfg.dropout, seeds, 0 if start is None else int(start[1])) \
        if model_cfg.dropout else None
    if manifest["state"] is not None:
        state = _read(run, manifest["state"], manifest, device)
        if state["run_key"] != key:
            raise CheckpointError(f"{run / manifest['state']} was written by a different run; delete {run}.")
        if state["epoch"] > cfg.epochs:  # already trained further: hand back the earlier snapshot
            hist = {k: v[: cfg.epochs - (state["epoch"] - len(v))] for k, v in state["history"].items()}
            return load_snapshot(run, cfg.epochs, device), hist
        stack = SeedStack(model_cfg, seeds, state["params"])
        epoch, history = state["epoch"], state["history"]
        torch.set_rng_state(state["rng"].cpu())
        if streams is not None:
            streams.load_state(state["dropout_rng"])
    else:
        if start is None:
            stack, epoch = SeedStack.initialise(model_cfg, seeds, device), 0
        else:
            stack, epoch = load_snapshot(start[0], start[1], device), int(start[1])
            if stack.seeds != seeds or stack.cfg != model_cfg:
                raise CheckpointError(f"snapshot {start} has other seeds or architecture than requested.")
        history = {"epoch": [], "loss": [], "train_acc": [], "test_acc": []}
        state = None
    stack.params = params = {k: v.detach() for k, v in stack.params.items()}
    opt = StackOptimizer(stack, cfg.lr, cfg.decay(len(seeds)))
    if state is not None:
        opt.load_state_dict(state["optimizer"])

    def save_snapshot(e: int) -> None:
        rel = _snapshot_name(e)
        manifest["files"][rel] = _write(run / rel, {"params": {k: v.detach() for k, v in params.items()}})
        manifest["snapshots"] = sorted(set(manifest["snapshots"]) | {e})
        save_json(run / "manifest.json", manifest)

    def save_state(e: int) -> None:
        rel, old = f"state_{e:06d}.pt", manifest["state"]
        manifest["files"][rel] = _write(run / rel, {
            "params": {k: v.detach() for k, v in params.items()}, "optimizer": opt.state_dict(),
            "epoch": e, "rng": torch.get_rng_state(), "history": history, "run_key": key,
            **({} if streams is None else {"dropout_rng": streams.state()})})
        manifest["state"] = rel
        save_json(run / "manifest.json", manifest)
        if old and old != rel:
            manifest["files"].pop(old, None)
            save_json(run / "manifest.json", manifest)
            (run / old).unlink(missing_ok=True)

    if epoch not in manifest["snapshots"] and cfg.is_snapshot(epoch):
        save_snapshot(epoch)
    n, s, length = len(train_data), len(seeds), train_data.prefixes.shape[1] + 1
    bar = tqdm(range(epoch, cfg.epochs), desc=f"train {s} seeds", disable=not progress,
               initial=epoch, total=cfg.epochs, leave=False)
    for e in bar:
        order = torch.stack([epoch_order(n, seed, e) for seed in seeds]).to(device)
        total, correct = torch.zeros(s, device=device), torch.zeros(s, device=device)
        for i in range(0, n, cfg.batch_size):
            idx = order[:, i : i + cfg.batch_size]
            masks = None if streams is None else streams.draw(model_cfg, idx.shape[1], length, device)
            losses, logits = opt.step(stack, train_data, idx, masks)
            total += losses * idx.shape[1]
            correct += (logits.argmax(-1) == train_data.targets[idx]).sum(dim=1)
        history["epoch"].append(e + 1)
        history["loss"].append((total / n).tolist())
        history["train_acc"].append((correct / n).tolist())
        evaluate = test_data is not None and ((e + 1) % cfg.eval_every == 0 or cfg.is_snapshot(e + 1))
        history["test_acc"].append(stack.accuracy(test_data).tolist() if evaluate else None)
        if progress and evaluate:
            bar.set_postfix(loss=f"{max(history['loss'][-1]):.3g}", test=f"{min(history['test_acc'][-1]):.3f}")
        if cfg.is_snapshot(e + 1):
            save_snapshot(e + 1)
        if (e + 1) % cfg.checkpoint_every == 0 or e + 1 == cfg.epochs:
            save_state(e + 1)
    for p in params.values():
        p.requires_grad_(False)
    return stack, history
