"""Training loop for the toy transformers: AdamW, shuffled minibatches, checkpoints, resume.

Each epoch's data order comes from a generator seeded with (seed, epoch), and the global RNG
(used by dropout) is saved in every checkpoint, so a run interrupted at any point and resumed
from its last checkpoint ends with exactly the weights of an uninterrupted run.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .interventions import ablation_accuracy
from .models import Transformer, TransformerConfig, default_device
from .results import load_json, save_json

__all__ = ["TrainConfig", "epoch_order", "train", "train_model"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (AdamW)."""

    epochs: int
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    score_positions: Literal["all", "last"] = "all"
    checkpoint_every: int = 1

    def __post_init__(self):
        if self.epochs < 0 or self.batch_size < 1 or self.lr <= 0 or self.checkpoint_every < 1:
            raise ValueError(f"invalid training settings: {self}.")
        if self.score_positions not in ("all", "last"):
            raise ValueError(f"score_positions must be 'all' or 'last', got {self.score_positions!r}.")


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The order in which seed ``seed`` visits ``n`` training examples in ``epoch``.

    Drawn from its own generator, so it does not depend on anything else that used randomness:
    a resumed run, or a seed trained together with others, sees the same order.
    """
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))


def _select(logits: torch.Tensor, y: torch.Tensor, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    if where == "last":
        return logits[:, -1], y[:, -1]
    return logits.reshape(-1, logits.shape[-1]), y.reshape(-1)


def _save_checkpoint(path: Path, model, opt, epoch: int, history: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
         "rng": torch.get_rng_state(), "history": history},
        tmp,
    )
    os.replace(tmp, path)


def train(
    model: Transformer,
    train_data: tuple[torch.Tensor, torch.Tensor],
    cfg: TrainConfig,
    *,
    seed: int,
    test_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    checkpoint: Path | None = None,
    progress: bool = True,
) -> dict[str, list[float]]:
    """Train ``model`` in place; returns the per-epoch history.

    The history has the mean training loss, the running training accuracy of the epoch's
    minibatches (measured during training, so with dropout active) and the test accuracy.

    With ``checkpoint`` (a file path) the state is saved every ``cfg.checkpoint_every`` epochs and
    an existing checkpoint is resumed from. Checkpoints hold only tensors and numbers and are
    loaded with ``weights_only=True``.
    """
    device = next(model.parameters()).device
    x, y = (t.to(device) for t in train_data)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    history: dict[str, list[float]] = {"loss": [], "train_acc": [], "test_acc": []}
    start = 0
    torch.manual_seed(seed + 1)  # dropout stream, distinct from the initialisation stream
    if checkpoint is not None and Path(checkpoint).exists():
        try:
            state = torch.load(checkpoint, map_location=device, weights_only=True)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        except Exception as err:  # a torn or foreign file must not be trained on silently
            raise ValueError(f"checkpoint {checkpoint} cannot be loaded ({err}); delete it to restart.") from err
        start, history = state["epoch"], state["history"]
        torch.set_rng_state(state["rng"])
    bar = tqdm(range(start, cfg.epochs), desc=f"train seed {seed}", disable=not progress,
               initial=start, total=cfg.epochs, leave=False)
    for epoch in bar:
        model.train()
        order = epoch_order(x.shape[0], seed, epoch)
        total_loss, correct, seen = 0.0, 0, 0
        for i in range(0, x.shape[0], cfg.batch_size):
            idx = order[i : i + cfg.batch_size].to(device)
            logits, t = _select(model(x[idx]), y[idx], cfg.score_positions)
            loss = F.cross_entropy(logits, t)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total_loss += loss.item() * len(idx)
            # Running accuracy of the training forward passes (with dropout), free of extra passes.
            correct += int((logits.detach().argmax(-1) == t).sum())
            seen += t.numel()
        history["loss"].append(total_loss / x.shape[0])
        history["train_acc"].append(correct / seen)
        if test_data is not None:
            history["test_acc"].append(
                ablation_accuracy(model, *test_data, score_positions=cfg.score_positions))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}")
        if checkpoint is not None and ((epoch + 1) % cfg.checkpoint_every == 0 or epoch + 1 == cfg.epochs):
            _save_checkpoint(Path(checkpoint), model, opt, epoch + 1, history)
    model.eval()
    return history


def train_model(
    model_cfg: TransformerConfig,
    train_cfg: TrainConfig,
    train_data: tuple[torch.Tensor, torch.Tensor],
    *,
    seed: int,
    test_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    run_dir: Path | None = None,
    device: torch.device | None = None,
    progress: bool = True,
) -> tuple[Transformer, dict[str, list[float]]]:
    """Build a model with initialisation ``seed`` and train it, reusing a finished run in ``run_dir``.

    ``run_dir`` gets ``checkpoint.pt`` (resumable) and ``history.json`` once training is done.
    """
    torch.manual_seed(seed)
    model = Transformer(model_cfg).to(device or default_device())
    ckpt = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt = run_dir / "checkpoint.pt"
        meta = {"model": model_cfg.to_dict(), "train": asdict(train_cfg), "seed": seed}
        meta_path = run_dir / "run.json"
        if meta_path.exists() and load_json(meta_path) != meta:
            raise ValueError(f"{run_dir} belongs to a different run ({meta_path}); use another folder.")
        save_json(meta_path, meta)
    history = train(model, train_data, train_cfg, seed=seed, test_data=test_data,
                    checkpoint=ckpt, progress=progress)
    if run_dir is not None:
        save_json(run_dir / "history.json", history)
    return model, history
