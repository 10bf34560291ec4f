"""A run of the engine and its folder: the settings that define it (:class:`StackConfig`), its
identity (``run.json``) and the files it keeps (the store's format).

A run folder holds ``run.json``, weight snapshots (``snapshots/epoch_NNNNNN.safetensors``), the
resumable state (``state_NNNNNN.safetensors`` and ``.json``: weights, AdamW state, dropout
streams, history) and ``progress.json``, which commits a checkpoint only once its files are
complete. :mod:`corelib.engine` writes them while it trains; the functions here read them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch

from . import results
from ._checks import check_settings, is_whole
from .masks import MASK_GENERATOR
from .models import TransformerConfig, default_device
from .precision import check_precision
from .results import StoreError, load_json, params_key, save_json
from .seed_stack import SeedStack
from .training_data import Data

__all__ = [
    "StackConfig",
    "run_meta",
    "check_identity",
    "run_progress",
    "remove_uncommitted",
    "snapshot_path",
    "snapshot_epochs",
    "load_snapshot",
    "plant_snapshot",
    "load_history",
    "training_seconds",
    "save_state",
    "load_committed",
]


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


def snapshot_path(run: Path, epoch: int) -> Path:
    """Where run ``run`` keeps its weight snapshot of ``epoch``."""
    return run / "snapshots" / f"epoch_{epoch:06d}.safetensors"


def run_progress(run: Path) -> dict:
    """The committed progress of run ``run`` (``progress.json``): its epoch, state and snapshots."""
    path = run / "progress.json"
    return load_json(path) if path.exists() else {"epoch": 0, "state": None, "snapshots": []}


def remove_uncommitted(run: Path, done: dict) -> None:
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
    committed = {snapshot_path(run, e).name for e in done["snapshots"]}
    for path in (run / "snapshots").glob("epoch_*.safetensors"):
        if path.name not in committed:
            results.remove(path)


def check_identity(run: Path, meta: dict) -> None:
    """Write the run's identity ``meta`` to ``run.json``, or refuse a folder that holds another run."""
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
    return sorted(run_progress(Path(run_dir))["snapshots"])


def load_snapshot(run_dir: Path, epoch: int, device=None) -> SeedStack:
    """The stacked weights saved at ``epoch`` (checksum verified)."""
    run = Path(run_dir)
    if epoch not in snapshot_epochs(run):
        raise StoreError(f"no snapshot at epoch {epoch} in {run}; available: {snapshot_epochs(run)}.")
    meta = load_json(run / "run.json")
    params = results.load_tensors(snapshot_path(run, epoch), device or default_device())
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
        results.save_tensors(snapshot_path(run, epoch), stack.params)
        save_json(run / "run.json", meta)
        # Last: until progress.json names it, the snapshot is not committed and nothing reads it.
        save_json(run / "progress.json", {"epoch": epoch, "state": None, "snapshots": [epoch]})


def load_history(run_dir: Path) -> dict:
    """Per-epoch history of a run: ``epoch`` and per-seed ``loss``, ``train_acc``, ``test_acc``."""
    run = Path(run_dir)
    progress = run_progress(run)
    if progress["state"] is None:
        raise StoreError(f"{run} has no saved state yet; train it first.")
    return load_json(run / f"{progress['state']}.json")["history"]


def training_seconds(run_dir: Path) -> float:
    """Wall time spent training a run up to its committed state, summed over the processes that ran it."""
    return float(run_progress(Path(run_dir)).get("seconds", 0.0))


def save_state(
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


def run_meta(
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


def load_committed(run: Path, name: str, key: str, device: torch.device) -> tuple[dict[str, torch.Tensor], dict]:
    """The committed state ``name`` of the run with identity ``key`` (tensors and JSON)."""
    tensors, state = _load_state(run, name, device)
    if state["run_key"] != key:
        raise StoreError(f"{run / name} was written by a different run; delete {run}.")
    return tensors, state
