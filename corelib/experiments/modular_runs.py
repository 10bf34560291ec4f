"""The modular-addition runs of the paper's Figures 2 and 3, trained and analysed: what both
modular chapters (and the clock of core inflation) build on.

Three two-block transformers learn ``a + b mod p`` under weight decay and grok. At every
snapshot each model is analysed on the test set: ACE on the last-position output of the last
block (target = logits), the energy rank, the necessary and sufficient ranks (the smallest
ranks meeting the ablation criteria), core-only / core-removed accuracy, and a shift operator
``r_{c+1} = A r_c`` fitted to the class centroids in core coordinates, with its eigenvalues and rotational modes.
:func:`centroid_spectra` reads the frequencies straight from the centroids of the whole output.

Two arms share the first ``branch_epoch`` epochs: ``"wd"`` keeps weight decay for the whole run,
``"no_wd"`` is branched from the ``"wd"`` snapshot at ``branch_epoch`` and continues without
weight decay and with a fresh optimizer. Training and analysis are two steps, cached on disk per
snapshot (see :mod:`corelib.engine`): :func:`train_arm` trains (a longer horizon extends a run
instead of redoing it), then :func:`analyse_arm`, :func:`removal_curves` and
:func:`centroid_spectra` read its snapshots, and refuse with :class:`MissingSnapshots` where
there are none: an analysis, a plot or a record never trains. The chapters' own numbers are in
:mod:`corelib.experiments.modular_addition`
(Figure 2) and :mod:`corelib.experiments.core_inflation` (Figure 3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from .. import ace, operators
from .._checks import (
    check_decay,
    check_memory,
    check_seed,
    check_seeds,
    check_settings,
    check_split,
    is_number,
    is_whole,
)
from ..agreement import SEED_ERRORS
from ..claims import deviations
from ..engine import (
    Arm,
    PrefixData,
    StackConfig,
    load_history,
    load_snapshot,
    resolve_precision,
    snapshot_epochs,
    train_mixed,
    train_stack,
)
from ..interventions import ReadoutAccuracy, ablation_curve, accuracy, refine_rank
from ..masks import MASK_GENERATOR
from ..models import MODEL_REVISION, Transformer, TransformerConfig, default_device, resid_hook
from ..results import compute_once, params_key, run_dir
from ..tasks import modular
from ..tasks.modular import modular_addition_split
from .modular_records import ModularAnalysis, Snapshot, snapshots_from_json, snapshots_to_json

if TYPE_CHECKING:
    from .paper_scale_records import InflationAgreement

__all__ = [
    "ModularParams",
    "model_core",
    "ARMS",
    "LONG_RUN_SETTINGS",
    "train_arm",
    "train_arms",
    "train_together",
    "MissingSnapshots",
    "trained_snapshots",
    "analyse_model",
    "analyse_arm",
    "grokking_epoch",
    "model_grokking_epochs",
    "series",
    "epochs_of",
    "history",
    "history_until",
    "without_operators",
    "make_data",
    "training_collapses",
    "CollapseSummary",
    "collapse_summary",
    "centroid_spectra",
    "removal_curves",
    "first_rank_at_or_below",
    "mean_rank",
    "agreement_values",
    "settings_list",
    "NOT_AVAILABLE",
    "listed",
]


ARMS = ("wd", "no_wd")


# Settings of the long run of core inflation: they change nothing the modular chapter measures.
LONG_RUN_SETTINGS = (
    "long_epochs",
    "branch_epoch",
    "branch_weight_decay",
    "branch_anneal_epochs",
    "snapshot_every_late",
    "late_after",
)


@dataclass(frozen=True)
class ModularParams:
    """All settings of the experiment; defaults are the paper's."""

    p: int = 53
    train_fraction: float = 0.5
    split_seed: int = 42
    split_permutation: str = "numpy"  # the reference's RandomState(42).permutation (sweeps: "torch")
    seeds: tuple[int, ...] = (1031, 1032, 1033)
    epochs: int = 2000  # horizon of Figure 2
    long_epochs: int = 20000  # horizon of Figure 3 (core inflation)
    branch_epoch: int = 900
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 1.0
    branch_weight_decay: float = 0.0
    branch_anneal_epochs: int = 0  # 0: switch at once (the paper); else a linear ramp from the branch epoch
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    n_layers: int = 2
    norm: str = "post"
    dropout: float = 0.1  # the reference's encoder layer (PyTorch's default); the paper is silent
    snapshot_every: int = 100
    snapshot_every_late: int = 500
    late_after: int = 2000
    eval_every: int = 10  # test accuracy every this many epochs (and at every snapshot)
    precision: str = "fp32"  # "bf16": training matmuls in bf16 (StackOptimizer); "auto": bf16 where native
    n_jacobians: int = 64  # the reference code used 1000
    energy: float = 0.99
    jacobian_seed: int = 0
    holdout_fraction: float = 0.075
    holdout_seed: int = 0  # the held-out block starts at RandomState(holdout_seed).randint(p)
    ridge: float = 1e-3  # ridge of the held-out operator fit (the descriptive fit has none)
    grok_threshold: float = 0.99

    def __post_init__(self):
        object.__setattr__(self, "precision", resolve_precision(self.precision, default_device()))
        self._check_settings()
        self._check_values()
        self._check_model()
        self._check_branch()

    def _check_settings(self) -> None:
        """Seeds, epochs, rates, whole numbers, non-negative values and fractions, by kind."""
        object.__setattr__(self, "seeds", check_seeds("ModularParams", self.seeds))
        for name in ("split_seed", "jacobian_seed", "holdout_seed"):
            check_seed("ModularParams", name, getattr(self, name))
        check_settings(
            "ModularParams",
            epochs={"epochs": self.epochs, "long_epochs": self.long_epochs},
            rates={"lr": self.lr},
            integers={
                k: getattr(self, k)
                for k in (
                    "batch_size",
                    "d_model",
                    "n_heads",
                    "d_ff",
                    "n_layers",
                    "snapshot_every",
                    "snapshot_every_late",
                    "late_after",
                    "eval_every",
                    "n_jacobians",
                )
            },
            non_negative={
                "weight_decay": self.weight_decay,
                "branch_weight_decay": self.branch_weight_decay,
                "dropout": self.dropout,
                "ridge": self.ridge,
            },
            fractions={
                "energy": self.energy,
                "grok_threshold": self.grok_threshold,
            },
        )

    def _check_values(self) -> None:
        """Values with limits of their own: decays against the rate, dropout, the holdout share, the anneal."""
        check_split("ModularParams", self.train_fraction)
        check_decay("ModularParams", self.lr, self.weight_decay)
        shortest = min(self.epochs, self.long_epochs)
        if self.eval_every > shortest:
            raise ValueError(
                f"ModularParams: eval_every ({self.eval_every}) is longer than the shorter run ({shortest} epochs), "
                "so its test accuracy would be measured only at the snapshots; choose eval_every <= "
                f"{shortest} (the book: 10)."
            )
        check_decay("ModularParams", self.lr, self.branch_weight_decay, "branch_weight_decay")
        if not self.dropout < 1:
            raise ValueError(f"ModularParams: dropout must be below 1 (1 drops everything), got {self.dropout!r}.")
        if not is_number(self.holdout_fraction) or not 0 < self.holdout_fraction < 1:
            raise ValueError(
                "ModularParams: holdout_fraction is the share of the classes left out of the operator fit, in "
                f"(0, 1); got {self.holdout_fraction!r} (the book: 0.075)."
            )
        if int(self.branch_anneal_epochs) != self.branch_anneal_epochs or self.branch_anneal_epochs < 0:
            raise ValueError(
                f"ModularParams: branch_anneal_epochs must be a whole number >= 0 (0: switch at once), "
                f"got {self.branch_anneal_epochs!r}."
            )

    def _check_model(self) -> None:
        """The modulus and the model's shape."""
        if not is_whole(self.p) or self.p < 3:
            raise ValueError(f"ModularParams: p must be a whole number of at least 3 (a modulus with a sum to learn), "
                             f"got {self.p!r}.")  # fmt: skip
        check_memory("ModularParams", "p", self.p, 24.0 * self.p**2, "the p² input pairs")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModularParams: d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads}); "
                "each head gets d_model / n_heads dimensions."
            )

    def _check_branch(self) -> None:
        """The branch epoch: inside the long run, and one of its snapshots."""
        if not 0 < self.branch_epoch <= self.long_epochs:
            raise ValueError(f"branch_epoch ({self.branch_epoch}) must lie in (0, long_epochs={self.long_epochs}].")
        if not self.stack_config("wd", self.long_epochs).is_snapshot(self.branch_epoch):
            # Checked here, not when branching: that happens after hours of training the first arm.
            raise ValueError(
                f"branch_epoch ({self.branch_epoch}) is not a snapshot of the weight-decay run "
                f"(every {self.snapshot_every} epochs up to epoch {self.late_after}, then every "
                f"{self.snapshot_every_late}): choose one of those epochs."
            )

    @classmethod
    def from_namespace(cls, namespace: dict) -> ModularParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    @property
    def chance_level(self) -> float:
        """Accuracy a removed core must fall to: 2/p (twice chance), as in the paper."""
        return 2.0 / self.p

    def model_config(self) -> TransformerConfig:
        """The transformer for modulus ``p`` (:func:`corelib.tasks.modular.model_config`)."""
        return modular.model_config(self, self.p)

    def stack_config(self, arm: str, epochs: int) -> StackConfig:
        wd = self.weight_decay if arm == "wd" else self.branch_weight_decay
        knots = ()
        if arm != "wd" and self.branch_anneal_epochs:  # from the run's decay to the branch's, linearly
            end = self.branch_epoch + self.branch_anneal_epochs
            knots = ((self.branch_epoch, self.weight_decay), (end, self.branch_weight_decay))
        return StackConfig(
            decay_knots=knots,
            epochs=epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=wd,
            snapshot_every=self.snapshot_every,
            snapshot_every_late=self.snapshot_every_late,
            late_after=self.late_after,
            checkpoint_every=self.snapshot_every,
            eval_every=self.eval_every,
            precision=self.precision,
        )

    def training_identity(self) -> dict:
        """What determines the trained weights (not the horizons, not the analysis settings)."""
        keep = (
            "p",
            "train_fraction",
            "split_seed",
            "split_permutation",
            "seeds",
            "batch_size",
            "lr",
            "weight_decay",
            "d_model",
            "n_heads",
            "d_ff",
            "n_layers",
            "norm",
            "dropout",
            "snapshot_every",
            "snapshot_every_late",
            "late_after",
        )
        # "model" names the construction (torch encoder layer's initialisation, 64 positions).
        ident = {**{k: getattr(self, k) for k in keep}, "model": MODEL_REVISION}
        if self.precision != "fp32":  # left out at its default, so fp32 runs keep their keys
            ident["precision"] = self.precision
        return {**ident, "masks": MASK_GENERATOR} if self.dropout else ident

    def analysis_identity(self) -> dict:
        keep = ("n_jacobians", "energy", "jacobian_seed", "holdout_fraction", "holdout_seed", "ridge")
        # Markers of the analysis' method: ranks by linear scans, the reference's shift-operator fit.
        return {**{k: getattr(self, k) for k in keep}, "rank_search": "scan", "shift_fit": "reference"}


def make_data(params: ModularParams) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    (x_tr, y_tr), (x_te, y_te) = modular_addition_split(
        params.p, params.train_fraction, params.split_seed, params.split_permutation
    )
    return {"train": (x_tr, y_tr), "test": (x_te, y_te)}


def arm_dir(params: ModularParams, arm: str) -> Path:
    """The folder of ``arm`` ("wd" or "no_wd") inside the run folder of ``params``' training (made if new)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose one of {ARMS}.")
    root = run_dir("modular", params.training_identity())
    if arm == "wd":
        return root / "wd"
    ramp = f"_anneal{params.branch_anneal_epochs}" if params.branch_anneal_epochs else ""
    return root / f"branch_{params.branch_epoch}_wd{params.branch_weight_decay:g}{ramp}"


def train_arm(p: ModularParams, arm: str, epochs: int, *, progress: bool = True) -> Path:
    """Train (or extend, or reuse) one arm up to ``epochs``; returns its run folder."""
    data = make_data(p)
    train, test = (PrefixData.from_tokens(*data[k]) for k in ("train", "test"))
    start = None
    if arm == "no_wd":
        if epochs < p.branch_epoch:
            raise ValueError(f"the no-weight-decay arm starts at epoch {p.branch_epoch}; asked for {epochs}.")
        src = train_arm(p, "wd", p.branch_epoch, progress=progress)
        start = (src, p.branch_epoch)
    folder = arm_dir(p, arm)
    done = snapshot_epochs(folder)
    if not done or max(done) < epochs:
        train_stack(
            p.model_config(), p.stack_config(arm, epochs), p.seeds, train, test, folder, start=start, progress=progress
        )
    return folder


def train_arms(p: ModularParams, epochs: int, *, progress: bool = True) -> dict[str, Path]:
    """Train (or extend, or reuse) both arms up to ``epochs`` as one stack (:func:`train_together`):
    the weight-decay arm from where it stands, the branch joining it at ``p.branch_epoch``. Each
    arm's folder ends as :func:`train_arm` leaves it; returns the folders by arm."""
    if epochs < p.branch_epoch:
        raise ValueError(f"the no-weight-decay arm starts at epoch {p.branch_epoch}; asked for {epochs}.")
    folders = train_together([(p, arm, epochs) for arm in ARMS], progress=progress)
    return dict(zip(ARMS, folders))


def _data_identity(p: ModularParams) -> tuple:
    return p.p, p.train_fraction, p.split_seed, p.split_permutation


def train_together(jobs: Sequence[tuple[ModularParams, str, int]], *, progress: bool = True) -> list[Path]:
    """Train (or extend, or reuse) several arms ``(params, arm, epochs)`` of one model and data as
    one mixed stack (:func:`corelib.engine.train_mixed`); returns their folders, in order.

    Each arm has its own learning rate, weight decay, schedule and horizon, and its folder ends
    exactly as :func:`train_arm` would leave it (bit for bit where the matrix library computes
    each model alike in stacks of any size: on one CPU thread). Arms already trained that far are
    not touched. A branch (``"no_wd"``) joins at its ``branch_epoch``, from its weight-decay run:
    listed before it in ``jobs``, or trained to the branch first, alone.
    """
    jobs = list(jobs)
    if not jobs:
        raise ValueError("no arms to train; give (params, arm, epochs) triples.")
    first = jobs[0][0]
    for p, arm, _ in jobs[1:]:
        if p.model_config() != first.model_config() or _data_identity(p) != _data_identity(first):
            raise ValueError(
                f"the {arm!r} arm of {p} has another model or data than the first arm: train it in a call of its own."
            )
    arms, folders = [], []
    for p, arm, epochs in jobs:
        folder = arm_dir(p, arm)
        folders.append(folder)
        done = snapshot_epochs(folder)
        if done and max(done) >= epochs:
            continue
        start = None
        if arm == "no_wd":
            if epochs < p.branch_epoch:
                raise ValueError(f"the no-weight-decay arm starts at epoch {p.branch_epoch}; asked for {epochs}.")
            start = (arm_dir(p, "wd"), p.branch_epoch)
            listed = [a for a in arms if a.run_dir == start[0]]
            if listed and listed[0].cfg.epochs < p.branch_epoch:
                raise ValueError(
                    f"the branch of {folder.name} starts at epoch {p.branch_epoch}, after its weight-decay arm's "
                    f"horizon in this call ({listed[0].cfg.epochs}); train that arm at least to the branch."
                )
            if not listed:
                train_arm(p, "wd", p.branch_epoch, progress=progress)  # nothing to do once it is there
        arms.append(Arm(p.stack_config(arm, epochs), p.seeds, folder, start))
    if arms:
        data = make_data(first)
        train, test = (PrefixData.from_tokens(*data[k]) for k in ("train", "test"))
        train_mixed(first.model_config(), arms, train, test, progress=progress)
    return folders


@torch.no_grad()
def last_position_output(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    """Output of the last block at the last position, (N, D), via ``run_with_cache``."""
    name = resid_hook(model.cfg.n_layers - 1)
    _, cache = model.run_with_cache(x.to(next(model.parameters()).device), names_filter=name)
    return cache[name][:, -1]


def model_core(model: Transformer, test: tuple[torch.Tensor, torch.Tensor], params: ModularParams):
    """ACE of one model at full rank, its energy rank, and its accuracy under an intervention.

    Returns ``(h, full, r_energy, accuracy)``: the last-position outputs (N, D) in float64, the
    full-rank core, the energy rank, and ``accuracy(core, mode)`` on the test set, as the rank
    searches need it. The intervention is at the last block's output, at the last position,
    which is also the only one scored: everything before it is the same for every core, so
    ``accuracy`` keeps the outputs and runs only the unembedding on many ranks at once.
    """
    x, y = test
    layer = model.cfg.n_layers - 1
    h = last_position_output(model, x)
    jac = ace.jacobians(model.readout(layer), h, n_samples=params.n_jacobians, seed=params.jacobian_seed)
    hd = h.cpu().double()
    full = ace.extract(hd, jac, rank=h.shape[1])
    unembed = partial(model, start_at_layer=layer + 1)  # (..., D) -> logits: the model after the hook
    return hd, full, ace.energy_rank(full.singular_values, params.energy), ReadoutAccuracy(h, y[:, -1], unembed)


def analyse_model(
    model: Transformer, test: tuple[torch.Tensor, torch.Tensor], params: ModularParams
) -> ModularAnalysis:
    """Everything Figures 2 and 3 need about one model at one snapshot.

    Returns numbers and small arrays (:class:`~corelib.experiments.modular_records.ModularAnalysis`):
    test accuracy, energy / necessary / sufficient rank, the core dimension (the necessary rank:
    the energy rank refined by ablation), core-only and core-removed accuracy at that dimension,
    the shift-operator fit (descriptive R², held-out R²_h, operator, eigenvalues), the fraction of
    eigenvalues near the unit circle and the occupied rotational frequency bins.
    """
    x, y = test
    hd, full, r_energy, intervened = model_core(model, test, params)
    baseline = accuracy(model, x, y, score_positions="last")
    necessary, sufficient = refine_rank(
        full, intervened, baseline=baseline, chance_level=params.chance_level, start_rank=r_energy
    )
    dim = necessary if necessary is not None else r_energy
    core = full.truncate(dim)
    centroids = operators.class_centroids(core.coords(hd.numpy()), y[:, -1].numpy(), params.p)
    fit = operators.fit_shift_operator(centroids)
    held = operators.fit_shift_operator(
        centroids,
        ridge=params.ridge,
        holdout=operators.holdout_block(params.p, params.holdout_fraction, params.holdout_seed),
    )
    return ModularAnalysis(
        test_acc=baseline,
        energy_rank=r_energy,
        necessary_rank=necessary,
        sufficient_rank=sufficient,
        core_dim=dim,
        keep_acc=intervened(core, "keep"),
        remove_acc=intervened(core, "remove"),
        r2=fit.r2,
        r2_heldout=held.r2_heldout,
        unit_fraction=operators.unit_circle_fraction(fit.eigenvalues, params.p),
        modes=tuple(operators.rotational_modes(fit.eigenvalues, params.p).tolist()),
        eigenvalues=tuple(map(tuple, np.stack([fit.eigenvalues.real, fit.eigenvalues.imag], axis=1).tolist())),
        singular_values=tuple(full.singular_values.tolist()),
        operator=tuple(map(tuple, fit.A.tolist())),
    )


class MissingSnapshots(FileNotFoundError):
    """An analysis asked for snapshots that no training has made (the analyses never train)."""


def trained_snapshots(params: ModularParams, arm: str, epochs: int) -> tuple[Path, list[int]]:
    """An arm's run folder and its snapshot epochs up to ``epochs``, as :func:`train_arm` left them.

    Raises :class:`MissingSnapshots`, naming the call that makes them, when the arm has not been
    trained to ``epochs``: training and analysis are separate steps.
    """
    folder = arm_dir(params, arm)
    done = snapshot_epochs(folder)
    if not done or max(done) < epochs:
        reached = f"is trained to epoch {max(done)}" if done else "has no snapshot"
        raise MissingSnapshots(
            f"the {arm!r} arm of these settings {reached} ({folder}), and the analysis asks for epoch {epochs}: "
            f"train it first with `modular_runs.train_arm(params, {arm!r}, {epochs})` (the analyses never train)."
        )
    return folder, [e for e in done if e <= epochs]


def centroid_spectra(
    params: ModularParams, arm: str, epochs: int, *, share: float = 0.9, progress: bool = True
) -> dict[str, np.ndarray]:
    """Fourier content of each model's answer-class centroids at every snapshot of an arm.

    The centroids are those of the last block's whole last-position output (no core, no fitted
    operator), read with :func:`corelib.operators.cycle_spectrum`: how the representation's
    variance across answers c spreads over the frequencies k of the cycle. Reads the snapshots
    (:func:`train_arm` makes them; :class:`MissingSnapshots` if it has not reached ``epochs``);
    cheap, so not cached.

    Returns:
        ``epoch`` (E,), ``shares`` (E, models, p // 2) and ``count`` (E, models): the fewest
        frequencies holding ``share`` of the variance.
    """
    folder, wanted = trained_snapshots(params, arm, epochs)
    x, y = make_data(params)["test"]
    shares = []
    for e in tqdm(wanted, desc=f"centroid spectra {arm}", disable=not progress, leave=False):
        stack = load_snapshot(folder, e, default_device())
        shares.append(
            [
                operators.cycle_spectrum(
                    operators.class_centroids(
                        last_position_output(stack.model(i), x).cpu().double().numpy(), y[:, -1].numpy(), params.p
                    )
                )
                for i in range(len(stack))
            ]
        )
    shares = np.array(shares)
    count = np.array([[operators.frequency_count(s, share) for s in row] for row in shares])
    return {"epoch": np.array(wanted), "shares": shares, "count": count}


def removal_curves(params: ModularParams, arm: str, epoch: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """Core-removed and core-only test accuracy at every rank, for each model at one snapshot.

    What the rank searches of :func:`analyse_model` scan, computed for every rank 1..d_model:
    the necessary rank is where ``remove`` first falls to ``params.chance_level``, the sufficient rank
    where ``keep`` first reaches the baseline. Cached next to the snapshot's analysis; the snapshot
    is :func:`train_arm`'s (:class:`MissingSnapshots` without it).

    Returns:
        ``rank`` (d_model,), ``remove`` and ``keep`` (models, d_model), ``energy_rank`` (models,).
    """
    path = analysis_path(params, arm, epoch).with_name(f"removal_curves_{epoch:06d}.json")
    # The chapters' horizons are snapshots too.
    horizons = (params.epochs, params.long_epochs)
    if not any(params.stack_config(arm, horizon).is_snapshot(epoch) for horizon in horizons):
        raise ValueError(
            f"epoch {epoch} is not a snapshot (every {params.snapshot_every} epochs up to epoch "
            f"{params.late_after}, then every {params.snapshot_every_late}): choose one of those epochs."
        )
    if not path.exists():  # a kept curve is read without the weights; a missing one is refused before any file
        trained_snapshots(params, arm, epoch)

    def compute() -> dict:
        folder, _ = trained_snapshots(params, arm, epoch)
        stack = load_snapshot(folder, epoch, default_device())
        test = make_data(params)["test"]
        out = {"remove": [], "keep": [], "energy_rank": []}
        for i in tqdm(range(len(stack)), desc=f"removal curves {arm} {epoch}", disable=not progress, leave=False):
            _, full, r_energy, intervened = model_core(stack.model(i), test, params)
            for mode in ("remove", "keep"):
                out[mode].append(ablation_curve(full, intervened, mode).tolist())
            out["energy_rank"].append(r_energy)
        return out

    out = {k: np.array(v) for k, v in compute_once(path, compute).items()}
    out["rank"] = np.arange(1, out["remove"].shape[1] + 1)
    return out


def first_rank_at_or_below(curves: dict[str, np.ndarray], level: float) -> list[int | None]:
    """Per model: the first rank, at least the energy rank, whose removal leaves accuracy <= ``level``.

    The necessary rank of :func:`analyse_model` read off the curves of :func:`removal_curves` at a
    threshold of one's choosing: at ``level = p.chance_level`` it is the analysis' own necessary
    rank; a looser level separates the bulk of a core from a thin residue of the answer that
    lingers just above chance. ``None`` for a model whose curve never gets that low.
    """
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"level is an accuracy and must lie in [0, 1], got {level}.")
    out = []
    for row, r_energy in zip(curves["remove"], curves["energy_rank"]):
        hit = curves["rank"][(row <= level) & (curves["rank"] >= r_energy)]
        out.append(int(hit[0]) if hit.size else None)
    return out


def mean_rank(ranks: Sequence[int | None]) -> float:
    """Mean of per-model ranks; NaN if any model has none (a mean over the rest would flatter it)."""
    return float(np.mean([np.nan if r is None else r for r in ranks]))


def analysis_path(params: ModularParams, arm: str, epoch: int) -> Path:
    """Where the analysis of ``arm``'s snapshot at ``epoch`` is kept (keyed by the analysis settings)."""
    return arm_dir(params, arm) / f"analysis_{params_key(params.analysis_identity())}" / f"epoch_{epoch:06d}.json"


def _analysed_snapshots(params: ModularParams, arm: str, epochs: int) -> tuple[Path, list[int]]:
    """The arm's run folder and the epochs :func:`analyse_arm` reads: its trained snapshots up to
    ``epochs``; where they do not reach ``epochs``, those that training to ``epochs`` takes (from
    epoch 0 or the branch, on the schedule of :meth:`ModularParams.stack_config`), each of them
    cached or trained (else :class:`MissingSnapshots`, naming the call that trains them)."""
    folder = arm_dir(params, arm)
    done = snapshot_epochs(folder)
    if done and max(done) >= epochs:
        return folder, [e for e in done if e <= epochs]
    cfg = params.stack_config(arm, epochs)
    wanted = [e for e in range(0 if arm == "wd" else params.branch_epoch, epochs + 1) if cfg.is_snapshot(e)]
    if any(e not in done and not analysis_path(params, arm, e).exists() for e in wanted):
        trained_snapshots(params, arm, epochs)  # raises: the arm is not trained to epochs
    return folder, wanted


def analyse_arm(params: ModularParams, arm: str, epochs: int, *, progress: bool = True) -> list[Snapshot]:
    """Analyse every snapshot of an arm up to ``epochs`` (cached per snapshot); one record each.

    A record is a :class:`~corelib.experiments.modular_records.Snapshot`: the epoch and the
    :func:`analyse_model` of each seed, stored in its JSON form. The snapshots are those of
    :func:`train_arm`, called first. A cached analysis is read without its snapshot (a results
    folder may keep the analyses and not the weights); one that must be computed from a snapshot
    that was never trained raises :class:`MissingSnapshots` (the analysis never trains).
    """
    folder, wanted = _analysed_snapshots(params, arm, epochs)
    test = make_data(params)["test"]
    records = []
    device = default_device()
    for e in tqdm(wanted, desc=f"analyse {arm}", disable=not progress, leave=False):

        def compute(e: int = e) -> dict:
            stack = load_snapshot(folder, e, device)
            return Snapshot(e, tuple(analyse_model(stack.model(i), test, params) for i in range(len(stack)))).to_json()

        records.append(Snapshot.from_json(compute_once(analysis_path(params, arm, e), compute)))
    return records


def history(params: ModularParams, arm: str, until: int | None = None) -> dict:
    """Per-epoch loss and accuracies of an arm's seeds, up to epoch ``until`` (default: all).

    Read from the arm's latest checkpoint, which may lie beyond the horizon a chapter asked for
    when a longer run was trained before: ``until`` keeps the chapter to its own horizon.
    """
    hist = load_history(arm_dir(params, arm))
    return hist if until is None else history_until(hist, until)


def history_until(hist: dict, until: int) -> dict:
    """A :func:`history` cut at epoch ``until``."""
    n = sum(e <= until for e in hist["epoch"])
    return {k: list(v[:n]) for k, v in hist.items()}


def without_operators(records: Sequence[Snapshot | dict]) -> list[dict]:
    """The JSON form of snapshot records (:class:`Snapshot`, or their JSON form, checked) without
    the fitted operator matrices: large, so a record written for its numbers, or compared with
    one that does not keep them, leaves them out."""
    return snapshots_to_json(s.without_operators() for s in snapshots_from_json(records))


def training_collapses(hist: dict, threshold: float = 0.9) -> list[list[tuple[int, int]]]:
    """Per seed, the episodes in which a model that had fitted its training set lost it again.

    An episode is a maximal run of consecutive epochs whose training accuracy is below
    ``threshold``, after the epoch at which the seed first reached ``threshold``; it is returned as
    ``(first_epoch, last_epoch)``. Long AdamW runs with strong weight decay show such loss spikes:
    a snapshot taken inside one analyses a model that does not currently do the task.
    ``hist`` is :func:`history`'s output.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1]; got {threshold}.")
    epochs = np.asarray(hist["epoch"])
    acc = np.asarray(hist["train_acc"], dtype=float)
    if acc.ndim != 2 or len(acc) != len(epochs):
        raise ValueError(f"train_acc must be (epochs, seeds) matching {len(epochs)} epochs; got {acc.shape}.")
    out = []
    for seed_acc in acc.T:
        fitted = np.flatnonzero(seed_acc >= threshold)
        below = np.zeros(len(epochs), dtype=bool)
        if len(fitted):
            below[fitted[0] :] = seed_acc[fitted[0] :] < threshold
        # Episode boundaries: where "below" switches on or off.
        edges = np.flatnonzero(np.diff(np.concatenate([[0], below.astype(int), [0]])))
        out.append([(int(epochs[a]), int(epochs[b - 1])) for a, b in zip(edges[::2], edges[1::2])])
    return out


@dataclass(frozen=True)
class CollapseSummary:
    """The loss spikes of a window of epochs (:func:`collapse_summary`): ``per_model``, the mean
    number of collapse episodes per seed; ``percent``, the share of the seeds' epochs spent inside
    one; ``longest``, the longest episode in epochs."""

    per_model: float
    percent: float
    longest: int


def collapse_summary(hist: dict, start: int, end: int, threshold: float = 0.9) -> CollapseSummary:
    """How much of epochs ``start+1 .. end`` the models spent in collapses (:func:`training_collapses`).

    Counts the episodes that begin after ``start`` in ``hist`` (cropped to ``end``, e.g. with
    :func:`history`'s ``until``): ``per_model`` is their mean number per seed, ``percent`` the
    share of the seeds' epochs in that window spent inside one, ``longest`` the longest in epochs.
    """
    if end <= start:
        raise ValueError(f"end ({end}) must come after start ({start}).")
    per_seed = [[c for c in seed if c[0] > start] for seed in training_collapses(hist, threshold)]
    lengths = [b - a + 1 for seed in per_seed for a, b in seed]
    return CollapseSummary(
        per_model=len(lengths) / len(per_seed),
        percent=100.0 * sum(lengths) / (len(per_seed) * (end - start)),
        longest=max(lengths, default=0),
    )


def grokking_epoch(records: list[dict], threshold: float = 0.99) -> int | None:
    """First analysed epoch at which every model's test accuracy reaches ``threshold``."""
    for r in records:
        if all(m["test_acc"] >= threshold for m in r["models"]):
            return r["epoch"]
    return None


def series(records: list[dict], key: str) -> np.ndarray:
    """(epochs, seeds) array of one per-model quantity across records (``nan`` where None)."""
    return np.array([[np.nan if m[key] is None else m[key] for m in r["models"]] for r in records], dtype=float)


def epochs_of(records: list[dict]) -> np.ndarray:
    return np.array([r["epoch"] for r in records])


def model_grokking_epochs(records: list[dict], threshold: float = 0.99) -> list[int | None]:
    """Per model: the first analysed epoch at which its test accuracy reaches ``threshold``."""
    out = []
    for i in range(len(records[0]["models"])):
        hits = [r["epoch"] for r in records if r["models"][i]["test_acc"] >= threshold]
        out.append(hits[0] if hits else None)
    return out


# --------------------------------------------------------------------------- what the chapters quote
# Numbers, lists of numbers and short status words for the chapters to glue; every sentence
# around them is written in the chapters' markdown.

NOT_AVAILABLE = "n/a"  # glued where a value does not exist (e.g. no recorded run in this checkout)


def listed(values: Sequence) -> str:
    """Per-model numbers as one glued value, ``"600, 800, 800"`` (``none`` for a missing one)."""
    return ", ".join("none" if v is None else str(v) for v in values)


def agreement_values(agreement: InflationAgreement | None) -> dict[str, object]:
    """This build's snapshots beside the recorded run's (:func:`.paper_scale.inflation_agreement`),
    as glue values: ``rec_same_models`` ("yes": same seeds and settings, another horizon; "no";
    "n/a" without a record), ``rec_n_compared`` (snapshots both have), ``rec_n_differences``
    (analysed values that differ; the first: ``rec_first_difference``), ``rec_n_rank_differences``
    (those that are ranks, core dimensions or mode lists, the integers the claims rest on); at the
    level of the claims (:mod:`corelib.agreement`): ``rec_n_quantities`` (per-seed quantities at the
    shared snapshots), ``rec_n_moved`` (those that moved), ``rec_n_beyond`` (seed means moved beyond
    their envelope), ``rec_largest_z`` (largest change of a mean, in standard errors) and
    ``seed_errors`` (how many may move, :data:`corelib.agreement.SEED_ERRORS`)."""
    counts = ("rec_same_models", "rec_n_compared", "rec_n_differences", "rec_n_rank_differences")
    statistics = ("rec_n_quantities", "rec_n_moved", "rec_n_beyond", "rec_largest_z")
    if agreement is None:
        return {k: NOT_AVAILABLE for k in (*counts, *statistics)} | {
            "rec_first_difference": NOT_AVAILABLE,
            "seed_errors": SEED_ERRORS,
        }
    differences = agreement.differences
    fields = [re.search(r"\.models\[\d+\]\.(\w+)", d) for d in differences]
    ranks = [m for m in fields if m and (m[1].endswith("_rank") or m[1] in ("core_dim", "modes"))]
    result = agreement.agreement
    return {
        "rec_same_models": "yes" if agreement.comparable else "no",
        "rec_n_compared": sum(agreement.n_snapshots.values()),
        "rec_n_differences": len(differences),
        "rec_n_rank_differences": len(ranks),
        "rec_first_difference": differences[0] if differences else "none",
        "rec_n_quantities": NOT_AVAILABLE if result is None else len(result.quantities),
        "rec_n_moved": NOT_AVAILABLE if result is None else result.n_moved,
        "rec_n_beyond": NOT_AVAILABLE if result is None else len(result.beyond),
        "rec_largest_z": NOT_AVAILABLE if result is None else round(result.largest_z, 2),
        "seed_errors": SEED_ERRORS,
    }


def settings_list(params: ModularParams, ignore: Sequence[str] = ()) -> str:
    """The settings of ``params`` that differ from the paper's, ``"name: ours (paper: theirs); ..."``,
    or ``"none"`` (``ignore``: settings that change nothing the chapter measures)."""
    differ = deviations(params, ModularParams(), ignore=["eval_every", *ignore])
    return "; ".join(f"{k}: {v}" for k, v in differ.items()) or "none"
